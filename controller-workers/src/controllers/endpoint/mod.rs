//! endpoints-controller: keeps the core/v1 Endpoints object of every Service with a
//! selector listing the addresses of the pods it selects (upstream
//! `pkg/controller/endpoint/endpoints_controller.go` and `endpoints_tracker.go`).
//!
//! Keys are Services (`namespace/name`). A Service's change or deletion queues it; a pod's
//! addition, deletion, or a change that matters to endpoints (readiness, IPs, deletion,
//! labels, hostname, subdomain) queues the Services that select it before or after, after
//! `--endpoint-updates-batch-period`; an Endpoints deletion queues its name (so a managed
//! one comes back). Once the stores are synced, every Endpoints object but the old
//! leader-election locks is queued once, so those whose Service went while no controller
//! ran are deleted.
//!
//! A sync deletes the Endpoints of a Service that is gone, leaves alone those of an
//! ExternalName Service or one without a selector, and otherwise computes the subsets
//! from the pods in the store ([`desired`]) and creates or replaces the object when it
//! differs. After a replace, the cached copy at the replaced resourceVersion is known to
//! be stale ([`tracker`]): a sync that finds it fails and is retried.

mod desired;
mod tracker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use tracing::debug;

use crate::api_errors::{self, is_namespace_terminating, is_not_found};
use crate::controller::{ControllerContext, Runnable};
use crate::endpointutil::{
    is_external_name, pod_service_memberships, selects, service_selector,
    services_to_update_on_pod_change, TriggerTimeTracker, LEADER_ANNOTATION,
};
use crate::informer::{Change, Informer};
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, WARNING};
use crate::store::{key_of, split_key, Store};

use self::desired::{desired_subsets, endpoints_to_write};
use self::tracker::StaleEndpointsTracker;

pub const NAME: &str = "endpoints-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// what an address needs: node, hostname and subdomain, named container ports; `status` (IPs, readiness).
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.nodeName",
        "spec.hostname",
        "spec.subdomain",
        "spec.containers.ports",
        "status",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/services", "v1/pods", "v1/endpoints"];
/// The component its events are reported as (upstream's event source).
const EVENT_SOURCE: &str = "endpoint-controller";
/// Its queue, named as upstream names it (the `name` label of the workqueue metrics).
const QUEUE: &str = "endpoint";
/// A Service that keeps failing is dropped after this many retries (upstream maxRetries).
pub const MAX_RETRIES: u32 = 15;

/// The controller's flags (KCM's names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of endpoint syncing operations that will be done concurrently. Larger
    /// number = faster endpoint updating, but more CPU (and network) load
    #[arg(long, default_value_t = 5)]
    pub concurrent_endpoint_syncs: usize,
    /// The length of endpoint updates batching period. Processing of pod changes will be
    /// delayed by this duration to join them with potential upcoming updates and reduce
    /// the overall number of endpoints updates. Larger number = higher endpoint
    /// programming latency, but lower number of endpoints revision generated
    #[arg(long, default_value = "0s", value_parser = crate::flags::parse_go_duration)]
    pub endpoint_updates_batch_period: Duration,
}

struct Controller {
    client: kube::Client,
    recorder: Recorder,
    services: Store<Service>,
    pods: Store<Pod>,
    endpoints: Store<Endpoints>,
    queue: Arc<WorkQueue<String>>,
    batch_period: Duration,
    stale: StaleEndpointsTracker,
    trigger_times: TriggerTimeTracker,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue = context.queue(QUEUE);
    let services = context.informers.get::<Service>();
    let pods = context.informers.get::<Pod>();
    let endpoints = context.informers.get::<Endpoints>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        services: services.store().clone(),
        pods: pods.store().clone(),
        endpoints: endpoints.store().clone(),
        queue: queue.clone(),
        batch_period: options.endpoint_updates_batch_period,
        stale: StaleEndpointsTracker::default(),
        trigger_times: TriggerTimeTracker::new(),
    });
    services.enqueue_changes(&queue);
    pods.handle(&controller, Controller::on_pod);
    endpoints.handle(&controller, Controller::on_endpoints);
    tokio::spawn(check_leftover_endpoints(
        services,
        pods,
        endpoints,
        queue.clone(),
    ));
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_endpoint_syncs,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    )
    .with_max_retries(MAX_RETRIES))
}

/// Once the stores hold their first snapshots, queues every Endpoints object once (but
/// the leader-election locks of old components, which have no Service), so one whose
/// Service was deleted while no controller ran is deleted now; after that, deletions are
/// seen as they happen.
async fn check_leftover_endpoints(
    services: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    endpoints: Arc<Informer<Endpoints>>,
    queue: Arc<WorkQueue<String>>,
) {
    services.wait_for_sync().await;
    pods.wait_for_sync().await;
    endpoints.wait_for_sync().await;
    for key in leftover_keys(&endpoints.store().list()) {
        queue.add(key);
    }
}

/// The keys [`check_leftover_endpoints`] queues.
fn leftover_keys(endpoints: &[Arc<Endpoints>]) -> Vec<String> {
    endpoints
        .iter()
        .filter(|endpoints| {
            !endpoints
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|annotations| annotations.contains_key(LEADER_ANNOTATION))
        })
        .map(|endpoints| key_of(&endpoints.metadata))
        .collect()
}

fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}

impl Controller {
    fn on_pod(&self, change: &Change<Pod>) {
        let services = match change {
            Change::Added(pod) => pod_service_memberships(&self.services, pod),
            Change::Updated { old, new } => {
                services_to_update_on_pod_change(&self.services, old, new)
            }
            Change::Deleted(deleted) => pod_service_memberships(&self.services, deleted.object()),
        };
        for key in services {
            self.queue.add_after(key, self.batch_period);
        }
    }

