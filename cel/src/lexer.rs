//! The CEL lexer, following the token rules of cel-go's ANTLR grammar (`CEL.g4`) including how
//! ANTLR reports and skips characters no token can start with.

use crate::source::Location;

/// Token kinds, in the grammar's token-type order (the order ANTLR lists expected tokens in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Tok {
    Equals = 1,
    NotEquals,
    In,
    Less,
    LessEquals,
    GreaterEquals,
    Greater,
    LogicalAnd,
    LogicalOr,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Dot,
    Comma,
    Minus,
    Exclam,
    Question,
    Colon,
    Plus,
    Star,
    Slash,
    Percent,
    True,
    False,
    Null,
    NumFloat = 31,
    NumInt,
    NumUint,
    String,
    Bytes,
    Identifier,
    Eof,
}

impl Tok {
    /// The name ANTLR uses for a token type in "expecting ..." messages.
    pub(crate) fn display(self) -> &'static str {
        match self {
            Tok::Equals => "'=='",
            Tok::NotEquals => "'!='",
            Tok::In => "'in'",
            Tok::Less => "'<'",
            Tok::LessEquals => "'<='",
            Tok::GreaterEquals => "'>='",
            Tok::Greater => "'>'",
            Tok::LogicalAnd => "'&&'",
            Tok::LogicalOr => "'||'",
            Tok::LBracket => "'['",
            Tok::RBracket => "']'",
            Tok::LBrace => "'{'",
            Tok::RBrace => "'}'",
            Tok::LParen => "'('",
            Tok::RParen => "')'",
            Tok::Dot => "'.'",
            Tok::Comma => "','",
            Tok::Minus => "'-'",
            Tok::Exclam => "'!'",
            Tok::Question => "'?'",
            Tok::Colon => "':'",
            Tok::Plus => "'+'",
            Tok::Star => "'*'",
            Tok::Slash => "'/'",
            Tok::Percent => "'%'",
            Tok::True => "'true'",
            Tok::False => "'false'",
            Tok::Null => "'null'",
            Tok::NumFloat => "NUM_FLOAT",
            Tok::NumInt => "NUM_INT",
            Tok::NumUint => "NUM_UINT",
            Tok::String => "STRING",
            Tok::Bytes => "BYTES",
            Tok::Identifier => "IDENTIFIER",
            Tok::Eof => "<EOF>",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) kind: Tok,
    pub(crate) text: String,
    /// Offset (in code points) of the first character.
    pub(crate) start: usize,
    /// Line (1-based) and column (0-based) of the first character.
    pub(crate) line: i32,
    pub(crate) column: i32,
}

impl Token {
    pub(crate) fn location(&self) -> Location {
        Location::new(self.line, self.column)
    }
}

/// A character the lexer could not turn into a token (ANTLR's "token recognition error").
#[derive(Clone, Debug)]
pub(crate) struct LexError {
    pub(crate) location: Location,
    pub(crate) text: String,
    /// The characters skipped (offsets, end exclusive).
    pub(crate) skipped: std::ops::Range<usize>,
}

/// Outcome of running one token rule from a position: the longest accepted end (exclusive)
/// and the index of the character at which the rule could go no further.
struct Scan {
    accept: Option<usize>,
    dead_at: usize,
}

struct Lexer<'a> {
    s: &'a [char],
}

fn is_letter(c: char) -> bool {
    c.is_ascii_alphabetic()
}

