//! Field selectors as kube-apiserver v1.29 parses and matches them, and which field labels
//! each resource accepts.
//!
//! * [`FieldSelector`]: the `fieldSelector` grammar (`=`, `==`, `!=`, `\\` escapes), with
//!   upstream's error messages.
//! * [`field_value`] / [`supported_field`]: which field labels each resource accepts (the field
//!   label conversion functions registered for the served kinds, falling back to
//!   `metadata.name` / `metadata.namespace`) and what each label reads from an object (the
//!   registries' selectable field sets), plus the 400 message for an unsupported label.

use serde_json::Value;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    value: String,
    not_equal: bool,
}

/// Parsed form of the `fieldSelector` query string: an AND of `field=value`, `field==value`
/// and `field!=value` terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses like upstream `fields.ParseSelector` (terms split on unescaped `,`, values
    /// unescaped from `\\`, `\,`, `\=`), with its error messages. The empty string selects
    /// everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        parts.sort();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let (lhs, op, rhs) = match split_term(part) {
                Some(t) => t,
                None => {
                    return Err(format!(
                        "invalid selector: '{}'; can't understand '{}'",
                        s, part
                    ))
                }
            };
            let value = unescape_value(rhs)?;
            terms.push(FieldTerm {
                field: lhs.to_string(),
                value,
                not_equal: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the object whose selectable fields `fields` returns is selected; a field the
    /// object does not have reads as the empty string (as upstream's `fields.Set`).
    pub fn matches(&self, fields: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = fields(&t.field).unwrap_or_default();
            (have == t.value) != t.not_equal
        })
    }

    /// The field labels the selector uses, in the order upstream checks them, so the server
    /// can reject unsupported ones (see [`supported_field`] and [`unsupported_field_message`]).
    pub fn field_names(&self) -> Vec<String> {
        self.terms.iter().map(|t| t.field.clone()).collect()
    }

    /// The terms in order: field label, value, and whether the term is `!=`.
    pub fn terms(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.terms
            .iter()
            .map(|t| (t.field.as_str(), t.value.as_str(), t.not_equal))
    }

    /// True when there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value `field` must equal for an object to be selected, if a term says so.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.not_equal)
            .map(|t| t.value.as_str())
    }

    /// The first field label `resource` does not support, as the 400 message kube-apiserver
    /// answers with (reference 062: `field label not supported: spec.bogus`).
    pub fn check_supported(&self, resource: &str) -> Result<(), String> {
        for t in &self.terms {
            if !supported_field(resource, &t.field) {
                return Err(unsupported_field_message(resource, &t.field));
            }
        }
        Ok(())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| {
                format!(
                    "{}{}{}",
                    t.field,
                    if t.not_equal { "!=" } else { "=" },
                    escape_value(&t.value)
                )
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ',' => out.push_str("\\,"),
            '=' => out.push_str("\\="),
            c => out.push(c),
        }
    }
    out
}

/// Splits on commas not preceded by a backslash escape.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(s.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(s.get(start..).unwrap_or(""));
    terms
}

/// The first operator (`!=`, `==`, `=`, tried in that order at each position) splits the term.
fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..).unwrap_or("");
        for op in ["!=", "==", "="] {
            if rest.starts_with(op) {
                return Some((
                    term.get(..i).unwrap_or(""),
                    op,
                    term.get(i + op.len()..).unwrap_or(""),
                ));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{}",
                        other
                    ))
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ))
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Per-resource field labels
// ---------------------------------------------------------------------------------------------

/// How a selectable field's JSON value reads when absent: every registry sets all its keys,
/// so a missing bool is "false" and a missing count "0".
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Bool,
    Int,
    /// Pods' primary IP: `status.podIPs[0].ip`, else `status.podIP`.
    PodIp,
}

/// Where one canonical field label reads its value from (a dotted JSON path), with an
/// optional second path used when the first is empty.
struct Selectable {
    label: &'static str,
    path: &'static str,
    fallback: Option<&'static str>,
    kind: Kind,
}

/// A string field read at `path`.
const fn text_at(label: &'static str, path: &'static str) -> Selectable {
    Selectable {
        label,
        path,
        fallback: None,
        kind: Kind::Str,
    }
}

