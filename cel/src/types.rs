//! CEL types as the checker sees them, formatted as cel-go's `FormatCELType`, with the
//! checker's assignability and type-parameter substitution rules.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

/// A CEL type.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Int,
    Uint,
    Double,
    Bool,
    String,
    Bytes,
    /// The type of `null` (`null_type`, shown as `null`).
    Null,
    Dyn,
    /// `google.protobuf.Timestamp` (shown as `timestamp`).
    Timestamp,
    /// `google.protobuf.Duration` (shown as `duration`).
    Duration,
    /// The type of an expression that failed to check (shown as `!error!`).
    Error,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    /// A message/object type, compared by name.
    Object(Arc<ObjectType>),
    /// The type of a type value: `type(int)`.
    Type(Box<Type>),
    /// The type `type` itself, with no parameter (the type of the identifier `type`).
    TypeType,
    /// `optional_type(T)`, shown as `optional(T)`.
    Optional(Box<Type>),
    /// Another abstract type with parameters, e.g. `function(...)`.
    Opaque(String, Vec<Type>),
    /// A type parameter of an overload (`A`, `K`, ...) or a checker type variable (`_var0`).
    TypeParam(String),
}

/// A named object type and its fields (property names already escaped as CEL sees them).
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectType {
    name: String,
    fields: BTreeMap<String, Type>,
    /// Whether the environment knows the type's fields (objects made from schemas); objects
    /// that are only names (`kubernetes.URL`, the authorizer types) are not.
    registered: bool,
}

impl ObjectType {
    /// An object type with fields, as Kubernetes' `DeclType` objects are.
    pub fn new(
        name: impl Into<String>,
        fields: impl IntoIterator<Item = (String, Type)>,
    ) -> ObjectType {
        ObjectType {
            name: name.into(),
            fields: fields.into_iter().collect(),
            registered: true,
        }
    }

    /// An object type known only by its name (field selection on it fails as in cel-go).
    pub fn opaque(name: impl Into<String>) -> ObjectType {
        ObjectType {
            name: name.into(),
            fields: BTreeMap::new(),
            registered: false,
        }
    }

    /// The type's name, as messages show it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type of a field (by its escaped name).
    pub fn field(&self, name: &str) -> Option<&Type> {
        self.fields.get(name)
    }

    /// The fields, sorted by name.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Type)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub(crate) fn is_registered(&self) -> bool {
        self.registered
    }
}

/// cel-go's type kinds (only the ones the algorithms distinguish).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dyn,
    Bool,
    Bytes,
    Double,
    Duration,
    Error,
    Int,
    List,
    Map,
    Null,
    Opaque,
    String,
    Struct,
    Timestamp,
    Type,
    TypeParam,
    Uint,
}

impl Type {
    /// `list(elem)`.
    pub fn list(elem: Type) -> Type {
        Type::List(Box::new(elem))
    }

    /// `map(key, value)`.
    pub fn map(key: Type, value: Type) -> Type {
        Type::Map(Box::new(key), Box::new(value))
    }

    /// An object type.
    pub fn object(o: ObjectType) -> Type {
        Type::Object(Arc::new(o))
    }

    pub(crate) fn kind(&self) -> Kind {
        match self {
            Type::Int => Kind::Int,
            Type::Uint => Kind::Uint,
            Type::Double => Kind::Double,
            Type::Bool => Kind::Bool,
            Type::String => Kind::String,
            Type::Bytes => Kind::Bytes,
            Type::Null => Kind::Null,
            Type::Dyn => Kind::Dyn,
            Type::Timestamp => Kind::Timestamp,
            Type::Duration => Kind::Duration,
            Type::Error => Kind::Error,
            Type::List(_) => Kind::List,
            Type::Map(..) => Kind::Map,
            Type::Object(_) => Kind::Struct,
            Type::Type(_) | Type::TypeType => Kind::Type,
            Type::Optional(_) | Type::Opaque(..) => Kind::Opaque,
            Type::TypeParam(_) => Kind::TypeParam,
        }
    }

    pub(crate) fn params(&self) -> Vec<&Type> {
        match self {
            Type::List(e) | Type::Type(e) | Type::Optional(e) => vec![e],
            Type::Map(k, v) => vec![k, v],
            Type::Opaque(_, ps) => ps.iter().collect(),
            _ => vec![],
        }
    }