fn is_digit(c: char) -> bool {
    c.is_ascii_digit()
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    fn digits(&self, mut i: usize) -> usize {
        while self.at(i).is_some_and(is_digit) {
            i += 1;
        }
        i
    }

    /// NUM_FLOAT, NUM_INT and NUM_UINT together (they share their prefixes).
    fn number(&self, p: usize) -> (Scan, Tok) {
        let mut best: Option<(usize, Tok)> = None;
        let mut dead = p;
        let take = |best: &mut Option<(usize, Tok)>, end: usize, tok: Tok| {
            if best.is_none_or(|(e, _)| end > e) {
                *best = Some((end, tok));
            }
        };
        // '0x' HEXDIGIT+ ('u'|'U')?
        if self.at(p) == Some('0') && self.at(p + 1) == Some('x') {
            let mut i = p + 2;
            while self.at(i).is_some_and(|c| c.is_ascii_hexdigit()) {
                i += 1;
            }
            if i > p + 2 {
                take(&mut best, i, Tok::NumInt);
                if matches!(self.at(i), Some('u' | 'U')) {
                    take(&mut best, i + 1, Tok::NumUint);
                    dead = dead.max(i + 1);
                } else {
                    dead = dead.max(i);
                }
            } else {
                dead = dead.max(i);
            }
        }
        if self.at(p).is_some_and(is_digit) {
            let i = self.digits(p);
            take(&mut best, i, Tok::NumInt);
            dead = dead.max(i);
            match self.at(i) {
                Some('u' | 'U') => {
                    take(&mut best, i + 1, Tok::NumUint);
                    dead = dead.max(i + 1);
                }
                Some('.') => {
                    let j = self.digits(i + 1);
                    if j > i + 1 {
                        let (end, d) = self.exponent(j);
                        take(&mut best, end, Tok::NumFloat);
                        dead = dead.max(d);
                    } else {
                        dead = dead.max(i + 1);
                    }
                }
                Some('e' | 'E') => {
                    let (end, d) = self.exponent(i);
                    if end > i {
                        take(&mut best, end, Tok::NumFloat);
                    }
                    dead = dead.max(d);
                }
                _ => {}
            }
        } else if self.at(p) == Some('.') && self.at(p + 1).is_some_and(is_digit) {
            let j = self.digits(p + 1);
            let (end, d) = self.exponent(j);
            take(&mut best, end, Tok::NumFloat);
            dead = dead.max(d);
        }
        let tok = best.map(|(_, t)| t).unwrap_or(Tok::NumInt);
        (
            Scan {
                accept: best.map(|(e, _)| e),
                dead_at: dead,
            },
            tok,
        )
    }

    /// An optional exponent at `i`: returns (end of the accepted text, where scanning died).
    fn exponent(&self, i: usize) -> (usize, usize) {
        if !matches!(self.at(i), Some('e' | 'E')) {
            return (i, i);
        }
        let mut j = i + 1;
        if matches!(self.at(j), Some('+' | '-')) {
            j += 1;
        }
        let k = self.digits(j);
        if k > j {
            (k, k)
        } else {
            (i, j)
        }
    }

    /// One escape sequence starting at the backslash at `i`: Some(end) or Err(dead index).
    fn escape(&self, i: usize) -> Result<usize, usize> {
        let c = self.at(i + 1).ok_or(i + 1)?;
        let hex = |from: usize, n: usize| -> Result<usize, usize> {
            for k in 0..n {
                if !self.at(from + k).is_some_and(|c| c.is_ascii_hexdigit()) {
                    return Err(from + k);
                }
            }
            Ok(from + n)
        };
        match c {
            'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '"' | '\'' | '\\' | '?' | '`' => Ok(i + 2),
            'x' | 'X' => hex(i + 2, 2),
            'u' => hex(i + 2, 4),
            'U' => hex(i + 2, 8),
            '0'..='3' => {
                for k in 0..2 {
                    if !self.at(i + 2 + k).is_some_and(|c| ('0'..='7').contains(&c)) {
                        return Err(i + 2 + k);
                    }
                }
                Ok(i + 4)
            }
            _ => Err(i + 1),
        }
    }

    /// STRING (without the bytes prefix) starting at `p`.
    fn string(&self, p: usize) -> Scan {
        let (raw, q) = match self.at(p) {
            Some('r' | 'R') => (true, p + 1),
            _ => (false, p),
        };
        let Some(quote) = self.at(q).filter(|c| *c == '"' || *c == '\'') else {
            return Scan {
                accept: None,
                dead_at: p,
            };
        };
        let triple = self.at(q + 1) == Some(quote) && self.at(q + 2) == Some(quote);
        let mut best = None;
        let mut dead;
        // The single-quoted form: also matches an empty string `""` when not triple.
        {
            let mut i = q + 1;
            loop {
                match self.at(i) {
                    None => {
                        dead = i;
                        break;
                    }
                    Some(c) if c == quote => {
                        best = Some(i + 1);
                        dead = i + 1;
                        break;
                    }
                    Some('\n' | '\r') => {
                        dead = i;
                        break;
                    }
                    Some('\\') if !raw => match self.escape(i) {
                        Ok(end) => i = end,
                        Err(d) => {
                            dead = d;
                            break;
                        }
                    },
                    Some(_) => i += 1,
                }
            }
        }
        if triple {
            // Shortest match up to the closing triple quote.
            let mut i = q + 3;
            loop {
                match self.at(i) {
                    None => {
                        dead = dead.max(i);
                        break;
                    }
                    Some(c)
                        if c == quote
                            && self.at(i + 1) == Some(quote)
                            && self.at(i + 2) == Some(quote) =>
                    {
                        best = Some(best.map_or(i + 3, |b: usize| b.max(i + 3)));
                        dead = dead.max(i + 3);
                        break;
                    }
                    Some('\\') if !raw => match self.escape(i) {
                        Ok(end) => i = end,
                        Err(d) => {
                            dead = dead.max(d);
                            break;
                        }
                    },
                    Some(_) => i += 1,
                }
            }
        }
        Scan {
            accept: best,
            dead_at: dead,
        }
    }

    fn identifier(&self, p: usize) -> Scan {
        match self.at(p) {
            Some(c) if is_letter(c) || c == '_' => {
                let mut i = p + 1;
                while self
                    .at(i)
                    .is_some_and(|c| is_letter(c) || is_digit(c) || c == '_')
                {
                    i += 1;
                }
                Scan {
                    accept: Some(i),
                    dead_at: i,
                }
            }
            _ => Scan {
                accept: None,
                dead_at: p,
            },
        }
    }

    /// Fixed-text tokens (operators, punctuation, keywords): the longest one matching at `p`.
    fn fixed(&self, p: usize) -> (Scan, Tok) {
        const FIXED: &[(&str, Tok)] = &[
            ("==", Tok::Equals),
            ("!=", Tok::NotEquals),
            ("in", Tok::In),
            ("<", Tok::Less),
            ("<=", Tok::LessEquals),
            (">=", Tok::GreaterEquals),
            (">", Tok::Greater),
            ("&&", Tok::LogicalAnd),
            ("||", Tok::LogicalOr),
            ("[", Tok::LBracket),
            ("]", Tok::RBracket),
            ("{", Tok::LBrace),
            ("}", Tok::RBrace),
            ("(", Tok::LParen),
            (")", Tok::RParen),
            (".", Tok::Dot),
            (",", Tok::Comma),
            ("-", Tok::Minus),
            ("!", Tok::Exclam),
            ("?", Tok::Question),
            (":", Tok::Colon),
            ("+", Tok::Plus),
            ("*", Tok::Star),
            ("/", Tok::Slash),
            ("%", Tok::Percent),
            ("true", Tok::True),
            ("false", Tok::False),
            ("null", Tok::Null),
        ];
        let mut best: Option<(usize, Tok)> = None;
        let mut dead = p;
        for (text, tok) in FIXED {
            let mut n = 0;
            for (k, ch) in text.chars().enumerate() {
                if self.at(p + k) == Some(ch) {
                    n += 1;
                } else {
                    break;
                }
            }
            if n == text.chars().count() {
                if best.is_none_or(|(e, _)| p + n > e) {
                    best = Some((p + n, *tok));
                }
                dead = dead.max(p + n);
            } else if n > 0 {
                dead = dead.max(p + n);
            }
        }
        let tok = best.map(|(_, t)| t).unwrap_or(Tok::Eof);
        (
            Scan {
                accept: best.map(|(e, _)| e),
                dead_at: dead,
            },
            tok,
        )
    }

    /// The next token (or skipped text) starting at `p`.
    fn next(&self, p: usize) -> Step {
        let c = self.s[p];
        if matches!(c, '\t' | ' ' | '\r' | '\n' | '\u{000C}') {
            let mut i = p;
            while self
                .at(i)
                .is_some_and(|c| matches!(c, '\t' | ' ' | '\r' | '\n' | '\u{000C}'))
            {
                i += 1;
            }
            return Step::Skip(i);
        }
        if c == '/' && self.at(p + 1) == Some('/') {
            let mut i = p;
            while self.at(i).is_some_and(|c| c != '\n') {
                i += 1;
            }
            return Step::Skip(i);
        }
        // Every rule is tried; the longest accepted text wins, the earlier rule on ties.
        let mut candidates: Vec<(Scan, Tok)> = vec![self.fixed(p), self.number(p)];
        candidates.push((self.string(p), Tok::String));
        if matches!(c, 'b' | 'B') {
            let s = self.string(p + 1);
            candidates.push((s, Tok::Bytes));
        }
        candidates.push((self.identifier(p), Tok::Identifier));
        let mut best: Option<(usize, Tok)> = None;
        let mut dead = p;
        for (scan, tok) in candidates {
            dead = dead.max(scan.dead_at);
            if let Some(end) = scan.accept {
                if best.is_none_or(|(e, _)| end > e) {
                    best = Some((end, tok));
                }
            }
        }
        match best {
            Some((end, tok)) => Step::Token(tok, end),
            None => Step::Error(dead),
        }
    }
}