    fn on_endpoints(&self, change: &Change<Endpoints>) {
        if let Change::Deleted(deleted) = change {
            self.queue.add(key_of(&deleted.object().metadata));
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        let (namespace, name) = split_key(key);
        let result = self.sync_service(namespace, name).await;
        debug!(controller = NAME, service = key, elapsed = ?started.elapsed(), "Finished syncing service endpoints");
        result
    }

    async fn sync_service(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), namespace);
        let Some(service) = self.services.get_in(namespace, name) else {
            // The Service is gone: so are its Endpoints. (Made by hand for a Service
            // without a selector too: they belonged to the Service.)
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => {
                    return Err(anyhow::Error::new(error).context(format!(
                        "deleting the Endpoints {namespace}/{name} of a deleted Service"
                    )))
                }
            }
            self.trigger_times.delete_service(namespace, name);
            self.stale.delete(namespace, name);
            return Ok(());
        };
        // ExternalName Services have no endpoints (kubernetes/kubernetes#105986), and
        // the endpoints of a Service without a selector are someone else's.
        if is_external_name(&service) {
            return Ok(());
        }
        let Some(selector) = service_selector(&service) else {
            return Ok(());
        };
        debug!(controller = NAME, service = %format!("{namespace}/{name}"), "About to update endpoints for service");
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace_labelled(namespace, |labels| selects(selector, labels));
        let pods: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        // Computed whether or not anything is written, so the tracker's state follows
        // every sync.
        let trigger_time = self.trigger_times.compute(&service, &pods);
        let desired = desired_subsets(&service, &pods);

        let current = self.endpoints.get_in(namespace, name);
        if let Some(current) = &current {
            if self.stale.is_stale(current) {
                anyhow::bail!(
                    "endpoints informer cache is out of date, resource version {} already processed for endpoints {namespace}/{name}",
                    current.metadata.resource_version.as_deref().unwrap_or_default()
                );
            }
        }
        let Some(write) =
            endpoints_to_write(&service, current.as_deref(), desired.subsets, trigger_time)
        else {
            debug!(controller = NAME, service = %format!("{namespace}/{name}"), "endpoints are equal, skipping update");
            return Ok(());
        };
        debug!(controller = NAME, service = %format!("{namespace}/{name}"), ready_endpoints = desired.ready, not_ready_endpoints = desired.not_ready, "Update endpoints");
        let written = if write.create {
            api.create(&PostParams::default(), &write.endpoints).await
        } else {
            api.replace(name, &PostParams::default(), &write.endpoints)
                .await
        };
        let written = match written {
            Ok(written) => written,
            Err(error) => {
                if write.create && is_forbidden(&error) {
                    debug!(controller = NAME, service = %format!("{namespace}/{name}"), error = %api_errors::message(&error), "Forbidden from creating endpoints");
                    // Creates keep failing in a terminating namespace; its deletion wins.
                    if is_namespace_terminating(&error) {
                        return Ok(());
                    }
                }
                let (reason, message, doing) = if write.create {
                    (
                        "FailedToCreateEndpoint",
                        format!(
                            "Failed to create endpoint for service {namespace}/{name}: {}",
                            api_errors::message(&error)
                        ),
                        "creating",
                    )
                } else {
                    (
                        "FailedToUpdateEndpoint",
                        format!(
                            "Failed to update endpoint {namespace}/{name}: {}",
                            api_errors::message(&error)
                        ),
                        "updating",
                    )
                };
                self.recorder
                    .event(&write.endpoints, WARNING, reason, message);
                return Err(anyhow::Error::new(error))
                    .with_context(|| format!("{doing} Endpoints {namespace}/{name}"));
            }
        };
        // The cache may still show the replaced version for a while: a sync that reads
        // it must wait. A replace that changed nothing keeps its resourceVersion, and
        // that version is then current, not stale (kubernetes/kubernetes#127417, in
        // later 1.29 patches).
        if let Some(current) = current.filter(|_| !write.create) {
            if written.metadata.resource_version != current.metadata.resource_version {
                self.stale.stale(&current);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn endpoints(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> Arc<Endpoints> {
        let mut endpoints = Endpoints::default();
        endpoints.metadata.namespace = Some(namespace.into());
        endpoints.metadata.name = Some(name.into());
        endpoints.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        Arc::new(endpoints)
    }

    #[test]
    fn leftovers_are_every_endpoints_but_leader_locks() {
        let mut keys = leftover_keys(&[
            endpoints("default", "kubernetes", &[]),
            endpoints("team", "orphan", &[("team", "a")]),
            endpoints(
                "kube-system",
                "kube-scheduler",
                &[(LEADER_ANNOTATION, "{\"holderIdentity\":\"x\"}")],
            ),
        ]);
        keys.sort();
        assert_eq!(keys, vec!["default/kubernetes", "team/orphan"]);
    }

    #[test]
    fn flags_have_kcms_names_and_defaults() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            options: Options,
        }
        let defaults = Command::parse_from(["test"]).options;
        assert_eq!(defaults.concurrent_endpoint_syncs, 5);
        assert_eq!(defaults.endpoint_updates_batch_period, Duration::ZERO);
        let given = Command::parse_from([
            "test",
            "--concurrent-endpoint-syncs=2",
            "--endpoint-updates-batch-period=1.5s",
        ])
        .options;
        assert_eq!(given.concurrent_endpoint_syncs, 2);
        assert_eq!(
            given.endpoint_updates_batch_period,
            Duration::from_millis(1500)
        );
        assert!(Command::try_parse_from(["test", "--endpoint-updates-batch-period=5"]).is_err());
    }
}
