//! resourcequota-controller: keeps every ResourceQuota's `status.hard` and `status.used`
//! (upstream `pkg/controller/resourcequota/` with the evaluators of `pkg/quota/v1`).
//!
//! Keys are quotas (`namespace/name`) on two queues, each with
//! `--concurrent-resource-quota-syncs` workers, as upstream: `resourcequota_priority` for
//! a quota whose `spec.hard` is not yet in its status or that lacks the usage of a name
//! some evaluator measures, `resourcequota_primary` for the rest. A quota is queued when
//! it is added, when its `spec.hard` changes, every `--resource-quota-sync-period`, and
//! when the objects it counts change in a way that can lower its usage (replenishment):
//! any deletion; a pod that stops being charged (it finished, or its deletion grace
//! period ran out); a Service whose quota type (NodePort, LoadBalancer, other) changes.
//! Creations are charged by the API server's quota admission, as upstream, and seen here
//! at the next full sync.
//!
//! A sync sets `status.hard` to `spec.hard` and recomputes `status.used`: the previous
//! usage overlaid with what the evaluators ([`evaluator`]) measure over the quota's
//! namespace, within its scopes ([`scopes`]), masked to the hard names; it writes the
//! status (a full `PUT resourcequotas/status`) only when something differs.
//!
//! Pods, Services, PersistentVolumeClaims and quotas come from typed informers; every
//! other quotable resource, custom ones included, from a metadata-only monitor
//! ([`monitor`]) found through discovery every 30 s, and counted as
//! `count/<resource>.<group>`. Workers wait for the monitors' first lists (and for a
//! discovery change to be applied) before they compute anything.

pub mod evaluator;
mod monitor;
pub mod resources;
pub mod scopes;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use anyhow::anyhow;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, ResourceQuota, ResourceQuotaStatus, Service,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use rkcm_gocompat::quantity;
use rkcm_proto::v1::informer_client::InformerClient;
use tokio::sync::OwnedRwLockWriteGuard;
use tonic::transport::Channel;
use tracing::{debug, info, warn};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::store::{key_of, split_key, Store};

use self::evaluator::{Evaluator, Kind, Object};
use self::monitor::Monitors;
use self::resources::ResourceList;

pub const NAME: &str = "resourcequota-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// what charges and scopes read: requests and limits, overhead, priority class, active deadline, pod (anti-)affinity namespaces, phase.
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.containers.resources",
        "spec.initContainers.resources",
        "spec.initContainers.restartPolicy",
        "spec.overhead",
        "spec.priorityClassName",
        "spec.activeDeadlineSeconds",
        "spec.affinity",
        "status",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby); the monitors
/// stream whatever discovery lists besides.
pub const RESOURCES: &[&str] = &[
    "v1/persistentvolumeclaims",
    "v1/pods",
    "v1/resourcequotas",
    "v1/services",
];
const PRIMARY_QUEUE: &str = "resourcequota_primary";
const PRIORITY_QUEUE: &str = "resourcequota_priority";
/// How often discovery is read for new resources (upstream: 30 s, fixed).
const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);

/// The controller's flags (KCM's names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of resource quotas that are allowed to sync concurrently. Larger number
    /// = more responsive quota management, but more CPU (and network) load
    #[arg(long, default_value_t = 5)]
    pub concurrent_resource_quota_syncs: usize,
    /// The period for syncing quota usage status in the system
    #[arg(long, default_value = "5m0s", value_parser = crate::flags::parse_go_duration)]
    pub resource_quota_sync_period: Duration,
}

