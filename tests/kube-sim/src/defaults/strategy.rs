//! Admission plugins and create/update strategy steps: ServiceAccount admission (the
//! projected API-access volume), the Job selector and labels, and `prepare_for_create` /
//! `prepare_for_update`.

use super::{
    child_or_create, default_val, get_str, is_empty_coll, is_unset, is_unset_str, meta_name, Obj,
    SERVICE_ACCOUNT_MOUNT_PATH,
};
use serde_json::{json, Value};

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
/// selector names the uid) and after [`apply_defaults`](super::apply_defaults). Unless
/// `spec.manualSelector` is true it adds `batch.kubernetes.io/controller-uid`,
/// `batch.kubernetes.io/job-name` and the legacy `controller-uid` / `job-name` labels to the pod template (keeping values the user
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

pub(super) fn copy_template_labels_to_job(j: &mut Obj) {
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
/// [`apply_defaults`](super::apply_defaults) on create only. `now` is the RFC 3339 creation
/// time (used for a PersistentVolume's `status.lastPhaseTransitionTime`).
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
        (crate::admission_policies::GROUP, kind) => {
            crate::admission_policies::prepare_for_create(kind, obj)
        }
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
