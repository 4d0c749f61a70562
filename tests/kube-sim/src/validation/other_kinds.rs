//! ConfigMaps, Secrets, PersistentVolumeClaims, PersistentVolumes, Nodes, Namespaces,
//! PodDisruptionBudgets and Leases.

use super::apps::{not_more_than_100_percent, positive_int_or_percent};
use super::formats::is_config_map_key;
use super::helpers::{
    arr, bool_of, child, idx, int_of, int_or_string, key, obj, present, q, scalar_string, sem_eq,
    str_of, Errs,
};
use super::meta::validate_label_selector;
use super::pods::{nonneg, validate_taint_effect};
use super::{is_dns1123_subdomain, is_label_value, is_qualified_name};
use serde_json::Value;
use std::collections::HashSet;

pub(super) fn validate_configmap(e: &mut Errs, o: &Value) {
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

pub(super) fn validate_secret(e: &mut Errs, o: &Value) {
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

pub(super) fn validate_immutable_data(e: &mut Errs, new: &Value, old: &Value, fields: &[&str]) {
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

pub(super) fn validate_pvc_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
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

pub(super) fn validate_pvc_update(e: &mut Errs, new: &Value, old: &Value) {
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
    // A bound claim may change its storage request: the new one takes the old value.
    let old_storage = os.pointer("/resources/requests/storage").cloned();
    if phase == "Bound" {
        if let Some(r) = ns
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            match old_storage {
                Some(v) => r.insert("storage".into(), v),
                None => r.remove("storage"),
            };
        }
    }
    if !sem_eq(Some(&ns), Some(&os)) {
        // Upstream appends go-cmp's diff of the internal specs.
        let diff = crate::go_value::cmp_diff("core.PersistentVolumeClaimSpec", &os, &ns);
        e.forbidden(
            "spec",
            &format!("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{diff}"),
        );
    }
    if matches!((storage_request(new), storage_request(old)), (Some(n), Some(o)) if n < o) {
        e.forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        );
    }
}

pub(super) fn validate_pv(e: &mut Errs, o: &Value) {
    let spec = o.get("spec");
    if arr(spec.and_then(|s| s.get("accessModes"))).is_empty() {
        e.required("spec.accessModes", "");
    }
    // An empty capacity is both missing and not the one supported resource; the list
    // prints as `%#v` prints the internal `core.ResourceList`, quantities included.
    let capacity = spec.and_then(|s| s.get("capacity"));
    let cap = obj(capacity);
    if cap.is_none_or(|c| c.is_empty()) {
        e.required("spec.capacity", "");
    }
    if cap.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        e.not_supported(
            "spec.capacity",
            &crate::go_value::go_syntax("core.ResourceList", capacity),
            &["storage"],
        );
    }
}

fn go_taint(t: &Value) -> String {
    crate::go_value::go_syntax("core.Taint", Some(t))
}

pub(super) fn validate_node(e: &mut Errs, o: &Value) {
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

pub(super) fn validate_namespace(e: &mut Errs, o: &Value) {
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

pub(super) fn validate_pdb(e: &mut Errs, o: &Value) {
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

pub(super) fn validate_lease(e: &mut Errs, o: &Value) {
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
