//! Deleting a namespace's content (upstream `namespaced_resources_deleter.go` and
//! `status_condition_utils.go`): for a namespace with a deletionTimestamp, every
//! namespaced resource the API server serves (from the informer-server's discovery) is
//! emptied, by deletecollection where the resource has it, else object by object; what
//! remains is counted from the informer-server's cache; the namespace's conditions say
//! how far it got (NamespaceDeletionDiscoveryFailure, NamespaceDeletionGroupVersionParsingFailure,
//! NamespaceDeletionContentFailure, NamespaceContentRemaining, NamespaceFinalizersRemaining,
//! each False with upstream's "ok" reason when all is well); once nothing remains the
//! `kubernetes` finalizer is removed through namespaces/finalize and the API server
//! deletes the namespace.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, PropagationPolicy};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{
    GroupVersionResource, ListRequest, ListResourcesRequest, Projection, ResourceInfo,
};
use serde::Deserialize;
use tonic::transport::Channel;
use tracing::{debug, info};

use crate::controllers::garbagecollector::operations::api_resource;
use crate::queue::WorkQueue;
use crate::store::Store;

pub(super) const FINALIZER: &str = "kubernetes";
/// How long to wait before looking again at content held by finalizers.
const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

const CONDITION_TYPES: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

pub(super) struct Deleter {
    pub client: kube::Client,
    pub informer: InformerClient<Channel>,
    pub namespaces: Store<Namespace>,
    pub queue: Arc<WorkQueue<String>>,
}

#[derive(Deserialize)]
struct Meta {
    metadata: ObjectMeta,
}

#[derive(Default)]
struct Totals {
    /// `resource.group` -> objects left.
    remaining: BTreeMap<String, usize>,
    /// finalizer -> objects it holds.
    finalizers: BTreeMap<String, usize>,
    estimate: i64,
}

/// The conditions after a pass: each type's failure, or upstream's ok condition.
fn updated_conditions(
    current: &[NamespaceCondition],
    failures: &BTreeMap<&'static str, (&'static str, String)>,
    now: Timestamp,
) -> (Vec<NamespaceCondition>, bool) {
    let mut conditions = current.to_vec();
    let mut changed = false;
    for (type_, ok_reason, ok_message) in CONDITION_TYPES {
        let (status, reason, message) = match failures.get(type_) {
            Some((reason, message)) => ("True", *reason, message.clone()),
            None => ("False", ok_reason, ok_message.to_string()),
        };
        let new = NamespaceCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: Some(reason.to_string()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        };
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conditions.push(new);
                changed = true;
            }
            Some(old)
                if old.status == new.status
                    && old.reason == new.reason
                    && old.message == new.message => {}
            Some(old) => {
                *old = new;
                changed = true;
            }
        }
    }
    (conditions, changed)
}

