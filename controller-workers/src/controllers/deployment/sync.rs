//! The steps every Deployment sync shares (upstream `sync.go` and the sync dispatch of
//! `deployment_controller.go`): claim the ReplicaSets, find or create the new one with
//! its revision annotations, scale proportionally when the Deployment is resized,
//! clean up old ReplicaSets beyond revisionHistoryLimit, and write the status.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use tracing::debug;

use super::control::ReplicaSetControl;
use super::util::{self, deployment_replicas, replica_set_replicas};
use super::Controller;
use crate::api_errors::{is_namespace_terminating, is_not_found};
use crate::controller_ref::RefManager;
use crate::meta::ResourceNames;
use crate::pod_control::controller_ref;
use crate::recorder::{NORMAL, WARNING};
use crate::selector::Selector;
use crate::store::{split_key, CONTROLLER_UID_INDEX};

pub(super) type PodMap = HashMap<String, Vec<Arc<Pod>>>;

fn refs(list: &[ReplicaSet]) -> Vec<&ReplicaSet> {
    list.iter().collect()
}

/// `old` plus `new` (when there is one): upstream's `append(oldRSs, newRS)`.
pub(super) fn all_of(new_rs: &Option<ReplicaSet>, old: &[ReplicaSet]) -> Vec<ReplicaSet> {
    let mut all = old.to_vec();
    all.extend(new_rs.iter().cloned());
    all
}

impl Controller {
    pub(super) async fn sync_deployment(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(cached) = self.deployments.get_in(namespace, name) else {
            debug!(key, "deployment has been deleted");
            return Ok(());
        };
        let mut d = cached.as_ref().clone();
        let selector_spec = d.spec.as_ref().map(|spec| spec.selector.clone());
        let selector = Selector::from_label_selector(selector_spec.as_ref()).map_err(|error| {
            anyhow::anyhow!("deployment {key} has invalid label selector: {error}")
        })?;
        if selector.is_empty() {
            self.recorder.event(
                &d,
                WARNING,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            );
            let observed = d
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if observed < d.metadata.generation.unwrap_or(0) {
                d.status
                    .get_or_insert_with(Default::default)
                    .observed_generation = d.metadata.generation;
                // Best effort, as upstream.
                let _ = self.update_status(&mut d).await;
            }
            return Ok(());
        }
        let rs_list = self.replica_sets_for(&d, &selector).await?;
        let pod_map = self.pod_map(&rs_list);

        let result = if d.metadata.deletion_timestamp.is_some() {
            self.sync_status_only(&mut d, &rs_list).await
        } else {
            self.sync_live(&mut d, &rs_list, &pod_map).await
        };
        match result {
            // As upstream's handleErr: a namespace being deleted is no reason to retry.
            Err(error)
                if error
                    .chain()
                    .filter_map(|cause| cause.downcast_ref::<kube::Error>())
                    .any(is_namespace_terminating) =>
            {
                debug!(key, "namespace terminating; not retrying");
                Ok(())
            }
            other => other,
        }
    }

    async fn sync_live(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
        pod_map: &PodMap,
    ) -> anyhow::Result<()> {
        self.check_paused_conditions(d).await?;
        let paused = d
            .spec
            .as_ref()
            .and_then(|spec| spec.paused)
            .unwrap_or(false);
        if paused {
            return self.sync(d, rs_list).await;
        }
        if super::rollback::rollback_to(d).is_some() {
            return self.rollback(d, rs_list).await;
        }
        if self.is_scaling_event(d, rs_list).await? {
            return self.sync(d, rs_list).await;
        }
        let strategy = d
            .spec
            .as_ref()
            .and_then(|spec| spec.strategy.as_ref())
            .and_then(|strategy| strategy.type_.clone())
            .unwrap_or_else(|| util::ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE.into());
        match strategy.as_str() {
            util::RECREATE_DEPLOYMENT_STRATEGY_TYPE => {
                self.rollout_recreate(d, rs_list, pod_map).await
            }
            util::ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE => self.rollout_rolling(d, rs_list).await,
            other => anyhow::bail!("unexpected deployment strategy type: {other}"),
        }
    }

