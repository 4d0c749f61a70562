//! The Recreate strategy (upstream `recreate.go`): scale every old ReplicaSet to zero,
//! wait until none of their pods runs, then create and scale up the new one.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::control::ReplicaSetControl;
use super::sync::{all_of, scale_replica_set_and_record_event, PodMap};
use super::util::{self, deployment_replicas, replica_set_replicas};
use super::Controller;

impl Controller {
    pub(super) async fn rollout_recreate(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
        pod_map: &PodMap,
    ) -> anyhow::Result<()> {
        let (mut new_rs, mut old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, false)
            .await?;
        let mut all = all_of(&new_rs, &old);
        if !recreate_old_replica_sets(self, &mut old, new_rs.as_ref(), pod_map, d).await? {
            return self.sync_rollout_status(&all, new_rs.as_ref(), d).await;
        }
        if new_rs.is_none() {
            let (created, refreshed_old) = self
                .get_all_replica_sets_and_sync_revision(d, rs_list, true)
                .await?;
            new_rs = created;
            old = refreshed_old;
            all = all_of(&new_rs, &old);
        }
        if let Some(rs) = new_rs.as_ref() {
            scale_up_new_replica_set_for_recreate(self, rs, d).await?;
        }
        let status = d.status.clone().unwrap_or_default();
        if util::deployment_complete(d, &status) {
            self.cleanup_deployment(&old, d).await?;
        }
        self.sync_rollout_status(&all, new_rs.as_ref(), d).await
    }
}

/// The first half of a Recreate pass: scales every active old ReplicaSet to zero
/// (keeping what was written in `old`). Returns whether the pass may go on to the new
/// ReplicaSet: not when it scaled something down, nor while an old pod may still run.
pub(super) async fn recreate_old_replica_sets<W: ReplicaSetControl>(
    control: &W,
    old: &mut [ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    pod_map: &PodMap,
    d: &Deployment,
) -> anyhow::Result<bool> {
    if scale_down_old_replica_sets_for_recreate(control, old, d).await? {
        return Ok(false);
    }
    Ok(!old_pods_running(new_rs, old, pod_map))
}

/// Scales the active old ReplicaSets to zero; returns whether any was scaled.
pub(super) async fn scale_down_old_replica_sets_for_recreate<W: ReplicaSetControl>(
    control: &W,
    old: &mut [ReplicaSet],
    d: &Deployment,
) -> anyhow::Result<bool> {
    let mut scaled_down = false;
    for rs in old.iter_mut().filter(|rs| replica_set_replicas(rs) > 0) {
        let (scaled, updated) = scale_replica_set_and_record_event(control, rs, 0, d).await?;
        if scaled {
            *rs = updated;
            scaled_down = true;
        }
    }
    Ok(scaled_down)
}

/// Scales the new ReplicaSet to the Deployment's size; returns whether it scaled.
pub(super) async fn scale_up_new_replica_set_for_recreate<W: ReplicaSetControl>(
    control: &W,
    new_rs: &ReplicaSet,
    d: &Deployment,
) -> anyhow::Result<bool> {
    let (scaled, _) =
        scale_replica_set_and_record_event(control, new_rs, deployment_replicas(d), d).await?;
    Ok(scaled)
}

/// Whether any pod of an old ReplicaSet may still be running (anything but Succeeded
/// or Failed counts, Unknown included).
pub(super) fn old_pods_running(
    new_rs: Option<&ReplicaSet>,
    old: &[ReplicaSet],
    pod_map: &PodMap,
) -> bool {
    if util::get_actual_replica_count_for_replica_sets(old) > 0 {
        return true;
    }
    let new_uid = new_rs.and_then(|rs| rs.metadata.uid.as_deref());
    pod_map.iter().any(|(uid, pods)| {
        Some(uid.as_str()) != new_uid
            && pods.iter().any(|pod| {
                let phase = crate::pods::phase(pod);
                phase != "Failed" && phase != "Succeeded"
            })
    })
}
