//! Label selectors as kube-apiserver v1.29 parses, validates and matches them
//! (apimachinery's `labels.Parse`, `metav1.LabelSelectorAsSelector`).
//!
//! The `labelSelector` query grammar: `=`, `==`, `!=`, `in (...)`, `notin (...)`, `key`,
//! `!key`, and upstream's `>` / `<` integer comparisons; comma = AND. Keys and values are
//! validated with upstream's wording, and the errors are upstream's messages (the API
//! server answers them as 400 BadRequest as they are). The `metav1.LabelSelector` object
//! form (`matchLabels`, `matchExpressions`) converts with the same requirements.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

use crate::gofmt::go_string_slice;
use crate::validation::{aggregate, field_invalid, is_qualified_name, is_valid_label_value};

/// A label requirement operator (upstream `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    /// Upstream `NewRequirement`: validates the key, the value count for the operator, and every
    /// value. `nil_values` says the values came as a nil slice (only shows in error text).
    fn new(key: &str, op: Operator, values: Vec<String>, nil_values: bool) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(field_invalid(
                "key",
                &crate::gofmt::quote(key),
                &key_errs.join("; "),
            ));
        }
        let bad = || go_string_slice(&values, nil_values && values.is_empty());
        match op {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(field_invalid(
                        "values",
                        &bad(),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(field_invalid(
                        "values",
                        &bad(),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(field_invalid(
                        "values",
                        &bad(),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(field_invalid(
                        "values",
                        &bad(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(field_invalid(
                            &format!("values[{}]", i),
                            &crate::gofmt::quote(v),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let verrs = is_valid_label_value(v);
            if !verrs.is_empty() {
                errs.push(field_invalid(
                    &format!("values[{}][{}]", i, key),
                    &crate::gofmt::quote(v),
                    &verrs.join("; "),
                ));
            }
        }
        match aggregate(&errs) {
            Some(e) => Err(e),
            None => Ok(Requirement {
                key: key.to_string(),
                operator: op,
                values,
            }),
        }
    }

    /// Whether these labels satisfy the requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                labels.get(&self.key).is_some_and(|v| has(v))
            }
            Operator::NotIn | Operator::NotEquals => labels.get(&self.key).is_none_or(|v| !has(v)),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let have = match labels.get(&self.key).and_then(|v| parse_go_int(v)) {
                    Some(n) => n,
                    None => return false,
                };
                let want = match self.values.as_slice() {
                    [one] => match parse_go_int(one) {
                        Some(n) => n,
                        None => return false,
                    },
                    _ => return false,
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        if self.values.len() == 1 {
            f.write_str(&self.values[0])?;
        } else {
            let mut sorted = self.values.clone();
            sorted.sort();
            f.write_str(&sorted.join(","))?;
        }
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// `strconv.ParseInt(s, 10, 64)`.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Parsed form of the `labelSelector` query string (or of a `metav1.LabelSelector`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// A nil `metav1.LabelSelector`: matches nothing.
    nothing: bool,
}

impl LabelSelector {
    /// Parses the `labelSelector` syntax like upstream `labels.Parse`, with its error messages
    /// (kube-apiserver answers them as 400 BadRequest with the message as is). The empty
    /// string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// A nil `metav1.LabelSelector`'s selector: it matches nothing.
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Converts a `metav1.LabelSelector` given by its parts (upstream
    /// `LabelSelectorAsSelector` for a non-nil selector): `matchLabels` pairs become `=`
    /// requirements, `matchExpressions` (`key`, `operator`, `values`) take `In`, `NotIn`,
    /// `Exists` and `DoesNotExist`; keys, values and value counts are validated with
    /// upstream's messages. No part at all selects everything.
    pub fn from_match<'a>(
        match_labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        match_expressions: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    ) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (key, value) in match_labels {
            requirements.push(Requirement::new(
                key,
                Operator::Equals,
                vec![value.to_string()],
                false,
            )?);
        }
        for (key, operator, values) in match_expressions {
            let op = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => {
                    return Err(format!(
                        "{} is not a valid label selector operator",
                        crate::gofmt::quote(operator)
                    ))
                }
            };
            // An empty list shows as Go's nil slice: the API drops an empty `values`.
            requirements.push(Requirement::new(
                key,
                op,
                values.to_vec(),
                values.is_empty(),
            )?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Converts a `metav1.LabelSelector` object as JSON (see [`LabelSelector::from_match`]):
    /// `null` selects nothing, `{}` everything; a part of the wrong JSON type is Go's
    /// decoding error.
    pub fn from_label_selector_json(sel: &Value) -> Result<Self, String> {
        let obj = match sel {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(m) => m,
            other => return Err(unmarshal_error(other, "v1.LabelSelector")),
        };
        let mut labels: Vec<(&str, String)> = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (k, v) in map {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => return Err(unmarshal_error(other, "string")),
                    };
                    labels.push((k.as_str(), v));
                }
                labels.sort();
            }
            Some(other) => return Err(unmarshal_error(other, "map[string]string")),
        }
        let mut expressions: Vec<(String, String, Vec<String>)> = Vec::new();
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for e in exprs {
                    let e = match e {
                        Value::Object(m) => m,
                        Value::Null => continue,
                        other => return Err(unmarshal_error(other, "v1.LabelSelectorRequirement")),
                    };
                    let key = match e.get("key") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => return Err(unmarshal_error(other, "string")),
                    };
                    let op_name = match e.get("operator") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => {
                            return Err(unmarshal_error(other, "v1.LabelSelectorOperator"))
                        }
                    };
                    let values = match e.get("values") {
                        None | Some(Value::Null) => Vec::new(),
                        Some(Value::Array(vs)) => {
                            let mut out = Vec::with_capacity(vs.len());
                            for v in vs {
                                match v {
                                    Value::String(s) => out.push(s.clone()),
                                    Value::Null => out.push(String::new()),
                                    other => return Err(unmarshal_error(other, "string")),
                                }
                            }
                            out
                        }
                        Some(other) => return Err(unmarshal_error(other, "[]string")),
                    };
                    expressions.push((key, op_name, values));
                }
            }
            Some(other) => return Err(unmarshal_error(other, "[]v1.LabelSelectorRequirement")),
        }
        LabelSelector::from_match(
            labels.iter().map(|(k, v)| (*k, v.as_str())),
            expressions
                .iter()
                .map(|(k, op, vs)| (k.as_str(), op.as_str(), vs.as_slice())),
        )
    }

    /// True when the selector does not restrict anything (upstream `Empty()`): the empty
    /// string or `{}`. A `null` `metav1.LabelSelector` (selects nothing) is not empty.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for the selector of a `null` `metav1.LabelSelector`, which selects nothing.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

/// The canonical string form (upstream `String()`), e.g. `app=web,tier in (a,b)`: what a
/// Scale's `status.selector` shows for a `metav1.LabelSelector`.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

fn unmarshal_error(v: &Value, go_type: &str) -> String {
    let what = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!(
        "json: cannot unmarshal {} into Go value of type {}",
        what, go_type
    )
}

// --- lexer -------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// The next byte, 0 at the end (a NUL byte therefore also ends the input, as upstream).
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn text(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(self.s.as_bytes().get(start..end).unwrap_or(&[])).into_owned()
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let start = self.pos;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special_symbol(c) || is_whitespace(c) {
                self.unread();
                break;
            }
        }
        let end = if self.pos > start && self.s.as_bytes().get(self.pos - 1) == Some(&0) {
            self.pos - 1
        } else {
            self.pos
        };
        let lit = self.text(start, end);
        match keyword(&lit) {
            Some(t) => (t, lit),
            None => (Token::Identifier, lit),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut last: Option<(Token, String)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special_symbol(c) {
                let buf = self.text(start, self.pos);
                if let Some(t) = keyword(&buf) {
                    last = Some((t, buf));
                } else if last.is_some() {
                    self.unread();
                    break;
                }
            } else {
                self.unread();
                break;
            }
        }
        match last {
            Some(item) => item,
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    self.text(start, self.pos)
                ),
            ),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(c) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

// --- parser ------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer { s, pos: 0 };
        let mut items = Vec::new();
        loop {
            let (tok, lit) = lexer.lex();
            items.push((tok, lit));
            if tok == Token::EndOfString || items.len() > s.len() + 1 {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn item(&self, i: usize, ctx: Ctx) -> (Token, String) {
        let (tok, lit) = self
            .items
            .get(i)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let tok = match (ctx, tok) {
            (Ctx::Values, Token::In) | (Ctx::Values, Token::NotIn) => Token::Identifier,
            _ => tok,
        };
        (tok, lit)
    }

    fn lookahead(&self, ctx: Ctx) -> (Token, String) {
        self.item(self.position, ctx)
    }

    fn consume(&mut self, ctx: Ctx) -> (Token, String) {
        let it = self.item(self.position, ctx);
        self.position += 1;
        it
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {}", e))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{}', expected: identifier after ','",
                                    l2
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{}', expected: ',' or 'end of string'", l))
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        lit
                    ))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op) = op {
            return Requirement::new(&key, op, Vec::new(), false);
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values, false)
    }

    /// The key, and `Exists` / `DoesNotExist` when no binary operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            let next = self.consume(Ctx::Values);
            tok = next.0;
            lit = next.1;
        }
        if tok != Token::Identifier {
            return Err(format!("found '{}', expected: identifier", lit));
        }
        let key_errs = is_qualified_name(&lit);
        if !key_errs.is_empty() {
            return Err(field_invalid(
                "<nil>",
                &crate::gofmt::quote(&lit),
                &key_errs.join("; "),
            ));
        }
        let (t, _) = self.lookahead(Ctx::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op.is_none() {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    lit
                ))
            }
        })
    }

    /// `( v1, v2, ... )`: a sorted set of values.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{}' expected: '('", lit));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Ctx::Values);
                if t != Token::ClosedPar {
                    return Err(format!("found '{}', expected: ')'", lit));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{}', expected: ',', ')' or identifier", lit)),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        let insert = |set: &mut Vec<String>, v: &str| {
            if let Err(i) = set.binary_search_by(|x| x.as_str().cmp(v)) {
                set.insert(i, v.to_string());
            }
        };
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, &lit);
                    let (t2, l2) = self.lookahead(Ctx::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{}', expected: ',' or ')'", l2)),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, "");
                    }
                    let (t2, _) = self.lookahead(Ctx::Values);
                    if t2 == Token::ClosedPar {
                        insert(&mut set, "");
                        return Ok(set);
                    }
                    if t2 == Token::Comma {
                        self.consume(Ctx::Values);
                        insert(&mut set, "");
                    }
                }
                _ => return Err(format!("found '{}', expected: ',', or identifier", lit)),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{}', expected: identifier", lit))
    }
}

#[cfg(test)]
mod tests;
