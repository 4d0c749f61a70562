//! Kubernetes' CEL libraries (`k8s.io/apiserver/pkg/cel/library`: URLs, regex, lists,
//! authorizer, quantity) and the admission types (`plugin/cel/compile.go`'s request and
//! namespace types), as declarations for the checker.

use crate::decls::{func, g, m, Function};
use crate::types::{ObjectType, Type};

fn opaque(name: &str) -> Type {
    Type::object(ObjectType::opaque(name))
}

fn url() -> Type {
    opaque("kubernetes.URL")
}

fn quantity() -> Type {
    opaque("kubernetes.Quantity")
}

/// `library.AuthorizerType`.
pub(crate) fn authorizer_type() -> Type {
    opaque("kubernetes.authorization.Authorizer")
}

fn path_check() -> Type {
    opaque("kubernetes.authorization.PathCheck")
}

fn group_check() -> Type {
    opaque("kubernetes.authorization.GroupCheck")
}

fn resource_check() -> Type {
    opaque("kubernetes.authorization.ResourceCheck")
}

fn decision() -> Type {
    opaque("kubernetes.authorization.Decision")
}

pub(crate) fn urls_functions() -> Vec<Function> {
    use Type::String;
    vec![
        func("url", vec![g("string_to_url", &[String], url())]),
        func("getScheme", vec![m("url_get_scheme", &[url()], String)]),
        func("getHost", vec![m("url_get_host", &[url()], String)]),
        func("getHostname", vec![m("url_get_hostname", &[url()], String)]),
        func("getPort", vec![m("url_get_port", &[url()], String)]),
        func(
            "getEscapedPath",
            vec![m("url_get_escaped_path", &[url()], String)],
        ),
        func(
            "getQuery",
            vec![m(
                "url_get_query",
                &[url()],
                Type::map(String, Type::list(String)),
            )],
        ),
        func("isURL", vec![g("is_url_string", &[String], Type::Bool)]),
    ]
}

pub(crate) fn regex_functions() -> Vec<Function> {
    use Type::{Int, String};
    vec![
        func(
            "find",
            vec![m("string_find_string", &[String, String], String)],
        ),
        func(
            "findAll",
            vec![
                m(
                    "string_find_all_string",
                    &[String, String],
                    Type::list(String),
                ),
                m(
                    "string_find_all_string_int",
                    &[String, String, Int],
                    Type::list(String),
                ),
            ],
        ),
    ]
}

pub(crate) fn lists_functions() -> Vec<Function> {
    let summable = [
        ("int", Type::Int),
        ("uint", Type::Uint),
        ("double", Type::Double),
        ("duration", Type::Duration),
    ];
    let comparable = [
        ("int", Type::Int),
        ("uint", Type::Uint),
        ("double", Type::Double),
        ("bool", Type::Bool),
        ("duration", Type::Duration),
        ("timestamp", Type::Timestamp),
        ("string", Type::String),
        ("bytes", Type::Bytes),
    ];
    let templated =
        |types: &[(&str, Type)], id: &dyn Fn(&str) -> String, result: &dyn Fn(&Type) -> Type| {
            types
                .iter()
                .map(|(n, t)| m(&id(n), &[Type::list(t.clone())], result(t)))
                .collect::<Vec<_>>()
        };
    let a = Type::TypeParam("A".into());
    vec![
        func(
            "isSorted",
            templated(
                &comparable,
                &|n| format!("list_{n}_is_sorted_bool"),
                &|_| Type::Bool,
            ),
        ),
        func(
            "sum",
            templated(&summable, &|n| format!("list_{n}_sum_{n}"), &|t| t.clone()),
        ),
        func(
            "max",
            templated(&comparable, &|n| format!("list_{n}_max_{n}"), &|t| {
                t.clone()
            }),
        ),
        func(
            "min",
            templated(&comparable, &|n| format!("list_{n}_min_{n}"), &|t| {
                t.clone()
            }),
        ),
        func(
            "indexOf",
            vec![m(
                "list_a_index_of_int",
                &[Type::list(a.clone()), a.clone()],
                Type::Int,
            )],
        ),
        func(
            "lastIndexOf",
            vec![m(
                "list_a_last_index_of_int",
                &[Type::list(a.clone()), a],
                Type::Int,
            )],
        ),
    ]
}

