//! KCM's controllers, one folder each, named as KCM names them, and how the worker
//! builds the ones a `--controllers` list selects.

pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod garbagecollector;
pub mod job;
pub mod namespace;
pub mod replicaset;
pub mod serviceaccount;
pub mod statefulset;
pub mod ttlafterfinished;

use crate::controller::{ControllerContext, Runnable};

/// Builds the controller `name` (a canonical name from the registry) and registers its
/// handlers; `None` for a name this version does not implement. Most controllers are one
/// queue with its workers; the garbage collector is two.
pub fn build(name: &str, context: &ControllerContext) -> Option<anyhow::Result<Vec<Runnable>>> {
    let one = |built: anyhow::Result<Runnable>| built.map(|r| vec![r]);
    Some(match name {
        "serviceaccount-controller" => one(serviceaccount::build(context)),
        "replicaset-controller" => one(replicaset::build(context)),
        "replicationcontroller-controller" => {
            one(replicaset::build_replication_controller(context))
        }
        "deployment-controller" => one(deployment::build(context)),
        "garbage-collector-controller" => garbagecollector::build(context),
        "namespace-controller" => one(namespace::build(context)),
        "job-controller" => one(job::build(context)),
        "cronjob-controller" => one(cronjob::build(context)),
        "disruption-controller" => one(disruption::build(context)),
        "ttl-after-finished-controller" => one(ttlafterfinished::build(context)),
        "statefulset-controller" => one(statefulset::build(context)),
        "daemonset-controller" => one(daemonset::build(context)),
        _ => return None,
    })
}

/// The resources a controller's informers watch, as the informer-server's `--warm`
/// takes them: a launcher warms them while it waits for the lease, so a new leader's
/// workers start on a synced cache.
pub fn resources(name: &str) -> &'static [&'static str] {
    match name {
        "serviceaccount-controller" => &["v1/namespaces", "v1/serviceaccounts"],
        "namespace-controller" => &["v1/namespaces"],
        "job-controller" => &["v1/pods", "batch/v1/jobs"],
        "cronjob-controller" => &["batch/v1/cronjobs", "batch/v1/jobs"],
        "disruption-controller" => &[
            "v1/pods",
            "policy/v1/poddisruptionbudgets",
            "apps/v1/replicasets",
            "apps/v1/deployments",
            "v1/replicationcontrollers",
            "apps/v1/statefulsets",
        ],
        "ttl-after-finished-controller" => &["batch/v1/jobs"],
        "statefulset-controller" => &[
            "v1/pods",
            "apps/v1/statefulsets",
            "apps/v1/controllerrevisions",
            "v1/persistentvolumeclaims",
        ],
        "daemonset-controller" => &[
            "v1/pods",
            "v1/nodes",
            "apps/v1/daemonsets",
            "apps/v1/controllerrevisions",
        ],
        "replicaset-controller" => &["v1/pods", "apps/v1/replicasets"],
        "replicationcontroller-controller" => &["v1/pods", "v1/replicationcontrollers"],
        "deployment-controller" => &["v1/pods", "apps/v1/replicasets", "apps/v1/deployments"],
        _ => &[],
    }
}