/// A string field read at its own label's path.
const fn text(label: &'static str) -> Selectable {
    text_at(label, label)
}

/// A string field read at `path`, or at `fallback` when that is empty.
const fn text_or(label: &'static str, path: &'static str, fallback: &'static str) -> Selectable {
    Selectable {
        label,
        path,
        fallback: Some(fallback),
        kind: Kind::Str,
    }
}

/// A bool field read at its own label's path ("false" when absent).
const fn flag(label: &'static str) -> Selectable {
    Selectable {
        kind: Kind::Bool,
        ..text(label)
    }
}

/// An integer field read at `path` ("0" when absent).
const fn count_at(label: &'static str, path: &'static str) -> Selectable {
    Selectable {
        kind: Kind::Int,
        ..text_at(label, path)
    }
}

/// The pods' primary IP (see [`Kind::PodIp`]).
const fn pod_ip_field(label: &'static str) -> Selectable {
    Selectable {
        kind: Kind::PodIp,
        ..text(label)
    }
}

/// How the conversion function words a refusal.
#[derive(Clone, Copy)]
enum Reject {
    /// `field label not supported: <label>` (core/v1, certificates/v1, events.k8s.io/v1).
    NotSupported,
    /// `field label "<label>" not supported for Job` (batch/v1).
    Job,
    /// `runtime.DefaultMetaV1FieldSelectorConversion`: kinds without their own function.
    Default,
}

/// What one resource supports in field selectors: the labels its conversion function
/// accepts (and rewrites), and what each label reads from an object (its registry's
/// selectable fields). See [`resource_fields_of`].
pub struct ResourceFields {
    /// Labels the conversion function accepts as they are.
    accepted: &'static [&'static str],
    /// Labels it accepts and rewrites to a canonical label.
    aliases: &'static [(&'static str, &'static str)],
    /// The registry's selectable fields (canonical label -> JSON path); an accepted label
    /// missing here reads as "".
    selectable: &'static [Selectable],
    reject: Reject,
}

static METADATA_ONLY: ResourceFields = ResourceFields {
    accepted: &["metadata.name", "metadata.namespace"],
    aliases: &[],
    selectable: &[],
    reject: Reject::Default,
};

static PODS: ResourceFields = ResourceFields {
    accepted: &[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ],
    aliases: &[("spec.host", "spec.nodeName")],
    selectable: &[
        text("spec.nodeName"),
        text("spec.restartPolicy"),
        text("spec.schedulerName"),
        text("spec.serviceAccountName"),
        flag("spec.hostNetwork"),
        text("status.phase"),
        pod_ip_field("status.podIP"),
        text("status.nominatedNodeName"),
    ],
    reject: Reject::NotSupported,
};

static NODES: ResourceFields = ResourceFields {
    accepted: &["metadata.name", "spec.unschedulable"],
    aliases: &[],
    selectable: &[flag("spec.unschedulable")],
    reject: Reject::NotSupported,
};

static REPLICATION_CONTROLLERS: ResourceFields = ResourceFields {
    accepted: &["metadata.name", "metadata.namespace", "status.replicas"],
    aliases: &[],
    selectable: &[count_at("status.replicas", "status.replicas")],
    reject: Reject::NotSupported,
};

static CORE_EVENTS: ResourceFields = ResourceFields {
    accepted: &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ],
    aliases: &[],
    selectable: &[
        text("involvedObject.kind"),
        text("involvedObject.namespace"),
        text("involvedObject.name"),
        text("involvedObject.uid"),
        text("involvedObject.apiVersion"),
        text("involvedObject.resourceVersion"),
        text("involvedObject.fieldPath"),
        text("reason"),
        text("reportingComponent"),
        text_or("source", "source.component", "reportingComponent"),
        text("type"),
    ],
    reject: Reject::NotSupported,
};

