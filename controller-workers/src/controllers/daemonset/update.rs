//! DaemonSet updates and history (upstream `daemon/update.go`): the rolling update
//! with maxUnavailable or maxSurge, and the ControllerRevisions that record each
//! template.

use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use tracing::{debug, info};

use super::placement::{
    is_pod_updated, node_should_run_daemon_pod, surge_count, template_generation, unavailable_count,
};
use super::sync::NodePods;
use super::{min_ready_seconds, Controller};
use crate::history::{
    compute_hash, data_bytes, delete_revision, go_json, template_patch, POD_REVISION_LABEL,
};
use crate::meta::ResourceNames;
use crate::pod_control::controller_ref;
use crate::pods::is_pod_available;

/// A node's pod of the current revision and its pod of an older one, each if any.
type NewAndOld = (Option<Arc<Pod>>, Option<Arc<Pod>>);

/// The updated and the old pod on a node; `None` when the node has more than one of
/// either (`findUpdatedPodsOnNode`).
fn updated_and_old(pods: &[Arc<Pod>], hash: &str, generation: Option<i64>) -> Option<NewAndOld> {
    let mut new = None;
    let mut old = None;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if is_pod_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod.clone());
    }
    Some((new, old))
}

fn ds_template(ds: &DaemonSet) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    ds.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// maxSurge, maxUnavailable and the number of nodes that should run the pod; nodes
/// that should but have none get an empty entry (`updatedDesiredNodeCounts`).
pub(super) fn desired_node_counts(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_pods: &mut NodePods,
) -> anyhow::Result<(i32, i32, i32)> {
    let mut desired = 0;
    for node in nodes {
        if !node_should_run_daemon_pod(node, ds).0 {
            continue;
        }
        desired += 1;
        node_pods.entry(node.name_str().to_string()).or_default();
    }
    let mut max_unavailable = unavailable_count(ds, desired)
        .map_err(|e| anyhow!("invalid value for MaxUnavailable: {e}"))?;
    let max_surge =
        surge_count(ds, desired).map_err(|e| anyhow!("invalid value for MaxSurge: {e}"))?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        info!(
            daemonset = ds.name_str(),
            "DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability"
        );
        max_unavailable = 1;
    }
    Ok((max_surge, max_unavailable, desired))
}

/// What one rolling-update pass does: the old pods to delete and the nodes to start a
/// new pod on.
#[derive(Debug, Default, PartialEq)]
pub(super) struct UpdatePlan {
    pub(super) to_delete: Vec<String>,
    pub(super) new_nodes: Vec<String>,
}

/// Replaces old pods within the budget: without surge, delete old pods while at most
/// maxUnavailable nodes lack an available pod (manage recreates them); with surge,
/// start new pods beside old ones on at most maxSurge nodes and delete each old pod
/// once its replacement is available. `node_pods` has an entry for every node that
/// should run the pod ([`desired_node_counts`]); `node` finds a node by name and
/// `pod_exists` says whether a pod is still in the cache.
pub(super) fn plan_rolling_update(
    ds: &DaemonSet,
    node_pods: &NodePods,
    (max_surge, max_unavailable, desired): (i32, i32, i32),
    node: impl Fn(&str) -> Option<Arc<Node>>,
    pod_exists: impl Fn(&str) -> bool,
    hash: &str,
    now: Timestamp,
) -> anyhow::Result<UpdatePlan> {
    let min_ready = min_ready_seconds(ds);
    let generation = template_generation(ds);
    let available = |pod: &Pod| is_pod_available(pod, min_ready, now);

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut allowed_replacements = Vec::new();
        let mut candidates = Vec::new();
        for pods in node_pods.values() {
            let Some((new, old)) = updated_and_old(pods, hash, generation) else {
                // More than one pod of a kind: manage is sorting it out.
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(&new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(&old) {
                        // Not available anyway: replacing it costs nothing.
                        allowed_replacements.push(old.name_any());
                    } else if unavailable < max_unavailable {
                        candidates.push(old.name_any());
                    }
                }
            }
        }
        let remaining = (max_unavailable - unavailable).clamp(0, candidates.len() as i32);
        let mut to_delete = allowed_replacements;
        to_delete.extend(candidates.into_iter().take(remaining as usize));
        debug!(
            daemonset = ds.name_str(),
            deleting = to_delete.len(),
            unavailable,
            max_unavailable,
            "rolling update"
        );
        return Ok(UpdatePlan {
            to_delete,
            new_nodes: Vec::new(),
        });
    }

    let mut to_delete = Vec::new();
    let mut should_not_run = Vec::new();
    let mut candidate_nodes = Vec::new();
    let mut allowed_nodes = Vec::new();
    let mut surging = 0;
    let mut available_count = 0;
    for (node_name, pods) in node_pods {
        let Some((new, old)) = updated_and_old(pods, hash, generation) else {
            surging += 1;
            continue;
        };
        match (&new, &old) {
            (_, Some(old)) if available(old) => available_count += 1,
            (Some(new), None) if available(new) => available_count += 1,
            _ => {}
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                let node = node(node_name)
                    .ok_or_else(|| anyhow!("couldn't get node for nodeName {node_name:?}"))?;
                let should_run = node_should_run_daemon_pod(&node, ds).0;
                if !available(&old) {
                    if should_run {
                        // Nothing to lose: start the new pod at once.
                        allowed_nodes.push(node_name.clone());
                    } else {
                        to_delete.push(old.name_any());
                    }
                } else if !should_run {
                    should_not_run.push(old.name_any());
                } else if surging < max_surge {
                    candidate_nodes.push(node_name.clone());
                }
            }
            (Some(new), Some(old)) => {
                if !available(&new) {
                    surging += 1;
                } else {
                    // The replacement is available: the old pod can go.
                    to_delete.push(old.name_any());
                }
            }
        }
    }
    // Pods on nodes that should no longer run one go while enough others are
    // available.
    let deletable = (available_count - desired).clamp(0, should_not_run.len() as i32);
    for pod in should_not_run.into_iter().take(deletable as usize) {
        if pod_exists(&pod) {
            to_delete.push(pod);
        }
    }
    let remaining = (max_surge - surging).clamp(0, candidate_nodes.len() as i32);
    let mut new_nodes = allowed_nodes;
    new_nodes.extend(candidate_nodes.into_iter().take(remaining as usize));
    Ok(UpdatePlan {
        to_delete,
        new_nodes,
    })
}

