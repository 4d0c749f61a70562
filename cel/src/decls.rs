//! Function declarations: cel-go's standard library (`common/stdlib`), the optional-types
//! library, and the cel-go extension libraries Kubernetes 1.29 enables (strings v2, sets).

use crate::types::Type;

/// One overload of a function.
#[derive(Clone, Debug)]
pub(crate) struct Overload {
    pub(crate) id: String,
    /// Receiver-style (`x.f(y)`): the first argument is the receiver.
    pub(crate) member: bool,
    pub(crate) args: Vec<Type>,
    pub(crate) result: Type,
}

impl Overload {
    /// The type parameter names appearing in the signature.
    pub(crate) fn type_params(&self) -> Vec<String> {
        let mut names = Vec::new();
        for t in self.args.iter().chain(std::iter::once(&self.result)) {
            collect_params(t, &mut names);
        }
        names
    }
}

fn collect_params(t: &Type, out: &mut Vec<String>) {
    if let Type::TypeParam(n) = t {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    for p in t.params() {
        collect_params(p, out);
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) overloads: Vec<Overload>,
}

pub(crate) fn g(id: &str, args: &[Type], result: Type) -> Overload {
    Overload {
        id: id.into(),
        member: false,
        args: args.to_vec(),
        result,
    }
}

pub(crate) fn m(id: &str, args: &[Type], result: Type) -> Overload {
    Overload {
        id: id.into(),
        member: true,
        args: args.to_vec(),
        result,
    }
}

pub(crate) fn func(name: &str, overloads: Vec<Overload>) -> Function {
    Function {
        name: name.into(),
        overloads,
    }
}

fn p(n: &str) -> Type {
    Type::TypeParam(n.into())
}

fn list(t: Type) -> Type {
    Type::list(t)
}

/// The identifiers the standard library declares for types (`int` is `type(int)`, ...).
pub(crate) fn standard_type_idents() -> Vec<(String, Type)> {
    let types = [
        Type::Bool,
        Type::Bytes,
        Type::Double,
        Type::Duration,
        Type::Int,
        list(p("A")),
        Type::map(p("A"), p("B")),
        Type::Null,
        Type::String,
        Type::Timestamp,
        Type::TypeType,
        Type::Uint,
    ];
    types
        .into_iter()
        .map(|t| (t.type_name().to_string(), Type::Type(Box::new(t))))
        .collect()
}

/// Six comparison overloads families over the ordered types, with cross-type numeric ones.
fn comparison(name: &str, prefix: &str) -> Function {
    #[allow(unused_imports)]
    use Type::{Bool, Bytes, Double, Duration, Dyn, Int, Null, Optional, String, Timestamp, Uint};
    let b = || Bool;
    let pairs: [(&str, Type, Type); 14] = [
        ("bool", Bool, Bool),
        ("int64", Int, Int),
        ("int64_double", Int, Double),
        ("int64_uint64", Int, Uint),
        ("uint64", Uint, Uint),
        ("uint64_double", Uint, Double),
        ("uint64_int64", Uint, Int),
        ("double", Double, Double),
        ("double_int64", Double, Int),
        ("double_uint64", Double, Uint),
        ("string", String, String),
        ("bytes", Bytes, Bytes),
        ("timestamp", Timestamp, Timestamp),
        ("duration", Duration, Duration),
    ];
    let overloads = pairs
        .into_iter()
        .map(|(s, l, r)| g(&format!("{prefix}_{s}"), &[l, r], b()))
        .collect();
    func(name, overloads)
}

/// cel-go's standard functions (declarations only).
pub(crate) fn standard_functions() -> Vec<Function> {
    let mut fns = operator_functions();
    fns.extend(conversion_functions());
    fns.extend(time_functions());
    fns
}

/// The operators (`_+_`, `_[_]`, `@in`, ...).
fn operator_functions() -> Vec<Function> {
    #[allow(unused_imports)]
    use Type::{Bool, Bytes, Double, Duration, Dyn, Int, Null, Optional, String, Timestamp, Uint};
    let a = || p("A");
    let la = || list(p("A"));
    let mab = || Type::map(p("A"), p("B"));
    vec![
        func("_?_:_", vec![g("conditional", &[Bool, a(), a()], a())]),
        func("_&&_", vec![g("logical_and", &[Bool, Bool], Bool)]),
        func("_||_", vec![g("logical_or", &[Bool, Bool], Bool)]),
        func("!_", vec![g("logical_not", &[Bool], Bool)]),
        func(
            "@not_strictly_false",
            vec![g("not_strictly_false", &[Bool], Bool)],
        ),
        func("_==_", vec![g("equals", &[a(), a()], Bool)]),
        func("_!=_", vec![g("not_equals", &[a(), a()], Bool)]),
        func(
            "_+_",
            vec![
                g("add_bytes", &[Bytes, Bytes], Bytes),
                g("add_double", &[Double, Double], Double),
                g("add_duration_duration", &[Duration, Duration], Duration),
                g("add_duration_timestamp", &[Duration, Timestamp], Timestamp),
                g("add_timestamp_duration", &[Timestamp, Duration], Timestamp),
                g("add_int64", &[Int, Int], Int),
                g("add_list", &[la(), la()], la()),
                g("add_string", &[String, String], String),
                g("add_uint64", &[Uint, Uint], Uint),
            ],
        ),
        func(
            "_/_",
            vec![
                g("divide_double", &[Double, Double], Double),
                g("divide_int64", &[Int, Int], Int),
                g("divide_uint64", &[Uint, Uint], Uint),
            ],
        ),
        func(
            "_%_",
            vec![
                g("modulo_int64", &[Int, Int], Int),
                g("modulo_uint64", &[Uint, Uint], Uint),
            ],
        ),
        func(
            "_*_",
            vec![
                g("multiply_double", &[Double, Double], Double),
                g("multiply_int64", &[Int, Int], Int),
                g("multiply_uint64", &[Uint, Uint], Uint),
            ],
        ),
        func(
            "-_",
            vec![
                g("negate_double", &[Double], Double),
                g("negate_int64", &[Int], Int),
            ],
        ),
        func(
            "_-_",
            vec![
                g("subtract_double", &[Double, Double], Double),
                g(
                    "subtract_duration_duration",
                    &[Duration, Duration],
                    Duration,
                ),
                g("subtract_int64", &[Int, Int], Int),
                g(
                    "subtract_timestamp_duration",
                    &[Timestamp, Duration],
                    Timestamp,
                ),
                g(
                    "subtract_timestamp_timestamp",
                    &[Timestamp, Timestamp],
                    Duration,
                ),
                g("subtract_uint64", &[Uint, Uint], Uint),
            ],
        ),
        comparison("_<_", "less"),
        comparison("_<=_", "less_equals"),
        comparison("_>_", "greater"),
        comparison("_>=_", "greater_equals"),
        func(
            "_[_]",
            vec![
                g("index_list", &[la(), Int], a()),
                g("index_map", &[mab(), a()], p("B")),
            ],
        ),
        func(
            "@in",
            vec![
                g("in_list", &[a(), la()], Bool),
                g("in_map", &[a(), mab()], Bool),
            ],
        ),
    ]
}

/// `size`, `type`, the conversions, and the string functions.
fn conversion_functions() -> Vec<Function> {
    #[allow(unused_imports)]
    use Type::{Bool, Bytes, Double, Duration, Dyn, Int, Null, Optional, String, Timestamp, Uint};
    let a = || p("A");
    let la = || list(p("A"));
    let mab = || Type::map(p("A"), p("B"));
    vec![
        func(
            "size",
            vec![
                g("size_bytes", &[Bytes], Int),
                m("bytes_size", &[Bytes], Int),
                g("size_list", &[la()], Int),
                m("list_size", &[la()], Int),
                g("size_map", &[mab()], Int),
                m("map_size", &[mab()], Int),
                g("size_string", &[String], Int),
                m("string_size", &[String], Int),
            ],
        ),
        func("type", vec![g("type", &[a()], Type::Type(Box::new(a())))]),
        func(
            "bool",
            vec![
                g("bool_to_bool", &[Bool], Bool),
                g("string_to_bool", &[String], Bool),
            ],
        ),
        func(
            "bytes",
            vec![
                g("bytes_to_bytes", &[Bytes], Bytes),
                g("string_to_bytes", &[String], Bytes),
            ],
        ),
        func(
            "double",
            vec![
                g("double_to_double", &[Double], Double),
                g("int64_to_double", &[Int], Double),
                g("string_to_double", &[String], Double),
                g("uint64_to_double", &[Uint], Double),
            ],
        ),
        func(
            "duration",
            vec![
                g("duration_to_duration", &[Duration], Duration),
                g("int64_to_duration", &[Int], Duration),
                g("string_to_duration", &[String], Duration),
            ],
        ),
        func("dyn", vec![g("to_dyn", &[a()], Dyn)]),
        func(
            "int",
            vec![
                g("int64_to_int64", &[Int], Int),
                g("double_to_int64", &[Double], Int),
                g("duration_to_int64", &[Duration], Int),
                g("string_to_int64", &[String], Int),
                g("timestamp_to_int64", &[Timestamp], Int),
                g("uint64_to_int64", &[Uint], Int),
            ],
        ),
        func(
            "string",
            vec![
                g("string_to_string", &[String], String),
                g("bool_to_string", &[Bool], String),
                g("bytes_to_string", &[Bytes], String),
                g("double_to_string", &[Double], String),
                g("duration_to_string", &[Duration], String),
                g("int64_to_string", &[Int], String),
                g("timestamp_to_string", &[Timestamp], String),
                g("uint64_to_string", &[Uint], String),
            ],
        ),
        func(
            "timestamp",
            vec![
                g("timestamp_to_timestamp", &[Timestamp], Timestamp),
                g("int64_to_timestamp", &[Int], Timestamp),
                g("string_to_timestamp", &[String], Timestamp),
            ],
        ),
        func(
            "uint",
            vec![
                g("uint64_to_uint64", &[Uint], Uint),
                g("double_to_uint64", &[Double], Uint),
                g("int64_to_uint64", &[Int], Uint),
                g("string_to_uint64", &[String], Uint),
            ],
        ),
        func(
            "contains",
            vec![m("contains_string", &[String, String], Bool)],
        ),
        func(
            "endsWith",
            vec![m("ends_with_string", &[String, String], Bool)],
        ),
        func(
            "startsWith",
            vec![m("starts_with_string", &[String, String], Bool)],
        ),
        func(
            "matches",
            vec![
                g("matches", &[String, String], Bool),
                m("matches_string", &[String, String], Bool),
            ],
        ),
    ]
}

/// The timestamp and duration accessors (`getFullYear`, `getHours`, ...).
fn time_functions() -> Vec<Function> {
    #[allow(unused_imports)]
    use Type::{Duration, Int, String, Timestamp};
    let mut fns = Vec::new();
    let time_fns: [(&str, &str, &str, bool); 10] = [
        (
            "getFullYear",
            "timestamp_to_year",
            "timestamp_to_year_with_tz",
            false,
        ),
        (
            "getMonth",
            "timestamp_to_month",
            "timestamp_to_month_with_tz",
            false,
        ),
        (
            "getDayOfYear",
            "timestamp_to_day_of_year",
            "timestamp_to_day_of_year_with_tz",
            false,
        ),
        (
            "getDayOfMonth",
            "timestamp_to_day_of_month",
            "timestamp_to_day_of_month_with_tz",
            false,
        ),
        (
            "getDate",
            "timestamp_to_day_of_month_1_based",
            "timestamp_to_day_of_month_1_based_with_tz",
            false,
        ),
        (
            "getDayOfWeek",
            "timestamp_to_day_of_week",
            "timestamp_to_day_of_week_with_tz",
            false,
        ),
        (
            "getHours",
            "timestamp_to_hours",
            "timestamp_to_hours_with_tz",
            true,
        ),
        (
            "getMinutes",
            "timestamp_to_minutes",
            "timestamp_to_minutes_with_tz",
            true,
        ),
        (
            "getSeconds",
            "timestamp_to_seconds",
            "timestamp_to_seconds_with_tz",
            true,
        ),
        (
            "getMilliseconds",
            "timestamp_to_milliseconds",
            "timestamp_to_milliseconds_with_tz",
            true,
        ),
    ];
    for (name, id, id_tz, with_duration) in time_fns {
        let mut ovs = vec![
            m(id, &[Timestamp], Int),
            m(id_tz, &[Timestamp, String], Int),
        ];
        if with_duration {
            let did = format!(
                "duration_to_{}",
                name.trim_start_matches("get").to_lowercase()
            );
            ovs.push(m(&did, &[Duration], Int));
        }
        fns.push(func(name, ovs));
    }
    fns
}

/// cel-go's optional types library (`cel.OptionalTypes()`).
pub(crate) fn optional_functions() -> Vec<Function> {
    #[allow(unused_imports)]
    use Type::{Bool, Bytes, Double, Duration, Dyn, Int, Null, Optional, String, Timestamp, Uint};
    let v = || p("V");
    let ov = || Optional(Box::new(p("V")));
    let lv = || list(p("V"));
    let mkv = || Type::map(p("K"), p("V"));
    vec![
        func("optional.of", vec![g("optional_of", &[v()], ov())]),
        func(
            "optional.ofNonZeroValue",
            vec![g("optional_ofNonZeroValue", &[v()], ov())],
        ),
        func("optional.none", vec![g("optional_none", &[], ov())]),
        func("value", vec![m("optional_value", &[ov()], v())]),
        func("hasValue", vec![m("optional_hasValue", &[ov()], Bool)]),
        func("or", vec![m("optional_or_optional", &[ov(), ov()], ov())]),
        func(
            "orValue",
            vec![m("optional_orValue_value", &[ov(), v()], v())],
        ),
        func(
            "_?._",
            vec![g("select_optional_field", &[Dyn, String], ov())],
        ),
        func(
            "_[?_]",
            vec![
                g("list_optindex_optional_int", &[lv(), Int], ov()),
                g(
                    "optional_list_optindex_optional_int",
                    &[Optional(Box::new(lv())), Int],
                    ov(),
                ),
                g("map_optindex_optional_value", &[mkv(), p("K")], ov()),
                g(
                    "optional_map_optindex_optional_value",
                    &[Optional(Box::new(mkv())), p("K")],
                    ov(),
                ),
            ],
        ),
        func(
            "_[_]",
            vec![
                g(
                    "optional_list_index_int",
                    &[Optional(Box::new(lv())), Int],
                    ov(),
                ),
                g(
                    "optional_map_index_value",
                    &[Optional(Box::new(mkv())), p("K")],
                    ov(),
                ),
            ],
        ),
    ]
}

/// cel-go's `ext.Strings` at a version (0 for Kubernetes' new expressions, 2 for stored ones):
/// `format` and `strings.quote` come with version 1.
pub(crate) fn strings_functions(version: u32) -> Vec<Function> {
    #[allow(unused_imports)]
    use Type::{Bool, Bytes, Double, Duration, Dyn, Int, Null, Optional, String, Timestamp, Uint};
    let mut fns = vec![
        func(
            "charAt",
            vec![m("string_char_at_int", &[String, Int], String)],
        ),
        func(
            "indexOf",
            vec![
                m("string_index_of_string", &[String, String], Int),
                m("string_index_of_string_int", &[String, String, Int], Int),
            ],
        ),
        func(
            "lastIndexOf",
            vec![
                m("string_last_index_of_string", &[String, String], Int),
                m(
                    "string_last_index_of_string_int",
                    &[String, String, Int],
                    Int,
                ),
            ],
        ),
        func(
            "lowerAscii",
            vec![m("string_lower_ascii", &[String], String)],
        ),
        func(
            "replace",
            vec![
                m(
                    "string_replace_string_string",
                    &[String, String, String],
                    String,
                ),
                m(
                    "string_replace_string_string_int",
                    &[String, String, String, Int],
                    String,
                ),
            ],
        ),
        func(
            "split",
            vec![
                m("string_split_string", &[String, String], list(String)),
                m(
                    "string_split_string_int",
                    &[String, String, Int],
                    list(String),
                ),
            ],
        ),
        func(
            "substring",
            vec![
                m("string_substring_int", &[String, Int], String),
                m("string_substring_int_int", &[String, Int, Int], String),
            ],
        ),
        func("trim", vec![m("string_trim", &[String], String)]),
        func(
            "upperAscii",
            vec![m("string_upper_ascii", &[String], String)],
        ),
        func(
            "join",
            vec![
                m("list_join", &[list(String)], String),
                m("list_join_string", &[list(String), String], String),
            ],
        ),
    ];
    if version >= 1 {
        fns.push(func(
            "format",
            vec![m("string_format", &[String, list(Dyn)], String)],
        ));
        fns.push(func(
            "strings.quote",
            vec![g("strings_quote", &[String], String)],
        ));
    }
    fns
}

/// cel-go's `ext.Sets`.
pub(crate) fn sets_functions() -> Vec<Function> {
    let lt = || list(p("T"));
    vec![
        func(
            "sets.contains",
            vec![g("list_sets_contains_list", &[lt(), lt()], Type::Bool)],
        ),
        func(
            "sets.equivalent",
            vec![g("list_sets_equivalent_list", &[lt(), lt()], Type::Bool)],
        ),
        func(
            "sets.intersects",
            vec![g("list_sets_intersects_list", &[lt(), lt()], Type::Bool)],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_params_collected() {
        let o = g(
            "x",
            &[Type::map(p("K"), p("V")), p("K")],
            Type::Optional(Box::new(p("V"))),
        );
        assert_eq!(o.type_params(), vec!["K".to_string(), "V".to_string()]);
        assert!(g("y", &[Type::Int], Type::Int).type_params().is_empty());
    }

    #[test]
    fn standard_library_shape() {
        let fns = standard_functions();
        let less = fns
            .iter()
            .find(|f| f.name == "_<_")
            .map(|f| f.overloads.len());
        assert_eq!(less, Some(14));
        let hours = fns
            .iter()
            .find(|f| f.name == "getHours")
            .map(|f| f.overloads.len());
        assert_eq!(hours, Some(3));
        let idents: Vec<String> = standard_type_idents().into_iter().map(|(n, _)| n).collect();
        assert!(idents.contains(&"google.protobuf.Timestamp".to_string()));
        assert!(idents.contains(&"null_type".to_string()));
        assert!(idents.contains(&"type".to_string()));
    }
}
