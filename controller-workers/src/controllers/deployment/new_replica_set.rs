//! Upstream `getNewReplicaSet`: the Deployment's new ReplicaSet (the one whose template
//! matches), its revision annotations kept current, or created from the template with
//! the template's hash in its name, labels and selector, collisions counted in
//! `status.collisionCount`.

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use tracing::debug;

use super::sync::set_condition;
use super::util;
use super::Controller;
use crate::api_errors::{is_already_exists, is_namespace_terminating, message as api_error_text};
use crate::meta::ResourceNames;
use crate::pod_control::controller_ref;
use crate::recorder::{NORMAL, WARNING};

/// The new ReplicaSet upstream's `getNewReplicaSet` creates: named and labelled with the
/// template's hash, owned by the Deployment, sized by `NewRSNewReplicas`, annotated with
/// the new revision. Also returns its replicas.
fn new_replica_set_for(
    d: &Deployment,
    old: &[ReplicaSet],
    new_revision: &str,
) -> anyhow::Result<(ReplicaSet, i32)> {
    let spec = d.spec.clone().unwrap_or_default();
    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = util::compute_hash(&spec.template, collision_count);
    let mut template = spec.template.clone();
    let labels = util::clone_and_add_label(
        spec.template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref()),
        util::DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
        &hash,
    );
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels = Some(labels.clone());
    let selector = util::clone_selector_and_add_label(
        &spec.selector,
        util::DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
        &hash,
    );
    let mut new_rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", d.name_str())),
            namespace: Some(d.namespace_str().to_string()),
            owner_references: Some(vec![controller_ref(d)]),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    };
    let mut all: Vec<&ReplicaSet> = old.iter().collect();
    all.push(&new_rs);
    let new_replicas = util::new_rs_new_replicas(d, &all, &new_rs).map_err(anyhow::Error::msg)?;
    new_rs.spec.get_or_insert_with(Default::default).replicas = Some(new_replicas);
    util::set_new_replica_set_annotations(
        d,
        &mut new_rs,
        new_revision,
        false,
        util::MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    Ok((new_rs, new_replicas))
}

impl Controller {
    /// Upstream `getNewReplicaSet`: the existing new ReplicaSet brought up to date, or
    /// (when `create`) a new one created from the template.
    pub(super) async fn get_new_replica_set(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
        old: &[ReplicaSet],
        create: bool,
    ) -> anyhow::Result<Option<ReplicaSet>> {
        let list: Vec<&ReplicaSet> = rs_list.iter().collect();
        let existing = util::find_new_replica_set(d, &list).cloned();
        let new_revision = (util::max_revision(old) + 1).to_string();
        if let Some(rs) = existing {
            let rs = self
                .sync_existing_new_replica_set(d, rs, &new_revision)
                .await?;
            return Ok(Some(rs));
        }
        if !create {
            return Ok(None);
        }
        let (new_rs, new_replicas) = new_replica_set_for(d, old, &new_revision)?;
        let rs_name = new_rs.name_str().to_string();
        let (created, already_exists) = self.create_new_replica_set(d, &new_rs).await?;
        if !already_exists && new_replicas > 0 {
            self.recorder.event(
                &*d,
                NORMAL,
                "ScalingReplicaSet",
                format!("Scaled up replica set {rs_name} to {new_replicas}"),
            );
        }
        let mut needs_update = util::set_deployment_revision(d, &new_revision);
        if !already_exists && util::has_progress_deadline(d) {
            set_condition(
                d,
                util::DEPLOYMENT_PROGRESSING,
                util::CONDITION_TRUE,
                util::NEW_REPLICA_SET_REASON,
                &format!("Created new replica set {rs_name:?}"),
            );
            needs_update = true;
        }
        if needs_update {
            self.update_status(d).await?;
        }
        Ok(Some(created))
    }

