//! A recursive-descent parser for cel-go's grammar that builds the same tree as cel-go's
//! ANTLR parser and visitor: the same node positions (the operator token for operators, `.` for
//! selections, `(` for calls, `[` for indexing and lists, `{` for maps and messages), the same
//! macro expansions and the same visitor errors. Syntax errors use ANTLR's wording; see
//! [`crate`] for which ones match exactly.

use std::sync::Arc;

mod primary;
mod recovery;

use crate::ast::{Expr, ExprKind, Literal, ParsedExpr};
use crate::issues::{Issue, Issues};
use crate::lexer::{error_display, lex, Tok, Token};
use crate::macros::{self, Expansion, MacroIds};
use crate::source::{Location, Source};

/// cel-go's default limits.
const MAX_RECURSION_DEPTH: u32 = 250;
const EXPRESSION_SIZE_CODE_POINT_LIMIT: usize = 100_000;

const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "package",
    "namespace",
    "null",
    "return",
    "true",
    "var",
    "void",
    "while",
];

#[derive(Clone, Copy, Debug)]
pub(crate) struct ParserOptions {
    /// `a.?b`, `a[?b]`, `{?k: v}`, `[?x]` and the `optMap`/`optFlatMap` macros.
    pub(crate) optional_syntax: bool,
}

/// Token sets, as bit masks over token types.
type TokSet = u64;

const fn set(toks: &[Tok]) -> TokSet {
    let mut s = 0u64;
    let mut i = 0;
    while i < toks.len() {
        s |= 1u64 << (toks[i] as u32);
        i += 1;
    }
    s
}

fn has(s: TokSet, t: Tok) -> bool {
    s & (1u64 << (t as u32)) != 0
}

/// What can start an expression.
const PRIMARY: TokSet = set(&[
    Tok::LBracket,
    Tok::LBrace,
    Tok::LParen,
    Tok::Dot,
    Tok::Minus,
    Tok::Exclam,
    Tok::True,
    Tok::False,
    Tok::Null,
    Tok::NumFloat,
    Tok::NumInt,
    Tok::NumUint,
    Tok::String,
    Tok::Bytes,
    Tok::Identifier,
]);
const LIST_START: TokSet = PRIMARY | set(&[Tok::RBracket, Tok::Comma, Tok::Question]);
const MAP_START: TokSet = PRIMARY | set(&[Tok::RBrace, Tok::Comma, Tok::Question]);
const FIELDS_START: TokSet = set(&[Tok::RBrace, Tok::Comma, Tok::Question, Tok::Identifier]);
const ARGS_START: TokSet = PRIMARY | set(&[Tok::RParen]);
const OPT_EXPR: TokSet = PRIMARY | set(&[Tok::Question]);

fn set_display(s: TokSet) -> String {
    let names: Vec<&str> = ALL_TOKS
        .iter()
        .filter(|t| has(s, **t))
        .map(|t| t.display())
        .collect();
    if names.len() == 1 {
        names[0].to_string()
    } else {
        format!("{{{}}}", names.join(", "))
    }
}

const ALL_TOKS: &[Tok] = &[
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
    Tok::LBracket,
    Tok::RBracket,
    Tok::LBrace,
    Tok::RBrace,
    Tok::LParen,
    Tok::RParen,
    Tok::Dot,
    Tok::Comma,
    Tok::Minus,
    Tok::Exclam,
    Tok::Question,
    Tok::Colon,
    Tok::Plus,
    Tok::Star,
    Tok::Slash,
    Tok::Percent,
    Tok::True,
    Tok::False,
    Tok::Null,
    Tok::NumFloat,
    Tok::NumInt,
    Tok::NumUint,
    Tok::String,
    Tok::Bytes,
    Tok::Identifier,
];

/// Grammar rules whose nesting ANTLR's recursion listener limits.
#[derive(Clone, Copy)]
enum Rule {
    Expr,
    Or,
    And,
    Relation,
    Calc,
    Unary,
    Member,
    Primary,
}

/// Why a rule stopped: a syntax error (the rule recovers as ANTLR's rules do), or a limit
/// (parsing stops).
enum Abort {
    Mismatch,
    Fatal,
}

