//! Pod specs (volumes, containers, tolerations), pod templates, and Pod create and update.

use super::formats::{is_dns1123_label, is_env_var_name, is_valid_port_name, is_valid_port_num};
use super::helpers::{arr, child, idx, int_of, present, q, sem_eq, str_of, Errs};
use super::meta::{validate_annotations, validate_labels};
use super::{is_dns1123_subdomain, is_label_value, is_qualified_name};
use serde_json::{Map, Value};
use std::collections::HashSet;

// ---------------------------------------------------------------------------------------
// Pod specs
// ---------------------------------------------------------------------------------------

/// The volume source fields, in the order upstream's validation checks them.
pub(crate) const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
];

/// Validates `spec.volumes`; returns the names of the valid volumes.
fn validate_volumes(e: &mut Errs, vols: Option<&Value>, path: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in arr(vols).iter().enumerate() {
        let p = idx(path, i);
        let mut el = Errs::default();
        let sources: Vec<&&str> = VOLUME_SOURCES
            .iter()
            .filter(|s| present(v.get(**s)))
            .collect();
        if sources.is_empty() {
            el.required(&p, "must specify a volume type");
        }
        for s in sources.iter().skip(1) {
            el.forbidden(&child(&p, s), "may not specify more than 1 volume type");
        }
        let name = str_of(v.get("name"));
        let np = child(&p, "name");
        if name.is_empty() {
            el.required(&np, "");
        } else {
            el.invalid_msgs(&np, name, is_dns1123_label(name));
        }
        if names.contains(name) {
            el.duplicate(&np, &q(name));
        }
        if el.0.is_empty() {
            names.insert(name.to_string());
        } else {
            e.0.extend(el.0);
        }
    }
    names
}

fn validate_container_ports(e: &mut Errs, ports: Option<&Value>, path: &str) {
    let mut names = HashSet::new();
    for (i, p) in arr(ports).iter().enumerate() {
        let ip = idx(path, i);
        let name = str_of(p.get("name"));
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                e.invalid_msgs(&child(&ip, "name"), name, msgs);
            } else if !names.insert(name.to_string()) {
                e.duplicate(&child(&ip, "name"), &q(name));
            }
        }
        match int_of(p.get("containerPort")) {
            None | Some(0) => e.required(&child(&ip, "containerPort"), ""),
            Some(n) => {
                for m in is_valid_port_num(n) {
                    e.invalid(&child(&ip, "containerPort"), &n.to_string(), &m);
                }
            }
        }
        if let Some(h) = int_of(p.get("hostPort")).filter(|h| *h != 0) {
            for m in is_valid_port_num(h) {
                e.invalid(&child(&ip, "hostPort"), &h.to_string(), &m);
            }
        }
        validate_protocol(e, p.get("protocol"), &child(&ip, "protocol"));
    }
}

pub(super) fn validate_protocol(e: &mut Errs, proto: Option<&Value>, path: &str) {
    let proto = str_of(proto);
    if !proto.is_empty() && !matches!(proto, "TCP" | "UDP" | "SCTP") {
        e.not_supported(path, &q(proto), &["SCTP", "TCP", "UDP"]);
    }
}

fn validate_container(e: &mut Errs, c: &Value, volumes: &HashSet<String>, path: &str) {
    let name = str_of(c.get("name"));
    let np = child(path, "name");
    if name.is_empty() {
        e.required(&np, "");
    } else {
        e.invalid_msgs(&np, name, is_dns1123_label(name));
    }
    if str_of(c.get("image")).is_empty() {
        e.required(&child(path, "image"), "");
    }
    let tmp = str_of(c.get("terminationMessagePolicy"));
    if !tmp.is_empty() && !matches!(tmp, "File" | "FallbackToLogsOnError") {
        e.not_supported(
            &child(path, "terminationMessagePolicy"),
            &q(tmp),
            &["File", "FallbackToLogsOnError"],
        );
    }
    validate_container_ports(e, c.get("ports"), &child(path, "ports"));
    for (i, ev) in arr(c.get("env")).iter().enumerate() {
        let p = child(&idx(&child(path, "env"), i), "name");
        let n = str_of(ev.get("name"));
        if n.is_empty() {
            e.required(&p, "");
        } else {
            e.invalid_msgs(&p, n, is_env_var_name(n));
        }
    }
    let mut mount_points = HashSet::new();
    for (i, m) in arr(c.get("volumeMounts")).iter().enumerate() {
        let p = idx(&child(path, "volumeMounts"), i);
        let mname = str_of(m.get("name"));
        if mname.is_empty() {
            e.required(&child(&p, "name"), "");
        }
        if !volumes.contains(mname) {
            e.not_found(&child(&p, "name"), &q(mname));
        }
        let mp = str_of(m.get("mountPath"));
        if mp.is_empty() {
            e.required(&child(&p, "mountPath"), "");
        }
        if !mount_points.insert(mp.to_string()) {
            e.invalid(&child(&p, "mountPath"), &q(mp), "must be unique");
        }
    }
    let pull = str_of(c.get("imagePullPolicy"));
    if !pull.is_empty() && !matches!(pull, "Always" | "IfNotPresent" | "Never") {
        e.not_supported(
            &child(path, "imagePullPolicy"),
            &q(pull),
            &["Always", "IfNotPresent", "Never"],
        );
    }
}