    /// The existing new ReplicaSet: its revision annotations and minReadySeconds brought
    /// up to date, else the Deployment's revision and its `FoundNewReplicaSet` condition.
    async fn sync_existing_new_replica_set(
        &self,
        d: &mut Deployment,
        mut rs: ReplicaSet,
        new_revision: &str,
    ) -> anyhow::Result<ReplicaSet> {
        let min_ready = d.spec.as_ref().and_then(|spec| spec.min_ready_seconds);
        let annotations_updated = util::set_new_replica_set_annotations(
            d,
            &mut rs,
            new_revision,
            true,
            util::MAX_REV_HISTORY_LENGTH_IN_CHARS,
        );
        let rs_min_ready = rs.spec.as_ref().and_then(|spec| spec.min_ready_seconds);
        if annotations_updated || rs_min_ready.unwrap_or(0) != min_ready.unwrap_or(0) {
            rs.spec
                .get_or_insert_with(Default::default)
                .min_ready_seconds = min_ready;
            let namespace = d.namespace_str();
            let name = rs.name_str();
            let rs_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
            let updated = rs_api
                .replace(name, &PostParams::default(), &rs)
                .await
                .with_context(|| format!("updating ReplicaSet {namespace}/{name}"))?;
            return Ok(updated);
        }
        let revision = rs
            .annotations()
            .get(util::REVISION_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        let mut needs_update = util::set_deployment_revision(d, &revision);
        let status = d.status.clone().unwrap_or_default();
        if util::has_progress_deadline(d)
            && util::get_deployment_condition(&status, util::DEPLOYMENT_PROGRESSING).is_none()
        {
            let message = format!("Found new replica set {:?}", rs.name_str());
            set_condition(
                d,
                util::DEPLOYMENT_PROGRESSING,
                util::CONDITION_TRUE,
                util::FOUND_NEW_RS_REASON,
                &message,
            );
            needs_update = true;
        }
        if needs_update {
            self.update_status(d).await?;
        }
        Ok(rs)
    }

    /// Creates the new ReplicaSet; on `AlreadyExists`, takes the one found when it is
    /// ours with the same template, else bumps `collisionCount` (upstream's hash
    /// collision handling). The flag says whether it already existed.
    async fn create_new_replica_set(
        &self,
        d: &mut Deployment,
        new_rs: &ReplicaSet,
    ) -> anyhow::Result<(ReplicaSet, bool)> {
        let namespace = d.namespace_str().to_string();
        let rs_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        let rs_name = new_rs.name_str();
        let error = match rs_api.create(&PostParams::default(), new_rs).await {
            Ok(created) => return Ok((created, false)),
            Err(error) => error,
        };
        if is_already_exists(&error) {
            // Ours from an earlier sync whose create we did not see yet, or a hash
            // collision with another template.
            let existing = match self.replica_sets.get_in(&namespace, rs_name) {
                Some(rs) => rs.as_ref().clone(),
                None => rs_api.get(rs_name).await?,
            };
            let ours = crate::store::controller_of(&existing.metadata)
                .is_some_and(|r| Some(r.uid.as_str()) == d.metadata.uid.as_deref());
            let want = d
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default();
            let same_template = existing
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|found| util::equal_ignore_hash(&want, found));
            if ours && same_template {
                return Ok((existing, true));
            }
            let status = d.status.get_or_insert_with(Default::default);
            let count = status.collision_count.unwrap_or(0);
            status.collision_count = Some(count + 1);
            if self.update_status(d).await.is_ok() {
                debug!(deployment = %d.name_str(), old = count, new = count + 1, "hash collision; bumping collisionCount");
            }
            anyhow::bail!("replica set {namespace}/{rs_name} already exists with another template (hash collision)");
        }
        if is_namespace_terminating(&error) {
            return Err(error.into());
        }
        let message = format!(
            "Failed to create new replica set {rs_name:?}: {}",
            api_error_text(&error)
        );
        if util::has_progress_deadline(d) {
            set_condition(
                d,
                util::DEPLOYMENT_PROGRESSING,
                util::CONDITION_FALSE,
                util::FAILED_RS_CREATE_REASON,
                &message,
            );
            let _ = self.update_status(d).await;
        }
        self.recorder
            .event(&*d, WARNING, util::FAILED_RS_CREATE_REASON, message);
        Err(error.into())
    }
}
