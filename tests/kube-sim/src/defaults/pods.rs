//! Pods and pod templates: the core/v1 pod, container, probe and volume defaulters, the
//! Priority and DefaultTolerationSeconds admission plugins, image pull policy and QoS class.

use super::core_kinds::default_pvc_spec;
use super::{
    child, child_or_create, default_num, default_str, default_val, each_obj, get_str,
    is_empty_coll, is_unset, is_unset_num, is_unset_str, template_metadata, Obj,
};
use crate::validation::VOLUME_SOURCES;
use rkcm_gocompat::Quantity;
use serde_json::{json, Value};
use std::sync::OnceLock;

pub(super) fn default_pod(o: &mut Obj) {
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
pub(super) fn default_pod_tolerations(spec: &mut Obj) {
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
pub(super) fn default_pod_priority(spec: &mut Obj) {
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

pub(super) fn default_pod_template(t: &mut Obj) {
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

pub(super) fn default_rbd(r: &mut Obj) {
    default_str(r, "pool", "rbd");
    default_str(r, "user", "admin");
    default_str(r, "keyring", "/etc/ceph/keyring");
}

pub(super) fn default_azure_disk(a: &mut Obj) {
    default_str(a, "cachingMode", "ReadWrite");
    default_str(a, "fsType", "ext4");
    default_val(a, "readOnly", json!(false));
    default_str(a, "kind", "Shared");
}

pub(super) fn default_scale_io(s: &mut Obj) {
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