    /// cel-go's `TypeName()`: the runtime name.
    pub(crate) fn type_name(&self) -> &str {
        match self {
            Type::Int => "int",
            Type::Uint => "uint",
            Type::Double => "double",
            Type::Bool => "bool",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Null => "null_type",
            Type::Dyn => "dyn",
            Type::Timestamp => "google.protobuf.Timestamp",
            Type::Duration => "google.protobuf.Duration",
            Type::Error => "error",
            Type::List(_) => "list",
            Type::Map(..) => "map",
            Type::Object(o) => &o.name,
            Type::Type(_) | Type::TypeType => "type",
            Type::Optional(_) => "optional",
            Type::Opaque(n, _) => n,
            Type::TypeParam(n) => n,
        }
    }

    /// Rebuilds a type of the same shape with new parameters.
    fn with_params(&self, ps: Vec<Type>) -> Type {
        let mut it = ps.into_iter();
        let mut next = || Box::new(it.next().unwrap_or(Type::Dyn));
        match self {
            Type::List(_) => Type::List(next()),
            Type::Map(..) => {
                let k = next();
                Type::Map(k, next())
            }
            Type::Type(_) => Type::Type(next()),
            Type::Optional(_) => Type::Optional(next()),
            Type::Opaque(n, _) => Type::Opaque(n.clone(), it.collect()),
            other => other.clone(),
        }
    }

    fn is_type_internal(&self, other: &Type, check_param_names: bool) -> bool {
        if self.kind() != other.kind() || self.params().len() != other.params().len() {
            return false;
        }
        if (check_param_names || self.kind() != Kind::TypeParam)
            && self.type_name() != other.type_name()
        {
            return false;
        }
        self.params()
            .iter()
            .zip(other.params())
            .all(|(a, b)| a.is_type_internal(b, check_param_names))
    }

    /// cel-go's `IsExactType`.
    pub(crate) fn is_exact(&self, other: &Type) -> bool {
        self.is_type_internal(other, true)
    }

    /// cel-go's `IsEquivalentType` (type parameter names ignored).
    pub(crate) fn is_equivalent(&self, other: &Type) -> bool {
        self.is_type_internal(other, false)
    }

    fn is_dyn_like(&self) -> bool {
        matches!(self.kind(), Kind::Dyn | Kind::TypeParam)
    }

    /// cel-go's `Type.IsAssignableType` (the runtime-type notion, not the checker's).
    pub(crate) fn is_assignable_type(&self, from: &Type) -> bool {
        if self.is_dyn_like() || self == from {
            return true;
        }
        if self.kind() != from.kind()
            || self.type_name() != from.type_name()
            || self.params().len() != from.params().len()
        {
            return false;
        }
        self.params()
            .iter()
            .zip(from.params())
            .all(|(a, b)| a.is_assignable_type(b))
    }
}

impl fmt::Display for Type {
    /// cel-go's `FormatCELType`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Duration => return f.write_str("duration"),
            Type::Error => return f.write_str("!error!"),
            Type::Null => return f.write_str("null"),
            Type::Timestamp => return f.write_str("timestamp"),
            Type::TypeParam(n) => return f.write_str(n),
            Type::Opaque(n, ps) if n == "function" && !ps.is_empty() => {
                let args: Vec<&Type> = ps[1..].iter().collect();
                return f.write_str(&format_function(Some(&ps[0]), &args, false));
            }
            _ => {}
        }
        let ps = self.params();
        if ps.is_empty() {
            return f.write_str(self.type_name());
        }
        let names: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        write!(f, "{}({})", self.type_name(), names.join(", "))
    }
}

/// cel-go's function signature format: `(int, string) -> bool`, or `int.(string)` for a
/// receiver call with no result type.
pub(crate) fn format_function(result: Option<&Type>, args: &[&Type], is_instance: bool) -> String {
    let mut out = String::new();
    let mut args = args;
    if is_instance && !args.is_empty() {
        out.push_str(&args[0].to_string());
        out.push('.');
        args = &args[1..];
    }
    out.push('(');
    let names: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    out.push_str(&names.join(", "));
    out.push(')');
    if let Some(r) = result {
        out.push_str(" -> ");
        out.push_str(&r.to_string());
    }
    out
}

// ---- the checker's rules (cel-go checker/types.go) --------------------------------------

pub(crate) fn is_dyn(t: &Type) -> bool {
    t.kind() == Kind::Dyn
}

pub(crate) fn is_error(t: &Type) -> bool {
    t.kind() == Kind::Error
}

pub(crate) fn is_dyn_or_error(t: &Type) -> bool {
    is_dyn(t) || is_error(t)
}

pub(crate) fn maybe_unwrap_optional(t: &Type) -> (Type, bool) {
    match t {
        Type::Optional(inner) => ((**inner).clone(), true),
        other => (other.clone(), false),
    }
}

