//! A pod's resource claims (`resource.k8s.io/v1alpha2`), as the scheduler's
//! DynamicResources plugin and the kubelet's DRA manager look at them. node-sim runs no
//! resource driver: a claim is allocated by whoever plays the driver (a test), never here.
//!
//! - The scheduler leaves a pod Pending (`FailedScheduling`, upstream's PreFilter/Reserve
//!   messages) while a claim is not created yet, missing, being deleted, not the pod's,
//!   unallocated, to be deallocated, or in use by another pod; otherwise, just before it
//!   binds the pod, it adds the pod to the `status.reservedFor` of every claim not yet
//!   reserved for it (PreBind).
//! - The kubelet starts no container of a pod until each of its claims exists and is
//!   allocated and reserved for the pod.
//!
//! Pods are read raw here: node-sim's typed Pod (k8s-openapi 1.33) has no 1.29 `source`.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

fn claims_resource() -> ApiResource {
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "resource.k8s.io/v1alpha2".into(),
        kind: "ResourceClaim".into(),
        plural: "resourceclaims".into(),
    }
}

/// Whether the (typed) pod names resource claims at all.
pub fn has_resource_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|claims| !claims.is_empty())
}

/// Who is asking: the scheduler (before binding) or the kubelet (before starting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Scheduling,
    Starting,
}

/// The claim names of a raw pod, in order, with whether the pod must own each (generated
/// from a template); a claim the status records as not needed is left out.
pub fn claim_names(pod: &Value) -> Result<Vec<(String, bool)>, String> {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let statuses = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut names = Vec::new();
    for claim in pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let pod_claim = claim.get("name").and_then(Value::as_str).unwrap_or("");
        let source = claim.get("source");
        if let Some(direct) = source
            .and_then(|s| s.get("resourceClaimName"))
            .and_then(Value::as_str)
        {
            names.push((direct.to_string(), false));
        } else if source
            .and_then(|s| s.get("resourceClaimTemplateName"))
            .is_some()
        {
            match statuses
                .iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(pod_claim))
            {
                Some(status) => {
                    if let Some(generated) = status.get("resourceClaimName").and_then(Value::as_str)
                    {
                        names.push((generated.to_string(), true));
                    }
                }
                None => {
                    return Err(format!(
                        "pod \"{namespace}/{name}\": ResourceClaim not created yet"
                    ))
                }
            }
        } else {
            return Err(format!(
                "pod \"{namespace}/{name}\", spec.resourceClaim \"{pod_claim}\": none of the supported fields are set"
            ));
        }
    }
    Ok(names)
}

/// What keeps the pod from being scheduled or started because of one claim (`None`: it
/// exists), and whether the scheduler must reserve it for the pod.
pub fn claim_problem(
    pod: &Value,
    name: &str,
    must_own: bool,
    claim: Option<&Value>,
    phase: Phase,
) -> Result<bool, String> {
    let Some(claim) = claim else {
        return Err(format!(
            "resourceclaim.resource.k8s.io \"{name}\" not found"
        ));
    };
    let pod_uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !claim
        .pointer("/metadata/deletionTimestamp")
        .unwrap_or(&Value::Null)
        .is_null()
    {
        return Err(format!("resourceclaim \"{name}\" is being deleted"));
    }
    if must_own {
        let owned = claim
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|o| {
                o.get("controller") == Some(&json!(true))
                    && o.get("uid").and_then(Value::as_str) == Some(pod_uid)
            });
        if !owned {
            return Err(format!(
                "ResourceClaim {namespace}/{name} was not created for pod {namespace}/{pod_name} (pod is not owner)"
            ));
        }
    }
    let allocated = !claim
        .pointer("/status/allocation")
        .unwrap_or(&Value::Null)
        .is_null();
    let reserved: Vec<&str> = claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
        .collect();
    let reserved_for_pod = reserved.contains(&pod_uid);
    match phase {
        Phase::Starting => {
            if !allocated || !reserved_for_pod {
                let claim_uid = claim
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(format!(
                    "pod {pod_name}({pod_uid}) is not allowed to use resource claim {name}({claim_uid})"
                ));
            }
            Ok(false)
        }
        Phase::Scheduling => {
            let mode = claim
                .pointer("/spec/allocationMode")
                .and_then(Value::as_str)
                .unwrap_or("");
            if claim.pointer("/status/deallocationRequested") == Some(&json!(true)) {
                return Err("resourceclaim must be reallocated".into());
            }
            if !allocated {
                return Err(if mode == "Immediate" {
                    "unallocated immediate resourceclaim".into()
                } else {
                    // No driver answers the scheduling context in node-sim.
                    "waiting for resource driver to allocate resource".into()
                });
            }
            let shareable = claim.pointer("/status/allocation/shareable") == Some(&json!(true));
            if !reserved_for_pod && !shareable && !reserved.is_empty() {
                return Err("resourceclaim in use".into());
            }
            Ok(!reserved_for_pod)
        }
    }
}

