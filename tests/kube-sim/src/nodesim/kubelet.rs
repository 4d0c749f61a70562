//! The pod half of the simulated kubelet: every pod bound to one of node-sim's nodes goes
//! Pending → Running after a start delay, with the conditions kubelet's status manager writes
//! (PodReadyToStartContainers, Initialized, ContainersReady, Ready; PodScheduled kept),
//! containerStatuses and initContainerStatuses, podIP from the node's podCIDR, hostIP and
//! startTime; a container is ready after its readinessProbe's initialDelaySeconds, and
//! unready while the pod carries `sim.rkcm.io/ready: "false"` (as a failing readiness probe
//! makes it; removing the annotation, or any other value, makes it ready again). A pod being
//! deleted stays ready while its containers run out their grace period, as kubelet keeps
//! probing readiness during termination (only liveness and startup probes stop).
//!
//! Containers exit when the pod says so — annotations `sim.rkcm.io/exit-after: 3s` and
//! `sim.rkcm.io/exit-code: 1` — and are restarted or not by the pod's restartPolicy (with
//! CrashLoopBackOff in between); a pod marked for deletion keeps running for its grace period,
//! then is stopped and deleted with gracePeriodSeconds=0, as kubelet does. Pods of a killed
//! node are left as the API server has them; a partitioned node's are not written until the
//! partition is lifted.
//!
//! A pod whose claims are missing, not Bound, bound to a volume that is not theirs, or (for
//! a generic ephemeral volume) not owned by the pod stays ContainerCreating too, looked at
//! again every few seconds; kubelet 1.29 logs why and posts no event (its "Unable to
//! attach or mount volumes" event is skipped when the wait times out).
//!
//! A pod whose attachable CSI volumes are not yet attached to its node (reported in the
//! node's `volumesInUse` and `volumesAttached`, see [`super::attach`]) waits the same way.
//!
//! A pod whose ConfigMap, Secret or projected volume sources name an object that does not
//! exist (and is not `optional: true`) stays ContainerCreating, with a FailedMount warning
//! worded as kubelet's, and is retried every few seconds until the object is there, as the
//! `kube-api-access-*` volume makes every pod wait for its namespace's `kube-root-ca.crt`.
//!
//! [`advance`] (the lifecycle state machine) and [`build_status`] are pure; [`run`] feeds
//! them from the pod watch through kube-runtime's `applier` and writes the results.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, PersistentVolume, PersistentVolumeClaim, Pod,
    PodCondition, PodIP, PodStatus, Secret,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{applier, Action, Config as ApplierConfig};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;

use super::{nodes, quantity, Shared};

/// How long the containers run before they exit (a duration: `3s`, `1m`, `500ms`).
pub const EXIT_AFTER: &str = "sim.rkcm.io/exit-after";
/// How long the containers take to stop once the pod is deleted (a duration), as a process
/// that exits on SIGTERM: they stop then, or at the end of the grace period if that is
/// sooner. Absent, they run until killed at the end of the grace period.
pub const STOP_AFTER: &str = "sim.rkcm.io/stop-after";
/// The exit code they exit with (default 0).
pub const EXIT_CODE: &str = "sim.rkcm.io/exit-code";
/// From admission on the node to running containers, overriding node-sim's start delay.
pub const START_DELAY: &str = "sim.rkcm.io/start-delay";
/// `"false"`: the pod's running containers fail their readiness (Ready and ContainersReady
/// False, "containers with unready status: [...]"); absent or any other value: they pass it.
pub const READY: &str = "sim.rkcm.io/ready";

/// Milliseconds since the Unix epoch: the kubelet's clock.
pub type Millis = i64;

/// How a run of the pod's containers ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub started: Option<Millis>,
    pub finished: Millis,
    pub code: i32,
}

/// What the kubelet knows of one pod beyond what the API shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodRuntime {
    pub node: String,
    pub admitted: Millis,
    pub ip: Option<Ipv4Addr>,
    pub first_started: Option<Millis>,
    /// The current run of the containers.
    pub started: Option<Millis>,
    pub restarts: i32,
    pub last_exit: Option<Exit>,
    pub terminal: Option<Exit>,
    /// API failures in a row (for the retry backoff).
    pub failures: u32,
    /// The Pulled/Created/Started events have been posted.
    pub started_reported: bool,
    /// The Killing events have been posted.
    pub killing_reported: bool,
    /// Why the pod's volumes cannot be set up yet (a ConfigMap or Secret it needs is
    /// missing): its containers wait until they can.
    pub mount_failure: Option<String>,
    /// When the last FailedMount event was posted.
    pub mount_event_at: Option<Millis>,
    /// When the volumes could be set up after having failed: the containers start no
    /// earlier.
    pub mounted_at: Option<Millis>,
    /// Why a claim the pod uses keeps it waiting (missing, not bound, not the pod's), as
    /// kubelet's volume manager words it; kubelet 1.29 posts no event for it.
    pub claim_wait: Option<String>,
}

/// The pod's timings, from its annotations (an unreadable annotation is ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub start_delay: Millis,
    pub exit_after: Option<Millis>,
    pub exit_code: i32,
    pub restart_backoff: Millis,
    /// [`STOP_AFTER`].
    pub stop_after: Option<Millis>,
}

impl Timing {
    pub fn of(pod: &Pod, default_start_delay: Duration, restart_backoff: Duration) -> Timing {
        let ann = pod.metadata.annotations.as_ref();
        let get = |k: &str| ann.and_then(|a| a.get(k)).map(String::as_str);
        let ms = |d: Duration| d.as_millis().min(i64::MAX as u128) as i64;
        Timing {
            start_delay: ms(get(START_DELAY)
                .and_then(quantity::duration)
                .unwrap_or(default_start_delay)),
            exit_after: get(EXIT_AFTER).and_then(quantity::duration).map(ms),
            exit_code: get(EXIT_CODE)
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(0),
            restart_backoff: ms(restart_backoff),
            stop_after: get(STOP_AFTER).and_then(quantity::duration).map(ms),
        }
    }
}

/// The wait before the n-th restart: kubelet's CrashLoopBackOff, doubling from the base up
/// to 5 minutes.
pub fn crash_backoff(base: Millis, restarts: i32) -> Millis {
    let doublings = (restarts - 1).clamp(0, 30) as u32;
    base.saturating_mul(1i64 << doublings.min(20)).min(300_000)
}

fn readiness_delay(pod: &Pod, container: usize) -> Millis {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.get(container))
        .and_then(|c| c.readiness_probe.as_ref())
        .and_then(|p| p.initial_delay_seconds)
        .unwrap_or(0)
        .max(0) as Millis
        * 1000
}

