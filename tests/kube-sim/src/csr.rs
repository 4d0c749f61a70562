//! The CertificateSigningRequest strategy of kube-apiserver v1.29
//! (`pkg/registry/certificates/certificates/strategy.go`): what each write may change
//! before validation ([`crate::validation::csr`]) judges it.
//!
//! - Create: the requester's identity (name, UID, groups, extra) is recorded in the spec,
//!   whatever the client sent there, and the status starts empty.
//! - Update of the object: neither spec nor status change.
//! - `/status`: the spec does not change; existing Approved and Denied conditions are kept
//!   as they were (adding or removing one is then refused by validation); conditions
//!   without `lastUpdateTime` or `lastTransitionTime` get them.
//! - `/approval`: only the conditions change (the certificate stays), with the same
//!   timestamp defaulting.

use serde_json::{json, Value};

use crate::request::User;

/// Whether `(group, kind)` is the CSR kind.
pub fn is_csr(group: &str, kind: &str) -> bool {
    group == "certificates.k8s.io" && kind == "CertificateSigningRequest"
}

/// The create strategy: the requester's identity into the spec, an empty status.
pub fn prepare_for_create(obj: &mut Value, user: &User) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    if let Some(spec) = obj["spec"].as_object_mut() {
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        spec.insert("username".into(), json!(user.name));
        if !user.uid.is_empty() {
            spec.insert("uid".into(), json!(user.uid));
        }
        if !user.groups.is_empty() {
            spec.insert("groups".into(), json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), json!(user.extra));
        }
    }
    obj["status"] = json!({});
}

/// The update strategies: `next` is the requested object after the generic handling of
/// `sub`, `current` the stored one, `now` the server's time (RFC 3339).
pub fn prepare_for_update(sub: Option<&str>, next: &mut Value, current: &Value, now: &str) {
    let put = |next: &mut Value, field: &str| match current.get(field) {
        Some(v) => next[field] = v.clone(),
        None => {
            if let Some(m) = next.as_object_mut() {
                m.remove(field);
            }
        }
    };
    match sub {
        None => {
            put(next, "spec");
            put(next, "status");
        }
        Some("status") => {
            put(next, "spec");
            for t in ["Approved", "Denied"] {
                preserve_instances(next, current, t);
            }
            populate_timestamps(next, current, now);
        }
        Some("approval") => {
            populate_timestamps(next, current, now);
            let conditions = next["status"]["conditions"].take();
            put(next, "spec");
            put(next, "status");
            if !next["status"].is_object() {
                next["status"] = json!({});
            }
            if let Some(status) = next["status"].as_object_mut() {
                if conditions.is_null() {
                    status.remove("conditions");
                } else {
                    status.insert("conditions".into(), conditions);
                }
            }
        }
        Some(_) => {}
    }
}

fn conditions_mut(o: &mut Value) -> Option<&mut Vec<Value>> {
    o.get_mut("status")?.get_mut("conditions")?.as_array_mut()
}

