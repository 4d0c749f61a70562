//! Errors with their locations, rendered as cel-go renders `Issues.String()`.

use std::fmt;
use std::sync::Arc;

use crate::source::{Location, Source};

/// Errors beyond this many are counted but not shown (cel-go's `maxErrorsToReport`).
const MAX_ERRORS_TO_REPORT: usize = 100;
/// Lines longer than this (in bytes) are not quoted under the message.
const MAX_SNIPPET_LENGTH: usize = 16384;

#[derive(Debug, Clone)]
pub(crate) struct Issue {
    pub(crate) location: Location,
    pub(crate) message: String,
}

/// Every problem found while compiling one expression, with the expression's text.
///
/// `Display` gives exactly cel-go's `Issues.String()`: one `ERROR: <input>:L:C: message` block
/// per error (with the source line and a caret under the column), sorted by location, joined
/// with newlines.
#[derive(Debug, Clone)]
pub struct Issues {
    source: Arc<Source>,
    errors: Vec<Issue>,
    count: usize,
}

impl Issues {
    pub(crate) fn new(source: Arc<Source>) -> Issues {
        Issues {
            source,
            errors: Vec::new(),
            count: 0,
        }
    }

    pub(crate) fn report(&mut self, location: Location, message: impl Into<String>) {
        self.count += 1;
        if self.count > MAX_ERRORS_TO_REPORT {
            return;
        }
        self.errors.push(Issue {
            location,
            message: message.into(),
        });
    }

    /// Reports at the location of an expression id, computed as the checker does.
    pub(crate) fn report_at_offset(&mut self, offset: Option<i32>, message: impl Into<String>) {
        let loc = self.source.checker_location(offset);
        self.report(loc, message);
    }

    /// Whether no error was reported.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// How many errors were reported.
    pub fn len(&self) -> usize {
        self.count
    }

    /// The messages (without locations), in the order they are displayed.
    pub fn messages(&self) -> Vec<String> {
        self.sorted()
            .into_iter()
            .map(|e| e.message.clone())
            .collect()
    }

    fn sorted(&self) -> Vec<&Issue> {
        let mut errs: Vec<&Issue> = self.errors.iter().collect();
        errs.sort_by(|a, b| {
            (a.location.line, a.location.column).cmp(&(b.location.line, b.location.column))
        });
        errs
    }

    fn display_one(&self, err: &Issue) -> String {
        let loc = err.location;
        let mut out = format!(
            "ERROR: {}:{}:{}: {}",
            self.source.description(),
            loc.line,
            loc.column + 1,
            err.message
        );
        if let Some(snippet) = self.source.snippet(loc.line) {
            if snippet.len() <= MAX_SNIPPET_LENGTH {
                let snippet = snippet.replace('\t', " ");
                out.push_str("\n | ");
                out.push_str(&snippet);
                out.push_str("\n | ");
                let mut chars = snippet.chars();
                let mut i = 0;
                let mut rest = chars.clone();
                while i < loc.column {
                    let Some(c) = chars.next() else { break };
                    out.push(if c.len_utf8() > 1 { '\u{FF0E}' } else { '.' });
                    rest = chars.clone();
                    i += 1;
                }
                let wide = rest.next().is_some_and(|c| c.len_utf8() > 1);
                out.push(if wide { '\u{FF3E}' } else { '^' });
            }
        }
        out
    }
}

impl fmt::Display for Issues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .sorted()
            .into_iter()
            .map(|e| self.display_one(e))
            .collect();
        if self.count > MAX_ERRORS_TO_REPORT {
            parts.push(format!(
                "{} more errors were truncated",
                self.count - MAX_ERRORS_TO_REPORT
            ));
        }
        f.write_str(&parts.join("\n"))
    }
}

impl std::error::Error for Issues {}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(text: &str, errs: &[(i32, i32, &str)]) -> String {
        let mut iss = Issues::new(Arc::new(Source::new(text)));
        for (l, c, m) in errs {
            iss.report(Location::new(*l, *c), *m);
        }
        iss.to_string()
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn display_matches_cel_go() {
        let cases: &[(&str, &[(i32, i32, &str)], &str)] = &[
            ("a + b", &[(1, 4, "undeclared")], "ERROR: <input>:1:5: undeclared\n | a + b\n | ....^"),
            // Sorted by location, stable for equal locations.
            (
                "ab",
                &[(1, 1, "second"), (1, 0, "first"), (1, 1, "third")],
                "ERROR: <input>:1:1: first\n | ab\n | ^\nERROR: <input>:1:2: second\n | ab\n | .^\nERROR: <input>:1:2: third\n | ab\n | .^",
            ),
            // No location: no snippet.
            ("x", &[(-1, -1, "internal")], "ERROR: <input>:-1:0: internal"),
            // Wide characters are marked with wide dots and carets; tabs become spaces.
            ("'😁'\tx", &[(1, 1, "m")], "ERROR: <input>:1:2: m\n | '😁' x\n | .＾"),
            ("'😁' x", &[(1, 4, "m")], "ERROR: <input>:1:5: m\n | '😁' x\n | .．..^"),
            // A column past the end of the line.
            ("a &&\nb", &[(1, 5, "m")], "ERROR: <input>:1:6: m\n | a &&\n | ....^"),
        ];
        for (text, errs, want) in cases {
            assert_eq!(issues(text, errs), *want, "{text}");
        }
    }

    #[test]
    fn truncates_after_one_hundred() {
        let mut iss = Issues::new(Arc::new(Source::new("x")));
        for _ in 0..102 {
            iss.report(Location::NONE, "e");
        }
        let s = iss.to_string();
        assert!(s.ends_with("\n2 more errors were truncated"), "{s}");
        assert_eq!(s.matches("ERROR:").count(), 100);
    }
}
