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

use crate::validation::VOLUME_SOURCES;
use rkcm_gocompat::Quantity;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

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

/// ServiceAccount admission for a Pod (kube-apiserver's plugin): set
/// spec.serviceAccountName (default "default") and the deprecated spec.serviceAccount to the
/// same, and unless automountServiceAccountToken is false (on the pod), or a volume already
/// mounts /var/run/secrets/kubernetes.io/serviceaccount, add the projected volume
/// `kube-api-access-<suffix>` (serviceAccountToken expirationSeconds 3607 path token;
/// configMap kube-root-ca.crt ca.crt; downwardAPI namespace; defaultMode 420) and a readOnly
/// volumeMount at /var/run/secrets/kubernetes.io/serviceaccount to every container and
/// initContainer, exactly as reference 027 shows. `suffix` is 5 random chars chosen by the
/// caller. Mirror pods (annotation `kubernetes.io/config.mirror`) are left alone.
pub fn admit_pod_service_account(pod: &mut Value, suffix: &str) {
    admit_pod_service_account_with(pod, suffix, None);
}

/// Like [`admit_pod_service_account`], but also honours the ServiceAccount object the pod
/// runs as (when the caller has it): its `automountServiceAccountToken: false` disables the
/// token volume unless the pod sets the field itself, and its `imagePullSecrets` are copied
/// to a pod that has none.
pub fn admit_pod_service_account_with(
    pod: &mut Value,
    suffix: &str,
    service_account: Option<&Value>,
) {
    let Some(p) = pod.as_object_mut() else {
        return;
    };
    let is_mirror = p
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get("kubernetes.io/config.mirror"))
        .is_some();
    if is_mirror {
        return;
    }
    let Some(spec) = child_or_create(p, "spec") else {
        return;
    };
    if is_unset_str(spec.get("serviceAccountName")) {
        let sa = spec
            .get("serviceAccount")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string();
        spec.insert("serviceAccountName".into(), json!(sa));
    }
    let sa_name = get_str(spec, "serviceAccountName").to_string();
    spec.insert("serviceAccount".into(), json!(sa_name));

    let automount = match spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
    {
        Some(b) => b,
        None => service_account
            .and_then(|sa| sa.get("automountServiceAccountToken"))
            .and_then(Value::as_bool)
            .unwrap_or(true),
    };
    if automount {
        mount_service_account_token(spec, suffix);
    }
    if is_empty_coll(spec.get("imagePullSecrets")) {
        if let Some(secrets) = service_account
            .and_then(|sa| sa.get("imagePullSecrets"))
            .and_then(Value::as_array)
        {
            let refs: Vec<Value> = secrets
                .iter()
                .map(|s| json!({"name": s.get("name").and_then(Value::as_str).unwrap_or("")}))
                .collect();
            if !refs.is_empty() {
                spec.insert("imagePullSecrets".into(), Value::Array(refs));
            }
        }
    }
}

fn mount_service_account_token(spec: &mut Obj, suffix: &str) {
    // An existing kube-api-access-* volume is reused.
    let mut volume_name = None;
    if let Some(vols) = spec.get("volumes").and_then(Value::as_array) {
        for v in vols {
            if let Some(n) = v.get("name").and_then(Value::as_str) {
                if n.starts_with("kube-api-access-") {
                    volume_name = Some(n.to_string());
                    break;
                }
            }
        }
    }
    let has_volume = volume_name.is_some();
    let volume_name = volume_name.unwrap_or_else(|| format!("kube-api-access-{suffix}"));
    let mount = json!({
        "name": volume_name,
        "readOnly": true,
        "mountPath": SERVICE_ACCOUNT_MOUNT_PATH,
    });
    let mut needs_volume = false;
    for key in ["initContainers", "containers"] {
        if let Some(arr) = spec.get_mut(key).and_then(Value::as_array_mut) {
            for c in arr.iter_mut() {
                let Some(c) = c.as_object_mut() else { continue };
                let already = c
                    .get("volumeMounts")
                    .and_then(Value::as_array)
                    .map(|ms| {
                        ms.iter().any(|m| {
                            m.get("mountPath").and_then(Value::as_str)
                                == Some(SERVICE_ACCOUNT_MOUNT_PATH)
                        })
                    })
                    .unwrap_or(false);
                if already {
                    continue;
                }
                if is_unset(c.get("volumeMounts")) {
                    c.insert("volumeMounts".into(), json!([]));
                }
                if let Some(ms) = c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                    ms.push(mount.clone());
                    needs_volume = true;
                }
            }
        }
    }
    if needs_volume && !has_volume {
        if is_unset(spec.get("volumes")) {
            spec.insert("volumes".into(), json!([]));
        }
        if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
            vols.push(json!({
                "name": volume_name,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                    ],
                    "defaultMode": 420
                }
            }));
        }
    }
}

/// Generated Job selector and labels (the batch/v1 Job strategy's create step).
///
/// The server calls this on create after it has assigned the Job's `metadata.uid` (the
/// selector names the uid) and after [`apply_defaults`]. Unless `spec.manualSelector` is
/// true it adds `batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name` and the
/// legacy `controller-uid` / `job-name` labels to the pod template (keeping values the user
/// set), selects on `batch.kubernetes.io/controller-uid`, and sets `manualSelector: false`
/// when it was unset. Because the real server defaults the object again when it reads it
/// back from storage, the Job's own labels are then copied from the template labels when the
/// Job has none (references 033/034).
pub fn job_selector_and_labels(job: &mut Value, uid: &str) {
    let Some(j) = job.as_object_mut() else {
        return;
    };
    let name = meta_name(j);
    let Some(spec) = child_or_create(j, "spec") else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    default_val(spec, "manualSelector", json!(false));
    if let Some(tpl) = child_or_create(spec, "template") {
        if let Some(meta) = child_or_create(tpl, "metadata") {
            default_val(meta, "creationTimestamp", Value::Null);
            if let Some(labels) = child_or_create(meta, "labels") {
                for key in ["job-name", "batch.kubernetes.io/job-name"] {
                    if !labels.contains_key(key) {
                        labels.insert(key.into(), json!(name));
                    }
                }
                for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                    if !labels.contains_key(key) {
                        labels.insert(key.into(), json!(uid));
                    }
                }
            }
        }
    }
    if let Some(sel) = child_or_create(spec, "selector") {
        if let Some(ml) = child_or_create(sel, "matchLabels") {
            if !ml.contains_key("batch.kubernetes.io/controller-uid") {
                ml.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
            }
        }
    }
    copy_template_labels_to_job(j);
}