/// The pod asks for its containers to fail their readiness ([`READY`]).
fn forced_unready(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(READY))
        .is_some_and(|v| v == "false")
}

fn deletion_at(pod: &Pod) -> Option<Millis> {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond())
}

/// When the containers of a pod deleted with grace until `deadline` stop: at the deadline,
/// or [`STOP_AFTER`] after the deletion was asked for (the deadline less the grace period)
/// if that is sooner.
fn stop_at(pod: &Pod, deadline: Millis, timing: &Timing) -> Millis {
    let grace = pod
        .metadata
        .deletion_grace_period_seconds
        .unwrap_or(0)
        .max(0);
    match timing.stop_after {
        Some(after) => deadline
            .saturating_sub(grace.saturating_mul(1000))
            .saturating_add(after)
            .min(deadline),
        None => deadline,
    }
}

/// Move the pod's runtime forward to `now`; returns when it next has to be looked at.
pub fn advance(pod: &Pod, rt: &mut PodRuntime, now: Millis, timing: &Timing) -> Option<Millis> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let deleting = deletion_at(pod).map(|deadline| stop_at(pod, deadline, timing));
    let mut wake: Option<Millis> = None;
    let mut soon = |t: Millis| wake = Some(wake.map_or(t, |w: Millis| w.min(t)));
    // Each pass moves time forward by at least the restart backoff, so this ends; the bound
    // is a guard against a zero backoff.
    for _ in 0..10_000 {
        if rt.terminal.is_some() {
            break;
        }
        if let Some(del) = deleting {
            match rt.started {
                // Nothing running: stop at once.
                None => {
                    rt.terminal = Some(Exit {
                        started: None,
                        finished: now,
                        code: 137,
                    });
                    break;
                }
                // The containers use their whole grace period, then are killed.
                Some(s) if now >= del => {
                    rt.terminal = Some(Exit {
                        started: Some(s),
                        finished: del,
                        code: 137,
                    });
                    rt.started = None;
                    break;
                }
                Some(_) => soon(del),
            }
        }
        match rt.started {
            None => {
                let at = match rt.last_exit {
                    None => rt
                        .admitted
                        .saturating_add(timing.start_delay)
                        .max(rt.mounted_at.unwrap_or(Millis::MIN)),
                    Some(e) => e
                        .finished
                        .saturating_add(crash_backoff(timing.restart_backoff, rt.restarts)),
                };
                if now < at {
                    soon(at);
                    break;
                }
                rt.started = Some(at);
                rt.first_started.get_or_insert(at);
            }
            Some(s) => {
                if let Some(after) = timing.exit_after {
                    let exit_at = s.saturating_add(after);
                    if now >= exit_at && deleting.is_none_or(|d| exit_at < d) {
                        let exit = Exit {
                            started: Some(s),
                            finished: exit_at,
                            code: timing.exit_code,
                        };
                        rt.started = None;
                        let restart = match policy {
                            "Never" => false,
                            "OnFailure" => exit.code != 0,
                            _ => true,
                        };
                        if restart {
                            rt.restarts += 1;
                            rt.last_exit = Some(exit);
                        } else {
                            rt.terminal = Some(exit);
                        }
                        continue;
                    }
                    if now < exit_at {
                        soon(exit_at);
                    }
                }
                let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
                for i in 0..containers {
                    let ready_at = s.saturating_add(readiness_delay(pod, i));
                    if now < ready_at {
                        soon(ready_at);
                    }
                }
                break;
            }
        }
    }
    wake
}

