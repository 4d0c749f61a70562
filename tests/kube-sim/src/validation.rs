//! Object validation for kube-sim, the in-memory Kubernetes API server.
//!
//! kube-apiserver v1.29 runs each resource strategy's `Validate` (create) or
//! `ValidateUpdate` (update) after decoding, defaulting and mutating admission, and turns any
//! field errors into a 422 `Invalid` Status whose `details.causes` list one entry per field
//! error. This module re-implements, on plain `serde_json::Value` objects, the upstream rules a
//! controller or kubectl user commonly hits: object metadata (names per kind, labels,
//! annotations, owner references, finalizers), pod specs in Pods and every pod template,
//! workload selectors and their template labels, Services, ConfigMaps, Secrets, PVCs, Jobs,
//! CronJobs, PDBs, Leases, Nodes, Endpoints and EndpointSlices (in `endpoints`), and the
//! immutability rules applied on update. The request handler calls `validate` once the object
//! has been defaulted (so fields the defaulters fill are tolerated when absent) and renders
//! the result with `invalid_message`. Messages follow upstream's wording
//! (`field.Error.ErrorBody`), values rendered the way Go's `fmt` prints them (a struct
//! through `go_value`: `%#v` of the internal type, pointers as an address). Objects of the
//! wrong shape never panic: a field with an unexpected JSON type is treated as absent (or
//! reported when upstream would require it).

use regex::Regex;
// Qualified names, label values and DNS subdomains, and the message helpers, are the one
// Go-compatibility copy (the product's label selectors use it as well).
pub(crate) use rkcm_gocompat::validation::{
    is_dns1123_subdomain, is_qualified_name, is_valid_label_value as is_label_value,
};
use rkcm_gocompat::validation::{max_len_error, regex_error};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

mod admission_policy;
mod admission_policy_cel;
pub mod csr;
pub(crate) mod dra;
pub(crate) mod endpoints;
pub(crate) mod gated;
mod jsonpath_syntax;
mod volume_attachment;

/// One field error, as it appears in a Status' `details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

type Obj = Map<String, Value>;

// ---------------------------------------------------------------------------------------
// Error constructors (the wording of upstream's field.Error bodies)
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Errs(Vec<FieldCause>);

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

impl Errs {
    fn push(&mut self, reason: &'static str, field: &str, message: String) {
        self.0.push(FieldCause {
            reason,
            message,
            field: field.to_string(),
        });
    }
    fn required(&mut self, field: &str, detail: &str) {
        self.push(
            "FieldValueRequired",
            field,
            with_detail("Required value", detail),
        );
    }
    fn forbidden(&mut self, field: &str, detail: &str) {
        self.push(
            "FieldValueForbidden",
            field,
            with_detail("Forbidden", detail),
        );
    }
    /// `value` is already rendered the way Go prints it (see `q`, `go_map`, ...).
    fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.push(
            "FieldValueInvalid",
            field,
            with_detail(&format!("Invalid value: {value}"), detail),
        );
    }
    fn duplicate(&mut self, field: &str, value: &str) {
        self.push(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {value}"),
        );
    }
    fn not_found(&mut self, field: &str, value: &str) {
        self.push("FieldValueNotFound", field, format!("Not found: {value}"));
    }
    fn not_supported(&mut self, field: &str, value: &str, valid: &[&str]) {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            format!(
                "supported values: {}",
                valid.iter().map(|v| q(v)).collect::<Vec<_>>().join(", ")
            )
        };
        self.push(
            "FieldValueNotSupported",
            field,
            with_detail(&format!("Unsupported value: {value}"), &detail),
        );
    }
    fn too_long(&mut self, field: &str, max: usize) {
        self.push(
            "FieldValueTooLong",
            field,
            format!("Too long: must have at most {max} bytes"),
        );
    }
    /// `field.TooMany`: the count is an `int`, printed with `%#v`.
    fn too_many(&mut self, field: &str, actual: usize, max: usize) {
        self.push(
            "FieldValueTooMany",
            field,
            format!("Too many: {actual}: must have at most {max} items"),
        );
    }
    fn invalid_msgs(&mut self, field: &str, value: &str, msgs: Vec<String>) {
        for m in msgs {
            self.invalid(field, &q(value), &m);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Go value rendering
// ---------------------------------------------------------------------------------------

/// A string as Go's `%q` prints it.
pub(crate) fn q(s: &str) -> String {
    rkcm_gocompat::gofmt::quote(s)
}

/// A `map[string]string` as Go's `%#v` prints it (keys sorted).
fn go_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let sorted: BTreeMap<&String, String> =
                m.iter().map(|(k, v)| (k, scalar_string(v))).collect();
            let body: Vec<String> = sorted
                .iter()
                .map(|(k, v)| format!("{}:{}", q(k), q(v)))
                .collect();
            format!("map[string]string{{{}}}", body.join(", "))
        }
    }
}

/// A `*metav1.LabelSelector` in a field error: the error follows the pointer and prints the
/// struct with `%#v` (its `String()` method is on the pointer, so it is not used); nil is `"null"`.
fn go_selector(v: Option<&Value>) -> String {
    match v.filter(|v| !v.is_null()) {
        None => q("null"),
        Some(sel) => crate::go_value::go_syntax("v1.LabelSelector", Some(sel)),
    }
}

/// A JSON number or other scalar as Go's `%v` prints it.
fn num(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => q(s),
        Value::Null => q("null"),
        other => other.to_string(),
    }
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An IntOrString through its `String()` method.
fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => num(other),
    }
}

/// A `[]string` as Go's `%#v` prints it.
fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => rkcm_gocompat::gofmt::go_string_slice(&[], true),
        Some(a) => {
            let items: Vec<String> = a.iter().map(scalar_string).collect();
            rkcm_gocompat::gofmt::go_string_slice(&items, false)
        }
    }
}

// ---------------------------------------------------------------------------------------
// JSON access helpers (tolerant of wrong types)
// ---------------------------------------------------------------------------------------

fn obj(v: Option<&Value>) -> Option<&Obj> {
    v.and_then(Value::as_object)
}

fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

fn int_of(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    }
}

fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

fn bool_of(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool).unwrap_or(false)
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    obj(v)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), scalar_string(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Semantic equality: a null member equals an absent one, numbers compare by value.
fn sem_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (None, None) => true,
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().all(|k| sem_eq(x.get(k), y.get(k)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, r)| sem_eq(Some(p), Some(r)))
        }
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

// ---------------------------------------------------------------------------------------
// Format checks (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const ENV_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const PERCENT_FMT: &str = "[0-9]+%";

struct Res {
    label: Regex,
    subdomain: Regex,
    dns1035: Regex,
    config_key: Regex,
    env_name: Regex,
    percent: Regex,
    port_name: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    R.get_or_init(|| {
        let anchored = |f: &str| {
            Regex::new(&format!("^(?:{f})$"))
                .unwrap_or_else(|_| Regex::new("^$").expect("trivial regex"))
        };
        Res {
            label: anchored(DNS1123_LABEL_FMT),
            subdomain: anchored(DNS1123_SUBDOMAIN_FMT),
            dns1035: anchored(DNS1035_LABEL_FMT),
            config_key: anchored(CONFIG_KEY_FMT),
            env_name: anchored(ENV_NAME_FMT),
            percent: anchored(PERCENT_FMT),
            port_name: anchored("[-a-z0-9]+"),
        }
    })
}

