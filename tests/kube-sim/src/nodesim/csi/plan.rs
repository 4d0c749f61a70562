//! A pass of csi-sim: [`Csi::plan`] decides what to do from the stores (leaving out what is
//! in flight or backing off), and [`Csi::act`] does one thing against the API server.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::ResourceExt;

use super::fields::{claim_class, claim_driver, volume_class};
use super::state::CsiState;
use super::{
    attach_decision, provision_decision, resize_decision, should_delete, volume_name,
    AttachDecision, Csi, ProvisionDecision, ResizeDecision, DRIVER,
};

/// One thing to do against the API server.
pub(super) enum Action {
    EnsureDrivers,
    EnsureCsiNode {
        node: String,
        uid: String,
    },
    ClassMissing {
        claim: Arc<PersistentVolumeClaim>,
        class: String,
    },
    ProvisionFail {
        claim: Arc<PersistentVolumeClaim>,
        class: String,
        message: String,
    },
    Provision {
        claim: Arc<PersistentVolumeClaim>,
        class: Arc<StorageClass>,
        driver: String,
        zone: Option<String>,
    },
    Delete(Arc<PersistentVolume>),
    Resize {
        claim: Arc<PersistentVolumeClaim>,
        volume: Arc<PersistentVolume>,
        size: String,
    },
    Attach(Arc<VolumeAttachment>, AttachDecision),
}

impl Action {
    fn key(&self) -> String {
        match self {
            Action::EnsureDrivers => "drivers".into(),
            Action::EnsureCsiNode { uid, .. } => format!("csinode/{uid}"),
            Action::ClassMissing { claim, .. }
            | Action::ProvisionFail { claim, .. }
            | Action::Provision { claim, .. } => {
                format!(
                    "provision/{}",
                    claim.metadata.uid.as_deref().unwrap_or_default()
                )
            }
            Action::Delete(volume) => format!("delete/{}", volume.name_any()),
            Action::Resize { claim, .. } => {
                format!(
                    "resize/{}",
                    claim.metadata.uid.as_deref().unwrap_or_default()
                )
            }
            Action::Attach(va, _) => format!("attach/{}", va.name_any()),
        }
    }
}

impl Csi {
    /// Decides what to do on this pass, leaving out what is in flight or backing off.
    pub(super) fn plan(&self) -> Vec<Action> {
        let mut actions = Vec::new();
        let mut st = self.state();
        if !st.drivers_created {
            actions.push(Action::EnsureDrivers);
        }
        for node in self.nodes.state() {
            let name = node.name_any();
            let uid = node.metadata.uid.clone().unwrap_or_default();
            if self.shared.is_ours(&name) && !uid.is_empty() && !st.csinodes.contains(&uid) {
                actions.push(Action::EnsureCsiNode { node: name, uid });
            }
        }
        self.plan_claims(&mut st, &mut actions);
        self.plan_volumes(&mut st, &mut actions);
        self.plan_attachments(&mut st, &mut actions);
        actions.retain(|a| {
            let key = a.key();
            !st.in_flight.contains(&key) && !st.backing_off(&key)
        });
        for action in &actions {
            st.in_flight.insert(action.key());
        }
        actions
    }

    /// external-provisioner's and external-resizer's part: a volume for each claim handed
    /// to one of the drivers, a bigger one for each claim asking for more.
    fn plan_claims(&self, st: &mut CsiState, actions: &mut Vec<Action>) {
        let is_ours = |n: &str| self.shared.is_ours(n);
        let mut live_claims = HashSet::new();
        for claim in self.stores.claims.state() {
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            live_claims.insert(uid.clone());
            let class_name = claim_class(&claim);
            let class = self.stores.class(&class_name);
            let provision_key = format!("provision/{uid}");
            if claim_driver(&claim).is_some() && !st.provisioned.contains(&uid) {
                let exists = self.stores.volume(&volume_name(&claim)).is_some();
                let since = st
                    .first_ready
                    .get(&provision_key)
                    .copied()
                    .unwrap_or_else(Instant::now);
                let decision =
                    provision_decision(&claim, class.as_deref(), &is_ours, exists, since);
                // The delay knob counts from when the claim was first ready to provision
                // (for WaitForFirstConsumer, from the selected node).
                if !matches!(
                    decision,
                    ProvisionDecision::Skip | ProvisionDecision::ClassMissing(_)
                ) {
                    st.first_ready.entry(provision_key.clone()).or_insert(since);
                }
                match decision {
                    ProvisionDecision::Skip | ProvisionDecision::WaitUntil(_) => {}
                    ProvisionDecision::ClassMissing(class) => actions.push(Action::ClassMissing {
                        claim: claim.clone(),
                        class,
                    }),
                    ProvisionDecision::Fail(message) => actions.push(Action::ProvisionFail {
                        claim: claim.clone(),
                        class: class_name.clone(),
                        message,
                    }),
                    ProvisionDecision::Provision { driver, node } => {
                        if let Some(class) = class.clone() {
                            let zone = node.as_deref().and_then(|n| self.zone_of(n));
                            actions.push(Action::Provision {
                                claim: claim.clone(),
                                class,
                                driver,
                                zone,
                            });
                        }
                    }
                }
            }
            let volume_name = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            let volume = (!volume_name.is_empty())
                .then(|| self.stores.volume(&volume_name))
                .flatten();
            match resize_decision(&claim, volume.as_deref()) {
                ResizeDecision::Resize(size) => {
                    if st.resized.get(&uid) != Some(&size) {
                        if let Some(volume) = volume {
                            actions.push(Action::Resize {
                                claim: claim.clone(),
                                volume,
                                size,
                            });
                        }
                    }
                }
                ResizeDecision::Skip => {
                    st.resized.remove(&uid);
                }
            }
        }
        st.provisioned.retain(|uid| live_claims.contains(uid));
        st.first_ready.retain(|key, _| {
            key.strip_prefix("provision/")
                .is_none_or(|uid| live_claims.contains(uid))
        });
    }