    /// The ReplicaSets this Deployment controls, after adopting matching orphans and
    /// releasing ones that stopped matching.
    async fn replica_sets_for(
        &self,
        d: &Deployment,
        selector: &Selector,
    ) -> anyhow::Result<Vec<ReplicaSet>> {
        let namespace = d.namespace_str().to_string();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let candidates = self.replica_sets.claim_candidates(&namespace, &uid);
        let manager = RefManager::new(
            d,
            controller_ref(d),
            selector,
            Api::<Deployment>::namespaced(self.client.clone(), &namespace),
        );
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        let (claimed, errors) = manager.claim(candidates, &api).await;
        if let Some(error) = errors.into_iter().next() {
            return Err(error.into());
        }
        Ok(claimed.iter().map(|rs| rs.as_ref().clone()).collect())
    }

    /// The pods of each ReplicaSet, by the ReplicaSet's UID.
    fn pod_map(&self, rs_list: &[ReplicaSet]) -> PodMap {
        rs_list
            .iter()
            .map(|rs| {
                let uid = rs.metadata.uid.clone().unwrap_or_default();
                let pods = self.pods.by_index(CONTROLLER_UID_INDEX, &uid);
                (uid, pods)
            })
            .collect()
    }

    pub(super) async fn sync_status_only(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
    ) -> anyhow::Result<()> {
        let (new_rs, old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, false)
            .await?;
        let all = all_of(&new_rs, &old);
        self.sync_deployment_status(&all, new_rs.as_ref(), d).await
    }

    /// Scaling only (paused, or resized): no new ReplicaSet is created.
    pub(super) async fn sync(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
    ) -> anyhow::Result<()> {
        let (new_rs, mut old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, false)
            .await?;
        self.scale(d, new_rs.as_ref(), &mut old).await?;
        let paused = d
            .spec
            .as_ref()
            .and_then(|spec| spec.paused)
            .unwrap_or(false);
        if paused && super::rollback::rollback_to(d).is_none() {
            self.cleanup_deployment(&old, d).await?;
        }
        let all = all_of(&new_rs, &old);
        self.sync_deployment_status(&all, new_rs.as_ref(), d).await
    }

    /// Records DeploymentPaused / DeploymentResumed in the Progressing condition.
    async fn check_paused_conditions(&self, d: &mut Deployment) -> anyhow::Result<()> {
        if !util::has_progress_deadline(d) {
            return Ok(());
        }
        let status = d.status.clone().unwrap_or_default();
        let condition = util::get_deployment_condition(&status, util::DEPLOYMENT_PROGRESSING);
        if condition.is_some_and(|c| c.reason.as_deref() == Some(util::TIMED_OUT_REASON)) {
            return Ok(());
        }
        let paused_condition =
            condition.is_some_and(|c| c.reason.as_deref() == Some(util::PAUSED_DEPLOY_REASON));
        let paused = d
            .spec
            .as_ref()
            .and_then(|spec| spec.paused)
            .unwrap_or(false);
        let (reason, message) = match (paused, paused_condition) {
            (true, false) => (util::PAUSED_DEPLOY_REASON, "Deployment is paused"),
            (false, true) => (util::RESUMED_DEPLOY_REASON, "Deployment is resumed"),
            _ => return Ok(()),
        };
        set_condition(
            d,
            util::DEPLOYMENT_PROGRESSING,
            util::CONDITION_UNKNOWN,
            reason,
            message,
        );
        self.update_status(d).await?;
        Ok(())
    }