struct Controller {
    client: kube::Client,
    quotas: Store<ResourceQuota>,
    pods: Store<Pod>,
    services: Store<Service>,
    claims: Store<PersistentVolumeClaim>,
    primary: Arc<WorkQueue<String>>,
    priority: Arc<WorkQueue<String>>,
    /// The built-in evaluators, and an object-count evaluator for each resource discovery
    /// found (never removed, as upstream's registry).
    registry: RwLock<Vec<Evaluator>>,
    monitors: Monitors,
    /// Each pod's compute usage ([`evaluator::pod_compute_usage`]) by UID, with the
    /// resourceVersion it was computed at: a full pass evaluates every pod of a namespace
    /// once per quota, and most have not changed since the last pass.
    pod_usage: RwLock<HashMap<String, (String, Arc<ResourceList>)>>,
    /// Workers hold it shared; discovery holds it while it changes the monitors.
    worker_lock: Arc<tokio::sync::RwLock<()>>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    let client = context.clients.client(NAME)?;
    let quotas = context.informers.get::<ResourceQuota>();
    let pods = context.informers.get::<Pod>();
    let services = context.informers.get::<Service>();
    let claims = context.informers.get::<PersistentVolumeClaim>();
    let informer_client = context.informers.client();
    let worker_lock = Arc::new(tokio::sync::RwLock::new(()));
    // Held until the monitors have their first lists: workers start blocked on it.
    let initial = worker_lock.clone().try_write_owned().ok();
    let controller = Arc::new_cyclic(|this: &Weak<Controller>| {
        let this = this.clone();
        Controller {
            client,
            quotas: quotas.store().clone(),
            pods: pods.store().clone(),
            services: services.store().clone(),
            claims: claims.store().clone(),
            primary: context.queue(PRIMARY_QUEUE),
            priority: context.queue(PRIORITY_QUEUE),
            registry: RwLock::new(Evaluator::built_in()),
            pod_usage: RwLock::default(),
            monitors: Monitors::new(
                informer_client.clone(),
                format!("{} resourcequota", crate::client::USER_AGENT_PREFIX),
                context.informers.shard(),
                Arc::new(move |group: &str, resource: &str, namespace: &str| {
                    if let Some(controller) = this.upgrade() {
                        controller.replenish(group, resource, namespace);
                    }
                }),
            ),
            worker_lock,
        }
    });
    quotas.handle(&controller, Controller::on_quota);
    pods.handle(&controller, Controller::on_pod);
    services.handle(&controller, Controller::on_service);
    claims.handle(&controller, Controller::on_claim);
    tokio::spawn(discover(controller.clone(), initial, informer_client));
    tokio::spawn(enqueue_all_every(
        controller.clone(),
        options.resource_quota_sync_period,
    ));
    {
        let controller = controller.clone();
        context
            .ready_checks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((
                "resourcequota monitors".to_string(),
                Arc::new(move || controller.monitors.is_synced()),
            ));
    }
    let workers = options.concurrent_resource_quota_syncs;
    let runnable = |queue: &Arc<WorkQueue<String>>| {
        Runnable::new(
            NAME,
            queue.clone(),
            workers,
            controller.clone(),
            |c, key| async move { c.sync(&key).await },
        )
    };
    Ok(vec![
        runnable(&controller.primary),
        runnable(&controller.priority),
    ])
}

/// Semantic equality of two API resource lists: the same names with equal quantities,
/// absent and empty alike. Entries that are not quantities are left out (an API server
/// cannot have stored them; counting them would rewrite such a quota at every sync).
fn same_list(a: Option<&ApiList>, b: Option<&ApiList>) -> bool {
    resources::equals(&resources::parse(a).0, &resources::parse(b).0)
}

type ApiList =
    std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

fn spec_hard(quota: &ResourceQuota) -> Option<&ApiList> {
    quota.spec.as_ref().and_then(|spec| spec.hard.as_ref())
}

impl Controller {
    fn on_quota(&self, change: &Change<ResourceQuota>) {
        match change {
            Change::Added(quota) => self.add_quota(quota),
            Change::Updated { old, new } => {
                // Only a new intent matters: status changes are this controller's own, and
                // full recalculations come from the periodic pass.
                if !same_list(spec_hard(old), spec_hard(new)) {
                    self.add_quota(new);
                }
            }
            Change::Deleted(deleted) => {
                let quota = deleted.object();
                self.primary.add(key_of(&quota.metadata));
                // Quotas that count quotas have one fewer.
                self.replenish("", "resourcequotas", quota.namespace_str());
            }
        }
    }

