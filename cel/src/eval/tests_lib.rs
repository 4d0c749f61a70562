//! Table tests of the standard functions and the extension libraries.

use super::tests::table;

#[test]
fn standard_functions() {
    table(&[
        ("size('héllo')", "5"),
        ("'héllo'.size()", "5"),
        ("size(b'ab')", "2"),
        ("size([1, 2])", "2"),
        ("size(object.spec.labels)", "2"),
        ("'hello'.contains('ell')", "true"),
        ("'hello'.startsWith('he') && 'hello'.endsWith('lo')", "true"),
        ("'abc123'.matches('^[a-z]+[0-9]+$')", "true"),
        ("matches('abc', 'd')", "false"),
        ("object.spec.name.matches('w.b')", "true"),
    ]);
}

#[test]
fn strings_extension() {
    table(&[
        ("'héllo'.charAt(1)", "\"é\""),
        ("'hello'.charAt(5)", "\"\""),
        ("'hello'.charAt(6)", "error: index out of range: 6"),
        ("'hello'.indexOf('l')", "2"),
        ("'hello'.indexOf('l', 3)", "3"),
        ("'hello'.indexOf('z')", "-1"),
        ("'hello'.indexOf('', 2)", "2"),
        ("'hello'.indexOf('l', 9)", "error: index out of range: 9"),
        ("'hello'.lastIndexOf('l')", "3"),
        ("'hello'.lastIndexOf('l', 2)", "2"),
        ("'hello'.lastIndexOf('')", "5"),
        ("'HeLLo'.lowerAscii()", "\"hello\""),
        ("'hello'.upperAscii()", "\"HELLO\""),
        ("'aaa'.replace('a', 'b')", "\"bbb\""),
        ("'aaa'.replace('a', 'b', 2)", "\"bba\""),
        ("'a,b,c'.split(',')", "[\"a\", \"b\", \"c\"]"),
        ("'a,b,c'.split(',', 2)", "[\"a\", \"b,c\"]"),
        ("'a,b,c'.split(',', 0)", "[]"),
        ("'abc'.split('')", "[\"a\", \"b\", \"c\"]"),
        ("'hello'.substring(1)", "\"ello\""),
        ("'hello'.substring(1, 3)", "\"el\""),
        (
            "'hello'.substring(3, 1)",
            "error: invalid substring range. start: 3, end: 1",
        ),
        ("'hello'.substring(1, 9)", "error: index out of range: 9"),
        ("'  hi \\n'.trim()", "\"hi\""),
        ("['a', 'b'].join()", "\"ab\""),
        ("['a', 'b'].join('-')", "\"a-b\""),
        ("strings.quote('a\"b\\n')", "\"\\\"a\\\\\\\"b\\\\n\\\"\""),
        ("''.lastIndexOf('a')", "error: index out of range: -1"),
        (
            "'hello'.lastIndexOf('l', 5)",
            "error: index out of range: 5",
        ),
        ("'hello'.indexOf('l', 5)", "error: index out of range: 5"),
        ("'hello'.indexOf('', 9)", "9"),
        ("'hello'.indexOf('lo', 3)", "3"),
        ("'hello'.lastIndexOf('he', 4)", "0"),
    ]);
}

#[test]
fn lists_sets_and_regex_libraries() {
    table(&[
        ("[1, 2, 2, 3].isSorted()", "true"),
        ("[3, 1].isSorted()", "false"),
        ("['a', 'b'].isSorted()", "true"),
        ("[1, 2, 3].sum()", "6"),
        ("[1.5, 2.5].sum()", "4"),
        ("[9223372036854775807, 1].sum()", "error: integer overflow"),
        ("[duration('1s'), duration('2s')].sum()", "duration(\"3s\")"),
        ("[3, 1, 2].min()", "1"),
        ("[3, 1, 2].max()", "3"),
        ("dyn([]).min()", "error: min called on empty list"),
        ("[1, 2, 1].indexOf(1)", "0"),
        ("[1, 2, 1].lastIndexOf(1)", "2"),
        ("[1, 2].indexOf(5)", "-1"),
        ("sets.contains([1, 2, 3], [3, 1])", "true"),
        ("sets.contains([1, 2], [4])", "false"),
        ("sets.contains(dyn([1]), [1.0])", "true"),
        ("sets.equivalent([1, 2], [2, 1, 1])", "true"),
        ("sets.equivalent([1, 2], [1])", "false"),
        ("sets.intersects([1, 2], [2, 5])", "true"),
        ("sets.intersects([1], [])", "false"),
        ("'abc 123 def 456'.find('[0-9]+')", "\"123\""),
        ("'abc'.find('[0-9]+')", "\"\""),
        ("'a1b22c333'.findAll('[0-9]+')", "[\"1\", \"22\", \"333\"]"),
        ("'a1b22c333'.findAll('[0-9]+', 2)", "[\"1\", \"22\"]"),
    ]);
}

