//! The scheduler's VolumeBinding plugin (kube-scheduler's `volumebinding`), the part that
//! matters to the storage controllers, with kube-scheduler's messages:
//!
//! - [`pre_filter`]: every claim a pod's volumes use must exist, not be lost or being
//!   deleted, and (for a generic ephemeral volume) be owned by the pod; claims not yet
//!   bound must be WaitForFirstConsumer ones (`pod has unbound immediate
//!   PersistentVolumeClaims`).
//! - [`filter`](fn@filter), per node: the volumes of bound claims must allow the node
//!   (`node(s) had volume node affinity conflict`); each WaitForFirstConsumer claim needs an
//!   Available volume that fits it and the node, or a class that can provision there
//!   (`node(s) didn't find available persistent volumes to bind`).
//! - Binding (in the scheduler's loop): a matched volume gets the claim as its claimRef and
//!   `pv.kubernetes.io/bound-by-controller: "yes"` (`PUT pv`), a claim to provision gets
//!   `volume.kubernetes.io/selected-node` (`PUT pvc`); the pod is bound once
//!   [`check_bindings`] says every claim is fully bound (the binder's
//!   `pv.kubernetes.io/bind-completed`), or scheduled again if provisioning gave up.
//!
//! Everything here is pure over a [`StorageLookup`].
//!
//! The modules follow the plugin's extension points: [`claims`] (PreFilter), [`matching`]
//! (volumes against claims and nodes), [`filter`](mod@filter) and [`progress`] (after
//! PreBind).

mod claims;
mod filter;
mod matching;
mod progress;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

pub use claims::{ephemeral_owner_error, is_fully_bound, pod_claims, pre_filter, PodClaims};
pub use filter::{filter, PodVolumes};
pub use matching::{
    find_matching_volume, is_volume_bound_to_claim, selector_matches, volume_fits_node,
};
pub use progress::{check_bindings, Progress, Written};

use super::csi::{self, StorageStores};

pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// A class with this provisioner cannot provision.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// What the plugin reads.
pub trait StorageLookup {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    fn class(&self, name: &str) -> Option<Arc<StorageClass>>;
    /// The volumes of a class (`""` for the volumes without one).
    fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>>;
}

impl StorageLookup for StorageStores {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        StorageStores::claim(self, namespace, name)
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        StorageStores::volume(self, name)
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        StorageStores::class(self, name)
    }
    fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.volumes
            .state()
            .into_iter()
            .filter(|v| csi::volume_class(v) == class)
            .collect()
    }
}

#[cfg(test)]
mod tests;
