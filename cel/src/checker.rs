//! The type checker (cel-go's `checker/checker.go`): the same resolution rules, the same
//! messages at the same places, and errors that do not cascade (an erroneous sub-expression
//! has type `!error!`, which is assignable to everything).

use std::collections::HashMap;

use crate::ast::{Expr, ExprKind, Literal, ParsedExpr};
use crate::decls::Function;
use crate::env::Env;
use crate::issues::Issues;
use crate::types::{
    format_function, is_assignable, is_assignable_list, is_dyn, is_dyn_or_error, is_error,
    maybe_unwrap_optional, most_general, replace_params, substitute, Kind, Mapping, Type,
};

pub(crate) struct Checker<'a> {
    env: &'a Env,
    positions: &'a [i32],
    issues: &'a mut Issues,
    scopes: Vec<HashMap<String, Type>>,
    mappings: Mapping,
    free_type_vars: usize,
    types: HashMap<i64, Type>,
}

/// Checks a parsed expression, resolving names in place; returns each node's final type.
pub(crate) fn check(env: &Env, parsed: &mut ParsedExpr, issues: &mut Issues) -> HashMap<i64, Type> {
    let positions = parsed.positions.clone();
    let mut c = Checker {
        env,
        positions: &positions,
        issues,
        scopes: Vec::new(),
        mappings: Mapping::default(),
        free_type_vars: 0,
        types: HashMap::new(),
    };
    c.check(&mut parsed.expr);
    let mut out = HashMap::new();
    for (id, t) in &c.types {
        out.insert(*id, substitute(&c.mappings, t, true));
    }
    out
}