async fn raw_pod(client: &kube::Client, pod: &Pod) -> Result<Option<Value>, kube::Error> {
    let resource = ApiResource::erase::<Pod>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &pod.namespace().unwrap_or_default(),
        &resource,
    );
    Ok(api
        .get_opt(&pod.name_any())
        .await?
        .and_then(|o| serde_json::to_value(o).ok()))
}

/// The first problem of the pod's claims for `phase` (`Ok(Err(..))`), or the claims the
/// scheduler must reserve for it (`Ok(Ok(..))`).
pub async fn check(
    client: &kube::Client,
    pod: &Pod,
    phase: Phase,
) -> Result<Result<Vec<String>, String>, kube::Error> {
    let Some(raw) = raw_pod(client, pod).await? else {
        return Ok(Ok(Vec::new()));
    };
    let names = match claim_names(&raw) {
        Ok(names) => names,
        Err(problem) => return Ok(Err(problem)),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &pod.namespace().unwrap_or_default(),
        &claims_resource(),
    );
    let mut reserve = Vec::new();
    for (name, must_own) in names {
        let claim = match api.get_opt(&name).await {
            Ok(claim) => claim.and_then(|c| serde_json::to_value(c).ok()),
            // The group is not served: the claims cannot exist.
            Err(kube::Error::Api(e)) if e.code == 404 => None,
            Err(e) => return Err(e),
        };
        match claim_problem(&raw, &name, must_own, claim.as_ref(), phase) {
            Ok(true) => reserve.push(name),
            Ok(false) => {}
            Err(problem) => return Ok(Err(problem)),
        }
    }
    Ok(Ok(reserve))
}

/// The scheduler's PreBind: each claim not yet reserved for the pod gets it in its
/// `status.reservedFor` (a conflict is an error, retried with the binding).
pub async fn reserve(client: &kube::Client, pod: &Pod) -> Result<(), String> {
    let claims = match check(client, pod, Phase::Scheduling).await {
        Ok(Ok(claims)) => claims,
        Ok(Err(problem)) => return Err(problem),
        Err(e) => return Err(e.to_string()),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &pod.namespace().unwrap_or_default(),
        &claims_resource(),
    );
    for name in claims {
        let claim = api.get(&name).await.map_err(|e| e.to_string())?;
        let mut value = serde_json::to_value(&claim).map_err(|e| e.to_string())?;
        let entry = json!({"resource": "pods", "name": pod.name_any(), "uid": pod.uid().unwrap_or_default()});
        match value
            .pointer_mut("/status/reservedFor")
            .and_then(Value::as_array_mut)
        {
            Some(list) => list.push(entry),
            None => value["status"]["reservedFor"] = json!([entry]),
        }
        let updated: DynamicObject = serde_json::from_value(value).map_err(|e| e.to_string())?;
        api.replace_status(&name, &PostParams::default(), &updated)
            .await
            .map_err(|e| format!("reserving resourceclaim {name}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
               "spec": {"resourceClaims": [
                   {"name": "a", "source": {"resourceClaimName": "shared"}},
                   {"name": "b", "source": {"resourceClaimTemplateName": "t"}}]},
               "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-1"}]}})
    }

    #[test]
    fn names_come_from_the_source_or_the_status() {
        assert_eq!(
            claim_names(&pod()).unwrap(),
            [("shared".to_string(), false), ("p-b-1".to_string(), true)]
        );
        let mut pending = pod();
        pending["status"] = json!({});
        assert_eq!(
            claim_names(&pending).unwrap_err(),
            "pod \"ns/p\": ResourceClaim not created yet"
        );
    }

    #[test]
    fn claims_must_be_allocated_and_reserved() {
        let pod = pod();
        let s = Phase::Scheduling;
        assert_eq!(
            claim_problem(&pod, "shared", false, None, s).unwrap_err(),
            "resourceclaim.resource.k8s.io \"shared\" not found"
        );
        let unallocated = json!({"spec": {"allocationMode": "WaitForFirstConsumer"}});
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&unallocated), s).unwrap_err(),
            "waiting for resource driver to allocate resource"
        );
        let immediate = json!({"spec": {"allocationMode": "Immediate"}});
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&immediate), s).unwrap_err(),
            "unallocated immediate resourceclaim"
        );
        let allocated = json!({"metadata": {"uid": "cu"}, "status": {"allocation": {}}});
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&allocated), s),
            Ok(true)
        );
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&allocated), Phase::Starting).unwrap_err(),
            "pod p(pu) is not allowed to use resource claim shared(cu)"
        );
        let in_use = json!({"status": {"allocation": {}, "reservedFor": [{"uid": "other"}]}});
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&in_use), s).unwrap_err(),
            "resourceclaim in use"
        );
        let ours = json!({"status": {"allocation": {}, "reservedFor": [{"uid": "pu"}]}});
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&ours), s),
            Ok(false)
        );
        assert_eq!(
            claim_problem(&pod, "shared", false, Some(&ours), Phase::Starting),
            Ok(false)
        );
        assert_eq!(
            claim_problem(&pod, "p-b-1", true, Some(&ours), s).unwrap_err(),
            "ResourceClaim ns/p-b-1 was not created for pod ns/p (pod is not owner)"
        );
    }
}
