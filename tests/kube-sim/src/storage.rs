//! What kube-apiserver does to storage objects beyond defaulting and validation: the
//! DefaultStorageClass admission plugin (a claim created without a class gets the default
//! one), PersistentVolumeClaimResize (a claim grows only if its class allows expansion),
//! and the PersistentVolume status strategy's phase bookkeeping (a status write that
//! changes the phase stamps `status.lastPhaseTransitionTime`, the
//! PersistentVolumeLastPhaseTransitionTime gate being beta and on in 1.29).
//! StorageObjectInUseProtection's finalizers, and the strategies clearing the status a
//! claim or volume is created with, are with the other create-only mutations
//! ([`crate::defaults::prepare_for_create`]).
//!
//! Controllers' work stays theirs: nothing here binds, provisions or expands.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::status::{ApiError, ApiResult, Subject};
use crate::store::{ResKey, Txn};
use rkcm_gocompat::quantity::Quantity;

/// `v1.BetaStorageClassAnnotation`: read before `spec.storageClassName`.
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";

fn beta_class_annotation(claim: &Value) -> Option<&Value> {
    claim["metadata"]["annotations"].get(BETA_CLASS_ANNOTATION)
}

/// `helper.PersistentVolumeClaimHasClass`: the beta annotation is there (any value), or
/// `spec.storageClassName` is set (even to "").
fn claim_has_class(claim: &Value) -> bool {
    beta_class_annotation(claim).is_some() || !claim["spec"]["storageClassName"].is_null()
}

