//! One pass of the simulated kubelets over a pod (the `reconcile` of kube-runtime's
//! `applier`), in phases: where and when it runs ([`prepare`]), what its volumes still wait
//! for ([`volume_wait`]), the lifecycle step under the kubelets' lock ([`step`]), then the
//! writes: status, events and the final delete.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use super::volumes::{first_claim_problem, first_mount_failure, MOUNT_EVENT_REPEAT, MOUNT_RETRY};
use super::{
    adopt, advance, build_status, required_mount_sources, Kubelet, KubeletError, Millis,
    PodRuntime, Timing,
};
use crate::nodesim::{attach, dra, nodes, volume_binding};

/// An event to post about the pod: type, reason, message.
type Report = (&'static str, &'static str, String);

/// Where and when a pass over one pod happens.
struct Pass {
    node: String,
    uid: String,
    namespace: String,
    host_ip: String,
    host_network: bool,
    network: Option<nodes::PodNetwork>,
    timing: Timing,
    now: Millis,
}

/// What keeps the pod's containers from starting, if anything.
#[derive(Default)]
struct VolumeWait {
    /// A claim is missing, not bound, not the pod's, or its volume is not attached, or a
    /// resource claim is not allocated and reserved: looked at again without an event.
    claim: Option<String>,
    /// A ConfigMap or Secret a volume needs is missing: a FailedMount event.
    mount: Option<String>,
}

/// What the lifecycle step decided, to be written.
struct Step {
    status: PodStatus,
    wake: Option<Millis>,
    delete: bool,
    events: Vec<Report>,
}

fn now_millis() -> Millis {
    Timestamp::now().as_millisecond()
}

pub(super) async fn reconcile(
    pod: Arc<Pod>,
    kubelet: Arc<Kubelet>,
) -> Result<Action, KubeletError> {
    let pass = match prepare(&pod, &kubelet) {
        ControlFlow::Continue(pass) => pass,
        ControlFlow::Break(action) => return Ok(action),
    };
    let wait = volume_wait(&pod, &kubelet, &pass).await?;
    let step = step(&pod, &kubelet, &pass, wait);
    let api: Api<Pod> = Api::namespaced(kubelet.shared.client.clone(), &pass.namespace);
    if !write_status(&pod, &api, &pass, &step.status).await? {
        return Ok(Action::await_change());
    }
    post_events(&pod, &kubelet, &pass, step.events).await;
    if step.delete {
        delete(&pod, &api, &pass).await?;
    }
    if let Some(rt) = kubelet.state().pods.get_mut(&pass.uid) {
        rt.failures = 0;
    }
    Ok(match step.wake {
        // A little past the moment, so the whole-second timestamps have moved on too.
        Some(at) => Action::requeue(Duration::from_millis((at - pass.now).max(0) as u64 + 5)),
        None => Action::await_change(),
    })
}

/// The pass over the pod, or what to do instead: nothing for a pod not on one of our nodes
/// or on a killed one, look again soon on a partitioned node or before the pod network is
/// there.
fn prepare(pod: &Pod, kubelet: &Kubelet) -> ControlFlow<Action, Pass> {
    let Some(node) = kubelet.node_of(pod) else {
        return ControlFlow::Break(Action::await_change());
    };
    let faults = kubelet.shared.faults(&node);
    if faults.killed {
        return ControlFlow::Break(Action::await_change());
    }
    if faults.partitioned {
        // The containers run on, but nothing reaches the API server; the pod is looked
        // at again until the partition is lifted, and then reported as it is by then.
        return ControlFlow::Break(Action::requeue(Duration::from_secs(1)));
    }
    let Some(uid) = pod.metadata.uid.clone() else {
        return ControlFlow::Break(Action::await_change());
    };
    let index = kubelet.shared.node_index(&node).unwrap_or(0);
    let cfg = &kubelet.shared.config;
    let timing = Timing::of(pod, cfg.start_delay, cfg.restart_backoff);
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
        return ControlFlow::Break(Action::requeue(Duration::from_secs(1)));
    }
    ControlFlow::Continue(Pass {
        host_ip: nodes::internal_ip(index).to_string(),
        namespace: pod.namespace().unwrap_or_default(),
        node,
        uid,
        host_network,
        network,
        timing,
        now,
    })
}

/// What the pod's volumes wait for. Volumes are set up when the containers are due to
/// start (and never again once they have run); until then nothing is looked up.
async fn volume_wait(
    pod: &Pod,
    kubelet: &Kubelet,
    pass: &Pass,
) -> Result<VolumeWait, KubeletError> {
    let due = {
        let st = kubelet.state();
        let rt = st
            .pods
            .get(&pass.uid)
            .cloned()
            .unwrap_or_else(|| adopt(pod, pass.now));
        rt.first_started.is_none()
            && rt.terminal.is_none()
            && pod.metadata.deletion_timestamp.is_none()
            && pass.now >= rt.admitted.saturating_add(pass.timing.start_delay)
    };
    if !due {
        return Ok(VolumeWait::default());
    }
    let mount_error = |source: kube::Error| KubeletError::Mount {
        pod: format!("{}/{}", pass.namespace, pod.name_any()),
        source,
    };
    let client = &kubelet.shared.client;
    // Claims first, as kubelet's volume manager cannot even list a volume whose claim is
    // not bound or not the pod's.
    let mut claim = None;
    if !volume_binding::pod_claims(pod).is_empty() {
        claim = first_claim_problem(client, pod)
            .await
            .map_err(mount_error)?;
        if claim.is_none() {
            // Then the volumes the attach/detach controller attaches.
            claim = attach::first_attach_problem(client, pod, &pass.node)
                .await
                .map_err(mount_error)?;
        }
    }
    // Then the resource claims, which must be allocated and reserved for the pod.
    if claim.is_none() && dra::has_resource_claims(pod) {
        claim = dra::check(client, pod, dra::Phase::Starting)
            .await
            .map_err(mount_error)?
            .err();
    }
    let sources = required_mount_sources(pod);
    let mount = if sources.is_empty() || claim.is_some() {
        None
    } else {
        first_mount_failure(client, &pass.namespace, &sources)
            .await
            .map_err(mount_error)?
    };
    Ok(VolumeWait { claim, mount })
}

