//! Validation of dynamic resource allocation (`crate::dra`): a Pod's `spec.resourceClaims`
//! and `status.resourceClaimStatuses` (upstream `pkg/apis/core/validation`), and the
//! `resource.k8s.io/v1alpha2` fields the resource-claim controller depends on
//! (`pkg/apis/resource/validation`): a claim's class and allocation mode, its
//! `status.reservedFor` and `deallocationRequested` invariants, a scheduling context's
//! selected node.
//!
//! Left out: parameter references' and allocation results' inner fields, and the
//! immutability of a claim's spec and allocation.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{arr, is_dns1123_label, is_dns1123_subdomain, q, str_of, Errs};

const ALLOCATION_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
/// `ResourceClaimReservedForMaxSize`.
const RESERVED_FOR_MAX: usize = 32;

/// `validatePodResourceClaims` of a pod spec at `path`, given the pod's name.
pub(super) fn validate_pod_claims(e: &mut Errs, pod_name: &str, spec: Option<&Value>, path: &str) {
    let mut names = BTreeSet::new();
    for (i, claim) in arr(spec.and_then(|s| s.get("resourceClaims")))
        .iter()
        .enumerate()
    {
        let at = format!("{path}.resourceClaims[{i}]");
        let name = str_of(claim.get("name"));
        let source = claim.get("source");
        let template = source
            .and_then(|s| s.get("resourceClaimTemplateName"))
            .and_then(Value::as_str);
        let direct = source
            .and_then(|s| s.get("resourceClaimName"))
            .and_then(Value::as_str);
        if name.is_empty() {
            e.required(&format!("{at}.name"), "");
        } else if names.contains(name) {
            e.duplicate(&format!("{at}.name"), &q(name));
        } else {
            let errs = is_dns1123_label(name);
            if !errs.is_empty() {
                e.invalid_msgs(&format!("{at}.name"), name, errs);
            } else if template.is_some() {
                let final_name = format!("{pod_name}-{name}");
                for detail in is_dns1123_subdomain(&final_name) {
                    e.invalid(
                        &format!("{at}.name"),
                        &q(&final_name),
                        &format!("final ResourceClaim name: {detail}"),
                    );
                }
            }
            names.insert(name.to_string());
        }
        let rendered = crate::go_value::go_syntax("core.ClaimSource", source);
        if direct.is_some() && template.is_some() {
            e.invalid(
                &format!("{at}.source"),
                &rendered,
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            );
        }
        if direct.is_none() && template.is_none() {
            e.invalid(
                &format!("{at}.source"),
                &rendered,
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            );
        }
        if let Some(direct) = direct {
            e.invalid_msgs(
                &format!("{at}.source.resourceClaimName"),
                direct,
                is_dns1123_subdomain(direct),
            );
        }
        if let Some(template) = template {
            e.invalid_msgs(
                &format!("{at}.source.resourceClaimTemplateName"),
                template,
                is_dns1123_subdomain(template),
            );
        }
    }
}

/// `validatePodResourceClaimStatuses`.
pub(super) fn validate_pod_claim_statuses(e: &mut Errs, pod: &Value) {
    let spec_names: BTreeSet<&str> = arr(pod.pointer("/spec/resourceClaims"))
        .iter()
        .map(|c| str_of(c.get("name")))
        .collect();
    let mut seen = BTreeSet::new();
    for (i, status) in arr(pod.pointer("/status/resourceClaimStatuses"))
        .iter()
        .enumerate()
    {
        let at = format!("status.resourceClaimStatuses[{i}].name");
        let name = str_of(status.get("name"));
        if !spec_names.contains(name) {
            e.invalid(
                &at,
                &q(name),
                "must match the name of an entry in `spec.resourceClaims`",
            );
        }
        if !seen.insert(name) {
            e.duplicate(&at, &q(name));
        }
        if let Some(claim) = status.get("resourceClaimName").and_then(Value::as_str) {
            for detail in is_dns1123_subdomain(claim) {
                e.invalid(&at, &q(claim), &detail);
            }
        }
    }
}

