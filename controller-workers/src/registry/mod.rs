//! KCM's controllers by name, and `--controllers` with KCM's semantics.
//!
//! Every controller of KCM 1.29 is listed (in `table.rs`) with its canonical name, its
//! legacy alias (both accepted), whether KCM runs it by default, its ServiceAccount, what
//! it reads and how rkcm builds it. `*` selects every default-enabled controller; `name`
//! adds one, `-name` removes one; a name KCM does not know is an error.

use std::collections::BTreeSet;

use crate::controller::{ControllerContext, Runnable};
use crate::controllers::{
    attachdetach, bootstrap, certificates, cloudnodelifecycle, clusterroleaggregation, cronjob,
    daemonset, deployment, disruption, endpoint, endpointslice, endpointslicemirroring, ephemeral,
    expand, garbagecollector, job, legacysatokencleaner, namespace, nodeipam, nodelifecycle,
    podautoscaler, podgc, pvbinder, pvcprotection, pvprotection, replicaset, resourceclaim,
    resourcequota, rootcacertpublisher, route, service, serviceaccount, serviceaccounttoken,
    servicecidrs, statefulset, storageversiongc, tainteviction, ttl, ttlafterfinished,
    validatingadmissionpolicystatus,
};
use crate::generic_options::GenericOptions;
use crate::projection::FieldList;
use crate::worker::UsageError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// KCM runs it unless disabled.
    Default,
    /// KCM runs it only when named (bootstrap-signer, token-cleaner).
    DisabledByDefault,
    /// Behind a feature gate that is off by default in 1.29.
    FeatureGated(&'static str),
    /// Runs only with an in-tree cloud provider.
    Cloud,
}

#[derive(Debug)]
pub struct Descriptor {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub availability: Availability,
    /// The ServiceAccount in `kube-system` whose credentials the controller uses with
    /// `--use-service-account-credentials` (the name KCM asks its client builder for, and
    /// the subject the API server's bootstrap policy binds to `system:controller:<name>`).
    /// `None`: KCM gives it the kubeconfig's own identity even then (the token
    /// controller, which mints the very tokens the others use).
    pub service_account: Option<&'static str>,
    /// How rkcm builds it.
    pub implementation: Implementation,
}

/// How the worker builds an implemented controller.
#[derive(Debug)]
pub struct Implementation {
    /// The resources its informers read (a test checks the list against what `build`
    /// asks for): the launcher warms them on a standby, so a new leader's workers start
    /// on a synced cache.
    pub resources: &'static [&'static str],
    /// The fields it reads of each resource's objects (see [`crate::projection`]): the
    /// worker streams the union of its controllers' fields, so its stores hold projected
    /// objects. A resource not listed is read whole, as is any object the controller
    /// writes back with an update (an update of a projected object would erase the rest).
    pub fields: FieldList,
    /// Builds the controller and registers its handlers; most are one queue, the garbage
    /// collector is two.
    pub build: Build,
    /// How its work splits over the shards of a group.
    pub sharding: Sharding,
}

/// How a controller's work splits over the processes of a sharded group (`shards: N`, the
/// informer-server's namespace-hash filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharding {
    /// Its keys are namespaced objects (or namespaces): each shard handles the namespaces
    /// that hash to it, and receives these resources whole, since it must see all of them
    /// (cluster-scoped kinds it reads next to its own, such as Nodes).
    ByNamespace { whole: &'static [&'static str] },
    /// Its decisions need the whole cluster, but each object is acted on by one shard:
    /// every stream it reads (its `resources` and any it opens itself) is whole in every
    /// shard, and the controller drops the keys that are not its shard's
    /// ([`rkcm_proto::v1::Shard::holds`], the informer-server's hash). The garbage
    /// collector: an object's own deletion by the shard of its namespace (of its name
    /// when cluster-scoped), an owner's orphaning and finalizers by the owner's shard.
    ByKey,
    /// It cannot be split correctly; the reason, for the refusal.
    Refused(&'static str),
}

/// Why this set of controllers cannot run in a sharded group, if one of them cannot.
pub fn sharding_refusal(controllers: &[&str]) -> Option<String> {
    controllers
        .iter()
        .find_map(|name| match lookup(name)?.implementation.sharding {
            Sharding::Refused(reason) => Some(format!("{name} cannot be sharded: {reason}")),
            Sharding::ByNamespace { .. } | Sharding::ByKey => None,
        })
}

/// The resources every shard of a group with these controllers receives whole.
pub fn whole_resources(controllers: &[&str]) -> Vec<&'static str> {
    let mut whole: Vec<&'static str> = controllers
        .iter()
        .filter_map(|name| lookup(name).map(|d| &d.implementation))
        .flat_map(|implementation| match implementation.sharding {
            Sharding::ByNamespace { whole } => whole.iter().copied(),
            Sharding::ByKey => implementation.resources.iter().copied(),
            Sharding::Refused(_) => [].iter().copied(),
        })
        .collect();
    whole.sort_unstable();
    whole.dedup();
    whole
}

