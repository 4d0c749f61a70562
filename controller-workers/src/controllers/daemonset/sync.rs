//! The DaemonSet sync: revisions, then pods to create and delete per node, the rolling
//! update, history cleanup and the status (upstream `syncDaemonSet`, `manage`,
//! `podsShouldBeOnNode`, `syncNodes`, `updateDaemonSetStatus`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tracing::{debug, warn};

use super::placement::{
    allows_surge, compare_daemon_pods, create_pod_template, is_pod_updated,
    node_should_run_daemon_pod, pin_to_node, target_node_name, template_generation,
};
use super::{min_ready_seconds, selector_of, Controller, BURST_REPLICAS};
use crate::api_errors::{is_namespace_terminating, is_not_found};
use crate::controller_ref::RefManager;
use crate::expectations::ControllerExpectations;
use crate::history::POD_REVISION_LABEL;
use crate::meta::ResourceNames;
use crate::pod_control::{controller_ref, PodControlInterface, SLOW_START_INITIAL_BATCH_SIZE};
use crate::pods::{is_pod_available, is_pod_ready, phase};
use crate::recorder::{NORMAL, WARNING};
use crate::store::{key_of, split_key};

/// Daemon pods by the node they are for.
pub(super) type NodePods = BTreeMap<String, Vec<Arc<Pod>>>;

fn node_name(node: &Node) -> &str {
    node.name_str()
}

fn pod_name(pod: &Pod) -> String {
    pod.name_str().to_string()
}