type R<T> = Result<T, Abort>;
/// An expression and the depth of its operator/selection nesting (the visitor's recursion).
type PE = (Expr, u32);

struct Parser<'s> {
    src: &'s Source,
    toks: Vec<Token>,
    pos: usize,
    positions: Vec<i32>,
    syntax: Vec<Issue>,
    visit: Vec<Issue>,
    opts: ParserOptions,
    depth: [u32; 8],
    internal: Option<String>,
    /// Characters the lexer skipped (they belong to no token).
    skipped: Vec<std::ops::Range<usize>>,
    /// ANTLR's error recovery mode: syntax errors are not reported until a token matches.
    recovering: bool,
    last_error_pos: Option<usize>,
    /// Tokens the enclosing constructs wait for (ANTLR's error recovery set).
    follow: Vec<TokSet>,
}

/// Parses an expression. On failure, returns every error found (lexer, syntax and visitor
/// errors, in cel-go's wording).
pub(crate) fn parse(source: Arc<Source>, opts: ParserOptions) -> Result<ParsedExpr, Issues> {
    let mut issues = Issues::new(source.clone());
    let n = source.chars.len();
    if n > EXPRESSION_SIZE_CODE_POINT_LIMIT {
        issues.report(
            Location::NONE,
            format!("expression code point size exceeds limit: size: {n}, limit {EXPRESSION_SIZE_CODE_POINT_LIMIT}"),
        );
        return Err(issues);
    }
    let (toks, lex_errors) = lex(&source.chars);
    let mut p = Parser {
        src: &source,
        toks,
        pos: 0,
        positions: vec![-1],
        syntax: Vec::new(),
        visit: Vec::new(),
        opts,
        depth: [0; 8],
        internal: None,
        skipped: lex_errors.iter().map(|e| e.skipped.clone()).collect(),
        recovering: false,
        last_error_pos: None,
        follow: Vec::new(),
    };
    for e in lex_errors {
        p.syntax.push(Issue {
            location: e.location,
            message: format!(
                "Syntax error: token recognition error at: '{}'",
                error_display(&e.text)
            ),
        });
    }
    let result = p.start();
    let mut errors: Vec<Issue> = std::mem::take(&mut p.syntax);
    if let Some(msg) = p.internal.take() {
        errors.push(Issue {
            location: Location::NONE,
            message: msg,
        });
    } else {
        errors.append(&mut p.visit);
        if let Ok((_, d)) = &result {
            if *d > MAX_RECURSION_DEPTH {
                errors.push(Issue {
                    location: Location::NONE,
                    message: "max recursion depth exceeded".into(),
                });
            }
        }
    }
    // Lexer errors come before syntax errors of later tokens; order by location is stable.
    errors.sort_by_key(|e| (e.location.line, e.location.column));
    match result {
        Ok((expr, _)) if errors.is_empty() => Ok(ParsedExpr {
            expr,
            positions: p.positions,
        }),
        _ => {
            for e in errors {
                issues.report(e.location, e.message);
            }
            Err(issues)
        }
    }
}