pub(crate) fn is_dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !res().label.is_match(v) {
        if res().subdomain.is_match(v) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

fn is_dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !res().dns1035.is_match(v) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

fn ch_dir_prefix(v: &str) -> Option<String> {
    match v {
        "." => Some("must not be '.'".into()),
        ".." => Some("must not be '..'".into()),
        _ if v.starts_with("..") => Some("must not start with '..'".into()),
        _ => None,
    }
}

fn is_config_map_key(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !res().config_key.is_match(v) {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(ch_dir_prefix(v));
    errs
}

fn is_env_var_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if !res().env_name.is_match(v) {
        errs.push(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
            ENV_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(ch_dir_prefix(v));
    errs
}

fn is_valid_port_num(p: i64) -> Vec<String> {
    if (1..=65535).contains(&p) {
        vec![]
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

fn is_valid_port_name(p: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if p.len() > 15 {
        errs.push(max_len_error(15));
    }
    if !res().port_name.is_match(p) {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !p.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if p.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if p.starts_with('-') || p.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

pub(crate) fn is_path_segment_name(v: &str) -> Vec<String> {
    for bad in [".", ".."] {
        if v == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| v.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum NameRule {
    /// Any name (CertificateSigningRequests: "we don't care what you call" them).
    Any,
    Subdomain,
    Label,
    Dns1035,
    PathSegment,
}

fn name_rule(kind: &str) -> NameRule {
    match kind {
        "Namespace" | "StatefulSet" => NameRule::Label,
        "CertificateSigningRequest" => NameRule::Any,
        "Service" => NameRule::Dns1035,
        "Role"
        | "ClusterRole"
        | "RoleBinding"
        | "ClusterRoleBinding"
        | "FlowSchema"
        | "PriorityLevelConfiguration" => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

/// The name checks of a kind; `prefix` is for generateName (a trailing '-' is allowed).
fn name_errors(kind: &str, name: &str, prefix: bool) -> Vec<String> {
    match kind {
        "IPAddress" => return gated::ip_address_name_errors(name),
        "StorageVersion" => return gated::storage_version_name_errors(name),
        _ => {}
    }
    let rule = name_rule(kind);
    let masked;
    let name = if prefix && rule != NameRule::PathSegment && name.len() > 1 && name.ends_with('-') {
        // Upstream masks the trailing dash (and the character before it) with a letter.
        let cut = name
            .char_indices()
            .rev()
            .nth(1)
            .map(|(i, _)| i)
            .unwrap_or(0);
        masked = format!("{}a", &name[..cut]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Any => Vec::new(),
        NameRule::Subdomain => is_dns1123_subdomain(name),
        NameRule::Label => is_dns1123_label(name),
        NameRule::Dns1035 => is_dns1035_label(name),
        NameRule::PathSegment => is_path_segment_name(name),
    }
}

/// Name validation alone (DNS-1123 subdomain for most kinds; DNS-1123 label for Namespace and
/// StatefulSet; DNS-1035 label for Service; path-segment names for RBAC and flow-control kinds).
pub fn validate_name(kind: &str, name: &str) -> Option<FieldCause> {
    let mut e = Errs::default();
    if name.is_empty() {
        e.required("metadata.name", "name or generateName is required");
    } else {
        e.invalid_msgs("metadata.name", name, name_errors(kind, name, false));
    }
    e.0.into_iter().next()
}

// ---------------------------------------------------------------------------------------
// The 422 message
// ---------------------------------------------------------------------------------------

/// The 422 top-level message: `Kind.group "name" is invalid: field: msg`, or `[a: x, b: y]`
/// for several distinct errors (duplicates collapse, as upstream's aggregate does).
pub fn invalid_message(group: &str, kind: &str, name: &str, causes: &[FieldCause]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut seen = HashSet::new();
    let mut msgs = Vec::new();
    for c in causes {
        let m = format!("{}: {}", c.field, c.message);
        if seen.insert(m.clone()) {
            msgs.push(m);
        }
    }
    let agg = match msgs.len() {
        0 => "<nil>".to_string(),
        1 => msgs.remove(0),
        _ => format!("[{}]", msgs.join(", ")),
    };
    format!("{qualified} {} is invalid: {agg}", q(name))
}

// ---------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------

fn validate_labels(e: &mut Errs, labels: Option<&Value>, path: &str) {
    let Some(m) = obj(labels) else { return };
    let sorted: BTreeMap<&String, String> = m.iter().map(|(k, v)| (k, scalar_string(v))).collect();
    for (k, v) in sorted {
        e.invalid_msgs(path, k, is_qualified_name(k));
        e.invalid_msgs(path, &v, is_label_value(&v));
    }
}

fn validate_annotations(e: &mut Errs, ann: Option<&Value>, path: &str) {
    let Some(m) = obj(ann) else { return };
    let mut total = 0usize;
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        e.invalid_msgs(path, k, is_qualified_name(&k.to_lowercase()));
    }
    for (k, v) in m {
        total += k.len() + scalar_string(v).len();
    }
    if total > 256 * 1024 {
        e.too_long(path, 256 * 1024);
    }
}

/// An OwnerReference as Go's `%#v` prints the struct (its `*bool` fields as an address when
/// set: see `rkcm_gocompat::gofmt::POINTER_ADDRESS`).
fn go_owner_reference(r: &Value) -> String {
    crate::go_value::go_syntax("v1.OwnerReference", Some(r))
}

fn validate_owner_refs(e: &mut Errs, refs: Option<&Value>, path: &str) {
    let mut first_controller = String::new();
    for r in arr(refs) {
        let api_version = str_of(r.get("apiVersion"));
        let kind = str_of(r.get("kind"));
        let name = str_of(r.get("name"));
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() || api_version.matches('/').count() > 1 {
            e.invalid(
                &child(path, "apiVersion"),
                &q(api_version),
                "version must not be empty",
            );
        }
        if kind.is_empty() {
            e.invalid(&child(path, "kind"), &q(kind), "kind must not be empty");
        }
        if name.is_empty() {
            e.invalid(&child(path, "name"), &q(name), "name must not be empty");
        }
        let uid = str_of(r.get("uid"));
        if uid.is_empty() {
            e.invalid(&child(path, "uid"), &q(uid), "uid must not be empty");
        }
        if api_version == "v1" && kind == "Event" {
            e.invalid(
                path,
                &go_owner_reference(r),
                "/v1, Kind=Event is disallowed from being an owner",
            );
        }
        if bool_of(r.get("controller")) {
            let cur = format!("{kind}/{name}");
            if first_controller.is_empty() {
                first_controller = cur;
            } else {
                e.invalid(
                    path,
                    &crate::go_value::go_syntax("[]v1.OwnerReference", refs),
                    &format!("Only one reference can have Controller set to true. Found \"true\" in references for {first_controller} and {cur}"),
                );
            }
        }
    }
}

fn validate_finalizers(e: &mut Errs, fins: Option<&Value>, path: &str) {
    let mut orphan = false;
    let mut foreground = false;
    for f in arr(fins) {
        let f = scalar_string(f);
        e.invalid_msgs(path, &f, is_qualified_name(&f));
        orphan |= f == "orphan";
        foreground |= f == "foregroundDeletion";
    }
    if orphan && foreground {
        let rendered = go_string_slice(fins);
        e.invalid(
            path,
            &rendered,
            "finalizer orphan and foregroundDeletion cannot be both set",
        );
    }
}

/// The core-group extra rule: a finalizer without a '/' must be a standard one.
fn validate_kube_finalizers(e: &mut Errs, fins: Option<&Value>, path: &str) {
    for f in arr(fins) {
        let f = scalar_string(f);
        if !f.contains('/') && !matches!(f.as_str(), "kubernetes" | "orphan" | "foregroundDeletion")
        {
            e.invalid(
                path,
                &q(&f),
                "name is neither a standard finalizer name nor is it fully qualified",
            );
        }
    }
}

/// ObjectMeta on create (`update == false`) or update.
fn validate_meta(e: &mut Errs, kind: &str, o: &Value, update: bool) {
    let meta = o.get("metadata");
    if !update {
        let generate = str_of(meta.and_then(|m| m.get("generateName")));
        if !generate.is_empty() {
            e.invalid_msgs(
                "metadata.generateName",
                generate,
                name_errors(kind, generate, true),
            );
        }
        let name = str_of(meta.and_then(|m| m.get("name")));
        // With generateName alone the server generates the name before validating.
        if name.is_empty() && generate.is_empty() {
            e.required("metadata.name", "name or generateName is required");
        } else if !name.is_empty() {
            e.invalid_msgs("metadata.name", name, name_errors(kind, name, false));
        }
    }
    if let Some(g) = int_of(meta.and_then(|m| m.get("generation"))).filter(|g| *g < 0) {
        e.invalid(
            "metadata.generation",
            &g.to_string(),
            "must be greater than or equal to 0",
        );
    }
    validate_labels(e, meta.and_then(|m| m.get("labels")), "metadata.labels");
    validate_annotations(
        e,
        meta.and_then(|m| m.get("annotations")),
        "metadata.annotations",
    );
    validate_owner_refs(
        e,
        meta.and_then(|m| m.get("ownerReferences")),
        "metadata.ownerReferences",
    );
    validate_finalizers(
        e,
        meta.and_then(|m| m.get("finalizers")),
        "metadata.finalizers",
    );
    validate_kube_finalizers(
        e,
        meta.and_then(|m| m.get("finalizers")),
        "metadata.finalizers",
    );
}

// ---------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------

fn validate_label_selector(e: &mut Errs, sel: Option<&Value>, path: &str) {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return;
    };
    validate_labels(e, sel.get("matchLabels"), &child(path, "matchLabels"));
    for (i, ex) in arr(sel.get("matchExpressions")).iter().enumerate() {
        let p = idx(&child(path, "matchExpressions"), i);
        let op = str_of(ex.get("operator"));
        let values = arr(ex.get("values"));
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    e.required(
                        &child(&p, "values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    );
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    e.forbidden(
                        &child(&p, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    );
                }
            }
            _ => e.invalid(
                &child(&p, "operator"),
                &q(op),
                "not a valid selector operator",
            ),
        }
        let k = str_of(ex.get("key"));
        e.invalid_msgs(&child(&p, "key"), k, is_qualified_name(k));
        for (j, v) in values.iter().enumerate() {
            let v = scalar_string(v);
            e.invalid_msgs(&idx(&child(&p, "values"), j), &v, is_label_value(&v));
        }
    }
}

/// Whether `metav1.LabelSelectorAsSelector` would accept the selector.
fn selector_converts(sel: Option<&Value>) -> bool {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return true;
    };
    let ok_key = |k: &str| is_qualified_name(k).is_empty();
    for (k, v) in string_map(sel.get("matchLabels")) {
        if !ok_key(&k) || !is_label_value(&v).is_empty() {
            return false;
        }
    }
    for ex in arr(sel.get("matchExpressions")) {
        let values = arr(ex.get("values"));
        let ok = match str_of(ex.get("operator")) {
            "In" | "NotIn" => !values.is_empty(),
            "Exists" | "DoesNotExist" => values.is_empty(),
            _ => false,
        };
        if !ok
            || !ok_key(str_of(ex.get("key")))
            || values
                .iter()
                .any(|v| !is_label_value(&scalar_string(v)).is_empty())
        {
            return false;
        }
    }
    true
}

/// A converted selector: None is "nothing" (from a nil selector), Some(empty) is "everything".
fn selector_is_empty(sel: Option<&Value>) -> bool {
    match sel.filter(|s| !s.is_null()) {
        None => false,
        Some(s) => {
            obj(s.get("matchLabels")).is_none_or(|m| m.is_empty())
                && arr(s.get("matchExpressions")).is_empty()
        }
    }
}

fn selector_matches(sel: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return false;
    };
    for (k, v) in string_map(sel.get("matchLabels")) {
        if labels.get(&k) != Some(&v) {
            return false;
        }
    }
    for ex in arr(sel.get("matchExpressions")) {
        let k = str_of(ex.get("key"));
        let values: Vec<String> = arr(ex.get("values")).iter().map(scalar_string).collect();
        let have = labels.get(k);
        let ok = match str_of(ex.get("operator")) {
            "In" => have.is_some_and(|h| values.contains(h)),
            "NotIn" => have.is_none_or(|h| !values.contains(h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn selector_entry_count(sel: Option<&Value>) -> usize {
    sel.map(|s| {
        obj(s.get("matchLabels")).map_or(0, |m| m.len()) + arr(s.get("matchExpressions")).len()
    })
    .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Pod specs
// ---------------------------------------------------------------------------------------

/// The volume source fields, in the order upstream's validation checks them.
pub(crate) const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
];

/// Validates `spec.volumes`; returns the names of the valid volumes.
fn validate_volumes(e: &mut Errs, vols: Option<&Value>, path: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in arr(vols).iter().enumerate() {
        let p = idx(path, i);
        let mut el = Errs::default();
        let sources: Vec<&&str> = VOLUME_SOURCES
            .iter()
            .filter(|s| present(v.get(**s)))
            .collect();
        if sources.is_empty() {
            el.required(&p, "must specify a volume type");
        }
        for s in sources.iter().skip(1) {
            el.forbidden(&child(&p, s), "may not specify more than 1 volume type");
        }
        let name = str_of(v.get("name"));
        let np = child(&p, "name");
        if name.is_empty() {
            el.required(&np, "");
        } else {
            el.invalid_msgs(&np, name, is_dns1123_label(name));
        }
        if names.contains(name) {
            el.duplicate(&np, &q(name));
        }
        if el.0.is_empty() {
            names.insert(name.to_string());
        } else {
            e.0.extend(el.0);
        }
    }
    names
}

fn validate_container_ports(e: &mut Errs, ports: Option<&Value>, path: &str) {
    let mut names = HashSet::new();
    for (i, p) in arr(ports).iter().enumerate() {
        let ip = idx(path, i);
        let name = str_of(p.get("name"));
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                e.invalid_msgs(&child(&ip, "name"), name, msgs);
            } else if !names.insert(name.to_string()) {
                e.duplicate(&child(&ip, "name"), &q(name));
            }
        }
        match int_of(p.get("containerPort")) {
            None | Some(0) => e.required(&child(&ip, "containerPort"), ""),
            Some(n) => {
                for m in is_valid_port_num(n) {
                    e.invalid(&child(&ip, "containerPort"), &n.to_string(), &m);
                }
            }
        }
        if let Some(h) = int_of(p.get("hostPort")).filter(|h| *h != 0) {
            for m in is_valid_port_num(h) {
                e.invalid(&child(&ip, "hostPort"), &h.to_string(), &m);
            }
        }
        validate_protocol(e, p.get("protocol"), &child(&ip, "protocol"));
    }
}

fn validate_protocol(e: &mut Errs, proto: Option<&Value>, path: &str) {
    let proto = str_of(proto);
    if !proto.is_empty() && !matches!(proto, "TCP" | "UDP" | "SCTP") {
        e.not_supported(path, &q(proto), &["SCTP", "TCP", "UDP"]);
    }
}

fn validate_container(e: &mut Errs, c: &Value, volumes: &HashSet<String>, path: &str) {
    let name = str_of(c.get("name"));
    let np = child(path, "name");
    if name.is_empty() {
        e.required(&np, "");
    } else {
        e.invalid_msgs(&np, name, is_dns1123_label(name));
    }
    if str_of(c.get("image")).is_empty() {
        e.required(&child(path, "image"), "");
    }
    let tmp = str_of(c.get("terminationMessagePolicy"));
    if !tmp.is_empty() && !matches!(tmp, "File" | "FallbackToLogsOnError") {
        e.not_supported(
            &child(path, "terminationMessagePolicy"),
            &q(tmp),
            &["File", "FallbackToLogsOnError"],
        );
    }
    validate_container_ports(e, c.get("ports"), &child(path, "ports"));
    for (i, ev) in arr(c.get("env")).iter().enumerate() {
        let p = child(&idx(&child(path, "env"), i), "name");
        let n = str_of(ev.get("name"));
        if n.is_empty() {
            e.required(&p, "");
        } else {
            e.invalid_msgs(&p, n, is_env_var_name(n));
        }
    }
    let mut mount_points = HashSet::new();
    for (i, m) in arr(c.get("volumeMounts")).iter().enumerate() {
        let p = idx(&child(path, "volumeMounts"), i);
        let mname = str_of(m.get("name"));
        if mname.is_empty() {
            e.required(&child(&p, "name"), "");
        }
        if !volumes.contains(mname) {
            e.not_found(&child(&p, "name"), &q(mname));
        }
        let mp = str_of(m.get("mountPath"));
        if mp.is_empty() {
            e.required(&child(&p, "mountPath"), "");
        }
        if !mount_points.insert(mp.to_string()) {
            e.invalid(&child(&p, "mountPath"), &q(mp), "must be unique");
        }
    }
    let pull = str_of(c.get("imagePullPolicy"));
    if !pull.is_empty() && !matches!(pull, "Always" | "IfNotPresent" | "Never") {
        e.not_supported(
            &child(path, "imagePullPolicy"),
            &q(pull),
            &["Always", "IfNotPresent", "Never"],
        );
    }
}

fn validate_containers(
    e: &mut Errs,
    list: Option<&Value>,
    volumes: &HashSet<String>,
    path: &str,
    names: &mut HashSet<String>,
    required: bool,
) {
    let items = arr(list);
    if items.is_empty() && required {
        e.required(path, "");
        return;
    }
    for (i, c) in items.iter().enumerate() {
        let p = idx(path, i);
        validate_container(e, c, volumes, &p);
        let name = str_of(c.get("name"));
        if !names.insert(name.to_string()) {
            e.duplicate(&child(&p, "name"), &q(name));
        }
    }
}

fn validate_taint_effect(e: &mut Errs, effect: &str, allow_empty: bool, path: &str) {
    if effect.is_empty() {
        if !allow_empty {
            e.required(path, "");
        }
        return;
    }
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        e.not_supported(
            path,
            &q(effect),
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
    }
}

fn validate_tolerations(e: &mut Errs, tols: Option<&Value>, path: &str) {
    for (i, t) in arr(tols).iter().enumerate() {
        let p = idx(path, i);
        let k = str_of(t.get("key"));
        let op = str_of(t.get("operator"));
        let value = str_of(t.get("value"));
        let effect = str_of(t.get("effect"));
        if !k.is_empty() {
            e.invalid_msgs(&child(&p, "key"), k, is_qualified_name(k));
        }
        if k.is_empty() && op != "Exists" {
            e.invalid(&child(&p, "operator"), &q(op), "operator must be Exists when `key` is empty, which means \"match all values and all keys\"");
        }
        if present(t.get("tolerationSeconds")) && effect != "NoExecute" {
            e.invalid(
                &child(&p, "effect"),
                &q(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            );
        }
        match op {
            "Equal" | "" => {
                let errs = is_label_value(value);
                if !errs.is_empty() {
                    e.invalid(&child(&p, "operator"), &q(value), &errs.join(";"));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    let rendered = crate::go_value::go_syntax("core.Toleration", Some(t));
                    e.invalid(
                        &child(&p, "operator"),
                        &rendered,
                        "value must be empty when `operator` is 'Exists'",
                    );
                }
            }
            _ => e.not_supported(&child(&p, "operator"), &q(op), &["Equal", "Exists"]),
        }
        validate_taint_effect(e, effect, true, &child(&p, "effect"));
    }
}

/// `ValidatePodSpec`: the checks shared by Pods and every pod template.
fn validate_pod_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let empty = Value::Object(Map::new());
    let spec = spec.filter(|s| s.is_object()).unwrap_or(&empty);
    let vols = validate_volumes(e, spec.get("volumes"), &child(path, "volumes"));
    let mut names = HashSet::new();
    validate_containers(
        e,
        spec.get("containers"),
        &vols,
        &child(path, "containers"),
        &mut names,
        true,
    );
    validate_containers(
        e,
        spec.get("initContainers"),
        &vols,
        &child(path, "initContainers"),
        &mut names,
        false,
    );
    let rp = str_of(spec.get("restartPolicy"));
    if !rp.is_empty() && !matches!(rp, "Always" | "OnFailure" | "Never") {
        e.not_supported(
            &child(path, "restartPolicy"),
            &q(rp),
            &["Always", "OnFailure", "Never"],
        );
    }
    let dns = str_of(spec.get("dnsPolicy"));
    if !dns.is_empty()
        && !matches!(
            dns,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        e.not_supported(
            &child(path, "dnsPolicy"),
            &q(dns),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        );
    }
    validate_labels(e, spec.get("nodeSelector"), &child(path, "nodeSelector"));
    let sa = str_of(spec.get("serviceAccountName"));
    if !sa.is_empty() {
        e.invalid_msgs(
            &child(path, "serviceAccountName"),
            sa,
            is_dns1123_subdomain(sa),
        );
    }
    let node = str_of(spec.get("nodeName"));
    if !node.is_empty() {
        e.invalid_msgs(&child(path, "nodeName"), node, is_dns1123_subdomain(node));
    }
    if let Some(ads) =
        int_of(spec.get("activeDeadlineSeconds")).filter(|a| !(1..=i64::from(i32::MAX)).contains(a))
    {
        e.invalid(
            &child(path, "activeDeadlineSeconds"),
            &ads.to_string(),
            "must be between 1 and 2147483647, inclusive",
        );
    }
    for f in ["hostname", "subdomain"] {
        let v = str_of(spec.get(f));
        if !v.is_empty() {
            e.invalid_msgs(&child(path, f), v, is_dns1123_label(v));
        }
    }
    validate_tolerations(e, spec.get("tolerations"), &child(path, "tolerations"));
}

/// `ValidatePodTemplateSpec` (note upstream's label path omits `metadata`).
fn validate_pod_template(e: &mut Errs, tmpl: Option<&Value>, path: &str) {
    let meta = tmpl.and_then(|t| t.get("metadata"));
    validate_labels(
        e,
        meta.and_then(|m| m.get("labels")),
        &child(path, "labels"),
    );
    validate_annotations(
        e,
        meta.and_then(|m| m.get("annotations")),
        &child(path, "annotations"),
    );
    let spec = tmpl.and_then(|t| t.get("spec"));
    validate_pod_spec(e, spec, &child(path, "spec"));
    if !arr(spec.and_then(|s| s.get("ephemeralContainers"))).is_empty() {
        e.forbidden(
            &child(path, "spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        );
    }
}

fn template_labels(spec: Option<&Value>) -> Option<&Value> {
    spec.and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
}

fn template_restart_policy(spec: Option<&Value>) -> &str {
    // Defaulting sets Always when absent.
    match str_of(
        spec.and_then(|s| s.get("template"))
            .and_then(|t| t.get("spec"))
            .and_then(|s| s.get("restartPolicy")),
    ) {
        "" => "Always",
        rp => rp,
    }
}

fn template_has_deadline(spec: Option<&Value>) -> bool {
    present(
        spec.and_then(|s| s.get("template"))
            .and_then(|t| t.get("spec"))
            .and_then(|s| s.get("activeDeadlineSeconds")),
    )
}

fn nonneg(e: &mut Errs, v: Option<&Value>, path: &str) {
    if let Some(n) = int_of(v).filter(|n| *n < 0) {
        e.invalid(path, &n.to_string(), "must be greater than or equal to 0");
    }
}

// ---------------------------------------------------------------------------------------
// apps
// ---------------------------------------------------------------------------------------

/// `ValidatePodTemplateSpecForReplicaSet` (Deployments and ReplicaSets).
fn validate_template_for_rs(e: &mut Errs, spec: Option<&Value>, sel: Option<&Value>, what: &str) {
    let labels = string_map(template_labels(spec));
    if !selector_is_empty(sel) && !selector_matches(sel, &labels) {
        e.invalid(
            "spec.template.metadata.labels",
            &go_map(template_labels(spec)),
            "`selector` does not match template `labels`",
        );
    }
    validate_pod_template(e, spec.and_then(|s| s.get("template")), "spec.template");
    let rp = template_restart_policy(spec);
    if rp != "Always" {
        e.not_supported("spec.template.spec.restartPolicy", &q(rp), &["Always"]);
    }
    if template_has_deadline(spec) {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {what} is not Supported"),
        );
    }
}

fn validate_required_selector(e: &mut Errs, sel: Option<&Value>, what: &str) {
    if !present(sel) {
        e.required("spec.selector", "");
    } else {
        validate_label_selector(e, sel, "spec.selector");
        if selector_entry_count(sel) == 0 {
            e.invalid(
                "spec.selector",
                &go_selector(sel),
                &format!("empty selector is invalid for {what}"),
            );
        }
    }
}

/// `ValidatePositiveIntOrPercent`: a percent string must be one (the error prints the
/// IntOrString struct), a number must not be negative.
fn positive_int_or_percent(e: &mut Errs, v: Option<&Value>, path: &str) {
    match v {
        Some(Value::String(s)) if !res().percent.is_match(s) => e.invalid(
            path,
            &go_int_or_string(v),
            &regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'",
                PERCENT_FMT,
                &["1%", "93%"],
            ),
        ),
        Some(n @ Value::Number(_)) => nonneg(e, Some(n), path),
        _ => {}
    }
}

/// `IsNotMoreThan100Percent`.
fn not_more_than_100_percent(e: &mut Errs, v: Option<&Value>, path: &str) {
    if let Some(Value::String(s)) = v {
        if res().percent.is_match(s) && s[..s.len() - 1].parse::<u64>().is_ok_and(|p| p > 100) {
            e.invalid(path, &go_int_or_string(v), "must not be greater than 100%");
        }
    }
}

/// An `intstr.IntOrString` value in a field error (`%#v` of the struct).
fn go_int_or_string(v: Option<&Value>) -> String {
    crate::go_value::go_syntax("intstr.IntOrString", v)
}

fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .unwrap_or(0),
        other => int_of(other).unwrap_or(0),
    }
}

fn validate_deployment(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    nonneg(e, spec.and_then(|s| s.get("replicas")), "spec.replicas");
    validate_required_selector(e, sel, "deployment");
    if selector_converts(sel) {
        validate_template_for_rs(e, spec, sel, "ReplicaSet");
    } else {
        e.invalid("spec.selector", &go_selector(sel), "invalid label selector");
    }
    let strategy = spec.and_then(|s| s.get("strategy"));
    match str_of(strategy.and_then(|s| s.get("type"))) {
        "" => {}
        "Recreate" => {
            if present(strategy.and_then(|s| s.get("rollingUpdate"))) {
                e.forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                );
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = strategy
                .and_then(|s| s.get("rollingUpdate"))
                .filter(|r| r.is_object())
            {
                let mu = ru.get("maxUnavailable");
                let ms = ru.get("maxSurge");
                let mu_path = "spec.strategy.rollingUpdate.maxUnavailable";
                positive_int_or_percent(e, mu, mu_path);
                positive_int_or_percent(e, ms, "spec.strategy.rollingUpdate.maxSurge");
                if int_or_percent_value(mu) == 0 && int_or_percent_value(ms) == 0 {
                    e.invalid(
                        mu_path,
                        &go_int_or_string(mu),
                        "may not be 0 when `maxSurge` is 0",
                    );
                }
                // Only maxUnavailable is held to 100%.
                not_more_than_100_percent(e, mu, mu_path);
            }
        }
        _ => e.not_supported(
            "spec.strategy",
            &crate::go_value::go_syntax("apps.DeploymentStrategy", strategy),
            &["Recreate", "RollingUpdate"],
        ),
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    nonneg(
        e,
        spec.and_then(|s| s.get("revisionHistoryLimit")),
        "spec.revisionHistoryLimit",
    );
    if let Some(pds) = int_of(spec.and_then(|s| s.get("progressDeadlineSeconds"))) {
        nonneg(
            e,
            spec.and_then(|s| s.get("progressDeadlineSeconds")),
            "spec.progressDeadlineSeconds",
        );
        if pds <= int_of(spec.and_then(|s| s.get("minReadySeconds"))).unwrap_or(0) {
            e.invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than minReadySeconds",
            );
        }
    }
}

fn validate_replicaset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    nonneg(e, spec.and_then(|s| s.get("replicas")), "spec.replicas");
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    validate_required_selector(e, sel, "deployment");
    if selector_converts(sel) {
        validate_template_for_rs(e, spec, sel, "ReplicaSet");
    } else {
        e.invalid("spec.selector", &go_selector(sel), "invalid label selector");
    }
}

fn validate_statefulset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let pmp = str_of(get("podManagementPolicy"));
    if !pmp.is_empty() && !matches!(pmp, "OrderedReady" | "Parallel") {
        e.invalid(
            "spec.podManagementPolicy",
            &q(pmp),
            "must be 'OrderedReady' or 'Parallel'",
        );
    }
    let us = get("updateStrategy");
    match str_of(us.and_then(|u| u.get("type"))) {
        "" => {}
        "OnDelete" => {
            if present(us.and_then(|u| u.get("rollingUpdate"))) {
                e.invalid(
                    "spec.updateStrategy.rollingUpdate",
                    &crate::go_value::go_syntax(
                        "apps.RollingUpdateStatefulSetStrategy",
                        us.and_then(|u| u.get("rollingUpdate")),
                    ),
                    "only allowed for updateStrategy 'RollingUpdate'",
                );
            }
        }
        "RollingUpdate" => {
            let ru = us.and_then(|u| u.get("rollingUpdate"));
            nonneg(
                e,
                ru.and_then(|r| r.get("partition")),
                "spec.updateStrategy.rollingUpdate.partition",
            );
            if let Some(mu) = ru
                .and_then(|r| r.get("maxUnavailable"))
                .filter(|m| !m.is_null())
            {
                let p = "spec.updateStrategy.rollingUpdate.maxUnavailable";
                positive_int_or_percent(e, Some(mu), p);
                if int_or_percent_value(Some(mu)) == 0 {
                    e.invalid(p, &go_int_or_string(Some(mu)), "cannot be 0");
                }
                not_more_than_100_percent(e, Some(mu), p);
            }
        }
        _ => e.invalid(
            "spec.updateStrategy",
            &crate::go_value::go_syntax("apps.StatefulSetUpdateStrategy", us),
            "must be 'RollingUpdate' or 'OnDelete'",
        ),
    }
    if let Some(pol) = get("persistentVolumeClaimRetentionPolicy").filter(|p| p.is_object()) {
        for f in ["whenDeleted", "whenScaled"] {
            let v = str_of(pol.get(f));
            if !v.is_empty() && !matches!(v, "Retain" | "Delete") {
                e.not_supported(
                    &format!("spec.persistentVolumeClaimRetentionPolicy.{f}"),
                    &q(v),
                    &["Retain", "Delete"],
                );
            }
        }
    }
    nonneg(e, get("replicas"), "spec.replicas");
    nonneg(e, get("minReadySeconds"), "spec.minReadySeconds");
    nonneg(
        e,
        get("ordinals").and_then(|o| o.get("start")),
        "spec.ordinals.start",
    );
    let sel = get("selector");
    if !present(sel) {
        e.required("spec.selector", "");
    } else {
        validate_label_selector(e, sel, "spec.selector");
        if selector_entry_count(sel) == 0 {
            e.invalid(
                "spec.selector",
                &go_selector(sel),
                "empty selector is invalid for statefulset",
            );
        }
    }
    if selector_converts(sel) {
        let labels = string_map(template_labels(spec));
        if !selector_is_empty(sel) && !selector_matches(sel, &labels) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
        let meta = get("template").and_then(|t| t.get("metadata"));
        validate_labels(
            e,
            meta.and_then(|m| m.get("labels")),
            "spec.template.labels",
        );
        validate_annotations(
            e,
            meta.and_then(|m| m.get("annotations")),
            "spec.template.annotations",
        );
    } else {
        e.invalid("spec.selector", &go_selector(sel), "");
    }
    let rp = template_restart_policy(spec);
    if rp != "Always" {
        e.not_supported("spec.template.spec.restartPolicy", &q(rp), &["Always"]);
    }
    if template_has_deadline(spec) {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in StatefulSet is not Supported",
        );
    }
}

fn validate_daemonset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    // Upstream has no separate "required" check here: a missing selector selects nothing,
    // so it is reported as not matching the template labels.
    validate_label_selector(e, sel, "spec.selector");
    if selector_converts(sel)
        && !selector_matches_or_everything(sel, &string_map(template_labels(spec)))
    {
        e.invalid(
            "spec.template.metadata.labels",
            &go_map(template_labels(spec)),
            "`selector` does not match template `labels`",
        );
    }
    if present(sel) && selector_entry_count(sel) == 0 {
        e.invalid(
            "spec.selector",
            &go_selector(sel),
            "empty selector is invalid for daemonset",
        );
    }
    validate_pod_template(e, spec.and_then(|s| s.get("template")), "spec.template");
    let rp = template_restart_policy(spec);
    if rp != "Always" {
        e.not_supported("spec.template.spec.restartPolicy", &q(rp), &["Always"]);
    }
    if template_has_deadline(spec) {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in DaemonSet is not Supported",
        );
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    let us = spec.and_then(|s| s.get("updateStrategy"));
    match str_of(us.and_then(|u| u.get("type"))) {
        "" | "OnDelete" => {}
        "RollingUpdate" => match us
            .and_then(|u| u.get("rollingUpdate"))
            .filter(|r| r.is_object())
        {
            None => e.required("spec.updateStrategy.rollingUpdate", ""),
            Some(ru) => validate_daemonset_rolling_update(e, ru),
        },
        _ => e.not_supported(
            "spec.updateStrategy",
            &crate::go_value::go_syntax("apps.DaemonSetUpdateStrategy", us),
            &["RollingUpdate", "OnDelete"],
        ),
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("revisionHistoryLimit")),
        "spec.revisionHistoryLimit",
    );
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxUnavailable and maxSurge is non-zero.
fn validate_daemonset_rolling_update(e: &mut Errs, ru: &Value) {
    let mu = ru.get("maxUnavailable").filter(|v| !v.is_null());
    let ms = ru.get("maxSurge").filter(|v| !v.is_null());
    let mu_path = "spec.updateStrategy.rollingUpdate.maxUnavailable";
    let ms_path = "spec.updateStrategy.rollingUpdate.maxSurge";
    positive_int_or_percent(e, mu, mu_path);
    positive_int_or_percent(e, ms, ms_path);
    not_more_than_100_percent(e, mu, mu_path);
    not_more_than_100_percent(e, ms, ms_path);
    match (int_or_percent_value(mu) != 0, int_or_percent_value(ms) != 0) {
        (true, true) => e.invalid(
            ms_path,
            &go_int_or_string(ms),
            "may not be set when maxUnavailable is non-zero",
        ),
        (false, false) => e.required(mu_path, "cannot be 0 when maxSurge is 0"),
        _ => {}
    }
}

fn selector_matches_or_everything(sel: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    selector_is_empty(sel) || selector_matches(sel, labels)
}

// ---------------------------------------------------------------------------------------
// batch
// ---------------------------------------------------------------------------------------

/// `validateJobSpec`: the checks shared by Jobs and CronJob job templates.
fn validate_job_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let get = |k: &str| spec.and_then(|s| s.get(k));
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        nonneg(e, get(f), &child(path, f));
    }
    let mode = str_of(get("completionMode"));
    if !mode.is_empty() {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            e.not_supported(
                &child(path, "completionMode"),
                &q(mode),
                &["NonIndexed", "Indexed"],
            );
        }
        if mode == "Indexed" {
            if !present(get("completions")) {
                e.required(
                    &child(path, "completions"),
                    "when completion mode is Indexed",
                );
            }
            if let Some(p) = int_of(get("parallelism")).filter(|p| *p > 100_000) {
                e.invalid(
                    &child(path, "parallelism"),
                    &p.to_string(),
                    "must be less than or equal to 100000 when completion mode is Indexed",
                );
            }
        }
    }
    let prp = str_of(get("podReplacementPolicy"));
    if !prp.is_empty() && !matches!(prp, "TerminatingOrFailed" | "Failed") {
        e.not_supported(
            &child(path, "podReplacementPolicy"),
            &q(prp),
            &["TerminatingOrFailed", "Failed"],
        );
    }
    validate_pod_template(e, get("template"), &child(path, "template"));
    let rp_path = child(path, "template.spec.restartPolicy");
    match template_restart_policy(spec) {
        "Always" => e.required(&rp_path, "valid values: \"OnFailure\", \"Never\""),
        "OnFailure" | "Never" => {}
        other => e.not_supported(&rp_path, &q(other), &["OnFailure", "Never"]),
    }
}

fn validate_job(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let name = str_of(o.get("metadata").and_then(|m| m.get("name")));
    let get = |k: &str| spec.and_then(|s| s.get(k));
    validate_job_spec(e, spec, "spec");
    let sel = get("selector");
    if present(sel) || bool_of(get("manualSelector")) {
        // Without manualSelector the server generates the selector (and the matching labels)
        // after the first validation pass; both are then checked on the second pass.
        if !present(sel) {
            e.required("spec.selector", "");
        } else {
            validate_label_selector(e, sel, "spec.selector");
        }
        if selector_converts(sel) && !selector_matches(sel, &string_map(template_labels(spec))) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
    }
    let indexed_completions =
        int_of(get("completions")).filter(|c| *c > 0 && str_of(get("completionMode")) == "Indexed");
    if let Some(host) = indexed_completions
        .map(|c| format!("{name}-{}", c - 1))
        .filter(|h| !is_dns1123_label(h).is_empty())
    {
        e.invalid(
            "metadata.name",
            &q(name),
            &format!("will not able to create pod with invalid DNS label: {host}"),
        );
    }
}

fn validate_job_update(e: &mut Errs, new: &Value, old: &Value) {
    let ns = new.get("spec");
    let os = old.get("spec");
    let nget = |k: &str| ns.and_then(|s| s.get(k));
    let oget = |k: &str| os.and_then(|s| s.get(k));
    // completions: immutable, except that an Indexed Job may scale completions with parallelism.
    if !sem_eq(nget("completions"), oget("completions")) {
        let indexed = str_of(nget("completionMode")) == "Indexed";
        if !indexed {
            e.invalid(
                "spec.completions",
                &nget("completions").map(num).unwrap_or_else(|| q("null")),
                "field is immutable",
            );
        } else if let Some(c) =
            int_of(nget("completions")).filter(|c| Some(*c) != int_of(nget("parallelism")))
        {
            e.invalid(
                "spec.completions",
                &c.to_string(),
                "can only be modified in tandem with spec.parallelism",
            );
        }
    }
    if !sem_eq(nget("selector"), oget("selector")) {
        e.invalid(
            "spec.selector",
            &go_selector(nget("selector")),
            "field is immutable",
        );
    }
    // The template is immutable; a suspended Job that never started may change its
    // scheduling directives (node affinity, node selector, tolerations, labels, annotations,
    // scheduling gates).
    let mutable_sched =
        bool_of(oget("suspend")) && !present(old.get("status").and_then(|s| s.get("startTime")));
    let strip = |t: Option<&Value>| -> Value {
        let mut t = t.cloned().unwrap_or(Value::Null);
        if mutable_sched {
            if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("labels");
                m.remove("annotations");
            }
            if let Some(s) = t.get_mut("spec").and_then(Value::as_object_mut) {
                s.remove("nodeSelector");
                s.remove("tolerations");
                s.remove("schedulingGates");
                if let Some(a) = s.get_mut("affinity").and_then(Value::as_object_mut) {
                    a.remove("nodeAffinity");
                }
                if s.get("affinity")
                    .and_then(Value::as_object)
                    .is_some_and(|a| a.is_empty())
                {
                    s.remove("affinity");
                }
            }
        }
        t
    };
    if !sem_eq(
        Some(&strip(nget("template"))),
        Some(&strip(oget("template"))),
    ) {
        e.invalid(
            "spec.template",
            &go_pod_template(nget("template")),
            "field is immutable",
        );
    }
    for f in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex"] {
        if !sem_eq(nget(f), oget(f)) {
            let v = match nget(f) {
                Some(Value::String(s)) => q(s),
                Some(Value::Number(n)) => n.to_string(),
                _ => q("null"),
            };
            e.invalid(&format!("spec.{f}"), &v, "field is immutable");
        }
    }
}

