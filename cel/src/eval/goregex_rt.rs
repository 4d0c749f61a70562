//! Go's RE2 dialect on the `regex` crate: the Perl classes `\d`, `\w`, `\s` and word
//! boundaries are ASCII-only in Go (Unicode in the `regex` crate), and `\Q...\E` quotes
//! literal text (which the `regex` crate lacks); patterns are rewritten accordingly.

use super::EvalError;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
const SPACE: &str = "\\t\\n\\f\\r ";

/// Compiles a Go pattern, with `prefix` before the `regex` crate's reason on failure.
pub(super) fn compile(pattern: &str, prefix: &str) -> Result<regex::Regex, EvalError> {
    regex::Regex::new(&translate(pattern)).map_err(|e| EvalError::new(format!("{prefix}{e}")))
}

/// Rewrites a Go pattern into the `regex` crate's dialect with the same meaning.
pub(super) fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut class_start = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                let e = chars[i + 1];
                i += 2;
                if e == 'Q' {
                    let rest: String = chars[i..].iter().collect();
                    let (quoted, after) = match rest.find("\\E") {
                        Some(end) => (rest[..end].to_string(), end + 2),
                        None => (rest.clone(), rest.len()),
                    };
                    for q in quoted.chars() {
                        out.push_str(&regex::escape(&q.to_string()));
                    }
                    i += rest[..after].chars().count();
                    continue;
                }
                let class = match e {
                    'd' => Some((DIGIT, false)),
                    'D' => Some((DIGIT, true)),
                    'w' => Some((WORD, false)),
                    'W' => Some((WORD, true)),
                    's' => Some((SPACE, false)),
                    'S' => Some((SPACE, true)),
                    _ => None,
                };
                match (class, in_class) {
                    (Some((set, false)), true) => out.push_str(set),
                    (Some((set, negated)), _) => {
                        out.push_str(if negated { "[^" } else { "[" });
                        out.push_str(set);
                        out.push(']');
                    }
                    (None, false) if e == 'b' || e == 'B' => {
                        out.push_str("(?-u:\\");
                        out.push(e);
                        out.push(')');
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                class_start = i;
                continue;
            }
            '[' if chars.get(i + 1) == Some(&':') => {
                // A POSIX class `[:alpha:]`: copied up to its `:]`.
                let rest: String = chars[i..].iter().collect();
                let len = rest.find(":]").map_or(1, |end| end + 2);
                out.push_str(&rest[..len]);
                i += rest[..len].chars().count();
                continue;
            }
            '[' => out.push_str("\\["),
            ']' if in_class && i != class_start => in_class = false,
            ']' if in_class => {
                // A `]` first in a class is literal in Go.
                out.push_str("\\]");
                i += 1;
                continue;
            }
            '&' | '~' | '-' if in_class && chars.get(i + 1) == Some(&c) => {
                // The regex crate reserves `&&`, `~~` and `--` in classes for set operations.
                out.push('\\');
                out.push(c);
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{compile, translate};

    #[test]
    fn go_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            (r"^\d+$", "123", true),
            (r"^\d+$", "١٢٣", false),
            (r"^\w+$", "héllo", false),
            (r"^\w+$", "hello_1", true),
            (r"^\s$", "\u{a0}", false),
            (r"^[\d\s]+$", "1 2", true),
            (r"^[^\d]+$", "abc", true),
            (r"^\D+$", "é", true),
            (r"\bfoo\b", "a foo b", true),
            (r"a\Bb", "ab", true),
            (r"a\Bb", "a b", false),
            (r"^\Qa.b\E$", "a.b", true),
            (r"^\Qa.b\E$", "axb", false),
            (r"^[]a]+$", "]a", true),
            (r"^[[:alpha:]]+$", "abc", true),
            (r"^[a&&b]+$", "a&b", true),
            (r"^.$", "é", true),
        ];
        for (pattern, text, want) in cases {
            let re = compile(pattern, "").unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(
                re.is_match(text),
                *want,
                "{pattern} on {text:?} ({})",
                translate(pattern)
            );
        }
    }
}
