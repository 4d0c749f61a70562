//! Workload kinds: ReplicationController, the apps group and the batch group.

use super::core_kinds::default_pvc;
use super::pods::default_pod_template;
use super::strategy::copy_template_labels_to_job;
use super::{
    child, child_or_create, default_str, default_val, each_obj, get_str, is_empty_coll, is_unset,
    is_unset_str, template_metadata, Obj,
};
use serde_json::{json, Value};

pub(super) fn default_replication_controller(o: &mut Obj) {
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

pub(super) fn default_deployment(o: &mut Obj) {
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

pub(super) fn default_replica_set(o: &mut Obj) {
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

pub(super) fn default_stateful_set(o: &mut Obj) {
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

pub(super) fn default_daemon_set(o: &mut Obj) {
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

pub(super) fn default_job(o: &mut Obj) {
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

pub(super) fn default_cron_job(o: &mut Obj) {
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