/// A PodTemplateSpec in a field error. Upstream prints the whole internal struct with `%#v`;
/// kube-sim has no layout of the internal pod spec and prints the JSON inside the type's name
/// (a known difference, see the README).
fn go_pod_template(t: Option<&Value>) -> String {
    format!(
        "core.PodTemplateSpec{{{}}}",
        t.map(|v| v.to_string()).unwrap_or_default()
    )
}

// --- cron schedules (robfig/cron v3 ParseStandard) ---

fn cron_int(expr: &str) -> Result<u32, String> {
    let n: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            q(expr)
        )
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    u32::try_from(n).map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            q(expr)
        )
    })
}

fn cron_range(
    expr: &str,
    min: u32,
    max: u32,
    names: &[&str],
    name_base: u32,
) -> Result<(), String> {
    let int_or_name = |s: &str| -> Result<u32, String> {
        let lower = s.to_lowercase();
        match names.iter().position(|n| *n == lower) {
            Some(p) => Ok(p as u32 + name_base),
            None => cron_int(s),
        }
    };
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_high.len() == 1;
    let (start, mut end);
    if low_high[0] == "*" || low_high[0] == "?" {
        start = min;
        end = max;
    } else {
        start = int_or_name(low_high[0])?;
        end = match low_high.len() {
            1 => start,
            2 => int_or_name(low_high[1])?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let s = cron_int(range_and_step[1])?;
            if single {
                end = max;
            }
            s
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {expr}"
        ));
    }
    if end > max {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {expr}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn parse_cron(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec.trim_start();
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        match spec.find(' ') {
            Some(i) => spec = spec[i..].trim_start(),
            None => {
                return Err(format!(
                    "provided bad location {}: unknown time zone {}",
                    spec, spec
                ))
            }
        }
    }
    if spec.starts_with('@') {
        return match spec {
            "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight"
            | "@hourly" => Ok(()),
            s if s.starts_with("@every ") => Ok(()),
            s => Err(format!("unrecognized descriptor: {s}")),
        };
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    const MONTHS: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let bounds: [(u32, u32, &[&str], u32); 5] = [
        (0, 59, &[], 0),
        (0, 23, &[], 0),
        (1, 31, &[], 0),
        (1, 12, MONTHS, 1),
        (0, 6, DAYS, 0),
    ];
    for (f, (min, max, names, base)) in fields.iter().zip(bounds) {
        for part in f.split(',') {
            cron_range(part, min, max, names, base)?;
        }
    }
    Ok(())
}

fn validate_cronjob(e: &mut Errs, o: &Value, old: Option<&Value>) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let schedule = str_of(get("schedule"));
    if schedule.is_empty() {
        e.required("spec.schedule", "");
    } else {
        if let Err(msg) = parse_cron(schedule) {
            e.invalid("spec.schedule", &q(schedule), &msg);
        }
        let allow_tz = old
            .is_some_and(|o| str_of(o.get("spec").and_then(|s| s.get("schedule"))).contains("TZ"));
        if allow_tz && schedule.contains("TZ") && present(get("timeZone")) {
            e.invalid(
                "spec.schedule",
                &q(schedule),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            );
        } else if !allow_tz && schedule.contains("TZ") {
            e.invalid(
                "spec.schedule",
                &q(schedule),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            );
        }
    }
    nonneg(
        e,
        get("startingDeadlineSeconds"),
        "spec.startingDeadlineSeconds",
    );
    let old_tz = old
        .and_then(|o| o.get("spec"))
        .and_then(|s| s.get("timeZone"));
    if old.is_none() || !sem_eq(old_tz, get("timeZone")) {
        if let Some(tz) = get("timeZone").and_then(Value::as_str) {
            if let Some(msg) = time_zone_error(tz) {
                e.invalid("spec.timeZone", &q(tz), &msg);
            }
        }
    }
    let cp = str_of(get("concurrencyPolicy"));
    if !cp.is_empty() && !matches!(cp, "Allow" | "Forbid" | "Replace") {
        e.not_supported(
            "spec.concurrencyPolicy",
            &q(cp),
            &["Allow", "Forbid", "Replace"],
        );
    }
    let jt_spec = get("jobTemplate").and_then(|j| j.get("spec"));
    validate_job_spec(e, jt_spec, "spec.jobTemplate.spec");
    if let Some(sel) = jt_spec
        .and_then(|s| s.get("selector"))
        .filter(|s| !s.is_null())
    {
        e.invalid(
            "spec.jobTemplate.spec.selector",
            &go_selector(Some(sel)),
            "`selector` will be auto-generated",
        );
    }
    if bool_of(jt_spec.and_then(|s| s.get("manualSelector"))) {
        e.not_supported(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        );
    }
    nonneg(
        e,
        get("successfulJobsHistoryLimit"),
        "spec.successfulJobsHistoryLimit",
    );
    nonneg(
        e,
        get("failedJobsHistoryLimit"),
        "spec.failedJobsHistoryLimit",
    );
    if old.is_none() {
        let name = str_of(o.get("metadata").and_then(|m| m.get("name")));
        if name.len() > 52 {
            e.invalid(
                "metadata.name",
                &q(name),
                "must be no more than 52 characters",
            );
        }
    }
}

