//! The Recreate strategy (upstream `recreate.go`): scale every old ReplicaSet to zero,
//! wait until none of their pods runs, then create and scale up the new one.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::{all_of, PodMap};
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
        let mut scaled_down = false;
        for rs in old.iter_mut().filter(|rs| replica_set_replicas(rs) > 0) {
            let (scaled, updated) = self.scale_replica_set_and_record_event(rs, 0, d).await?;
            if scaled {
                *rs = updated;
                scaled_down = true;
            }
        }
        if scaled_down {
            return self.sync_rollout_status(&all, new_rs.as_ref(), d).await;
        }
        if old_pods_running(new_rs.as_ref(), &old, pod_map) {
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
            self.scale_replica_set_and_record_event(rs, deployment_replicas(d), d)
                .await?;
        }
        let status = d.status.clone().unwrap_or_default();
        if util::deployment_complete(d, &status) {
            self.cleanup_deployment(&old, d).await?;
        }
        self.sync_rollout_status(&all, new_rs.as_ref(), d).await
    }
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
