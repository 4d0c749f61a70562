//! The expression tree cel-go's parser builds (macros already expanded), with each node's id
//! and source offset.

/// A constant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    Null,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MapEntry {
    pub(crate) id: i64,
    pub(crate) key: Expr,
    pub(crate) value: Expr,
    pub(crate) optional: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldEntry {
    pub(crate) id: i64,
    pub(crate) field: String,
    pub(crate) value: Expr,
    pub(crate) optional: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Comprehension {
    pub(crate) iter_var: String,
    pub(crate) iter_range: Expr,
    pub(crate) accu_var: String,
    pub(crate) accu_init: Expr,
    pub(crate) loop_condition: Expr,
    pub(crate) loop_step: Expr,
    pub(crate) result: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExprKind {
    /// A node standing for a part that could not be parsed.
    Unspecified,
    Literal(Literal),
    Ident(String),
    Select {
        operand: Box<Expr>,
        field: String,
        test_only: bool,
    },
    Call {
        target: Option<Box<Expr>>,
        function: String,
        args: Vec<Expr>,
    },
    List {
        elements: Vec<Expr>,
        optional_indices: Vec<usize>,
    },
    Map {
        entries: Vec<MapEntry>,
    },
    Struct {
        name: String,
        fields: Vec<FieldEntry>,
    },
    Comprehension(Box<Comprehension>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    pub(crate) id: i64,
    pub(crate) kind: ExprKind,
}

impl Expr {
    pub(crate) fn new(id: i64, kind: ExprKind) -> Expr {
        Expr { id, kind }
    }

    /// The dotted name this expression spells if it is an identifier or a chain of field
    /// selections on one (cel-go's `containers.ToQualifiedName`).
    pub(crate) fn qualified_name(&self) -> Option<String> {
        match &self.kind {
            ExprKind::Ident(name) => Some(name.clone()),
            ExprKind::Select {
                operand,
                field,
                test_only: false,
            } => operand.qualified_name().map(|q| format!("{q}.{field}")),
            _ => None,
        }
    }
}

/// A parsed expression with the source offset of every node id.
#[derive(Clone, Debug)]
pub(crate) struct ParsedExpr {
    pub(crate) expr: Expr,
    /// `positions[id]` is the offset of node `id` (ids start at 1; 0 is unused).
    pub(crate) positions: Vec<i32>,
}

impl ParsedExpr {
    pub(crate) fn offset(&self, id: i64) -> Option<i32> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.positions.get(i))
            .copied()
            .filter(|o| *o >= 0)
    }
}

/// A compact rendering of the tree for tests: calls as `f(args)`, members as `t.f(args)`,
/// selects as `a.b` (`a.b~test-only`), comprehensions as `__comprehension__(...)`.
#[cfg(test)]
pub(crate) fn debug_string(e: &Expr) -> String {
    let list = |v: &[Expr]| v.iter().map(debug_string).collect::<Vec<_>>().join(", ");
    match &e.kind {
        ExprKind::Unspecified => "<error>".into(),
        ExprKind::Literal(l) => match l {
            Literal::Bool(b) => b.to_string(),
            Literal::Int(i) => i.to_string(),
            Literal::Uint(u) => format!("{u}u"),
            Literal::Double(d) => format!("{d:?}"),
            Literal::String(s) => format!("{s:?}"),
            Literal::Bytes(b) => format!("b{b:?}"),
            Literal::Null => "null".into(),
        },
        ExprKind::Ident(n) => n.clone(),
        ExprKind::Select {
            operand,
            field,
            test_only,
        } => {
            format!(
                "{}.{}{}",
                debug_string(operand),
                field,
                if *test_only { "~test-only" } else { "" }
            )
        }
        ExprKind::Call {
            target: Some(t),
            function,
            args,
        } => {
            format!("{}.{}({})", debug_string(t), function, list(args))
        }
        ExprKind::Call {
            target: None,
            function,
            args,
        } => format!("{}({})", function, list(args)),
        ExprKind::List {
            elements,
            optional_indices,
        } => {
            let items: Vec<String> = elements
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let q = if optional_indices.contains(&i) {
                        "?"
                    } else {
                        ""
                    };
                    format!("{q}{}", debug_string(e))
                })
                .collect();
            format!("[{}]", items.join(", "))
        }
        ExprKind::Map { entries } => {
            let items: Vec<String> = entries
                .iter()
                .map(|en| {
                    let q = if en.optional { "?" } else { "" };
                    format!("{q}{}: {}", debug_string(&en.key), debug_string(&en.value))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        ExprKind::Struct { name, fields } => {
            let items: Vec<String> = fields
                .iter()
                .map(|f| {
                    let q = if f.optional { "?" } else { "" };
                    format!("{q}{}: {}", f.field, debug_string(&f.value))
                })
                .collect();
            format!("{name}{{{}}}", items.join(", "))
        }
        ExprKind::Comprehension(c) => format!(
            "__comprehension__({}, {}, {}, {}, {}, {}, {})",
            c.iter_var,
            debug_string(&c.iter_range),
            c.accu_var,
            debug_string(&c.accu_init),
            debug_string(&c.loop_condition),
            debug_string(&c.loop_step),
            debug_string(&c.result)
        ),
    }
}
