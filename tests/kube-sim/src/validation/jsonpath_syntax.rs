//! The syntax check of client-go's JSONPath parser (`k8s.io/client-go/util/jsonpath`,
//! `Parse`), with its error messages: what the API server runs on a
//! ValidatingAdmissionPolicy's `status.typeChecking.expressionWarnings[].fieldRef`. Only
//! whether the template parses, and why not, is kept (no tree).

const EOF: char = '\u{FFFF}';

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    width: usize,
    /// Whether the node last appended to the current action is a recursive descent.
    last_recursive: bool,
}

/// `jsonpath.Parse(name, text)`: `Err` carries the parser's message.
pub(crate) fn parse(text: &str) -> Result<(), String> {
    Parser::new(text).parse_text()
}

/// `parseAction`: `text` parsed as one action.
fn parse_action(text: &str) -> Result<(), String> {
    parse(&format!("{{{text}}}"))
}

fn is_terminator(r: char) -> bool {
    matches!(
        r,
        ' ' | '\t' | '\r' | '\n' | EOF | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

fn is_alphanumeric(r: char) -> bool {
    r == '_' || (r != EOF && (r.is_alphabetic() || r.is_numeric()))
}

/// Go's `%#U`: `U+0023 '#'`, without the character when it is not printable.
fn go_unicode(r: char) -> String {
    let code = format!("U+{:04X}", u32::from(r));
    if r.is_control() {
        code
    } else {
        format!("{code} '{r}'")
    }
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Parser<'a> {
        Parser {
            input,
            pos: 0,
            start: 0,
            width: 0,
            last_recursive: false,
        }
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn consume_text(&mut self) -> &'a str {
        let value = &self.input[self.start..self.pos];
        self.start = self.pos;
        value
    }

    fn next(&mut self) -> char {
        match self.rest().chars().next() {
            None => {
                self.width = 0;
                EOF
            }
            Some(r) => {
                self.width = r.len_utf8();
                self.pos += self.width;
                r
            }
        }
    }

    fn peek(&mut self) -> char {
        let r = self.next();
        self.backup();
        r
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    /// The byte two before the position, as the quote and filter scanners look back.
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes()[self.pos - 2] == b'\\'
    }

    fn append(&mut self, recursive: bool) {
        self.last_recursive = recursive;
    }

    fn parse_text(&mut self) -> Result<(), String> {
        loop {
            if self.rest().starts_with('{') {
                self.consume_text();
                self.pos += 1;
                self.consume_text();
                self.last_recursive = false;
                return self.parse_inside_action();
            }
            if self.next() == EOF {
                return Ok(());
            }
        }
    }

    fn parse_inside_action(&mut self) -> Result<(), String> {
        loop {
            let rest = self.rest();
            if rest.starts_with('}') {
                self.pos += 1;
                self.consume_text();
                return self.parse_text();
            }
            if rest.starts_with("[?(") {
                return self.parse_filter();
            }
            if rest.starts_with("..") {
                return self.parse_recursive();
            }
            match self.next() {
                EOF | '\r' | '\n' => return Err("unclosed action".into()),
                ' ' | '@' | '$' => {
                    self.consume_text();
                }
                '[' => return self.parse_array(),
                r @ ('"' | '\'') => return self.parse_quote(r),
                '.' => return self.parse_field(),
                r if r == '+' || r == '-' || r.is_ascii_digit() => {
                    self.backup();
                    return self.parse_number();
                }
                r if is_alphanumeric(r) => {
                    self.backup();
                    return self.parse_identifier();
                }
                r => {
                    return Err(format!(
                        "unrecognized character in action: {}",
                        go_unicode(r)
                    ))
                }
            }
        }
    }

    fn parse_identifier(&mut self) -> Result<(), String> {
        while !is_terminator(self.next()) {}
        self.backup();
        self.consume_text();
        self.append(false);
        self.parse_inside_action()
    }

    fn parse_recursive(&mut self) -> Result<(), String> {
        if self.last_recursive {
            return Err("invalid multiple recursive descent".into());
        }
        self.pos += 2;
        self.consume_text();
        self.append(true);
        if is_alphanumeric(self.peek()) {
            return self.parse_field();
        }
        self.parse_inside_action()
    }

    fn parse_number(&mut self) -> Result<(), String> {
        if matches!(self.peek(), '+' | '-') {
            self.next();
        }
        loop {
            let r = self.next();
            if r != '.' && !r.is_ascii_digit() {
                self.backup();
                break;
            }
        }
        let value = self.consume_text();
        if !is_go_float(value) {
            return Err(format!("cannot parse number {value}"));
        }
        self.append(false);
        self.parse_inside_action()
    }

    fn parse_array(&mut self) -> Result<(), String> {
        loop {
            match self.next() {
                EOF | '\n' => return Err("unterminated array".into()),
                ']' => break,
                _ => {}
            }
        }
        let text = self.consume_text();
        let inner = &text[1..text.len() - 1];
        let inner = if inner == "*" { ":" } else { inner };
        let parts: Vec<&str> = inner.split(',').collect();
        if parts.len() > 1 {
            for part in parts {
                parse_action(&format!("[{}]", part.trim_matches(' ')))?;
            }
        } else if let Some(key) = inner
            .strip_prefix('\'')
            .and_then(|k| k.strip_suffix('\''))
            .filter(|k| !k.contains('\''))
        {
            parse_action(&format!(".{key}"))?;
        } else {
            check_slice(inner)?;
        }
        self.append(false);
        self.parse_inside_action()
    }

    fn parse_filter(&mut self) -> Result<(), String> {
        self.pos += 3;
        self.consume_text();
        let (mut begin, mut end, mut pair) = (false, false, EOF);
        loop {
            let r = self.next();
            match r {
                EOF | '\n' => return Err("unterminated filter".into()),
                '"' | '\'' => {
                    if !begin {
                        begin = true;
                        pair = r;
                        continue;
                    }
                    if !self.escaped() && r == pair {
                        end = true;
                    }
                }
                ')' if begin == end => break,
                _ => {}
            }
        }
        if self.next() != ']' {
            return Err("unclosed array expect ]".into());
        }
        let text = self.consume_text();
        let text = &text[..text.len() - 2];
        match split_comparison(text) {
            None => parse_action(text)?,
            Some((left, right)) => {
                parse_action(left)?;
                parse_action(right)?;
            }
        }
        self.append(false);
        self.parse_inside_action()
    }

    fn parse_quote(&mut self, end: char) -> Result<(), String> {
        loop {
            let r = self.next();
            if r == EOF || r == '\n' {
                return Err("unterminated quoted string".into());
            }
            if r == end && !self.escaped() {
                break;
            }
        }
        let value = self.consume_text();
        if !unquotes(value) {
            return Err(format!("unquote string {value} error invalid syntax"));
        }
        self.append(false);
        self.parse_inside_action()
    }

    fn parse_field(&mut self) -> Result<(), String> {
        self.consume_text();
        loop {
            let r = self.next();
            if r == '\\' {
                self.next();
            } else if is_terminator(r) {
                self.backup();
                break;
            }
        }
        self.consume_text();
        self.append(false);
        self.parse_inside_action()
    }
}

/// Whether Go's `strconv.Atoi` or `ParseFloat` takes a run of sign, digits and dots.
fn is_go_float(value: &str) -> bool {
    let unsigned = value.strip_prefix(['+', '-']).unwrap_or(value);
    let mut parts = unsigned.splitn(2, '.');
    let whole = parts.next().unwrap_or("");
    match parts.next() {
        None => !whole.is_empty(),
        Some(frac) => !frac.contains('.') && (!whole.is_empty() || !frac.is_empty()),
    }
}

/// The slice syntax `start:end:step` (`^(-?\d*)(:-?\d*)?(:-?\d*)?$`), each part an int.
fn check_slice(text: &str) -> Result<(), String> {
    let invalid = || format!("invalid array index {text}");
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() > 3 {
        return Err(invalid());
    }
    for part in &parts {
        let digits = part.strip_prefix('-').unwrap_or(part);
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
    }
    // An empty bound is unknown; a lone "-" or an overflow is no number.
    if let Some(part) = parts
        .iter()
        .find(|p| !p.is_empty() && p.parse::<i64>().is_err())
    {
        return Err(format!("array index {part} is not a number"));
    }
    Ok(())
}

/// The filter's `left op right` split (`^([^!<>=]+)([!<>=]+)(.+?)$`).
fn split_comparison(text: &str) -> Option<(&str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let op_start = text.find(is_op)?;
    if op_start == 0 {
        return None;
    }
    let after = &text[op_start..];
    let op_len = after.find(|c: char| !is_op(c)).unwrap_or(after.len());
    let right = &after[op_len..];
    // `.` does not match a newline in Go's regexp.
    if right.is_empty() || right.contains('\n') {
        return None;
    }
    Some((&text[..op_start], right))
}

/// Whether `UnquoteExtend` accepts a quoted string (Go's escapes).
fn unquotes(s: &str) -> bool {
    let bytes = s.as_bytes();
    if bytes.len() < 2 || bytes[0] != bytes[bytes.len() - 1] || !matches!(bytes[0], b'"' | b'\'') {
        return false;
    }
    let quote = bytes[0] as char;
    let mut chars = s[1..s.len() - 1].chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return false;
        }
        if c != '\\' {
            continue;
        }
        let hex = |n: usize, chars: &mut std::str::Chars<'_>| {
            (0..n).all(|_| chars.next().is_some_and(|h| h.is_ascii_hexdigit()))
        };
        let ok = match chars.next() {
            Some('a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '\\') => true,
            Some(q @ ('\'' | '"')) => q == quote,
            Some('x') => hex(2, &mut chars),
            Some('u') => hex(4, &mut chars),
            Some('U') => hex(8, &mut chars),
            Some(d @ '0'..='7') => {
                let rest: String = chars.by_ref().take(2).collect();
                rest.len() == 2 && rest.chars().all(|o| ('0'..='7').contains(&o)) && d <= '3'
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_refs_parse_as_client_go_parses_them() {
        let ok = [
            "spec.validations[0].expression",
            ".spec.matchConditions[2].expression",
            "spec.auditAnnotations[0].valueExpression",
            "$.items[*].metadata.name",
            "..name",
            "items[?(@.a==\"b\")].c",
            "items[1:3:-1]",
            "a['b.c']",
            "a[0,1]",
            "-1.5",
        ];
        for f in ok {
            assert_eq!(parse(&format!("{{{f}}}")), Ok(()), "{f}");
        }
        let bad = [
            ("spec.validations[0", "unterminated array"),
            ("spec.a #b", "unrecognized character in action: U+0023 '#'"),
            ("spec.a\nb", "unclosed action"),
            ("a[x]", "invalid array index x"),
            ("a[-]", "array index - is not a number"),
            ("a[1:2:3:4]", "invalid array index 1:2:3:4"),
            ("....a", "invalid multiple recursive descent"),
            ("1.2.3", "cannot parse number 1.2.3"),
            ("'abc", "unterminated quoted string"),
            ("items[?(@.a==1", "unterminated filter"),
            ("items[?(@.a==1)x", "unclosed array expect ]"),
            ("a[0,x]", "invalid array index x"),
        ];
        for (f, want) in bad {
            assert_eq!(parse(&format!("{{{f}}}")), Err(want.to_string()), "{f}");
        }
    }
}
