//! Whether Go's `regexp.Compile` (RE2 syntax with Perl flags, Go 1.21) accepts a pattern:
//! what cel-go's `matches()` literal validator asks. Only syntax is checked; where Go's rules
//! are not reproduced (Unicode class names, program size limits) patterns are accepted, so
//! this never rejects a pattern Go accepts.

/// Go's maximum nesting depth of a regular expression.
const MAX_NESTING: usize = 1000;
/// Go's maximum repeat count.
const MAX_REPEAT: u32 = 1000;

struct P<'a> {
    s: &'a [char],
    i: usize,
    names: Vec<String>,
}

type Res = Result<(), ()>;

pub(crate) fn is_valid(pattern: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    let mut p = P {
        s: &chars,
        i: 0,
        names: Vec::new(),
    };
    p.alternation(0).is_ok() && p.i == chars.len()
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl P<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    /// A sequence of alternatives up to an unmatched `)` (left for the caller) or the end.
    fn alternation(&mut self, depth: usize) -> Res {
        if depth > MAX_NESTING {
            return Err(());
        }
        // Whether the last item can take a repetition, and whether it was one.
        let mut operand = false;
        let mut last_repeat = false;
        while let Some(c) = self.peek() {
            match c {
                ')' => {
                    if depth == 0 {
                        return Err(()); // unexpected )
                    }
                    return Ok(());
                }
                '|' => {
                    self.i += 1;
                    operand = false;
                    last_repeat = false;
                }
                '*' | '+' | '?' => {
                    if !operand || last_repeat {
                        return Err(()); // missing argument / invalid nested repetition
                    }
                    self.i += 1;
                    if self.peek() == Some('?') {
                        self.i += 1;
                    }
                    last_repeat = true;
                }
                '{' => match self.repeat_count()? {
                    Some(end) => {
                        if !operand || last_repeat {
                            return Err(());
                        }
                        self.i = end;
                        if self.peek() == Some('?') {
                            self.i += 1;
                        }
                        last_repeat = true;
                    }
                    None => {
                        self.i += 1;
                        operand = true;
                        last_repeat = false;
                    }
                },
                '(' => {
                    operand |= self.group(depth)?;
                    last_repeat = false;
                }
                '[' => {
                    self.class()?;
                    operand = true;
                    last_repeat = false;
                }
                '\\' => {
                    // `\Q...\E` is a literal string (possibly empty).
                    if self.at(1) == Some('Q') {
                        self.i += 2;
                        let start = self.i;
                        while self.peek().is_some()
                            && !(self.peek() == Some('\\') && self.at(1) == Some('E'))
                        {
                            self.i += 1;
                        }
                        let empty = self.i == start;
                        if self.peek().is_some() {
                            self.i += 2;
                        }
                        operand = !empty || operand;
                    } else {
                        self.escape(false)?;
                        operand = true;
                    }
                    last_repeat = false;
                }
                _ => {
                    self.i += 1;
                    operand = true;
                    last_repeat = false;
                }
            }
        }
        Ok(())
    }

    /// `{n}`, `{n,}`, `{n,m}` at the current position: Some(end) if it is a repeat (checking
    /// the counts), None if the brace is a literal.
    fn repeat_count(&self) -> Result<Option<usize>, ()> {
        let mut j = self.i + 1;
        let num = |j: &mut usize| -> Option<u64> {
            let start = *j;
            while self.s.get(*j).is_some_and(char::is_ascii_digit) {
                *j += 1;
            }
            if *j == start {
                return None;
            }
            let text: String = self.s[start..*j].iter().collect();
            Some(text.parse::<u64>().unwrap_or(u64::MAX))
        };
        let Some(min) = num(&mut j) else {
            return Ok(None);
        };
        let mut max = Some(min);
        if self.s.get(j) == Some(&',') {
            j += 1;
            max = if self.s.get(j) == Some(&'}') {
                None
            } else {
                num(&mut j).map(Some).unwrap_or(Some(u64::MAX))
            };
            if max == Some(u64::MAX) && self.s.get(j) != Some(&'}') {
                return Ok(None);
            }
        }
        if self.s.get(j) != Some(&'}') {
            return Ok(None);
        }
        let too_big = |n: u64| n > u64::from(MAX_REPEAT);
        if too_big(min) || max.is_some_and(|m| too_big(m) || m < min) {
            return Err(()); // invalid repeat count
        }
        Ok(Some(j + 1))
    }

    /// A group (true) or a flags-only `(?flags)` (false: nothing to repeat).
    fn group(&mut self, depth: usize) -> Result<bool, ()> {
        self.i += 1; // (
        if self.peek() == Some('?') {
            if self.at(1) == Some('P') && self.at(2) == Some('<') {
                self.i += 3;
                let start = self.i;
                while self.peek().is_some_and(|c| c != '>') {
                    self.i += 1;
                }
                if self.peek() != Some('>') {
                    return Err(()); // invalid named capture
                }
                let name: String = self.s[start..self.i].iter().collect();
                if name.is_empty() || !name.chars().all(is_word) || self.names.contains(&name) {
                    return Err(());
                }
                self.names.push(name);
                self.i += 1;
            } else {
                self.i += 1;
                if self.flags()? {
                    return Ok(false);
                }
            }
        }
        self.alternation(depth + 1)?;
        if self.peek() != Some(')') {
            return Err(()); // missing closing )
        }
        self.i += 1;
        Ok(true)
    }

    /// Perl flags after `(?`: Ok(true) for `(?flags)`, Ok(false) for `(?flags:`.
    fn flags(&mut self) -> Result<bool, ()> {
        let mut negated = false;
        let mut saw_flag = false;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                'i' | 'm' | 's' | 'U' => saw_flag = true,
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' => {
                    if negated && !saw_flag {
                        return Err(());
                    }
                    return Ok(c == ')');
                }
                _ => return Err(()),
            }
        }
        Err(())
    }

    /// An escape outside (`in_class` false) or inside a character class.
    fn escape(&mut self, in_class: bool) -> Res {
        self.i += 1; // backslash
        let Some(c) = self.peek() else { return Err(()) };
        self.i += 1;
        match c {
            '1'..='7' if !self.peek().is_some_and(|d| ('0'..='7').contains(&d)) => Err(()),
            '0'..='7' => {
                for _ in 0..2 {
                    if self.peek().is_some_and(|d| ('0'..='7').contains(&d)) {
                        self.i += 1;
                    }
                }
                Ok(())
            }
            'x' => self.hex_escape(),
            'a' | 'f' | 'n' | 'r' | 't' | 'v' | 'd' | 'D' | 's' | 'S' | 'w' | 'W' => Ok(()),
            'A' | 'z' | 'b' | 'B' if !in_class => Ok(()),
            'p' | 'P' => self.unicode_class(),
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok(()),
            _ => Err(()),
        }
    }

    fn hex_escape(&mut self) -> Res {
        if self.peek() == Some('{') {
            self.i += 1;
            let start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                self.i += 1;
            }
            let digits: String = self.s[start..self.i].iter().collect();
            if digits.is_empty() || self.peek() != Some('}') {
                return Err(());
            }
            self.i += 1;
            return match u32::from_str_radix(&digits, 16) {
                Ok(v) if v <= 0x10FFFF => Ok(()),
                _ => Err(()),
            };
        }
        for _ in 0..2 {
            if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                return Err(());
            }
            self.i += 1;
        }
        Ok(())
    }

    /// `\pL` or `\p{Name}`: the name's shape only (unknown names are accepted).
    fn unicode_class(&mut self) -> Res {
        match self.peek() {
            Some('{') => {
                let close = self.s[self.i..].iter().position(|c| *c == '}').ok_or(())?;
                let name: String = self.s[self.i + 1..self.i + close].iter().collect();
                let name = name.strip_prefix('^').unwrap_or(&name);
                if name.is_empty() {
                    return Err(());
                }
                self.i += close + 1;
                Ok(())
            }
            Some(_) => {
                self.i += 1;
                Ok(())
            }
            None => Err(()),
        }
    }

    /// A character class starting at `[`.
    fn class(&mut self) -> Res {
        self.i += 1;
        if self.peek() == Some('^') {
            self.i += 1;
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek() else { return Err(()) }; // missing closing ]
            if c == ']' && !first {
                self.i += 1;
                return Ok(());
            }
            first = false;
            if c == '[' && self.at(1) == Some(':') {
                if let Some(end) = self.posix_class()? {
                    self.i = end;
                    continue;
                }
            }
            if c == '\\'
                && matches!(
                    self.at(1),
                    Some('d' | 'D' | 's' | 'S' | 'w' | 'W' | 'p' | 'P')
                )
            {
                self.escape(true)?;
                continue;
            }
            let lo = self.class_char()?;
            if self.peek() == Some('-') && self.at(1).is_some_and(|n| n != ']') {
                self.i += 1;
                let hi = self.class_char()?;
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    if hi < lo {
                        return Err(()); // invalid character class range
                    }
                }
            }
        }
    }

    /// One class member character: Some(value) when known (escapes give None).
    fn class_char(&mut self) -> Result<Option<char>, ()> {
        match self.peek() {
            None => Err(()),
            Some('\\') => {
                let start = self.i;
                self.escape(true)?;
                let text: Vec<char> = self.s[start..self.i].to_vec();
                Ok(match text.as_slice() {
                    ['\\', c] if c.is_ascii_punctuation() => Some(*c),
                    _ => None,
                })
            }
            Some(c) => {
                self.i += 1;
                Ok(Some(c))
            }
        }
    }

    /// `[:name:]` inside a class: Some(end) when well formed, None when the `[` is a literal.
    fn posix_class(&self) -> Result<Option<usize>, ()> {
        let rest = &self.s[self.i + 2..];
        let Some(pos) = rest.windows(2).position(|w| w == [':', ']']) else {
            return Ok(None);
        };
        let name: String = rest[..pos].iter().collect();
        let name = name.strip_prefix('^').unwrap_or(&name);
        const NAMES: &[&str] = &[
            "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print",
            "punct", "space", "upper", "word", "xdigit",
        ];
        if !NAMES.contains(&name) {
            return Err(());
        }
        Ok(Some(self.i + 2 + pos + 2))
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn accepts_what_go_accepts() {
        for p in [
            "",
            "a",
            "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "a*?",
            "a??",
            "a{2}",
            "a{2,}",
            "a{2,5}?",
            "a{",
            "a{,2}",
            "x{1000}",
            "(a|b)*",
            "(?i)abc",
            "(?i:a)",
            "(?)",
            "(?-i:a)",
            "(?P<name>a)",
            "[]a]",
            "[^]a]",
            "[a-]",
            "[-a]",
            "[[:alpha:]]",
            "[[:^digit:]x]",
            "\\d+\\.\\d+",
            "\\pL",
            "\\p{Greek}",
            "\\P{^Lu}",
            "\\x41",
            "\\x{10FFFF}",
            "\\Qa.b\\E",
            "\\Q*",
            "\\0",
            "\\123",
            "^*",
            "\\b+",
            "[\\d-z]",
            "a|",
            "()",
            "(|)",
            "[a\\]]",
            ".*\\.example\\.com$",
            "[\\[\\]]",
            "(?s).",
            "a{2}?",
            "a(?i)*",
        ] {
            assert!(is_valid(p), "{p}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for p in [
            "(",
            ")",
            "a)",
            "[a",
            "[]",
            "*",
            "+a",
            "a**",
            "a*+",
            "a*??",
            "a{2}*",
            "a*{2}",
            "{2}",
            "a|*",
            "(*)",
            "x{1001}",
            "x{2,1}",
            "[z-a]",
            "[[:foo:]]",
            "\\",
            "a\\",
            "\\8",
            "\\1",
            "\\C",
            "\\Z",
            "\\e",
            "\\x4",
            "\\x{110000}",
            "(?P<>a)",
            "(?P<a-b>a)",
            "(?P<n>a)(?P<n>b)",
            "(?P=n)",
            "(?<n>a)",
            "(?=a)",
            "(?!a)",
            "(?-)",
            "(?i-)",
            "(?x)",
            "[\\b]",
            "\\p{}",
            "(?i)*",
        ] {
            assert!(!is_valid(p), "{p}");
        }
    }
}
