//! The pod status the simulated kubelet's status manager writes: container and init
//! container statuses, phase, the conditions kubelet owns, addresses and QoS class. Pure.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::lifecycle::{crash_backoff, forced_unready, readiness_delay};
use super::{Exit, Millis, PodRuntime, Timing};
use crate::nodesim::quantity;

pub(super) fn time(ms: Millis) -> Time {
    Time(Timestamp::from_second(ms.div_euclid(1000)).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn terminated(exit: &Exit, container_id: &str) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.code,
            reason: Some(if exit.code == 0 { "Completed" } else { "Error" }.into()),
            started_at: exit.started.map(time),
            finished_at: Some(time(exit.finished)),
            container_id: Some(container_id.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..Default::default()
    }
}

fn running(since: Millis) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(time(since)),
        }),
        ..Default::default()
    }
}

/// The conditions the kubelet owns; any other (PodScheduled, DisruptionTarget, readiness
/// gates) is someone else's and stays as it is.
const OWN_CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// The ids the simulated runtime gives a pod's containers: `sim://<uid prefix>-<name>-<run>`.
struct ContainerIds(String);

impl ContainerIds {
    fn of(pod: &Pod) -> ContainerIds {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        ContainerIds(uid.chars().filter(|c| *c != '-').take(12).collect())
    }

    fn id(&self, name: &str, run: i32) -> String {
        format!("sim://{}-{name}-{run}", self.0)
    }
}

/// The pod has init containers that run to completion (sidecars, with `restartPolicy:
/// Always`, do not count).
fn has_init_containers(spec: &PodSpec) -> bool {
    spec.init_containers
        .iter()
        .flatten()
        .any(|c| c.restart_policy.as_deref() != Some("Always"))
}

/// The pod's status as kubelet would write it, given its runtime at `now`. Fields node-sim
/// does not own are kept from the pod's current status; a condition whose status did not
/// change keeps its lastTransitionTime.
pub fn build_status(
    pod: &Pod,
    rt: &PodRuntime,
    host_ip: &str,
    now: Millis,
    timing: &Timing,
) -> PodStatus {
    let mut st = pod.status.clone().unwrap_or_default();
    let observed = st.conditions.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let ids = ContainerIds::of(pod);
    let (containers, unready) = container_statuses(pod, &spec, rt, now, timing, &ids);
    let init_statuses = init_container_statuses(&spec, rt, &ids);

    st.phase = Some(phase(rt).into());
    st.conditions = Some(merge_conditions(
        &observed,
        own_conditions(&spec, &observed, rt, &unready, now),
    ));
    set_addresses(&mut st, &spec, rt, host_ip);
    if st.qos_class.is_none() {
        st.qos_class = Some(qos_class(pod).into());
    }
    st.container_statuses = Some(containers);
    st.init_container_statuses = (!init_statuses.is_empty()).then_some(init_statuses);
    st
}

/// The statuses of the pod's containers, and the names of those not ready.
fn container_statuses(
    pod: &Pod,
    spec: &PodSpec,
    rt: &PodRuntime,
    now: Millis,
    timing: &Timing,
    ids: &ContainerIds,
) -> (Vec<ContainerStatus>, Vec<String>) {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let has_init = has_init_containers(spec);
    let mut containers = Vec::new();
    let mut unready = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let (state, ready) = if let Some(exit) = &rt.terminal {
            (terminated(exit, &ids.id(&c.name, rt.restarts)), false)
        } else if let Some(s) = rt.started {
            let ready = now >= s.saturating_add(readiness_delay(pod, i)) && !forced_unready(pod);
            (running(s), ready)
        } else if rt.last_exit.is_some() {
            let wait = crash_backoff(timing.restart_backoff, rt.restarts) / 1000;
            let message = format!(
                "back-off {wait}s restarting failed container={} pod={}_{}({uid})",
                c.name,
                pod.name_any(),
                pod.namespace().unwrap_or_default()
            );
            (waiting("CrashLoopBackOff", Some(message)), false)
        } else {
            let reason = if has_init {
                "PodInitializing"
            } else {
                "ContainerCreating"
            };
            (waiting(reason, None), false)
        };
        if !ready {
            unready.push(c.name.clone());
        }
        containers.push(ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: format!("sim://{}", c.image.as_deref().unwrap_or("")),
            container_id: (rt.first_started.is_some()).then(|| ids.id(&c.name, rt.restarts)),
            ready,
            started: Some(state.running.is_some()),
            restart_count: rt.restarts,
            last_state: rt
                .last_exit
                .map(|e| terminated(&e, &ids.id(&c.name, rt.restarts - 1))),
            state: Some(state),
            ..Default::default()
        });
    }
    (containers, unready)
}

/// The statuses of the pod's init containers: done (or, for a sidecar, running) once the
/// containers have first started.
fn init_container_statuses(
    spec: &PodSpec,
    rt: &PodRuntime,
    ids: &ContainerIds,
) -> Vec<ContainerStatus> {
    let mut init_statuses = Vec::new();
    for c in spec.init_containers.iter().flatten() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        let state = match (rt.first_started, &rt.terminal) {
            (None, None) => waiting("PodInitializing", None),
            (None, Some(_)) => waiting("PodInitializing", None),
            (Some(first), Some(exit)) if sidecar => terminated(
                &Exit {
                    started: Some(first),
                    finished: exit.finished,
                    code: exit.code,
                },
                &ids.id(&c.name, 0),
            ),
            (Some(first), _) if sidecar => running(first),
            (Some(first), _) => terminated(
                &Exit {
                    started: Some(first),
                    finished: first,
                    code: 0,
                },
                &ids.id(&c.name, 0),
            ),
        };
        init_statuses.push(ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: format!("sim://{}", c.image.as_deref().unwrap_or("")),
            container_id: rt.first_started.map(|_| ids.id(&c.name, 0)),
            ready: sidecar && state.running.is_some()
                || state.terminated.as_ref().is_some_and(|t| t.exit_code == 0) && !sidecar,
            started: Some(state.running.is_some()),
            restart_count: 0,
            state: Some(state),
            ..Default::default()
        });
    }
    init_statuses
}