    /// Queues a quota, on the priority queue when its status lacks its intent.
    fn add_quota(&self, quota: &ResourceQuota) {
        let key = key_of(&quota.metadata);
        let status = quota.status.as_ref();
        if !same_list(spec_hard(quota), status.and_then(|s| s.hard.as_ref())) {
            self.priority.add(key);
            return;
        }
        let used = status.and_then(|s| s.used.as_ref());
        let registry = self.registry.read().unwrap_or_else(|p| p.into_inner());
        let missing_usage = status
            .and_then(|s| s.hard.as_ref())
            .into_iter()
            .flatten()
            .filter(|(name, _)| !used.is_some_and(|used| used.contains_key(*name)))
            .any(|(name, _)| {
                let name = [name.clone()];
                registry
                    .iter()
                    .any(|e| !e.matching_resources(&name).is_empty())
            });
        if missing_usage {
            self.priority.add(key);
        } else {
            self.primary.add(key);
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        let matters = match change {
            Change::Added(_) => false,
            Change::Updated { old, new } => {
                evaluator::pod_update_matters(old, new, Timestamp::now())
            }
            Change::Deleted(_) => true,
        };
        if let Change::Deleted(deleted) = change {
            if let Some(uid) = deleted.object().metadata.uid.as_deref() {
                self.pod_usage
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(uid);
            }
        }
        if matters {
            let pod = change.latest();
            self.replenish("", "pods", pod.namespace_str());
        }
    }

    fn on_service(&self, change: &Change<Service>) {
        let matters = match change {
            Change::Added(_) => false,
            Change::Updated { old, new } => evaluator::service_update_matters(old, new),
            Change::Deleted(_) => true,
        };
        if matters {
            let service = change.latest();
            self.replenish("", "services", service.namespace_str());
        }
    }

    /// Only deletions: a claim's update changes its usage only with the
    /// RecoverVolumeExpansionFailure gate, off in 1.29.
    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        if let Change::Deleted(deleted) = change {
            self.replenish(
                "",
                "persistentvolumeclaims",
                deleted
                    .object()
                    .metadata
                    .namespace
                    .as_deref()
                    .unwrap_or_default(),
            );
        }
    }