impl Controller {
    pub(super) async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        self.failed_pods_backoff.gc(Instant::now());
        let Some(ds) = self.daemon_sets.get_in(namespace, name) else {
            debug!(key, "daemon set has been deleted");
            self.expectations.delete(key);
            return Ok(());
        };
        let mut nodes = self.nodes.list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let selector = ds.spec.as_ref().map(|s| &s.selector);
        if selector.is_none_or(|s| s.match_labels.is_none() && s.match_expressions.is_none()) {
            self.recorder.event(
                ds.as_ref(),
                WARNING,
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.",
            );
            return Ok(());
        }
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (current, old) = self
            .construct_history(&ds)
            .await
            .context("failed to construct revisions of DaemonSet")?;
        let hash = current
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_REVISION_LABEL))
            .cloned()
            .unwrap_or_default();
        if !self.expectations.satisfied(key) {
            // Our last creations or deletions are not all in the cache yet: only the
            // status, from what is there.
            return self.update_status(&ds, &nodes, &hash, false).await;
        }
        let result = self.update_daemon_set(&ds, &nodes, &hash, key, old).await;
        let status = self.update_status(&ds, &nodes, &hash, true).await;
        match (result, status) {
            (Err(error), Err(status_error)) => {
                warn!(key, error = %format!("{status_error:#}"), "failed to update status");
                Err(error)
            }
            (Err(error), _) | (_, Err(error)) => Err(error),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    async fn update_daemon_set(
        &self,
        ds: &Arc<DaemonSet>,
        nodes: &[Arc<Node>],
        hash: &str,
        key: &str,
        old: Vec<Arc<k8s_openapi::api::apps::v1::ControllerRevision>>,
    ) -> anyhow::Result<()> {
        self.manage(ds, nodes, hash).await?;
        if self.expectations.satisfied(key) {
            let strategy = ds
                .spec
                .as_ref()
                .and_then(|s| s.update_strategy.as_ref())
                .and_then(|s| s.type_.as_deref());
            if strategy == Some("RollingUpdate") {
                self.rolling_update(ds, nodes, hash).await?;
            }
        }
        self.cleanup_history(ds, old)
            .await
            .context("failed to clean up revisions of DaemonSet")
    }

    /// The pods this DaemonSet controls, after adopting matching orphans and releasing
    /// owned pods that no longer match (`getDaemonPods`).
    pub(super) async fn daemon_pods(&self, ds: &DaemonSet) -> anyhow::Result<Vec<Arc<Pod>>> {
        self.claim(ds, &self.pods).await
    }

    /// What `ds` controls of `store`'s objects, claimed as upstream's ControllerRefManager
    /// claims (pods and ControllerRevisions alike); the first claim error fails it.
    pub(super) async fn claim<K>(
        &self,
        ds: &DaemonSet,
        store: &crate::store::Store<K>,
    ) -> anyhow::Result<Vec<Arc<K>>>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let namespace = ds.namespace_str();
        let selector = selector_of(ds).ok_or_else(|| anyhow!("invalid selector"))?;
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let candidates = store.claim_candidates(namespace, &uid);
        let manager = RefManager::new(
            ds,
            controller_ref(ds),
            &selector,
            Api::<DaemonSet>::namespaced(self.client.clone(), namespace),
        );
        let (claimed, errors) = manager
            .claim(candidates, &Api::namespaced(self.client.clone(), namespace))
            .await;
        match errors.into_iter().next() {
            Some(error) => Err(error.into()),
            None => Ok(claimed),
        }
    }

    /// Claimed daemon pods by target node; terminal pods being deleted are left out
    /// unless asked for (`getNodesToDaemonPods`).
    pub(super) async fn node_pods(
        &self,
        ds: &DaemonSet,
        include_deleted_terminal: bool,
    ) -> anyhow::Result<NodePods> {
        let pods = self.daemon_pods(ds).await.with_context(|| {
            format!(
                "couldn't get node to daemon pod mapping for daemon set {:?}",
                ds.name_str()
            )
        })?;
        let mut by_node = NodePods::new();
        for pod in pods {
            let terminal = matches!(phase(&pod), "Succeeded" | "Failed");
            if !include_deleted_terminal && terminal && pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match target_node_name(&pod) {
                Ok(node) => by_node.entry(node).or_default().push(pod),
                Err(error) => debug!(%error, "no target node for daemon pod"),
            }
        }
        Ok(by_node)
    }

    /// Which nodes need a pod and which pods go, for one node (`podsShouldBeOnNode`).
    fn pods_should_be_on_node(
        &self,
        node: &Node,
        node_pods: &NodePods,
        ds: &DaemonSet,
        hash: &str,
        needing: &mut Vec<String>,
        to_delete: &mut Vec<String>,
    ) {
        let name = node_name(node);
        let (should_run, should_continue_running) = node_should_run_daemon_pod(node, ds);
        let daemon_pods = node_pods.get(name);
        if should_run && daemon_pods.is_none() {
            needing.push(name.to_string());
            return;
        }
        if !should_continue_running {
            for pod in daemon_pods.into_iter().flatten() {
                if pod.metadata.deletion_timestamp.is_none() {
                    to_delete.push(pod_name(pod));
                }
            }
            return;
        }
        let namespace = ds.namespace_str();
        let mut running = Vec::new();
        for pod in daemon_pods.into_iter().flatten() {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match phase(pod) {
                "Failed" => {
                    // Replace it, but not in a hot loop: a pod that keeps failing is
                    // deleted at most once per backoff period.
                    let backoff_key = format!(
                        "{}/{}/{}",
                        ds.metadata.uid.as_deref().unwrap_or_default(),
                        ds.status
                            .as_ref()
                            .and_then(|s| s.observed_generation)
                            .unwrap_or(0),
                        name
                    );
                    let now = Instant::now();
                    if self
                        .failed_pods_backoff
                        .is_in_backoff_since_update(&backoff_key, now)
                    {
                        let delay = self.failed_pods_backoff.get(&backoff_key);
                        debug!(pod = %pod_name(pod), node = name, ?delay, "failed daemon pod in backoff");
                        self.queue.add_after(key_of(&ds.metadata), delay);
                        continue;
                    }
                    self.failed_pods_backoff.next(&backoff_key, now);
                    self.recorder.event(
                        ds,
                        WARNING,
                        "FailedDaemonPod",
                        format!(
                            "Found failed daemon pod {namespace}/{} on node {name}, will try to kill it",
                            pod_name(pod)
                        ),
                    );
                    to_delete.push(pod_name(pod));
                }
                "Succeeded" => {
                    self.recorder.event(
                        ds,
                        NORMAL,
                        "SucceededDaemonPod",
                        format!(
                            "Found succeeded daemon pod {namespace}/{} on node {name}, will try to delete it",
                            pod_name(pod)
                        ),
                    );
                    to_delete.push(pod_name(pod));
                }
                _ => running.push(pod.clone()),
            }
        }
        running.sort_by(|a, b| compare_daemon_pods(a, b));
        if !allows_surge(ds) {
            // Keep the oldest; any extra daemon pod on the node goes.
            to_delete.extend(running.iter().skip(1).map(|p| pod_name(p)));
            return;
        }
        if running.len() <= 1 {
            if running.is_empty() && should_run {
                needing.push(name.to_string());
            }
            return;
        }
        // Surging: keep the oldest updated pod and the oldest old one; the old one goes
        // once the new one is available (or at once if the old one is not ready).
        let mut oldest_new: Option<&Arc<Pod>> = None;
        let mut oldest_old: Option<&Arc<Pod>> = None;
        for pod in &running {
            let updated = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_REVISION_LABEL))
                .map(String::as_str)
                == Some(hash);
            let slot = if updated {
                &mut oldest_new
            } else {
                &mut oldest_old
            };
            if slot.is_none() {
                *slot = Some(pod);
            } else {
                to_delete.push(pod_name(pod));
            }
        }
        if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
            if !is_pod_ready(old) || is_pod_available(new, min_ready_seconds(ds), Timestamp::now())
            {
                to_delete.push(pod_name(old));
            }
        }
    }

    async fn manage(
        &self,
        ds: &Arc<DaemonSet>,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> anyhow::Result<()> {
        let node_pods = self.node_pods(ds, false).await?;
        let mut needing = Vec::new();
        let mut to_delete = Vec::new();
        for node in nodes {
            self.pods_should_be_on_node(node, &node_pods, ds, hash, &mut needing, &mut to_delete);
        }
        // Pods for nodes that no longer exist that were never scheduled.
        let existing: HashSet<&str> = nodes.iter().map(|n| node_name(n)).collect();
        for (node, pods) in &node_pods {
            if existing.contains(node.as_str()) {
                continue;
            }
            for pod in pods {
                if pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_none_or(str::is_empty)
                {
                    to_delete.push(pod_name(pod));
                }
            }
        }
        self.sync_nodes(ds, &to_delete, &needing, hash).await
    }

    /// Creates a pod for each node in `needing` and deletes `to_delete`
    /// ([`sync_nodes_with`] with the client-backed pod control).
    pub(super) async fn sync_nodes(
        &self,
        ds: &Arc<DaemonSet>,
        to_delete: &[String],
        needing: &[String],
        hash: &str,
    ) -> anyhow::Result<()> {
        sync_nodes_with(
            &self.pod_control,
            &self.expectations,
            ds,
            to_delete,
            needing,
            hash,
        )
        .await
    }

    /// Counts the DaemonSet's pods per node and writes the status when it changed
    /// (`updateDaemonSetStatus`).
    pub(super) async fn update_status(
        &self,
        ds: &Arc<DaemonSet>,
        nodes: &[Arc<Node>],
        hash: &str,
        update_observed_generation: bool,
    ) -> anyhow::Result<()> {
        let node_pods = self.node_pods(ds, false).await?;
        let now = Timestamp::now();
        let min_ready = min_ready_seconds(ds);
        let generation = template_generation(ds);
        let mut counts = Counts::default();
        for node in nodes {
            let (should_run, _) = node_should_run_daemon_pod(node, ds);
            let pods = node_pods.get(node_name(node)).filter(|p| !p.is_empty());
            match (should_run, pods) {
                (true, None) => counts.desired += 1,
                (true, Some(pods)) => {
                    counts.desired += 1;
                    counts.current += 1;
                    let pod = pods
                        .iter()
                        .min_by(|a, b| compare_daemon_pods(a, b))
                        .expect("non-empty");
                    if is_pod_ready(pod) {
                        counts.ready += 1;
                        if is_pod_available(pod, min_ready, now) {
                            counts.available += 1;
                        }
                    }
                    if is_pod_updated(pod, hash, generation) {
                        counts.updated += 1;
                    }
                }
                (false, Some(_)) => counts.misscheduled += 1,
                (false, None) => {}
            }
        }
        self.store_status(ds, &counts, update_observed_generation)
            .await
            .with_context(|| {
                format!(
                    "error storing status for daemon set {}",
                    key_of(&ds.metadata)
                )
            })?;
        if min_ready > 0 && counts.ready != counts.available {
            // Look again when the ready pods have been ready long enough.
            self.queue
                .add_after(key_of(&ds.metadata), Duration::from_secs(min_ready as u64));
        }
        Ok(())
    }

    async fn store_status(
        &self,
        ds: &DaemonSet,
        counts: &Counts,
        update_observed_generation: bool,
    ) -> anyhow::Result<()> {
        let status = ds.status.clone().unwrap_or_default();
        let generation = ds.metadata.generation.unwrap_or(0);
        if counts.matches(&status) && status.observed_generation.unwrap_or(0) >= generation {
            return Ok(());
        }
        let namespace = ds.namespace_str();
        let name = ds.name_str().to_string();
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
        let mut to_update = ds.clone();
        // One retry on a fresh copy, as upstream (StatusUpdateRetries = 1).
        for attempt in 0..2 {
            let status = to_update.status.get_or_insert_with(Default::default);
            if update_observed_generation {
                status.observed_generation = Some(generation);
            }
            counts.write(status);
            match api
                .replace_status(&name, &PostParams::default(), &to_update)
                .await
            {
                Ok(_) => return Ok(()),
                Err(error) if attempt == 1 => return Err(error.into()),
                Err(_) => to_update = api.get(&name).await?,
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct Counts {
    desired: i32,
    current: i32,
    misscheduled: i32,
    ready: i32,
    updated: i32,
    available: i32,
}

impl Counts {
    fn unavailable(&self) -> i32 {
        self.desired - self.available
    }

    fn matches(&self, status: &k8s_openapi::api::apps::v1::DaemonSetStatus) -> bool {
        status.desired_number_scheduled == self.desired
            && status.current_number_scheduled == self.current
            && status.number_misscheduled == self.misscheduled
            && status.number_ready == self.ready
            && status.updated_number_scheduled.unwrap_or(0) == self.updated
            && status.number_available.unwrap_or(0) == self.available
            && status.number_unavailable.unwrap_or(0) == self.unavailable()
    }

    fn write(&self, status: &mut k8s_openapi::api::apps::v1::DaemonSetStatus) {
        status.desired_number_scheduled = self.desired;
        status.current_number_scheduled = self.current;
        status.number_misscheduled = self.misscheduled;
        status.number_ready = self.ready;
        status.updated_number_scheduled = Some(self.updated);
        status.number_available = Some(self.available);
        status.number_unavailable = Some(self.unavailable());
    }
}

/// Creates a pod for each node in `needing` (slow start, at most BURST_REPLICAS)
/// and deletes `to_delete`, under expectations (`syncNodes`).
pub(super) async fn sync_nodes_with<P: PodControlInterface>(
    pod_control: &P,
    expectations: &ControllerExpectations,
    ds: &Arc<DaemonSet>,
    to_delete: &[String],
    needing: &[String],
    hash: &str,
) -> anyhow::Result<()> {
    let key = key_of(&ds.metadata);
    let namespace = ds.namespace_str();
    let create_count = needing.len().min(BURST_REPLICAS);
    let delete_count = to_delete.len().min(BURST_REPLICAS);
    expectations.set(&key, create_count as i64, delete_count as i64);
    let template = create_pod_template(ds, template_generation(ds), hash);
    let owner = controller_ref(ds.as_ref());
    let mut errors: Vec<anyhow::Error> = Vec::new();

    let mut position = 0;
    let mut batch = create_count.min(SLOW_START_INITIAL_BATCH_SIZE);
    while batch > 0 {
        let results =
            futures::future::join_all(needing[position..position + batch].iter().map(|node| {
                let mut template = template.clone();
                pin_to_node(template.spec.get_or_insert_with(Default::default), node);
                let owner = owner.clone();
                async move {
                    pod_control
                        .create_pod(namespace, &template, ds.as_ref(), owner)
                        .await
                }
            }))
            .await;
        let mut failed = false;
        for result in results {
            match result {
                Ok(_) => {}
                // The namespace is going away: nothing to create any more.
                Err(error) if is_namespace_terminating(&error) => {}
                Err(error) => {
                    expectations.creation_observed(&key);
                    errors.push(anyhow::Error::new(error).context("creating daemon pod"));
                    failed = true;
                }
            }
        }
        position += batch;
        let skipped = create_count - position;
        if failed && skipped > 0 {
            // The rest would likely fail the same way: do not wait for them.
            expectations.lower(&key, skipped as i64, 0);
            break;
        }
        batch = (2 * batch).min(skipped);
    }

    let deletions = futures::future::join_all(to_delete[..delete_count].iter().map(|name| {
        let key = key.clone();
        async move {
            match pod_control.delete_pod(namespace, name, ds.as_ref()).await {
                Ok(()) => None,
                Err(error) => {
                    expectations.deletion_observed(&key);
                    (!is_not_found(&error)).then(|| {
                        anyhow::Error::new(error).context(format!("deleting daemon pod {name}"))
                    })
                }
            }
        }
    }))
    .await;
    errors.extend(deletions.into_iter().flatten());
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        n => Err(errors
            .remove(0)
            .context(format!("and {} more errors syncing daemon pods", n - 1))),
    }
}