pub(crate) fn authz_functions() -> Vec<Function> {
    use Type::{Bool, String};
    vec![
        func(
            "path",
            vec![m(
                "authorizer_path",
                &[authorizer_type(), String],
                path_check(),
            )],
        ),
        func(
            "group",
            vec![m(
                "authorizer_group",
                &[authorizer_type(), String],
                group_check(),
            )],
        ),
        func(
            "serviceAccount",
            vec![m(
                "authorizer_serviceaccount",
                &[authorizer_type(), String, String],
                authorizer_type(),
            )],
        ),
        func(
            "resource",
            vec![m(
                "groupcheck_resource",
                &[group_check(), String],
                resource_check(),
            )],
        ),
        func(
            "subresource",
            vec![m(
                "resourcecheck_subresource",
                &[resource_check(), String],
                resource_check(),
            )],
        ),
        func(
            "namespace",
            vec![m(
                "resourcecheck_namespace",
                &[resource_check(), String],
                resource_check(),
            )],
        ),
        func(
            "name",
            vec![m(
                "resourcecheck_name",
                &[resource_check(), String],
                resource_check(),
            )],
        ),
        func(
            "check",
            vec![
                m("pathcheck_check", &[path_check(), String], decision()),
                m(
                    "resourcecheck_check",
                    &[resource_check(), String],
                    decision(),
                ),
            ],
        ),
        func("errored", vec![m("decision_errored", &[decision()], Bool)]),
        func("error", vec![m("decision_error", &[decision()], String)]),
        func("allowed", vec![m("decision_allowed", &[decision()], Bool)]),
        func("reason", vec![m("decision_reason", &[decision()], String)]),
    ]
}

pub(crate) fn quantity_functions() -> Vec<Function> {
    use Type::{Bool, Double, Int, String};
    let q = quantity;
    vec![
        func("quantity", vec![g("string_to_quantity", &[String], q())]),
        func("isQuantity", vec![g("is_quantity_string", &[String], Bool)]),
        // Declared as a global function in 1.29 (so `q.sign()` does not resolve).
        func("sign", vec![g("quantity_sign", &[q()], Int)]),
        func(
            "isGreaterThan",
            vec![m("quantity_is_greater_than", &[q(), q()], Bool)],
        ),
        func(
            "isLessThan",
            vec![m("quantity_is_less_than", &[q(), q()], Bool)],
        ),
        func(
            "compareTo",
            vec![m("quantity_compare_to", &[q(), q()], Int)],
        ),
        func(
            "asApproximateFloat",
            vec![m("quantity_get_float", &[q()], Double)],
        ),
        func("asInteger", vec![m("quantity_get_int", &[q()], Int)]),
        func("isInteger", vec![m("quantity_is_integer", &[q()], Bool)]),
        func(
            "add",
            vec![
                m("quantity_add", &[q(), q()], q()),
                m("quantity_add_int", &[q(), Int], q()),
            ],
        ),
        func(
            "sub",
            vec![
                m("quantity_sub", &[q(), q()], q()),
                m("quantity_sub_int", &[q(), Int], q()),
            ],
        ),
    ]
}

fn obj(name: &str, fields: Vec<(&str, Type)>) -> Type {
    Type::object(ObjectType::new(
        name,
        fields.into_iter().map(|(n, t)| (n.to_string(), t)),
    ))
}

/// `BuildRequestType()`: the type of `request`.
pub(crate) fn request_type() -> Type {
    use Type::{Bool, Dyn, String};
    let gvk = obj(
        "kubernetes.GroupVersionKind",
        vec![("group", String), ("version", String), ("kind", String)],
    );
    let gvr = obj(
        "kubernetes.GroupVersionResource",
        vec![("group", String), ("version", String), ("resource", String)],
    );
    let user = obj(
        "kubernetes.UserInfo",
        vec![
            ("username", String),
            ("uid", String),
            ("groups", Type::list(String)),
            ("extra", Type::map(String, Type::list(String))),
        ],
    );
    obj(
        "kubernetes.AdmissionRequest",
        vec![
            ("kind", gvk.clone()),
            ("resource", gvr.clone()),
            ("subResource", String),
            ("requestKind", gvk),
            ("requestResource", gvr),
            ("requestSubResource", String),
            ("name", String),
            ("namespace", String),
            ("operation", String),
            ("userInfo", user),
            ("dryRun", Bool),
            ("options", Dyn),
        ],
    )
}

/// `BuildNamespaceType()`: the type of `namespaceObject`.
pub(crate) fn namespace_type() -> Type {
    use Type::{Int, String, Timestamp};
    let spec = obj(
        "kubernetes.NamespaceSpec",
        vec![("finalizers", Type::list(String))],
    );
    let condition = obj(
        "kubernetes.NamespaceCondition",
        vec![
            ("status", String),
            ("type", String),
            ("lastTransitionTime", Timestamp),
            ("message", String),
            ("reason", String),
        ],
    );
    let status = obj(
        "kubernetes.NamespaceStatus",
        vec![("conditions", Type::list(condition)), ("phase", String)],
    );
    let metadata = obj(
        "kubernetes.NamespaceMetadata",
        vec![
            ("name", String),
            ("generateName", String),
            ("namespace", String),
            ("labels", Type::map(String, String)),
            ("annotations", Type::map(String, String)),
            ("UID", String),
            ("creationTimestamp", Timestamp),
            ("deletionGracePeriodSeconds", Int),
            ("deletionTimestamp", Timestamp),
            ("generation", Int),
            ("resourceVersion", String),
            ("finalizers", Type::list(String)),
        ],
    );
    obj(
        "kubernetes.Namespace",
        vec![("metadata", metadata), ("spec", spec), ("status", status)],
    )
}
