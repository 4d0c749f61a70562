//! The parser's macros (cel-go's `parser/macro.go` and the optional library's `optMap` /
//! `optFlatMap`): calls rewritten into presence tests and comprehensions.

use crate::ast::{Comprehension, Expr, ExprKind, Literal};

/// The accumulator variable of the comprehensions macros build.
pub(crate) const ACCUMULATOR: &str = "__result__";
const UNUSED_ITER_VAR: &str = "#unused";

/// Hands out node ids, all positioned where the macro call is.
pub(crate) struct MacroIds<'a> {
    pub(crate) positions: &'a mut Vec<i32>,
    pub(crate) offset: i32,
}

impl MacroIds<'_> {
    fn next(&mut self) -> i64 {
        self.positions.push(self.offset);
        (self.positions.len() - 1) as i64
    }

    fn ident(&mut self, name: &str) -> Expr {
        Expr::new(self.next(), ExprKind::Ident(name.into()))
    }

    fn lit(&mut self, l: Literal) -> Expr {
        Expr::new(self.next(), ExprKind::Literal(l))
    }

    fn call(&mut self, function: &str, args: Vec<Expr>) -> Expr {
        Expr::new(
            self.next(),
            ExprKind::Call {
                target: None,
                function: function.into(),
                args,
            },
        )
    }

    fn member(&mut self, function: &str, target: Expr) -> Expr {
        Expr::new(
            self.next(),
            ExprKind::Call {
                target: Some(Box::new(target)),
                function: function.into(),
                args: vec![],
            },
        )
    }

    fn list(&mut self, elements: Vec<Expr>) -> Expr {
        Expr::new(
            self.next(),
            ExprKind::List {
                elements,
                optional_indices: vec![],
            },
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn fold(
        &mut self,
        iter_var: &str,
        iter_range: Expr,
        accu_var: &str,
        accu_init: Expr,
        loop_condition: Expr,
        loop_step: Expr,
        result: Expr,
    ) -> Expr {
        Expr::new(
            self.next(),
            ExprKind::Comprehension(Box::new(Comprehension {
                iter_var: iter_var.into(),
                iter_range,
                accu_var: accu_var.into(),
                accu_init,
                loop_condition,
                loop_step,
                result,
            })),
        )
    }
}

/// What became of a call that might be a macro.
pub(crate) enum Expansion {
    /// Not a macro: the call's parts, untouched.
    NotMacro(Option<Expr>, Vec<Expr>),
    Expanded(Expr),
    /// A macro used wrongly: the id of the offending argument and cel-go's message.
    Error(i64, String),
}

/// Expands `function` if it names a macro for this arity and call style.
pub(crate) fn expand(
    ids: &mut MacroIds<'_>,
    function: &str,
    target: Option<Expr>,
    args: Vec<Expr>,
    optional_macros: bool,
) -> Expansion {
    let receiver = target.is_some();
    let kind = match (function, args.len(), receiver) {
        ("has", 1, false) => Kind::Has,
        ("all", 2, true) => Kind::All,
        ("exists", 2, true) => Kind::Exists,
        ("exists_one", 2, true) => Kind::ExistsOne,
        ("map", 2 | 3, true) => Kind::Map,
        ("filter", 2, true) => Kind::Filter,
        ("optMap", 2, true) if optional_macros => Kind::OptMap,
        ("optFlatMap", 2, true) if optional_macros => Kind::OptFlatMap,
        _ => return Expansion::NotMacro(target, args),
    };
    let mut args = args;
    match kind {
        Kind::Has => {
            let arg = args.remove(0);
            match arg.kind {
                ExprKind::Select { operand, field, .. } => Expansion::Expanded(Expr::new(
                    ids.next(),
                    ExprKind::Select {
                        operand,
                        field,
                        test_only: true,
                    },
                )),
                _ => Expansion::Error(arg.id, "invalid argument to has() macro".into()),
            }
        }
        Kind::All | Kind::Exists | Kind::ExistsOne => {
            let Some(var) = simple_name(&args[0]) else {
                return Expansion::Error(args[0].id, "argument must be a simple name".into());
            };
            let range = target.expect_target();
            let pred = args.remove(1);
            quantifier(ids, kind, &var, range, pred)
        }
        Kind::Map | Kind::Filter => {
            let Some(var) = simple_name(&args[0]) else {
                return Expansion::Error(args[0].id, "argument is not an identifier".into());
            };
            let range = target.expect_target();
            Expansion::Expanded(map_or_filter(ids, kind, &var, range, args))
        }
        Kind::OptMap | Kind::OptFlatMap => {
            let Some(var) = simple_name(&args[0]) else {
                let name = if kind == Kind::OptMap {
                    "optMap"
                } else {
                    "optFlatMap"
                };
                return Expansion::Error(
                    args[0].id,
                    format!("{name}() variable name must be a simple identifier"),
                );
            };
            let target = target.expect_target();
            Expansion::Expanded(opt_map(ids, kind, &var, target, args.remove(1)))
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Has,
    All,
    Exists,
    ExistsOne,
    Map,
    Filter,
    OptMap,
    OptFlatMap,
}

trait ExpectTarget {
    fn expect_target(self) -> Expr;
}

impl ExpectTarget for Option<Expr> {
    /// Receiver macros always have a target (their key says so); an empty node otherwise.
    fn expect_target(self) -> Expr {
        self.unwrap_or(Expr::new(0, ExprKind::Unspecified))
    }
}

fn simple_name(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Ident(n) => Some(n.clone()),
        _ => None,
    }
}

fn quantifier(ids: &mut MacroIds<'_>, kind: Kind, var: &str, range: Expr, pred: Expr) -> Expansion {
    let (init, cond, step, result) = match kind {
        Kind::All => {
            let init = ids.lit(Literal::Bool(true));
            let a = ids.ident(ACCUMULATOR);
            let cond = ids.call("@not_strictly_false", vec![a]);
            let a = ids.ident(ACCUMULATOR);
            let step = ids.call("_&&_", vec![a, pred]);
            (init, cond, step, ids.ident(ACCUMULATOR))
        }
        Kind::Exists => {
            let init = ids.lit(Literal::Bool(false));
            let a = ids.ident(ACCUMULATOR);
            let not = ids.call("!_", vec![a]);
            let cond = ids.call("@not_strictly_false", vec![not]);
            let a = ids.ident(ACCUMULATOR);
            let step = ids.call("_||_", vec![a, pred]);
            (init, cond, step, ids.ident(ACCUMULATOR))
        }
        _ => {
            let init = ids.lit(Literal::Int(0));
            let cond = ids.lit(Literal::Bool(true));
            let a = ids.ident(ACCUMULATOR);
            let one = ids.lit(Literal::Int(1));
            let inc = ids.call("_+_", vec![a, one]);
            let a = ids.ident(ACCUMULATOR);
            let step = ids.call("_?_:_", vec![pred, inc, a]);
            let a = ids.ident(ACCUMULATOR);
            let one = ids.lit(Literal::Int(1));
            let result = ids.call("_==_", vec![a, one]);
            (init, cond, step, result)
        }
    };
    Expansion::Expanded(ids.fold(var, range, ACCUMULATOR, init, cond, step, result))
}

fn map_or_filter(
    ids: &mut MacroIds<'_>,
    kind: Kind,
    var: &str,
    range: Expr,
    mut args: Vec<Expr>,
) -> Expr {
    let init = ids.list(vec![]);
    let cond = ids.lit(Literal::Bool(true));
    let accu = ids.ident(ACCUMULATOR);
    let step = if kind == Kind::Filter {
        let filter = args.remove(1);
        let elem = args.remove(0);
        let single = ids.list(vec![elem]);
        let add = ids.call("_+_", vec![accu, single]);
        let accu2 = ids.ident(ACCUMULATOR);
        ids.call("_?_:_", vec![filter, add, accu2])
    } else if args.len() == 3 {
        let f = args.remove(2);
        let filter = args.remove(1);
        let single = ids.list(vec![f]);
        let add = ids.call("_+_", vec![accu, single]);
        let accu2 = ids.ident(ACCUMULATOR);
        ids.call("_?_:_", vec![filter, add, accu2])
    } else {
        let f = args.remove(1);
        let single = ids.list(vec![f]);
        ids.call("_+_", vec![accu, single])
    };
    let result = ids.ident(ACCUMULATOR);
    ids.fold(var, range, ACCUMULATOR, init, cond, step, result)
}

fn opt_map(ids: &mut MacroIds<'_>, kind: Kind, var: &str, target: Expr, body: Expr) -> Expr {
    let has = ids.member("hasValue", target.clone());
    let empty = ids.list(vec![]);
    let value = ids.member("value", target);
    let f = ids.lit(Literal::Bool(false));
    let v = ids.ident(var);
    let fold = ids.fold(UNUSED_ITER_VAR, empty, var, value, f, v, body);
    let present = if kind == Kind::OptMap {
        ids.call("optional.of", vec![fold])
    } else {
        fold
    };
    let none = ids.call("optional.none", vec![]);
    ids.call("_?_:_", vec![has, present, none])
}