    /// The new ReplicaSet (created when `create` and missing) and all the old ones, with
    /// the Deployment's revision kept in step.
    pub(super) async fn get_all_replica_sets_and_sync_revision(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
        create: bool,
    ) -> anyhow::Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let list = refs(rs_list);
        let (all_old, _) = util::find_old_replica_sets(d, &list);
        let old: Vec<ReplicaSet> = all_old.into_iter().cloned().collect();
        let new_rs = self.get_new_replica_set(d, rs_list, &old, create).await?;
        Ok((new_rs, old))
    }

    /// Resizes the ReplicaSets when the Deployment's size changed: all to the one active
    /// ReplicaSet, or proportionally to each one's share in the middle of a rollout.
    pub(super) async fn scale(
        &self,
        d: &Deployment,
        new_rs: Option<&ReplicaSet>,
        old: &mut [ReplicaSet],
    ) -> anyhow::Result<()> {
        let replicas = deployment_replicas(d);
        let old_refs: Vec<&ReplicaSet> = old.iter().collect();
        if let Some(target) = util::find_active_or_latest(new_rs, &old_refs) {
            if replica_set_replicas(target) == replicas {
                return Ok(());
            }
            let target = target.clone();
            self.scale_replica_set_and_record_event(&target, replicas, d)
                .await?;
            return Ok(());
        }
        if util::is_saturated(d, new_rs) {
            for rs in old.iter().filter(|rs| replica_set_replicas(rs) > 0) {
                self.scale_replica_set_and_record_event(rs, 0, d).await?;
            }
            return Ok(());
        }
        if !util::is_rolling_update(d) {
            return Ok(());
        }
        let mut all: Vec<ReplicaSet> = all_of(&new_rs.cloned(), old)
            .into_iter()
            .filter(|rs| replica_set_replicas(rs) > 0)
            .collect();
        let current = util::get_replica_count_for_replica_sets(&all);
        let allowed = if replicas > 0 {
            replicas + util::max_surge(d)
        } else {
            0
        };
        let to_add = allowed - current;
        let operation = match to_add.cmp(&0) {
            std::cmp::Ordering::Greater => {
                util::sort_replica_sets_by_size_newer(&mut all);
                "up"
            }
            std::cmp::Ordering::Less => {
                util::sort_replica_sets_by_size_older(&mut all);
                "down"
            }
            std::cmp::Ordering::Equal => "",
        };
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
        for rs in &all {
            if to_add != 0 {
                let proportion = util::get_proportion(Some(rs), d, to_add, added);
                sizes.push(replica_set_replicas(rs) + proportion);
                added += proportion;
            } else {
                sizes.push(replica_set_replicas(rs));
            }
        }
        for (i, rs) in all.iter().enumerate() {
            if i == 0 && to_add != 0 {
                sizes[0] = (sizes[0] + to_add - added).max(0);
            }
            scale_replica_set(self, rs, sizes[i], d, operation).await?;
        }
        Ok(())
    }

    pub(super) async fn scale_replica_set_and_record_event(
        &self,
        rs: &ReplicaSet,
        new_scale: i32,
        d: &Deployment,
    ) -> anyhow::Result<(bool, ReplicaSet)> {
        scale_replica_set_and_record_event(self, rs, new_scale, d).await
    }

    /// Deletes the oldest fully scaled-down ReplicaSets beyond revisionHistoryLimit.
    pub(super) async fn cleanup_deployment(
        &self,
        old: &[ReplicaSet],
        d: &Deployment,
    ) -> anyhow::Result<()> {
        if !util::has_revision_history_limit(d) {
            return Ok(());
        }
        let limit = d
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i32 - limit;
        if diff <= 0 {
            return Ok(());
        }
        util::sort_replica_sets_by_revision(&mut cleanable);
        for rs in cleanable.into_iter().take(diff as usize) {
            let status = rs.status.clone().unwrap_or_default();
            if status.replicas != 0
                || replica_set_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > status.observed_generation.unwrap_or(0)
                || rs.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let namespace = rs.namespace_str().to_string();
            let name = rs.name_str().to_string();
            debug!(replica_set = %name, "cleaning up old replica set");
            let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => {
                    return Err(anyhow::Error::new(error)
                        .context(format!("deleting old ReplicaSet {namespace}/{name}")))
                }
            }
        }
        Ok(())
    }

    pub(super) async fn sync_deployment_status(
        &self,
        all: &[ReplicaSet],
        new_rs: Option<&ReplicaSet>,
        d: &mut Deployment,
    ) -> anyhow::Result<()> {
        let status = calculate_status(all, new_rs, d, Timestamp::now());
        if same_status(d.status.as_ref(), &status) {
            return Ok(());
        }
        d.status = Some(status);
        self.update_status(d).await
    }

    /// True when a ReplicaSet's desired-replicas annotation disagrees with the
    /// Deployment's size: the Deployment was resized.
    async fn is_scaling_event(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
    ) -> anyhow::Result<bool> {
        let (new_rs, old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, false)
            .await?;
        let replicas = deployment_replicas(d);
        Ok(all_of(&new_rs, &old)
            .iter()
            .filter(|rs| replica_set_replicas(rs) > 0)
            .filter_map(util::get_desired_replicas_annotation)
            .any(|desired| desired != replicas))
    }

    /// PUTs the Deployment's status and keeps the returned resourceVersion, so a later
    /// write in the same sync does not conflict with this one.
    pub(super) async fn update_status(&self, d: &mut Deployment) -> anyhow::Result<()> {
        if let Some(status) = d.status.as_mut() {
            omit_zero_counts(status);
        }
        let updated = self.put(d, true).await?;
        d.metadata.resource_version = updated.metadata.resource_version;
        Ok(())
    }

    /// PUTs the whole Deployment (rollback), keeping what the server stored.
    pub(super) async fn update_deployment(&self, d: &mut Deployment) -> anyhow::Result<()> {
        *d = self.put(d, false).await?;
        Ok(())
    }

    async fn put(&self, d: &Deployment, status: bool) -> anyhow::Result<Deployment> {
        let namespace = d.namespace_str().to_string();
        let name = d.name_str().to_string();
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &namespace);
        let written = if status {
            api.replace_status(&name, &PostParams::default(), d).await
        } else {
            api.replace(&name, &PostParams::default(), d).await
        };
        let what = if status {
            "status of Deployment"
        } else {
            "Deployment"
        };
        written.with_context(|| format!("updating {what} {namespace}/{name}"))
    }
}