/// events.k8s.io/v1 Events share the core storage: the labels are rewritten to the core ones,
/// and the values read from the events.k8s.io shape of the object.
static EVENTS_K8S_IO: ResourceFields = ResourceFields {
    accepted: &[
        "reason",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ],
    aliases: &[
        ("regarding.kind", "involvedObject.kind"),
        ("regarding.namespace", "involvedObject.namespace"),
        ("regarding.name", "involvedObject.name"),
        ("regarding.uid", "involvedObject.uid"),
        ("regarding.apiVersion", "involvedObject.apiVersion"),
        (
            "regarding.resourceVersion",
            "involvedObject.resourceVersion",
        ),
        ("regarding.fieldPath", "involvedObject.fieldPath"),
        ("reportingController", "reportingComponent"),
    ],
    selectable: &[
        text_at("involvedObject.kind", "regarding.kind"),
        text_at("involvedObject.namespace", "regarding.namespace"),
        text_at("involvedObject.name", "regarding.name"),
        text_at("involvedObject.uid", "regarding.uid"),
        text_at("involvedObject.apiVersion", "regarding.apiVersion"),
        text_at(
            "involvedObject.resourceVersion",
            "regarding.resourceVersion",
        ),
        text_at("involvedObject.fieldPath", "regarding.fieldPath"),
        text("reason"),
        text_at("reportingComponent", "reportingController"),
        text_or(
            "source",
            "deprecatedSource.component",
            "reportingController",
        ),
        text("type"),
    ],
    reject: Reject::NotSupported,
};

static NAMESPACES: ResourceFields = ResourceFields {
    accepted: &["status.phase", "metadata.name"],
    aliases: &[],
    selectable: &[text("status.phase")],
    reject: Reject::NotSupported,
};

static SECRETS: ResourceFields = ResourceFields {
    accepted: &["type", "metadata.namespace", "metadata.name"],
    aliases: &[],
    selectable: &[text("type")],
    reject: Reject::NotSupported,
};

static JOBS: ResourceFields = ResourceFields {
    accepted: &["metadata.name", "metadata.namespace", "status.successful"],
    aliases: &[],
    selectable: &[count_at("status.successful", "status.succeeded")],
    reject: Reject::Job,
};

static CERTIFICATE_SIGNING_REQUESTS: ResourceFields = ResourceFields {
    accepted: &["metadata.name", "spec.signerName"],
    aliases: &[],
    selectable: &[text("spec.signerName")],
    reject: Reject::NotSupported,
};

/// Splits `group/resource` or `resource.group` (core: no group, `core` or `v1`).
fn split_resource(resource: &str) -> (&str, &str) {
    if let Some((group, res)) = resource.rsplit_once('/') {
        let group = match group {
            "core" | "v1" | "api/v1" => "",
            g => g.split('/').next().unwrap_or(g),
        };
        return (group, res);
    }
    match resource.split_once('.') {
        Some((res, group)) => (if group == "core" { "" } else { group }, res),
        None => ("", resource),
    }
}

fn resource_fields(resource: &str) -> &'static ResourceFields {
    let (group, res) = split_resource(resource);
    resource_fields_of(group, res)
}

/// The resources with field labels of their own, by API group (`""`: core) and plural name;
/// the rest accept only [`METADATA_ONLY`]'s. Jobs and CertificateSigningRequests are also
/// found without their group, as a bare resource name names them.
static RESOURCES: &[(&str, &str, &ResourceFields)] = &[
    ("", "pods", &PODS),
    ("", "nodes", &NODES),
    ("", "replicationcontrollers", &REPLICATION_CONTROLLERS),
    ("", "events", &CORE_EVENTS),
    ("events.k8s.io", "events", &EVENTS_K8S_IO),
    ("", "namespaces", &NAMESPACES),
    ("", "secrets", &SECRETS),
    ("", "jobs", &JOBS),
    ("batch", "jobs", &JOBS),
    (
        "",
        "certificatesigningrequests",
        &CERTIFICATE_SIGNING_REQUESTS,
    ),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &CERTIFICATE_SIGNING_REQUESTS,
    ),
];

/// The field-selector support of the resource `resource` (plural name) of API group `group`
/// (`""` for the core group).
pub fn resource_fields_of(group: &str, resource: &str) -> &'static ResourceFields {
    RESOURCES
        .iter()
        .find(|(g, r, _)| *g == group && *r == resource)
        .map_or(&METADATA_ONLY, |(_, _, fields)| *fields)
}