impl Parser<'_> {
    // ---- tokens -------------------------------------------------------------------------

    fn la(&self, k: usize) -> Tok {
        self.toks.get(self.pos + k - 1).map_or(Tok::Eof, |t| t.kind)
    }

    fn tok(&self, i: usize) -> &Token {
        let last = self.toks.len() - 1;
        &self.toks[i.min(last)]
    }

    fn cur(&self) -> &Token {
        self.tok(self.pos)
    }

    /// Matches the current token (which ends error recovery mode).
    fn bump(&mut self) -> Token {
        self.recovering = false;
        self.skip()
    }

    /// Consumes the current token without matching it (error recovery).
    fn skip(&mut self) -> Token {
        let t = self.cur().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn id_at(&mut self, offset: usize) -> i64 {
        self.positions.push(offset as i32);
        (self.positions.len() - 1) as i64
    }

    /// A visitor error: an error node at `offset` and a message at that place.
    fn visit_error(&mut self, offset: usize, msg: String) -> Expr {
        let id = self.id_at(offset);
        let location = self.src.offset_location(offset as i32);
        self.visit.push(Issue {
            location,
            message: msg,
        });
        Expr::new(id, ExprKind::Unspecified)
    }

    /// Past cel-go's recursion limit the expression fails anyway: stop nesting the tree (a
    /// very long operator chain would otherwise be too deep to drop).
    fn cap(&mut self, e: Expr, depth: u32) -> Expr {
        if depth <= MAX_RECURSION_DEPTH {
            return e;
        }
        let off = self
            .positions
            .get(e.id as usize)
            .copied()
            .unwrap_or(0)
            .max(0) as usize;
        Expr::new(self.id_at(off), ExprKind::Unspecified)
    }

    /// The node standing for a part that failed to parse.
    fn error_node(&mut self) -> PE {
        let off = self.cur().start;
        (Expr::new(self.id_at(off), ExprKind::Unspecified), 0)
    }

    // ---- calls and macros --------------------------------------------------------------

    fn call(id: i64, function: &str, args: Vec<Expr>) -> Expr {
        Expr::new(
            id,
            ExprKind::Call {
                target: None,
                function: function.into(),
                args,
            },
        )
    }

    fn call_or_macro(
        &mut self,
        id: i64,
        function: &str,
        target: Option<Expr>,
        args: Vec<Expr>,
    ) -> Expr {
        let offset = self.positions[id as usize];
        let mut ids = MacroIds {
            positions: &mut self.positions,
            offset,
        };
        match macros::expand(&mut ids, function, target, args, self.opts.optional_syntax) {
            Expansion::Expanded(e) => e,
            Expansion::NotMacro(target, args) => Expr::new(
                id,
                ExprKind::Call {
                    target: target.map(Box::new),
                    function: function.into(),
                    args,
                },
            ),
            Expansion::Error(arg_id, msg) => {
                let off = self
                    .positions
                    .get(arg_id as usize)
                    .copied()
                    .unwrap_or(offset)
                    .max(0);
                self.visit_error(off as usize, msg)
            }
        }
    }

    // ---- grammar ------------------------------------------------------------------------

    fn start(&mut self) -> R<PE> {
        let e = self.expr()?;
        if self.la(1) != Tok::Eof {
            let t = self.cur().clone();
            let kind = if self.la(2) == Tok::Eof {
                "extraneous"
            } else {
                "mismatched"
            };
            self.syntax_error(
                &t,
                format!("{kind} input {} expecting <EOF>", Self::tok_display(&t)),
            );
        }
        Ok(e)
    }

    fn expr(&mut self) -> R<PE> {
        self.rule(Rule::Expr, Self::expr_body)
    }

    fn expr_body(&mut self) -> R<PE> {
        let (cond, d0) = self.conditional_or()?;
        if self.la(1) != Tok::Question {
            return Ok((cond, d0));
        }
        let q = self.bump();
        let id = self.id_at(q.start);
        self.follow.push(set(&[Tok::Colon]));
        let (t, d1) = self.conditional_or()?;
        self.follow.pop();
        self.expect(Tok::Colon, PRIMARY)?;
        let (f, d2) = self.expr()?;
        let e = self.call_or_macro(id, "_?_:_", None, vec![cond, t, f]);
        Ok((e, 1 + d0.max(d1).max(d2)))
    }

    fn conditional_or(&mut self) -> R<PE> {
        self.rule(Rule::Or, |p| p.logic(Tok::LogicalOr, "_||_"))
    }

    fn conditional_and(&mut self) -> R<PE> {
        self.rule(Rule::And, |p| p.logic(Tok::LogicalAnd, "_&&_"))
    }

    /// `a op b op c ...` for `||` (over `&&` terms) and `&&` (over relations), built as
    /// cel-go's balanced tree of calls.
    fn logic(&mut self, op: Tok, function: &str) -> R<PE> {
        let term = |p: &mut Self| {
            if op == Tok::LogicalOr {
                p.conditional_and()
            } else {
                p.relation(0)
            }
        };
        let (first, mut depth) = term(self)?;
        let mut terms = vec![first];
        let mut ops = Vec::new();
        while self.la(1) == op {
            let t = self.bump();
            let id = self.id_at(t.start);
            let (next, d) = term(self)?;
            depth = depth.max(d);
            terms.push(next);
            ops.push(id);
        }
        if ops.is_empty() {
            return Ok((terms.remove(0), depth));
        }
        let mut slots: Vec<Option<Expr>> = terms.into_iter().map(Some).collect();
        let e = balanced(&mut slots, &ops, function, 0, ops.len() - 1);
        Ok((e, depth))
    }

    fn relation(&mut self, prec: u32) -> R<PE> {
        self.rule(Rule::Relation, |p| p.relation_body(prec))
    }

    fn relation_body(&mut self, prec: u32) -> R<PE> {
        let (mut lhs, mut depth) = self.calc(0)?;
        // Only the outermost level loops; a right operand is a single calc (`relation[2]`).
        while let Some(function) = relation_function(self.la(1)).filter(|_| prec <= 1) {
            let t = self.bump();
            let id = self.id_at(t.start);
            let (rhs, d) = self.relation(2)?;
            depth = 1 + depth.max(d);
            lhs = self.call_or_macro(id, function, None, vec![lhs, rhs]);
            lhs = self.cap(lhs, depth);
        }
        Ok((lhs, depth))
    }

    fn calc(&mut self, prec: u32) -> R<PE> {
        self.rule(Rule::Calc, |p| p.calc_body(prec))
    }

    fn calc_body(&mut self, prec: u32) -> R<PE> {
        let (mut lhs, mut depth) = self.unary()?;
        loop {
            let (function, op_prec, next_prec) = match self.la(1) {
                Tok::Star => ("_*_", 2, 3),
                Tok::Slash => ("_/_", 2, 3),
                Tok::Percent => ("_%_", 2, 3),
                Tok::Plus => ("_+_", 1, 2),
                Tok::Minus => ("_-_", 1, 2),
                _ => break,
            };
            if op_prec < prec {
                break;
            }
            let t = self.bump();
            let id = self.id_at(t.start);
            let (rhs, d) = self.calc(next_prec)?;
            depth = 1 + depth.max(d);
            lhs = self.call_or_macro(id, function, None, vec![lhs, rhs]);
            lhs = self.cap(lhs, depth);
        }
        Ok((lhs, depth))
    }

    fn unary(&mut self) -> R<PE> {
        self.rule(Rule::Unary, Self::unary_body)
    }

    fn unary_body(&mut self) -> R<PE> {
        self.sync(PRIMARY)?;
        let op = self.la(1);
        // A single '-' before a number is the number's sign (the member alternative wins).
        let is_signed_number =
            op == Tok::Minus && matches!(self.la(2), Tok::NumInt | Tok::NumFloat);
        if (op != Tok::Exclam && op != Tok::Minus) || is_signed_number {
            let start = self.pos;
            return self.member(start);
        }
        let first = self.cur().clone();
        let mut n = 0;
        let mut last = self.pos;
        while self.la(1) == op {
            last = self.pos;
            self.bump();
            n += 1;
        }
        // A failing operand is reported from the decision at the last operator.
        let (target, d) = self.member(last)?;
        if n % 2 == 0 {
            return Ok((target, d));
        }
        let id = self.id_at(first.start);
        let f = if op == Tok::Exclam { "!_" } else { "-_" };
        Ok((self.call_or_macro(id, f, None, vec![target]), d))
    }

    fn member(&mut self, decision_start: usize) -> R<PE> {
        self.rule(Rule::Member, |p| p.member_body(decision_start))
    }

    fn member_body(&mut self, decision_start: usize) -> R<PE> {
        let (mut e, mut depth) = self.primary(decision_start)?;
        loop {
            match self.la(1) {
                Tok::Dot => {
                    let (next, d) = self.member_dot(e, depth)?;
                    e = self.cap(next, d);
                    depth = d;
                }
                Tok::LBracket => {
                    let open = self.bump();
                    let id = self.id_at(open.start);
                    self.follow.push(set(&[Tok::RBracket]));
                    self.sync(OPT_EXPR)?;
                    let opt = if self.la(1) == Tok::Question {
                        Some(self.bump())
                    } else {
                        None
                    };
                    let (index, d) = self.expr()?;
                    self.follow.pop();
                    self.expect(Tok::RBracket, 0)?;
                    depth = 1 + depth.max(d);
                    if opt.is_some() && !self.opts.optional_syntax {
                        e = self.visit_error(open.start, "unsupported syntax '[?'".into());
                        continue;
                    }
                    let function = if opt.is_some() { "_[?_]" } else { "_[_]" };
                    e = self.call_or_macro(id, function, None, vec![e, index]);
                    e = self.cap(e, depth);
                }
                _ => break,
            }
        }
        Ok((e, depth))
    }

    /// `.f`, `.?f` or `.f(args)` after `operand`.
    fn member_dot(&mut self, operand: Expr, depth: u32) -> R<PE> {
        let dot_idx = self.pos;
        let dot = self.bump();
        let opt = if self.la(1) == Tok::Question {
            Some(self.bump())
        } else {
            None
        };
        if self.la(1) != Tok::Identifier {
            return Err(self.no_viable(dot_idx, self.pos));
        }
        let name = self.bump();
        if opt.is_none() && self.la(1) == Tok::LParen {
            let open = self.bump();
            let id = self.id_at(open.start);
            let (args, d) = self.args()?;
            return Ok((
                self.call_or_macro(id, &name.text, Some(operand), args),
                1 + depth.max(d),
            ));
        }
        if opt.is_some() {
            if !self.opts.optional_syntax {
                return Ok((
                    self.visit_error(dot.start, "unsupported syntax '.?'".into()),
                    depth + 1,
                ));
            }
            let id = self.id_at(dot.start);
            let lid = self.id_at(name.start);
            let field = Expr::new(lid, ExprKind::Literal(Literal::String(name.text.clone())));
            return Ok((Self::call(id, "_?._", vec![operand, field]), depth + 1));
        }
        let id = self.id_at(dot.start);
        let select = ExprKind::Select {
            operand: Box::new(operand),
            field: name.text,
            test_only: false,
        };
        Ok((Expr::new(id, select), depth + 1))
    }

    /// `( exprList? )` after the open parenthesis.
    fn args(&mut self) -> R<(Vec<Expr>, u32)> {
        self.follow.push(set(&[Tok::RParen, Tok::Comma]));
        let r = self.inner(Self::args_list, (Vec::new(), 0));
        self.follow.pop();
        let r = r?;
        self.expect(Tok::RParen, 0)?;
        Ok(r)
    }

    fn args_list(&mut self) -> R<(Vec<Expr>, u32)> {
        self.sync(ARGS_START)?;
        let mut args = Vec::new();
        let mut depth = 0;
        if self.la(1) != Tok::RParen {
            loop {
                let (a, d) = self.expr()?;
                depth = depth.max(d);
                args.push(a);
                if self.la(1) != Tok::Comma {
                    break;
                }
                self.bump();
            }
        }
        Ok((args, depth))
    }
}

fn relation_function(t: Tok) -> Option<&'static str> {
    Some(match t {
        Tok::Less => "_<_",
        Tok::LessEquals => "_<=_",
        Tok::GreaterEquals => "_>=_",
        Tok::Greater => "_>_",
        Tok::Equals => "_==_",
        Tok::NotEquals => "_!=_",
        Tok::In => "@in",
        _ => return None,
    })
}

/// cel-go's balanced tree of `&&`/`||` calls over `terms`, with `ops[i]` the id of the i-th
/// operator.
fn balanced(terms: &mut [Option<Expr>], ops: &[i64], function: &str, lo: usize, hi: usize) -> Expr {
    let mid = (lo + hi).div_ceil(2);
    let left = if mid == lo {
        take(terms, mid)
    } else {
        balanced(terms, ops, function, lo, mid - 1)
    };
    let right = if mid == hi {
        take(terms, mid + 1)
    } else {
        balanced(terms, ops, function, mid + 1, hi)
    };
    Parser::call(ops[mid], function, vec![left, right])
}

fn take(terms: &mut [Option<Expr>], i: usize) -> Expr {
    terms
        .get_mut(i)
        .and_then(Option::take)
        .unwrap_or(Expr::new(0, ExprKind::Unspecified))
}
