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

// Qualified names, label values and DNS subdomains, and the message helpers, are the one
// Go-compatibility copy (the product's label selectors use it as well).
pub(crate) use rkcm_gocompat::validation::{
    is_dns1123_subdomain, is_qualified_name, is_valid_label_value as is_label_value,
};

mod admission_policy;
mod admission_policy_cel;
mod apps;
mod batch;
pub mod csr;
pub(crate) mod dra;
pub(crate) mod endpoints;
mod formats;
pub(crate) mod gated;
mod helpers;
mod jsonpath_syntax;
mod meta;
mod other_kinds;
mod pods;
#[cfg(test)]
mod recorded_tests;
mod services;
#[cfg(test)]
mod tests;
mod volume_attachment;

use apps::{
    validate_daemonset, validate_deployment, validate_rc, validate_replicaset, validate_statefulset,
};
use batch::{validate_cronjob, validate_job, validate_job_update};
pub use formats::{invalid_message, validate_name};
use formats::{is_dns1035_label, is_valid_port_num};
pub(crate) use formats::{is_dns1123_label, is_path_segment_name};
pub(crate) use helpers::q;
use helpers::{arr, child, go_selector, go_string_slice, idx, int_of, obj, sem_eq, str_of, Errs};
use meta::{validate_label_selector, validate_meta};
use other_kinds::{
    validate_configmap, validate_immutable_data, validate_lease, validate_namespace, validate_node,
    validate_pdb, validate_pv, validate_pvc_spec, validate_pvc_update, validate_secret,
};
pub(crate) use pods::VOLUME_SOURCES;
use pods::{validate_pod_create, validate_pod_template, validate_pod_update};
use serde_json::{Map, Value};
pub use services::service_ip_family_errors;
use services::{validate_service, validate_service_update};

/// One field error, as it appears in a Status' `details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

type Obj = Map<String, Value>;

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
