//! The pod lifecycle the simulated kubelet runs: what it remembers of a pod ([`PodRuntime`]),
//! the timings the pod's annotations ask for ([`Timing`]), the state machine that moves a
//! pod's containers through start, exit, restart and termination ([`advance`]), and taking
//! over a pod found already running ([`adopt`]). All pure.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::{Millis, EXIT_AFTER, EXIT_CODE, READY, START_DELAY, STOP_AFTER};
use crate::nodesim::quantity;

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

pub(super) fn readiness_delay(pod: &Pod, container: usize) -> Millis {
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
pub(super) fn forced_unready(pod: &Pod) -> bool {
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
