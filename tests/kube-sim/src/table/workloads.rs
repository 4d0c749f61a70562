//! Row printers of the workload kinds: Pod, PodTemplate, PodDisruptionBudget,
//! ReplicationController, the apps group (ReplicaSet, Deployment, StatefulSet, DaemonSet,
//! ControllerRevision) and the batch group (Job, CronJob).

use super::fields::{
    age, at, containers, flag, format_label_selector, format_labels, human, int, int_or_string,
    list, name, opt_int, or, replicas, s, selector_string, since, st, time,
};
use super::Now;
use serde_json::{json, Value};

pub(super) fn pod_row(p: &Value, now: Now) -> Vec<Value> {
    let init_specs = list(p, "spec.initContainers");
    // Upstream keys init containers by name; the last one of a name wins.
    let sidecar = |n: &str| {
        init_specs
            .iter()
            .rev()
            .find(|c| st(c, "name") == n)
            .is_some_and(|c| st(c, "restartPolicy") == "Always")
    };
    let total = list(p, "spec.containers").len()
        + init_specs
            .iter()
            .filter(|c| st(c, "restartPolicy") == "Always")
            .count();
    let mut ready = 0;
    let (mut restarts, mut sidecar_restarts) = (0i64, 0i64);
    let (mut last_restart, mut sidecar_last_restart): (Option<Now>, Option<Now>) = (None, None);
    let mut reason = match st(p, "status.reason") {
        "" => st(p, "status.phase").to_string(),
        r => r.to_string(),
    };
    if list(p, "status.conditions")
        .iter()
        .any(|c| st(c, "type") == "PodScheduled" && st(c, "reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }

    let mut initializing = false;
    for (i, c) in list(p, "status.initContainerStatuses").iter().enumerate() {
        restarts += int(c, "restartCount");
        let finished = time(at(c, "lastState.terminated.finishedAt"));
        later(&mut last_restart, finished);
        let is_sidecar = sidecar(st(c, "name"));
        if is_sidecar {
            sidecar_restarts += int(c, "restartCount");
            later(&mut sidecar_last_restart, finished);
        }
        let terminated = at(c, "state.terminated");
        if terminated.is_some() && int(c, "state.terminated.exitCode") == 0 {
            continue;
        }
        if is_sidecar && flag(c, "started") {
            if flag(c, "ready") {
                ready += 1;
            }
            continue;
        }
        let waiting = st(c, "state.waiting.reason");
        reason = match terminated {
            Some(t) => match (st(t, "reason"), int(t, "signal")) {
                ("", 0) => format!("Init:ExitCode:{}", int(t, "exitCode")),
                ("", sig) => format!("Init:Signal:{sig}"),
                (r, _) => format!("Init:{r}"),
            },
            None if !waiting.is_empty() && waiting != "PodInitializing" => {
                format!("Init:{waiting}")
            }
            None => format!("Init:{}/{}", i, init_specs.len()),
        };
        initializing = true;
        break;
    }

    let initialized = list(p, "status.conditions")
        .iter()
        .find(|c| st(c, "type") == "Initialized")
        .is_some_and(|c| st(c, "status") == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut has_running = false;
        for c in list(p, "status.containerStatuses").iter().rev() {
            restarts += int(c, "restartCount");
            later(
                &mut last_restart,
                time(at(c, "lastState.terminated.finishedAt")),
            );
            let waiting = st(c, "state.waiting.reason");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = at(c, "state.terminated") {
                reason = match (st(t, "reason"), int(t, "signal")) {
                    ("", 0) => format!("ExitCode:{}", int(t, "exitCode")),
                    ("", sig) => format!("Signal:{sig}"),
                    (r, _) => r.to_string(),
                };
            } else if flag(c, "ready") && at(c, "state.running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = list(p, "status.conditions")
                .iter()
                .any(|c| st(c, "type") == "Ready" && st(c, "status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    if at(p, "metadata.deletionTimestamp").is_some() {
        reason = if st(p, "status.reason") == "NodeLost" {
            "Unknown"
        } else {
            "Terminating"
        }
        .into();
    }

    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human(now - t)),
        _ => restarts.to_string(),
    };
    // The v1 -> internal conversion puts status.podIP first in podIPs.
    let ip = match st(p, "status.podIP") {
        "" => list(p, "status.podIPs").first().map_or("", |x| st(x, "ip")),
        ip => ip,
    };
    let gates = list(p, "spec.readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = list(p, "status.conditions");
        let met = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .find(|c| st(c, "type") == st(g, "conditionType"))
                    .is_some_and(|c| st(c, "status") == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        s(name(p)),
        s(format!("{ready}/{total}")),
        s(reason),
        s(restarts),
        age(p, now),
        s(or(ip, "<none>")),
        s(or(st(p, "spec.nodeName"), "<none>")),
        s(or(st(p, "status.nominatedNodeName"), "<none>")),
        s(gates),
    ]
}

fn later(slot: &mut Option<Now>, t: Option<Now>) {
    if let Some(t) = t {
        if slot.is_none_or(|cur| cur < t) {
            *slot = Some(t);
        }
    }
}

pub(super) fn pod_template_row(o: &Value, _now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "template.spec.containers");
    vec![
        s(name(o)),
        names,
        images,
        s(format_labels(at(o, "template.metadata.labels"))),
    ]
}

pub(super) fn pdb_row(o: &Value, now: Now) -> Vec<Value> {
    let bound = |path: &str| int_or_string(at(o, path)).unwrap_or_else(|| "N/A".into());
    vec![
        s(name(o)),
        s(bound("spec.minAvailable")),
        s(bound("spec.maxUnavailable")),
        json!(int(o, "status.disruptionsAllowed")),
        age(o, now),
    ]
}

pub(super) fn rc_row(o: &Value, now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "spec.template.spec.containers");
    vec![
        s(name(o)),
        json!(replicas(o)),
        json!(int(o, "status.replicas")),
        json!(int(o, "status.readyReplicas")),
        age(o, now),
        names,
        images,
        s(format_labels(at(o, "spec.selector"))),
    ]
}

pub(super) fn rs_row(o: &Value, now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "spec.template.spec.containers");
    vec![
        s(name(o)),
        json!(replicas(o)),
        json!(int(o, "status.replicas")),
        json!(int(o, "status.readyReplicas")),
        age(o, now),
        names,
        images,
        s(format_label_selector(at(o, "spec.selector"))),
    ]
}

pub(super) fn deployment_row(o: &Value, now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "spec.template.spec.containers");
    let selector = selector_string(at(o, "spec.selector")).unwrap_or_else(|| "<invalid>".into());
    vec![
        s(name(o)),
        s(format!(
            "{}/{}",
            int(o, "status.readyReplicas"),
            replicas(o)
        )),
        json!(int(o, "status.updatedReplicas")),
        json!(int(o, "status.availableReplicas")),
        age(o, now),
        names,
        images,
        s(selector),
    ]
}

pub(super) fn statefulset_row(o: &Value, now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "spec.template.spec.containers");
    vec![
        s(name(o)),
        s(format!(
            "{}/{}",
            int(o, "status.readyReplicas"),
            replicas(o)
        )),
        age(o, now),
        names,
        images,
    ]
}

