//! `syncClaim`: what to do with a claim, decided by [`decide_unbound_claim`] and
//! [`decide_bound_claim`] from the controller's caches, then done.
//!
//! A claim without `pv.kubernetes.io/bind-completed` is being bound: with no volumeName it
//! takes the best matching volume, or else gets the default class (once, when it has
//! none), waits for its first consumer, is provisioned, or stays Pending saying why; with
//! a volumeName (the user's choice) it is bound to that volume if the volume fits and is
//! free or already reserved for it. A claim bound before is checked: it becomes `Lost`
//! when its volume is gone or bound to another claim, else the bind is re-run (a no-op
//! when everything is in place).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use tracing::debug;

use crate::meta::ResourceNames;
use crate::recorder::{NORMAL, WARNING};
use crate::volume_util::{claim_class, default_class, is_pod_terminated, PVC_INDEX};

use super::helpers::{
    claim_has_class, claim_key, claim_ref_key, claim_volume_name, has_annotation,
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, CLAIM_LOST, CLAIM_PENDING,
};
use super::index::{check_volume_satisfy_claim, find_best_match_for_claim};
use super::Controller;

/// An event about the claim: (type, reason, message).
pub(super) type ClaimEvent = (&'static str, &'static str, String);

/// What an unbound claim needs.
#[derive(Debug)]
pub(super) enum UnboundClaim {
    /// Bind it to this volume; `matched` when the controller chose the volume (the end of
    /// a provision-and-bind for the operation metric).
    Bind {
        volume: Arc<PersistentVolume>,
        matched: bool,
    },
    /// Give it the default class, then sync again.
    AssignDefaultClass(String),
    /// Provision a volume for it.
    Provision,
    /// Say why (when there is something to say), and keep it Pending.
    Pending(Option<ClaimEvent>),
    /// It names a volume the controller bound to another claim: say so and fail.
    Misbound { event: ClaimEvent, error: String },
}

/// `IsDelayBindingMode`: the claim's class waits for the first consumer. An unknown class
/// does not; a class without a binding mode is an error.
fn delay_binding(
    claim: &PersistentVolumeClaim,
    classes: &[Arc<StorageClass>],
) -> Result<bool, String> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Some(class) = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()))
    else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {class_name:?}"
        )),
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
    }
}

/// `emitEventForUnboundDelayBindingClaim`'s event, given the names of the unscheduled
/// pods that use the claim.
fn wait_for_consumer_event(unscheduled_pods: &[String]) -> ClaimEvent {
    match unscheduled_pods {
        [] => (
            NORMAL,
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding".into(),
        ),
        [pod] => (
            NORMAL,
            "WaitForPodScheduled",
            format!("waiting for pod {pod} to be scheduled"),
        ),
        pods => (
            NORMAL,
            "WaitForPodScheduled",
            format!("waiting for pods {} to be scheduled", pods.join(",")),
        ),
    }
}

/// `syncUnboundClaim`'s decision. `volumes` is the controller's volume cache, `classes`
/// the StorageClasses, `unscheduled_pods` the names of the claim's non-terminated pods
/// that have no node yet.
pub(super) fn decide_unbound_claim(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    classes: &[Arc<StorageClass>],
    unscheduled_pods: &[String],
) -> Result<UnboundClaim, String> {
    let requested = claim_volume_name(claim);
    if requested.is_empty() {
        let delay = delay_binding(claim, classes)?;
        let found = find_best_match_for_claim(volumes, claim, delay).map_err(|error| {
            format!("error finding PV for claim {:?}: {error}", claim_key(claim))
        })?;
        if let Some(volume) = found {
            return Ok(UnboundClaim::Bind {
                volume,
                matched: true,
            });
        }
        if !claim_has_class(claim) {
            if let Some(class) = default_class(classes.iter().map(|c| c.as_ref())) {
                return Ok(UnboundClaim::AssignDefaultClass(
                    class.name_str().to_string(),
                ));
            }
        }
        if delay && !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
            return Ok(UnboundClaim::Pending(Some(wait_for_consumer_event(
                unscheduled_pods,
            ))));
        }
        if !claim_class(claim).is_empty() {
            return Ok(UnboundClaim::Provision);
        }
        return Ok(UnboundClaim::Pending(Some((
            NORMAL,
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set".into(),
        ))));
    }
    let Some(volume) = volumes
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some(requested))
    else {
        // The user asked for a volume that does not exist (yet): retried at the resync.
        return Ok(UnboundClaim::Pending(None));
    };
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    if claim_ref.is_none() {
        return Ok(match check_volume_satisfy_claim(volume, claim) {
            Err(why) => UnboundClaim::Pending(Some((
                WARNING,
                "VolumeMismatch",
                format!("Cannot bind to requested volume {requested:?}: {why}"),
            ))),
            Ok(()) => UnboundClaim::Bind {
                volume: volume.clone(),
                matched: false,
            },
        });
    }
    if super::helpers::is_volume_bound_to_claim(volume, claim) {
        return Ok(UnboundClaim::Bind {
            volume: volume.clone(),
            matched: false,
        });
    }
    let event = (
        WARNING,
        "FailedBinding",
        format!("volume {requested:?} already bound to a different claim."),
    );
    if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
        return Ok(UnboundClaim::Pending(Some(event)));
    }
    // Someone removed bind-completed from a claim the controller bound.
    Ok(UnboundClaim::Misbound {
        error: format!(
            "invalid binding of claim {:?} to volume {requested:?}: volume already claimed by {:?}",
            claim_key(claim),
            claim_ref_key(volume).unwrap_or_default()
        ),
        event,
    })
}