/// `helper.GetPersistentVolumeClaimClass`: the beta annotation, else the spec's class,
/// else "".
fn claim_class(claim: &Value) -> &str {
    beta_class_annotation(claim)
        .or_else(|| claim["spec"].get("storageClassName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn is_default_class(class: &Value) -> bool {
    let annotations = &class["metadata"]["annotations"];
    annotations[DEFAULT_CLASS_ANNOTATION] == "true"
        || annotations[BETA_DEFAULT_CLASS_ANNOTATION] == "true"
}

fn created(class: &Value) -> Option<DateTime<Utc>> {
    class["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// `util.GetDefaultClass`: of the classes marked default, the newest, ties going to the
/// first name.
fn default_class<'a>(classes: impl Iterator<Item = &'a Value>) -> Option<&'a Value> {
    let mut defaults: Vec<&Value> = classes.filter(|c| is_default_class(c)).collect();
    defaults.sort_by(|a, b| {
        created(b).cmp(&created(a)).then_with(|| {
            let name = |c: &Value| c["metadata"]["name"].as_str().unwrap_or("").to_string();
            name(a).cmp(&name(b))
        })
    });
    defaults.first().copied()
}

/// DefaultStorageClass admission (create only): a claim that names no class gets the
/// default class's name, when there is a default class.
pub fn default_claim_class(t: &Txn, claim: &mut Value) {
    if claim_has_class(claim) {
        return;
    }
    let classes = ResKey::new("storage.k8s.io", "storageclasses");
    let Some(name) = default_class(t.range(&classes, None, None).map(|(_, c)| &**c))
        .and_then(|class| class["metadata"]["name"].as_str())
        .map(str::to_string)
    else {
        return;
    };
    if !claim["spec"].is_object() {
        claim["spec"] = json!({});
    }
    claim["spec"]["storageClassName"] = json!(name);
}

fn storage_request(claim: &Value) -> Option<Quantity> {
    let text = match &claim["spec"]["resources"]["requests"]["storage"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    Quantity::from_api(&text).ok()
}

/// PersistentVolumeClaimResize admission (updates of the claim itself, after
/// validation): a larger storage request is allowed only on a Bound claim whose class,
/// the same before and after, exists and has `allowVolumeExpansion: true`.
pub fn admit_claim_resize(t: &Txn, new: &Value, old: &Value, name: &str) -> ApiResult<()> {
    let grown = match (storage_request(new), storage_request(old)) {
        (Some(new_size), Some(old_size)) => new_size.cmp_value(&old_size) == Ordering::Greater,
        (Some(new_size), None) => new_size.sign() > 0,
        _ => false,
    };
    if !grown {
        return Ok(());
    }
    let subject = Subject::new("", "persistentvolumeclaims", name);
    if old["status"]["phase"] != "Bound" {
        return Err(ApiError::forbidden(
            subject,
            "Only bound persistent volume claims can be expanded",
        ));
    }
    let (class, old_class) = (claim_class(new), claim_class(old));
    let allowed = !class.is_empty()
        && class == old_class
        && t.get(&ResKey::new("storage.k8s.io", "storageclasses"), "", class)
            .is_some_and(|sc| sc["allowVolumeExpansion"] == true);
    if !allowed {
        return Err(ApiError::forbidden(
            subject,
            "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
        ));
    }
    Ok(())
}

/// The PersistentVolume status strategy: a write that keeps the phase and leaves the time
/// out keeps the old time; one that changes the phase without changing the time (left
/// out or sent back as it was) gets `now`.
pub fn stamp_phase_transition(new: &mut Value, old: &Value, now: &str) {
    const TIME: &str = "lastPhaseTransitionTime";
    let phase = |v: &Value| v["status"]["phase"].as_str().unwrap_or("").to_string();
    let time = |v: &Value| -> Option<DateTime<Utc>> {
        v["status"][TIME]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let unset = new["status"][TIME].is_null();
    let stamp = if phase(new) == phase(old) {
        if !unset {
            return;
        }
        old["status"][TIME].clone()
    } else if unset || time(new) == time(old) {
        json!(now)
    } else {
        return;
    };
    if !new["status"].is_object() {
        new["status"] = json!({});
    }
    match stamp {
        Value::Null => {
            if let Some(status) = new["status"].as_object_mut() {
                status.remove(TIME);
            }
        }
        stamp => new["status"][TIME] = stamp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_has_a_class_once_it_names_one_even_empty() {
        let claim = |v: Value| v;
        assert!(!claim_has_class(&claim(json!({"spec": {}}))));
        assert!(!claim_has_class(&claim(
            json!({"spec": {"storageClassName": null}})
        )));
        assert!(claim_has_class(&claim(
            json!({"spec": {"storageClassName": ""}})
        )));
        assert!(claim_has_class(&claim(
            json!({"spec": {"storageClassName": "x"}})
        )));
        assert!(claim_has_class(&claim(
            json!({"metadata": {"annotations": {BETA_CLASS_ANNOTATION: ""}}, "spec": {}})
        )));
    }

    #[test]
    fn the_newest_default_class_wins_then_the_first_name() {
        let class = |name: &str, created: &str, annotation: Option<(&str, &str)>| {
            let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
            if let Some((k, v)) = annotation {
                c["metadata"]["annotations"] = json!({k: v});
            }
            c
        };
        let on = Some((DEFAULT_CLASS_ANNOTATION, "true"));
        let classes = [
            class("old", "2024-01-01T00:00:00Z", on),
            class("b", "2024-02-01T00:00:00Z", on),
            class(
                "a",
                "2024-02-01T00:00:00Z",
                Some((BETA_DEFAULT_CLASS_ANNOTATION, "true")),
            ),
            class("newest", "2024-03-01T00:00:00Z", None),
            class(
                "not-true",
                "2024-03-01T00:00:00Z",
                Some((DEFAULT_CLASS_ANNOTATION, "yes")),
            ),
        ];
        let name = |c: Option<&Value>| c.map(|c| c["metadata"]["name"].clone());
        assert_eq!(name(default_class(classes.iter())), Some(json!("a")));
        assert_eq!(name(default_class(classes[3..].iter())), None);
    }

    #[test]
    fn the_transition_time_moves_with_the_phase_only() {
        let pv = |phase: &str, time: Option<&str>| {
            let mut v = json!({"status": {"phase": phase}});
            if let Some(t) = time {
                v["status"]["lastPhaseTransitionTime"] = json!(t);
            }
            v
        };
        let old = pv("Available", Some("2024-01-01T00:00:00Z"));
        let now = "2024-05-05T05:05:05Z";
        let cases = [
            // (new, expected time)
            (pv("Available", None), Some("2024-01-01T00:00:00Z")),
            (
                pv("Available", Some("2023-01-01T00:00:00Z")),
                Some("2023-01-01T00:00:00Z"),
            ),
            (pv("Bound", None), Some(now)),
            (pv("Bound", Some("2024-01-01T00:00:00Z")), Some(now)),
            (pv("Bound", Some("2024-01-01T00:00:00+00:00")), Some(now)),
            (
                pv("Bound", Some("2023-06-01T00:00:00Z")),
                Some("2023-06-01T00:00:00Z"),
            ),
        ];
        for (mut new, want) in cases {
            let before = new.clone();
            stamp_phase_transition(&mut new, &old, now);
            assert_eq!(
                new["status"]["lastPhaseTransitionTime"].as_str(),
                want,
                "{before}"
            );
        }
        let mut untimed = pv("Available", None);
        stamp_phase_transition(&mut untimed, &pv("Available", None), now);
        assert!(untimed["status"].get("lastPhaseTransitionTime").is_none());
    }
}