pub(super) fn daemonset_row(o: &Value, now: Now) -> Vec<Value> {
    let (names, images) = containers(o, "spec.template.spec.containers");
    let mut cells = vec![s(name(o))];
    for f in [
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    ] {
        cells.push(json!(at(o, "status").map_or(0, |status| int(status, f))));
    }
    cells.extend([
        s(format_labels(at(o, "spec.template.spec.nodeSelector"))),
        age(o, now),
        names,
        images,
        s(format_label_selector(at(o, "spec.selector"))),
    ]);
    cells
}

pub(super) fn controller_revision_row(o: &Value, now: Now) -> Vec<Value> {
    let owner = list(o, "metadata.ownerReferences")
        .iter()
        .find(|r| flag(r, "controller"));
    let controller = match owner {
        None => "<none>".to_string(),
        Some(r) => {
            let group = st(r, "apiVersion").split_once('/').map_or("", |(g, _)| g);
            let (kind, owner_name) = (st(r, "kind"), st(r, "name"));
            match (group, kind) {
                ("", "") => owner_name.to_string(),
                ("", k) => format!("{}/{owner_name}", k.to_lowercase()),
                (g, k) => format!("{}.{}/{owner_name}", k.to_lowercase(), g.to_lowercase()),
            }
        }
    };
    vec![
        s(name(o)),
        s(controller),
        json!(int(o, "revision")),
        age(o, now),
    ]
}

pub(super) fn job_row(o: &Value, now: Now) -> Vec<Value> {
    let succeeded = int(o, "status.succeeded");
    // Defaulting turns "neither completions nor parallelism" into completions 1.
    let completions = match opt_int(o, "spec.completions") {
        Some(c) => format!("{succeeded}/{c}"),
        None => match opt_int(o, "spec.parallelism").unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time(at(o, "status.startTime")),
        time(at(o, "status.completionTime")),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human(now - start),
        (Some(start), Some(end)) => human(end - start),
    };
    let (names, images) = containers(o, "spec.template.spec.containers");
    vec![
        s(name(o)),
        s(completions),
        s(duration),
        age(o, now),
        names,
        images,
        s(format_label_selector(at(o, "spec.selector"))),
    ]
}

pub(super) fn cronjob_row(o: &Value, now: Now) -> Vec<Value> {
    let suspend = if flag(o, "spec.suspend") {
        "True"
    } else {
        "False"
    };
    let last = match at(o, "status.lastScheduleTime") {
        Some(t) => since(Some(t), now),
        None => "<none>".into(),
    };
    let (names, images) = containers(o, "spec.jobTemplate.spec.template.spec.containers");
    vec![
        s(name(o)),
        s(st(o, "spec.schedule")),
        s(suspend),
        json!(list(o, "status.active").len()),
        s(last),
        age(o, now),
        names,
        images,
        s(format_label_selector(at(
            o,
            "spec.jobTemplate.spec.selector",
        ))),
    ]
}