/// What a claim bound before needs.
#[derive(Debug)]
pub(super) enum BoundClaim {
    /// It is `Lost`, with this event (when it becomes so).
    Lost(ClaimEvent),
    /// Re-run the bind with its volume (it does nothing when all is in place).
    Bind(Arc<PersistentVolume>),
}

/// `syncBoundClaim`'s decision; `volume` is the cached volume the claim names.
pub(super) fn decide_bound_claim(
    claim: &PersistentVolumeClaim,
    volume: Option<&Arc<PersistentVolume>>,
) -> BoundClaim {
    if claim_volume_name(claim).is_empty() {
        return BoundClaim::Lost((
            WARNING,
            "ClaimLost",
            "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
                .into(),
        ));
    }
    let Some(volume) = volume else {
        return BoundClaim::Lost((
            WARNING,
            "ClaimLost",
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!".into(),
        ));
    };
    match super::helpers::claim_ref_uid(volume) {
        // Unbound volume (or our own write not seen yet): bind again.
        None => BoundClaim::Bind(volume.clone()),
        Some(uid) if uid == super::helpers::uid(&claim.metadata) => {
            BoundClaim::Bind(volume.clone())
        }
        Some(_) => BoundClaim::Lost((
            WARNING,
            "ClaimMisbound",
            "Two claims are bound to the same volume, this one is bound incorrectly".into(),
        )),
    }
}

/// The names of the pods that use a claim, have no node and are not terminated.
pub(super) fn unscheduled_pods(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter()
        .filter(|pod| !is_pod_terminated(pod))
        .filter(|pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or_default()
                .is_empty()
        })
        .map(|pod| pod.name_str().to_string())
        .collect()
}