fn copy_template_labels_to_job(j: &mut Obj) {
    let tpl_labels = j
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = tpl_labels {
        if let Some(meta) = child_or_create(j, "metadata") {
            if is_empty_coll(meta.get("labels")) {
                meta.insert("labels".into(), labels);
            }
        }
    }
}

/// Create-only mutations the real server makes outside the scheme defaulters (resource
/// strategies' PrepareForCreate and create-only admission plugins). Call after
/// [`apply_defaults`] on create only. `now` is the RFC 3339 creation time (used for a
/// PersistentVolume's `status.lastPhaseTransitionTime`).
///
/// - Namespace: `spec.finalizers` gains `kubernetes`, status phase Active.
/// - PersistentVolumeClaim / PersistentVolume: the `kubernetes.io/pvc-protection` /
///   `kubernetes.io/pv-protection` finalizer (StorageObjectInUseProtection admission).
/// - PersistentVolumeClaim: the status is cleared (phase Pending).
/// - PersistentVolume: the status is cleared to phase Pending with
///   `status.lastPhaseTransitionTime` now.
/// - Node: taint `node.kubernetes.io/not-ready:NoSchedule` (TaintNodesByCondition admission).
/// - DaemonSet: annotation `deprecated.daemonset.template.generation: "1"`.
/// - CustomResourceDefinition: `status.storedVersions` = the storage version.
/// - EndpointSlice: the endpoints' `deprecatedTopology` is dropped (v1 writes); empty
///   `endpoints` and `ports` are stored as null (as etcd's protobuf gives them back).
/// - Endpoints: empty `subsets` (and a subset's empty lists) are not stored.
pub fn prepare_for_create(group: &str, _version: &str, kind: &str, obj: &mut Value, now: &str) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match (group, kind) {
        ("", "Namespace") => {
            if let Some(spec) = child_or_create(o, "spec") {
                if is_unset(spec.get("finalizers")) {
                    spec.insert("finalizers".into(), json!([]));
                }
                if let Some(f) = spec.get_mut("finalizers").and_then(Value::as_array_mut) {
                    if !f.iter().any(|x| x.as_str() == Some("kubernetes")) {
                        f.push(json!("kubernetes"));
                    }
                }
            }
            if let Some(st) = child_or_create(o, "status") {
                st.insert("phase".into(), json!("Active"));
            }
        }
        ("", "PersistentVolumeClaim") => {
            add_finalizer(o, "kubernetes.io/pvc-protection");
            // The strategy clears the status; reads default its phase.
            o.insert("status".into(), json!({"phase": "Pending"}));
        }
        ("", "PersistentVolume") => {
            add_finalizer(o, "kubernetes.io/pv-protection");
            // The strategy clears the status (PersistentVolumeLastPhaseTransitionTime).
            o.insert(
                "status".into(),
                json!({"phase": "Pending", "lastPhaseTransitionTime": now}),
            );
        }
        ("", "Node") => {
            if let Some(spec) = child_or_create(o, "spec") {
                if is_unset(spec.get("taints")) {
                    spec.insert("taints".into(), json!([]));
                }
                if let Some(t) = spec.get_mut("taints").and_then(Value::as_array_mut) {
                    let present = t.iter().any(|x| {
                        x.get("key").and_then(Value::as_str) == Some("node.kubernetes.io/not-ready")
                            && x.get("effect").and_then(Value::as_str) == Some("NoSchedule")
                    });
                    if !present {
                        t.push(
                            json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}),
                        );
                    }
                }
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(meta) = child_or_create(o, "metadata") {
                if let Some(a) = child_or_create(meta, "annotations") {
                    a.insert(
                        "deprecated.daemonset.template.generation".into(),
                        json!("1"),
                    );
                }
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let storage: Vec<Value> = o
                .get("spec")
                .and_then(|s| s.get("versions"))
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(st) = child_or_create(o, "status") {
                st.insert("storedVersions".into(), Value::Array(storage));
            }
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            crate::validation::endpoints::drop_deprecated_topology(o);
            crate::validation::endpoints::null_empty_lists(o);
        }
        ("", "Endpoints") => crate::validation::endpoints::drop_empty_endpoints_lists(o),
        _ => {}
    }
}

/// Update-time strategy mutations that depend on the previous object: a DaemonSet whose
/// pod template changed gets its `deprecated.daemonset.template.generation` annotation
/// incremented (otherwise the old value is kept); Endpoints and EndpointSlices are treated
/// as on create.
pub fn prepare_for_update(group: &str, _version: &str, kind: &str, obj: &mut Value, old: &Value) {
    if (group, kind) == ("discovery.k8s.io", "EndpointSlice") {
        if let Some(o) = obj.as_object_mut() {
            crate::validation::endpoints::drop_deprecated_topology(o);
            crate::validation::endpoints::null_empty_lists(o);
        }
        return;
    }
    if (group, kind) == ("", "Endpoints") {
        if let Some(o) = obj.as_object_mut() {
            crate::validation::endpoints::drop_empty_endpoints_lists(o);
        }
        return;
    }
    if (group, kind) != ("apps", "DaemonSet") {
        return;
    }
    let key = "deprecated.daemonset.template.generation";
    let old_gen = old
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(0);
    let changed = obj.get("spec").and_then(|s| s.get("template"))
        != old.get("spec").and_then(|s| s.get("template"));
    let new_gen = if changed { old_gen + 1 } else { old_gen };
    if new_gen == 0 {
        return;
    }
    if let Some(o) = obj.as_object_mut() {
        if let Some(meta) = child_or_create(o, "metadata") {
            if let Some(a) = child_or_create(meta, "annotations") {
                a.insert(key.into(), json!(new_gen.to_string()));
            }
        }
    }
}