/// `validateTimeZone`: an explicit IANA zone name (the time zone database is the one found
/// at /usr/share/zoneinfo, as Go's `time.LoadLocation` looks there first).
fn time_zone_error(tz: &str) -> Option<String> {
    if tz.is_empty() {
        return Some("timeZone must be nil or non-empty string".into());
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
    };
    if !tz.split('/').all(part_ok) {
        return Some(format!("unknown time zone {tz}"));
    }
    if tz.eq_ignore_ascii_case("Local") {
        return Some(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    let db = std::path::Path::new("/usr/share/zoneinfo");
    if tz != "UTC" && db.is_dir() && !db.join(tz).is_file() {
        return Some(format!("unknown time zone {tz}"));
    }
    None
}

// ---------------------------------------------------------------------------------------
// core
// ---------------------------------------------------------------------------------------

fn validate_pod_create(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    validate_pod_spec(e, spec, "spec");
    if !arr(spec.and_then(|s| s.get("ephemeralContainers"))).is_empty() {
        e.forbidden("spec.ephemeralContainers", "cannot be set on create");
    }
    if !str_of(spec.and_then(|s| s.get("nodeName"))).is_empty()
        && !arr(spec.and_then(|s| s.get("schedulingGates"))).is_empty()
    {
        e.forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        );
    }
    for list in ["containers", "initContainers"] {
        for (i, c) in arr(spec.and_then(|s| s.get(list))).iter().enumerate() {
            let image = str_of(c.get("image"));
            if image.trim() != image {
                e.invalid(
                    &format!("spec.{list}[{i}].image"),
                    &q(image),
                    "must not have leading or trailing whitespace",
                );
            }
        }
    }
}

const POD_UPDATE_MSG: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn validate_pod_update(e: &mut Errs, new: &Value, old: &Value) {
    let empty = Value::Object(Map::new());
    let ns = new.get("spec").filter(|s| s.is_object()).unwrap_or(&empty);
    let os = old.get("spec").filter(|s| s.is_object()).unwrap_or(&empty);
    validate_pod_spec(e, Some(ns), "spec");
    for list in ["containers", "initContainers"] {
        let nc = arr(ns.get(list));
        let oc = arr(os.get(list));
        if nc.len() != oc.len() {
            e.forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            );
            return;
        }
        for (i, c) in nc.iter().enumerate() {
            let image = str_of(c.get("image"));
            if image.is_empty() {
                e.required(&format!("spec.{list}[{i}].image"), "");
            }
            if image.trim() != image {
                e.invalid(
                    &format!("spec.{list}[{i}].image"),
                    &q(image),
                    "must not have leading or trailing whitespace",
                );
            }
        }
    }
    match (
        int_of(ns.get("activeDeadlineSeconds")),
        int_of(os.get("activeDeadlineSeconds")),
    ) {
        (Some(n), old_ads) => {
            if !(0..=i64::from(i32::MAX)).contains(&n) {
                e.invalid(
                    "spec.activeDeadlineSeconds",
                    &n.to_string(),
                    "must be between 0 and 2147483647, inclusive",
                );
                return;
            }
            if old_ads.is_some_and(|o| o < n) {
                e.invalid(
                    "spec.activeDeadlineSeconds",
                    &n.to_string(),
                    "must be less than or equal to previous value",
                );
                return;
            }
        }
        (None, Some(_)) => e.invalid(
            "spec.activeDeadlineSeconds",
            &q("null"),
            "must not update from a positive integer to nil value",
        ),
        (None, None) => {}
    }
    // Tolerations may only be added (existing ones kept; tolerationSeconds of NoExecute
    // ones may only shrink — approximated by "every old toleration is still present").
    let new_tols = arr(ns.get("tolerations"));
    for (i, t) in arr(os.get("tolerations")).iter().enumerate() {
        let same_key = |n: &&Value| {
            ["key", "operator", "value", "effect"]
                .iter()
                .all(|k| str_of(n.get(*k)) == str_of(t.get(*k)))
        };
        match new_tols.iter().find(same_key) {
            None => e.forbidden(
                &format!("spec.tolerations[{i}]"),
                "existing toleration can not be modified except its tolerationSeconds",
            ),
            Some(n) => {
                let (a, b) = (
                    int_of(n.get("tolerationSeconds")),
                    int_of(t.get("tolerationSeconds")),
                );
                if matches!((a, b), (Some(a), Some(b)) if a > b && b > 0) {
                    e.forbidden(
                        &format!("spec.tolerations[{i}].tolerationSeconds"),
                        "only decreasing tolerationSeconds is allowed",
                    );
                }
            }
        }
    }
    // Scheduling gates may only be removed.
    let old_gates: Vec<&str> = arr(os.get("schedulingGates"))
        .iter()
        .map(|g| str_of(g.get("name")))
        .collect();
    for (i, g) in arr(ns.get("schedulingGates")).iter().enumerate() {
        if !old_gates.contains(&str_of(g.get("name"))) {
            e.forbidden(
                &format!("spec.schedulingGates[{i}]"),
                "only deletion is allowed, but found new scheduling gate",
            );
        }
    }
    // Everything else must stay as it was.
    let mut munged = ns.clone();
    let mut original = os.clone();
    for list in ["containers", "initContainers"] {
        if let (Some(m), Some(o)) = (
            munged.get_mut(list).and_then(Value::as_array_mut),
            os.get(list).and_then(Value::as_array),
        ) {
            for (c, oc) in m.iter_mut().zip(o) {
                if let Some(c) = c.as_object_mut() {
                    match oc.get("image") {
                        Some(img) => c.insert("image".into(), img.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    if let (Some(m), Some(o)) = (munged.as_object_mut(), original.as_object_mut()) {
        for f in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
            m.remove(f);
            o.remove(f);
        }
        let old_tgps = int_of(o.get("terminationGracePeriodSeconds"));
        if old_tgps.is_some_and(|t| t < 0)
            && int_of(m.get("terminationGracePeriodSeconds")) == Some(1)
        {
            m.remove("terminationGracePeriodSeconds");
            o.remove("terminationGracePeriodSeconds");
        }
    }
    if !sem_eq(Some(&munged), Some(&original)) {
        let diff = json_diff(&original, &munged);
        e.forbidden("spec", &format!("{POD_UPDATE_MSG}\n{diff}"));
    }
}

/// A short description of what changed (upstream prints a cmp.Diff of the Go structs).
fn json_diff(old: &Value, new: &Value) -> String {
    let mut lines = Vec::new();
    diff_into(&mut lines, "", Some(old), Some(new));
    lines.join("\n")
}

fn diff_into(out: &mut Vec<String>, path: &str, a: Option<&Value>, b: Option<&Value>) {
    if sem_eq(a, b) {
        return;
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff_into(out, &child(path, k), x.get(k), y.get(k));
            }
        }
        _ => {
            let show =
                |v: Option<&Value>| v.map(|v| v.to_string()).unwrap_or_else(|| "null".into());
            out.push(format!("  {path}: - {} + {}", show(a), show(b)));
        }
    }
}

fn validate_rc(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    nonneg(e, get("minReadySeconds"), "spec.minReadySeconds");
    let sel = string_map(get("selector"));
    if sel.is_empty() {
        e.required("spec.selector", "");
    }
    nonneg(e, get("replicas"), "spec.replicas");
    if !present(get("template")) {
        e.required("spec.template", "");
        return;
    }
    if !sel.is_empty() {
        let labels = string_map(template_labels(spec));
        if sel.iter().any(|(k, v)| labels.get(k) != Some(v)) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
    }
    validate_pod_template(e, get("template"), "spec.template");
    let rp = template_restart_policy(spec);
    if rp != "Always" {
        e.not_supported("spec.template.spec.restartPolicy", &q(rp), &["Always"]);
    }
    if template_has_deadline(spec) {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicationController is not Supported",
        );
    }
}

/// The key upstream compares ports by: a ServicePort holding only protocol and port.
fn go_service_port(p: &Value) -> String {
    let key = serde_json::json!({
        "protocol": str_of(p.get("protocol")),
        "port": int_of(p.get("port")).unwrap_or(0),
    });
    crate::go_value::go_syntax("core.ServicePort", Some(&key))
}

fn validate_service(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let ty = match str_of(get("type")) {
        "" => "ClusterIP",
        t => t,
    };
    let headless = str_of(get("clusterIP")) == "None";
    let ports = arr(get("ports"));
    if ports.is_empty() && !headless && ty != "ExternalName" {
        e.required("spec.ports", "");
    }
    match ty {
        "LoadBalancer" | "NodePort" => {
            // The kubelet-port check comes first, then the headless one.
            if ty == "LoadBalancer" {
                for (i, p) in ports.iter().enumerate() {
                    if int_of(p.get("port")) == Some(10250) {
                        e.invalid(
                            &idx("spec.ports", i),
                            "10250",
                            "may not expose port 10250 externally since it is used by kubelet",
                        );
                    }
                }
            }
            if headless {
                e.invalid(
                    "spec.clusterIPs[0]",
                    &q("None"),
                    &format!("may not be set to 'None' for {ty} services"),
                );
            }
        }
        "ExternalName" => {
            let ips = arr(get("clusterIPs"));
            if !ips.is_empty() || !str_of(get("clusterIP")).is_empty() {
                e.forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                );
            }
            let cname = str_of(get("externalName"));
            let cname = cname.strip_suffix('.').unwrap_or(cname);
            if cname.is_empty() {
                e.required("spec.externalName", "");
            } else {
                e.invalid_msgs("spec.externalName", cname, is_dns1123_subdomain(cname));
            }
        }
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = idx("spec.ports", i);
        let name = str_of(p.get("name"));
        if ports.len() > 1 && name.is_empty() {
            e.required(&child(&pp, "name"), "");
        } else if !name.is_empty() {
            e.invalid_msgs(&child(&pp, "name"), name, is_dns1123_label(name));
            if !names.insert(name.to_string()) {
                e.duplicate(&child(&pp, "name"), &q(name));
            }
        }
        let port = int_of(p.get("port")).unwrap_or(0);
        for m in is_valid_port_num(port) {
            e.invalid(&child(&pp, "port"), &port.to_string(), &m);
        }
        validate_protocol(e, p.get("protocol"), &child(&pp, "protocol"));
        match p.get("targetPort") {
            Some(Value::String(s)) => {
                e.invalid_msgs(&child(&pp, "targetPort"), s, is_valid_port_name(s))
            }
            Some(n @ Value::Number(_)) => {
                let n = int_of(Some(n)).unwrap_or(0);
                for m in is_valid_port_num(n) {
                    e.invalid(&child(&pp, "targetPort"), &n.to_string(), &m);
                }
            }
            _ => {}
        }
    }
    validate_labels(e, get("selector"), "spec.selector");
    let sa = str_of(get("sessionAffinity"));
    if !sa.is_empty() && !matches!(sa, "ClientIP" | "None") {
        e.not_supported("spec.sessionAffinity", &q(sa), &["ClientIP", "None"]);
    }
    if !str_of(get("type")).is_empty()
        && !matches!(
            ty,
            "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort"
        )
    {
        e.not_supported(
            "spec.type",
            &q(ty),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        );
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if int_of(p.get("nodePort")).is_some_and(|n| n != 0) {
                e.forbidden(
                    &format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                );
            }
        }
    }
    // A node port may be used once per protocol.
    let mut node_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(np) = int_of(p.get("nodePort")).filter(|n| *n != 0) else {
            continue;
        };
        if !node_ports.insert((str_of(p.get("protocol")).to_string(), np)) {
            e.duplicate(&child(&idx("spec.ports", i), "nodePort"), &np.to_string());
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = match str_of(p.get("protocol")) {
            "" => "TCP",
            s => s,
        };
        if !seen.insert((proto.to_string(), int_of(p.get("port")).unwrap_or(0))) {
            e.duplicate(&idx("spec.ports", i), &go_service_port(p));
        }
    }
}

