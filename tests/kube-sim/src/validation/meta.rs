//! ObjectMeta (labels, annotations, owner references, finalizers) and label selectors.

use super::formats::name_errors;
use super::helpers::{
    arr, bool_of, child, go_string_slice, idx, int_of, obj, q, scalar_string, str_of, string_map,
    Errs,
};
use super::{is_label_value, is_qualified_name};
use serde_json::Value;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------

pub(super) fn validate_labels(e: &mut Errs, labels: Option<&Value>, path: &str) {
    let Some(m) = obj(labels) else { return };
    let sorted: BTreeMap<&String, String> = m.iter().map(|(k, v)| (k, scalar_string(v))).collect();
    for (k, v) in sorted {
        e.invalid_msgs(path, k, is_qualified_name(k));
        e.invalid_msgs(path, &v, is_label_value(&v));
    }
}

pub(super) fn validate_annotations(e: &mut Errs, ann: Option<&Value>, path: &str) {
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
pub(super) fn go_owner_reference(r: &Value) -> String {
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
pub(super) fn validate_meta(e: &mut Errs, kind: &str, o: &Value, update: bool) {
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

pub(super) fn validate_label_selector(e: &mut Errs, sel: Option<&Value>, path: &str) {
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
pub(super) fn selector_converts(sel: Option<&Value>) -> bool {
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
pub(super) fn selector_is_empty(sel: Option<&Value>) -> bool {
    match sel.filter(|s| !s.is_null()) {
        None => false,
        Some(s) => {
            obj(s.get("matchLabels")).is_none_or(|m| m.is_empty())
                && arr(s.get("matchExpressions")).is_empty()
        }
    }
}

pub(super) fn selector_matches(sel: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
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

pub(super) fn selector_entry_count(sel: Option<&Value>) -> usize {
    sel.map(|s| {
        obj(s.get("matchLabels")).map_or(0, |m| m.len()) + arr(s.get("matchExpressions")).len()
    })
    .unwrap_or(0)
}