    /// Queues the quotas of `namespace` that track something of (group, resource)
    /// (upstream `replenishQuota`).
    fn replenish(&self, group: &str, resource: &str, namespace: &str) {
        let Some(evaluator) = self
            .registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| e.is(group, resource))
            .cloned()
        else {
            return;
        };
        for quota in self.quotas.list_namespace(namespace) {
            let hard: Vec<String> = quota
                .status
                .as_ref()
                .and_then(|s| s.hard.as_ref())
                .map(|hard| hard.keys().cloned().collect())
                .unwrap_or_default();
            if !evaluator.matching_resources(&hard).is_empty() {
                debug!(quota = %key_of(&quota.metadata), %group, %resource, "replenishing quota");
                self.primary.add(key_of(&quota.metadata));
            }
        }
    }

    fn enqueue_all(&self) {
        for quota in self.quotas.list() {
            self.primary.add(key_of(&quota.metadata));
        }
        debug!(
            "resource quota controller queued all resource quotas for full calculation of usage"
        );
    }

    /// An object-count evaluator for each quotable resource that has none.
    fn add_evaluators(&self, quotable: &[rkcm_proto::v1::ResourceInfo]) {
        let mut registry = self.registry.write().unwrap_or_else(|p| p.into_inner());
        for info in quotable {
            if !registry.iter().any(|e| e.is(&info.group, &info.resource)) {
                info!(group = %info.group, resource = %info.resource, "QuotaMonitor created object count evaluator");
                registry.push(Evaluator::object_count(&info.group, &info.resource, None));
            }
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let _monitors_stable = self.worker_lock.read().await;
        let Some(quota) = self.quotas.get(key) else {
            debug!(quota = key, "resource quota has been deleted");
            return Ok(());
        };
        self.sync_quota(&quota).await
    }

    /// Upstream `syncResourceQuota`.
    async fn sync_quota(&self, quota: &ResourceQuota) -> anyhow::Result<()> {
        let key = key_of(&quota.metadata);
        let status = quota.status.as_ref();
        let status_hard = status.and_then(|s| s.hard.as_ref());
        let status_used = status.and_then(|s| s.used.as_ref());
        let (hard, malformed) = resources::parse(spec_hard(quota));
        if !malformed.is_empty() {
            warn!(quota = %key, entries = ?malformed, "ignoring spec.hard entries that are not quantities");
        }
        let (old_used, _) = resources::parse(status_used);
        let mut dirty = !same_list(spec_hard(quota), status_hard)
            || status_hard.is_none()
            || status_used.is_none();
        let (namespace, _) = split_key(&key);
        let (usage, errors) = self.calculate_usage(namespace, quota, &hard);
        let mut used = old_used.clone();
        used.extend(usage);
        let used = resources::mask(&used, &resources::names(&hard));
        dirty |= !resources::equals(&used, &old_used);
        let mut failures = errors;
        if dirty {
            let mut updated = quota.clone();
            updated.status = Some(ResourceQuotaStatus {
                hard: (!hard.is_empty()).then(|| resources::to_api(&hard)),
                used: (!used.is_empty()).then(|| resources::to_api(&used)),
            });
            let (namespace, name) = split_key(&key);
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), namespace);
            if let Err(error) = api
                .replace_status(name, &PostParams::default(), &updated)
                .await
            {
                failures.push(crate::controller::describe(&anyhow!(error)));
            } else {
                debug!(quota = %key, used = %resources::pretty_print(&used), "quota status updated");
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("{key}: {}", failures.join("; ")))
        }
    }

    /// The usage the evaluators measure for the quota's hard names, and the errors of
    /// those that could not measure (their names are left out) (upstream
    /// `CalculateUsage`).
    fn calculate_usage(
        &self,
        namespace: &str,
        quota: &ResourceQuota,
        hard: &ResourceList,
    ) -> (ResourceList, Vec<String>) {
        let hard_names = resources::names(hard);
        let evaluators = self
            .registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let potential: Vec<String> = evaluators
            .iter()
            .flat_map(|e| e.matching_resources(&hard_names))
            .collect();
        let mut matched = resources::intersection(&hard_names, &potential);
        let requirements = scopes::of_quota(quota);
        let now = Timestamp::now();
        let mut usage = ResourceList::new();
        let mut errors = Vec::new();
        for evaluator in &evaluators {
            let names = evaluator.matching_resources(&matched);
            if names.is_empty() {
                continue;
            }
            match self.usage_stats(evaluator, namespace, &names, &requirements, now) {
                Ok(stats) => resources::add_into(&mut usage, &stats),
                Err(error) => {
                    errors.push(error);
                    matched = resources::difference(&matched, &names);
                }
            }
        }
        (resources::mask(&usage, &matched), errors)
    }

    fn usage_stats(
        &self,
        evaluator: &Evaluator,
        namespace: &str,
        names: &[String],
        requirements: &[k8s_openapi::api::core::v1::ScopedResourceSelectorRequirement],
        now: Timestamp,
    ) -> Result<ResourceList, String> {
        let stats = |objects: Vec<Object<'_>>| {
            evaluator::usage_stats(evaluator, names, requirements, objects, now)
        };
        Ok(match &evaluator.kind {
            Kind::Pods => self.pod_stats(evaluator, namespace, names, requirements, now),
            Kind::Services => {
                let services = self.services.list_namespace(namespace);
                stats(services.iter().map(|s| Object::Service(s)).collect())
            }
            Kind::PersistentVolumeClaims => {
                let claims = self.claims.list_namespace(namespace);
                stats(claims.iter().map(|c| Object::Claim(c)).collect())
            }
            Kind::ObjectCount(_) => {
                let count = if evaluator.is("", "resourcequotas") {
                    self.quotas.list_namespace(namespace).len()
                } else {
                    let monitor = self
                        .monitors
                        .synced_monitor(&evaluator.group, &evaluator.resource)
                        .ok_or_else(|| {
                            let resource = if evaluator.group.is_empty() {
                                evaluator.resource.clone()
                            } else {
                                format!("{}.{}", evaluator.resource, evaluator.group)
                            };
                            format!("failed to list content: {resource} not yet synced")
                        })?;
                    monitor.count(namespace)
                };
                stats((0..count).map(|_| Object::Other).collect())
            }
        })
    }
}