#[test]
fn url_library() {
    table(&[
        ("url('https://user@example.com:8443/a%20b/c?x=1&x=2&y=z#frag').getScheme()", "\"https\""),
        ("url('https://user@example.com:8443/a%20b/c?x=1').getHost()", "\"example.com:8443\""),
        ("url('https://example.com:8443/').getHostname()", "\"example.com\""),
        ("url('https://example.com:8443/').getPort()", "\"8443\""),
        ("url('https://example.com/').getPort()", "\"\""),
        ("url('https://[::1]:80/').getHostname()", "\"::1\""),
        ("url('https://example.com/a%20b/c').getEscapedPath()", "\"/a%20b/c\""),
        ("url('https://example.com/?x=1&x=2&y=a+b').getQuery()", "{\"x\": [\"1\", \"2\"], \"y\": [\"a b\"]}"),
        ("url('/absolute/path').getEscapedPath()", "\"/absolute/path\""),
        ("isURL('https://example.com')", "true"),
        ("isURL('relative/path')", "false"),
        ("isURL('mailto:someone@example.com')", "true"),
        ("url('mailto:someone@example.com').getEscapedPath()", "\"\""),
        ("url('https://example.com/a b').getEscapedPath()", "\"/a%20b\""),
        ("url('https://example.com/a%2Fb').getEscapedPath()", "\"/a%2Fb\""),
        ("isURL('https://example.com/%zz')", "false"),
        ("isURL('https://exa mple.com/')", "false"),
        ("isURL('https://example.com:80a/')", "false"),
        ("url('https://example.com:/').getPort()", "\"\""),
        ("url('//host/path').getHost()", "\"host\""),
        ("url('///path').getEscapedPath()", "\"///path\""),
        ("url('https://EXAMPLE.com').getHost()", "\"EXAMPLE.com\""),
        ("url('HTTPS://example.com').getScheme()", "\"https\""),
        ("url('relative')", "error: URL parse error during conversion from string: parse \"relative\": invalid URI for request"),
    ]);
}

#[test]
fn quantity_library() {
    table(&[
        ("quantity('1Gi').isGreaterThan(quantity('1G'))", "true"),
        ("quantity('500m').isLessThan(quantity('1'))", "true"),
        ("quantity('1000m').compareTo(quantity('1'))", "0"),
        ("quantity('2').compareTo(quantity('1'))", "1"),
        ("sign(quantity('-3'))", "-1"),
        ("quantity('1k').asInteger()", "1000"),
        ("quantity('1.5').isInteger()", "false"),
        ("quantity('1000m').isInteger()", "false"),
        ("quantity('0e2000000000').isInteger()", "true"),
        ("quantity('1e2000000000').add(quantity('1n')).isInteger()", "false"),
        ("quantity('2k').isInteger()", "true"),
        ("quantity('1Gi').asInteger()", "1073741824"),
        ("quantity('1.5Gi').isInteger()", "false"),
        ("quantity('1.5Gi').asApproximateFloat() == 1610612736.0", "true"),
        ("quantity('0.1').asApproximateFloat()", "0.1"),
        ("quantity('1500m').sub(quantity('500m')).isInteger()", "false"),
        ("quantity('1k').add(quantity('1')).asInteger()", "1001"),
        ("quantity('9223372036854775807').add(1).isInteger()", "false"),
        ("quantity('9223372036854775807').add(1).compareTo(quantity('9223372036854775808'))", "0"),
        ("quantity('1.5').asInteger()", "error: cannot convert value to integer"),
        ("quantity('1.5').asApproximateFloat()", "1.5"),
        ("quantity('1').add(quantity('500m')).asApproximateFloat()", "1.5"),
        ("quantity('1').add(2).asInteger()", "3"),
        ("sign(quantity('1').sub(quantity('2')))", "-1"),
        ("quantity('3').sub(1).asInteger()", "2"),
        ("quantity('1Gi') == quantity('1073741824')", "true"),
        ("isQuantity('1Gi')", "true"),
        ("isQuantity('1 Gi')", "false"),
        ("quantity('abc')", "error: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ]);
}

#[test]
fn string_format() {
    table(&[
        ("'%s and %d'.format(['str', 42])", "\"str and 42\""),
        ("'100%% %s'.format([true])", "\"100% true\""),
        ("'%s'.format([64.2])", "\"64.2\""),
        ("'%s'.format([1000000.0])", "\"1e+06\""),
        ("'%s'.format([type(1)])", "\"int\""),
        ("'%s'.format([null])", "\"null\""),
        ("'%s'.format([b'abc'])", "\"abc\""),
        ("'%s'.format([timestamp('2023-02-03T23:31:20+00:00')])", "\"2023-02-03T23:31:20Z\""),
        ("'%s'.format([duration('1h45m47s')])", "\"6347s\""),
        ("'%s'.format([[1, 2]])", "\"[1, 2]\""),
        ("'%s'.format([['a', 'b']])", "\"[\\\"a\\\", \\\"b\\\"]\""),
        ("'%s'.format([[1.5]])", "\"[1.500000]\""),
        ("'%s'.format([[duration('1s')]])", "\"[duration(\\\"1s\\\")]\""),
        ("'%s'.format([{'b': 1, 'a': 2}])", "\"{\\\"a\\\":2, \\\"b\\\":1}\""),
        ("'%b %b'.format([5, true])", "\"101 1\""),
        ("'%x %X'.format([26, 26])", "\"1a 1A\""),
        ("'%x'.format(['hi'])", "\"6869\""),
        ("'%x'.format([-26])", "\"-1a\""),
        ("'%o'.format([30])", "\"36\""),
        ("'%d'.format([1.5])", "error: error during formatting: decimal clause can only be used on integers, was given double"),
        ("'%d %d'.format([1])", "error: index 1 out of range"),
        ("'%'.format([1])", "error: unexpected end of string"),
        ("'%q'.format([1])", "error: could not parse formatting clause: unrecognized formatting clause \"q\""),
        ("'%.'.format([1])", "error: could not parse formatting clause: error while parsing precision: could not find end of precision specifier"),
        ("'%.3f'.format([1.5])", "error: error during formatting: the locale-aware %f and %e clauses are not supported by rkcm-cel"),
    ]);
}