fn phase(rt: &PodRuntime) -> &'static str {
    match (&rt.terminal, rt.first_started) {
        (Some(e), _) if e.code == 0 => "Succeeded",
        (Some(_), _) => "Failed",
        (None, Some(_)) => "Running",
        (None, None) => "Pending",
    }
}

/// A condition as of `now`, keeping the lastTransitionTime (and observedGeneration) of an
/// observed one of the same type and status.
fn condition(
    observed: &[PodCondition],
    now: &Time,
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let prev = observed
        .iter()
        .find(|c| c.type_ == type_ && c.status == status);
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.map(String::from),
        message,
        last_transition_time: Some(
            prev.and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone()),
        ),
        last_probe_time: None,
        observed_generation: prev.and_then(|c| c.observed_generation),
    }
}

/// The conditions the kubelet writes (PodScheduled too, when nobody has yet).
fn own_conditions(
    spec: &PodSpec,
    observed: &[PodCondition],
    rt: &PodRuntime,
    unready: &[String],
    now: Millis,
) -> Vec<PodCondition> {
    let now_t = time(now);
    let cond = |type_: &str, ok: bool, reason: Option<&str>, message: Option<String>| {
        condition(observed, &now_t, type_, ok, reason, message)
    };
    let done = rt.terminal.is_some();
    let initialized = !has_init_containers(spec) || rt.first_started.is_some();
    let containers_ready = !done && unready.is_empty();
    let unready_message = || format!("containers with unready status: [{}]", unready.join(" "));
    let mut conditions: Vec<PodCondition> = Vec::new();
    conditions.push(cond(
        "PodReadyToStartContainers",
        rt.first_started.is_some() && !done,
        None,
        None,
    ));
    conditions.push(if initialized {
        cond("Initialized", true, None, None)
    } else {
        let names: Vec<String> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        cond(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: [{}]",
                names.join(" ")
            )),
        )
    });
    conditions.push(if done {
        cond("ContainersReady", false, Some("PodCompleted"), None)
    } else if containers_ready {
        cond("ContainersReady", true, None, None)
    } else {
        cond(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(unready_message()),
        )
    });
    let (ready, ready_reason, ready_message) = if done {
        (false, Some("PodCompleted"), None)
    } else if !containers_ready {
        (false, Some("ContainersNotReady"), Some(unready_message()))
    } else if let Some(gate) = missing_readiness_gate(spec, observed) {
        (
            false,
            Some("ReadinessGatesNotReady"),
            Some(format!(
                "corresponding condition of pod readiness gate \"{gate}\" does not exist."
            )),
        )
    } else {
        (true, None, None)
    };
    conditions.push(cond("Ready", ready, ready_reason, ready_message));
    if !observed.iter().any(|c| c.type_ == "PodScheduled") {
        conditions.push(cond("PodScheduled", true, None, None));
    }
    conditions
}

/// The first readiness gate whose condition is not True.
fn missing_readiness_gate(spec: &PodSpec, observed: &[PodCondition]) -> Option<String> {
    spec.readiness_gates
        .iter()
        .flatten()
        .map(|g| g.condition_type.clone())
        .find(|t| !observed.iter().any(|c| &c.type_ == t && c.status == "True"))
}

/// The observed conditions someone else owns, then ours (each type once).
fn merge_conditions(observed: &[PodCondition], ours: Vec<PodCondition>) -> Vec<PodCondition> {
    let mut merged: Vec<PodCondition> = observed
        .iter()
        .filter(|c| !OWN_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for c in ours {
        if !merged.iter().any(|m| m.type_ == c.type_) {
            merged.push(c);
        }
    }
    merged
}

/// hostIP(s) always; podIP(s) once the sandbox runs (the node's own with hostNetwork);
/// startTime from admission, when not yet set.
fn set_addresses(st: &mut PodStatus, spec: &PodSpec, rt: &PodRuntime, host_ip: &str) {
    st.host_ip = Some(host_ip.into());
    st.host_ips = Some(vec![HostIP { ip: host_ip.into() }]);
    let pod_ip = if spec.host_network == Some(true) {
        Some(host_ip.to_string())
    } else {
        rt.ip.map(|ip| ip.to_string())
    };
    if rt.first_started.is_some() {
        if let Some(ip) = pod_ip {
            st.pod_ips = Some(vec![PodIP { ip: ip.clone() }]);
            st.pod_ip = Some(ip);
        }
    }
    if st.start_time.is_none() {
        st.start_time = Some(time(rt.admitted));
    }
}

/// The pod's QoS class, as the API server computes it on create (kept when already set).
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = &pod.spec else {
        return "BestEffort";
    };
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut any = false;
    let mut guaranteed = true;
    for c in all {
        let res = c.resources.clone().unwrap_or_default();
        let requests = res.requests.unwrap_or_default();
        let limits = res.limits.unwrap_or_default();
        if !requests.is_empty() || !limits.is_empty() {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = limits.get(r).and_then(|q| quantity::milli(&q.0));
            let q = requests.get(r).and_then(|q| quantity::milli(&q.0)).or(l);
            if l.is_none() || q != l {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}