impl Deleter {
    pub(super) async fn sync(&self, name: &str) -> anyhow::Result<()> {
        let Some(cached) = self.namespaces.get(name) else {
            return Ok(());
        };
        if cached.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        // Act on the live object, not a cache that may lag.
        let Some(namespace) = api.get_opt(name).await? else {
            return Ok(());
        };
        let Some(deleted_at) = namespace.metadata.deletion_timestamp.clone() else {
            return Ok(());
        };
        let finalizers = namespace
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER) {
            return Ok(());
        }
        let mut failures: BTreeMap<&'static str, (&'static str, String)> = BTreeMap::new();
        let totals = self
            .delete_all_content(name, deleted_at.0, &mut failures)
            .await;
        if !totals.remaining.is_empty() {
            let mut parts: Vec<String> = totals
                .remaining
                .iter()
                .map(|(resource, n)| format!("{resource} has {n} resource instances"))
                .collect();
            parts.sort();
            failures.insert(
                "NamespaceContentRemaining",
                (
                    "SomeResourcesRemain",
                    format!("Some resources are remaining: {}", parts.join(", ")),
                ),
            );
        }
        if !totals.finalizers.is_empty() {
            let mut parts: Vec<String> = totals
                .finalizers
                .iter()
                .map(|(finalizer, n)| format!("{finalizer} in {n} resource instances"))
                .collect();
            parts.sort();
            failures.insert(
                "NamespaceFinalizersRemaining",
                (
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        parts.join(", ")
                    ),
                ),
            );
        }
        let current = namespace
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let (conditions, changed) = updated_conditions(&current, &failures, Timestamp::now());
        if changed {
            let mut updated = namespace.clone();
            let status = updated.status.get_or_insert_with(NamespaceStatus::default);
            status.conditions = Some(conditions);
            if status.phase.as_deref() != Some("Terminating") {
                status.phase = Some("Terminating".into());
            }
            match api
                .replace_status(name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                Err(error) => {
                    return Err(error)
                        .context(format!("updating the conditions of namespace {name}"))
                }
            }
        }
        if failures.contains_key("NamespaceDeletionContentFailure")
            || failures.contains_key("NamespaceDeletionDiscoveryFailure")
        {
            anyhow::bail!(
                "namespace {name}: {}",
                failures
                    .values()
                    .map(|(_, m)| m.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        if !totals.remaining.is_empty() {
            // Upstream looks again after half the estimate and a second: most pods go well
            // before their whole grace period.
            let wait = recheck_after(totals.estimate);
            debug!(namespace = name, wait = ?wait, remaining = ?totals.remaining, "content remains; looking again later");
            self.queue.add_after(name.to_string(), wait);
            return Ok(());
        }
        // Everything is gone: release the namespace.
        let mut finalized = namespace.clone();
        if let Some(spec) = finalized.spec.as_mut() {
            spec.finalizers = Some(finalizers.into_iter().filter(|f| f != FINALIZER).collect());
        }
        match api
            .replace_subresource("finalize", name, &PostParams::default(), &finalized)
            .await
        {
            Ok(_) => info!(namespace = name, "namespace finalized"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error).context(format!("finalizing namespace {name}")),
        }
        Ok(())
    }

    async fn delete_all_content(
        &self,
        namespace: &str,
        deleted_at: Timestamp,
        failures: &mut BTreeMap<&'static str, (&'static str, String)>,
    ) -> Totals {
        let mut totals = Totals::default();
        let resources = match self
            .informer
            .clone()
            .list_resources(ListResourcesRequest {})
            .await
        {
            Ok(response) => response.into_inner().resources,
            Err(status) => {
                failures.insert(
                    "NamespaceDeletionDiscoveryFailure",
                    ("DiscoveryFailed", status.message().to_string()),
                );
                return totals;
            }
        };
        let mut seen = HashSet::new();
        let deletable: Vec<ResourceInfo> = resources
            .into_iter()
            .filter(|r| r.namespaced && !r.resource.contains('/'))
            .filter(|r| seen.insert((r.group.clone(), r.resource.clone())))
            .filter(|r| r.verbs.iter().any(|v| v == "delete"))
            .collect();
        let mut errors = Vec::new();
        for resource in &deletable {
            if let Err(error) = self
                .delete_content(namespace, resource, deleted_at, &mut totals)
                .await
            {
                errors.push(format!(
                    "{}.{}: {error:#}",
                    resource.resource, resource.group
                ));
            }
        }
        if !errors.is_empty() {
            errors.sort();
            failures.insert(
                "NamespaceDeletionContentFailure",
                (
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        errors.len(),
                        errors.join(", ")
                    ),
                ),
            );
        }
        totals
    }

    async fn cached(
        &self,
        namespace: &str,
        resource: &ResourceInfo,
    ) -> anyhow::Result<Vec<ObjectMeta>> {
        let response = self
            .informer
            .clone()
            .list(ListRequest {
                resource: Some(GroupVersionResource {
                    group: resource.group.clone(),
                    version: resource.version.clone(),
                    resource: resource.resource.clone(),
                }),
                namespace: namespace.to_string(),
                projection: Projection::Metadata as i32,
                ..Default::default()
            })
            .await
            .map_err(|status| anyhow::anyhow!("{}", status.message()))?;
        response
            .into_inner()
            .items
            .iter()
            .map(|item| Ok(serde_json::from_str::<Meta>(item)?.metadata))
            .collect()
    }

    async fn delete_content(
        &self,
        namespace: &str,
        resource: &ResourceInfo,
        deleted_at: Timestamp,
        totals: &mut Totals,
    ) -> anyhow::Result<()> {
        let mut present = self.cached(namespace, resource).await?;
        if present.is_empty() {
            return Ok(());
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &api_resource(resource));
        let background = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        if resource.verbs.iter().any(|v| v == "deletecollection") {
            api.delete_collection(&background, &ListParams::default())
                .await?;
        } else {
            for meta in &present {
                if meta.deletion_timestamp.is_some() {
                    continue;
                }
                match api
                    .delete(meta.name.as_deref().unwrap_or_default(), &background)
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        // Graceful pod deletion: the longest grace period, as long as the namespace has not
        // been going for that long already (upstream's estimate).
        if resource.group.is_empty() && resource.resource == "pods" {
            let elapsed = (Timestamp::now().as_second() - deleted_at.as_second()).max(0);
            let longest = present
                .iter()
                .map(|meta| meta.deletion_grace_period_seconds.unwrap_or(30))
                .max()
                .unwrap_or(0);
            totals.estimate = totals.estimate.max(pod_estimate(longest, elapsed));
        }
        // What is still there (the cache follows the deletions within moments).
        tokio::time::sleep(Duration::from_millis(100)).await;
        present = self.cached(namespace, resource).await?;
        if present.is_empty() {
            return Ok(());
        }
        let key = format!("{}.{}", resource.resource, resource.group);
        totals.remaining.insert(key, present.len());
        for meta in &present {
            for finalizer in meta.finalizers.iter().flatten() {
                *totals.finalizers.entry(finalizer.clone()).or_default() += 1;
                totals.estimate = totals.estimate.max(FINALIZER_ESTIMATE_SECONDS);
            }
        }
        Ok(())
    }
}

/// How long pods may still take: their longest grace period, or nothing once the
/// namespace has been terminating at least that long.
fn pod_estimate(longest_grace_seconds: i64, elapsed_seconds: i64) -> i64 {
    if elapsed_seconds >= longest_grace_seconds {
        0
    } else {
        longest_grace_seconds
    }
}

/// When to look again at a namespace whose content remains, for an estimate in seconds.
fn recheck_after(estimate_seconds: i64) -> Duration {
    Duration::from_secs((estimate_seconds.max(0) / 2 + 1) as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn remaining_content_is_looked_at_again_after_half_the_estimate() {
        use super::{pod_estimate, recheck_after};
        use std::time::Duration;
        // (longest grace, seconds since the namespace's deletion, expected wait)
        let cases = [
            (30, 0, 16),
            (30, 16, 16),
            (30, 30, 1),
            (0, 0, 1),
            (15, 3, 8),
        ];
        for (grace, elapsed, wait) in cases {
            assert_eq!(
                recheck_after(pod_estimate(grace, elapsed)),
                Duration::from_secs(wait),
                "grace {grace}, elapsed {elapsed}"
            );
        }
    }

    use super::*;

    #[test]
    fn conditions_are_upstreams_ok_ones_unless_something_failed() {
        let now = Timestamp::from_second(1_000).unwrap();
        let mut failures = BTreeMap::new();
        failures.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain",
                "Some resources are remaining: pods. has 3 resource instances".to_string(),
            ),
        );
        let (conditions, changed) = updated_conditions(&[], &failures, now);
        assert!(changed);
        assert_eq!(conditions.len(), 5);
        let remaining = conditions
            .iter()
            .find(|c| c.type_ == "NamespaceContentRemaining")
            .unwrap();
        assert_eq!(
            (remaining.status.as_str(), remaining.reason.as_deref()),
            ("True", Some("SomeResourcesRemain"))
        );
        let discovery = conditions
            .iter()
            .find(|c| c.type_ == "NamespaceDeletionDiscoveryFailure")
            .unwrap();
        assert_eq!(
            (
                discovery.status.as_str(),
                discovery.reason.as_deref(),
                discovery.message.as_deref()
            ),
            (
                "False",
                Some("ResourcesDiscovered"),
                Some("All resources successfully discovered")
            )
        );
        let (_, again) = updated_conditions(&conditions, &failures, now);
        assert!(!again, "the same outcome changes nothing");
    }
}
