//! The reconciler (upstream `attachdetach/reconciler/reconciler.go`), run every 100 ms:
//! first it detaches what is attached but no longer wanted (waiting while the node still
//! uses the volume, unless the node is not Ready and 6 minutes passed, or the node is
//! tainted `node.kubernetes.io/out-of-service`), then attaches what is wanted but not
//! attached (refusing a second node for a volume that allows one node only, with a
//! Multi-Attach error event), then patches the nodes whose attached lists changed. Every
//! `--attach-detach-reconcile-sync-period` it also checks that what it believes attached
//! still is (the VolumeAttachment says `attached`), forgetting what is not so it is
//! attached again. Attaches and detaches run as tasks of their own, one per volume (per
//! volume and node for volumes that may be attached to several nodes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::recorder::{NORMAL, WARNING};

use super::actual::{AttachState, AttachedVolume};
use super::desired::VolumeToAttach;
use super::metrics::ForceReason;
use super::pending::OperationKey;
use super::volumes::{split_unique_name, CSI_PLUGIN};
use super::{Controller, NAME};

/// `ReconcilerMaxWaitForUnmountDuration`.
pub(super) const MAX_WAIT_FOR_UNMOUNT: Duration = Duration::from_secs(6 * 60);
/// `v1.TaintNodeOutOfService`.
pub(super) const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// `kevents.FailedAttachVolume`.
pub(super) const FAILED_ATTACH_VOLUME: &str = "FailedAttachVolume";
/// `kevents.SuccessfulAttachVolume`.
pub(super) const SUCCESSFUL_ATTACH_VOLUME: &str = "SuccessfulAttachVolume";

/// What to do with an attached volume no pod on its node wants any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DetachDecision {
    /// The node still uses it.
    Wait,
    /// Detach; `verify_safe` re-reads the node first and refuses while it reports the
    /// volume in use; `forced` says why the unmount was not waited for.
    Detach {
        verify_safe: bool,
        forced: Option<ForceReason>,
    },
}

/// The reconciler's detach rule, given whether the node reports the volume in use, the
/// node's readiness, how long the detach has been wanted and the out-of-service taint.
pub(super) fn detach_decision(
    mounted_by_node: bool,
    node_ready: bool,
    waited: Duration,
    out_of_service: bool,
) -> DetachDecision {
    let timeout = waited > MAX_WAIT_FOR_UNMOUNT;
    let force = !node_ready && timeout;
    if mounted_by_node && !force && !out_of_service {
        return DetachDecision::Wait;
    }
    let verify_safe = !(timeout || out_of_service);
    let forced = if verify_safe {
        None
    } else if timeout {
        Some(ForceReason::Timeout)
    } else {
        Some(ForceReason::OutOfService)
    };
    DetachDecision::Detach {
        verify_safe,
        forced,
    }
}

/// `generateVolumeMsg`: `<prefix> for volume "<name>" <suffix>`.
pub(super) fn volume_message(prefix: &str, volume: &str, suffix: &str) -> String {
    format!("{prefix} for volume {volume:?} {suffix}")
}

/// The Multi-Attach error for a pod in `namespace`, given the (namespace, name) of the
/// pods using the volume on the nodes it is attached to.
pub(super) fn multi_attach_message(
    volume: &str,
    namespace: &str,
    users: &[(String, String)],
) -> String {
    if users.is_empty() {
        return volume_message(
            "Multi-Attach error",
            volume,
            "Volume is already exclusively attached to one node and can't be attached to another",
        );
    }
    let local: Vec<&str> = users
        .iter()
        .filter(|(ns, _)| ns == namespace)
        .map(|(_, name)| name.as_str())
        .collect();
    let others = users.len() - local.len();
    let mut suffix = if local.is_empty() {
        format!("Volume is already used by {others} pod(s) in different namespaces")
    } else {
        format!("Volume is already used by pod(s) {}", local.join(", "))
    };
    if !local.is_empty() && others > 0 {
        suffix = format!("{suffix} and {others} pod(s) in different namespaces");
    }
    volume_message("Multi-Attach error", volume, &suffix)
}

/// `nodeutil.IsNodeReady`.
pub(super) fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub(super) fn has_out_of_service_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == TAINT_OUT_OF_SERVICE)
}

fn pod_ref(pod: &Pod) -> (String, String) {
    (pod.namespace_str().to_string(), pod.name_str().to_string())
}