/// Scales `rs` to `new_scale` (up or down as the sizes say), recording the event; a
/// ReplicaSet already at that size is left alone (upstream
/// `scaleReplicaSetAndRecordEvent`). Returns whether it scaled, and the ReplicaSet as
/// written.
pub(super) async fn scale_replica_set_and_record_event<W: ReplicaSetControl>(
    control: &W,
    rs: &ReplicaSet,
    new_scale: i32,
    d: &Deployment,
) -> anyhow::Result<(bool, ReplicaSet)> {
    let current = replica_set_replicas(rs);
    if current == new_scale {
        return Ok((false, rs.clone()));
    }
    let operation = if current < new_scale { "up" } else { "down" };
    scale_replica_set(control, rs, new_scale, d, operation).await
}

/// Writes `rs` with `new_scale` replicas and the Deployment's desired- and
/// max-replicas annotations, when either differs; records "Scaled `up`/`down` replica
/// set" when the size changed (upstream `scaleReplicaSet`).
async fn scale_replica_set<W: ReplicaSetControl>(
    control: &W,
    rs: &ReplicaSet,
    new_scale: i32,
    d: &Deployment,
    operation: &str,
) -> anyhow::Result<(bool, ReplicaSet)> {
    let old_scale = replica_set_replicas(rs);
    let size_needs_update = old_scale != new_scale;
    let replicas = deployment_replicas(d);
    let max = replicas + util::max_surge(d);
    let annotations_need_update = util::replicas_annotations_need_update(rs, replicas, max);
    if !size_needs_update && !annotations_need_update {
        return Ok((false, rs.clone()));
    }
    let mut copy = rs.clone();
    copy.spec.get_or_insert_with(Default::default).replicas = Some(new_scale);
    util::set_replicas_annotations(&mut copy, replicas, max);
    let namespace = rs.namespace_str().to_string();
    let name = rs.name_str().to_string();
    let updated = control
        .update_replica_set(&copy)
        .await
        .with_context(|| format!("scaling ReplicaSet {namespace}/{name} to {new_scale}"))?;
    if size_needs_update {
        control.deployment_event(
            d,
            NORMAL,
            "ScalingReplicaSet",
            format!("Scaled {operation} replica set {name} to {new_scale} from {old_scale}"),
        );
    }
    Ok((size_needs_update, updated))
}