enum Step {
    Skip(usize),
    Token(Tok, usize),
    /// No token: the index of the character at which every rule died.
    Error(usize),
}

/// The tokens of an expression (ending with EOF) and the characters that could not be lexed.
pub(crate) fn lex(s: &[char]) -> (Vec<Token>, Vec<LexError>) {
    let lx = Lexer { s };
    let mut tokens = Vec::new();
    let mut errors = Vec::new();
    let mut p = 0;
    let mut line = 1i32;
    let mut col = 0i32;
    let advance = |from: usize, to: usize, line: &mut i32, col: &mut i32| {
        for &c in &s[from..to] {
            if c == '\n' {
                *line += 1;
                *col = 0;
            } else {
                *col += 1;
            }
        }
    };
    while p < s.len() {
        match lx.next(p) {
            Step::Skip(end) => {
                advance(p, end, &mut line, &mut col);
                p = end;
            }
            Step::Token(kind, end) => {
                tokens.push(Token {
                    kind,
                    text: s[p..end].iter().collect(),
                    start: p,
                    line,
                    column: col,
                });
                advance(p, end, &mut line, &mut col);
                p = end;
            }
            Step::Error(dead) => {
                let stop = dead.min(s.len() - 1);
                let text: String = s[p..=stop].iter().collect();
                let end = if dead < s.len() { dead + 1 } else { s.len() };
                errors.push(LexError {
                    location: Location::new(line, col),
                    text,
                    skipped: p..end,
                });
                advance(p, end, &mut line, &mut col);
                p = end;
            }
        }
    }
    tokens.push(Token {
        kind: Tok::Eof,
        text: "<EOF>".into(),
        start: s.len(),
        line,
        column: col,
    });
    (tokens, errors)
}