impl Controller {
    /// One rolling-update pass ([`plan_rolling_update`]) over the pods in the cache.
    pub(super) async fn rolling_update(
        &self,
        ds: &Arc<DaemonSet>,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> anyhow::Result<()> {
        let mut node_pods = self.node_pods(ds, false).await?;
        let counts = desired_node_counts(ds, nodes, &mut node_pods)?;
        let namespace = ds.namespace_str();
        let plan = plan_rolling_update(
            ds,
            &node_pods,
            counts,
            |name| self.nodes.get(name),
            |pod| self.pods.get_in(namespace, pod).is_some(),
            hash,
            Timestamp::now(),
        )?;
        self.sync_nodes(ds, &plan.to_delete, &plan.new_nodes, hash)
            .await
    }

    /// The revisions this DaemonSet controls, adopting matching orphans and releasing
    /// owned ones that stopped matching (`controlledHistories`).
    async fn controlled_revisions(
        &self,
        ds: &DaemonSet,
    ) -> anyhow::Result<Vec<Arc<ControllerRevision>>> {
        self.claim(ds, &self.revisions).await
    }

    /// The revision of the current template (created if missing, deduplicated, its
    /// number bumped past the old ones) and the old revisions (`constructHistory`).
    pub(super) async fn construct_history(
        &self,
        ds: &Arc<DaemonSet>,
    ) -> anyhow::Result<(Arc<ControllerRevision>, Vec<Arc<ControllerRevision>>)> {
        let namespace = ds.namespace_str();
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        // A revision holds the current template when its data is this patch (`Match`).
        let patch = template_patch(&ds_template(ds));
        let patch_bytes = go_json(&patch);
        let mut current = Vec::new();
        let mut old = Vec::new();
        for revision in self.controlled_revisions(ds).await? {
            let mut revision = revision;
            let labels = revision.labels().clone();
            if !labels.contains_key(POD_REVISION_LABEL) {
                // Revisions of old DaemonSets lack the hash label: it is their name.
                let mut updated = (*revision).clone();
                let name = updated.name_str().to_string();
                updated
                    .metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(POD_REVISION_LABEL.into(), name.clone());
                revision = Arc::new(api.replace(&name, &PostParams::default(), &updated).await?);
            }
            if data_bytes(&revision) == patch_bytes {
                current.push(revision);
            } else {
                old.push(revision);
            }
        }
        let next = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let current = if current.is_empty() {
            self.snapshot(ds, next, patch, &patch_bytes).await?
        } else {
            let kept = self.dedup_current(ds, current).await?;
            if kept.revision < next {
                let mut updated = (*kept).clone();
                updated.revision = next;
                let name = updated.name_str().to_string();
                api.replace(&name, &PostParams::default(), &updated).await?;
            }
            kept
        };
        Ok((current, old))
    }

    /// Creates the revision of the current template, named by the template hash; a
    /// name taken by other data bumps status.collisionCount so the next sync picks
    /// another name (`snapshot`).
    async fn snapshot(
        &self,
        ds: &Arc<DaemonSet>,
        number: i64,
        patch: serde_json::Value,
        patch_bytes: &[u8],
    ) -> anyhow::Result<Arc<ControllerRevision>> {
        let namespace = ds.namespace_str();
        let ds_name = ds.name_str().to_string();
        let template = ds_template(ds);
        let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&template, collision_count);
        let name = format!("{ds_name}-{hash}");
        let mut labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(POD_REVISION_LABEL.into(), hash);
        let revision = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.into()),
                labels: Some(labels),
                annotations: ds.metadata.annotations.clone(),
                owner_references: Some(vec![controller_ref(ds.as_ref())]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(patch)),
            revision: number,
        };
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &revision).await {
            Ok(created) => Ok(Arc::new(created)),
            Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => {
                let existing = api.get(&name).await?;
                if data_bytes(&existing) == patch_bytes {
                    return Ok(Arc::new(existing));
                }
                // A hash collision: bump the collision count, unless ours is stale.
                let ds_api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
                let mut fresh = ds_api.get(&ds_name).await?;
                let fresh_count = fresh.status.as_ref().and_then(|s| s.collision_count);
                if fresh_count != collision_count {
                    return Err(anyhow!(
                        "found a stale collision count ({collision_count:?}, expected {fresh_count:?}) of DaemonSet {ds_name:?} while processing; will retry until it is updated"
                    ));
                }
                let status = fresh.status.get_or_insert_with(Default::default);
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                ds_api
                    .replace_status(&ds_name, &PostParams::default(), &fresh)
                    .await?;
                info!(daemonset = %ds_name, "found a hash collision for DaemonSet - bumping collisionCount to resolve it");
                Err(anyhow!(
                    "controllerrevisions.apps {name:?} already exists with other data"
                ))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Of several revisions of the current template, keeps the highest-numbered one:
    /// pods labelled with another one's hash are relabelled and the others deleted
    /// (`dedupCurHistories`).
    async fn dedup_current(
        &self,
        ds: &Arc<DaemonSet>,
        current: Vec<Arc<ControllerRevision>>,
    ) -> anyhow::Result<Arc<ControllerRevision>> {
        if current.len() == 1 {
            return Ok(current[0].clone());
        }
        let keep = current
            .iter()
            .fold(None::<&Arc<ControllerRevision>>, |best, r| match best {
                Some(b) if r.revision < b.revision => Some(b),
                _ => Some(r),
            })
            .cloned()
            .expect("non-empty");
        let keep_hash = keep
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_REVISION_LABEL))
            .cloned()
            .unwrap_or_default();
        let namespace = ds.namespace_str();
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        for duplicate in current
            .iter()
            .filter(|r| r.metadata.name != keep.metadata.name)
        {
            for pod in self.daemon_pods(ds).await? {
                let hash = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POD_REVISION_LABEL));
                if hash != Some(&keep_hash) {
                    let patch = json!({"metadata": {"labels": {POD_REVISION_LABEL: keep_hash}}});
                    pods_api
                        .patch(
                            &pod.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await
                        .with_context(|| format!("relabelling pod {}", pod.name_any()))?;
                }
            }
            let duplicate_name = duplicate.name_str().to_string();
            api.delete(&duplicate_name, &Default::default()).await?;
        }
        Ok(keep)
    }

    /// Deletes the oldest revisions beyond revisionHistoryLimit that no pod still uses
    /// (`cleanupHistory`).
    pub(super) async fn cleanup_history(
        &self,
        ds: &Arc<DaemonSet>,
        mut old: Vec<Arc<ControllerRevision>>,
    ) -> anyhow::Result<()> {
        let limit = ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let mut to_kill = old.len() as i64 - i64::from(limit);
        if to_kill <= 0 {
            return Ok(());
        }
        let node_pods = self.node_pods(ds, true).await?;
        let live: std::collections::HashSet<String> = node_pods
            .values()
            .flatten()
            .filter_map(|pod| {
                pod.metadata
                    .labels
                    .as_ref()?
                    .get(POD_REVISION_LABEL)
                    .cloned()
            })
            .collect();
        old.sort_by_key(|r| r.revision);
        let namespace = ds.namespace_str();
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        for revision in old {
            if to_kill <= 0 {
                break;
            }
            let hash = revision
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_REVISION_LABEL));
            if hash.is_some_and(|h| live.contains(h)) {
                continue;
            }
            let revision_name = revision.name_str().to_string();
            delete_revision(&api, &revision_name).await?;
            to_kill -= 1;
        }
        Ok(())
    }
}