impl Controller {
    /// `syncClaim`.
    pub(super) async fn sync_claim(
        self: &Arc<Self>,
        claim: Arc<PersistentVolumeClaim>,
    ) -> anyhow::Result<()> {
        debug!(controller = super::NAME, claim = %claim_key(&claim), "synchronizing PersistentVolumeClaim");
        let claim = self.update_claim_migration_annotations(claim).await?;
        if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
            self.sync_bound_claim(claim).await
        } else {
            self.sync_unbound_claim(claim).await
        }
    }

    async fn sync_unbound_claim(
        self: &Arc<Self>,
        claim: Arc<PersistentVolumeClaim>,
    ) -> anyhow::Result<()> {
        let key = claim_key(&claim);
        let pods = self.pods.by_index(PVC_INDEX, &key);
        let decision = decide_unbound_claim(
            &claim,
            &self.volumes.list(),
            &self.classes.list(),
            &unscheduled_pods(&pods),
        )
        .map_err(anyhow::Error::msg)?;
        debug!(controller = super::NAME, claim = %key, ?decision, "unbound claim");
        match decision {
            UnboundClaim::Bind { volume, matched } => {
                let bound = self.bind(&volume, &claim).await;
                if matched {
                    self.timestamps.record(&key, bound.is_err(), &self.metrics);
                }
                bound
            }
            UnboundClaim::AssignDefaultClass(class) => {
                let mut updated = claim.as_ref().clone();
                updated
                    .spec
                    .get_or_insert_with(Default::default)
                    .storage_class_name = Some(class.clone());
                match self.save_claim(&updated).await {
                    Ok(_) => {
                        debug!(controller = super::NAME, claim = %key, class = %class, "assigned the default StorageClass");
                        self.metrics.retroactive_storage_class(true);
                        Ok(())
                    }
                    Err(error) => {
                        self.metrics.retroactive_storage_class(false);
                        Err(error.context(format!("can't update PersistentVolumeClaim[{key:?}]")))
                    }
                }
            }
            UnboundClaim::Provision => {
                self.provision_claim(claim).await;
                Ok(())
            }
            UnboundClaim::Pending(event) => {
                if let Some((event_type, reason, message)) = event {
                    self.recorder
                        .event(claim.as_ref(), event_type, reason, message);
                }
                self.update_claim_status(&claim, CLAIM_PENDING, None)
                    .await?;
                Ok(())
            }
            UnboundClaim::Misbound {
                event: (event_type, reason, message),
                error,
            } => {
                self.recorder
                    .event(claim.as_ref(), event_type, reason, message);
                Err(anyhow::Error::msg(error))
            }
        }
    }

    async fn sync_bound_claim(
        self: &Arc<Self>,
        claim: Arc<PersistentVolumeClaim>,
    ) -> anyhow::Result<()> {
        let volume = self.volumes.get(claim_volume_name(&claim));
        match decide_bound_claim(&claim, volume.as_ref()) {
            BoundClaim::Lost(event) => {
                let (event_type, reason, message) = event;
                self.update_claim_status_with_event(
                    &claim,
                    CLAIM_LOST,
                    (event_type, reason, &message),
                )
                .await?;
                Ok(())
            }
            BoundClaim::Bind(volume) => self.bind(&volume, &claim).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::{claim_ref, pv, pvc};
    use super::*;
    use serde_json::json;

    fn class(name: &str, overlay: serde_json::Value) -> Arc<StorageClass> {
        let mut value = json!({
            "metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "provisioner": "example.com/none",
            "volumeBindingMode": "Immediate",
        });
        super::super::helpers::fixtures::merge(&mut value, overlay);
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn default_annotation() -> serde_json::Value {
        json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}})
    }

    fn describe(decision: &Result<UnboundClaim, String>) -> String {
        match decision {
            Ok(UnboundClaim::Bind { volume, matched }) => {
                format!("bind {} matched={matched}", volume.name_str())
            }
            Ok(UnboundClaim::AssignDefaultClass(class)) => format!("assign {class}"),
            Ok(UnboundClaim::Provision) => "provision".into(),
            Ok(UnboundClaim::Pending(None)) => "pending".into(),
            Ok(UnboundClaim::Pending(Some((t, reason, message)))) => {
                format!("pending {t} {reason}: {message}")
            }
            Ok(UnboundClaim::Misbound { event, error }) => {
                format!("misbound {}: {error}", event.2)
            }
            Err(error) => format!("error {error}"),
        }
    }

    /// (what, the claim, volumes, classes, unscheduled pods, the decision described)
    type UnboundCase = (
        &'static str,
        PersistentVolumeClaim,
        Vec<PersistentVolume>,
        Vec<Arc<StorageClass>>,
        Vec<String>,
        &'static str,
    );

    #[test]
    fn unbound_claim_table() {
        let wffc = class("wffc", json!({"volumeBindingMode": "WaitForFirstConsumer"}));
        let immediate = class("fast", json!({}));
        let no_mode = class("nomode", json!({"volumeBindingMode": null}));
        let standard = class("standard", default_annotation());
        let cases: Vec<UnboundCase> = vec![
            (
                "a match binds",
                pvc("c1", "1Gi", json!({})),
                vec![pv("a", "10Gi", json!({})), pv("b", "2Gi", json!({}))],
                vec![],
                vec![],
                "bind b matched=true",
            ),
            (
                "no match, no class: FailedBinding",
                pvc("c1", "1Gi", json!({})),
                vec![pv("a", "500Mi", json!({}))],
                vec![standard.clone()],
                vec![],
                "pending Normal FailedBinding: no persistent volumes available for this claim and no storage class is set",
            ),
            (
                "no class at all: the default class is assigned",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": null}})),
                vec![],
                vec![immediate.clone(), standard.clone()],
                vec![],
                "assign standard",
            ),
            (
                "no class and no default class: FailedBinding",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": null}})),
                vec![],
                vec![immediate.clone()],
                vec![],
                "pending Normal FailedBinding: no persistent volumes available for this claim and no storage class is set",
            ),
            (
                "a class: provision",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "fast"}})),
                vec![],
                vec![immediate.clone()],
                vec![],
                "provision",
            ),
            (
                "a class that does not exist: provision (which says so)",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "missing"}})),
                vec![],
                vec![],
                vec![],
                "provision",
            ),
            (
                "delay binding without consumer",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "wffc"}})),
                vec![pv("a", "1Gi", json!({"spec": {"storageClassName": "wffc"}}))],
                vec![wffc.clone()],
                vec![],
                "pending Normal WaitForFirstConsumer: waiting for first consumer to be created before binding",
            ),
            (
                "delay binding with one unscheduled pod",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "wffc"}})),
                vec![],
                vec![wffc.clone()],
                vec!["p".into()],
                "pending Normal WaitForPodScheduled: waiting for pod p to be scheduled",
            ),
            (
                "delay binding with two",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "wffc"}})),
                vec![],
                vec![wffc.clone()],
                vec!["a".into(), "b".into()],
                "pending Normal WaitForPodScheduled: waiting for pods a,b to be scheduled",
            ),
            (
                "delay binding once a node is selected: provision",
                pvc("c1", "1Gi", json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n0"}}, "spec": {"storageClassName": "wffc"}})),
                vec![],
                vec![wffc.clone()],
                vec![],
                "provision",
            ),
            (
                "delay binding still binds a pre-bound volume",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "wffc"}})),
                vec![{
                    let mut overlay = claim_ref("c1", "");
                    overlay["spec"]["storageClassName"] = json!("wffc");
                    pv("mine", "1Gi", overlay)
                }],
                vec![wffc.clone()],
                vec![],
                "bind mine matched=true",
            ),
            (
                "a class without binding mode is an error",
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "nomode"}})),
                vec![],
                vec![no_mode],
                vec![],
                "error VolumeBindingMode not set for StorageClass \"nomode\"",
            ),
            (
                "requested volume missing: pending, no event",
                pvc("c1", "1Gi", json!({"spec": {"volumeName": "gone"}})),
                vec![],
                vec![],
                vec![],
                "pending",
            ),
            (
                "requested volume too small",
                pvc("c1", "1Gi", json!({"spec": {"volumeName": "pv-small"}})),
                vec![pv("pv-small", "100Mi", json!({}))],
                vec![],
                vec![],
                "pending Warning VolumeMismatch: Cannot bind to requested volume \"pv-small\": requested PV is too small",
            ),
            (
                "requested volume free and fitting, even not Available",
                pvc("c1", "1Gi", json!({"spec": {"volumeName": "v"}})),
                vec![pv("v", "1Gi", json!({"status": {"phase": "Pending"}}))],
                vec![],
                vec![],
                "bind v matched=false",
            ),
            (
                "requested volume pre-bound to it",
                pvc("c1", "1Gi", json!({"spec": {"volumeName": "v"}})),
                vec![pv("v", "1Gi", claim_ref("c1", ""))],
                vec![],
                vec![],
                "bind v matched=false",
            ),
            (
                "requested volume bound elsewhere",
                pvc("c1", "1Gi", json!({"spec": {"volumeName": "v"}})),
                vec![pv("v", "1Gi", claim_ref("other", "u"))],
                vec![],
                vec![],
                "pending Warning FailedBinding: volume \"v\" already bound to a different claim.",
            ),
            (
                "requested by the controller and bound elsewhere",
                pvc("c1", "1Gi", json!({"metadata": {"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}}, "spec": {"volumeName": "v"}})),
                vec![pv("v", "1Gi", claim_ref("other", "u"))],
                vec![],
                vec![],
                "misbound volume \"v\" already bound to a different claim.: invalid binding of claim \"ns/c1\" to volume \"v\": volume already claimed by \"ns/other\"",
            ),
        ];
        for (what, claim, volumes, classes, pods, want) in cases {
            let volumes: Vec<_> = volumes.into_iter().map(Arc::new).collect();
            let decision = decide_unbound_claim(&claim, &volumes, &classes, &pods);
            assert_eq!(describe(&decision), want, "{what}");
        }
    }

    #[test]
    fn bound_claim_table() {
        let bound = json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "v"}});
        let claim = pvc("c1", "1Gi", bound);
        let cases = [
            (pvc("c1", "1Gi", json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}})), None, "lost ClaimLost Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"),
            (claim.clone(), None, "lost ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!"),
            (claim.clone(), Some(pv("v", "1Gi", json!({}))), "bind v"),
            (claim.clone(), Some(pv("v", "1Gi", claim_ref("c1", "uid-c1"))), "bind v"),
            (claim.clone(), Some(pv("v", "1Gi", claim_ref("c1", "old"))), "lost ClaimMisbound Two claims are bound to the same volume, this one is bound incorrectly"),
        ];
        for (claim, volume, want) in cases {
            let volume = volume.map(Arc::new);
            let got = match decide_bound_claim(&claim, volume.as_ref()) {
                BoundClaim::Lost((_, reason, message)) => format!("lost {reason} {message}"),
                BoundClaim::Bind(volume) => format!("bind {}", volume.name_str()),
            };
            assert_eq!(got, want);
        }
    }

    #[test]
    fn unscheduled_pods_are_live_and_nodeless() {
        let pod = |name: &str, node: Option<&str>, phase: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": "ns"},
                    "spec": {"containers": [], "nodeName": node},
                    "status": {"phase": phase},
                }))
                .unwrap(),
            )
        };
        let pods = [
            pod("waiting", None, "Pending"),
            pod("running", Some("n"), "Running"),
            pod("done", None, "Succeeded"),
        ];
        assert_eq!(unscheduled_pods(&pods), vec!["waiting"]);
    }
}
