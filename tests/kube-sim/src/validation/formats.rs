//! Format checks (`k8s.io/apimachinery/pkg/util/validation`), object names per kind, and
//! the 422 message.

use super::helpers::{q, Errs};
use super::{gated, is_dns1123_subdomain, FieldCause};
use regex::Regex;
use rkcm_gocompat::validation::{max_len_error, regex_error};
use std::collections::HashSet;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------
// Format checks (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const ENV_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
pub(super) const PERCENT_FMT: &str = "[0-9]+%";

pub(super) struct Res {
    label: Regex,
    subdomain: Regex,
    dns1035: Regex,
    config_key: Regex,
    env_name: Regex,
    pub(super) percent: Regex,
    port_name: Regex,
}

pub(super) fn res() -> &'static Res {
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

pub(super) fn is_dns1035_label(v: &str) -> Vec<String> {
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

pub(super) fn is_config_map_key(v: &str) -> Vec<String> {
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

pub(super) fn is_env_var_name(v: &str) -> Vec<String> {
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

pub(super) fn is_valid_port_num(p: i64) -> Vec<String> {
    if (1..=65535).contains(&p) {
        vec![]
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

pub(super) fn is_valid_port_name(p: &str) -> Vec<String> {
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
pub(super) fn name_errors(kind: &str, name: &str, prefix: bool) -> Vec<String> {
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