fn validate_containers(
    e: &mut Errs,
    list: Option<&Value>,
    volumes: &HashSet<String>,
    path: &str,
    names: &mut HashSet<String>,
    required: bool,
) {
    let items = arr(list);
    if items.is_empty() && required {
        e.required(path, "");
        return;
    }
    for (i, c) in items.iter().enumerate() {
        let p = idx(path, i);
        validate_container(e, c, volumes, &p);
        let name = str_of(c.get("name"));
        if !names.insert(name.to_string()) {
            e.duplicate(&child(&p, "name"), &q(name));
        }
    }
}

pub(super) fn validate_taint_effect(e: &mut Errs, effect: &str, allow_empty: bool, path: &str) {
    if effect.is_empty() {
        if !allow_empty {
            e.required(path, "");
        }
        return;
    }
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        e.not_supported(
            path,
            &q(effect),
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
    }
}

fn validate_tolerations(e: &mut Errs, tols: Option<&Value>, path: &str) {
    for (i, t) in arr(tols).iter().enumerate() {
        let p = idx(path, i);
        let k = str_of(t.get("key"));
        let op = str_of(t.get("operator"));
        let value = str_of(t.get("value"));
        let effect = str_of(t.get("effect"));
        if !k.is_empty() {
            e.invalid_msgs(&child(&p, "key"), k, is_qualified_name(k));
        }
        if k.is_empty() && op != "Exists" {
            e.invalid(&child(&p, "operator"), &q(op), "operator must be Exists when `key` is empty, which means \"match all values and all keys\"");
        }
        if present(t.get("tolerationSeconds")) && effect != "NoExecute" {
            e.invalid(
                &child(&p, "effect"),
                &q(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            );
        }
        match op {
            "Equal" | "" => {
                let errs = is_label_value(value);
                if !errs.is_empty() {
                    e.invalid(&child(&p, "operator"), &q(value), &errs.join(";"));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    let rendered = crate::go_value::go_syntax("core.Toleration", Some(t));
                    e.invalid(
                        &child(&p, "operator"),
                        &rendered,
                        "value must be empty when `operator` is 'Exists'",
                    );
                }
            }
            _ => e.not_supported(&child(&p, "operator"), &q(op), &["Equal", "Exists"]),
        }
        validate_taint_effect(e, effect, true, &child(&p, "effect"));
    }
}

/// `ValidatePodSpec`: the checks shared by Pods and every pod template.
fn validate_pod_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let empty = Value::Object(Map::new());
    let spec = spec.filter(|s| s.is_object()).unwrap_or(&empty);
    let vols = validate_volumes(e, spec.get("volumes"), &child(path, "volumes"));
    let mut names = HashSet::new();
    validate_containers(
        e,
        spec.get("containers"),
        &vols,
        &child(path, "containers"),
        &mut names,
        true,
    );
    validate_containers(
        e,
        spec.get("initContainers"),
        &vols,
        &child(path, "initContainers"),
        &mut names,
        false,
    );
    let rp = str_of(spec.get("restartPolicy"));
    if !rp.is_empty() && !matches!(rp, "Always" | "OnFailure" | "Never") {
        e.not_supported(
            &child(path, "restartPolicy"),
            &q(rp),
            &["Always", "OnFailure", "Never"],
        );
    }
    let dns = str_of(spec.get("dnsPolicy"));
    if !dns.is_empty()
        && !matches!(
            dns,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        e.not_supported(
            &child(path, "dnsPolicy"),
            &q(dns),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        );
    }
    validate_labels(e, spec.get("nodeSelector"), &child(path, "nodeSelector"));
    let sa = str_of(spec.get("serviceAccountName"));
    if !sa.is_empty() {
        e.invalid_msgs(
            &child(path, "serviceAccountName"),
            sa,
            is_dns1123_subdomain(sa),
        );
    }
    let node = str_of(spec.get("nodeName"));
    if !node.is_empty() {
        e.invalid_msgs(&child(path, "nodeName"), node, is_dns1123_subdomain(node));
    }
    if let Some(ads) =
        int_of(spec.get("activeDeadlineSeconds")).filter(|a| !(1..=i64::from(i32::MAX)).contains(a))
    {
        e.invalid(
            &child(path, "activeDeadlineSeconds"),
            &ads.to_string(),
            "must be between 1 and 2147483647, inclusive",
        );
    }
    for f in ["hostname", "subdomain"] {
        let v = str_of(spec.get(f));
        if !v.is_empty() {
            e.invalid_msgs(&child(path, f), v, is_dns1123_label(v));
        }
    }
    validate_tolerations(e, spec.get("tolerations"), &child(path, "tolerations"));
}

