//! The other core/v1 kinds: Service (and its IP-family fields), Namespace, Secret,
//! PersistentVolume, PersistentVolumeClaim, Node, LimitRange and Event.

use super::pods::{
    default_azure_disk, default_pod_priority, default_pod_tolerations, default_rbd,
    default_scale_io,
};
use super::{
    child, child_or_create, default_str, default_val, each_obj, get_str, is_empty_coll, is_unset,
    meta_name, Obj,
};
use serde_json::{json, Value};

pub(super) fn default_service(o: &mut Obj) {
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

pub(super) fn default_namespace(o: &mut Obj) {
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

pub(super) fn default_secret(o: &mut Obj) {
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

pub(super) fn default_persistent_volume(o: &mut Obj) {
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

pub(super) fn default_pvc_spec(spec: &mut Obj) {
    default_val(spec, "volumeMode", json!("Filesystem"));
    default_val(spec, "resources", json!({}));
}

pub(super) fn default_pvc(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        default_pvc_spec(spec);
    }
    if let Some(st) = child_or_create(o, "status") {
        default_str(st, "phase", "Pending");
    }
}

pub(super) fn default_node(o: &mut Obj) {
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

pub(super) fn default_limit_range(o: &mut Obj) {
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

pub(super) fn default_core_event(o: &mut Obj) {
    child_or_create(o, "involvedObject");
    child_or_create(o, "source");
    default_val(o, "firstTimestamp", Value::Null);
    default_val(o, "lastTimestamp", Value::Null);
    default_val(o, "eventTime", Value::Null);
    default_val(o, "reportingComponent", json!(""));
    default_val(o, "reportingInstance", json!(""));
}