fn time(ms: Millis) -> Time {
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
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let short_uid: String = uid.chars().filter(|c| *c != '-').take(12).collect();
    let cid = |name: &str, run: i32| format!("sim://{short_uid}-{name}-{run}");
    let has_init = spec
        .init_containers
        .iter()
        .flatten()
        .any(|c| c.restart_policy.as_deref() != Some("Always"));

    let mut containers = Vec::new();
    let mut unready = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let (state, ready) = if let Some(exit) = &rt.terminal {
            (terminated(exit, &cid(&c.name, rt.restarts)), false)
        } else if let Some(s) = rt.started {
            let ready = now >= s.saturating_add(readiness_delay(pod, i)) && !forced_unready(pod);
            (running(s), ready)
        } else if let Some(last) = &rt.last_exit {
            let wait = crash_backoff(timing.restart_backoff, rt.restarts) / 1000;
            let message = format!(
                "back-off {wait}s restarting failed container={} pod={}_{}({uid})",
                c.name,
                pod.name_any(),
                pod.namespace().unwrap_or_default()
            );
            let _ = last;
            (waiting("CrashLoopBackOff", Some(message)), false)
        } else {
            (
                waiting(
                    if has_init {
                        "PodInitializing"
                    } else {
                        "ContainerCreating"
                    },
                    None,
                ),
                false,
            )
        };
        if !ready {
            unready.push(c.name.clone());
        }
        containers.push(ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: format!("sim://{}", c.image.as_deref().unwrap_or("")),
            container_id: (rt.first_started.is_some()).then(|| cid(&c.name, rt.restarts)),
            ready,
            started: Some(state.running.is_some()),
            restart_count: rt.restarts,
            last_state: rt
                .last_exit
                .map(|e| terminated(&e, &cid(&c.name, rt.restarts - 1))),
            state: Some(state),
            ..Default::default()
        });
    }

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
                &cid(&c.name, 0),
            ),
            (Some(first), _) if sidecar => running(first),
            (Some(first), _) => terminated(
                &Exit {
                    started: Some(first),
                    finished: first,
                    code: 0,
                },
                &cid(&c.name, 0),
            ),
        };
        init_statuses.push(ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: format!("sim://{}", c.image.as_deref().unwrap_or("")),
            container_id: rt.first_started.map(|_| cid(&c.name, 0)),
            ready: sidecar && state.running.is_some()
                || state.terminated.as_ref().is_some_and(|t| t.exit_code == 0) && !sidecar,
            started: Some(state.running.is_some()),
            restart_count: 0,
            state: Some(state),
            ..Default::default()
        });
    }

    let phase = match (&rt.terminal, rt.first_started) {
        (Some(e), _) if e.code == 0 => "Succeeded",
        (Some(_), _) => "Failed",
        (None, Some(_)) => "Running",
        (None, None) => "Pending",
    };
    let now_t = time(now);
    let cond =
        |type_: &str, ok: bool, reason: Option<&str>, message: Option<String>| -> PodCondition {
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
                        .unwrap_or_else(|| now_t.clone()),
                ),
                last_probe_time: None,
                observed_generation: prev.and_then(|c| c.observed_generation),
            }
        };
    let done = rt.terminal.is_some();
    let initialized = !has_init || rt.first_started.is_some();
    let containers_ready = !done && unready.is_empty();
    let gates_missing: Vec<String> = spec
        .readiness_gates
        .iter()
        .flatten()
        .map(|g| g.condition_type.clone())
        .filter(|t| !observed.iter().any(|c| &c.type_ == t && c.status == "True"))
        .collect();
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
    let (ready, ready_reason, ready_message) = if done {
        (false, Some("PodCompleted"), None)
    } else if !containers_ready {
        (
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    } else if !gates_missing.is_empty() {
        (
            false,
            Some("ReadinessGatesNotReady"),
            Some(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gates_missing[0]
            )),
        )
    } else {
        (true, None, None)
    };
    conditions.push(if done {
        cond("ContainersReady", false, Some("PodCompleted"), None)
    } else if containers_ready {
        cond("ContainersReady", true, None, None)
    } else {
        cond(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    });
    conditions.push(cond("Ready", ready, ready_reason, ready_message));
    if !observed.iter().any(|c| c.type_ == "PodScheduled") {
        conditions.push(cond("PodScheduled", true, None, None));
    }
    // Conditions someone else owns (PodScheduled, DisruptionTarget, readiness gates) stay.
    let ours = [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ];
    let mut merged: Vec<PodCondition> = observed
        .iter()
        .filter(|c| !ours.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for c in conditions {
        if !merged.iter().any(|m| m.type_ == c.type_) {
            merged.push(c);
        }
    }

    st.phase = Some(phase.into());
    st.conditions = Some(merged);
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
    if st.qos_class.is_none() {
        st.qos_class = Some(qos_class(pod).into());
    }
    st.container_statuses = Some(containers);
    st.init_container_statuses = (!init_statuses.is_empty()).then_some(init_statuses);
    st
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

/// A runtime for a pod found already running (node-sim restarted): take over its status.
pub fn adopt(pod: &Pod, now: Millis) -> PodRuntime {
    let mut rt = PodRuntime {
        admitted: now,
        ..Default::default()
    };
    // A pod found running or deleting was reported by whoever ran it before.
    rt.killing_reported = pod.metadata.deletion_timestamp.is_some();
    let Some(st) = &pod.status else { return rt };
    if let Some(t) = &st.start_time {
        rt.admitted = t.0.as_millisecond();
    }
    rt.ip = st.pod_ip.as_deref().and_then(|ip| ip.parse().ok());
    let first = st.container_statuses.as_ref().and_then(|cs| cs.first());
    rt.restarts = first.map_or(0, |c| c.restart_count);
    let state = first.and_then(|c| c.state.as_ref());
    match st.phase.as_deref() {
        Some(p @ ("Succeeded" | "Failed")) => {
            let t = state.and_then(|s| s.terminated.as_ref());
            rt.first_started = Some(rt.admitted);
            rt.terminal = Some(Exit {
                started: t
                    .and_then(|t| t.started_at.as_ref())
                    .map(|s| s.0.as_millisecond()),
                finished: t
                    .and_then(|t| t.finished_at.as_ref())
                    .map_or(now, |s| s.0.as_millisecond()),
                code: t.map_or(if p == "Succeeded" { 0 } else { 1 }, |t| t.exit_code),
            });
        }
        _ => {
            if let Some(s) = state
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.as_ref())
            {
                rt.started = Some(s.0.as_millisecond());
                rt.first_started = Some(rt.admitted.min(s.0.as_millisecond()));
            }
        }
    }
    rt.started_reported = rt.first_started.is_some();
    rt
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("writing the status of pod {pod}: {source}")]
    Status { pod: String, source: kube::Error },
    #[error("deleting pod {pod}: {source}")]
    Delete { pod: String, source: kube::Error },
    #[error("looking up the volume sources of pod {pod}: {source}")]
    Mount { pod: String, source: kube::Error },
}

#[derive(Default)]
struct State {
    pods: HashMap<String, PodRuntime>,
    /// Host numbers in use, per node (`.2` … `.254` of its podCIDR).
    ips: HashMap<String, BTreeSet<u8>>,
    /// Pods seen during a relist, to forget the ones that vanished.
    relisting: Option<HashSet<String>>,
}

impl State {
    fn allocate(&mut self, network: nodes::PodNetwork, node: &str) -> Option<Ipv4Addr> {
        let used = self.ips.entry(node.into()).or_default();
        // Addresses are known by their last byte: networks are /24 or smaller, or start
        // at a .0.
        let ip = (2u8..=254)
            .filter_map(|h| network.address(h))
            .find(|ip| !used.contains(&ip.octets()[3]))?;
        used.insert(ip.octets()[3]);
        Some(ip)
    }

    fn reserve(&mut self, node: &str, ip: Ipv4Addr) {
        self.ips
            .entry(node.into())
            .or_default()
            .insert(ip.octets()[3]);
    }

    fn release(&mut self, node: &str, ip: Ipv4Addr) {
        if let Some(used) = self.ips.get_mut(node) {
            used.remove(&ip.octets()[3]);
        }
    }

    fn forget(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        if let Some(rt) = self.pods.remove(uid) {
            if let (Some(ip), None) = (rt.ip, rt.terminal) {
                self.release(&rt.node, ip);
            }
        }
    }
}

/// The kubelets of all of node-sim's nodes (one state, keyed by pod uid).
pub struct Kubelet {
    shared: Arc<Shared>,
    state: Mutex<State>,
}

impl Kubelet {
    pub fn new(shared: Arc<Shared>) -> Kubelet {
        Kubelet {
            shared,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn node_of(&self, pod: &Pod) -> Option<String> {
        let node = pod.spec.as_ref()?.node_name.clone()?;
        (self.shared.is_ours(&node) && self.shared.watches_namespace(pod.namespace().as_deref()))
            .then_some(node)
    }

    /// Keep the runtime in step with the watch; say which pods to look at.
    fn observe(&self, event: &watcher::Event<Pod>) -> Vec<ObjectRef<Pod>> {
        let mut st = self.state();
        match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                if let (Some(seen), Some(uid)) = (st.relisting.as_mut(), p.metadata.uid.as_ref()) {
                    seen.insert(uid.clone());
                }
                if self.node_of(p).is_some() {
                    return vec![ObjectRef::from_obj(p)];
                }
            }
            watcher::Event::Delete(p) => st.forget(p),
            watcher::Event::Init => st.relisting = Some(HashSet::new()),
            watcher::Event::InitDone => {
                self.shared
                    .pods_synced
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                if let Some(seen) = st.relisting.take() {
                    let gone: Vec<PodRuntime> = st
                        .pods
                        .iter()
                        .filter(|(uid, _)| !seen.contains(*uid))
                        .map(|(_, rt)| rt.clone())
                        .collect();
                    st.pods.retain(|uid, _| seen.contains(uid));
                    for rt in gone {
                        if let (Some(ip), None) = (rt.ip, rt.terminal) {
                            st.release(&rt.node, ip);
                        }
                    }
                }
                self.shared.scheduler_wake.notify_one();
            }
        }
        Vec::new()
    }
}