/// The canonical label `field` stands for in `resource`, if the resource accepts it.
fn canonical_label(rf: &ResourceFields, field: &str) -> Option<&'static str> {
    if let Some(l) = rf.accepted.iter().find(|l| **l == field) {
        return Some(l);
    }
    rf.aliases
        .iter()
        .find(|(from, _)| *from == field)
        .map(|(_, to)| *to)
}

impl ResourceFields {
    /// The labels of the registry's selectable fields beyond `metadata.name` and
    /// `metadata.namespace`, canonical: what a cache keeps per object to match selectors.
    pub fn selectable_labels(&self) -> impl Iterator<Item = &'static str> {
        self.selectable.iter().map(|s| s.label)
    }

    /// The canonical label `field` stands for, if the resource accepts it (an alias such as
    /// pods' `spec.host` is rewritten to `spec.nodeName`).
    pub fn canonical(&self, field: &str) -> Option<&'static str> {
        canonical_label(self, field)
    }

    /// The value of field label `field` for `obj`, as the registry computes its selectable
    /// fields; `None` when the resource does not support the label. An accepted label the
    /// registry never sets (pods' `status.podIPs`, cluster-scoped objects'
    /// `metadata.namespace`) reads as "".
    pub fn value(&self, obj: &Value, field: &str) -> Option<String> {
        let label = canonical_label(self, field)?;
        let text = |path: &str| json_path(obj, path).and_then(scalar_text);
        let value = match label {
            "metadata.name" | "metadata.namespace" => text(label).unwrap_or_default(),
            _ => match self.selectable.iter().find(|s| s.label == label) {
                None => String::new(),
                Some(s) if s.kind == Kind::PodIp => pod_ip(obj),
                Some(s) => {
                    let primary = text(s.path).filter(|v| !v.is_empty());
                    let found = match (primary, s.fallback) {
                        (Some(v), _) => Some(v),
                        (None, Some(fb)) => text(fb),
                        (None, None) => None,
                    };
                    match (found, s.kind) {
                        (Some(v), _) => v,
                        (None, Kind::Str) | (None, Kind::PodIp) => String::new(),
                        (None, Kind::Bool) => "false".to_string(),
                        (None, Kind::Int) => "0".to_string(),
                    }
                }
            },
        };
        Some(value)
    }
}

/// True when `resource` (plural name, optionally group-qualified as `jobs.batch` or
/// `events.k8s.io/events`; a bare `events` is the core one) accepts `field` in a field selector.
pub fn supported_field(resource: &str, field: &str) -> bool {
    canonical_label(resource_fields(resource), field).is_some()
}

/// The message of the 400 kube-apiserver answers when `resource` does not support `field`.
pub fn unsupported_field_message(resource: &str, field: &str) -> String {
    match resource_fields(resource).reject {
        Reject::NotSupported => format!("field label not supported: {}", field),
        Reject::Job => format!(
            "field label {} not supported for Job",
            crate::gofmt::quote(field)
        ),
        Reject::Default => format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            crate::gofmt::quote(field)
        ),
    }
}

fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path.split('.') {
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The primary pod IP: `status.podIPs[0].ip`, else `status.podIP`.
fn pod_ip(obj: &Value) -> String {
    json_path(obj, "status.podIPs")
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .and_then(|ip| ip.get("ip"))
        .and_then(scalar_text)
        .or_else(|| json_path(obj, "status.podIP").and_then(scalar_text))
        .unwrap_or_default()
}

/// The value of field label `field` for `obj` of `resource` (plural name, see
/// [`supported_field`]), as the resource's registry computes its selectable fields; `None`
/// when the resource does not support the label. An accepted label the registry never sets
/// (pods' `status.podIPs`, cluster-scoped objects' `metadata.namespace`) reads as "".
pub fn field_value(resource: &str, obj: &Value, field: &str) -> Option<String> {
    resource_fields(resource).value(obj, field)
}

#[cfg(test)]
mod tests;