/// Per resource these controllers read, the fields a worker running them asks the
/// informer-server for (`resource -> paths`, the union of their declarations); resources
/// one of them reads whole are not listed (streamed whole).
pub fn projections(controllers: &[&str]) -> std::collections::HashMap<String, Vec<String>> {
    crate::projection::union(
        controllers
            .iter()
            .filter_map(|name| lookup(name).map(|d| &d.implementation))
            .map(|implementation| (implementation.resources, implementation.fields)),
    )
    .into_iter()
    .filter_map(|(resource, fields)| {
        Some((
            resource.to_string(),
            fields?.into_iter().map(str::to_string).collect(),
        ))
    })
    .collect()
}

pub type Build = fn(&ControllerContext, &ControllerOptions) -> anyhow::Result<Vec<Runnable>>;

const fn d(
    name: &'static str,
    alias: Option<&'static str>,
    availability: Availability,
    service_account: Option<&'static str>,
    implementation: Implementation,
) -> Descriptor {
    Descriptor {
        name,
        alias,
        availability,
        service_account,
        implementation,
    }
}

fn one(built: anyhow::Result<Runnable>) -> anyhow::Result<Vec<Runnable>> {
    built.map(|runnable| vec![runnable])
}

/// Every implemented controller's flags, KCM's names and defaults (each defined once, in
/// the controller's folder), flattened into `rkcm worker`'s and `rkcm launcher`'s command
/// lines; the launcher passes on the ones given to it.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct ControllerOptions {
    /// `--feature-gates` and the cloud-provider flags.
    #[command(flatten)]
    pub generic: GenericOptions,
    #[command(flatten)]
    pub deployment: deployment::Options,
    #[command(flatten)]
    pub replicaset: replicaset::Options,
    #[command(flatten)]
    pub replication_controller: replicaset::ReplicationControllerOptions,
    #[command(flatten)]
    pub statefulset: statefulset::Options,
    #[command(flatten)]
    pub daemonset: daemonset::Options,
    #[command(flatten)]
    pub job: job::Options,
    #[command(flatten)]
    pub cronjob: cronjob::Options,
    #[command(flatten)]
    pub ttl_after_finished: ttlafterfinished::Options,
    #[command(flatten)]
    pub namespace: namespace::Options,
    #[command(flatten)]
    pub garbage_collector: garbagecollector::Options,
    #[command(flatten)]
    pub node_ipam: nodeipam::Options,
    #[command(flatten)]
    pub node_lifecycle: nodelifecycle::Options,
    #[command(flatten)]
    pub root_ca_cert_publisher: rootcacertpublisher::Options,
    #[command(flatten)]
    pub serviceaccount_token: serviceaccounttoken::Options,
    #[command(flatten)]
    pub legacy_sa_token_cleaner: legacysatokencleaner::Options,
    #[command(flatten)]
    pub endpointslice: endpointslice::Options,
    #[command(flatten)]
    pub podgc: podgc::Options,
    #[command(flatten)]
    pub horizontal_pod_autoscaler: podautoscaler::Options,
    #[command(flatten)]
    pub resource_quota: resourcequota::Options,
    #[command(flatten)]
    pub endpoint: endpoint::Options,
    #[command(flatten)]
    pub endpointslice_mirroring: endpointslicemirroring::Options,
    #[command(flatten)]
    pub csr_signing: certificates::SigningOptions,
    #[command(flatten)]
    pub ephemeral_volume: ephemeral::Options,
    #[command(flatten)]
    pub pv_binder: pvbinder::Options,
    #[command(flatten)]
    pub service_lb: service::Options,
    #[command(flatten)]
    pub node_route: route::Options,
    #[command(flatten)]
    pub attach_detach: attachdetach::Options,
    #[command(flatten)]
    pub validating_admission_policy_status: validatingadmissionpolicystatus::Options,
}

