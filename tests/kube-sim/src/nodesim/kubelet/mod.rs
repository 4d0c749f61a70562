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
//!
//! The modules follow the kubelet's seams: [`lifecycle`] (the state machine), [`status`]
//! (the status manager's view), [`volumes`] (the volume manager's waits), [`state`] (what is
//! remembered between passes, with pod address allocation) and [`sync`] (one pass over a
//! pod, at the edge).

mod lifecycle;
mod state;
mod status;
mod sync;
mod volumes;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{applier, Action, Config as ApplierConfig};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;

pub use lifecycle::{adopt, advance, crash_backoff, Exit, PodRuntime, Timing};
pub use status::{build_status, qos_class};
pub use volumes::{claim_problem, required_mount_sources, volume_problem, MountKind, MountSource};

use super::Shared;
use state::State;

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

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("writing the status of pod {pod}: {source}")]
    Status { pod: String, source: kube::Error },
    #[error("deleting pod {pod}: {source}")]
    Delete { pod: String, source: kube::Error },
    #[error("looking up the volume sources of pod {pod}: {source}")]
    Mount { pod: String, source: kube::Error },
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
        |pod, ctx| Box::pin(sync::reconcile(pod, ctx)),
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
mod tests;
