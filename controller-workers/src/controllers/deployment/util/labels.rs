//! Copies of labels and selectors with the pod-template-hash added or removed.

use super::*;

/// Copy of `labels` with `key=value` added (no-op copy for an empty key).
pub fn clone_and_add_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    if !key.is_empty() {
        out.insert(key.to_string(), value.to_string());
    }
    out
}

/// Copy of `labels` without `key`.
pub fn clone_and_remove_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    out.remove(key);
    out
}

/// Copy of `selector` whose matchLabels also require `key=value`; used to
/// make a ReplicaSet's selector unique to its template hash.
pub fn clone_selector_and_add_label(
    selector: &LabelSelector,
    key: &str,
    value: &str,
) -> LabelSelector {
    let mut out = selector.clone();
    if !key.is_empty() {
        out.match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
    }
    out
}