impl ControllerOptions {
    /// KCM's start-up checks of these flags for the selected controllers (some it makes
    /// whichever controllers run): a bad command line is a [`UsageError`] (exit 2); an
    /// unreadable file or a refused cloud provider is an error as KCM's (exit 1).
    pub fn validate(&self, selected: &[&str]) -> anyhow::Result<()> {
        if let Some(refusal) = self.generic.cloud_provider_refusal() {
            anyhow::bail!(refusal);
        }
        // KCM builds the cloud provider at start whichever controllers run (an unknown
        // name, an unreadable --cloud-config, a cloud without a cluster ID: exit 1).
        crate::cloud::provider(&self.generic)?;
        if selected.contains(&pvbinder::NAME) {
            // KCM exits when a recycler pod template cannot be read.
            self.pv_binder.validate()?;
        }
        if selected.contains(&nodeipam::NAME) {
            self.node_ipam.validate().map_err(UsageError)?;
        }
        if selected.contains(&podautoscaler::NAME) {
            self.horizontal_pod_autoscaler
                .validate()
                .map_err(UsageError)?;
        }
        // KCM checks these whichever controllers run.
        self.endpointslice.validate().map_err(UsageError)?;
        self.endpointslice_mirroring
            .validate()
            .map_err(UsageError)?;
        self.csr_signing.validate().map_err(UsageError)?;
        self.ephemeral_volume.validate().map_err(UsageError)?;
        self.attach_detach.validate().map_err(UsageError)?;
        Ok(())
    }

    /// Every flag's long name (`concurrent-deployment-syncs`, ...).
    pub fn flags() -> Vec<String> {
        use clap::Args as _;
        Self::augment_args(clap::Command::new("options"))
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(str::to_string))
            .collect()
    }
}

impl std::default::Default for ControllerOptions {
    /// The defaults of the flags (the same ones the command lines show).
    fn default() -> Self {
        use clap::{Args as _, FromArgMatches as _};
        let matches = Self::augment_args(clap::Command::new("options"))
            .no_binary_name(true)
            .get_matches_from(Vec::<String>::new());
        Self::from_arg_matches(&matches).expect("every option has a default")
    }
}

mod table;

use Availability::*;

pub use table::CONTROLLERS;

/// The ServiceAccount a controller uses with `--use-service-account-credentials`.
pub fn service_account_of(name: &str) -> Option<&'static str> {
    lookup(name).and_then(|descriptor| descriptor.service_account)
}

pub fn lookup(name: &str) -> Option<&'static Descriptor> {
    CONTROLLERS
        .iter()
        .find(|descriptor| descriptor.name == name || descriptor.alias == Some(name))
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectionError {
    #[error("--controllers: {0:?} is not a kube-controller-manager controller")]
    Unknown(String),
    #[error("--controllers: the list is empty")]
    Empty,
}

/// The controllers a `--controllers` list selects, by canonical name, in KCM's order.
pub fn select(list: &[String]) -> Result<Vec<&'static str>, SelectionError> {
    let mut star = false;
    let mut enabled = BTreeSet::new();
    let mut disabled = BTreeSet::new();
    let items: Vec<&str> = list
        .iter()
        .flat_map(|item| item.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect();
    if items.is_empty() {
        return Err(SelectionError::Empty);
    }
    for item in items {
        if item == "*" {
            star = true;
            continue;
        }
        let (negated, name) = match item.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, item),
        };
        let descriptor = lookup(name).ok_or_else(|| SelectionError::Unknown(item.to_string()))?;
        if negated {
            disabled.insert(descriptor.name);
        } else {
            enabled.insert(descriptor.name);
        }
    }
    Ok(CONTROLLERS
        .iter()
        .filter(|descriptor| {
            if disabled.contains(descriptor.name) {
                return false;
            }
            if enabled.contains(descriptor.name) {
                return true;
            }
            // `*` takes the feature-gated and cloud controllers too, as KCM's does:
            // `runnable` then leaves out those whose gate is off or whose cloud loops run
            // elsewhere.
            star && descriptor.availability != DisabledByDefault
        })
        .map(|descriptor| descriptor.name)
        .collect())
}

/// What `select` chose, split as KCM splits it at start: the controllers to run, and the
/// ones it skips with the reason it logs (a feature gate that is off, cloud loops left to
/// an external cloud-controller-manager).
#[derive(Debug, Default, PartialEq)]
pub struct Runnability {
    pub run: Vec<&'static str>,
    pub skipped: Vec<(&'static str, String)>,
}

/// Splits selected controllers into those that run and those KCM would skip.
pub fn runnable(selected: &[&'static str], options: &ControllerOptions) -> Runnability {
    let gates = options.generic.gates();
    let mut split = Runnability::default();
    for &name in selected {
        let skip = match lookup(name).map(|descriptor| descriptor.availability) {
            Some(FeatureGated(required)) => {
                let required: Vec<&str> = required.split(',').collect();
                (!gates.all_enabled(&required)).then(|| {
                    format!(
                        "Controller is disabled by a feature gate (requiredFeatureGates: {})",
                        required.join(", ")
                    )
                })
            }
            Some(Cloud) if !options.generic.includes_cloud_loops() => Some(format!(
                "Skipping a cloud provider controller (loopMode: ExternalLoops, --cloud-provider={})",
                options.generic.cloud_provider
            )),
            _ => None,
        };
        match skip {
            Some(reason) => split.skipped.push((name, reason)),
            None => split.run.push(name),
        }
    }
    split
}

#[cfg(test)]
mod tests;