/// Type-parameter bindings, keyed by the formatted parameter.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mapping {
    map: HashMap<String, Type>,
}

impl Mapping {
    fn add(&mut self, from: &Type, to: Type) {
        self.map.insert(from.to_string(), to);
    }

    fn find(&self, from: &Type) -> Option<&Type> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(&from.to_string())
    }
}

fn is_equal_or_less_specific(t1: &Type, t2: &Type) -> bool {
    let (k1, k2) = (t1.kind(), t2.kind());
    if is_dyn(t1) || k1 == Kind::TypeParam {
        return true;
    }
    if is_dyn(t2) || k2 == Kind::TypeParam {
        return false;
    }
    if k1 != k2 {
        return false;
    }
    match k1 {
        Kind::Opaque => {
            t1.type_name() == t2.type_name()
                && t1.params().len() == t2.params().len()
                && t1
                    .params()
                    .iter()
                    .zip(t2.params())
                    .all(|(a, b)| is_equal_or_less_specific(a, b))
        }
        Kind::List | Kind::Map => t1
            .params()
            .iter()
            .zip(t2.params())
            .all(|(a, b)| is_equal_or_less_specific(a, b)),
        Kind::Type => true,
        _ => t1.is_exact(t2),
    }
}

pub(crate) fn most_general(t1: &Type, t2: &Type) -> Type {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

fn internal_is_assignable(m: &mut Mapping, t1: &Type, t2: &Type) -> bool {
    let (k1, k2) = (t1.kind(), t2.kind());
    if k2 == Kind::TypeParam {
        let (valid, has_sub) = is_valid_type_substitution(m, t1, t2);
        if valid {
            return true;
        }
        if has_sub {
            return false;
        }
    }
    if k1 == Kind::TypeParam {
        return is_valid_type_substitution(m, t2, t1).0;
    }
    if is_dyn_or_error(t1) || is_dyn_or_error(t2) {
        return true;
    }
    if k1 == Kind::Null {
        return is_assignable_null(t2);
    }
    if k2 == Kind::Null {
        return is_assignable_null(t1);
    }
    match k1 {
        Kind::Bool
        | Kind::Bytes
        | Kind::Double
        | Kind::Int
        | Kind::String
        | Kind::Uint
        | Kind::Duration
        | Kind::Timestamp
        | Kind::Struct => t1.is_assignable_type(t2),
        Kind::Type => k2 == Kind::Type,
        Kind::Opaque | Kind::List | Kind::Map => {
            k1 == k2
                && t1.type_name() == t2.type_name()
                && t1.params().len() == t2.params().len()
                && t1
                    .params()
                    .iter()
                    .zip(t2.params())
                    .all(|(a, b)| internal_is_assignable(m, a, b))
        }
        _ => false,
    }
}

fn is_valid_type_substitution(m: &mut Mapping, t1: &Type, t2: &Type) -> (bool, bool) {
    if t1.kind() == t2.kind() && t1.is_exact(t2) {
        return (true, true);
    }
    if let Some(t2_sub) = m.find(t2).cloned() {
        if t1.kind() == t2_sub.kind() && t1.is_exact(&t2_sub) {
            return (true, true);
        }
        if internal_is_assignable(m, t1, &t2_sub) {
            let t2_new = most_general(t1, &t2_sub);
            if not_referenced_in(m, t2, &t2_new) {
                m.add(t2, t2_new);
            }
            return (true, true);
        }
        return (false, true);
    }
    if not_referenced_in(m, t2, t1) {
        m.add(t2, t1.clone());
        return (true, false);
    }
    (false, false)
}

fn is_assignable_null(t: &Type) -> bool {
    matches!(
        t.kind(),
        Kind::Opaque | Kind::Struct | Kind::Duration | Kind::Timestamp
    ) || t.is_assignable_type(&Type::Null)
}

fn not_referenced_in(m: &Mapping, t: &Type, within: &Type) -> bool {
    if t.is_exact(within) {
        return false;
    }
    match within.kind() {
        Kind::TypeParam => match m.find(within) {
            None => true,
            Some(sub) => not_referenced_in(m, t, &sub.clone()),
        },
        Kind::Opaque | Kind::List | Kind::Map => {
            within.params().iter().all(|p| not_referenced_in(m, t, p))
        }
        _ => true,
    }
}

/// Whether `t2` can be used where `t1` is wanted; on success, the bindings made.
pub(crate) fn is_assignable(m: &Mapping, t1: &Type, t2: &Type) -> Option<Mapping> {
    let mut c = m.clone();
    internal_is_assignable(&mut c, t1, t2).then_some(c)
}

pub(crate) fn is_assignable_list(m: &Mapping, l1: &[Type], l2: &[Type]) -> Option<Mapping> {
    if l1.len() != l2.len() {
        return None;
    }
    let mut c = m.clone();
    l1.iter()
        .zip(l2)
        .all(|(a, b)| internal_is_assignable(&mut c, a, b))
        .then_some(c)
}

/// Replaces bound type parameters (and, if asked, unbound ones by `dyn`).
pub(crate) fn substitute(m: &Mapping, t: &Type, type_param_to_dyn: bool) -> Type {
    if let Some(sub) = m.find(t) {
        let sub = sub.clone();
        return substitute(m, &sub, type_param_to_dyn);
    }
    if type_param_to_dyn && t.kind() == Kind::TypeParam {
        return Type::Dyn;
    }
    match t.kind() {
        Kind::Opaque | Kind::List | Kind::Map | Kind::Type if !t.params().is_empty() => {
            let ps = t
                .params()
                .into_iter()
                .map(|p| substitute(m, p, type_param_to_dyn))
                .collect();
            t.with_params(ps)
        }
        _ => t.clone(),
    }
}

/// Replaces the named type parameters (an overload's fresh type variables).
pub(crate) fn replace_params(t: &Type, bindings: &HashMap<String, Type>) -> Type {
    if bindings.is_empty() {
        return t.clone();
    }
    if let Type::TypeParam(n) = t {
        return bindings.get(n).cloned().unwrap_or_else(|| t.clone());
    }
    let ps = t.params();
    if ps.is_empty() {
        return t.clone();
    }
    let ps = ps
        .into_iter()
        .map(|p| replace_params(p, bindings))
        .collect();
    t.with_params(ps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        let obj = Type::object(ObjectType::new("Deployment.spec", []));
        let cases: Vec<(Type, &str)> = vec![
            (Type::Int, "int"),
            (Type::Uint, "uint"),
            (Type::Null, "null"),
            (Type::Timestamp, "timestamp"),
            (Type::Duration, "duration"),
            (Type::Error, "!error!"),
            (Type::list(Type::String), "list(string)"),
            (
                Type::map(Type::String, Type::list(Type::Int)),
                "map(string, list(int))",
            ),
            (Type::Type(Box::new(Type::Int)), "type(int)"),
            (Type::TypeType, "type"),
            (Type::Optional(Box::new(Type::Dyn)), "optional(dyn)"),
            (obj, "Deployment.spec"),
            (Type::TypeParam("_var0".into()), "_var0"),
            (
                Type::Opaque("function".into(), vec![Type::Bool, Type::Int, Type::Int]),
                "(int, int) -> bool",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(t.to_string(), want);
        }
        assert_eq!(
            format_function(None, &[&Type::Int, &Type::String], true),
            "int.(string)"
        );
        assert_eq!(
            format_function(None, &[&Type::Int, &Type::String], false),
            "(int, string)"
        );
    }

    #[test]
    fn assignability() {
        let m = Mapping::default();
        let a = Type::TypeParam("A".into());
        let cases: Vec<(Type, Type, bool)> = vec![
            (Type::Int, Type::Int, true),
            (Type::Int, Type::String, false),
            (Type::Int, Type::Dyn, true),
            (Type::Dyn, Type::Int, true),
            (Type::Error, Type::Int, true),
            (Type::list(Type::Int), Type::list(Type::Dyn), true),
            (Type::list(Type::Int), Type::list(Type::String), false),
            (
                Type::Type(Box::new(Type::Int)),
                Type::Type(Box::new(Type::String)),
                true,
            ),
            (Type::Timestamp, Type::Null, true),
            (Type::Int, Type::Null, false),
            (Type::object(ObjectType::opaque("a")), Type::Null, true),
            (a.clone(), Type::Int, true),
        ];
        for (t1, t2, want) in cases {
            assert_eq!(is_assignable(&m, &t1, &t2).is_some(), want, "{t1} <- {t2}");
        }
        // Binding a parameter: A := int, then A cannot take a string.
        let m = is_assignable(&m, &a, &Type::Int).unwrap();
        assert!(is_assignable(&m, &a, &Type::String).is_none());
        assert_eq!(
            substitute(&m, &Type::list(a.clone()), false),
            Type::list(Type::Int)
        );
        assert_eq!(
            substitute(&Mapping::default(), &Type::list(a), true),
            Type::list(Type::Dyn)
        );
    }
}
