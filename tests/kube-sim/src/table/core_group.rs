//! Row printers of the other core-group kinds (Node, Event and its events.k8s.io twin,
//! Namespace, Secret, ServiceAccount, ConfigMap, PersistentVolume, PersistentVolumeClaim,
//! ResourceQuota).

use super::fields::{
    age, annotation, at, flag, human, int, list, map_len, name, or, quantity, s, since, st, time,
};
use super::Now;
use serde_json::{json, Value};

pub(super) fn node_row(n: &Value, now: Now) -> Vec<Value> {
    // Upstream keys conditions by type; the last Ready condition wins.
    let ready = list(n, "status.conditions")
        .iter()
        .rev()
        .find(|c| st(c, "type") == "Ready");
    let mut status = vec![match ready {
        Some(c) if st(c, "status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if flag(n, "spec.unschedulable") {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = at(n, "metadata.labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role),
            Some(_) => None,
            None if k == "kubernetes.io/role" => v.as_str().filter(|v| !v.is_empty()),
            None => None,
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let address = |ty: &str| {
        let found = list(n, "status.addresses")
            .iter()
            .find(|a| st(a, "type") == ty);
        found.map_or("<none>", |a| st(a, "address")).to_string()
    };
    let info = |f: &str| {
        or(
            at(n, "status.nodeInfo").map_or("", |i| st(i, f)),
            "<unknown>",
        )
        .to_string()
    };
    vec![
        s(name(n)),
        s(status.join(",")),
        s(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        age(n, now),
        s(at(n, "status.nodeInfo").map_or("", |i| st(i, "kubeletVersion"))),
        s(address("InternalIP")),
        s(address("ExternalIP")),
        s(info("osImage")),
        s(info("kernelVersion")),
        s(info("containerRuntimeVersion")),
    ]
}

pub(super) fn event_row(e: &Value, now: Now) -> Vec<Value> {
    let first = match time(at(e, "firstTimestamp")) {
        Some(t) => human(now - t),
        None => since(at(e, "eventTime"), now),
    };
    let mut last = match time(at(e, "lastTimestamp")) {
        Some(t) => human(now - t),
        None => first.clone(),
    };
    let mut count = int(e, "count");
    if let Some(series) = at(e, "series") {
        last = since(at(series, "lastObservedTime"), now);
        count = int(series, "count");
    } else if count == 0 {
        count = 1;
    }
    let kind = st(e, "involvedObject.kind").to_lowercase();
    let target = match st(e, "involvedObject.name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = or(st(e, "source.component"), st(e, "reportingComponent"));
    let source = match or(st(e, "source.host"), st(e, "reportingInstance")) {
        "" => component.to_string(),
        host => format!("{component}, {host}"),
    };
    vec![
        s(last),
        s(st(e, "type")),
        s(st(e, "reason")),
        s(target),
        s(st(e, "involvedObject.fieldPath")),
        s(source),
        s(st(e, "message").trim()),
        s(first),
        json!(count),
        s(name(e)),
    ]
}

/// events.k8s.io/v1 Events are the same objects as core Events, under other field names.
pub(super) fn events_v1_row(e: &Value, now: Now) -> Vec<Value> {
    let f = |k: &str| e.get(k).cloned().unwrap_or(Value::Null);
    let core = json!({
        "metadata": f("metadata"), "involvedObject": f("regarding"), "message": f("note"),
        "source": f("deprecatedSource"), "firstTimestamp": f("deprecatedFirstTimestamp"),
        "lastTimestamp": f("deprecatedLastTimestamp"), "count": f("deprecatedCount"),
        "eventTime": f("eventTime"), "series": f("series"), "reportingComponent": f("reportingController"),
        "reportingInstance": f("reportingInstance"), "type": f("type"), "reason": f("reason"),
    });
    event_row(&core, now)
}

pub(super) fn namespace_row(o: &Value, now: Now) -> Vec<Value> {
    vec![
        s(name(o)),
        s(or(st(o, "status.phase"), "Active")),
        age(o, now),
    ]
}

pub(super) fn secret_row(o: &Value, now: Now) -> Vec<Value> {
    vec![
        s(name(o)),
        s(or(st(o, "type"), "Opaque")),
        json!(map_len(o, "data")),
        age(o, now),
    ]
}

pub(super) fn service_account_row(o: &Value, now: Now) -> Vec<Value> {
    vec![s(name(o)), json!(list(o, "secrets").len()), age(o, now)]
}

pub(super) fn configmap_row(o: &Value, now: Now) -> Vec<Value> {
    vec![
        s(name(o)),
        json!(map_len(o, "data") + map_len(o, "binaryData")),
        age(o, now),
    ]
}

pub(super) fn pv_row(o: &Value, now: Now) -> Vec<Value> {
    let claim = at(o, "spec.claimRef").map_or(String::new(), |c| {
        format!("{}/{}", st(c, "namespace"), st(c, "name"))
    });
    let phase = if at(o, "metadata.deletionTimestamp").is_some() {
        "Terminating"
    } else {
        or(st(o, "status.phase"), "Pending")
    };
    let class = annotation(o, "volume.beta.kubernetes.io/storage-class")
        .unwrap_or(st(o, "spec.storageClassName"));
    vec![
        s(name(o)),
        s(quantity(
            at(o, "spec.capacity").and_then(|c| c.get("storage")),
            "0",
        )),
        s(access_modes(list(o, "spec.accessModes"))),
        s(or(st(o, "spec.persistentVolumeReclaimPolicy"), "Retain")),
        s(phase),
        s(claim),
        s(class),
        s(at(o, "spec.volumeAttributesClassName")
            .and_then(Value::as_str)
            .unwrap_or("<unset>")),
        s(st(o, "status.reason")),
        age(o, now),
        s(or(st(o, "spec.volumeMode"), "Filesystem")),
    ]
}

pub(super) fn pvc_row(o: &Value, now: Now) -> Vec<Value> {
    let phase = if at(o, "metadata.deletionTimestamp").is_some() {
        "Terminating"
    } else {
        or(st(o, "status.phase"), "Pending")
    };
    let volume = st(o, "spec.volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(at(o, "status.capacity").and_then(|c| c.get("storage")), "0"),
            access_modes(list(o, "status.accessModes")),
        )
    };
    let class = annotation(o, "volume.beta.kubernetes.io/storage-class")
        .unwrap_or(st(o, "spec.storageClassName"));
    vec![
        s(name(o)),
        s(phase),
        s(volume),
        s(capacity),
        s(modes),
        s(class),
        s(at(o, "spec.volumeAttributesClassName")
            .and_then(Value::as_str)
            .unwrap_or("<unset>")),
        age(o, now),
        s(or(st(o, "spec.volumeMode"), "Filesystem")),
    ]
}

fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|x| x.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

pub(super) fn resource_quota_row(o: &Value, now: Now) -> Vec<Value> {
    let hard = at(o, "status.hard").and_then(Value::as_object);
    let mut keys: Vec<&String> = hard.map(|h| h.keys().collect()).unwrap_or_default();
    keys.sort();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for k in keys {
        let used = quantity(at(o, "status.used").and_then(|u| u.get(k.as_str())), "0");
        let limit = quantity(hard.and_then(|h| h.get(k.as_str())), "0");
        let entry = format!("{k}: {used}/{limit}");
        let mut pieces = k.split('.');
        if pieces.next() == Some("limits") && pieces.next().is_some() {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    vec![
        s(name(o)),
        age(o, now),
        s(requests.join(", ")),
        s(limits.join(", ")),
    ]
}