impl Controller {
    /// One reconciler pass.
    pub(super) async fn reconcile(self: &Arc<Self>) {
        self.detach_unwanted().await;
        self.attach_desired();
        self.update_node_statuses().await;
    }

    /// (readiness, out-of-service taint) of a node; a node the cache lacks is not ready.
    fn node_health(&self, node: &str) -> (bool, bool) {
        match self.nodes.get(node) {
            Some(n) => (node_ready(&n), has_out_of_service_taint(&n)),
            None => (false, false),
        }
    }

    async fn detach_unwanted(self: &Arc<Self>) {
        let attached = lock(&self.actual).attached_volumes();
        for volume in attached {
            if lock(&self.desired).volume_exists(&volume.unique_name, &volume.node) {
                continue;
            }
            let key = OperationKey::new(&volume.unique_name, &volume.node, volume.multi_attach());
            if !lock(&self.pending).safe_to_retry(&key, Instant::now()) {
                continue;
            }
            if split_unique_name(&volume.unique_name).is_none() {
                // Only the CSI plugin is ported: a volume of another plugin (known from a
                // node's volumesAttached) cannot be detached here; say so once.
                if lock(&self.pending).start(&key, Instant::now()) {
                    tracing::warn!(controller = NAME, volume = %volume.unique_name, node = %volume.node, "DetachVolume.FindAttachablePluginByName failed: no attachable volume plugin in rkcm for this volume");
                }
                continue;
            }
            let Some(waited) =
                lock(&self.actual).set_detach_request_time(&volume.unique_name, &volume.node)
            else {
                continue;
            };
            let (ready, out_of_service) = self.node_health(&volume.node);
            let DetachDecision::Detach {
                verify_safe,
                forced,
            } = detach_decision(volume.mounted_by_node, ready, waited, out_of_service)
            else {
                tracing::trace!(controller = NAME, volume = %volume.unique_name, node = %volume.node, "cannot detach volume because it is still mounted");
                continue;
            };
            lock(&self.actual).remove_volume_from_report(&volume.unique_name, &volume.node);
            if let Err(error) = self.update_node_status(&volume.node).await {
                tracing::warn!(controller = NAME, node = %volume.node, volume = %volume.unique_name, %error, "UpdateNodeStatusForNode failed while attempting to report volume as attached");
                lock(&self.actual).add_volume_to_report(&volume.unique_name, &volume.node);
                continue;
            }
            if !lock(&self.pending).start(&key, Instant::now()) {
                lock(&self.actual).add_volume_to_report(&volume.unique_name, &volume.node);
                continue;
            }
            match forced {
                None => {
                    tracing::info!(controller = NAME, node = %volume.node, volume = %volume.unique_name, "attacherDetacher.DetachVolume started")
                }
                Some(reason) => {
                    self.metrics.forced_detach(reason);
                    tracing::info!(controller = NAME, node = %volume.node, volume = %volume.unique_name, reason = reason.label(), "attacherDetacher.DetachVolume started: this volume is not safe to detach, force detaching");
                }
            }
            tokio::spawn(self.clone().run_detach(volume, verify_safe, key));
        }
    }

    fn attach_desired(self: &Arc<Self>) {
        let wanted = lock(&self.desired).volumes_to_attach();
        for volume in wanted {
            let key =
                OperationKey::new(&volume.unique_name, &volume.node, volume.spec.multi_attach);
            if lock(&self.pending).is_pending(&key) {
                continue;
            }
            {
                let mut actual = lock(&self.actual);
                if actual.attach_state(&volume.unique_name, &volume.node) == AttachState::Attached {
                    actual.reset_detach_request_time(&volume.unique_name, &volume.node);
                    continue;
                }
            }
            if !volume.spec.multi_attach {
                let nodes = lock(&self.actual).nodes_for_volume(&volume.unique_name);
                if !nodes.is_empty() {
                    if !volume.multi_attach_error_reported {
                        self.report_multi_attach_error(&volume, &nodes);
                        lock(&self.desired)
                            .set_multi_attach_error_reported(&volume.unique_name, &volume.node);
                    }
                    continue;
                }
            }
            // Refused while a failed attempt backs off.
            if !lock(&self.pending).start(&key, Instant::now()) {
                continue;
            }
            tracing::info!(controller = NAME, volume = %volume.unique_name, node = %volume.node, "attacherDetacher.AttachVolume started");
            tokio::spawn(self.clone().run_attach(volume, key));
        }
    }