fn add_finalizer(o: &mut Obj, name: &str) {
    if let Some(meta) = child_or_create(o, "metadata") {
        if is_unset(meta.get("finalizers")) {
            meta.insert("finalizers".into(), json!([]));
        }
        if let Some(f) = meta.get_mut("finalizers").and_then(Value::as_array_mut) {
            if !f.iter().any(|x| x.as_str() == Some(name)) {
                f.push(json!(name));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pods and pod templates
// ---------------------------------------------------------------------------------------

fn default_pod(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_pod_spec(spec, true);
    }
    let qos = pod_qos_class_obj(o);
    if let Some(status) = child_or_create(o, "status") {
        default_str(status, "phase", "Pending");
        default_str(status, "qosClass", qos);
        sync_ips(status, "podIP", "podIPs");
        sync_ips(status, "hostIP", "hostIPs");
        each_obj(status, "conditions", |c| {
            default_val(c, "lastProbeTime", Value::Null);
            default_val(c, "lastTransitionTime", Value::Null);
        });
    }
}

/// podIP <-> `podIPs[0].ip` (and hostIP / hostIPs), as the v1 conversion does.
fn sync_ips(status: &mut Obj, single: &str, plural: &str) {
    let first = status
        .get(plural)
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|e| e.get("ip"))
        .and_then(Value::as_str)
        .map(str::to_string);
    match first {
        Some(ip) => default_str(status, single, &ip),
        None => {
            let ip = get_str(status, single).to_string();
            if !ip.is_empty() && is_unset(status.get(plural)) {
                status.insert(plural.into(), json!([{ "ip": ip }]));
            }
        }
    }
}

/// DefaultTolerationSeconds admission: tolerate not-ready / unreachable NoExecute taints
/// for 300 s unless the pod already tolerates them.
fn default_pod_tolerations(spec: &mut Obj) {
    let mut has_not_ready = false;
    let mut has_unreachable = false;
    if let Some(ts) = spec.get("tolerations").and_then(Value::as_array) {
        for t in ts {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            if effect != "NoExecute" && !effect.is_empty() {
                continue;
            }
            if key == "node.kubernetes.io/not-ready" || key.is_empty() {
                has_not_ready = true;
            }
            if key == "node.kubernetes.io/unreachable" || key.is_empty() {
                has_unreachable = true;
            }
        }
    } else if spec.get("tolerations").is_some_and(|t| !t.is_null()) {
        return; // wrong type: leave it to validation
    }
    if has_not_ready && has_unreachable {
        return;
    }
    if is_unset(spec.get("tolerations")) {
        spec.insert("tolerations".into(), json!([]));
    }
    if let Some(ts) = spec.get_mut("tolerations").and_then(Value::as_array_mut) {
        if !has_not_ready {
            ts.push(json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
        if !has_unreachable {
            ts.push(json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// Priority admission with no PriorityClass objects besides the two built-in ones.
fn default_pod_priority(spec: &mut Obj) {
    let priority = match get_str(spec, "priorityClassName") {
        "" => Some(0),
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        _ => None,
    };
    if let Some(p) = priority {
        default_val(spec, "priority", json!(p));
        default_str(spec, "preemptionPolicy", "PreemptLowerPriority");
    }
}

fn default_pod_template(t: &mut Obj) {
    template_metadata(t, "metadata");
    if let Some(spec) = child_or_create(t, "spec") {
        default_pod_spec(spec, false);
    }
}

fn default_pod_spec(spec: &mut Obj, is_pod: bool) {
    // v1 <-> internal conversion keeps the deprecated serviceAccount in step.
    if is_unset_str(spec.get("serviceAccountName")) {
        if let Some(sa) = spec
            .get("serviceAccount")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            let sa = sa.to_string();
            spec.insert("serviceAccountName".into(), json!(sa));
        }
    }
    let san = get_str(spec, "serviceAccountName").to_string();
    if !san.is_empty() {
        spec.insert("serviceAccount".into(), json!(san));
    }

    if is_pod {
        for key in ["containers", "initContainers"] {
            each_obj(spec, key, requests_from_limits);
        }
        default_val(spec, "enableServiceLinks", json!(true));
        if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
            for key in ["containers", "initContainers"] {
                each_obj(spec, key, |c| {
                    each_obj(c, "ports", |p| {
                        if is_unset_num(p.get("hostPort")) {
                            if let Some(cp) = p.get("containerPort").cloned() {
                                p.insert("hostPort".into(), cp);
                            }
                        }
                    })
                });
            }
        }
    }
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_val(spec, "securityContext", json!({}));
    default_val(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");

    each_obj(spec, "volumes", default_volume);
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        each_obj(spec, key, default_container);
    }
}

fn requests_from_limits(c: &mut Obj) {
    let Some(res) = child(c, "resources") else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if is_unset(res.get("requests")) {
        res.insert("requests".into(), json!({}));
    }
    if let Some(req) = child(res, "requests") {
        for (k, v) in limits {
            req.entry(k).or_insert(v);
        }
    }
    if is_empty_coll(res.get("requests")) {
        res.remove("requests");
    }
}

fn default_volume(v: &mut Obj) {
    if VOLUME_SOURCES.iter().all(|k| is_unset(v.get(*k))) {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(h) = child(v, "hostPath") {
        default_val(h, "type", json!(""));
    }
    for key in ["secret", "configMap"] {
        if let Some(s) = child(v, key) {
            default_val(s, "defaultMode", json!(420));
        }
    }
    if let Some(d) = child(v, "downwardAPI") {
        default_val(d, "defaultMode", json!(420));
        default_downward_items(d);
    }
    if let Some(p) = child(v, "projected") {
        default_val(p, "defaultMode", json!(420));
        each_obj(p, "sources", |s| {
            if let Some(d) = child(s, "downwardAPI") {
                default_downward_items(d);
            }
            if let Some(t) = child(s, "serviceAccountToken") {
                default_val(t, "expirationSeconds", json!(3600));
            }
        });
    }
    if let Some(i) = child(v, "iscsi") {
        default_str(i, "iscsiInterface", "default");
    }
    if let Some(r) = child(v, "rbd") {
        default_rbd(r);
    }
    if let Some(a) = child(v, "azureDisk") {
        default_azure_disk(a);
    }
    if let Some(s) = child(v, "scaleIO") {
        default_scale_io(s);
    }
    if let Some(e) = child(v, "ephemeral") {
        if let Some(t) = child(e, "volumeClaimTemplate") {
            template_metadata(t, "metadata");
            if let Some(spec) = child_or_create(t, "spec") {
                default_pvc_spec(spec);
            }
        }
    }
}

fn default_rbd(r: &mut Obj) {
    default_str(r, "pool", "rbd");
    default_str(r, "user", "admin");
    default_str(r, "keyring", "/etc/ceph/keyring");
}

fn default_azure_disk(a: &mut Obj) {
    default_str(a, "cachingMode", "ReadWrite");
    default_str(a, "fsType", "ext4");
    default_val(a, "readOnly", json!(false));
    default_str(a, "kind", "Shared");
}

fn default_scale_io(s: &mut Obj) {
    default_str(s, "storageMode", "ThinProvisioned");
    default_str(s, "fsType", "xfs");
}

fn default_downward_items(d: &mut Obj) {
    each_obj(d, "items", |i| {
        if let Some(f) = child(i, "fieldRef") {
            default_str(f, "apiVersion", "v1");
        }
    });
}

fn default_container(c: &mut Obj) {
    if is_unset_str(c.get("imagePullPolicy")) {
        let policy = image_pull_policy(get_str(c, "image"));
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    default_val(c, "resources", json!({}));
    if let Some(r) = child(c, "resources") {
        for k in ["limits", "requests", "claims"] {
            if is_empty_coll(r.get(k)) {
                r.remove(k);
            }
        }
    }
    each_obj(c, "ports", |p| default_str(p, "protocol", "TCP"));
    each_obj(c, "env", |e| {
        if let Some(f) = child(e, "valueFrom").and_then(|vf| child(vf, "fieldRef")) {
            default_str(f, "apiVersion", "v1");
        }
    });
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = child(c, key) {
            default_probe(p);
        }
    }
    if let Some(l) = child(c, "lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(h) = child(l, key).and_then(|h| child(h, "httpGet")) {
                default_http_get(h);
            }
        }
    }
}

fn default_probe(p: &mut Obj) {
    default_num(p, "timeoutSeconds", 1);
    default_num(p, "periodSeconds", 10);
    default_num(p, "successThreshold", 1);
    default_num(p, "failureThreshold", 3);
    if let Some(h) = child(p, "httpGet") {
        default_http_get(h);
    }
    if let Some(g) = child(p, "grpc") {
        default_val(g, "service", json!(""));
    }
}

fn default_http_get(h: &mut Obj) {
    default_str(h, "path", "/");
    default_str(h, "scheme", "HTTP");
}

fn image_ref_regex() -> Option<&'static regex::Regex> {
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        let domain_comp = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
        let domain = format!(r"(?:{domain_comp}(?:\.{domain_comp})*(?::[0-9]+)?)");
        let path_comp = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*";
        let tag = r"[\w][\w.-]{0,127}";
        let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
        let pattern = format!(
            r"^(?:{domain}/)?{path_comp}(?:/{path_comp})*(?::(?P<tag>{tag}))?(?:@(?P<digest>{digest}))?$"
        );
        regex::Regex::new(&pattern).ok()
    })
    .as_ref()
}

/// The default `imagePullPolicy` for an image reference: `Always` when the tag is
/// `latest` or when there is neither tag nor digest, `IfNotPresent` otherwise (including
/// references that do not parse).
pub fn image_pull_policy(image: &str) -> &'static str {
    let Some(caps) = image_ref_regex().and_then(|re| re.captures(image)) else {
        return "IfNotPresent";
    };
    // A domain that is really "name:tag" (e.g. "nginx:1" alone) is handled by the regex
    // preferring the path interpretation for single-component references.
    let tag = caps.name("tag").map(|m| m.as_str());
    let digest = caps.name("digest");
    match (tag, digest) {
        (Some("latest"), _) => "Always",
        (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

// ---------------------------------------------------------------------------------------
// Quantities and QoS
// ---------------------------------------------------------------------------------------

/// The QoS class kube-apiserver records in `status.qosClass` for a pod (after defaulting):
/// BestEffort, Burstable or Guaranteed, from the cpu/memory requests and limits of its
/// containers and init containers.
pub fn pod_qos_class(pod: &Value) -> &'static str {
    pod.as_object()
        .map(pod_qos_class_obj)
        .unwrap_or("BestEffort")
}

fn pod_qos_class_obj(pod: &Obj) -> &'static str {
    use std::collections::BTreeMap;
    let mut requests: BTreeMap<String, i128> = BTreeMap::new();
    let mut limits: BTreeMap<String, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let spec = pod.get("spec");
    for key in ["containers", "initContainers"] {
        let Some(cs) = spec.and_then(|s| s.get(key)).and_then(Value::as_array) else {
            continue;
        };
        for c in cs {
            let res = c.get("resources");
            let collect = |which: &str| -> Vec<(String, i128)> {
                res.and_then(|r| r.get(which))
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| *k == "cpu" || *k == "memory")
                            .filter_map(|(k, v)| {
                                let q = match v {
                                    Value::String(s) => {
                                        Quantity::from_api(s).ok().and_then(|q| q.nano_value())
                                    }
                                    Value::Number(n) => n.as_f64().map(|f| (f * 1e9) as i128),
                                    _ => None,
                                }?;
                                (q > 0).then(|| (k.clone(), q))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for (k, q) in collect("requests") {
                *requests.entry(k).or_insert(0) += q;
            }
            let lims = collect("limits");
            let has = |name: &str| lims.iter().any(|(k, _)| k == name);
            if !(has("cpu") && has("memory")) {
                guaranteed = false;
            }
            for (k, q) in lims {
                *limits.entry(k).or_insert(0) += q;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        for (k, r) in &requests {
            if limits.get(k) != Some(r) {
                guaranteed = false;
                break;
            }
        }
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

// ---------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------

fn default_replication_controller(o: &mut Obj) {
    let tpl_labels = o
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(spec) = child_or_create(o, "spec") {
        if let Some(labels) = &tpl_labels {
            if is_empty_coll(spec.get("selector")) {
                spec.insert("selector".into(), labels.clone());
            }
        }
        default_val(spec, "replicas", json!(1));
        if let Some(t) = child(spec, "template") {
            default_pod_template(t);
        }
    }
    if let Some(labels) = tpl_labels {
        if let Some(meta) = child_or_create(o, "metadata") {
            if is_empty_coll(meta.get("labels")) {
                meta.insert("labels".into(), labels);
            }
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        default_val(st, "replicas", json!(0));
    }
}

fn default_deployment(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_val(spec, "replicas", json!(1));
        if let Some(strategy) = child_or_create(spec, "strategy") {
            default_str(strategy, "type", "RollingUpdate");
            if get_str(strategy, "type") == "RollingUpdate" {
                if let Some(ru) = child_or_create(strategy, "rollingUpdate") {
                    default_val(ru, "maxUnavailable", json!("25%"));
                    default_val(ru, "maxSurge", json!("25%"));
                }
            }
        }
        default_val(spec, "revisionHistoryLimit", json!(10));
        default_val(spec, "progressDeadlineSeconds", json!(600));
        if let Some(t) = child_or_create(spec, "template") {
            default_pod_template(t);
        }
    }
    child_or_create(o, "status");
}

fn default_replica_set(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_val(spec, "replicas", json!(1));
        if let Some(t) = child_or_create(spec, "template") {
            default_pod_template(t);
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        default_val(st, "replicas", json!(0));
    }
}

fn default_stateful_set(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_str(spec, "podManagementPolicy", "OrderedReady");
        if let Some(us) = child_or_create(spec, "updateStrategy") {
            if is_unset_str(us.get("type")) {
                us.insert("type".into(), json!("RollingUpdate"));
                default_val(us, "rollingUpdate", json!({}));
            }
            if get_str(us, "type") == "RollingUpdate" {
                if let Some(ru) = child(us, "rollingUpdate") {
                    default_val(ru, "partition", json!(0));
                }
            }
        }
        if let Some(p) = child_or_create(spec, "persistentVolumeClaimRetentionPolicy") {
            default_str(p, "whenDeleted", "Retain");
            default_str(p, "whenScaled", "Retain");
        }
        default_val(spec, "replicas", json!(1));
        default_val(spec, "revisionHistoryLimit", json!(10));
        if let Some(t) = child_or_create(spec, "template") {
            default_pod_template(t);
        }
        each_obj(spec, "volumeClaimTemplates", |pvc| {
            default_str(pvc, "kind", "PersistentVolumeClaim");
            default_str(pvc, "apiVersion", "v1");
            default_pvc(pvc);
            template_metadata(pvc, "metadata");
        });
    }
    if let Some(st) = child_or_create(o, "status") {
        default_val(st, "replicas", json!(0));
        default_val(st, "availableReplicas", json!(0));
    }
}

fn default_daemon_set(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        if let Some(us) = child_or_create(spec, "updateStrategy") {
            default_str(us, "type", "RollingUpdate");
            if get_str(us, "type") == "RollingUpdate" {
                if let Some(ru) = child_or_create(us, "rollingUpdate") {
                    default_val(ru, "maxUnavailable", json!(1));
                    default_val(ru, "maxSurge", json!(0));
                }
            }
        }
        default_val(spec, "revisionHistoryLimit", json!(10));
        if let Some(t) = child_or_create(spec, "template") {
            default_pod_template(t);
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        for k in [
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ] {
            default_val(st, k, json!(0));
        }
    }
}

fn default_job(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_job_spec(spec);
        // A Job's own defaulting, not its template's in a CronJob.
        default_val(spec, "manualSelector", json!(false));
    }
    copy_template_labels_to_job(o);
    child_or_create(o, "status");
}

fn default_job_spec(spec: &mut Obj) {
    if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_val(spec, "parallelism", json!(1));
    if is_unset(spec.get("backoffLimit")) {
        let per_index = !is_unset(spec.get("backoffLimitPerIndex"));
        spec.insert(
            "backoffLimit".into(),
            json!(if per_index { i64::from(i32::MAX) } else { 6 }),
        );
    }
    default_str(spec, "completionMode", "NonIndexed");
    default_val(spec, "suspend", json!(false));
    let has_failure_policy = spec.get("podFailurePolicy").is_some_and(Value::is_object);
    if let Some(pfp) = child(spec, "podFailurePolicy") {
        each_obj(pfp, "rules", |r| {
            each_obj(r, "onPodConditions", |c| default_str(c, "status", "True"))
        });
    }
    default_str(
        spec,
        "podReplacementPolicy",
        if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        },
    );
    if let Some(t) = child_or_create(spec, "template") {
        default_pod_template(t);
    }
}

fn default_cron_job(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_str(spec, "concurrencyPolicy", "Allow");
        default_val(spec, "suspend", json!(false));
        default_val(spec, "successfulJobsHistoryLimit", json!(3));
        default_val(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(jt) = child_or_create(spec, "jobTemplate") {
            template_metadata(jt, "metadata");
            if let Some(js) = child_or_create(jt, "spec") {
                if let Some(t) = child_or_create(js, "template") {
                    default_pod_template(t);
                }
            }
        }
    }
    child_or_create(o, "status");
}

// ---------------------------------------------------------------------------------------
// Core kinds
// ---------------------------------------------------------------------------------------

fn default_service(o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    default_str(spec, "sessionAffinity", "None");
    match get_str(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_str(spec, "type", "ClusterIP");
    each_obj(spec, "ports", |p| {
        default_str(p, "protocol", "TCP");
        let target_unset = match p.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if target_unset {
            if let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    });
    let svc_type = get_str(spec, "type").to_string();
    let has_external_ips = !is_empty_coll(spec.get("externalIPs"));
    let externally_accessible = svc_type == "LoadBalancer"
        || svc_type == "NodePort"
        || (svc_type == "ClusterIP" && has_external_ips);
    if externally_accessible {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_str(spec, "internalTrafficPolicy", "Cluster");
    }
    if svc_type == "LoadBalancer" {
        default_val(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(st) = child_or_create(o, "status") {
        child_or_create(st, "loadBalancer");
    }
}

/// What kube-apiserver fills in after defaulting, in admission and the service REST storage:
/// a pod's default tolerations (DefaultTolerationSeconds) and priority (Priority admission) on
/// create, a Service's `clusterIPs` and IP families. These are nobody's fields: the field
/// manager has already looked at the object when they are set.
pub fn after_defaulting(group: &str, kind: &str, obj: &mut Value, create: bool) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match (group, kind) {
        ("", "Pod") if create => {
            if let Some(spec) = child_or_create(o, "spec") {
                default_pod_tolerations(spec);
                default_pod_priority(spec);
            }
        }
        ("", "Service") => {
            if let Some(spec) = child_or_create(o, "spec") {
                service_ip_config(spec);
            }
        }
        _ => {}
    }
}

fn service_ip_config(spec: &mut Obj) {
    let svc_type = get_str(spec, "type").to_string();
    // clusterIP <-> clusterIPs[0]
    let first_ip = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_string);
    match first_ip {
        Some(ip) => default_str(spec, "clusterIP", &ip),
        None => {
            let ip = get_str(spec, "clusterIP").to_string();
            if !ip.is_empty() {
                spec.insert("clusterIPs".into(), json!([ip]));
            }
        }
    }
    // IP families for a single-stack IPv4 cluster.
    if svc_type != "ExternalName" {
        let headless = get_str(spec, "clusterIP") == "None";
        let selectorless = is_empty_coll(spec.get("selector"));
        if headless && selectorless {
            default_str(spec, "ipFamilyPolicy", "RequireDualStack");
        } else {
            default_str(spec, "ipFamilyPolicy", "SingleStack");
        }
        if is_empty_coll(spec.get("ipFamilies")) {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
        if headless && selectorless && get_str(spec, "ipFamilyPolicy") != "SingleStack" {
            if let Some(fams) = spec.get_mut("ipFamilies").and_then(Value::as_array_mut) {
                if fams.len() == 1 {
                    let other = if fams[0].as_str() == Some("IPv6") {
                        "IPv4"
                    } else {
                        "IPv6"
                    };
                    fams.push(json!(other));
                }
            }
        }
    }
}

fn default_namespace(o: &mut Obj) {
    let name = meta_name(o);
    if !name.is_empty() {
        if let Some(meta) = child_or_create(o, "metadata") {
            if let Some(labels) = child_or_create(meta, "labels") {
                labels.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
    }
    child_or_create(o, "spec");
    if let Some(st) = child_or_create(o, "status") {
        default_str(st, "phase", "Active");
    }
}

fn default_secret(o: &mut Obj) {
    // stringData is merged into data (base64) by the v1 -> internal conversion.
    if let Some(sd) = o.remove("stringData") {
        if let Some(sd) = sd.as_object() {
            if !sd.is_empty() {
                if is_unset(o.get("data")) {
                    o.insert("data".into(), json!({}));
                }
                if let Some(data) = child(o, "data") {
                    for (k, v) in sd {
                        if let Some(s) = v.as_str() {
                            data.insert(k.clone(), json!(base64_encode(s.as_bytes())));
                        }
                    }
                }
            }
        } else {
            o.insert("stringData".into(), sd);
        }
    }
    default_str(o, "type", "Opaque");
}

/// Standard base64 (with padding), as Go encodes `[]byte` in JSON.
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(ALPHABET[(n >> 18) as usize & 63] as char);
        out.push(ALPHABET[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            ALPHABET[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            ALPHABET[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

fn default_persistent_volume(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_val(spec, "volumeMode", json!("Filesystem"));
        if let Some(h) = child(spec, "hostPath") {
            default_val(h, "type", json!(""));
        }
        if let Some(i) = child(spec, "iscsi") {
            default_str(i, "iscsiInterface", "default");
        }
        if let Some(r) = child(spec, "rbd") {
            default_rbd(r);
        }
        if let Some(a) = child(spec, "azureDisk") {
            default_azure_disk(a);
        }
        if let Some(s) = child(spec, "scaleIO") {
            default_scale_io(s);
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        default_str(st, "phase", "Pending");
    }
}

fn default_pvc_spec(spec: &mut Obj) {
    default_val(spec, "volumeMode", json!("Filesystem"));
    default_val(spec, "resources", json!({}));
}

fn default_pvc(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_pvc_spec(spec);
    }
    if let Some(st) = child_or_create(o, "status") {
        default_str(st, "phase", "Pending");
    }
}

fn default_node(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        let first = spec
            .get("podCIDRs")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .map(str::to_string);
        match first {
            Some(c) => default_str(spec, "podCIDR", &c),
            None => {
                let c = get_str(spec, "podCIDR").to_string();
                if !c.is_empty() {
                    spec.insert("podCIDRs".into(), json!([c]));
                }
            }
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        if is_unset(st.get("allocatable")) {
            if let Some(cap) = st.get("capacity").filter(|c| c.is_object()).cloned() {
                st.insert("allocatable".into(), cap);
            }
        }
        if let Some(de) = child_or_create(st, "daemonEndpoints") {
            if let Some(ke) = child_or_create(de, "kubeletEndpoint") {
                default_val(ke, "Port", json!(0));
            }
        }
        if let Some(ni) = child_or_create(st, "nodeInfo") {
            for k in [
                "machineID",
                "systemUUID",
                "bootID",
                "kernelVersion",
                "osImage",
                "containerRuntimeVersion",
                "kubeletVersion",
                "kubeProxyVersion",
                "operatingSystem",
                "architecture",
            ] {
                default_val(ni, k, json!(""));
            }
        }
    }
}

fn default_limit_range(o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    default_val(spec, "limits", Value::Null);
    each_obj(spec, "limits", |item| {
        if get_str(item, "type") != "Container" {
            return;
        }
        let max = item
            .get("max")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let min = item
            .get("min")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut default = item
            .get("default")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in max {
            default.entry(k).or_insert(v);
        }
        let mut default_request = item
            .get("defaultRequest")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in &default {
            default_request.entry(k.clone()).or_insert(v.clone());
        }
        for (k, v) in min {
            default_request.entry(k).or_insert(v);
        }
        if !default.is_empty()
            && !item
                .get("default")
                .is_some_and(|d| !d.is_object() && !d.is_null())
        {
            item.insert("default".into(), Value::Object(default));
        }
        if !default_request.is_empty()
            && !item
                .get("defaultRequest")
                .is_some_and(|d| !d.is_object() && !d.is_null())
        {
            item.insert("defaultRequest".into(), Value::Object(default_request));
        }
    });
}

fn default_core_event(o: &mut Obj) {
    child_or_create(o, "involvedObject");
    child_or_create(o, "source");
    default_val(o, "firstTimestamp", Value::Null);
    default_val(o, "lastTimestamp", Value::Null);
    default_val(o, "eventTime", Value::Null);
    default_val(o, "reportingComponent", json!(""));
    default_val(o, "reportingInstance", json!(""));
}

// ---------------------------------------------------------------------------------------
// Other groups
// ---------------------------------------------------------------------------------------

fn default_hpa(version: &str, o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    default_val(spec, "minReplicas", json!(1));
    child_or_create(spec, "scaleTargetRef");
    if version == "v1" {
        // v1's CPU target default (80) is applied in conversion, where the metrics the
        // round-trip annotation carries are known.
        return;
    }
    if is_empty_coll(spec.get("metrics")) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(b) = child(spec, "behavior") {
        let up = b.get("scaleUp").cloned();
        let down = b.get("scaleDown").cloned();
        b.insert(
            "scaleUp".into(),
            merge_scaling_rules(
                up.as_ref(),
                json!({
                    "stabilizationWindowSeconds": 0,
                    "selectPolicy": "Max",
                    "policies": [
                        {"type": "Pods", "value": 4, "periodSeconds": 15},
                        {"type": "Percent", "value": 100, "periodSeconds": 15}
                    ]
                }),
            ),
        );
        b.insert(
            "scaleDown".into(),
            merge_scaling_rules(
                down.as_ref(),
                json!({
                    "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]
                }),
            ),
        );
    }
    if let Some(st) = child_or_create(o, "status") {
        default_val(st, "desiredReplicas", json!(0));
        if !st.contains_key("currentMetrics") {
            st.insert("currentMetrics".into(), Value::Null);
        }
    }
}

fn merge_scaling_rules(from: Option<&Value>, mut defaults: Value) -> Value {
    if let (Some(Value::Object(f)), Some(d)) = (from, defaults.as_object_mut()) {
        for k in ["selectPolicy", "stabilizationWindowSeconds", "policies"] {
            if let Some(v) = f.get(k).filter(|v| !v.is_null()) {
                d.insert(k.into(), v.clone());
            }
        }
    }
    defaults
}

fn default_role_binding(o: &mut Obj) {
    if let Some(rr) = child_or_create(o, "roleRef") {
        default_str(rr, "apiGroup", "rbac.authorization.k8s.io");
    }
    each_obj(o, "subjects", |s| {
        if is_unset_str(s.get("apiGroup")) && matches!(get_str(s, "kind"), "User" | "Group") {
            s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
        }
    });
}

fn default_network_policy(o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    child_or_create(spec, "podSelector");
    if is_empty_coll(spec.get("policyTypes")) {
        let mut types = vec![json!("Ingress")];
        if !is_empty_coll(spec.get("egress")) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
    for dir in ["ingress", "egress"] {
        each_obj(spec, dir, |rule| {
            each_obj(rule, "ports", |p| default_val(p, "protocol", json!("TCP")))
        });
    }
}

fn default_webhook(w: &mut Obj, mutating: bool) {
    default_val(w, "failurePolicy", json!("Fail"));
    default_val(w, "matchPolicy", json!("Equivalent"));
    default_val(w, "namespaceSelector", json!({}));
    default_val(w, "objectSelector", json!({}));
    default_val(w, "timeoutSeconds", json!(10));
    if mutating {
        default_val(w, "reinvocationPolicy", json!("Never"));
    }
    each_obj(w, "rules", |r| default_val(r, "scope", json!("*")));
    if let Some(svc) = child(w, "clientConfig").and_then(|c| child(c, "service")) {
        default_val(svc, "port", json!(443));
    }
}

fn default_crd(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        if let Some(names) = child_or_create(spec, "names") {
            let kind = get_str(names, "kind").to_string();
            if is_unset_str(names.get("singular")) && !kind.is_empty() {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if is_unset_str(names.get("listKind")) && !kind.is_empty() {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
        if let Some(conv) = child_or_create(spec, "conversion") {
            default_str(conv, "strategy", "None");
            if let Some(svc) = child(conv, "webhook")
                .and_then(|w| child(w, "clientConfig"))
                .and_then(|c| child(c, "service"))
            {
                default_val(svc, "port", json!(443));
            }
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        if !st.contains_key("conditions") {
            st.insert("conditions".into(), Value::Null);
        }
        if let Some(an) = child_or_create(st, "acceptedNames") {
            default_val(an, "plural", json!(""));
            default_val(an, "kind", json!(""));
        }
        default_val(st, "storedVersions", Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn reference_dir() -> Option<PathBuf> {
        let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
            println!("skipped: RKCM_APISERVER_REFERENCE is not set");
            return None;
        };
        let p = PathBuf::from(dir);
        if p.is_dir() {
            Some(p)
        } else {
            println!(
                "skipping: apiserver reference directory {} not found",
                p.display()
            );
            None
        }
    }

    fn strip_server_metadata(v: &mut Value) {
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
                "generation",
                "generateName",
            ] {
                meta.remove(k);
            }
        }
    }

    fn group_version(api_version: &str) -> (String, String) {
        match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        }
    }

    #[test]
    fn reference_creates_match() {
        let Some(dir) = reference_dir() else { return };
        let mut checked = 0;
        for n in 24..=50 {
            let prefix = format!("{n:03}-");
            let Some(path) = std::fs::read_dir(&dir)
                .ok()
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .and_then(|f| f.to_str())
                        .is_some_and(|f| f.starts_with(&prefix))
                })
            else {
                continue;
            };
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let rec: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let mut req = rec["request"]["body"].clone();
            let resp = rec["response"]["body"].clone();
            if resp["kind"] == "Status" || req.is_null() {
                continue;
            }
            let (g, v) = group_version(req["apiVersion"].as_str().unwrap_or(""));
            let kind = req["kind"].as_str().unwrap_or("").to_string();
            apply_defaults(&g, &v, &kind, &mut req);
            after_defaulting(&g, &kind, &mut req, true);
            prepare_for_create(&g, &v, &kind, &mut req, "");
            if kind == "Pod" {
                let vol = resp["spec"]["volumes"][0]["name"].as_str().unwrap_or("");
                let suffix = vol.trim_start_matches("kube-api-access-").to_string();
                admit_pod_service_account(&mut req, &suffix);
            }
            if kind == "Job" {
                let uid = resp["metadata"]["uid"].as_str().unwrap_or("").to_string();
                job_selector_and_labels(&mut req, &uid);
            }
            let mut got = req;
            let mut want = resp;
            strip_server_metadata(&mut got);
            strip_server_metadata(&mut want);
            // The generated name is the server's job, as is the PV's transition time.
            if let Some(m) = got.get_mut("metadata").and_then(Value::as_object_mut) {
                if let Some(name) = want["metadata"]["name"].as_str() {
                    m.insert("name".into(), json!(name));
                }
            }
            if kind == "Service" && got["spec"].get("clusterIP").is_none() {
                // the allocator's job, not defaulting
                got["spec"]["clusterIP"] = want["spec"]["clusterIP"].clone();
                got["spec"]["clusterIPs"] = want["spec"]["clusterIPs"].clone();
            }
            if kind == "PersistentVolume" {
                if let (Some(g), Some(w)) = (got.get_mut("status"), want.get("status")) {
                    g["lastPhaseTransitionTime"] = w["lastPhaseTransitionTime"].clone();
                }
            }
            assert_eq!(
                got,
                want,
                "{}:\n got: {}\nwant: {}",
                path.display(),
                serde_json::to_string(&got).unwrap_or_default(),
                serde_json::to_string(&want).unwrap_or_default()
            );
            checked += 1;
        }
        assert!(checked >= 20, "only {checked} reference files checked");
    }

    #[test]
    fn qos_classes() {
        let best = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(pod_qos_class(&best), "BestEffort");
        let burst = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}});
        assert_eq!(pod_qos_class(&burst), "Burstable");
        let guaranteed = json!({"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}}
        ]}});
        assert_eq!(pod_qos_class(&guaranteed), "Guaranteed");
        // limits only: requests are defaulted from limits, so the pod is Guaranteed
        let mut limits_only = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        apply_defaults("", "v1", "Pod", &mut limits_only);
        assert_eq!(limits_only["status"]["qosClass"], "Guaranteed");
        assert_eq!(
            limits_only["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1"
        );
        // one container without memory limit -> Burstable
        let partial = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}
        ]}});
        assert_eq!(pod_qos_class(&partial), "Burstable");
        // zero requests are ignored
        let zero = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0"}}}]}});
        assert_eq!(pod_qos_class(&zero), "BestEffort");
        // other resources do not count
        let eph = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}});
        assert_eq!(pod_qos_class(&eph), "BestEffort");
    }

    #[test]
    fn pull_policies() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(
            image_pull_policy("registry.example.com:5000/team/app"),
            "Always"
        );
        assert_eq!(
            image_pull_policy("registry.example.com:5000/team/app:v2"),
            "IfNotPresent"
        );
        assert_eq!(
            image_pull_policy(
                "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            ),
            "IfNotPresent"
        );
        assert_eq!(image_pull_policy("Nginx"), "IfNotPresent"); // does not parse
        assert_eq!(image_pull_policy(""), "IfNotPresent");
    }

    #[test]
    fn wrong_types_are_tolerated() {
        for (g, v, k) in [
            ("", "v1", "Pod"),
            ("apps", "v1", "Deployment"),
            ("batch", "v1", "Job"),
            ("batch", "v1", "CronJob"),
            ("", "v1", "Service"),
            ("apps", "v1", "StatefulSet"),
            ("", "v1", "Secret"),
            ("", "v1", "Node"),
            ("autoscaling", "v2", "HorizontalPodAutoscaler"),
            ("", "v1", "LimitRange"),
        ] {
            for bad in [
                json!(5),
                json!({"spec": 5}),
                json!({"spec": {"template": 3, "containers": "x"}}),
                json!({"spec": {"template": {"spec": {"containers": [1, {"ports": 4, "resources": 2}]}}}}),
                json!({"metadata": 1, "spec": {"containers": [{"resources": {"limits": 7}}], "tolerations": 3}}),
                json!({"stringData": 5, "spec": {"ports": [{"port": "x"}], "selector": 1}}),
            ] {
                let mut b = bad.clone();
                apply_defaults(g, v, k, &mut b);
                prepare_for_create(g, v, k, &mut b, "now");
                admit_pod_service_account(&mut b, "abcde");
                job_selector_and_labels(&mut b, "uid");
            }
        }
    }

    #[test]
    fn service_account_admission_respects_opt_out_and_existing_mounts() {
        let mut pod =
            json!({"spec": {"automountServiceAccountToken": false, "containers": [{"name": "c"}]}});
        admit_pod_service_account(&mut pod, "abcde");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert!(pod["spec"].get("volumes").is_none());
        let mut pod = json!({"spec": {"serviceAccountName": "builder", "containers": [
            {"name": "a", "volumeMounts": [{"name": "x", "mountPath": SERVICE_ACCOUNT_MOUNT_PATH}]},
            {"name": "b"}], "initContainers": [{"name": "i"}]}});
        admit_pod_service_account(&mut pod, "abcde");
        assert_eq!(pod["spec"]["serviceAccount"], "builder");
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"][0]["name"],
            "kube-api-access-abcde"
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["volumeMounts"][0]["readOnly"],
            true
        );
        assert_eq!(pod["spec"]["volumes"][0]["projected"]["defaultMode"], 420);
        let sa =
            json!({"automountServiceAccountToken": false, "imagePullSecrets": [{"name": "reg"}]});
        let mut pod = json!({"spec": {"containers": [{"name": "c"}]}});
        admit_pod_service_account_with(&mut pod, "abcde", Some(&sa));
        assert!(pod["spec"].get("volumes").is_none());
        assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "reg"}]));
    }

    #[test]
    fn workload_details() {
        let mut job = json!({"spec": {"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 3,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        apply_defaults("batch", "v1", "Job", &mut job);
        assert_eq!(job["spec"]["backoffLimit"], 2147483647);
        assert_eq!(job["spec"]["parallelism"], 1);
        assert_eq!(job["spec"]["podReplacementPolicy"], "Failed");
        assert_eq!(
            job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );

        let mut svc = json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 443, "targetPort": "https"}]}});
        apply_defaults("", "v1", "Service", &mut svc);
        assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(
            svc["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], "https");

        let mut headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
        apply_defaults("", "v1", "Service", &mut headless);
        // IP families are the service storage's, after defaulting (and field ownership).
        assert!(headless["spec"].get("ipFamilies").is_none());
        after_defaulting("", "Service", &mut headless, true);
        assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));

        let mut ext = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
        apply_defaults("", "v1", "Service", &mut ext);
        after_defaulting("", "Service", &mut ext, true);
        assert!(ext["spec"].get("ipFamilies").is_none());
        assert!(ext["spec"].get("internalTrafficPolicy").is_none());

        let mut pod = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "busybox",
            "ports": [{"containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": 8080}}, "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x"}}]}});
        apply_defaults("", "v1", "Pod", &mut pod);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["ports"][0]["hostPort"], 8080);
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/");
        assert_eq!(c["livenessProbe"]["periodSeconds"], 10);
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["spec"]["volumes"][1]["secret"]["defaultMode"], 420);

        let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [
            {"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]});
        apply_defaults("rbac.authorization.k8s.io", "v1", "RoleBinding", &mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert!(rb["subjects"][1].get("apiGroup").is_none());

        let ds_old = json!({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "1"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let mut ds_new = json!({"metadata": {}, "spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}});
        prepare_for_update("apps", "v1", "DaemonSet", &mut ds_new, &ds_old);
        assert_eq!(
            ds_new["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
            "2"
        );
        let mut same = ds_old.clone();
        prepare_for_update("apps", "v1", "DaemonSet", &mut same, &ds_old);
        assert_eq!(
            same["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
            "1"
        );
    }

    #[test]
    fn base64() {
        assert_eq!(base64_encode(b"v"), "dg==");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_encode(b"abc"), "YWJj");
        assert_eq!(base64_encode(b""), "");
    }
}
