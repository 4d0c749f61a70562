//! The RollingUpdate strategy (upstream `rolling.go`): grow the new ReplicaSet within
//! maxSurge, shrink the old ones within maxUnavailable (unhealthy old pods first), and
//! clean up once complete.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::control::ReplicaSetControl;
use super::sync::{all_of, scale_replica_set_and_record_event};
use super::util::{self, deployment_replicas, replica_set_replicas};
use super::Controller;

fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

impl Controller {
    pub(super) async fn rollout_rolling(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
    ) -> anyhow::Result<()> {
        let (new_rs, old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, true)
            .await?;
        let Some(new_rs) = new_rs else {
            anyhow::bail!("no new replica set after creating one");
        };
        let all = all_of(&Some(new_rs.clone()), &old);
        if reconcile_new_replica_set(self, &all, &new_rs, d).await? {
            return self.sync_rollout_status(&all, Some(&new_rs), d).await;
        }
        let active_old: Vec<ReplicaSet> = old
            .iter()
            .filter(|rs| replica_set_replicas(rs) > 0)
            .cloned()
            .collect();
        if reconcile_old_replica_sets(self, &all, active_old, &new_rs, d).await? {
            return self.sync_rollout_status(&all, Some(&new_rs), d).await;
        }
        let status = d.status.clone().unwrap_or_default();
        if util::deployment_complete(d, &status) {
            self.cleanup_deployment(&old, d).await?;
        }
        self.sync_rollout_status(&all, Some(&new_rs), d).await
    }
}

/// Moves the new ReplicaSet toward the Deployment's size: down at once when it is
/// larger, up as far as maxSurge allows. Returns whether it scaled.
pub(super) async fn reconcile_new_replica_set<W: ReplicaSetControl>(
    control: &W,
    all: &[ReplicaSet],
    new_rs: &ReplicaSet,
    d: &Deployment,
) -> anyhow::Result<bool> {
    let replicas = deployment_replicas(d);
    let current = replica_set_replicas(new_rs);
    if current == replicas {
        return Ok(false);
    }
    if current > replicas {
        let (scaled, _) = scale_replica_set_and_record_event(control, new_rs, replicas, d).await?;
        return Ok(scaled);
    }
    let wanted = util::new_rs_new_replicas(d, all, new_rs).map_err(anyhow::Error::msg)?;
    let (scaled, _) = scale_replica_set_and_record_event(control, new_rs, wanted, d).await?;
    Ok(scaled)
}

/// Shrinks the old ReplicaSets as far as maxUnavailable allows, counting the new
/// ReplicaSet's unavailable pods against the budget. Returns whether anything scaled.
pub(super) async fn reconcile_old_replica_sets<W: ReplicaSetControl>(
    control: &W,
    all: &[ReplicaSet],
    old: Vec<ReplicaSet>,
    new_rs: &ReplicaSet,
    d: &Deployment,
) -> anyhow::Result<bool> {
    let old_pods = util::get_replica_count_for_replica_sets(&old);
    if old_pods == 0 {
        return Ok(false);
    }
    let all_pods = util::get_replica_count_for_replica_sets(all);
    let min_available = deployment_replicas(d) - util::max_unavailable(d);
    let new_unavailable = replica_set_replicas(new_rs) - available(new_rs);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Ok(false);
    }
    // Upstream swallows these errors (returns "nothing scaled") and lets the next
    // sync retry.
    let Ok((old, cleaned)) = cleanup_unhealthy_replicas(control, old, d, max_scaled_down).await
    else {
        return Ok(false);
    };
    let all = all_of(&Some(new_rs.clone()), &old);
    let Ok(scaled_down) =
        scale_down_old_replica_sets_for_rolling_update(control, &all, old, d).await
    else {
        return Ok(false);
    };
    Ok(cleaned + scaled_down > 0)
}

/// Scales down old ReplicaSets by their unavailable pods first: removing a pod that
/// serves nothing costs no availability.
pub(super) async fn cleanup_unhealthy_replicas<W: ReplicaSetControl>(
    control: &W,
    mut old: Vec<ReplicaSet>,
    d: &Deployment,
    max_cleanup: i32,
) -> anyhow::Result<(Vec<ReplicaSet>, i32)> {
    util::sort_replica_sets_by_creation_timestamp(&mut old);
    let mut total = 0;
    for rs in old.iter_mut() {
        if total >= max_cleanup {
            break;
        }
        let replicas = replica_set_replicas(rs);
        if replicas == 0 || replicas == available(rs) {
            continue;
        }
        let count = (max_cleanup - total).min(replicas - available(rs));
        let (_, updated) =
            scale_replica_set_and_record_event(control, rs, replicas - count, d).await?;
        total += count;
        *rs = updated;
    }
    Ok((old, total))
}

/// Scales the old ReplicaSets down, oldest first, by as many pods as are available
/// beyond the minimum. Returns how many replicas were taken away.
pub(super) async fn scale_down_old_replica_sets_for_rolling_update<W: ReplicaSetControl>(
    control: &W,
    all: &[ReplicaSet],
    mut old: Vec<ReplicaSet>,
    d: &Deployment,
) -> anyhow::Result<i32> {
    let min_available = deployment_replicas(d) - util::max_unavailable(d);
    let available_pods = util::get_available_replica_count_for_replica_sets(all);
    if available_pods <= min_available {
        return Ok(0);
    }
    util::sort_replica_sets_by_creation_timestamp(&mut old);
    let target = available_pods - min_available;
    let mut total = 0;
    for rs in &old {
        if total >= target {
            break;
        }
        let replicas = replica_set_replicas(rs);
        if replicas == 0 {
            continue;
        }
        let count = replicas.min(target - total);
        scale_replica_set_and_record_event(control, rs, replicas - count, d).await?;
        total += count;
    }
    Ok(total)
}