impl Checker<'_> {
    fn offset(&self, id: i64) -> Option<i32> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.positions.get(i))
            .copied()
            .filter(|o| *o >= 0)
    }

    fn error(&mut self, id: i64, msg: String) {
        let off = self.offset(id);
        self.issues.report_at_offset(off, msg);
    }

    fn set_type(&mut self, id: i64, t: Type) {
        // A node checked twice (shared by a macro expansion) keeps its first type.
        self.types.entry(id).or_insert(t);
    }

    fn get_type(&self, id: i64) -> Type {
        self.types.get(&id).cloned().unwrap_or(Type::Error)
    }

    fn new_type_var(&mut self) -> Type {
        let t = Type::TypeParam(format!("_var{}", self.free_type_vars));
        self.free_type_vars += 1;
        t
    }

    fn assignable(&mut self, t1: &Type, t2: &Type) -> bool {
        match is_assignable(&self.mappings, t1, t2) {
            Some(m) => {
                self.mappings = m;
                true
            }
            None => false,
        }
    }

    fn type_mismatch(&mut self, id: i64, expected: &Type, actual: &Type) {
        self.error(
            id,
            format!("expected type '{expected}' but found '{actual}'"),
        );
    }

    fn lookup_ident(&self, name: &str) -> Option<(String, Type)> {
        let c = name.strip_prefix('.').unwrap_or(name);
        for scope in self.scopes.iter().rev() {
            if let Some(t) = scope.get(c) {
                return Some((c.to_string(), t.clone()));
            }
        }
        self.env.lookup_ident(name)
    }

    fn check(&mut self, e: &mut Expr) {
        let id = e.id;
        match &mut e.kind {
            ExprKind::Literal(l) => {
                let t = match l {
                    Literal::Bool(_) => Type::Bool,
                    Literal::Int(_) => Type::Int,
                    Literal::Uint(_) => Type::Uint,
                    Literal::Double(_) => Type::Double,
                    Literal::String(_) => Type::String,
                    Literal::Bytes(_) => Type::Bytes,
                    Literal::Null => Type::Null,
                };
                self.set_type(id, t);
            }
            ExprKind::Ident(name) => match self.lookup_ident(name) {
                Some((resolved, t)) => {
                    *name = resolved;
                    self.set_type(id, t);
                }
                None => {
                    let msg = format!("undeclared reference to '{name}' (in container '')");
                    self.set_type(id, Type::Error);
                    self.error(id, msg);
                }
            },
            ExprKind::Select { .. } => self.check_select(e),
            ExprKind::Call { .. } => self.check_call(e),
            ExprKind::List { .. } => self.check_list(e),
            ExprKind::Map { .. } => self.check_map(e),
            ExprKind::Struct { .. } => self.check_message(e),
            ExprKind::Comprehension(_) => self.check_comprehension(e),
            ExprKind::Unspecified => {
                self.error(id, "unrecognized ast type: *expr.Expr".into());
            }
        }
    }

    fn check_select(&mut self, e: &mut Expr) {
        if let Some(q) = e.qualified_name() {
            if let Some((resolved, t)) = self.lookup_ident(&q) {
                self.set_type(e.id, t);
                e.kind = ExprKind::Ident(resolved);
                return;
            }
        }
        let id = e.id;
        let ExprKind::Select {
            operand,
            field,
            test_only,
        } = &mut e.kind
        else {
            return;
        };
        let test_only = *test_only;
        let field = field.clone();
        let mut result = self.check_select_field(id, operand, &field, false);
        if test_only {
            result = Type::Bool;
        }
        let t = substitute(&self.mappings, &result, false);
        self.set_type(id, t);
    }

    fn check_select_field(
        &mut self,
        id: i64,
        operand: &mut Expr,
        field: &str,
        optional: bool,
    ) -> Type {
        self.check(operand);
        let operand_type = substitute(&self.mappings, &self.get_type(operand.id), false);
        let (target, is_opt) = maybe_unwrap_optional(&operand_type);
        let result = match target.kind() {
            Kind::Map => target.params()[1].clone(),
            Kind::Struct => self
                .lookup_field_type(id, target.type_name(), field)
                .unwrap_or(Type::Error),
            Kind::TypeParam => {
                self.assignable(&Type::Dyn, &target);
                Type::Dyn
            }
            _ => {
                if !is_dyn_or_error(&target) {
                    self.error(
                        id,
                        format!("type '{target}' does not support field selection"),
                    );
                }
                Type::Dyn
            }
        };
        if is_opt || optional {
            Type::Optional(Box::new(result))
        } else {
            result
        }
    }

    fn lookup_field_type(&mut self, id: i64, type_name: &str, field: &str) -> Option<Type> {
        let Some(obj) = self.env.types.get(type_name).cloned() else {
            self.error(id, format!("unexpected failed resolution of '{type_name}'"));
            return None;
        };
        match obj.field(field) {
            Some(t) => Some(t.clone()),
            None => {
                self.error(id, format!("undefined field '{field}'"));
                None
            }
        }
    }

    fn check_opt_select(&mut self, e: &mut Expr) {
        let id = e.id;
        let ExprKind::Call { args, .. } = &mut e.kind else {
            return;
        };
        let field = match args.get(1).map(|a| &a.kind) {
            Some(ExprKind::Literal(Literal::String(s))) => s.clone(),
            _ => {
                if let Some(f) = args.get(1) {
                    self.error(f.id, "unsupported optional field selection".into());
                }
                return;
            }
        };
        let Some(operand) = args.get_mut(0) else {
            return;
        };
        let result = self.check_select_field(id, operand, &field, true);
        let t = substitute(&self.mappings, &result, false);
        self.set_type(id, t);
    }

    fn check_call(&mut self, e: &mut Expr) {
        let id = e.id;
        let is_opt_select =
            matches!(&e.kind, ExprKind::Call { function, .. } if function == "_?._");
        if is_opt_select {
            return self.check_opt_select(e);
        }
        let ExprKind::Call {
            target,
            function,
            args,
        } = &mut e.kind
        else {
            return;
        };
        for a in args.iter_mut() {
            self.check(a);
        }
        let env = self.env;
        let Some(tgt) = target else {
            let Some(f) = env.lookup_function(function) else {
                let msg = format!("undeclared reference to '{function}' (in container '')");
                self.error(id, msg);
                self.set_type(id, Type::Error);
                return;
            };
            *function = f.name.clone();
            let arg_types: Vec<Type> = args.iter().map(|a| self.get_type(a.id)).collect();
            let arg_ids: Vec<i64> = args.iter().map(|a| a.id).collect();
            self.resolve(id, f, false, arg_types, &arg_ids);
            return;
        };
        if let Some(q) = tgt.qualified_name() {
            if let Some(f) = env.lookup_function(&format!("{q}.{function}")) {
                *target = None;
                *function = f.name.clone();
                let arg_types: Vec<Type> = args.iter().map(|a| self.get_type(a.id)).collect();
                let arg_ids: Vec<i64> = args.iter().map(|a| a.id).collect();
                self.resolve(id, f, false, arg_types, &arg_ids);
                return;
            }
        }
        self.check(tgt);
        match env.lookup_function(function) {
            Some(f) => {
                let mut arg_types = vec![self.get_type(tgt.id)];
                arg_types.extend(args.iter().map(|a| self.get_type(a.id)));
                let arg_ids: Vec<i64> = args.iter().map(|a| a.id).collect();
                self.resolve(id, f, true, arg_types, &arg_ids);
            }
            None => {
                self.set_type(id, Type::Error);
                let msg = format!("undeclared reference to '{function}' (in container '')");
                self.error(id, msg);
            }
        }
    }

    /// Overload resolution (cel-go's `resolveOverload`); sets the call's type.
    fn resolve(
        &mut self,
        id: i64,
        f: &Function,
        member: bool,
        mut arg_types: Vec<Type>,
        arg_ids: &[i64],
    ) {
        let mut result: Option<Type> = None;
        for o in &f.overloads {
            if o.member != member {
                continue;
            }
            if f.name == "_&&_" || f.name == "_||_" {
                let mut failed = false;
                for (i, at) in arg_types.clone().iter().enumerate() {
                    if !self.assignable(at, &Type::Bool) {
                        let aid = arg_ids.get(i).copied().unwrap_or(id);
                        self.type_mismatch(aid, &Type::Bool, at);
                        failed = true;
                    }
                }
                self.set_type(id, if failed { Type::Error } else { Type::Bool });
                return;
            }
            let params = o.type_params();
            let mut bindings: HashMap<String, Type> = HashMap::new();
            for p in &params {
                let v = self.new_type_var();
                bindings.insert(p.clone(), v);
            }
            let cand: Vec<Type> = o
                .args
                .iter()
                .map(|a| replace_params(a, &bindings))
                .collect();
            let res = replace_params(&o.result, &bindings);
            if let Some(m) = is_assignable_list(&self.mappings, &arg_types, &cand) {
                self.mappings = m;
                let fn_result = substitute(&self.mappings, &res, false);
                result = Some(match result {
                    None => fn_result,
                    Some(r) if !is_dyn(&r) && !fn_result.is_exact(&r) => Type::Dyn,
                    Some(r) => r,
                });
            }
        }
        match result {
            Some(t) => self.set_type(id, t),
            None => {
                for t in arg_types.iter_mut() {
                    *t = substitute(&self.mappings, t, true);
                }
                let refs: Vec<&Type> = arg_types.iter().collect();
                let sig = format_function(None, &refs, member);
                self.error(
                    id,
                    format!(
                        "found no matching overload for '{}' applied to '{sig}'",
                        f.name
                    ),
                );
                self.set_type(id, Type::Error);
            }
        }
    }

    fn join_types(&mut self, previous: Option<Type>, current: Type) -> Type {
        match previous {
            None => current,
            Some(p) => {
                if self.assignable(&p, &current) {
                    most_general(&p, &current)
                } else {
                    Type::Dyn
                }
            }
        }
    }

    /// The type of an optional entry's value, reporting a non-optional, non-dyn value.
    fn optional_entry_type(&mut self, id: i64, t: Type) -> Type {
        let (inner, is_opt) = maybe_unwrap_optional(&t);
        if !is_opt && !is_dyn(&inner) {
            self.type_mismatch(id, &Type::Optional(Box::new(inner.clone())), &inner);
        }
        inner
    }

    fn check_list(&mut self, e: &mut Expr) {
        let id = e.id;
        let ExprKind::List {
            elements,
            optional_indices,
        } = &mut e.kind
        else {
            return;
        };
        let mut elems: Option<Type> = None;
        for (i, el) in elements.iter_mut().enumerate() {
            self.check(el);
            let mut t = self.get_type(el.id);
            if optional_indices.contains(&i) {
                t = self.optional_entry_type(el.id, t);
            }
            elems = Some(self.join_types(elems, t));
        }
        let elem = match elems {
            Some(t) => t,
            None => self.new_type_var(),
        };
        self.set_type(id, Type::list(elem));
    }

    fn check_map(&mut self, e: &mut Expr) {
        let id = e.id;
        let ExprKind::Map { entries } = &mut e.kind else {
            return;
        };
        let (mut kt, mut vt): (Option<Type>, Option<Type>) = (None, None);
        for en in entries.iter_mut() {
            self.check(&mut en.key);
            let k = self.get_type(en.key.id);
            kt = Some(self.join_types(kt, k));
            self.check(&mut en.value);
            let mut v = self.get_type(en.value.id);
            if en.optional {
                v = self.optional_entry_type(en.value.id, v);
            }
            vt = Some(self.join_types(vt, v));
        }
        let (k, v) = match (kt, vt) {
            (Some(k), Some(v)) => (k, v),
            _ => (self.new_type_var(), self.new_type_var()),
        };
        self.set_type(id, Type::map(k, v));
    }

    fn check_message(&mut self, e: &mut Expr) {
        let id = e.id;
        let ExprKind::Struct { name, fields } = &mut e.kind else {
            return;
        };
        let Some((resolved, ident_type)) = self.lookup_ident(name) else {
            let msg = format!("undeclared reference to '{name}' (in container '')");
            self.error(id, msg);
            self.set_type(id, Type::Error);
            return;
        };
        *name = resolved;
        let mut result = Type::Error;
        let mut type_name = name.clone();
        if !is_error(&ident_type) {
            match &ident_type {
                Type::Type(inner) => match &**inner {
                    Type::Object(o) => {
                        type_name = o.name().to_string();
                        result = (**inner).clone();
                    }
                    other => {
                        self.error(id, format!("'{}' is not a message type", other.type_name()));
                    }
                },
                other => self.error(id, format!("'{}' is not a type", other.type_name())),
            }
        }
        self.set_type(id, result);
        for f in fields.iter_mut() {
            self.check(&mut f.value);
            let field_type = self
                .lookup_field_type(f.id, &type_name, &f.field)
                .unwrap_or(Type::Error);
            let mut vt = self.get_type(f.value.id);
            if f.optional {
                vt = self.optional_entry_type(f.value.id, vt);
            }
            if !self.assignable(&field_type, &vt) {
                let msg = format!(
                    "expected type of field '{}' is '{field_type}' but provided type is '{vt}'",
                    f.field
                );
                self.error(f.id, msg);
            }
        }
    }

    fn check_comprehension(&mut self, e: &mut Expr) {
        let id = e.id;
        let ExprKind::Comprehension(c) = &mut e.kind else {
            return;
        };
        self.check(&mut c.iter_range);
        self.check(&mut c.accu_init);
        let accu_type = self.get_type(c.accu_init.id);
        let range_type = substitute(&self.mappings, &self.get_type(c.iter_range.id), false);
        let var_type = match range_type.kind() {
            Kind::List | Kind::Map => range_type.params()[0].clone(),
            Kind::Dyn | Kind::Error | Kind::TypeParam => {
                self.assignable(&Type::Dyn, &range_type);
                Type::Dyn
            }
            _ => {
                self.error(
                    c.iter_range.id,
                    format!(
                        "expression of type '{range_type}' cannot be range of a comprehension (must be list, map, or dynamic)"
                    ),
                );
                Type::Error
            }
        };
        self.scopes
            .push(HashMap::from([(c.accu_var.clone(), accu_type.clone())]));
        self.scopes
            .push(HashMap::from([(c.iter_var.clone(), var_type)]));
        self.check(&mut c.loop_condition);
        self.assert_type(c.loop_condition.id, &Type::Bool);
        self.check(&mut c.loop_step);
        self.assert_type(c.loop_step.id, &accu_type);
        self.scopes.pop();
        self.check(&mut c.result);
        self.scopes.pop();
        let t = substitute(&self.mappings, &self.get_type(c.result.id), false);
        self.set_type(id, t);
    }

    fn assert_type(&mut self, id: i64, t: &Type) {
        let actual = self.get_type(id);
        if !self.assignable(t, &actual) {
            self.type_mismatch(id, t, &actual);
        }
    }
}