/// How often a pod whose volumes cannot be set up is looked at again.
const MOUNT_RETRY: Duration = Duration::from_secs(2);
/// A FailedMount event with an unchanged message is posted again after this long.
const MOUNT_EVENT_REPEAT: Millis = 30_000;

/// The kind of object a volume takes its files from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountKind {
    ConfigMap,
    Secret,
}

/// An object a pod's volume needs before its containers can start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountSource {
    pub volume: String,
    pub kind: MountKind,
    pub name: String,
}

impl MountSource {
    /// kubelet's message when the object is missing.
    pub fn not_found_message(&self) -> String {
        let kind = match self.kind {
            MountKind::ConfigMap => "configmap",
            MountKind::Secret => "secret",
        };
        format!(
            "MountVolume.SetUp failed for volume \"{}\" : {kind} \"{}\" not found",
            self.volume, self.name
        )
    }
}

/// The ConfigMaps and Secrets the pod's volumes need (directly or as projected sources),
/// leaving out those marked `optional: true`.
pub fn required_mount_sources(pod: &Pod) -> Vec<MountSource> {
    let mut sources = Vec::new();
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for volume in volumes {
        let mut need = |kind: MountKind, name: Option<&str>, optional: Option<bool>| {
            if optional != Some(true) {
                sources.push(MountSource {
                    volume: volume.name.clone(),
                    kind,
                    name: name.unwrap_or_default().to_string(),
                });
            }
        };
        if let Some(cm) = &volume.config_map {
            need(MountKind::ConfigMap, Some(cm.name.as_str()), cm.optional);
        }
        if let Some(secret) = &volume.secret {
            need(
                MountKind::Secret,
                secret.secret_name.as_deref(),
                secret.optional,
            );
        }
        let projected = volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten());
        for source in projected {
            if let Some(cm) = &source.config_map {
                need(MountKind::ConfigMap, Some(cm.name.as_str()), cm.optional);
            }
            if let Some(secret) = &source.secret {
                need(
                    MountKind::Secret,
                    Some(secret.name.as_str()),
                    secret.optional,
                );
            }
        }
    }
    sources
}

/// The first of the pod's required volume sources that does not exist, as kubelet words it.
async fn first_mount_failure(
    client: &kube::Client,
    namespace: &str,
    sources: &[MountSource],
) -> Result<Option<String>, kube::Error> {
    for source in sources {
        let found = match source.kind {
            MountKind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_metadata_opt(&source.name)
                .await?
                .is_some(),
            MountKind::Secret => Api::<Secret>::namespaced(client.clone(), namespace)
                .get_metadata_opt(&source.name)
                .await?
                .is_some(),
        };
        if !found {
            return Ok(Some(source.not_found_message()));
        }
    }
    Ok(None)
}

/// Why kubelet's volume manager cannot take one of the pod's claims yet (`None`: it
/// can), given the claim as the API server has it; `Ok` carries the claim's volume name.
pub fn claim_problem(
    pod: &Pod,
    claim_name: &str,
    ephemeral: bool,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<String, String> {
    let ns = pod.namespace().unwrap_or_default();
    let processing = |error: &str| format!("error processing PVC {ns}/{claim_name}: {error}");
    let Some(claim) = claim else {
        return Err(processing(&format!(
            "failed to fetch PVC from API server: persistentvolumeclaims \"{claim_name}\" not found"
        )));
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(processing("PVC is being deleted"));
    }
    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        return Err(processing("PVC is not bound"));
    }
    let volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if volume.is_empty() {
        return Err(processing("PVC has empty pvc.Spec.VolumeName"));
    }
    if ephemeral {
        if let Some(error) = super::volume_binding::ephemeral_owner_error(pod, claim) {
            return Err(error);
        }
    }
    Ok(volume)
}

/// Why kubelet cannot take the volume a bound claim names (`getPVSpec`).
pub fn volume_problem(
    pod: &Pod,
    claim_name: &str,
    claim_uid: Option<&str>,
    volume_name: &str,
    volume: Option<&PersistentVolume>,
) -> Option<String> {
    let ns = pod.namespace().unwrap_or_default();
    let error = match volume {
        None => format!("failed to fetch PV {volume_name} from API server: persistentvolumes \"{volume_name}\" not found"),
        Some(volume) => {
            let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            match claim_ref {
                None => format!("found PV object {volume_name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"),
                Some(r) if r.uid.as_deref() != claim_uid => format!(
                    "found PV object {volume_name} but its pv.Spec.ClaimRef.UID {} does not point to claim.UID {}",
                    r.uid.as_deref().unwrap_or_default(),
                    claim_uid.unwrap_or_default()
                ),
                Some(_) => return None,
            }
        }
    };
    Some(format!("error processing PVC {ns}/{claim_name}: {error}"))
}

/// The first reason one of the pod's claims keeps its containers from starting.
async fn first_claim_problem(
    client: &kube::Client,
    pod: &Pod,
) -> Result<Option<String>, kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for (name, ephemeral) in super::volume_binding::pod_claims(pod) {
        let claim = claims.get_opt(&name).await?;
        let volume_name = match claim_problem(pod, &name, ephemeral, claim.as_ref()) {
            Ok(volume) => volume,
            Err(problem) => return Ok(Some(problem)),
        };
        let volume = volumes.get_opt(&volume_name).await?;
        let uid = claim.as_ref().and_then(|c| c.metadata.uid.as_deref());
        if let Some(problem) = volume_problem(pod, &name, uid, &volume_name, volume.as_ref()) {
            return Ok(Some(problem));
        }
    }
    Ok(None)
}

fn now_millis() -> Millis {
    Timestamp::now().as_millisecond()
}

