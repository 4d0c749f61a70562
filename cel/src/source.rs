//! The expression text as cel-go sees it: a sequence of code points with the offsets at which
//! each line ends, and the two ways cel-go turns an offset back into a line and column.

/// A line (1-based) and a column (0-based, in code points), or "no location" (`-1`, `-1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub(crate) line: i32,
    pub(crate) column: i32,
}

impl Location {
    pub(crate) const NONE: Location = Location {
        line: -1,
        column: -1,
    };

    pub(crate) fn new(line: i32, column: i32) -> Location {
        Location { line, column }
    }
}

/// The source text of one expression (cel-go's `common.Source` for `<input>`).
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) chars: Vec<char>,
    /// For each line, the offset just past its terminating newline (cel-go's `LineOffsets`).
    line_offsets: Vec<i32>,
}

impl Source {
    pub(crate) fn new(text: &str) -> Source {
        let chars: Vec<char> = text.chars().collect();
        let mut line_offsets = Vec::new();
        let mut offset = 0i32;
        for line in text.split('\n') {
            offset += line.chars().count() as i32 + 1;
            line_offsets.push(offset);
        }
        Source {
            chars,
            line_offsets,
        }
    }

    pub(crate) fn description(&self) -> &'static str {
        "<input>"
    }

    fn line_start(&self, line: i32) -> Option<i32> {
        if line == 1 {
            return Some(0);
        }
        if line > 1 && line as usize <= self.line_offsets.len() {
            return Some(self.line_offsets[line as usize - 2]);
        }
        None
    }

    /// The location of an offset as the source computes it (used for parser errors).
    pub(crate) fn offset_location(&self, offset: i32) -> Location {
        let mut line = 1i32;
        for &lo in &self.line_offsets {
            if lo > offset {
                break;
            }
            line += 1;
        }
        let start = if line == 1 {
            0
        } else {
            self.line_offsets[line as usize - 2]
        };
        Location::new(line, offset - start)
    }

    /// The location of an offset as the checker and the validators compute it: an offset at the
    /// very start of a line counts as the end of the previous one (cel-go's `locationByID`).
    pub(crate) fn checker_location(&self, offset: Option<i32>) -> Location {
        let Some(offset) = offset else {
            return Location::NONE;
        };
        let mut line = 1;
        let mut col = offset;
        for &lo in &self.line_offsets {
            if lo < offset {
                line += 1;
                col = offset - lo;
            } else {
                break;
            }
        }
        Location::new(line, col)
    }

    /// The text of a line, without its newline.
    pub(crate) fn snippet(&self, line: i32) -> Option<String> {
        let start = self.line_start(line)?;
        if self.chars.is_empty() {
            return None;
        }
        let end = match self.line_start(line + 1) {
            Some(next) => next - 1,
            None => self.chars.len() as i32,
        };
        let (s, e) = (start.max(0) as usize, (end.max(start)) as usize);
        let e = e.min(self.chars.len());
        Some(self.chars[s.min(e)..e].iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_locations() {
        let src = Source::new("a &&\nb");
        assert_eq!(src.offset_location(5), Location::new(2, 0));
        // The checker's arithmetic puts the first column of line 2 at the end of line 1.
        assert_eq!(src.checker_location(Some(5)), Location::new(1, 5));
        assert_eq!(src.checker_location(Some(6)), Location::new(2, 1));
        assert_eq!(src.checker_location(None), Location::NONE);
        assert_eq!(src.snippet(1).as_deref(), Some("a &&"));
        assert_eq!(src.snippet(2).as_deref(), Some("b"));
        assert_eq!(src.snippet(3), None);
        assert_eq!(Source::new("").snippet(1), None);
    }
}