/// The service REST storage's checks of `clusterIPs`, `ipFamilies` and `ipFamilyPolicy`
/// before it allocates (`ValidateServiceClusterIPsRelatedFields`, then `initIPFamilyFields`)
/// on create, for kube-sim's single-stack IPv4 cluster. `o` is the defaulted Service as
/// the client sent it, before the storage fills in families and IPs.
pub fn service_ip_family_errors(o: &Value) -> Vec<FieldCause> {
    const FAMILIES: &[&str] = &["IPv4", "IPv6"];
    const POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
    let mut e = Errs::default();
    let spec = o.get("spec");
    let get = |k: &str| spec.and_then(|s| s.get(k));
    if str_of(get("type")) == "ExternalName" {
        return e.0;
    }
    let cluster_ip = str_of(get("clusterIP"));
    let mut ips: Vec<String> = arr(get("clusterIPs")).iter().map(scalar_string).collect();
    if ips.is_empty() && !cluster_ip.is_empty() {
        ips.push(cluster_ip.to_string());
    }
    let ips_value = Value::Array(ips.iter().map(|ip| Value::String(ip.clone())).collect());
    let ips_go = go_string_slice(Some(&ips_value));
    let mut families: Vec<String> = arr(get("ipFamilies")).iter().map(scalar_string).collect();
    let headless = ips.first().map(String::as_str) == Some("None");
    let selectorless = obj(get("selector")).is_none_or(|m| m.is_empty());
    let policy_set = get("ipFamilyPolicy").and_then(Value::as_str);
    let policy = match policy_set {
        Some(p) => p.to_string(),
        None if headless && selectorless => "RequireDualStack".into(),
        None => "SingleStack".into(),
    };
    if cluster_ip.is_empty() {
        // On create the plural field is filled from the singular one, never the reverse.
        if !ips.is_empty() {
            e.invalid(
                "spec.clusterIPs",
                &ips_go,
                "must be empty when `clusterIP` is not specified",
            );
        }
    } else if ips.first().map(String::as_str) != Some(cluster_ip) {
        e.invalid(
            "spec.clusterIPs",
            &ips_go,
            "first value must match `clusterIP`",
        );
    }
    let mut seen = HashSet::new();
    for (i, f) in families.iter().enumerate() {
        if !FAMILIES.contains(&f.as_str()) {
            e.not_supported(&idx("spec.ipFamilies", i), &q(f), FAMILIES);
        }
        if !seen.insert(f.clone()) {
            e.duplicate(&idx("spec.ipFamilies", i), &q(f));
        }
    }
    if let Some(p) = policy_set.filter(|p| !POLICIES.contains(p)) {
        e.not_supported("spec.ipFamilyPolicy", &q(p), POLICIES);
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                e.invalid(
                    "spec.clusterIPs",
                    &ips_go,
                    "'None' must be the first and only value",
                );
            }
            continue;
        }
        let msgs = endpoints::is_valid_ip(ip);
        bad_ips |= !msgs.is_empty();
        e.invalid_msgs(&idx("spec.clusterIPs", i), ip, msgs);
    }
    if ips.len() > 2 {
        e.invalid("spec.clusterIPs", &ips_go, "may only hold up to 2 values");
    }
    if bad_ips {
        return e.0;
    }
    let is_v6 = |ip: &str| {
        matches!(
            endpoints::parse_ip_sloppy(ip),
            Some(std::net::IpAddr::V6(_))
        )
    };
    if ips.len() > 1 && is_v6(&ips[0]) == is_v6(&ips[1]) {
        e.invalid(
            "spec.clusterIPs",
            &ips_go,
            "may specify no more than one IP for each IP family",
        );
    }
    if !headless {
        for (i, (ip, family)) in ips.iter().zip(&families).enumerate() {
            let want_v6 = match family.as_str() {
                "IPv4" => false,
                "IPv6" => true,
                _ => continue,
            };
            if want_v6 != is_v6(ip) {
                e.invalid(
                    &idx("spec.clusterIPs", i),
                    &q(ip),
                    &format!("expected an {family} value as indicated by `ipFamilies[{i}]`"),
                );
            }
        }
    }
    if !e.0.is_empty() {
        return e.0;
    }
    // initIPFamilyFields proper.
    if policy == "SingleStack" {
        if ips.len() == 2 {
            e.invalid(
                "spec.ipFamilyPolicy",
                &q(&policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            );
        }
        if families.len() == 2 {
            e.invalid(
                "spec.ipFamilyPolicy",
                &q(&policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            );
        }
    }
    for (i, ip) in ips.iter().enumerate() {
        if ip == "None" {
            break;
        }
        let family = if is_v6(ip) { "IPv6" } else { "IPv4" };
        if i >= families.len() {
            if family == "IPv6" {
                e.invalid(
                    &idx("spec.clusterIPs", i),
                    &ips_go,
                    "IPv6 is not configured on this cluster",
                );
            } else {
                families.push(family.to_string());
            }
        }
    }
    if !e.0.is_empty() || (headless && selectorless) {
        return e.0;
    }
    if policy == "RequireDualStack" {
        e.invalid(
            "spec.ipFamilyPolicy",
            &q(&policy),
            "this cluster is not configured for dual-stack services",
        );
    }
    for (i, f) in families.iter().enumerate() {
        if f != "IPv4" {
            e.invalid(
                &idx("spec.ipFamilies", i),
                &q(f),
                "not configured on this cluster",
            );
        }
    }
    e.0
}

fn service_primary_ip(spec: Option<&Value>) -> Option<String> {
    let spec = spec?;
    let ip = str_of(spec.get("clusterIP"));
    if !ip.is_empty() {
        return Some(ip.to_string());
    }
    arr(spec.get("clusterIPs"))
        .first()
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

fn validate_service_update(e: &mut Errs, new: &Value, old: &Value) {
    let ty = |o: &Value| str_of(o.get("spec").and_then(|s| s.get("type"))).to_string();
    if ty(new) == "ExternalName" || ty(old) == "ExternalName" {
        return;
    }
    match (
        service_primary_ip(new.get("spec")),
        service_primary_ip(old.get("spec")),
    ) {
        (Some(n), Some(o)) if n != o => {
            // A changed clusterIP replaces the list (upstream normalises clusterIPs from it).
            let mut ips: Vec<Value> =
                arr(new.get("spec").and_then(|s| s.get("clusterIPs"))).to_vec();
            if ips.first().and_then(Value::as_str) != Some(n.as_str()) {
                ips = vec![Value::String(n)];
            }
            e.invalid(
                "spec.clusterIPs[0]",
                &go_string_slice(Some(&Value::Array(ips))),
                "may not change once set",
            );
        }
        _ => {}
    }
}

fn validate_configmap(e: &mut Errs, o: &Value) {
    let data = obj(o.get("data"));
    let binary = obj(o.get("binaryData"));
    let mut total = 0usize;
    for (k, v) in data.into_iter().flatten() {
        e.invalid_msgs(&key("data", k), k, is_config_map_key(k));
        if binary.is_some_and(|b| b.contains_key(k)) {
            e.invalid(
                &key("data", k),
                &q(k),
                "duplicate of key present in binaryData",
            );
        }
        total += scalar_string(v).len();
    }
    for (k, v) in binary.into_iter().flatten() {
        e.invalid_msgs(&key("binaryData", k), k, is_config_map_key(k));
        total += base64_len(&scalar_string(v));
    }
    if total > 1024 * 1024 {
        e.too_long("", 1024 * 1024);
    }
}

fn base64_len(s: &str) -> usize {
    let t = s.trim_end_matches('=');
    t.len() * 3 / 4
}

fn validate_secret(e: &mut Errs, o: &Value) {
    let data = obj(o.get("data"));
    let mut total = 0usize;
    for (k, v) in data.into_iter().flatten() {
        e.invalid_msgs(&key("data", k), k, is_config_map_key(k));
        total += base64_len(&scalar_string(v));
    }
    if total > 1024 * 1024 {
        e.too_long("data", 1024 * 1024);
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    match str_of(o.get("type")) {
        "kubernetes.io/service-account-token" => {
            let name = str_of(
                o.get("metadata")
                    .and_then(|m| m.get("annotations"))
                    .and_then(|a| a.get("kubernetes.io/service-account.name")),
            );
            if name.is_empty() {
                e.required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                );
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => e.required("data[.dockercfg]", ""),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            e.required("data[.dockerconfigjson]", "")
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            e.required("data[username]", "");
            e.required("data[password]", "");
        }
        "kubernetes.io/ssh-auth"
            if str_of(data.and_then(|d| d.get("ssh-privatekey"))).is_empty() =>
        {
            e.required("data[ssh-privatekey]", "")
        }
        "kubernetes.io/tls" => {
            if !has("tls.crt") {
                e.required("data[tls.crt]", "");
            }
            if !has("tls.key") {
                e.required("data[tls.key]", "");
            }
        }
        _ => {}
    }
}

fn validate_immutable_data(e: &mut Errs, new: &Value, old: &Value, fields: &[&str]) {
    if !bool_of(old.get("immutable")) {
        return;
    }
    const MSG: &str = "field is immutable when `immutable` is set";
    if !bool_of(new.get("immutable")) {
        e.forbidden("immutable", MSG);
    }
    for f in fields {
        if !sem_eq(new.get(*f), old.get(*f)) || present(new.get(*f)) != present(old.get(*f)) {
            e.forbidden(f, MSG);
        }
    }
}

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// A resource quantity in units (approximate: enough to compare sizes).
fn quantity(s: &str) -> Option<f64> {
    // The one quantity parser (exact, in nano-units).
    rkcm_gocompat::Quantity::from_api(s)
        .ok()
        .and_then(|q| q.nano_value())
        .map(|n| n as f64 / 1e9)
}

fn validate_pvc_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let modes = arr(get("accessModes"));
    if modes.is_empty() {
        e.required(
            &child(path, "accessModes"),
            "at least 1 access mode is required",
        );
    }
    validate_label_selector(e, get("selector"), &child(path, "selector"));
    let (mut once_pod, mut other) = (false, false);
    for m in modes {
        let m = scalar_string(m);
        if !ACCESS_MODES.contains(&m.as_str()) {
            e.not_supported(&child(path, "accessModes"), &q(&m), ACCESS_MODES);
        } else if m == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            other = true;
        }
    }
    if once_pod && other {
        e.forbidden(
            &child(path, "accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        );
    }
    let storage_path = key(&child(path, "resources"), "storage");
    match get("resources")
        .and_then(|r| r.get("requests"))
        .and_then(|r| r.get("storage"))
    {
        None | Some(Value::Null) => e.required(&storage_path, ""),
        Some(v) => {
            let s = int_or_string(v);
            match quantity(&s) {
                Some(x) if x > 0.0 => {}
                Some(_) => e.invalid(&storage_path, &q(&s), "must be greater than zero"),
                None => e.invalid(&storage_path, &q(&s), "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
            }
        }
    }
    let sc = str_of(get("storageClassName"));
    if !sc.is_empty() {
        e.invalid_msgs(
            &child(path, "storageClassName"),
            sc,
            is_dns1123_subdomain(sc),
        );
    }
    let vm = str_of(get("volumeMode"));
    if !vm.is_empty() && !matches!(vm, "Block" | "Filesystem") {
        e.not_supported(&child(path, "volumeMode"), &q(vm), &["Block", "Filesystem"]);
    }
}

fn storage_request(o: &Value) -> Option<f64> {
    o.get("spec")?
        .get("resources")?
        .get("requests")?
        .get("storage")
        .map(int_or_string)
        .and_then(|s| quantity(&s))
}

fn validate_pvc_update(e: &mut Errs, new: &Value, old: &Value) {
    let mut ns = new.get("spec").cloned().unwrap_or(Value::Null);
    let mut os = old.get("spec").cloned().unwrap_or(Value::Null);
    let volume_name_unset = str_of(os.get("volumeName")).is_empty();
    let class_unset = !present(os.get("storageClassName"));
    if let Some(o) = os.as_object_mut() {
        if volume_name_unset {
            match ns.get("volumeName") {
                Some(v) => o.insert("volumeName".into(), v.clone()),
                None => o.remove("volumeName"),
            };
        }
        // A claim may move from no storage class to one once.
        match ns.get("storageClassName") {
            Some(v) if class_unset => {
                o.insert("storageClassName".into(), v.clone());
            }
            _ => {}
        }
    }
    let phase = str_of(
        new.get("status")
            .and_then(|s| s.get("phase"))
            .or_else(|| old.get("status").and_then(|s| s.get("phase"))),
    );
    let strip_storage = |s: &mut Value| {
        if let Some(r) = s
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            r.remove("storage");
        }
    };
    if phase == "Bound" {
        strip_storage(&mut ns);
        strip_storage(&mut os);
    }
    if !sem_eq(Some(&ns), Some(&os)) {
        e.forbidden(
            "spec",
            &format!("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}", json_diff(&os, &ns)),
        );
    }
    if matches!((storage_request(new), storage_request(old)), (Some(n), Some(o)) if n < o) {
        e.forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        );
    }
}

fn validate_pv(e: &mut Errs, o: &Value) {
    let spec = o.get("spec");
    if arr(spec.and_then(|s| s.get("accessModes"))).is_empty() {
        e.required("spec.accessModes", "");
    }
    let cap = obj(spec.and_then(|s| s.get("capacity")));
    match cap {
        None => e.required("spec.capacity", ""),
        Some(c) if c.is_empty() => e.required("spec.capacity", ""),
        Some(c) => {
            if !c.contains_key("storage") || c.len() > 1 {
                e.not_supported(
                    "spec.capacity",
                    &go_map(spec.and_then(|s| s.get("capacity"))),
                    &["storage"],
                );
            }
        }
    }
}

fn go_taint(t: &Value) -> String {
    crate::go_value::go_syntax("core.Taint", Some(t))
}

fn validate_node(e: &mut Errs, o: &Value) {
    let mut seen = HashSet::new();
    for (i, t) in arr(o.get("spec").and_then(|s| s.get("taints")))
        .iter()
        .enumerate()
    {
        let p = idx("spec.taints", i);
        let k = str_of(t.get("key"));
        e.invalid_msgs(&child(&p, "key"), k, is_qualified_name(k));
        let v = str_of(t.get("value"));
        let errs = is_label_value(v);
        if !errs.is_empty() {
            e.invalid(&child(&p, "value"), &q(v), &errs.join(";"));
        }
        let effect = str_of(t.get("effect"));
        validate_taint_effect(e, effect, false, &child(&p, "effect"));
        if !seen.insert((k.to_string(), effect.to_string())) {
            e.push(
                "FieldValueDuplicate",
                &p,
                format!(
                    "Duplicate value: {}: taints must be unique by key and effect pair",
                    go_taint(t)
                ),
            );
        }
    }
}

fn validate_namespace(e: &mut Errs, o: &Value) {
    for f in arr(o.get("spec").and_then(|s| s.get("finalizers"))) {
        let f = scalar_string(f);
        e.invalid_msgs("spec.finalizers", &f, is_qualified_name(&f));
        if !f.contains('/') && !matches!(f.as_str(), "kubernetes" | "orphan" | "foregroundDeletion")
        {
            e.invalid(
                "spec.finalizers",
                &q(&f),
                "name is neither a standard finalizer name nor is it fully qualified",
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// other groups
// ---------------------------------------------------------------------------------------

fn validate_pdb(e: &mut Errs, o: &Value) {
    let spec = o.get("spec");
    let get = |k: &str| spec.and_then(|s| s.get(k));
    if present(get("minAvailable")) && present(get("maxUnavailable")) {
        e.invalid(
            "spec",
            &crate::go_value::go_syntax("policy.PodDisruptionBudgetSpec", spec),
            "minAvailable and maxUnavailable cannot be both set",
        );
    }
    for f in ["minAvailable", "maxUnavailable"] {
        if present(get(f)) {
            positive_int_or_percent(e, get(f), &format!("spec.{f}"));
            not_more_than_100_percent(e, get(f), &format!("spec.{f}"));
        }
    }
    validate_label_selector(e, get("selector"), "spec.selector");
    let uhp = str_of(get("unhealthyPodEvictionPolicy"));
    if !uhp.is_empty() && !matches!(uhp, "AlwaysAllow" | "IfHealthyBudget") {
        e.not_supported(
            "spec.unhealthyPodEvictionPolicy",
            &q(uhp),
            &["AlwaysAllow", "IfHealthyBudget"],
        );
    }
}

fn validate_lease(e: &mut Errs, o: &Value) {
    let spec = o.get("spec");
    if let Some(d) = int_of(spec.and_then(|s| s.get("leaseDurationSeconds"))).filter(|d| *d <= 0) {
        e.invalid(
            "spec.leaseDurationSeconds",
            &d.to_string(),
            "must be greater than 0",
        );
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("leaseTransitions")),
        "spec.leaseTransitions",
    );
}

// ---------------------------------------------------------------------------------------
// Entry point
// ---------------------------------------------------------------------------------------

/// Validate an object of this kind as kube-apiserver would on create (`old == None`) or
/// update (`old == Some(previous)`). An empty result means the object is valid.
pub fn validate(
    group: &str,
    version: &str,
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldCause> {
    let _ = version;
    let mut e = Errs::default();
    if !obj.is_object() {
        e.invalid(
            "",
            &q("<not an object>"),
            "the object must be a JSON object",
        );
        return e.0;
    }
    let update = old.is_some();
    let empty = Value::Object(Map::new());
    let prev = old.filter(|o| o.is_object()).unwrap_or(&empty);
    validate_meta(&mut e, kind, obj, update);
    match (group, kind) {
        ("", "Pod") => {
            if update {
                validate_pod_update(&mut e, obj, prev);
                dra::validate_pod_claim_statuses(&mut e, obj);
            } else {
                validate_pod_create(&mut e, obj);
                let name = str_of(obj.pointer("/metadata/name"));
                dra::validate_pod_claims(&mut e, name, obj.get("spec"), "spec");
            }
        }
        (crate::dra::GROUP, kind) => {
            dra::validate(&mut e, kind, obj, old.filter(|o| o.is_object()))
        }
        ("", "PodTemplate") => validate_pod_template(&mut e, obj.get("template"), "template"),
        ("", "ReplicationController") => validate_rc(&mut e, obj),
        ("", "Service") => {
            if update {
                validate_service_update(&mut e, obj, prev);
            }
            validate_service(&mut e, obj);
        }
        ("", "ConfigMap") => {
            if update {
                validate_immutable_data(&mut e, obj, prev, &["data", "binaryData"]);
            }
            validate_configmap(&mut e, obj);
        }
        ("", "Secret") => {
            if update {
                let (nt, ot) = (obj.get("type"), prev.get("type"));
                if !sem_eq(nt, ot) {
                    e.invalid("type", &q(str_of(nt)), "field is immutable");
                }
                validate_immutable_data(&mut e, obj, prev, &["data"]);
            }
            validate_secret(&mut e, obj);
        }
        ("", "Namespace") => validate_namespace(&mut e, obj),
        ("", "Node") => validate_node(&mut e, obj),
        ("", "PersistentVolumeClaim") => {
            validate_pvc_spec(&mut e, obj.get("spec"), "spec");
            if update {
                validate_pvc_update(&mut e, obj, prev);
            }
        }
        ("", "PersistentVolume") => validate_pv(&mut e, obj),
        ("apps", "Deployment") => {
            validate_deployment(&mut e, obj);
            if update {
                immutable_selector(&mut e, obj, prev);
            }
        }
        ("apps", "ReplicaSet") => {
            validate_replicaset(&mut e, obj);
            if update {
                immutable_selector(&mut e, obj, prev);
            }
        }
        ("apps", "DaemonSet") => {
            validate_daemonset(&mut e, obj);
            if update {
                immutable_selector(&mut e, obj, prev);
            }
        }
        ("apps", "StatefulSet") => {
            validate_statefulset(&mut e, obj);
            if update {
                let strip = |s: Option<&Value>| -> Value {
                    let mut s = s.cloned().unwrap_or(Value::Null);
                    if let Some(m) = s.as_object_mut() {
                        for f in [
                            "replicas",
                            "template",
                            "updateStrategy",
                            "minReadySeconds",
                            "ordinals",
                            "persistentVolumeClaimRetentionPolicy",
                        ] {
                            m.remove(f);
                        }
                    }
                    s
                };
                if !sem_eq(
                    Some(&strip(obj.get("spec"))),
                    Some(&strip(prev.get("spec"))),
                ) {
                    e.forbidden(
                        "spec",
                        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                    );
                }
            }
        }
        ("batch", "Job") => {
            validate_job(&mut e, obj);
            if update {
                validate_job_update(&mut e, obj, prev);
            }
        }
        ("batch", "CronJob") => validate_cronjob(&mut e, obj, old),
        ("policy", "PodDisruptionBudget") => validate_pdb(&mut e, obj),
        ("coordination.k8s.io", "Lease") => validate_lease(&mut e, obj),
        ("", "Endpoints") => endpoints::validate_endpoints(&mut e, obj),
        // Updates are judged per subresource (`csr::validate_update`).
        ("certificates.k8s.io", "CertificateSigningRequest") if !update => {
            csr::validate_create(&mut e, obj)
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            endpoints::validate_endpoint_slice(&mut e, obj, old.filter(|o| o.is_object()))
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            volume_attachment::validate(&mut e, obj, old.filter(|o| o.is_object()))
        }
        ("networking.k8s.io", "ServiceCIDR") => gated::validate_service_cidr(&mut e, obj, old),
        ("networking.k8s.io", "IPAddress") => gated::validate_ip_address(&mut e, obj, old),
        ("internal.apiserver.k8s.io", "StorageVersion") => {
            gated::validate_storage_version(&mut e, obj)
        }
        (crate::admission_policies::GROUP, kind) => {
            admission_policy::validate(&mut e, kind, obj, old.filter(|o| o.is_object()))
        }
        _ => {}
    }
    e.0
}

fn immutable_selector(e: &mut Errs, new: &Value, old: &Value) {
    let ns = new.get("spec").and_then(|s| s.get("selector"));
    let os = old.get("spec").and_then(|s| s.get("selector"));
    if !sem_eq(ns, os) {
        e.invalid("spec.selector", &go_selector(ns), "field is immutable");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_reference_prints_as_go_prints_the_struct() {
        let event = json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"});
        assert_eq!(
            go_owner_reference(&event),
            "v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", Name:\"e\", UID:\"u\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}"
        );
        let controller = json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u", "controller": true});
        assert!(go_owner_reference(&controller).contains("Controller:(*bool)(0xc"));
    }
    use serde_json::json;

    fn v(group: &str, kind: &str, o: Value) -> Vec<FieldCause> {
        validate(group, "v1", kind, &o, None)
    }

    fn fields(c: &[FieldCause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}|{}", c.field, c.message))
            .collect()
    }

    fn pod_spec() -> Value {
        json!({"containers": [{"name": "c", "image": "nginx:1"}]})
    }

    fn deployment(sel: Value, labels: Value) -> Value {
        json!({"metadata": {"name": "d"}, "spec": {"selector": sel, "template": {"metadata": {"labels": labels}, "spec": pod_spec()}}})
    }

    #[test]
    fn names_per_kind() {
        let c = validate_name("ConfigMap", "Bad_Name").expect("invalid");
        assert_eq!(c.reason, "FieldValueInvalid");
        assert!(c
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
        assert!(validate_name("ConfigMap", "a.b-c").is_none());
        let ns = validate_name("Namespace", "a.b").expect("dots");
        assert_eq!(ns.message, "Invalid value: \"a.b\": must not contain dots");
        let svc = validate_name("Service", "1abc").expect("1035");
        assert!(
            svc.message.contains("a DNS-1035 label must consist of"),
            "{}",
            svc.message
        );
        assert!(svc.message.contains("(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"));
        assert!(validate_name("ClusterRole", "system:controller:x").is_none());
        assert_eq!(
            validate_name("Role", "a/b").map(|c| c.message),
            Some("Invalid value: \"a/b\": may not contain '/'".into())
        );
        assert_eq!(
            validate_name("Role", "..").map(|c| c.message),
            Some("Invalid value: \"..\": may not be '..'".into())
        );
        assert_eq!(
            validate_name("Pod", "").map(|c| c.reason),
            Some("FieldValueRequired")
        );
        let long = "a".repeat(64);
        assert_eq!(
            validate_name("Namespace", &long).map(|c| c.message),
            Some(format!(
                "Invalid value: \"{long}\": must be no more than 63 characters"
            ))
        );
    }

    #[test]
    fn generate_name_prefix() {
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"generateName": "gen-", "name": "gen-abcde"}}),
        );
        assert!(c.is_empty(), "{c:?}");
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"generateName": "Gen-", "name": "Gen-abcde"}}),
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].field, "metadata.generateName");
        assert_eq!(c[1].field, "metadata.name");
    }

    #[test]
    fn message_aggregation() {
        let one = FieldCause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.selector".into(),
        };
        let two = FieldCause {
            reason: "FieldValueInvalid",
            message: "Invalid value: -1: x".into(),
            field: "spec.replicas".into(),
        };
        assert_eq!(
            invalid_message("apps", "Deployment", "bad", std::slice::from_ref(&one)),
            "Deployment.apps \"bad\" is invalid: spec.selector: Required value"
        );
        assert_eq!(
            invalid_message("", "Pod", "p", &[one.clone(), two.clone(), one.clone()]),
            "Pod \"p\" is invalid: [spec.selector: Required value, spec.replicas: Invalid value: -1: x]"
        );
        assert_eq!(
            invalid_message("", "Pod", "p", &[one.clone(), one]),
            "Pod \"p\" is invalid: spec.selector: Required value"
        );
    }

    #[test]
    fn labels_annotations_owners_finalizers() {
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "labels": {"a/b/c": "x", "ok": "bad value"}}}),
        );
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0]
            .message
            .starts_with("Invalid value: \"a/b/c\": a qualified name must consist of"));
        assert!(c[1]
            .message
            .starts_with("Invalid value: \"bad value\": a valid label must be an empty string"));
        assert!(c.iter().all(|c| c.field == "metadata.labels"));
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "labels": {"k": "v".repeat(64)}}}),
        );
        assert!(c[0].message.ends_with("must be no more than 63 characters"));
        let big = "x".repeat(256 * 1024);
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "annotations": {"k": big}}}),
        );
        assert_eq!(
            fields(&c),
            vec!["metadata.annotations|Too long: must have at most 262144 bytes"]
        );
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "annotations": {"Example.com/Key": "x"}}}),
        );
        assert!(c.is_empty(), "{c:?}");
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "1", "controller": true},
                {"apiVersion": "", "kind": "", "name": "", "uid": "", "controller": true}]}}),
        );
        let f = fields(&c);
        assert!(f.contains(&"metadata.ownerReferences.apiVersion|Invalid value: \"\": version must not be empty".to_string()), "{f:?}");
        assert!(f.contains(
            &"metadata.ownerReferences.uid|Invalid value: \"\": uid must not be empty".to_string()
        ));
        assert!(f.iter().any(|m| m.contains("Only one reference can have Controller set to true. Found \"true\" in references for Deployment/d and /")));
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "a", "finalizers": ["example.com/x", "kubernetes", "custom"]}}),
        );
        assert_eq!(fields(&c), vec!["metadata.finalizers|Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"]);
    }

    #[test]
    fn deployment_selector_rules() {
        assert!(v(
            "apps",
            "Deployment",
            deployment(
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "web"})
            )
        )
        .is_empty());
        let c = v(
            "apps",
            "Deployment",
            json!({"metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()}}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "spec.selector|Required value",
                "spec.template.metadata.labels|Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
            ]
        );
        let c = v(
            "apps",
            "Deployment",
            deployment(json!({}), json!({"app": "web"})),
        );
        assert_eq!(
            fields(&c),
            vec!["spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"]
        );
        let c = v(
            "apps",
            "Deployment",
            deployment(
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}),
                json!({"app": "api", "x": "y"}),
            ),
        );
        assert!(c.is_empty(), "{c:?}");
        let mut d = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"}),
        );
        d["spec"]["replicas"] = json!(-1);
        d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        let c = v("apps", "Deployment", d);
        assert_eq!(
            fields(&c),
            vec![
                "spec.replicas|Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.restartPolicy|Unsupported value: \"Never\": supported values: \"Always\""
            ]
        );
    }

    #[test]
    fn workload_selectors_other_kinds() {
        let rs = deployment(json!({"matchLabels": {"app": "x"}}), json!({"app": "y"}));
        assert_eq!(v("apps", "ReplicaSet", rs.clone()).len(), 1);
        assert_eq!(
            v("apps", "DaemonSet", rs.clone())[0].field,
            "spec.template.metadata.labels"
        );
        let mut ss = rs;
        ss["metadata"]["name"] = json!("db");
        assert_eq!(
            v("apps", "StatefulSet", ss)[0].field,
            "spec.template.metadata.labels"
        );
        let ds = json!({"metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec()}}});
        assert_eq!(fields(&v("apps", "DaemonSet", ds)), vec![
            "spec.template.metadata.labels|Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`"
        ]);
        let rc = json!({"metadata": {"name": "r"}, "spec": {"selector": {"app": "a"}, "template": {"metadata": {"labels": {"app": "b"}}, "spec": pod_spec()}}});
        assert_eq!(
            fields(&v("", "ReplicationController", rc)),
            vec!["spec.template.metadata.labels|Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"]
        );
        let rc = json!({"metadata": {"name": "r"}, "spec": {"template": {"spec": pod_spec()}}});
        assert_eq!(
            fields(&v("", "ReplicationController", rc)),
            vec!["spec.selector|Required value"]
        );
    }

    #[test]
    fn pod_spec_rules() {
        let c = v(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
        );
        assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
        let c = v(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
                {"name": "c", "image": "x", "ports": [{"containerPort": 70000}], "volumeMounts": [{"name": "nope", "mountPath": "/a"}]},
                {"name": "c", "image": ""},
                {"name": "Bad_Name", "image": "x"}]}}),
        );
        let f = fields(&c);
        assert!(f.contains(&"spec.containers[0].ports[0].containerPort|Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()), "{f:?}");
        assert!(
            f.contains(&"spec.containers[0].volumeMounts[0].name|Not found: \"nope\"".to_string())
        );
        assert!(f.contains(&"spec.containers[1].image|Required value".to_string()));
        assert!(f.contains(&"spec.containers[1].name|Duplicate value: \"c\"".to_string()));
        assert!(f.iter().any(|m| m.starts_with(
            "spec.containers[2].name|Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
        )));
        assert!(f.contains(&"spec.restartPolicy|Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".to_string()));
        let c = v(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}, {"name": "w"}],
                "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a"}]}]}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "spec.volumes[1].name|Duplicate value: \"v\"",
                "spec.volumes[2]|Required value: must specify a volume type"
            ]
        );
        let tmpl = deployment(json!({"matchLabels": {"a": "b"}}), json!({"a": "b"}));
        let mut t = tmpl.clone();
        t["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
        assert_eq!(
            fields(&v("apps", "Deployment", t)),
            vec!["spec.template.spec.containers[0].image|Required value"]
        );
        let c = v("", "Pod", json!({"metadata": {"name": "p"}, "spec": 5}));
        assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
        let c = v(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
        );
        assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
        let c = v(
            "",
            "Pod",
            json!({"metadata": 3, "spec": {"containers": [5, {"name": 1}]}}),
        );
        assert!(!c.is_empty());
    }

    #[test]
    fn job_and_cronjob_rules() {
        let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": pod_spec()}}});
        assert_eq!(fields(&v("batch", "Job", job)), vec!["spec.template.spec.restartPolicy|Required value: valid values: \"OnFailure\", \"Never\""]);
        let job = json!({"metadata": {"name": "j"}, "spec": {"parallelism": -1, "completions": -2, "backoffLimit": -3, "completionMode": "Odd",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
        assert_eq!(
            fields(&v("batch", "Job", job)),
            vec![
                "spec.parallelism|Invalid value: -1: must be greater than or equal to 0",
                "spec.completions|Invalid value: -2: must be greater than or equal to 0",
                "spec.backoffLimit|Invalid value: -3: must be greater than or equal to 0",
                "spec.completionMode|Unsupported value: \"Odd\": supported values: \"NonIndexed\", \"Indexed\""
            ]
        );
        let job = json!({"metadata": {"name": "j"}, "spec": {"manualSelector": true,
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
        assert_eq!(fields(&v("batch", "Job", job.clone())), vec![
            "spec.selector|Required value",
            "spec.template.metadata.labels|Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`"
        ]);
        let mut ok = job.clone();
        ok["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
        assert!(v("batch", "Job", ok.clone()).is_empty());
        // Updates: selector and template immutable, completions immutable for NonIndexed.
        let mut upd = ok.clone();
        upd["spec"]["selector"] = json!({"matchLabels": {"a": "c"}});
        upd["spec"]["template"]["metadata"]["labels"] = json!({"a": "c"});
        let c = validate("batch", "v1", "Job", &upd, Some(&ok));
        assert!(fields(&c).contains(&"spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"c\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".to_string()), "{c:?}");
        assert!(c
            .iter()
            .any(|c| c.field == "spec.template" && c.message.ends_with("field is immutable")));
        let mut suspended = ok.clone();
        suspended["spec"]["suspend"] = json!(true);
        let mut upd = suspended.clone();
        upd["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert!(validate("batch", "v1", "Job", &upd, Some(&suspended)).is_empty());
        let mut upd = ok.clone();
        upd["spec"]["completions"] = json!(5);
        assert_eq!(
            fields(&validate("batch", "v1", "Job", &upd, Some(&ok))),
            vec!["spec.completions|Invalid value: 5: field is immutable"]
        );

        let cj = |sched: &str, policy: &str| {
            json!({"metadata": {"name": "cj"}, "spec": {"schedule": sched, "concurrencyPolicy": policy,
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "x"}]}}}}}})
        };
        assert!(v("batch", "CronJob", cj("*/5 * * * *", "Forbid")).is_empty());
        assert!(v("batch", "CronJob", cj("0 0 1 jan mon-fri", "")).is_empty());
        assert!(v("batch", "CronJob", cj("@hourly", "Allow")).is_empty());
        assert_eq!(
            fields(&v("batch", "CronJob", cj("* * *", "Sometimes"))),
            vec![
                "spec.schedule|Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]",
                "spec.concurrencyPolicy|Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\""
            ]
        );
        assert_eq!(
            fields(&v("batch", "CronJob", cj("61 * * * *", "Allow"))),
            vec!["spec.schedule|Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"]
        );
        assert_eq!(
            fields(&v("batch", "CronJob", cj("", "Allow"))),
            vec!["spec.schedule|Required value"]
        );
    }

    #[test]
    fn service_rules() {
        let c = v(
            "",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "spec.ports[0].name|Required value",
                "spec.ports[1].name|Required value"
            ]
        );
        let c = v(
            "",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {}}),
        );
        assert_eq!(fields(&c), vec!["spec.ports|Required value"]);
        assert!(v(
            "",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}})
        )
        .is_empty());
        assert!(v("", "Service", json!({"metadata": {"name": "s"}, "spec": {"type": "ExternalName", "externalName": "example.com."}})).is_empty());
        let c = v(
            "",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"type": "Weird", "ports": [{"port": 0, "name": "a"}, {"port": 80, "name": "a"}]}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "spec.ports[0].port|Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[1].name|Duplicate value: \"a\"",
                "spec.type|Unsupported value: \"Weird\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ]
        );
        let old = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"], "ports": [{"port": 80}]}});
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.6");
        assert_eq!(
            fields(&validate("", "v1", "Service", &new, Some(&old))),
            vec!["spec.clusterIPs[0]|Invalid value: []string{\"10.96.0.6\"}: may not change once set"]
        );
        assert!(validate("", "v1", "Service", &old, Some(&old)).is_empty());
    }

    #[test]
    fn configmap_secret_rules() {
        let c = v(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "c"}, "data": {"bad key": "x", "ok.key": "y"}}),
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "data[bad key]");
        assert_eq!(
            c[0].message,
            "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
        );
        let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "2"}});
        assert_eq!(
            fields(&validate("", "v1", "ConfigMap", &new, Some(&old))),
            vec!["data|Forbidden: field is immutable when `immutable` is set"]
        );
        let c = v(
            "",
            "Secret",
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"..x": "eA=="}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "data[..x]|Invalid value: \"..x\": must not start with '..'",
                "data[tls.crt]|Required value",
                "data[tls.key]|Required value"
            ]
        );
        let old = json!({"metadata": {"name": "s"}, "type": "Opaque"});
        let new = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth", "data": {"username": "eA=="}});
        assert_eq!(
            fields(&validate("", "v1", "Secret", &new, Some(&old))),
            vec!["type|Invalid value: \"kubernetes.io/basic-auth\": field is immutable"]
        );
    }

    #[test]
    fn pvc_pdb_lease_node_namespace() {
        let c = v(
            "",
            "PersistentVolumeClaim",
            json!({"metadata": {"name": "p"}, "spec": {}}),
        );
        assert_eq!(
            fields(&c),
            vec![
                "spec.accessModes|Required value: at least 1 access mode is required",
                "spec.resources[storage]|Required value"
            ]
        );
        let pvc = json!({"metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}});
        let mut grown = pvc.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(validate("", "v1", "PersistentVolumeClaim", &grown, Some(&pvc)).is_empty());
        let c = validate("", "v1", "PersistentVolumeClaim", &pvc, Some(&grown));
        assert_eq!(fields(&c), vec!["spec.resources.requests.storage|Forbidden: field can not be less than previous value"]);
        let mut modes = pvc.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        let c = validate("", "v1", "PersistentVolumeClaim", &modes, Some(&pvc));
        assert!(
            c[0].message
                .starts_with("Forbidden: spec is immutable after creation"),
            "{c:?}"
        );

        let c = v(
            "policy",
            "PodDisruptionBudget",
            json!({"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": "150%"}}),
        );
        assert_eq!(c[0].field, "spec");
        assert!(c[0]
            .message
            .ends_with("minAvailable and maxUnavailable cannot be both set"));
        assert_eq!(
            c[1].message,
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
        );
        let c = v(
            "coordination.k8s.io",
            "Lease",
            json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}),
        );
        assert_eq!(
            fields(&c),
            vec!["spec.leaseDurationSeconds|Invalid value: 0: must be greater than 0"]
        );
        let c = v(
            "",
            "Node",
            json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}),
        );
        assert_eq!(
            fields(&c),
            vec!["spec.taints[0].effect|Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""]
        );
        assert_eq!(
            v("", "Namespace", json!({"metadata": {"name": "Bad"}}))[0].field,
            "metadata.name"
        );
    }

    #[test]
    fn immutable_updates() {
        let old = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web", "v": "1"}),
        );
        let new = deployment(
            json!({"matchLabels": {"app": "web", "v": "1"}}),
            json!({"app": "web", "v": "1"}),
        );
        assert_eq!(
            fields(&validate("apps", "v1", "Deployment", &new, Some(&old))),
            vec!["spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"1\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
        );
        let mut ss_old = old.clone();
        ss_old["spec"]["serviceName"] = json!("a");
        let mut ss_new = ss_old.clone();
        ss_new["spec"]["replicas"] = json!(3);
        assert!(validate("apps", "v1", "StatefulSet", &ss_new, Some(&ss_old)).is_empty());
        ss_new["spec"]["serviceName"] = json!("b");
        assert_eq!(
            fields(&validate("apps", "v1", "StatefulSet", &ss_new, Some(&ss_old))),
            vec!["spec|Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a"}], "tolerations": [{"key": "k", "operator": "Exists"}]}});
        let mut upd = pod.clone();
        upd["spec"]["containers"][0]["image"] = json!("b");
        upd["spec"]["activeDeadlineSeconds"] = json!(30);
        upd["spec"]["tolerations"] =
            json!([{"key": "k", "operator": "Exists"}, {"key": "z", "operator": "Exists"}]);
        assert!(validate("", "v1", "Pod", &upd, Some(&pod)).is_empty());
        upd["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        let c = validate("", "v1", "Pod", &upd, Some(&pod));
        assert_eq!(c.len(), 1);
        assert!(
            c[0].message
                .starts_with(&format!("Forbidden: {POD_UPDATE_MSG}\n")),
            "{c:?}"
        );
        let mut removed = pod.clone();
        removed["spec"]["tolerations"] = json!([]);
        assert_eq!(
            validate("", "v1", "Pod", &removed, Some(&pod))[0].field,
            "spec.tolerations[0]"
        );
    }

    fn reference_dir() -> Option<std::path::PathBuf> {
        match std::env::var("RKCM_APISERVER_REFERENCE") {
            Ok(d) if !d.is_empty() => Some(d.into()),
            _ => {
                println!("RKCM_APISERVER_REFERENCE unset: skipping the recorded-reference test");
                None
            }
        }
    }

    fn load(dir: &std::path::Path, prefix: &str) -> Value {
        let entry = std::fs::read_dir(dir)
            .expect("reference dir")
            .filter_map(Result::ok)
            .find(|e| {
                e.file_name().to_string_lossy().starts_with(prefix)
                    && e.file_name().to_string_lossy().ends_with(".json")
            })
            .unwrap_or_else(|| panic!("no reference {prefix}"));
        serde_json::from_str(&std::fs::read_to_string(entry.path()).expect("read")).expect("json")
    }

    /// (group, version, kind) from a request path and body.
    fn gvk(rec: &Value) -> (String, String, String) {
        let body = &rec["request"]["body"];
        let api_version = body["apiVersion"].as_str().unwrap_or("v1");
        let (g, ver) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        (
            g.to_string(),
            ver.to_string(),
            body["kind"].as_str().unwrap_or("").to_string(),
        )
    }

    /// A recorded 422's causes as (reason, message, field).
    fn recorded_causes(rec: &Value) -> Vec<(String, String, String)> {
        rec["response"]["body"]["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["reason"].as_str().unwrap_or("").into(),
                    c["message"].as_str().unwrap_or("").into(),
                    c["field"].as_str().unwrap_or("").into(),
                )
            })
            .collect()
    }

    fn cause_triples(causes: &[FieldCause]) -> Vec<(String, String, String)> {
        causes
            .iter()
            .map(|c| (c.reason.to_string(), c.message.clone(), c.field.clone()))
            .collect()
    }

    #[test]
    fn recorded_references() {
        let Some(dir) = reference_dir() else { return };
        for prefix in ["054-", "055-"] {
            let rec = load(&dir, prefix);
            let (g, ver, k) = gvk(&rec);
            let body = &rec["request"]["body"];
            let causes = validate(&g, &ver, &k, body, None);
            let status = &rec["response"]["body"];
            let want: Vec<(String, String, String)> = status["details"]["causes"]
                .as_array()
                .expect("causes")
                .iter()
                .map(|c| {
                    (
                        c["reason"].as_str().unwrap_or("").into(),
                        c["message"].as_str().unwrap_or("").into(),
                        c["field"].as_str().unwrap_or("").into(),
                    )
                })
                .collect();
            let got: Vec<(String, String, String)> = causes
                .iter()
                .map(|c| (c.reason.to_string(), c.message.clone(), c.field.clone()))
                .collect();
            assert_eq!(got, want, "{prefix}");
            let name = body["metadata"]["name"].as_str().unwrap_or("");
            assert_eq!(
                invalid_message(&g, &k, name, &causes),
                status["message"].as_str().unwrap_or(""),
                "{prefix}"
            );
        }
        let mut checked = 0;
        for n in (27..=50).chain([110]) {
            let rec = load(&dir, &format!("{n:03}-"));
            if rec["request"]["method"] != "POST" || !rec["request"]["body"].is_object() {
                continue;
            }
            let (g, ver, k) = gvk(&rec);
            // Validated as the server does it: after defaulting (an EndpointSlice port's
            // protocol is required, and defaulted to TCP first).
            let mut body = rec["request"]["body"].clone();
            crate::defaults::apply_defaults(&g, &ver, &k, &mut body);
            let causes = validate(&g, &ver, &k, &body, None);
            if rec["response"]["code"] == 422 {
                // A recorded refusal (050: a CSR whose request is no PEM): the same causes.
                assert_eq!(recorded_causes(&rec), cause_triples(&causes), "{n:03} {k}");
                checked += 1;
                continue;
            }
            assert!(causes.is_empty(), "{n:03} {k}: {causes:?}");
            // The created object, as the server stored it, must validate too.
            let stored = &rec["response"]["body"];
            if rec["response"]["code"] == 201 {
                let causes = validate(&g, &ver, &k, stored, None);
                assert!(causes.is_empty(), "{n:03} stored {k}: {causes:?}");
                let causes = validate(&g, &ver, &k, stored, Some(stored));
                assert!(causes.is_empty(), "{n:03} stored {k} as update: {causes:?}");
            }
            checked += 1;
        }
        assert!(checked >= 20, "only {checked} create requests checked");
    }

    /// The server validates after defaulting and create preparation: the recorded create
    /// requests stay valid through that pipeline, and 055 keeps its single cause.
    #[test]
    fn recorded_references_after_defaulting() {
        let Some(dir) = reference_dir() else { return };
        for n in (27..=50).chain([55, 110]) {
            let rec = load(&dir, &format!("{n:03}-"));
            if rec["request"]["method"] != "POST" || !rec["request"]["body"].is_object() {
                continue;
            }
            let (g, ver, k) = gvk(&rec);
            let mut o = rec["request"]["body"].clone();
            let generated = o["metadata"]["generateName"]
                .as_str()
                .map(|p| format!("{p}abcde"));
            if let Some(p) = generated.filter(|_| o["metadata"]["name"].is_null()) {
                o["metadata"]["name"] = json!(p);
            }
            crate::defaults::apply_defaults(&g, &ver, &k, &mut o);
            crate::defaults::prepare_for_create(&g, &ver, &k, &mut o, "2024-01-01T00:00:00Z");
            if k == "Pod" {
                crate::defaults::admit_pod_service_account(&mut o, "abcde");
            }
            let causes = validate(&g, &ver, &k, &o, None);
            if rec["response"]["code"] == 422 && n != 55 {
                assert_eq!(recorded_causes(&rec), cause_triples(&causes), "{n:03} {k}");
                continue;
            }
            if n == 55 {
                assert_eq!(causes.len(), 1, "{causes:?}");
                assert_eq!(causes[0].field, "spec.template.metadata.labels");
                continue;
            }
            assert!(causes.is_empty(), "{n:03} {k} defaulted: {causes:?}");
            if k == "Job" {
                crate::defaults::job_selector_and_labels(
                    &mut o,
                    "0b7a6f0e-1111-2222-3333-444455556666",
                );
                let causes = validate(&g, &ver, &k, &o, None);
                assert!(
                    causes.is_empty(),
                    "{n:03} Job with generated selector: {causes:?}"
                );
            }
        }
    }

    #[test]
    fn service_ip_fields_are_checked_for_a_single_stack_ipv4_cluster() {
        let errs = |spec: Value| {
            fields(&service_ip_family_errors(
                &serde_json::json!({"metadata": {"name": "s"}, "spec": spec}),
            ))
        };
        let ok: [Value; 5] = [
            serde_json::json!({"ports": [{"port": 80}]}),
            serde_json::json!({"clusterIP": "10.96.0.9", "ipFamilies": ["IPv4"]}),
            serde_json::json!({"clusterIP": "None"}),
            serde_json::json!({"clusterIP": "None", "ipFamilyPolicy": "RequireDualStack"}),
            serde_json::json!({"type": "ExternalName", "ipFamilyPolicy": "Nonsense"}),
        ];
        for spec in ok {
            assert!(errs(spec.clone()).is_empty(), "{spec}");
        }
        assert_eq!(
            errs(serde_json::json!({"clusterIPs": ["10.96.0.9"]})),
            ["spec.clusterIPs|Invalid value: []string{\"10.96.0.9\"}: must be empty when `clusterIP` is not specified"]
        );
        assert_eq!(
            errs(serde_json::json!({"ipFamilies": ["IPv4", "IPv4"], "ipFamilyPolicy": "Dual"})),
            [
                "spec.ipFamilies[1]|Duplicate value: \"IPv4\"",
                "spec.ipFamilyPolicy|Unsupported value: \"Dual\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
            ]
        );
        assert_eq!(
            errs(serde_json::json!({"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9", "10.96.0.10"]})),
            ["spec.clusterIPs|Invalid value: []string{\"10.96.0.9\", \"10.96.0.10\"}: may specify no more than one IP for each IP family"]
        );
        assert_eq!(
            errs(serde_json::json!({"ipFamilies": ["IPv4", "IPv6"]})),
            ["spec.ipFamilyPolicy|Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"]
        );
        assert_eq!(
            errs(serde_json::json!({"clusterIP": "fd00::1"})),
            ["spec.clusterIPs[0]|Invalid value: []string{\"fd00::1\"}: IPv6 is not configured on this cluster"]
        );
        assert_eq!(
            errs(serde_json::json!({"clusterIP": "fd00::1", "ipFamilies": ["IPv4"]})),
            ["spec.clusterIPs[0]|Invalid value: \"fd00::1\": expected an IPv4 value as indicated by `ipFamilies[0]`"]
        );
        assert_eq!(
            errs(
                serde_json::json!({"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6", "IPv4"], "selector": {"a": "b"}})
            ),
            ["spec.ipFamilies[0]|Invalid value: \"IPv6\": not configured on this cluster"]
        );
    }
}