    fn report_multi_attach_error(&self, volume: &VolumeToAttach, nodes: &[String]) {
        let others: Vec<String> = nodes
            .iter()
            .filter(|n| **n != volume.node)
            .cloned()
            .collect();
        let users: Vec<(String, String)> = lock(&self.desired)
            .volume_pods_on_nodes(&others, &volume.unique_name)
            .iter()
            .map(|p| pod_ref(p))
            .collect();
        for pod in &volume.scheduled_pods {
            let (namespace, _) = pod_ref(pod);
            let message = multi_attach_message(&volume.spec.name, &namespace, &users);
            self.recorder
                .event(pod.as_ref(), WARNING, FAILED_ATTACH_VOLUME, message);
        }
        tracing::info!(controller = NAME, volume = %volume.unique_name, attached_to = ?others, "Multi-Attach error: volume is already attached to another node");
    }

    async fn run_attach(self: Arc<Self>, volume: VolumeToAttach, key: OperationKey) {
        let started = Instant::now();
        let result = self.attacher.attach(&volume.spec, &volume.node).await;
        match &result {
            Ok(()) => {
                let message =
                    volume_message("AttachVolume.Attach succeeded", &volume.spec.name, "");
                for pod in &volume.scheduled_pods {
                    self.recorder.event(
                        pod.as_ref(),
                        NORMAL,
                        SUCCESSFUL_ATTACH_VOLUME,
                        message.clone(),
                    );
                }
                tracing::info!(controller = NAME, volume = %volume.unique_name, node = %volume.node, "AttachVolume.Attach succeeded");
                lock(&self.actual).mark_attached(
                    &volume.unique_name,
                    Some(volume.spec.clone()),
                    &volume.node,
                );
            }
            Err(error) => {
                lock(&self.actual).mark_uncertain(
                    &volume.unique_name,
                    Some(volume.spec.clone()),
                    &volume.node,
                );
                let message = volume_message(
                    "AttachVolume.Attach failed",
                    &volume.spec.name,
                    &format!(": {error}"),
                );
                for pod in &volume.scheduled_pods {
                    self.recorder.event(
                        pod.as_ref(),
                        WARNING,
                        FAILED_ATTACH_VOLUME,
                        message.clone(),
                    );
                }
                tracing::warn!(controller = NAME, volume = %volume.unique_name, node = %volume.node, %error, "AttachVolume.Attach failed");
            }
        }
        self.metrics.operation(
            &volume.spec.plugin_label(),
            "volume_attach",
            result.is_ok(),
            started.elapsed().as_secs_f64(),
        );
        lock(&self.pending).finish(&key, result.is_ok(), Instant::now());
    }

    async fn run_detach(
        self: Arc<Self>,
        volume: AttachedVolume,
        verify_safe: bool,
        key: OperationKey,
    ) {
        let started = Instant::now();
        let mut result = Ok(());
        if verify_safe {
            result = self
                .attacher
                .verify_safe_to_detach(&volume.unique_name, &volume.node)
                .await;
        }
        if result.is_ok() {
            result = self
                .attacher
                .detach(&volume.unique_name, &volume.node)
                .await;
        }
        match &result {
            Ok(()) => {
                tracing::info!(controller = NAME, volume = %volume.unique_name, node = %volume.node, "DetachVolume.Detach succeeded");
                lock(&self.actual).mark_detached(&volume.unique_name, &volume.node);
            }
            Err(error) => {
                lock(&self.actual).mark_uncertain(
                    &volume.unique_name,
                    volume.spec.clone(),
                    &volume.node,
                );
                tracing::warn!(controller = NAME, volume = %volume.unique_name, node = %volume.node, %error, "DetachVolume.Detach failed");
            }
        }
        let plugin = volume
            .spec
            .as_ref()
            .map(|s| s.plugin_label())
            .unwrap_or_else(|| CSI_PLUGIN.to_string());
        self.metrics.operation(
            &plugin,
            "volume_detach",
            result.is_ok(),
            started.elapsed().as_secs_f64(),
        );
        lock(&self.pending).finish(&key, result.is_ok(), Instant::now());
    }