/// The Deployment's status from its ReplicaSets, with the Available condition.
pub(super) fn calculate_status(
    all: &[ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let available = util::get_available_replica_count_for_replica_sets(all);
    let total = util::get_replica_count_for_replica_sets(all);
    let unavailable = (total - available).max(0);
    let current = d.status.clone().unwrap_or_default();
    let updated = new_rs
        .map(|rs| util::get_actual_replica_count_for_replica_sets(&[rs]))
        .unwrap_or(0);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(util::get_actual_replica_count_for_replica_sets(all)),
        updated_replicas: Some(updated),
        ready_replicas: Some(util::get_ready_replica_count_for_replica_sets(all)),
        available_replicas: Some(available),
        unavailable_replicas: Some(unavailable),
        collision_count: current.collision_count,
        conditions: current.conditions.clone(),
        terminating_replicas: current.terminating_replicas,
    };
    let condition = if available >= deployment_replicas(d) - util::max_unavailable(d) {
        util::new_deployment_condition(
            util::DEPLOYMENT_AVAILABLE,
            util::CONDITION_TRUE,
            util::MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    } else {
        util::new_deployment_condition(
            util::DEPLOYMENT_AVAILABLE,
            util::CONDITION_FALSE,
            util::MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    };
    util::set_deployment_condition(&mut status, condition);
    status
}

/// Status equality as Go's DeepEqual sees it after a JSON round trip: a zero count and
/// a missing one are the same, as are an empty and a missing condition list.
pub(super) fn same_status(current: Option<&DeploymentStatus>, new: &DeploymentStatus) -> bool {
    fn normal(status: &DeploymentStatus) -> DeploymentStatus {
        let zero = |v: Option<i32>| v.filter(|v| *v != 0);
        DeploymentStatus {
            observed_generation: status.observed_generation.filter(|v| *v != 0),
            replicas: zero(status.replicas),
            updated_replicas: zero(status.updated_replicas),
            ready_replicas: zero(status.ready_replicas),
            available_replicas: zero(status.available_replicas),
            unavailable_replicas: zero(status.unavailable_replicas),
            terminating_replicas: status.terminating_replicas,
            collision_count: status.collision_count,
            conditions: status.conditions.clone().filter(|c| !c.is_empty()),
        }
    }
    normal(&current.cloned().unwrap_or_default()) == normal(new)
}

/// The API omits zero counts (`omitempty`); sending them as absent keeps the stored
/// object as kube-apiserver would store it.
fn omit_zero_counts(status: &mut DeploymentStatus) {
    for count in [
        &mut status.replicas,
        &mut status.updated_replicas,
        &mut status.ready_replicas,
        &mut status.available_replicas,
        &mut status.unavailable_replicas,
    ] {
        if *count == Some(0) {
            *count = None;
        }
    }
}

/// Sets a condition on the Deployment's status, stamped now.
pub(super) fn set_condition(
    d: &mut Deployment,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let condition =
        util::new_deployment_condition(type_, status, reason, message, Timestamp::now());
    util::set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
}
