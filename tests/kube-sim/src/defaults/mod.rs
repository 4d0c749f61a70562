//! Server-side defaulting for kube-sim, the in-memory Kubernetes API server.
//!
//! kube-apiserver v1.29 fills in defaults whenever it decodes an object (on create, on
//! update, and again when it reads the stored object back), then runs mutating admission
//! and the resource strategy's create/update preparation. This module reproduces, on plain
//! `serde_json::Value` objects, the parts of that pipeline that change what a client sees:
//! the scheme defaulters of every built-in group (`apply_defaults`), the fields Go's JSON
//! encoder always writes for non-pointer structs (e.g. `status: {"replicas": 0}`, template
//! `metadata.creationTimestamp: null`), the conversion-time normalisations (Secret
//! `stringData`, `serviceAccount` / `serviceAccountName`, `podCIDR` / `podCIDRs`), the
//! admission plugins that default Pods (Priority, DefaultTolerationSeconds, ServiceAccount
//! via `admit_pod_service_account`), and the create-only strategy steps
//! (`prepare_for_create`, `prepare_for_update`, `job_selector_and_labels`).
//! The request handler calls `apply_defaults` after decoding and before validation.
//! Every function tolerates objects of the wrong shape: a field with an unexpected JSON
//! type is left alone.

use serde_json::{json, Map, Value};

mod core_kinds;
mod other_groups;
mod pods;
mod strategy;
#[cfg(test)]
mod tests;
mod workloads;

use core_kinds::{
    default_core_event, default_limit_range, default_namespace, default_node,
    default_persistent_volume, default_pvc, default_secret, default_service,
};
use other_groups::{
    default_crd, default_hpa, default_network_policy, default_role_binding, default_webhook,
};
use pods::{default_pod, default_pod_template};
use workloads::{
    default_cron_job, default_daemon_set, default_deployment, default_job, default_replica_set,
    default_replication_controller, default_stateful_set,
};

pub use core_kinds::{after_defaulting, base64_encode};
pub use pods::{image_pull_policy, pod_qos_class};
pub use strategy::{
    admit_pod_service_account, admit_pod_service_account_with, job_selector_and_labels,
    prepare_for_create, prepare_for_update,
};

type Obj = Map<String, Value>;

/// The path at which the ServiceAccount admission plugin mounts the API credentials.
pub const SERVICE_ACCOUNT_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

// ---------------------------------------------------------------------------------------
// Small helpers over JSON maps
// ---------------------------------------------------------------------------------------

fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// Unset for a Go `string` field: absent, null or "".
fn is_unset_str(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// Unset for a Go (non-pointer) number field: absent, null or 0.
fn is_unset_num(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Empty for a Go map or slice field: absent, null, {} or [].
fn is_empty_coll(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

fn default_val(m: &mut Obj, key: &str, value: Value) {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), value);
    }
}

fn default_str(m: &mut Obj, key: &str, value: &str) {
    if is_unset_str(m.get(key)) {
        m.insert(key.to_string(), Value::String(value.to_string()));
    }
}

fn default_num(m: &mut Obj, key: &str, value: i64) {
    if is_unset_num(m.get(key)) {
        m.insert(key.to_string(), json!(value));
    }
}

fn get_str<'a>(m: &'a Obj, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An existing child object (None if absent or of another type).
fn child<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// A child object, created (as `{}`) when absent or null. None if it has another type.
fn child_or_create<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), Value::Object(Obj::new()));
    }
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// Calls `f` for every object element of the array at `key`.
fn each_obj(m: &mut Obj, key: &str, mut f: impl FnMut(&mut Obj)) {
    if let Some(arr) = m.get_mut(key).and_then(Value::as_array_mut) {
        for item in arr.iter_mut() {
            if let Some(o) = item.as_object_mut() {
                f(o);
            }
        }
    }
}

/// Go serialises a non-pointer `metav1.ObjectMeta` with `creationTimestamp: null`.
fn template_metadata(m: &mut Obj, key: &str) {
    if let Some(meta) = child_or_create(m, key) {
        default_val(meta, "creationTimestamp", Value::Null);
    }
}

