//! namespace-controller: empties a namespace being deleted and then releases it
//! (upstream `pkg/controller/namespace/`). The deletion itself is in `deleter`; this
//! module queues terminating namespaces (on every change, and every
//! `--namespace-sync-period`) and runs `--concurrent-namespace-syncs` workers.

mod deleter;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::queue::WorkQueue;
use crate::rate_limiter::{Bucket, ItemExponentialFailure, MaxOf};

pub const NAME: &str = "namespace-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/namespaces"];

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of namespace objects that are allowed to sync concurrently. Larger number
    /// = more responsive namespace termination, but more CPU (and network) load.
    #[arg(long, default_value_t = 10)]
    pub concurrent_namespace_syncs: usize,
    /// The period for syncing namespace life-cycle updates (Go duration).
    #[arg(long, default_value = "5m", value_parser = crate::flags::parse_go_duration)]
    pub namespace_sync_period: std::time::Duration,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    // Upstream's namespace queue backs off 5 ms doubling to 60 s (not 1000 s).
    let queue: Arc<WorkQueue<String>> = WorkQueue::with_rate_limiter(
        "namespace",
        Box::new(MaxOf::new(vec![
            Box::new(ItemExponentialFailure::new(
                Duration::from_millis(5),
                Duration::from_secs(60),
            )),
            Box::new(Bucket::new(10.0, 100)),
        ])),
        Some(context.metrics.workqueue.for_queue("namespace")),
    );
    let namespaces = context.informers.get::<Namespace>();
    {
        let queue = queue.clone();
        namespaces.add_handler(Arc::new(move |change: &Change<Namespace>| {
            let Some(namespace) = change.live() else {
                return;
            };
            if namespace.metadata.deletion_timestamp.is_some() {
                if let Some(name) = namespace.metadata.name.clone() {
                    queue.add(name);
                }
            }
        }));
    }
    {
        // The namespace informer's own resync period, as KCM gives it.
        let queue = queue.clone();
        let store = namespaces.store().clone();
        let period = options.namespace_sync_period;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                for namespace in store.list() {
                    if namespace.metadata.deletion_timestamp.is_some() {
                        if let Some(name) = namespace.metadata.name.clone() {
                            queue.add(name);
                        }
                    }
                }
            }
        });
    }
    let deleter = Arc::new(deleter::Deleter {
        client,
        informer: context.informers.client(),
        namespaces: namespaces.store().clone(),
        queue: queue.clone(),
    });
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_namespace_syncs,
        deleter,
        |deleter, name| async move { deleter.sync(&name).await },
    ))
}
