//! Syntax errors as ANTLR reports them, and ANTLR's recovery: single-token deletion and
//! insertion, error recovery mode (no report until a token matches again), and resynchronising
//! on a token an enclosing construct waits for.

use super::{has, set, set_display, Abort, Parser, Rule, TokSet, MAX_RECURSION_DEPTH, R};
use crate::issues::Issue;
use crate::lexer::{error_display, Tok, Token};

/// Tokens any expression may be followed by (binary operators, `?`, end of input).
const BASE_FOLLOW: TokSet = set(&[
    Tok::Eof,
    Tok::Equals,
    Tok::NotEquals,
    Tok::In,
    Tok::Less,
    Tok::LessEquals,
    Tok::GreaterEquals,
    Tok::Greater,
    Tok::LogicalAnd,
    Tok::LogicalOr,
    Tok::Question,
    Tok::Plus,
    Tok::Minus,
    Tok::Star,
    Tok::Slash,
    Tok::Percent,
]);

impl Parser<'_> {
    pub(super) fn tok_display(t: &Token) -> String {
        format!("'{}'", error_display(&t.text))
    }

    /// Reports a syntax error unless already recovering from one.
    pub(super) fn syntax_error(&mut self, at: &Token, msg: String) {
        if self.recovering {
            return;
        }
        self.recovering = true;
        self.syntax.push(Issue {
            location: at.location(),
            message: format!("Syntax error: {msg}"),
        });
    }

    /// A sync point (the start of a block): the current token must be in `expected`. An
    /// extra token followed by an expected one is reported and dropped.
    pub(super) fn sync(&mut self, expected: TokSet) -> R<()> {
        if has(expected, self.la(1)) {
            return Ok(());
        }
        let t = self.cur().clone();
        let shown = Self::tok_display(&t);
        if has(expected, self.la(2)) {
            self.syntax_error(
                &t,
                format!(
                    "extraneous input {shown} expecting {}",
                    set_display(expected)
                ),
            );
            self.skip();
            self.recovering = false;
            return Ok(());
        }
        self.syntax_error(
            &t,
            format!(
                "mismatched input {shown} expecting {}",
                set_display(expected)
            ),
        );
        Err(Abort::Mismatch)
    }

    /// Matches one token, with ANTLR's single-token deletion and insertion (`follow_if_missing`:
    /// the tokens that may come right after the expected one).
    pub(super) fn expect(&mut self, want: Tok, follow_if_missing: TokSet) -> R<Token> {
        if self.la(1) == want {
            return Ok(self.bump());
        }
        let t = self.cur().clone();
        let shown = Self::tok_display(&t);
        let expected = set_display(set(&[want]));
        if self.la(2) == want {
            self.syntax_error(&t, format!("extraneous input {shown} expecting {expected}"));
            self.skip();
            return Ok(self.bump());
        }
        if has(follow_if_missing, t.kind) {
            self.syntax_error(&t, format!("missing {expected} at {shown}"));
            let mut conjured = t.clone();
            conjured.kind = want;
            return Ok(conjured);
        }
        self.syntax_error(&t, format!("mismatched input {shown} expecting {expected}"));
        Err(Abort::Mismatch)
    }

    /// A decision no alternative of which fits: ANTLR's "no viable alternative", quoting the
    /// tokens from the decision's start to the offending one.
    pub(super) fn no_viable(&mut self, start: usize, offending: usize) -> Abort {
        let from = self.tok(start).start;
        let off = self.tok(offending).clone();
        let to = if off.kind == Tok::Eof {
            off.start
        } else {
            off.start + off.text.chars().count()
        };
        // The text of the tokens (whitespace included, characters the lexer skipped excluded).
        let text: String = (from.min(to)..to)
            .filter(|i| !self.skipped.iter().any(|r| r.contains(i)))
            .map(|i| self.src.chars[i])
            .collect();
        let chars: Vec<char> = text.chars().collect();
        let rest: String = chars.iter().skip(1).collect();
        // cel-go rewrites a keyword after a dot into a clearer message.
        let msg = if chars.len() > 1 && matches!(rest.as_str(), "true" | "false" | "null") {
            format!("mismatched input '{rest}' expecting IDENTIFIER")
        } else {
            format!("no viable alternative at input '{}'", error_display(&text))
        };
        self.syntax_error(&off, msg);
        Abort::Mismatch
    }

    /// Skips tokens until one an enclosing construct waits for (ANTLR's `recover`).
    fn recover(&mut self) {
        if self.last_error_pos == Some(self.pos) && self.la(1) != Tok::Eof {
            self.skip();
        }
        self.last_error_pos = Some(self.pos);
        let wanted = self.follow.iter().fold(BASE_FOLLOW, |a, s| a | s);
        while self.la(1) != Tok::Eof && !has(wanted, self.la(1)) {
            self.skip();
        }
    }

    /// Runs a grammar rule: counts its nesting (ANTLR's recursion limit) and, as each ANTLR
    /// rule does, recovers from a syntax error inside it, standing an error node for it.
    pub(super) fn rule(
        &mut self,
        rule: Rule,
        body: impl FnOnce(&mut Self) -> R<super::PE>,
    ) -> R<super::PE> {
        let saved_depth = self.depth;
        let saved_follow = self.follow.len();
        let d = &mut self.depth[rule as usize];
        *d += 1;
        if *d > MAX_RECURSION_DEPTH {
            self.internal = Some(format!(
                "expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
            ));
            return Err(Abort::Fatal);
        }
        let r = body(self);
        self.depth = saved_depth;
        self.follow.truncate(saved_follow);
        match r {
            Err(Abort::Mismatch) => {
                self.recover();
                Ok(self.error_node())
            }
            other => other,
        }
    }

    /// A sub-rule (argument, element or entry lists) that recovers on its own.
    pub(super) fn inner<T>(&mut self, body: impl FnOnce(&mut Self) -> R<T>, fallback: T) -> R<T> {
        let saved_follow = self.follow.len();
        let r = body(self);
        self.follow.truncate(saved_follow);
        match r {
            Err(Abort::Mismatch) => {
                self.recover();
                Ok(fallback)
            }
            other => other,
        }
    }
}