    /// The Released volumes the provisioner deletes.
    fn plan_volumes(&self, st: &mut CsiState, actions: &mut Vec<Action>) {
        let mut live_volumes = HashSet::new();
        for volume in self.stores.volumes.state() {
            let name = volume.name_any();
            live_volumes.insert(name.clone());
            let namespace = volume
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.namespace.as_deref());
            if should_delete(&volume) && self.watches(namespace) && !st.deleted.contains(&name) {
                actions.push(Action::Delete(volume));
            }
        }
        st.deleted.retain(|name| live_volumes.contains(name));
    }

    /// external-attacher's part: the VolumeAttachments of [`DRIVER`].
    fn plan_attachments(&self, st: &mut CsiState, actions: &mut Vec<Action>) {
        let mut live_attachments = HashSet::new();
        for va in self.attachments.state() {
            let key = format!("attach/{}", va.name_any());
            live_attachments.insert(key.clone());
            let volume = va
                .spec
                .source
                .persistent_volume_name
                .as_deref()
                .and_then(|name| self.stores.volume(name));
            let claim = volume
                .as_ref()
                .and_then(|v| v.spec.as_ref())
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| {
                    self.stores
                        .claim(r.namespace.as_deref()?, r.name.as_deref()?)
                });
            let class = volume
                .as_deref()
                .map(volume_class)
                .and_then(|c| self.stores.class(&c));
            let since = st.ready_since(&key);
            match attach_decision(&va, claim.as_deref(), class.as_deref(), since) {
                AttachDecision::Skip | AttachDecision::WaitUntil(_) => {}
                decision => actions.push(Action::Attach(va.clone(), decision)),
            }
        }
        st.first_ready
            .retain(|key, _| !key.starts_with("attach/") || live_attachments.contains(key));
    }

    pub(super) async fn act(&self, action: Action) {
        let key = action.key();
        let result = match action {
            Action::EnsureDrivers => self.ensure_drivers().await,
            Action::EnsureCsiNode { node, uid } => self.ensure_csi_node(&node, &uid).await,
            Action::ClassMissing { claim, class } => {
                self.claim_event(
                    &claim,
                    claim_driver(&claim).unwrap_or(DRIVER),
                    "Warning",
                    "ProvisioningFailed",
                    &format!("storageclass.storage.k8s.io \"{class}\" not found"),
                )
                .await;
                Err(format!("class {class} not found"))
            }
            Action::ProvisionFail {
                claim,
                class,
                message,
            } => {
                let driver = claim_driver(&claim).unwrap_or(DRIVER).to_string();
                self.provisioning_event(&claim, &driver).await;
                self.claim_event(
                    &claim,
                    &driver,
                    "Warning",
                    "ProvisioningFailed",
                    &format!("failed to provision volume with StorageClass \"{class}\": rpc error: code = Internal desc = {message}"),
                )
                .await;
                Err(message)
            }
            Action::Provision {
                claim,
                class,
                driver,
                zone,
            } => {
                self.provision(&claim, &class, &driver, zone.as_deref())
                    .await
            }
            Action::Delete(volume) => self.delete(&volume).await,
            Action::Resize {
                claim,
                volume,
                size,
            } => self.resize(&claim, &volume, &size).await,
            Action::Attach(va, decision) => self.attach(&va, decision).await,
        };
        let mut st = self.state();
        st.in_flight.remove(&key);
        match result {
            Ok(()) => st.succeeded(&key),
            Err(error) => {
                tracing::debug!(operation = %key, %error, "csi-sim operation failed; retrying");
                st.failed(&key);
            }
        }
    }
}