    /// `syncStates`: per node, forgets the attachments the driver no longer reports, so
    /// that the next passes attach them again if they are still wanted.
    pub(super) async fn verify_attached(&self) {
        let per_node = lock(&self.actual).attached_volumes_per_node();
        for (node, volumes) in per_node {
            let started = Instant::now();
            for volume in volumes {
                let Some(spec) = &volume.spec else {
                    continue;
                };
                let skip = super::volumes::skip_attach(&self.drivers, &spec.driver);
                if !self.attacher.is_attached(spec, &node, skip).await {
                    lock(&self.actual).mark_detached(&volume.unique_name, &node);
                    tracing::info!(controller = NAME, volume = %volume.unique_name, node = %node, "VerifyVolumesAreAttached determined volume is no longer attached to node, therefore it was marked as detached");
                }
            }
            self.metrics.operation(
                "<n/a>",
                "verify_volumes_are_attached_per_node",
                true,
                started.elapsed().as_secs_f64(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn detach_decisions() {
        let long = MAX_WAIT_FOR_UNMOUNT + Duration::from_secs(1);
        let short = Duration::from_secs(10);
        let normal = DetachDecision::Detach {
            verify_safe: true,
            forced: None,
        };
        let timeout = DetachDecision::Detach {
            verify_safe: false,
            forced: Some(ForceReason::Timeout),
        };
        let out_of_service = DetachDecision::Detach {
            verify_safe: false,
            forced: Some(ForceReason::OutOfService),
        };
        // (mounted, ready, waited, out-of-service) -> decision
        let cases = [
            (
                "unmounted: detach, verified",
                false,
                true,
                short,
                false,
                normal,
            ),
            (
                "mounted on a ready node: wait",
                true,
                true,
                short,
                false,
                DetachDecision::Wait,
            ),
            (
                "mounted on a ready node, long: wait",
                true,
                true,
                long,
                false,
                DetachDecision::Wait,
            ),
            (
                "mounted, node not ready, short: wait",
                true,
                false,
                short,
                false,
                DetachDecision::Wait,
            ),
            (
                "mounted, node not ready, 6 min: forced",
                true,
                false,
                long,
                false,
                timeout,
            ),
            (
                "mounted, out-of-service: forced",
                true,
                true,
                short,
                true,
                out_of_service,
            ),
            (
                "unmounted, 6 min on a ready node: unverified",
                false,
                true,
                long,
                false,
                timeout,
            ),
            (
                "out-of-service and 6 min: timeout first",
                true,
                false,
                long,
                true,
                timeout,
            ),
        ];
        for (what, mounted, ready, waited, oos, want) in cases {
            assert_eq!(detach_decision(mounted, ready, waited, oos), want, "{what}");
        }
    }

    #[test]
    fn multi_attach_messages() {
        let p = |ns: &str, name: &str| (ns.to_string(), name.to_string());
        let cases = [
            (vec![p("a", "p1")], "Volume is already used by pod(s) p1"),
            (vec![p("a", "p1"), p("a", "p2")], "Volume is already used by pod(s) p1, p2"),
            (
                vec![p("a", "p1"), p("b", "x"), p("c", "y")],
                "Volume is already used by pod(s) p1 and 2 pod(s) in different namespaces",
            ),
            (vec![p("b", "x")], "Volume is already used by 1 pod(s) in different namespaces"),
            (
                vec![],
                "Volume is already exclusively attached to one node and can't be attached to another",
            ),
        ];
        for (users, suffix) in cases {
            assert_eq!(
                multi_attach_message("pv", "a", &users),
                format!("Multi-Attach error for volume \"pv\" {suffix}")
            );
        }
    }

    #[test]
    fn attach_event_messages_are_upstreams() {
        assert_eq!(
            volume_message("AttachVolume.Attach succeeded", "pv", ""),
            "AttachVolume.Attach succeeded for volume \"pv\" "
        );
        assert_eq!(
            volume_message("AttachVolume.Attach failed", "pv", ": boom"),
            "AttachVolume.Attach failed for volume \"pv\" : boom"
        );
    }

    #[test]
    fn node_health() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"taints": [{"key": TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}}))
        .unwrap();
        assert!(!node_ready(&node));
        assert!(has_out_of_service_taint(&node));
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
        assert!(node_ready(&node));
        assert!(!has_out_of_service_taint(&node));
    }
}