/// The lifecycle step, under the kubelets' lock: the pod's runtime (adopted when new, with
/// an address), kept waiting for its volumes or moved forward to now, its status, and the
/// events to post.
fn step(pod: &Pod, kubelet: &Kubelet, pass: &Pass, wait: VolumeWait) -> Step {
    let cfg = &kubelet.shared.config;
    let now = pass.now;
    let mut st = kubelet.state();
    let mut rt = match st.pods.get(&pass.uid) {
        Some(rt) => rt.clone(),
        None => {
            let rt = adopt(pod, now);
            if let (Some(ip), None) = (rt.ip, rt.terminal) {
                st.reserve(&pass.node, ip);
            }
            rt
        }
    };
    rt.node = pass.node.clone();
    let was_terminal = rt.terminal.is_some();
    if rt.ip.is_none() && !pass.host_network && rt.terminal.is_none() {
        rt.ip = pass
            .network
            .and_then(|network| st.allocate(network, &pass.node));
    }
    let mut events = Vec::new();
    if wait.claim.is_some() && rt.claim_wait != wait.claim {
        tracing::debug!(node = %pass.node, pod = %pod.name_any(), problem = wait.claim.as_deref().unwrap_or_default(), "pod waits for its claims");
    }
    let wake = match (wait.claim, wait.mount) {
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
                events.push(("Warning", "FailedMount", message.clone()));
            }
            rt.mount_failure = Some(message);
            Some(now.saturating_add(MOUNT_RETRY.as_millis() as Millis))
        }
        (None, None) => {
            if rt.mount_failure.take().is_some() | rt.claim_wait.take().is_some() {
                rt.mounted_at = Some(now);
            }
            advance(pod, &mut rt, now, &pass.timing)
        }
    };
    if rt.terminal.is_some() && !was_terminal {
        if let Some(ip) = rt.ip {
            st.release(&pass.node, ip);
        }
    }
    let status = build_status(pod, &rt, &pass.host_ip, now, &pass.timing);
    let delete = pod.metadata.deletion_timestamp.is_some() && rt.terminal.is_some();
    if cfg.events {
        lifecycle_events(pod, &mut rt, &mut events);
    }
    st.pods.insert(pass.uid.clone(), rt);
    Step {
        status,
        wake,
        delete,
        events,
    }
}

/// The Pulled/Created/Started events once the containers have first started, and the
/// Killing events once the pod is being deleted, each posted once.
fn lifecycle_events(pod: &Pod, rt: &mut PodRuntime, events: &mut Vec<Report>) {
    if rt.first_started.is_some() && !rt.started_reported {
        rt.started_reported = true;
        events.extend(
            started_events(pod)
                .into_iter()
                .map(|(reason, message)| ("Normal", reason, message)),
        );
    }
    if pod.metadata.deletion_timestamp.is_some() && !rt.killing_reported && rt.terminal.is_none() {
        rt.killing_reported = true;
        events.extend(containers(pod).map(|c| {
            (
                "Normal",
                "Killing",
                format!("Stopping container {}", c.name),
            )
        }));
    }
}

/// Write the pod's status if it changed; `false` when the pod is gone.
async fn write_status(
    pod: &Pod,
    api: &Api<Pod>,
    pass: &Pass,
    status: &PodStatus,
) -> Result<bool, KubeletError> {
    if pod.status.as_ref() == Some(status) {
        return Ok(true);
    }
    let name = pod.name_any();
    let patch = json!({"metadata": {"uid": pass.uid}, "status": status});
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(KubeletError::Status {
            pod: format!("{}/{name}", pass.namespace),
            source,
        }),
    }
}

async fn post_events(pod: &Pod, kubelet: &Kubelet, pass: &Pass, events: Vec<Report>) {
    for (type_, reason, message) in events {
        if let Err(e) = crate::nodesim::pod_event(
            &kubelet.shared.client,
            pod,
            type_,
            reason,
            &message,
            "kubelet",
            Some(&pass.node),
        )
        .await
        {
            tracing::debug!(pod = %pod.name_any(), reason, error = %e, "cannot post a kubelet event");
        }
    }
}

/// Delete the stopped pod with no grace left, as kubelet does once its containers are gone.
async fn delete(pod: &Pod, api: &Api<Pod>, pass: &Pass) -> Result<(), KubeletError> {
    let name = pod.name_any();
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(pass.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(source) => Err(KubeletError::Delete {
            pod: format!("{}/{name}", pass.namespace),
            source,
        }),
    }
}

/// The pod's init containers and containers.
fn containers(pod: &Pod) -> impl Iterator<Item = &Container> {
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
