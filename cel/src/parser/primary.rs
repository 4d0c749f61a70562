//! The primary expressions: literals, identifiers and global calls, messages, lists, maps.

use super::{
    has, set, Parser, Rule, FIELDS_START, LIST_START, MAP_START, OPT_EXPR, PE, PRIMARY, R, RESERVED,
};
use crate::ast::{Expr, ExprKind, FieldEntry, Literal, MapEntry};
use crate::lexer::Tok;
use crate::literals;

impl Parser<'_> {
    pub(super) fn primary(&mut self, decision_start: usize) -> R<PE> {
        self.rule(Rule::Primary, |p| match p.la(1) {
            Tok::Dot | Tok::Identifier => p.ident_or_message(decision_start),
            Tok::LParen => {
                p.bump();
                p.follow.push(set(&[Tok::RParen]));
                let e = p.expr()?;
                p.follow.pop();
                p.expect(Tok::RParen, 0)?;
                Ok(e)
            }
            Tok::LBracket => p.list(),
            Tok::LBrace => p.map(),
            _ => p.literal(decision_start),
        })
    }

    fn literal(&mut self, decision_start: usize) -> R<PE> {
        let start = self.cur().clone();
        let sign = start.kind == Tok::Minus;
        if sign {
            if !matches!(self.la(2), Tok::NumInt | Tok::NumFloat) {
                return Err(self.no_viable(decision_start, self.pos + 1));
            }
            self.bump();
        }
        let t = self.cur().clone();
        let off = start.start;
        let lit = match t.kind {
            Tok::NumInt => literals::parse_int(sign, &t.text)
                .map(Literal::Int)
                .ok_or("invalid int literal"),
            Tok::NumUint => literals::parse_uint(&t.text)
                .map(Literal::Uint)
                .ok_or("invalid uint literal"),
            Tok::NumFloat => literals::parse_double(sign, &t.text)
                .map(Literal::Double)
                .ok_or("invalid double literal"),
            Tok::String => Ok(self.unquote(off, &t.text, false).map_or_else(
                || Literal::String(t.text.clone()),
                |b| Literal::String(String::from_utf8_lossy(&b).into_owned()),
            )),
            Tok::Bytes => {
                let body: String = t.text.chars().skip(1).collect();
                Ok(Literal::Bytes(
                    self.unquote(off, &body, true)
                        .unwrap_or_else(|| body.into_bytes()),
                ))
            }
            Tok::True => Ok(Literal::Bool(true)),
            Tok::False => Ok(Literal::Bool(false)),
            Tok::Null => Ok(Literal::Null),
            _ => return Err(self.no_viable(decision_start, self.pos)),
        };
        self.bump();
        let e = match lit {
            Ok(l) => {
                let id = self.id_at(off);
                Expr::new(id, ExprKind::Literal(l))
            }
            Err(msg) => self.visit_error(off, msg.into()),
        };
        Ok((e, 0))
    }

    fn unquote(&mut self, offset: usize, text: &str, is_bytes: bool) -> Option<Vec<u8>> {
        match literals::unescape(text, is_bytes) {
            Ok(b) => Some(b),
            Err(msg) => {
                self.visit_error(offset, msg);
                None
            }
        }
    }

    fn ident_or_message(&mut self, decision_start: usize) -> R<PE> {
        let start = self.cur().clone();
        let leading_dot = start.kind == Tok::Dot;
        let mut i = self.pos + usize::from(leading_dot);
        if self.tok(i).kind != Tok::Identifier {
            return Err(self.no_viable(decision_start, i));
        }
        // `a.b.c{` is a message; anything else is an identifier or a global call.
        while self.tok(i + 1).kind == Tok::Dot && self.tok(i + 2).kind == Tok::Identifier {
            i += 2;
        }
        if self.tok(i + 1).kind == Tok::LBrace {
            return self.message(leading_dot);
        }
        if leading_dot {
            self.bump();
        }
        let id_tok = self.bump();
        let name = if leading_dot {
            format!(".{}", id_tok.text)
        } else {
            id_tok.text.clone()
        };
        let reserved = RESERVED.contains(&id_tok.text.as_str());
        if self.la(1) == Tok::LParen {
            let open = self.bump();
            let mark = self.visit.len();
            let id = self.id_at(open.start);
            let (args, d) = self.args()?;
            if reserved {
                self.visit.truncate(mark);
                let e =
                    self.visit_error(start.start, format!("reserved identifier: {}", id_tok.text));
                return Ok((e, 0));
            }
            return Ok((self.call_or_macro(id, &name, None, args), d));
        }
        if reserved {
            let e = self.visit_error(start.start, format!("reserved identifier: {}", id_tok.text));
            return Ok((e, 0));
        }
        let id = self.id_at(id_tok.start);
        Ok((Expr::new(id, ExprKind::Ident(name)), 0))
    }

    fn message(&mut self, leading_dot: bool) -> R<PE> {
        if leading_dot {
            self.bump();
        }
        let mut name = if leading_dot {
            ".".to_string()
        } else {
            String::new()
        };
        name.push_str(&self.bump().text);
        while self.la(1) == Tok::Dot {
            self.bump();
            name.push('.');
            name.push_str(&self.bump().text);
        }
        let open = self.bump();
        let id = self.id_at(open.start);
        self.follow.push(set(&[Tok::RBrace, Tok::Comma]));
        let fields = self.inner(Self::message_fields, (Vec::new(), 0));
        self.follow.pop();
        let (fields, depth) = fields?;
        if self.la(1) == Tok::Comma {
            self.bump();
        }
        self.expect(Tok::RBrace, 0)?;
        Ok((Expr::new(id, ExprKind::Struct { name, fields }), depth))
    }

    fn message_fields(&mut self) -> R<(Vec<FieldEntry>, u32)> {
        self.sync(FIELDS_START)?;
        let mut fields = Vec::new();
        let mut depth = 0;
        if !matches!(self.la(1), Tok::Question | Tok::Identifier) {
            return Ok((fields, depth));
        }
        loop {
            let opt = self.optional_marker();
            let field = self.expect(Tok::Identifier, 0)?;
            let col = self.expect(Tok::Colon, PRIMARY)?;
            let cid = self.id_at(col.start);
            let (value, d) = self.expr()?;
            depth = depth.max(d);
            if opt.is_none() || self.opts.optional_syntax {
                fields.push(FieldEntry {
                    id: cid,
                    field: field.text,
                    value,
                    optional: opt.is_some(),
                });
            }
            if !(self.la(1) == Tok::Comma && matches!(self.la(2), Tok::Question | Tok::Identifier))
            {
                break;
            }
            self.bump();
        }
        Ok((fields, depth))
    }

    fn list(&mut self) -> R<PE> {
        let open = self.bump();
        let id = self.id_at(open.start);
        self.follow.push(set(&[Tok::RBracket, Tok::Comma]));
        let elems = self.inner(Self::list_elements, (Vec::new(), Vec::new(), 0));
        self.follow.pop();
        let (elements, optional_indices, depth) = elems?;
        if self.la(1) == Tok::Comma {
            self.bump();
        }
        self.expect(Tok::RBracket, 0)?;
        Ok((
            Expr::new(
                id,
                ExprKind::List {
                    elements,
                    optional_indices,
                },
            ),
            depth,
        ))
    }

    #[allow(clippy::type_complexity)]
    fn list_elements(&mut self) -> R<(Vec<Expr>, Vec<usize>, u32)> {
        self.sync(LIST_START)?;
        let mut elements = Vec::new();
        let mut optional_indices = Vec::new();
        let mut depth = 0;
        if !has(OPT_EXPR, self.la(1)) {
            return Ok((elements, optional_indices, depth));
        }
        loop {
            let opt = self.optional_marker();
            let (e, d) = self.expr()?;
            depth = depth.max(d);
            if opt.is_some() && self.opts.optional_syntax {
                optional_indices.push(elements.len());
            }
            elements.push(e);
            if !self.more_entries(Tok::RBracket)? {
                break;
            }
        }
        Ok((elements, optional_indices, depth))
    }

    /// After an element: whether a `,` and another element follow (a trailing `,` before
    /// `close` ends the list; anything else after a `,` is no viable alternative).
    fn more_entries(&mut self, close: Tok) -> R<bool> {
        if self.la(1) != Tok::Comma {
            return Ok(false);
        }
        if !has(OPT_EXPR, self.la(2)) {
            if self.la(2) != close {
                let comma = self.pos;
                return Err(self.no_viable(comma, comma + 1));
            }
            return Ok(false);
        }
        self.bump();
        Ok(true)
    }

    fn map(&mut self) -> R<PE> {
        let open = self.bump();
        let id = self.id_at(open.start);
        self.follow
            .push(set(&[Tok::RBrace, Tok::Comma, Tok::Colon]));
        let entries = self.inner(Self::map_entries, (Vec::new(), 0));
        self.follow.pop();
        let (entries, depth) = entries?;
        if self.la(1) == Tok::Comma {
            self.bump();
        }
        self.expect(Tok::RBrace, 0)?;
        Ok((Expr::new(id, ExprKind::Map { entries }), depth))
    }

    fn map_entries(&mut self) -> R<(Vec<MapEntry>, u32)> {
        self.sync(MAP_START)?;
        let mut entries = Vec::new();
        let mut depth = 0;
        if !has(OPT_EXPR, self.la(1)) {
            return Ok((entries, depth));
        }
        loop {
            let opt = self.optional_marker();
            let (key, d1) = self.expr()?;
            let col = self.expect(Tok::Colon, PRIMARY)?;
            let cid = self.id_at(col.start);
            let (value, d2) = self.expr()?;
            depth = depth.max(d1).max(d2);
            if opt.is_none() || self.opts.optional_syntax {
                entries.push(MapEntry {
                    id: cid,
                    key,
                    value,
                    optional: opt.is_some(),
                });
            }
            if !self.more_entries(Tok::RBrace)? {
                break;
            }
        }
        Ok((entries, depth))
    }

    /// A `?` marking an optional entry; without optional syntax it is reported right away
    /// (cel-go's visitor reports it even when the rest of the entry fails to parse).
    fn optional_marker(&mut self) -> Option<crate::lexer::Token> {
        if self.la(1) != Tok::Question {
            return None;
        }
        let q = self.bump();
        if !self.opts.optional_syntax {
            self.visit_error(q.start, "unsupported syntax '?'".into());
        }
        Some(q)
    }
}