async fn reconcile(pod: Arc<Pod>, kubelet: Arc<Kubelet>) -> Result<Action, KubeletError> {
    let Some(node) = kubelet.node_of(&pod) else {
        return Ok(Action::await_change());
    };
    let faults = kubelet.shared.faults(&node);
    if faults.killed {
        return Ok(Action::await_change());
    }
    if faults.partitioned {
        // The containers run on, but nothing reaches the API server; the pod is looked
        // at again until the partition is lifted, and then reported as it is by then.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let Some(uid) = pod.metadata.uid.clone() else {
        return Ok(Action::await_change());
    };
    let index = kubelet.shared.node_index(&node).unwrap_or(0);
    let host_ip = nodes::internal_ip(index).to_string();
    let cfg = &kubelet.shared.config;
    let timing = Timing::of(&pod, cfg.start_delay, cfg.restart_backoff);
    let now = now_millis();
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let network = kubelet.shared.pod_network(&node, index);
    let has_ip = kubelet
        .state()
        .pods
        .get(&uid)
        .is_some_and(|rt| rt.ip.is_some());
    if network.is_none() && !host_network && !has_ip && pod.metadata.deletion_timestamp.is_none() {
        // No podCIDR yet (node-ipam has not given one): no pod network, so the sandbox
        // cannot start; look again shortly.
        tracing::debug!(node = %node, pod = %pod.name_any(), "node has no podCIDR yet; pod waits");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let ns = pod.namespace().unwrap_or_default();
    // Volumes are set up when the containers are due to start (and never again once they
    // have run): a missing source keeps them waiting.
    let (due, mount_sources) = {
        let st = kubelet.state();
        let rt = st
            .pods
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| adopt(&pod, now));
        let due = rt.first_started.is_none()
            && rt.terminal.is_none()
            && pod.metadata.deletion_timestamp.is_none()
            && now >= rt.admitted.saturating_add(timing.start_delay);
        if due {
            (true, required_mount_sources(&pod))
        } else {
            (false, Vec::new())
        }
    };
    // Claims first, as kubelet's volume manager cannot even list a volume whose claim is
    // not bound or not the pod's; they are looked at while the containers are due.
    let claim_wait = if !due || super::volume_binding::pod_claims(&pod).is_empty() {
        None
    } else {
        let mount_error = |source: kube::Error| KubeletError::Mount {
            pod: format!("{ns}/{}", pod.name_any()),
            source,
        };
        match first_claim_problem(&kubelet.shared.client, &pod)
            .await
            .map_err(mount_error)?
        {
            Some(problem) => Some(problem),
            // Then the volumes the attach/detach controller attaches.
            None => super::attach::first_attach_problem(&kubelet.shared.client, &pod, &node)
                .await
                .map_err(mount_error)?,
        }
    };
    // Then the resource claims, which must be allocated and reserved for the pod.
    let claim_wait = match claim_wait {
        None if due && super::dra::has_resource_claims(&pod) => {
            super::dra::check(&kubelet.shared.client, &pod, super::dra::Phase::Starting)
                .await
                .map_err(|source| KubeletError::Mount {
                    pod: format!("{ns}/{}", pod.name_any()),
                    source,
                })?
                .err()
        }
        other => other,
    };
    let mount_failure = if mount_sources.is_empty() || claim_wait.is_some() {
        None
    } else {
        first_mount_failure(&kubelet.shared.client, &ns, &mount_sources)
            .await
            .map_err(|source| KubeletError::Mount {
                pod: format!("{ns}/{}", pod.name_any()),
                source,
            })?
    };
    let (status, wake, delete, report) = {
        let mut st = kubelet.state();
        let mut rt = match st.pods.get(&uid) {
            Some(rt) => rt.clone(),
            None => {
                let rt = adopt(&pod, now);
                if let (Some(ip), None) = (rt.ip, rt.terminal) {
                    st.reserve(&node, ip);
                }
                rt
            }
        };
        rt.node = node.clone();
        let was_terminal = rt.terminal.is_some();
        if rt.ip.is_none() && !host_network && rt.terminal.is_none() {
            rt.ip = network.and_then(|network| st.allocate(network, &node));
        }
        let mut report = Vec::new();
        if claim_wait.is_some() && rt.claim_wait != claim_wait {
            tracing::debug!(node = %node, pod = %pod.name_any(), problem = claim_wait.as_deref().unwrap_or_default(), "pod waits for its claims");
        }
        let wake = match (claim_wait, mount_failure) {
            (Some(problem), _) => {
                rt.claim_wait = Some(problem);
                Some(now.saturating_add(MOUNT_RETRY.as_millis() as Millis))
            }
            (None, Some(message)) => {
                let repeat = rt
                    .mount_event_at
                    .is_none_or(|at| now.saturating_sub(at) >= MOUNT_EVENT_REPEAT);
                if cfg.events && (rt.mount_failure.as_ref() != Some(&message) || repeat) {
                    rt.mount_event_at = Some(now);
                    report.push(("Warning", "FailedMount", message.clone()));
                }
                rt.mount_failure = Some(message);
                Some(now.saturating_add(MOUNT_RETRY.as_millis() as Millis))
            }
            (None, None) => {
                if rt.mount_failure.take().is_some() | rt.claim_wait.take().is_some() {
                    rt.mounted_at = Some(now);
                }
                advance(&pod, &mut rt, now, &timing)
            }
        };
        if rt.terminal.is_some() && !was_terminal {
            if let Some(ip) = rt.ip {
                st.release(&node, ip);
            }
        }
        let status = build_status(&pod, &rt, &host_ip, now, &timing);
        let delete = pod.metadata.deletion_timestamp.is_some() && rt.terminal.is_some();
        if cfg.events && rt.first_started.is_some() && !rt.started_reported {
            rt.started_reported = true;
            report.extend(
                started_events(&pod)
                    .into_iter()
                    .map(|(reason, message)| ("Normal", reason, message)),
            );
        }
        if cfg.events
            && pod.metadata.deletion_timestamp.is_some()
            && !rt.killing_reported
            && rt.terminal.is_none()
        {
            rt.killing_reported = true;
            report.extend(containers(&pod).map(|c| {
                (
                    "Normal",
                    "Killing",
                    format!("Stopping container {}", c.name),
                )
            }));
        }
        st.pods.insert(uid.clone(), rt);
        (status, wake, delete, report)
    };
    let api: Api<Pod> = Api::namespaced(kubelet.shared.client.clone(), &ns);
    let name = pod.name_any();
    if pod.status.as_ref() != Some(&status) {
        let patch = json!({"metadata": {"uid": uid}, "status": status});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
            Err(source) => {
                return Err(KubeletError::Status {
                    pod: format!("{ns}/{name}"),
                    source,
                })
            }
        }
    }
    for (type_, reason, message) in report {
        if let Err(e) = super::pod_event(
            &kubelet.shared.client,
            &pod,
            type_,
            reason,
            &message,
            "kubelet",
            Some(&node),
        )
        .await
        {
            tracing::debug!(pod = %name, reason, error = %e, "cannot post a kubelet event");
        }
    }
    if delete {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(source) => {
                return Err(KubeletError::Delete {
                    pod: format!("{ns}/{name}"),
                    source,
                })
            }
        }
    }
    if let Some(rt) = kubelet.state().pods.get_mut(&uid) {
        rt.failures = 0;
    }
    Ok(match wake {
        // A little past the moment, so the whole-second timestamps have moved on too.
        Some(at) => Action::requeue(Duration::from_millis((at - now).max(0) as u64 + 5)),
        None => Action::await_change(),
    })
}