fn indices_of(o: &Value, t: &str) -> Vec<usize> {
    o["status"]["conditions"]
        .as_array()
        .map(|conditions| {
            conditions
                .iter()
                .enumerate()
                .filter(|(_, c)| c["type"] == t)
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default()
}

/// Keeps the stored instances of a condition type when the request has as many.
fn preserve_instances(next: &mut Value, current: &Value, t: &str) {
    let (old, new) = (indices_of(current, t), indices_of(next, t));
    if old.len() != new.len() {
        return;
    }
    let stored: Vec<Value> = old
        .iter()
        .map(|i| current["status"]["conditions"][*i].clone())
        .collect();
    if let Some(conditions) = conditions_mut(next) {
        for (i, value) in new.into_iter().zip(stored) {
            conditions[i] = value;
        }
    }
}

/// Go's zero `metav1.Time`: absent, null, or the year-one instant.
fn is_zero(v: Option<&Value>) -> bool {
    match v.and_then(Value::as_str) {
        None => true,
        Some(t) => t.is_empty() || t.starts_with("0001-01-01T00:00:00"),
    }
}

/// `populateConditionTimestamps`: a missing lastUpdateTime is now; a missing
/// lastTransitionTime is the stored one of the same type and status, else now.
fn populate_timestamps(next: &mut Value, current: &Value, now: &str) {
    let stored = current["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(conditions) = conditions_mut(next) else {
        return;
    };
    for condition in conditions.iter_mut() {
        let Some(c) = condition.as_object_mut() else {
            continue;
        };
        if is_zero(c.get("lastUpdateTime")) {
            c.insert("lastUpdateTime".into(), json!(now));
        }
        if is_zero(c.get("lastTransitionTime")) {
            let transition = stored
                .iter()
                .find(|old| {
                    old["type"] == c.get("type").cloned().unwrap_or(Value::Null)
                        && old["status"] == c.get("status").cloned().unwrap_or(Value::Null)
                        && !is_zero(old.get("lastTransitionTime"))
                })
                .map(|old| old["lastTransitionTime"].clone())
                .unwrap_or_else(|| json!(now));
            c.insert("lastTransitionTime".into(), transition);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-05-01T10:00:00Z";

    #[test]
    fn create_records_the_requester_and_clears_the_status() {
        let mut obj = json!({"spec": {"username": "forged", "uid": "x", "groups": ["g"], "request": "r"},
                             "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let user = User {
            name: "system:node:n1".into(),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..User::default()
        };
        prepare_for_create(&mut obj, &user);
        assert_eq!(
            obj,
            json!({"spec": {"request": "r", "username": "system:node:n1",
                            "groups": ["system:nodes", "system:authenticated"]},
                   "status": {}})
        );
    }

    #[test]
    fn status_keeps_approval_and_fills_timestamps() {
        let current = json!({"spec": {"signerName": "a/b"}, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "R", "lastUpdateTime": "2020-01-01T00:00:00Z",
             "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        let mut next = json!({"spec": {"signerName": "changed"}, "status": {"certificate": "Y2VydA==", "conditions": [
            {"type": "Approved", "status": "True", "reason": "Edited"},
            {"type": "Failed", "status": "True", "reason": "SignerValidationFailure"}]}});
        prepare_for_update(Some("status"), &mut next, &current, NOW);
        assert_eq!(next["spec"], current["spec"]);
        assert_eq!(
            next["status"]["conditions"][0],
            current["status"]["conditions"][0]
        );
        assert_eq!(next["status"]["conditions"][1]["lastUpdateTime"], NOW);
        assert_eq!(next["status"]["conditions"][1]["lastTransitionTime"], NOW);
        assert_eq!(next["status"]["certificate"], "Y2VydA==");
    }

    #[test]
    fn approval_changes_only_conditions() {
        let current = json!({"spec": {"signerName": "a/b"}, "status": {"certificate": "Y2VydA==", "conditions": [
            {"type": "Custom", "status": "True", "lastTransitionTime": "2021-01-01T00:00:00Z", "lastUpdateTime": "2021-01-01T00:00:00Z"}]}});
        let mut next = json!({"spec": {"signerName": "x"}, "status": {"conditions": [
            {"type": "Custom", "status": "True"},
            {"type": "Approved", "status": "True", "lastUpdateTime": "2020-01-01T00:00:00Z"}]}});
        prepare_for_update(Some("approval"), &mut next, &current, NOW);
        assert_eq!(next["spec"], current["spec"]);
        assert_eq!(next["status"]["certificate"], "Y2VydA==");
        let conditions = &next["status"]["conditions"];
        assert_eq!(
            conditions[0]["lastTransitionTime"], "2021-01-01T00:00:00Z",
            "kept from the same type and status"
        );
        assert_eq!(conditions[0]["lastUpdateTime"], NOW);
        assert_eq!(
            conditions[1]["lastUpdateTime"], "2020-01-01T00:00:00Z",
            "a given time is kept"
        );
        assert_eq!(conditions[1]["lastTransitionTime"], NOW);
    }

    #[test]
    fn the_object_itself_changes_neither_spec_nor_status() {
        let current = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"signerName": "a/b"}, "status": {}});
        let mut next = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"signerName": "x"}, "status": {"certificate": "eA=="}});
        prepare_for_update(None, &mut next, &current, NOW);
        assert_eq!(next["spec"], current["spec"]);
        assert_eq!(next["status"], json!({}));
        assert_eq!(next["metadata"]["labels"]["a"], "2");
    }
}