impl Controller {
    /// The pods' usage within the quota's scopes: [`evaluator::usage_stats`] for pods, each
    /// pod's compute usage taken from the cache.
    fn pod_stats(
        &self,
        evaluator: &Evaluator,
        namespace: &str,
        names: &[String],
        requirements: &[k8s_openapi::api::core::v1::ScopedResourceSelectorRequirement],
        now: Timestamp,
    ) -> ResourceList {
        let count_name = evaluator::object_count_name("", "pods");
        let one = quantity::Quantity::from_int(1, quantity::Format::DecimalSI);
        let mut used: ResourceList = names
            .iter()
            .map(|name| {
                (
                    name.clone(),
                    quantity::Quantity::zero(quantity::Format::DecimalSI),
                )
            })
            .collect();
        for pod in self.pods.list_namespace(namespace) {
            match evaluator.matches_scopes(requirements, &Object::Pod(&pod)) {
                Ok(true) => {}
                Ok(false) => continue,
                // An invalid selector stops the count there, as upstream's does.
                Err(_) => break,
            }
            if let Some(count) = used.get_mut(&count_name) {
                count.add(&one);
            }
            if !evaluator::pod_is_chargeable(&pod, now) {
                continue;
            }
            for (name, value) in self.pod_compute_usage(&pod).iter() {
                if let Some(sum) = used.get_mut(name) {
                    sum.add(value);
                }
            }
        }
        used
    }

    fn pod_compute_usage(&self, pod: &Pod) -> Arc<ResourceList> {
        let (Some(uid), Some(version)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) else {
            return Arc::new(evaluator::pod_compute_usage(pod));
        };
        if let Some((cached_version, usage)) = self
            .pod_usage
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(uid)
        {
            if cached_version == version {
                return usage.clone();
            }
        }
        let usage = Arc::new(evaluator::pod_compute_usage(pod));
        self.pod_usage
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_string(), (version.to_string(), usage.clone()));
        usage
    }
}

/// Re-reads discovery every period (sooner until the monitors first sync), starting and
/// stopping monitors as resources come and go (upstream `Sync`); releases `initial` once
/// every monitor has its first list.
async fn discover(
    controller: Arc<Controller>,
    mut initial: Option<OwnedRwLockWriteGuard<()>>,
    mut client: InformerClient<Channel>,
) {
    let mut known: Option<BTreeSet<(String, String, String)>> = None;
    let first_retry = Duration::from_secs(1);
    let mut retry = first_retry;
    loop {
        match client
            .list_resources(rkcm_proto::v1::ListResourcesRequest {})
            .await
        {
            Ok(response) => {
                let quotable = monitor::quotable(&response.into_inner().resources);
                let resources: BTreeSet<(String, String, String)> = quotable
                    .iter()
                    .map(|r| (r.group.clone(), r.version.clone(), r.resource.clone()))
                    .collect();
                if quotable.is_empty() {
                    warn!("resource quota controller: discovery returned no quotable resource; keeping the current monitors");
                } else if known.as_ref() != Some(&resources) {
                    // Workers pause while the monitors change (the first time they have
                    // not started yet).
                    let _paused = if initial.is_some() {
                        None
                    } else {
                        Some(controller.worker_lock.clone().write_owned().await)
                    };
                    if let Some(old) = &known {
                        let added: Vec<_> = resources.difference(old).collect();
                        let removed: Vec<_> = old.difference(&resources).collect();
                        info!(?added, ?removed, "syncing resource quota controller with updated resources from discovery");
                    }
                    controller.add_evaluators(&quotable);
                    controller.monitors.sync(&quotable);
                    known = Some(resources);
                    let deadline = tokio::time::Instant::now() + DISCOVERY_PERIOD;
                    while !controller.monitors.is_synced() && tokio::time::Instant::now() < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if !controller.monitors.is_synced() {
                        warn!(waiting_for = ?controller.monitors.unsynced(), "timed out waiting for quota monitor sync");
                    }
                }
            }
            Err(status) => {
                warn!(error = %status.message(), "resource quota controller: discovery failed; keeping the current monitors")
            }
        }
        if initial.is_some() && controller.monitors.is_synced() {
            info!("resource quota controller: every monitor has synced; starting to compute usage");
            initial = None;
        }
        let wait = if initial.is_some() {
            let wait = retry;
            retry = (retry * 2).min(DISCOVERY_PERIOD);
            wait
        } else {
            retry = first_retry;
            DISCOVERY_PERIOD
        };
        tokio::time::sleep(wait).await;
    }
}

/// Queues every quota at start and every `period` (upstream `enqueueAll`); a zero period
/// turns it off.
async fn enqueue_all_every(controller: Arc<Controller>, period: Duration) {
    if period.is_zero() {
        info!("periodic quota controller resync disabled");
        return;
    }
    loop {
        controller.enqueue_all();
        tokio::time::sleep(period).await;
    }
}