/// The pod's init containers and containers.
fn containers(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::Container> {
    pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

/// What a kubelet reports as it starts a pod's containers (the images are always
/// present on a simulated node).
fn started_events(pod: &Pod) -> Vec<(&'static str, String)> {
    let mut events = Vec::new();
    for c in containers(pod) {
        let image = c.image.as_deref().unwrap_or_default();
        events.push((
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
        ));
        events.push(("Created", format!("Created container {}", c.name)));
        events.push(("Started", format!("Started container {}", c.name)));
    }
    events
}

fn error_policy(pod: Arc<Pod>, error: &KubeletError, kubelet: Arc<Kubelet>) -> Action {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let failures = {
        let mut st = kubelet.state();
        let rt = st.pods.entry(uid).or_default();
        rt.failures += 1;
        rt.failures
    };
    tracing::debug!(%error, failures, "pod update failed; retrying");
    Action::requeue(Duration::from_millis(100u64 << failures.min(8)).min(Duration::from_secs(30)))
}

/// Run the kubelets: `events` is the pod watch after the reflector that fills `store`.
pub async fn run<S>(kubelet: Arc<Kubelet>, store: Store<Pod>, events: S)
where
    S: Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Send + 'static,
{
    let observer = kubelet.clone();
    let queue = events
        .map(move |ev| {
            let refs = match ev {
                Ok(ev) => {
                    observer.shared.scheduler_wake.notify_one();
                    observer.observe(&ev)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "pod watch failed; retrying");
                    Vec::new()
                }
            };
            futures::stream::iter(refs)
        })
        .flatten()
        .map(Ok::<_, Infallible>);
    let concurrency = kubelet.shared.config.pod_concurrency.max(1);
    applier(
        |pod, ctx| Box::pin(reconcile(pod, ctx)),
        error_policy,
        kubelet,
        store,
        queue,
        ApplierConfig::default().concurrency(concurrency),
    )
    .for_each(|r| {
        if let Err(e) = r {
            tracing::debug!(error = %e, "kubelet reconcile error");
        }
        async {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_700_000_000_000;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = json!({"metadata": {"name": "p", "namespace": "d", "uid": "0123-4567-89ab"},
            "spec": {"nodeName": "sim-node-0", "containers": [{"name": "c", "image": "nginx:1"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}]}});
        json_patch::merge(&mut p, &extra);
        serde_json::from_value(p).unwrap()
    }

    fn timing(p: &Pod) -> Timing {
        Timing::of(p, Duration::from_millis(500), Duration::from_secs(10))
    }

    fn cond<'a>(st: &'a PodStatus, t: &str) -> &'a PodCondition {
        st.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn claims_must_exist_be_bound_and_be_the_pods() {
        let p = pod(json!({}));
        let claim = |extra: serde_json::Value| -> PersistentVolumeClaim {
            let mut c = json!({"metadata": {"name": "c", "namespace": "d", "uid": "cu"},
                "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}});
            json_patch::merge(&mut c, &extra);
            serde_json::from_value(c).unwrap()
        };
        let cases = [
            (None, "error processing PVC d/c: failed to fetch PVC from API server: persistentvolumeclaims \"c\" not found"),
            (Some(json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})), "error processing PVC d/c: PVC is being deleted"),
            (Some(json!({"status": {"phase": "Pending"}})), "error processing PVC d/c: PVC is not bound"),
            (Some(json!({"spec": {"volumeName": null}})), "error processing PVC d/c: PVC has empty pvc.Spec.VolumeName"),
        ];
        for (extra, message) in cases {
            let c = extra.map(claim);
            assert_eq!(
                claim_problem(&p, "c", false, c.as_ref()),
                Err(message.to_string())
            );
        }
        assert_eq!(
            claim_problem(&p, "c", false, Some(&claim(json!({})))),
            Ok("pv".into())
        );
        assert_eq!(
            claim_problem(&p, "c", true, Some(&claim(json!({})))),
            Err("PVC d/c was not created for pod d/p (pod is not owner)".into())
        );
        let owned = claim(json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "0123-4567-89ab", "controller": true}]}}));
        assert_eq!(claim_problem(&p, "c", true, Some(&owned)), Ok("pv".into()));

        let volume = |claim_ref: serde_json::Value| -> PersistentVolume {
            serde_json::from_value(
                json!({"metadata": {"name": "pv"}, "spec": {"claimRef": claim_ref}}),
            )
            .unwrap()
        };
        assert_eq!(
            volume_problem(
                &p,
                "c",
                Some("cu"),
                "pv",
                Some(&volume(json!({"uid": "cu"})))
            ),
            None
        );
        assert_eq!(
            volume_problem(&p, "c", Some("cu"), "pv", Some(&volume(json!({"uid": "other"})))).unwrap(),
            "error processing PVC d/c: found PV object pv but its pv.Spec.ClaimRef.UID other does not point to claim.UID cu"
        );
        assert!(volume_problem(&p, "c", Some("cu"), "pv", None)
            .unwrap()
            .ends_with(
                "failed to fetch PV pv from API server: persistentvolumes \"pv\" not found"
            ));
        assert!(volume_problem(
            &p,
            "c",
            Some("cu"),
            "pv",
            Some(&volume(serde_json::Value::Null))
        )
        .unwrap()
        .contains("nil pv.Spec.ClaimRef"));
    }

    #[test]
    fn volumes_need_their_configmaps_and_secrets_unless_optional() {
        let p = pod(json!({"spec": {"volumes": [
            {"name": "cfg", "configMap": {"name": "app"}},
            {"name": "maybe", "configMap": {"name": "extra", "optional": true}},
            {"name": "creds", "secret": {"secretName": "db"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "kube-api-access-x1y2z", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt"}},
                {"secret": {"name": "opt", "optional": true}},
                {"secret": {"name": "tls"}},
                {"downwardAPI": {"items": []}}
            ]}}
        ]}}));
        let needed: Vec<(String, MountKind, String)> = required_mount_sources(&p)
            .into_iter()
            .map(|s| (s.volume, s.kind, s.name))
            .collect();
        let row = |v: &str, k, n: &str| (v.to_string(), k, n.to_string());
        assert_eq!(
            needed,
            vec![
                row("cfg", MountKind::ConfigMap, "app"),
                row("creds", MountKind::Secret, "db"),
                row(
                    "kube-api-access-x1y2z",
                    MountKind::ConfigMap,
                    "kube-root-ca.crt"
                ),
                row("kube-api-access-x1y2z", MountKind::Secret, "tls"),
            ]
        );
        assert!(required_mount_sources(&pod(json!({}))).is_empty());
        assert_eq!(
            MountSource {
                volume: "kube-api-access-x1y2z".into(),
                kind: MountKind::ConfigMap,
                name: "kube-root-ca.crt".into(),
            }
            .not_found_message(),
            "MountVolume.SetUp failed for volume \"kube-api-access-x1y2z\" : configmap \"kube-root-ca.crt\" not found"
        );
    }

    #[test]
    fn containers_start_no_earlier_than_their_volumes_were_mounted() {
        let p = pod(json!({}));
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            mounted_at: Some(T0 + 5_000),
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0 + 4_000, &t), Some(T0 + 5_000));
        assert_eq!(rt.started, None);
        advance(&p, &mut rt, T0 + 5_000, &t);
        assert_eq!(rt.started, Some(T0 + 5_000));
    }

    #[test]
    fn a_bare_pod_goes_pending_then_running_and_ready() {
        let p = pod(json!({}));
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ip: Some(Ipv4Addr::new(10, 244, 0, 2)),
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0, &t), Some(T0 + 500));
        let st = build_status(&p, &rt, "172.16.0.1", T0, &t);
        assert_eq!(st.phase.as_deref(), Some("Pending"));
        assert_eq!(st.pod_ip, None, "no IP before the sandbox runs");
        assert_eq!(st.host_ip.as_deref(), Some("172.16.0.1"));
        assert_eq!(
            cond(&st, "Ready").reason.as_deref(),
            Some("ContainersNotReady")
        );
        let waiting = st.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .waiting
            .clone()
            .unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));

        assert_eq!(advance(&p, &mut rt, T0 + 600, &t), None);
        let st = build_status(&p, &rt, "172.16.0.1", T0 + 600, &t);
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert_eq!(st.pod_ip.as_deref(), Some("10.244.0.2"));
        for c in [
            "PodScheduled",
            "Initialized",
            "ContainersReady",
            "Ready",
            "PodReadyToStartContainers",
        ] {
            assert_eq!(cond(&st, c).status, "True", "{c}");
        }
        assert_eq!(
            cond(&st, "PodScheduled").last_transition_time,
            p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].last_transition_time,
            "conditions node-sim does not own are kept"
        );
        let cs = &st.container_statuses.as_ref().unwrap()[0];
        assert!(cs.ready);
        assert_eq!(cs.started, Some(true));
        assert!(cs.state.as_ref().unwrap().running.is_some());
        assert_eq!(st.start_time, Some(time(T0)));
        assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));

        // Same input, same output: nothing to write on the next look.
        let mut p2 = p.clone();
        p2.status = Some(st.clone());
        assert_eq!(build_status(&p2, &rt, "172.16.0.1", T0 + 5_000, &t), st);
    }

    #[test]
    fn readiness_waits_for_the_probe_initial_delay() {
        let p = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"initialDelaySeconds": 5, "exec": {"command": ["true"]}}}]}}),
        );
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0 + 1_000, &t), Some(T0 + 5_500));
        let st = build_status(&p, &rt, "h", T0 + 1_000, &t);
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&st, "Ready").status, "False");
        assert_eq!(
            cond(&st, "ContainersReady").message.as_deref(),
            Some("containers with unready status: [c]")
        );
        assert_eq!(advance(&p, &mut rt, T0 + 5_500, &t), None);
        assert_eq!(
            cond(&build_status(&p, &rt, "h", T0 + 5_500, &t), "Ready").status,
            "True"
        );
    }

    #[test]
    fn the_ready_annotation_makes_running_containers_unready_and_back() {
        let p = pod(json!({"metadata": {"annotations": {READY: "false"}},
            "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}}));
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0 + 600, &t), None);
        let st = build_status(&p, &rt, "h", T0 + 600, &t);
        assert_eq!(st.phase.as_deref(), Some("Running"));
        for c in ["Ready", "ContainersReady"] {
            let c = cond(&st, c);
            assert_eq!(c.status, "False");
            assert_eq!(c.reason.as_deref(), Some("ContainersNotReady"));
            assert_eq!(
                c.message.as_deref(),
                Some("containers with unready status: [a b]")
            );
        }
        let cs = st.container_statuses.as_ref().unwrap();
        assert!(cs.iter().all(|c| !c.ready && c.started == Some(true)));
        assert_eq!(cond(&st, "PodReadyToStartContainers").status, "True");

        // Annotated "true" (or not at all) the same containers are ready again, and the
        // conditions move with a new transition time.
        for value in [Some("true"), None] {
            let mut again = p.clone();
            again.status = Some(st.clone());
            let ann = again
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            match value {
                Some(v) => {
                    ann.insert(READY.into(), v.into());
                }
                None => {
                    ann.remove(READY);
                }
            }
            let ready = build_status(&again, &rt, "h", T0 + 9_000, &t);
            let c = cond(&ready, "Ready");
            assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", None));
            assert_eq!(c.last_transition_time, Some(time(T0 + 9_000)));
            assert_eq!(cond(&ready, "ContainersReady").status, "True");
        }

        // The annotation does not hurry a readiness probe's initial delay either way.
        let probed = pod(json!({"metadata": {"annotations": {READY: "true"}},
            "spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"initialDelaySeconds": 5, "exec": {"command": ["true"]}}}]}}));
        let st = build_status(&probed, &rt, "h", T0 + 1_000, &t);
        assert_eq!(cond(&st, "Ready").status, "False");
    }

    #[test]
    fn a_terminating_pod_stays_ready_while_its_containers_run() {
        let p = pod(
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:50Z", "deletionGracePeriodSeconds": 30}}),
        );
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            started: Some(T0 + 500),
            first_started: Some(T0 + 500),
            ..Default::default()
        };
        // Deleted at T0 with 30 s of grace (deletionTimestamp T0 + 30 s): the containers
        // run until then, and kubelet keeps them ready meanwhile.
        assert_eq!(advance(&p, &mut rt, T0 + 25_000, &t), Some(T0 + 30_000));
        let st = build_status(&p, &rt, "h", T0 + 25_000, &t);
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&st, "Ready").status, "True");
        assert!(st.container_statuses.as_ref().unwrap()[0].ready);
    }

    #[test]
    fn exits_follow_the_restart_policy() {
        let ann = |code: &str, policy: &str| {
            pod(
                json!({"metadata": {"annotations": {EXIT_AFTER: "2s", EXIT_CODE: code}}, "spec": {"restartPolicy": policy}}),
            )
        };
        for (code, policy, phase) in [
            ("0", "Never", "Succeeded"),
            ("1", "Never", "Failed"),
            ("0", "OnFailure", "Succeeded"),
        ] {
            let p = ann(code, policy);
            let t = timing(&p);
            let mut rt = PodRuntime {
                admitted: T0,
                ..Default::default()
            };
            assert_eq!(advance(&p, &mut rt, T0 + 600, &t), Some(T0 + 2_500));
            assert_eq!(advance(&p, &mut rt, T0 + 2_600, &t), None);
            let st = build_status(&p, &rt, "h", T0 + 2_600, &t);
            assert_eq!(st.phase.as_deref(), Some(phase), "{code} {policy}");
            let term = st.container_statuses.unwrap()[0]
                .state
                .clone()
                .unwrap()
                .terminated
                .unwrap();
            assert_eq!(term.exit_code.to_string(), code);
            assert_eq!(
                term.reason.as_deref(),
                Some(if code == "0" { "Completed" } else { "Error" })
            );
            let ready = st
                .conditions
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .unwrap();
            assert_eq!(ready.reason.as_deref(), Some("PodCompleted"));
        }
        // OnFailure with a failure restarts after a back-off, and the pod stays Running.
        let p = ann("3", "OnFailure");
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        assert_eq!(
            advance(&p, &mut rt, T0 + 2_600, &t),
            Some(T0 + 2_500 + 10_000)
        );
        let st = build_status(&p, &rt, "h", T0 + 2_600, &t);
        assert_eq!(st.phase.as_deref(), Some("Running"));
        let cs = &st.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.restart_count, 1);
        assert_eq!(
            cs.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(
            cs.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            3
        );
        advance(&p, &mut rt, T0 + 12_600, &t);
        assert_eq!(rt.started, Some(T0 + 12_500));
        assert_eq!(crash_backoff(10_000, 2), 20_000);
        assert_eq!(crash_backoff(10_000, 40), 300_000);
    }

    #[test]
    fn a_deleted_pod_runs_out_its_grace_period_then_goes() {
        let p = pod(
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:30Z", "deletionGracePeriodSeconds": 10}}),
        );
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            started: Some(T0 + 500),
            first_started: Some(T0 + 500),
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0 + 1_000, &t), Some(T0 + 10_000));
        assert!(rt.terminal.is_none());
        advance(&p, &mut rt, T0 + 10_000, &t);
        assert_eq!(rt.terminal.map(|e| e.code), Some(137));
        assert_eq!(
            build_status(&p, &rt, "h", T0 + 10_000, &t).phase.as_deref(),
            Some("Failed")
        );
        // Never started: stopped at once.
        let mut fresh = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut fresh, T0 + 100, &t), None);
        assert!(fresh.terminal.is_some());
    }

    #[test]
    fn init_containers_complete_before_the_containers_start() {
        let p = pod(
            json!({"spec": {"initContainers": [{"name": "init", "image": "busybox"}, {"name": "side", "image": "envoy", "restartPolicy": "Always"}]}}),
        );
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        advance(&p, &mut rt, T0, &t);
        let st = build_status(&p, &rt, "h", T0, &t);
        assert_eq!(cond(&st, "Initialized").status, "False");
        assert_eq!(
            cond(&st, "Initialized").message.as_deref(),
            Some("containers with incomplete status: [init side]")
        );
        advance(&p, &mut rt, T0 + 600, &t);
        let st = build_status(&p, &rt, "h", T0 + 600, &t);
        assert_eq!(cond(&st, "Initialized").status, "True");
        let init = st.init_container_statuses.unwrap();
        assert_eq!(
            init[0]
                .state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("Completed")
        );
        assert!(
            init[1].state.as_ref().unwrap().running.is_some(),
            "a sidecar keeps running"
        );
    }

    #[test]
    fn bad_annotations_are_ignored_and_runtime_is_adopted_after_a_restart() {
        let p = pod(
            json!({"metadata": {"annotations": {EXIT_AFTER: "soon", EXIT_CODE: "x", START_DELAY: "2s"}}}),
        );
        let t = timing(&p);
        assert_eq!((t.exit_after, t.exit_code, t.start_delay), (None, 0, 2_000));
        let running = pod(
            json!({"status": {"phase": "Running", "startTime": "2023-11-14T22:13:20Z", "podIP": "10.244.0.9",
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 2,
                "state": {"running": {"startedAt": "2023-11-14T22:13:21Z"}}}]}}),
        );
        let rt = adopt(&running, T0 + 60_000);
        assert_eq!(rt.admitted, T0);
        assert_eq!(rt.started, Some(T0 + 1_000));
        assert_eq!(rt.restarts, 2);
        assert_eq!(rt.ip, Some(Ipv4Addr::new(10, 244, 0, 9)));
    }

    #[test]
    fn qos_classes() {
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        let g = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
        );
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}),
        );
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn addresses_come_from_the_node_pod_cidr_and_are_reused() {
        let mut st = State::default();
        let net = nodes::PodNetwork::parse(&nodes::pod_cidr(1)).unwrap();
        let a = st.allocate(net, "n1").unwrap();
        let b = st.allocate(net, "n1").unwrap();
        assert_eq!(
            (a, b),
            (Ipv4Addr::new(10, 244, 1, 2), Ipv4Addr::new(10, 244, 1, 3))
        );
        st.release("n1", a);
        assert_eq!(st.allocate(net, "n1"), Some(a));
        for _ in 0..251 {
            st.allocate(net, "n1");
        }
        assert_eq!(
            st.allocate(net, "n1"),
            None,
            "a full /24 gives no more addresses"
        );
    }

    #[test]
    fn addresses_stay_inside_a_small_pod_cidr() {
        let mut st = State::default();
        let net = nodes::PodNetwork::parse("10.244.7.128/29").unwrap();
        let got: Vec<Ipv4Addr> = std::iter::from_fn(|| st.allocate(net, "n")).collect();
        assert_eq!(
            got,
            (130..=134)
                .map(|h| Ipv4Addr::new(10, 244, 7, h))
                .collect::<Vec<_>>()
        );
        assert_eq!(nodes::PodNetwork::parse("fd00::/64"), None);
        let wide = nodes::PodNetwork::parse("10.244.0.0/16").unwrap();
        assert_eq!(st.allocate(wide, "w"), Some(Ipv4Addr::new(10, 244, 0, 2)));
    }
}