/// `ValidatePodTemplateSpec` (note upstream's label path omits `metadata`).
pub(super) fn validate_pod_template(e: &mut Errs, tmpl: Option<&Value>, path: &str) {
    let meta = tmpl.and_then(|t| t.get("metadata"));
    validate_labels(
        e,
        meta.and_then(|m| m.get("labels")),
        &child(path, "labels"),
    );
    validate_annotations(
        e,
        meta.and_then(|m| m.get("annotations")),
        &child(path, "annotations"),
    );
    let spec = tmpl.and_then(|t| t.get("spec"));
    validate_pod_spec(e, spec, &child(path, "spec"));
    if !arr(spec.and_then(|s| s.get("ephemeralContainers"))).is_empty() {
        e.forbidden(
            &child(path, "spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        );
    }
}

pub(super) fn template_labels(spec: Option<&Value>) -> Option<&Value> {
    spec.and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
}

pub(super) fn template_restart_policy(spec: Option<&Value>) -> &str {
    // Defaulting sets Always when absent.
    match str_of(
        spec.and_then(|s| s.get("template"))
            .and_then(|t| t.get("spec"))
            .and_then(|s| s.get("restartPolicy")),
    ) {
        "" => "Always",
        rp => rp,
    }
}

pub(super) fn template_has_deadline(spec: Option<&Value>) -> bool {
    present(
        spec.and_then(|s| s.get("template"))
            .and_then(|t| t.get("spec"))
            .and_then(|s| s.get("activeDeadlineSeconds")),
    )
}

pub(super) fn nonneg(e: &mut Errs, v: Option<&Value>, path: &str) {
    if let Some(n) = int_of(v).filter(|n| *n < 0) {
        e.invalid(path, &n.to_string(), "must be greater than or equal to 0");
    }
}
// ---------------------------------------------------------------------------------------
// core
// ---------------------------------------------------------------------------------------

pub(super) fn validate_pod_create(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    validate_pod_spec(e, spec, "spec");
    if !arr(spec.and_then(|s| s.get("ephemeralContainers"))).is_empty() {
        e.forbidden("spec.ephemeralContainers", "cannot be set on create");
    }
    if !str_of(spec.and_then(|s| s.get("nodeName"))).is_empty()
        && !arr(spec.and_then(|s| s.get("schedulingGates"))).is_empty()
    {
        e.forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        );
    }
    for list in ["containers", "initContainers"] {
        for (i, c) in arr(spec.and_then(|s| s.get(list))).iter().enumerate() {
            let image = str_of(c.get("image"));
            if image.trim() != image {
                e.invalid(
                    &format!("spec.{list}[{i}].image"),
                    &q(image),
                    "must not have leading or trailing whitespace",
                );
            }
        }
    }
}

pub(super) const POD_UPDATE_MSG: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub(super) fn validate_pod_update(e: &mut Errs, new: &Value, old: &Value) {
    let empty = Value::Object(Map::new());
    let ns = new.get("spec").filter(|s| s.is_object()).unwrap_or(&empty);
    let os = old.get("spec").filter(|s| s.is_object()).unwrap_or(&empty);
    validate_pod_spec(e, Some(ns), "spec");
    for list in ["containers", "initContainers"] {
        let nc = arr(ns.get(list));
        let oc = arr(os.get(list));
        if nc.len() != oc.len() {
            e.forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            );
            return;
        }
        for (i, c) in nc.iter().enumerate() {
            let image = str_of(c.get("image"));
            if image.is_empty() {
                e.required(&format!("spec.{list}[{i}].image"), "");
            }
            if image.trim() != image {
                e.invalid(
                    &format!("spec.{list}[{i}].image"),
                    &q(image),
                    "must not have leading or trailing whitespace",
                );
            }
        }
    }
    match (
        int_of(ns.get("activeDeadlineSeconds")),
        int_of(os.get("activeDeadlineSeconds")),
    ) {
        (Some(n), old_ads) => {
            if !(0..=i64::from(i32::MAX)).contains(&n) {
                e.invalid(
                    "spec.activeDeadlineSeconds",
                    &n.to_string(),
                    "must be between 0 and 2147483647, inclusive",
                );
                return;
            }
            if old_ads.is_some_and(|o| o < n) {
                e.invalid(
                    "spec.activeDeadlineSeconds",
                    &n.to_string(),
                    "must be less than or equal to previous value",
                );
                return;
            }
        }
        (None, Some(_)) => e.invalid(
            "spec.activeDeadlineSeconds",
            &q("null"),
            "must not update from a positive integer to nil value",
        ),
        (None, None) => {}
    }
    // Tolerations may only be added (existing ones kept; tolerationSeconds of NoExecute
    // ones may only shrink — approximated by "every old toleration is still present").
    let new_tols = arr(ns.get("tolerations"));
    for (i, t) in arr(os.get("tolerations")).iter().enumerate() {
        let same_key = |n: &&Value| {
            ["key", "operator", "value", "effect"]
                .iter()
                .all(|k| str_of(n.get(*k)) == str_of(t.get(*k)))
        };
        match new_tols.iter().find(same_key) {
            None => e.forbidden(
                &format!("spec.tolerations[{i}]"),
                "existing toleration can not be modified except its tolerationSeconds",
            ),
            Some(n) => {
                let (a, b) = (
                    int_of(n.get("tolerationSeconds")),
                    int_of(t.get("tolerationSeconds")),
                );
                if matches!((a, b), (Some(a), Some(b)) if a > b && b > 0) {
                    e.forbidden(
                        &format!("spec.tolerations[{i}].tolerationSeconds"),
                        "only decreasing tolerationSeconds is allowed",
                    );
                }
            }
        }
    }
    // Scheduling gates may only be removed.
    let old_gates: Vec<&str> = arr(os.get("schedulingGates"))
        .iter()
        .map(|g| str_of(g.get("name")))
        .collect();
    for (i, g) in arr(ns.get("schedulingGates")).iter().enumerate() {
        if !old_gates.contains(&str_of(g.get("name"))) {
            e.forbidden(
                &format!("spec.schedulingGates[{i}]"),
                "only deletion is allowed, but found new scheduling gate",
            );
        }
    }
    // Everything else must stay as it was.
    let mut munged = ns.clone();
    for list in ["containers", "initContainers"] {
        if let (Some(m), Some(o)) = (
            munged.get_mut(list).and_then(Value::as_array_mut),
            os.get(list).and_then(Value::as_array),
        ) {
            for (c, oc) in m.iter_mut().zip(o) {
                if let Some(c) = c.as_object_mut() {
                    match oc.get("image") {
                        Some(img) => c.insert("image".into(), img.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    // The mutable fields take the old values, as upstream's munged spec does, so the diff
    // shows them as unchanged.
    if let (Some(m), Some(o)) = (munged.as_object_mut(), os.as_object()) {
        let mut keep_old = vec!["activeDeadlineSeconds", "schedulingGates", "tolerations"];
        let old_tgps = int_of(o.get("terminationGracePeriodSeconds"));
        if old_tgps.is_some_and(|t| t < 0)
            && int_of(m.get("terminationGracePeriodSeconds")) == Some(1)
        {
            keep_old.push("terminationGracePeriodSeconds");
        }
        for f in keep_old {
            match o.get(f) {
                Some(v) => m.insert(f.to_string(), v.clone()),
                None => m.remove(f),
            };
        }
    }
    if !sem_eq(Some(&munged), Some(os)) {
        // Upstream appends go-cmp's diff of the internal specs.
        let diff = crate::go_value::cmp_diff("core.PodSpec", os, &munged);
        e.forbidden("spec", &format!("{POD_UPDATE_MSG}\n{diff}"));
    }
}