fn meta_name(obj: &Obj) -> String {
    obj.get("metadata")
        .and_then(Value::as_object)
        .map(|m| get_str(m, "name").to_string())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------

/// Fill in, in place, the defaults kube-apiserver v1.29 sets when it decodes an object of
/// this kind (on create and on update). `group` is "" for core.
///
/// Covers the scheme defaulters of core/v1, apps/v1, batch/v1, autoscaling/v1+v2,
/// policy/v1, discovery.k8s.io/v1, networking.k8s.io/v1, rbac.authorization.k8s.io/v1,
/// storage.k8s.io/v1, scheduling.k8s.io/v1, admissionregistration.k8s.io/v1,
/// apiextensions.k8s.io/v1, pod defaults inside every pod template, the always-serialised
/// zero values of Go structs, and, for Pods only, the Priority and DefaultTolerationSeconds
/// admission plugins plus the initial status (phase Pending, qosClass). Create-only steps
/// (Namespace `kubernetes` finalizer, protection finalizers, Node not-ready taint, ...)
/// are in [`prepare_for_create`]; ServiceAccount admission is
/// [`admit_pod_service_account`]; the Job selector is [`job_selector_and_labels`].
pub fn apply_defaults(group: &str, version: &str, kind: &str, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match (group, kind) {
        ("", "Pod") => default_pod(o),
        (crate::dra::GROUP, kind) => crate::dra::apply_defaults(kind, obj),
        (
            crate::admission_policies::GROUP,
            kind @ (crate::admission_policies::POLICY_KIND
            | crate::admission_policies::BINDING_KIND),
        ) => crate::admission_policies::apply_defaults(kind, obj),
        ("", "PodTemplate") => {
            if let Some(t) = child_or_create(o, "template") {
                default_pod_template(t);
            }
        }
        ("", "ReplicationController") => default_replication_controller(o),
        ("", "Service") => default_service(o),
        ("", "Namespace") => default_namespace(o),
        ("", "Secret") => default_secret(o),
        ("", "PersistentVolume") => default_persistent_volume(o),
        ("", "PersistentVolumeClaim") => default_pvc(o),
        ("", "Node") => default_node(o),
        ("", "Endpoints") => each_obj(o, "subsets", |ss| {
            each_obj(ss, "ports", |p| default_str(p, "protocol", "TCP"))
        }),
        ("", "LimitRange") => default_limit_range(o),
        ("", "ResourceQuota") => {
            child_or_create(o, "spec");
            child_or_create(o, "status");
        }
        ("", "Event") => default_core_event(o),
        ("events.k8s.io", "Event") => {
            default_val(o, "eventTime", Value::Null);
            default_val(o, "deprecatedFirstTimestamp", Value::Null);
            default_val(o, "deprecatedLastTimestamp", Value::Null);
            child_or_create(o, "deprecatedSource");
        }
        ("apps", "Deployment") => default_deployment(o),
        ("apps", "ReplicaSet") => default_replica_set(o),
        ("apps", "StatefulSet") => default_stateful_set(o),
        ("apps", "DaemonSet") => default_daemon_set(o),
        ("batch", "Job") => default_job(o),
        ("batch", "CronJob") => default_cron_job(o),
        ("autoscaling", "HorizontalPodAutoscaler") => default_hpa(version, o),
        ("policy", "PodDisruptionBudget") => {
            child_or_create(o, "spec");
            if let Some(st) = child_or_create(o, "status") {
                for k in [
                    "disruptionsAllowed",
                    "currentHealthy",
                    "desiredHealthy",
                    "expectedPods",
                ] {
                    default_val(st, k, json!(0));
                }
            }
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            each_obj(o, "ports", |p| {
                default_val(p, "name", json!(""));
                default_val(p, "protocol", json!("TCP"));
            });
            each_obj(o, "endpoints", |e| {
                child_or_create(e, "conditions");
            });
        }
        ("coordination.k8s.io", "Lease") => {
            child_or_create(o, "spec");
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            child_or_create(o, "status");
        }
        ("rbac.authorization.k8s.io", "Role") | ("rbac.authorization.k8s.io", "ClusterRole") => {
            default_val(o, "rules", Value::Null);
        }
        ("rbac.authorization.k8s.io", "RoleBinding")
        | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => default_role_binding(o),
        ("storage.k8s.io", "StorageClass") => {
            default_str(o, "reclaimPolicy", "Delete");
            default_str(o, "volumeBindingMode", "Immediate");
        }
        ("storage.k8s.io", "CSIDriver") => {
            if let Some(spec) = child_or_create(o, "spec") {
                default_val(spec, "attachRequired", json!(true));
                default_val(spec, "podInfoOnMount", json!(false));
                default_val(spec, "storageCapacity", json!(false));
                default_str(spec, "fsGroupPolicy", "ReadWriteOnceWithFSType");
                if is_empty_coll(spec.get("volumeLifecycleModes")) {
                    spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
                }
                default_val(spec, "requiresRepublish", json!(false));
                default_val(spec, "seLinuxMount", json!(false));
            }
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            if let Some(s) = child_or_create(o, "status") {
                default_val(s, "attached", json!(false));
            }
        }
        ("networking.k8s.io", "NetworkPolicy") => default_network_policy(o),
        ("networking.k8s.io", "Ingress") => {
            child_or_create(o, "spec");
            if let Some(st) = child_or_create(o, "status") {
                child_or_create(st, "loadBalancer");
            }
        }
        ("networking.k8s.io", "IngressClass") => {
            if let Some(p) = child_or_create(o, "spec").and_then(|s| child(s, "parameters")) {
                default_str(p, "scope", "Cluster");
            }
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            default_val(o, "value", json!(0));
            default_str(o, "preemptionPolicy", "PreemptLowerPriority");
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            each_obj(o, "webhooks", |w| default_webhook(w, false));
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            each_obj(o, "webhooks", |w| default_webhook(w, true));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => default_crd(o),
        _ => {}
    }
}