/// How ANTLR shows text in error messages: newlines, carriage returns and tabs escaped.
pub(crate) fn error_display(text: &str) -> String {
    text.replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Tok, String)> {
        let chars: Vec<char> = src.chars().collect();
        let (toks, errs) = lex(&chars);
        assert!(errs.is_empty(), "{src}: {errs:?}");
        toks.into_iter().map(|t| (t.kind, t.text)).collect()
    }

    fn errors(src: &str) -> Vec<(i32, i32, String)> {
        let chars: Vec<char> = src.chars().collect();
        let (_, errs) = lex(&chars);
        errs.into_iter()
            .map(|e| (e.location.line, e.location.column, e.text))
            .collect()
    }

    #[test]
    fn tokens() {
        use Tok::*;
        let cases: &[(&str, &[(Tok, &str)])] = &[
            (
                "1 1u 0x1F 0xAu 1.5 1e3 .5e-2 2.",
                &[
                    (NumInt, "1"),
                    (NumUint, "1u"),
                    (NumInt, "0x1F"),
                    (NumUint, "0xAu"),
                    (NumFloat, "1.5"),
                    (NumFloat, "1e3"),
                    (NumFloat, ".5e-2"),
                    (NumInt, "2"),
                    (Dot, "."),
                ],
            ),
            (
                "in inx true truex null",
                &[
                    (In, "in"),
                    (Identifier, "inx"),
                    (True, "true"),
                    (Identifier, "truex"),
                    (Null, "null"),
                ],
            ),
            (
                "a<=b>=c!=d==e&&f||g",
                &[
                    (Identifier, "a"),
                    (LessEquals, "<="),
                    (Identifier, "b"),
                    (GreaterEquals, ">="),
                    (Identifier, "c"),
                    (NotEquals, "!="),
                    (Identifier, "d"),
                    (Equals, "=="),
                    (Identifier, "e"),
                    (LogicalAnd, "&&"),
                    (Identifier, "f"),
                    (LogicalOr, "||"),
                    (Identifier, "g"),
                ],
            ),
            (
                r#""a\"b" 'c' r"\d" b"x" B'y' br'z' """x"y""" '''p'''"#,
                &[
                    (String, r#""a\"b""#),
                    (String, "'c'"),
                    (String, r#"r"\d""#),
                    (Bytes, "b\"x\""),
                    (Bytes, "B'y'"),
                    (Bytes, "br'z'"),
                    (String, "\"\"\"x\"y\"\"\""),
                    (String, "'''p'''"),
                ],
            ),
            (
                "a // comment\n.b",
                &[(Identifier, "a"), (Dot, "."), (Identifier, "b")],
            ),
            ("\"\"", &[(String, "\"\"")]),
        ];
        for (src, want) in cases {
            let mut got = kinds(src);
            assert_eq!(got.pop().map(|t| t.0), Some(Eof));
            let want: Vec<(Tok, std::string::String)> =
                want.iter().map(|(k, t)| (*k, t.to_string())).collect();
            assert_eq!(got, want, "{src}");
        }
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn recognition_errors_as_antlr() {
        let cases: &[(&str, &[(i32, i32, &str)])] = &[
            ("a | b", &[(1, 2, "| ")]),
            ("1 + $", &[(1, 4, "$")]),
            ("*@a", &[(1, 1, "@")]),
            (r#""\xFh""#, &[(1, 0, r#""\xFh"#), (1, 5, "\"")]),
            ("'😁' in.😁", &[(1, 7, "😁")]),
            ("\"abc", &[(1, 0, "\"abc")]),
            ("'a\nb'", &[(1, 0, "'a\n"), (2, 1, "'")]),
        ];
        for (src, want) in cases {
            let want: Vec<(i32, i32, String)> = want
                .iter()
                .map(|(l, c, t)| (*l, *c, t.to_string()))
                .collect();
            assert_eq!(errors(src), want, "{src}");
        }
        assert_eq!(error_display("'a\n"), "'a\\n");
    }
}