fn validate_claim_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let class = str_of(spec.and_then(|s| s.get("resourceClassName")));
    e.invalid_msgs(
        &format!("{path}.resourceClassName"),
        class,
        is_dns1123_subdomain(class),
    );
    let mode = str_of(spec.and_then(|s| s.get("allocationMode")));
    if !ALLOCATION_MODES.contains(&mode) {
        e.not_supported(
            &format!("{path}.allocationMode"),
            &q(mode),
            ALLOCATION_MODES,
        );
    }
}

fn uids(entries: &[Value]) -> BTreeSet<(String, String, String, String)> {
    entries
        .iter()
        .map(|r| {
            (
                str_of(r.get("apiGroup")).to_string(),
                str_of(r.get("resource")).to_string(),
                str_of(r.get("name")).to_string(),
                str_of(r.get("uid")).to_string(),
            )
        })
        .collect()
}

/// `ValidateClaimStatusUpdate`'s invariants.
fn validate_claim_status(e: &mut Errs, claim: &Value, old: Option<&Value>) {
    let status = claim.get("status");
    let allocation = status
        .and_then(|s| s.get("allocation"))
        .filter(|a| !a.is_null());
    let reserved = arr(status.and_then(|s| s.get("reservedFor")));
    let deallocation = status
        .and_then(|s| s.get("deallocationRequested"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let old_status = old.and_then(|o| o.get("status"));
    if allocation.is_some() && str_of(status.and_then(|s| s.get("driverName"))).is_empty() {
        e.required(
            "status.driverName",
            "must be specified when `allocation` is set",
        );
    }
    if reserved.len() > RESERVED_FOR_MAX {
        e.too_many("status.reservedFor", reserved.len(), RESERVED_FOR_MAX);
    }
    let mut seen = BTreeSet::new();
    for (i, entry) in reserved.iter().enumerate() {
        let at = format!("status.reservedFor[{i}]");
        for field in ["resource", "name", "uid"] {
            if str_of(entry.get(field)).is_empty() {
                e.required(&format!("{at}.{field}"), "");
            }
        }
        let uid = str_of(entry.get("uid"));
        if !uid.is_empty() && !seen.insert(uid) {
            e.duplicate(&format!("{at}.uid"), &q(uid));
        }
    }
    if !reserved.is_empty() {
        match allocation {
            None => e.forbidden(
                "status.reservedFor",
                "may not be specified when `allocated` is not set",
            ),
            Some(allocation) => {
                let shareable = allocation.get("shareable").and_then(Value::as_bool) == Some(true);
                if !shareable && reserved.len() > 1 {
                    e.forbidden("status.reservedFor", "may not be reserved more than once");
                }
                let deleting = !claim
                    .pointer("/metadata/deletionTimestamp")
                    .unwrap_or(&Value::Null)
                    .is_null();
                if deleting || deallocation {
                    let before = uids(arr(old_status.and_then(|s| s.get("reservedFor"))));
                    if !uids(reserved).is_subset(&before) {
                        e.forbidden(
                            "status.reservedFor",
                            "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                        );
                    }
                }
            }
        }
    }
    let old_deallocation = old_status
        .and_then(|s| s.get("deallocationRequested"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !old_deallocation && deallocation && !reserved.is_empty() {
        e.forbidden(
            "status.deallocationRequested",
            "deallocation cannot be requested while `reservedFor` is set",
        );
    }
    if allocation.is_none() && deallocation {
        e.forbidden(
            "status",
            "`allocation` must be set when `deallocationRequested` is set",
        );
    }
    if old_deallocation && !deallocation && allocation.is_some() {
        e.forbidden(
            "status.deallocationRequested",
            "may not be cleared when `allocation` is set",
        );
    }
}

/// The checks of one `resource.k8s.io/v1alpha2` object.
pub(super) fn validate(e: &mut Errs, kind: &str, obj: &Value, old: Option<&Value>) {
    match kind {
        "ResourceClaim" => {
            validate_claim_spec(e, obj.get("spec"), "spec");
            if old.is_some() {
                validate_claim_status(e, obj, old);
            }
        }
        "ResourceClaimTemplate" => {
            validate_claim_spec(e, obj.pointer("/spec/spec"), "spec.spec");
        }
        "PodSchedulingContext" => {
            let node = str_of(obj.pointer("/spec/selectedNode"));
            if !node.is_empty() {
                e.invalid_msgs("spec.selectedNode", node, is_dns1123_subdomain(node));
            }
        }
        "ResourceClass" => {
            let driver = str_of(obj.get("driverName"));
            if driver.is_empty() {
                e.required("driverName", "");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(f: impl FnOnce(&mut Errs)) -> Vec<(String, String)> {
        let mut e = Errs::default();
        f(&mut e);
        e.0.into_iter().map(|c| (c.field, c.message)).collect()
    }

    #[test]
    fn pod_claims_need_one_source_and_unique_names() {
        let spec = json!({"resourceClaims": [
            {"name": "a", "source": {"resourceClaimTemplateName": "t"}},
            {"name": "a", "source": {"resourceClaimName": "c"}},
            {"name": "b", "source": {}},
        ]});
        let got = causes(|e| validate_pod_claims(e, "p", Some(&spec), "spec"));
        assert_eq!(
            got[0],
            (
                "spec.resourceClaims[1].name".into(),
                "Duplicate value: \"a\"".into()
            )
        );
        assert_eq!(got[1].0, "spec.resourceClaims[2].source");
        assert!(got[1]
            .1
            .ends_with("must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn claim_statuses_keep_their_invariants() {
        let old = json!({"status": {"allocation": {}, "driverName": "d",
                         "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
        let drop_and_deallocate = json!({"spec": {"resourceClassName": "c", "allocationMode": "WaitForFirstConsumer"},
            "status": {"allocation": {}, "driverName": "d", "deallocationRequested": true}});
        assert!(
            causes(|e| validate(e, "ResourceClaim", &drop_and_deallocate, Some(&old))).is_empty()
        );
        let both = json!({"spec": {"resourceClassName": "c", "allocationMode": "WaitForFirstConsumer"},
            "status": {"allocation": {}, "driverName": "d", "deallocationRequested": true,
                       "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
        assert_eq!(
            causes(|e| validate(e, "ResourceClaim", &both, Some(&old))),
            [(
                "status.deallocationRequested".to_string(),
                "Forbidden: deallocation cannot be requested while `reservedFor` is set"
                    .to_string()
            )]
        );
        let unallocated = json!({"spec": {"resourceClassName": "c", "allocationMode": "Sometimes"},
            "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
        assert_eq!(
            causes(|e| validate(e, "ResourceClaim", &unallocated, Some(&json!({})))),
            [
                ("spec.allocationMode".to_string(),
                 "Unsupported value: \"Sometimes\": supported values: \"Immediate\", \"WaitForFirstConsumer\"".to_string()),
                ("status.reservedFor".to_string(),
                 "Forbidden: may not be specified when `allocated` is not set".to_string()),
            ]
        );
    }

    #[test]
    fn pod_claim_statuses_name_spec_entries() {
        let pod = json!({"spec": {"resourceClaims": [{"name": "a"}]},
                         "status": {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "p-a-x"}, {"name": "z"}]}});
        assert_eq!(
            causes(|e| validate_pod_claim_statuses(e, &pod)),
            [(
                "status.resourceClaimStatuses[1].name".to_string(),
                "Invalid value: \"z\": must match the name of an entry in `spec.resourceClaims`"
                    .to_string()
            )]
        );
    }
}
