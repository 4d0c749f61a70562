//! KCM's controllers by name, and `--controllers` with KCM's semantics.
//!
//! Every controller of KCM 1.29 is listed with its canonical name, its legacy alias (both
//! accepted), whether KCM runs it by default, and whether this version of rkcm has it.
//! `*` selects every default-enabled controller rkcm implements; `name` adds one, `-name`
//! removes one. Naming a controller rkcm does not implement is an error that says so; a
//! name KCM does not know is an error too.

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

use Availability::*;

/// Why the CSR controllers run unsharded.
const CSR_SHARDING: &str =
    "its keys are CertificateSigningRequests, which belong to no namespace; run it unsharded";

/// KCM 1.29's controllers (cmd/kube-controller-manager/names), in KCM's start order.
pub const CONTROLLERS: &[Descriptor] = &[
    d(
        "serviceaccount-token-controller",
        Some("serviceaccount-token"),
        Default,
        None,
        Implementation {
            resources: serviceaccounttoken::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| {
                serviceaccounttoken::build(c, &o.serviceaccount_token, &o.root_ca_cert_publisher)
            },
        },
    ),
    d(
        "endpoints-controller",
        Some("endpoint"),
        Default,
        Some("endpoint-controller"),
        Implementation {
            resources: endpoint::RESOURCES,
            fields: endpoint::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(endpoint::build(c, &o.endpoint)),
        },
    ),
    d(
        "endpointslice-controller",
        Some("endpointslice"),
        Default,
        Some("endpointslice-controller"),
        Implementation {
            resources: endpointslice::RESOURCES,
            fields: endpointslice::FIELDS,
            sharding: Sharding::ByNamespace {
                whole: &["v1/nodes"],
            },
            build: |c, o| one(endpointslice::build(c, &o.endpointslice)),
        },
    ),
    d(
        "endpointslice-mirroring-controller",
        Some("endpointslicemirroring"),
        Default,
        Some("endpointslicemirroring-controller"),
        Implementation {
            resources: endpointslicemirroring::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(endpointslicemirroring::build(c, &o.endpointslice_mirroring)),
        },
    ),
    d(
        "replicationcontroller-controller",
        Some("replicationcontroller"),
        Default,
        Some("replication-controller"),
        Implementation {
            resources: replicaset::REPLICATION_CONTROLLER_RESOURCES,
            fields: replicaset::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| {
                one(replicaset::build_replication_controller(
                    c,
                    &o.replication_controller,
                ))
            },
        },
    ),
    d(
        "pod-garbage-collector-controller",
        Some("podgc"),
        Default,
        Some("pod-garbage-collector"),
        Implementation {
            resources: podgc::RESOURCES,
            fields: podgc::FIELDS,
            sharding: Sharding::Refused(
                "its --terminated-pod-gc-threshold counts terminated pods across the whole cluster, and it must see every Node to tell an orphaned pod; run it unsharded",
            ),
            build: |c, o| one(podgc::build(c, &o.podgc)),
        },
    ),
    d(
        "resourcequota-controller",
        Some("resourcequota"),
        Default,
        Some("resourcequota-controller"),
        Implementation {
            resources: resourcequota::RESOURCES,
            fields: resourcequota::FIELDS,
            // Quotas count within their namespace, and the monitors stream the same shard.
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| resourcequota::build(c, &o.resource_quota),
        },
    ),
    d(
        "namespace-controller",
        Some("namespace"),
        Default,
        Some("namespace-controller"),
        Implementation {
            resources: namespace::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(namespace::build(c, &o.namespace)),
        },
    ),
    d(
        "serviceaccount-controller",
        Some("serviceaccount"),
        Default,
        Some("service-account-controller"),
        Implementation {
            resources: serviceaccount::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(serviceaccount::build(c)),
        },
    ),
    d(
        "garbage-collector-controller",
        Some("garbagecollector"),
        Default,
        Some("generic-garbage-collector"),
        Implementation {
            resources: garbagecollector::RESOURCES,
            fields: &[],
            // Owners and dependents cross namespaces and cluster scope: every shard holds
            // the whole graph (its monitors stream whole) and acts on its own keys.
            sharding: Sharding::ByKey,
            build: |c, o| garbagecollector::build(c, &o.garbage_collector),
        },
    ),
    d(
        "daemonset-controller",
        Some("daemonset"),
        Default,
        Some("daemon-set-controller"),
        Implementation {
            resources: daemonset::RESOURCES,
            fields: daemonset::FIELDS,
            sharding: Sharding::ByNamespace {
                whole: &["v1/nodes"],
            },
            build: |c, o| one(daemonset::build(c, &o.daemonset)),
        },
    ),
    d(
        "job-controller",
        Some("job"),
        Default,
        Some("job-controller"),
        Implementation {
            resources: job::RESOURCES,
            fields: job::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(job::build(c, &o.job)),
        },
    ),
    d(
        "deployment-controller",
        Some("deployment"),
        Default,
        Some("deployment-controller"),
        Implementation {
            resources: deployment::RESOURCES,
            fields: deployment::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(deployment::build(c, &o.deployment)),
        },
    ),
    d(
        "replicaset-controller",
        Some("replicaset"),
        Default,
        Some("replicaset-controller"),
        Implementation {
            resources: replicaset::RESOURCES,
            fields: replicaset::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(replicaset::build(c, &o.replicaset)),
        },
    ),
    d(
        "horizontal-pod-autoscaler-controller",
        Some("horizontalpodautoscaling"),
        Default,
        Some("horizontal-pod-autoscaler"),
        Implementation {
            resources: podautoscaler::RESOURCES,
            fields: podautoscaler::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(podautoscaler::build(c, &o.horizontal_pod_autoscaler)),
        },
    ),
    d(
        "disruption-controller",
        Some("disruption"),
        Default,
        Some("disruption-controller"),
        Implementation {
            resources: disruption::RESOURCES,
            fields: disruption::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(disruption::build(c)),
        },
    ),
    d(
        "statefulset-controller",
        Some("statefulset"),
        Default,
        Some("statefulset-controller"),
        Implementation {
            resources: statefulset::RESOURCES,
            fields: statefulset::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(statefulset::build(c, &o.statefulset)),
        },
    ),
    d(
        "cronjob-controller",
        Some("cronjob"),
        Default,
        Some("cronjob-controller"),
        Implementation {
            resources: cronjob::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(cronjob::build(c, &o.cronjob)),
        },
    ),
    d(
        "certificatesigningrequest-signing-controller",
        Some("csrsigning"),
        Default,
        Some("certificate-controller"),
        Implementation {
            resources: certificates::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(CSR_SHARDING),
            build: |c, o| certificates::build_signing(c, &o.csr_signing),
        },
    ),
    d(
        "certificatesigningrequest-approving-controller",
        Some("csrapproving"),
        Default,
        Some("certificate-controller"),
        Implementation {
            resources: certificates::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(CSR_SHARDING),
            build: |c, _| one(certificates::build_approving(c)),
        },
    ),
    d(
        "certificatesigningrequest-cleaner-controller",
        Some("csrcleaner"),
        Default,
        Some("certificate-controller"),
        Implementation {
            resources: certificates::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(CSR_SHARDING),
            build: |c, _| one(certificates::build_cleaner(c)),
        },
    ),
    d(
        "ttl-controller",
        Some("ttl"),
        Default,
        Some("ttl-controller"),
        Implementation {
            resources: ttl::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are Nodes, which belong to no namespace, and the TTL follows the count of all Nodes; run it unsharded",
            ),
            build: |c, _| one(ttl::build(c)),
        },
    ),
    d(
        "bootstrap-signer-controller",
        Some("bootstrapsigner"),
        DisabledByDefault,
        Some("bootstrap-signer"),
        Implementation {
            resources: bootstrap::bootstrapsigner::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its one key, kube-public/cluster-info, is signed with the token Secrets of kube-system, and a shard holds one namespace without the other; run it unsharded",
            ),
            build: |c, _| one(bootstrap::bootstrapsigner::build(c)),
        },
    ),
    d(
        "token-cleaner-controller",
        Some("tokencleaner"),
        DisabledByDefault,
        Some("token-cleaner"),
        Implementation {
            resources: bootstrap::tokencleaner::RESOURCES,
            fields: &[],
            // Its keys are the Secrets of kube-system: the shard that holds that
            // namespace does all the work.
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(bootstrap::tokencleaner::build(c)),
        },
    ),
    d(
        "node-ipam-controller",
        Some("nodeipam"),
        Default,
        Some("node-controller"),
        Implementation {
            resources: nodeipam::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are Nodes, which belong to no namespace; run it unsharded",
            ),
            build: |c, o| nodeipam::build(c, &o.node_ipam),
        },
    ),
    d(
        "node-lifecycle-controller",
        Some("nodelifecycle"),
        Default,
        Some("node-controller"),
        Implementation {
            resources: nodelifecycle::RESOURCES,
            fields: nodelifecycle::FIELDS,
            sharding: Sharding::Refused(
                "its keys are Nodes, which belong to no namespace; run it unsharded",
            ),
            build: |c, o| nodelifecycle::build(c, &o.node_lifecycle),
        },
    ),
    d(
        "taint-eviction-controller",
        None,
        Default,
        Some("node-controller"),
        Implementation {
            resources: tainteviction::RESOURCES,
            fields: tainteviction::FIELDS,
            sharding: Sharding::Refused(
                "it follows Nodes, which belong to no namespace, to their pods; run it unsharded",
            ),
            build: |c, _| tainteviction::build(c),
        },
    ),
    d(
        "persistentvolume-binder-controller",
        Some("persistentvolume-binder"),
        Default,
        Some("persistent-volume-binder"),
        Implementation {
            resources: pvbinder::RESOURCES,
            fields: pvbinder::FIELDS,
            sharding: Sharding::Refused(
                "PersistentVolumes belong to no namespace and a claim may bind any of them; run it unsharded",
            ),
            build: |c, o| pvbinder::build(c, &o.pv_binder),
        },
    ),
    d(
        "persistentvolume-attach-detach-controller",
        Some("attachdetach"),
        Default,
        Some("attachdetach-controller"),
        Implementation {
            resources: attachdetach::RESOURCES,
            fields: attachdetach::FIELDS,
            sharding: Sharding::Refused(
                "its keys are (volume, node) pairs across namespaces and Nodes belong to no namespace; run it unsharded",
            ),
            build: |c, o| attachdetach::build(c, &o.attach_detach),
        },
    ),
    d(
        "persistentvolume-expander-controller",
        Some("persistentvolume-expander"),
        Default,
        Some("expand-controller"),
        Implementation {
            resources: expand::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(expand::build(c)),
        },
    ),
    d(
        "clusterrole-aggregation-controller",
        Some("clusterrole-aggregation"),
        Default,
        Some("clusterrole-aggregation-controller"),
        Implementation {
            resources: clusterroleaggregation::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are ClusterRoles, which belong to no namespace; run it unsharded",
            ),
            build: |c, _| one(clusterroleaggregation::build(c)),
        },
    ),
    d(
        "persistentvolumeclaim-protection-controller",
        Some("pvc-protection"),
        Default,
        Some("pvc-protection-controller"),
        Implementation {
            resources: pvcprotection::RESOURCES,
            fields: pvcprotection::FIELDS,
            // Claims and the pods that use them share a namespace; the live check lists
            // one namespace.
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(pvcprotection::build(c)),
        },
    ),
    d(
        "persistentvolume-protection-controller",
        Some("pv-protection"),
        Default,
        Some("pv-protection-controller"),
        Implementation {
            resources: pvprotection::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are PersistentVolumes, which belong to no namespace; run it unsharded",
            ),
            build: |c, _| one(pvprotection::build(c)),
        },
    ),
    d(
        "ttl-after-finished-controller",
        Some("ttl-after-finished"),
        Default,
        Some("ttl-after-finished-controller"),
        Implementation {
            resources: ttlafterfinished::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(ttlafterfinished::build(c, &o.ttl_after_finished)),
        },
    ),
    d(
        "root-ca-certificate-publisher-controller",
        Some("root-ca-cert-publisher"),
        Default,
        Some("root-ca-cert-publisher"),
        Implementation {
            resources: rootcacertpublisher::RESOURCES,
            fields: &[],
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| rootcacertpublisher::build(c, &o.root_ca_cert_publisher),
        },
    ),
    d(
        "ephemeral-volume-controller",
        Some("ephemeral-volume"),
        Default,
        Some("ephemeral-volume-controller"),
        Implementation {
            resources: ephemeral::RESOURCES,
            fields: ephemeral::FIELDS,
            // A pod and the claims of its ephemeral volumes share a namespace.
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(ephemeral::build(c, &o.ephemeral_volume)),
        },
    ),
    d(
        "storageversion-garbage-collector-controller",
        Some("storage-version-gc"),
        FeatureGated("APIServerIdentity,StorageVersionAPI"),
        Some("storage-version-garbage-collector"),
        Implementation {
            resources: storageversiongc::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are cluster-scoped StorageVersions and kube-system identity Leases, which no namespace shard owns",
            ),
            build: |c, _| storageversiongc::build(c),
        },
    ),
    d(
        "resourceclaim-controller",
        Some("resource-claim-controller"),
        FeatureGated("DynamicResourceAllocation"),
        Some("resource-claim-controller"),
        Implementation {
            resources: resourceclaim::RESOURCES,
            fields: resourceclaim::FIELDS,
            // A pod, its claims, its claims' templates and its scheduling context share
            // a namespace.
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, _| one(resourceclaim::build(c)),
        },
    ),
    d(
        "legacy-serviceaccount-token-cleaner-controller",
        Some("legacy-service-account-token-cleaner"),
        Default,
        Some("legacy-service-account-token-cleaner"),
        Implementation {
            resources: legacysatokencleaner::RESOURCES,
            fields: legacysatokencleaner::FIELDS,
            sharding: Sharding::ByNamespace { whole: &[] },
            build: |c, o| one(legacysatokencleaner::build(c, &o.legacy_sa_token_cleaner)),
        },
    ),
    d(
        "validatingadmissionpolicy-status-controller",
        None,
        FeatureGated("ValidatingAdmissionPolicy"),
        Some("validatingadmissionpolicy-status-controller"),
        Implementation {
            resources: validatingadmissionpolicystatus::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are cluster-scoped ValidatingAdmissionPolicies, which no namespace shard owns",
            ),
            build: |c, o| {
                one(validatingadmissionpolicystatus::build(
                    c,
                    &o.validating_admission_policy_status,
                ))
            },
        },
    ),
    d(
        "service-cidr-controller",
        None,
        FeatureGated("MultiCIDRServiceAllocator"),
        Some("service-cidrs-controller"),
        Implementation {
            resources: servicecidrs::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are cluster-scoped ServiceCIDRs, judged against every IPAddress of the cluster",
            ),
            build: |c, _| one(servicecidrs::build(c)),
        },
    ),
    d(
        "service-lb-controller",
        Some("service"),
        Cloud,
        Some("service-controller"),
        Implementation {
            resources: service::RESOURCES,
            fields: &[],
            // A Service's balancer needs every node.
            sharding: Sharding::ByNamespace { whole: &["v1/nodes"] },
            build: |c, o| service::build(c, &o.service_lb, &o.generic),
        },
    ),
    d(
        "node-route-controller",
        Some("route"),
        Cloud,
        Some("route-controller"),
        Implementation {
            resources: route::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its routes are the whole cluster's, for Nodes, which belong to no namespace; run it unsharded",
            ),
            build: |c, o| route::build(c, &o.node_route, &o.node_ipam, &o.generic),
        },
    ),
    d(
        "cloud-node-lifecycle-controller",
        Some("cloud-node-lifecycle"),
        Cloud,
        // KCM gives it node-lifecycle-controller's identity.
        Some("node-controller"),
        Implementation {
            resources: cloudnodelifecycle::RESOURCES,
            fields: &[],
            sharding: Sharding::Refused(
                "its keys are Nodes, which belong to no namespace; run it unsharded",
            ),
            build: |c, o| {
                cloudnodelifecycle::build(c, o.node_lifecycle.node_monitor_period, &o.generic)
            },
        },
    ),
];

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
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gated_and_cloud_controllers_run_only_where_kcm_runs_them() {
        let mut options = ControllerOptions::default();
        let selected = [
            "deployment-controller",
            "service-cidr-controller",
            "storageversion-garbage-collector-controller",
            "service-lb-controller",
        ];
        let split = runnable(&selected, &options);
        assert_eq!(
            split.run,
            ["deployment-controller", "service-lb-controller"]
        );
        assert_eq!(
            split.skipped[1],
            (
                "storageversion-garbage-collector-controller",
                "Controller is disabled by a feature gate (requiredFeatureGates: APIServerIdentity, StorageVersionAPI)".to_string()
            )
        );
        options.generic.feature_gates = vec![
            "MultiCIDRServiceAllocator=true,StorageVersionAPI=true"
                .parse()
                .unwrap(),
            "APIServerIdentity=false".parse().unwrap(),
        ];
        options.generic.cloud_provider = "external".into();
        let split = runnable(&selected, &options);
        assert_eq!(
            split.run,
            ["deployment-controller", "service-cidr-controller"]
        );
        assert_eq!(split.skipped.len(), 2);
        assert!(split.skipped[1]
            .1
            .starts_with("Skipping a cloud provider controller"));
    }

    #[test]
    fn star_aliases_and_negation() {
        let all = select(&list(&["*"])).unwrap();
        assert!(all.contains(&"deployment-controller"));
        assert!(all.contains(&"replicaset-controller"));
        assert!(all.contains(&"serviceaccount-controller"));
        let without = select(&list(&["*", "-deployment"])).unwrap();
        assert!(!without.contains(&"deployment-controller"));
        assert_eq!(
            select(&list(&["replicaset,deployment-controller"])).unwrap(),
            vec!["deployment-controller", "replicaset-controller"]
        );
        let without_svgc = select(&list(&["-storage-version-gc", "*"])).unwrap();
        assert!(all.contains(&"storageversion-garbage-collector-controller"));
        assert_eq!(
            without_svgc,
            all.iter()
                .copied()
                .filter(|c| *c != "storageversion-garbage-collector-controller")
                .collect::<Vec<_>>(),
            "negation by alias removes a feature-gated controller `*` selected"
        );
        let without_gc = select(&list(&["-garbagecollector", "*"])).unwrap();
        assert!(!without_gc.contains(&"garbage-collector-controller"));
        assert!(all.contains(&"garbage-collector-controller"));
    }

    /// Each controller's ServiceAccount is the one the recorded API server's bootstrap
    /// policy binds to its `system:controller:*` role (checked when the record is there).
    #[test]
    fn service_accounts_are_the_bootstrap_policy_subjects() {
        let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
            return;
        };
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir);
        let text = std::fs::read_to_string(dir.join("rbac/bootstrap-policy.json"))
            .expect("the recorded bootstrap policy");
        let policy: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bound: BTreeSet<&str> = ["ClusterRoleBinding", "RoleBinding"]
            .iter()
            .flat_map(|kind| policy[kind].as_array().into_iter().flatten())
            .filter(|binding| {
                binding["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("system:controller:"))
            })
            .flat_map(|binding| binding["subjects"].as_array().into_iter().flatten())
            .filter(|subject| {
                subject["kind"] == "ServiceAccount" && subject["namespace"] == "kube-system"
            })
            .filter_map(|subject| subject["name"].as_str())
            .collect();
        for descriptor in CONTROLLERS {
            let Some(account) = descriptor.service_account else {
                continue;
            };
            // Controllers behind gates that are off in 1.29, or run only with a cloud
            // provider, get their roles from elsewhere.
            if matches!(descriptor.availability, FeatureGated(_) | Cloud)
                && !matches!(account, "service-controller" | "route-controller")
            {
                continue;
            }
            assert!(
                bound.contains(account),
                "{}: no bootstrap binding for ServiceAccount {account}",
                descriptor.name
            );
        }
    }

    /// What each controller's `build` asks the informers for is what its descriptor
    /// declares (the launcher warms exactly the declared list on a standby).
    #[tokio::test]
    async fn each_controller_reads_what_it_declares() {
        use std::sync::Arc;
        let informer =
            rkcm_client::informer::connect("unix:///nonexistent/informer.sock", None).unwrap();
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        for descriptor in CONTROLLERS {
            let implementation = &descriptor.implementation;
            let informers = Arc::new(crate::factory::Informers::new(
                informer.clone(),
                "test".into(),
                std::time::Duration::from_secs(3600),
            ));
            let context = ControllerContext {
                informers: informers.clone(),
                clients: crate::client::ClientFactory::from_config(config.clone(), 20.0, 30, None)
                    .unwrap(),
                metrics: crate::metrics::Metrics::new(),
                ready_checks: std::default::Default::default(),
            };
            let built = (implementation.build)(&context, &ControllerOptions::default()).unwrap();
            if built.is_empty() {
                // Disabled by its defaults (the token controller without a key file): it
                // reads nothing; its own tests check what it reads when it runs.
                continue;
            }
            let mut declared: Vec<String> = implementation
                .resources
                .iter()
                .map(|r| r.to_string())
                .collect();
            declared.sort();
            assert_eq!(informers.resources(), declared, "{}", descriptor.name);
        }
    }

    #[test]
    fn options_have_kcms_defaults_once() {
        let options = ControllerOptions::default();
        assert_eq!(options.deployment.concurrent_deployment_syncs, 5);
        assert_eq!(options.daemonset.concurrent_daemonset_syncs, 2);
        assert_eq!(options.garbage_collector.concurrent_gc_syncs, 20);
        assert_eq!(options.ephemeral_volume.concurrent_ephemeralvolume_syncs, 5);
        assert!(options.garbage_collector.enable_garbage_collector);
        assert_eq!(
            options.namespace.namespace_sync_period,
            std::time::Duration::from_secs(300)
        );
        let flags = ControllerOptions::flags();
        assert!(flags.contains(&"concurrent-rc-syncs".to_string()));
        let unique: BTreeSet<&String> = flags.iter().collect();
        assert_eq!(unique.len(), flags.len(), "no flag is defined twice");
    }

    #[test]
    fn sharding_splits_namespaced_keys_and_refuses_the_rest() {
        assert_eq!(
            whole_resources(&["daemonset-controller", "deployment-controller"]),
            vec!["v1/nodes"]
        );
        assert_eq!(sharding_refusal(&["deployment-controller"]), None);
        assert_eq!(sharding_refusal(&["garbage-collector-controller"]), None);
        let refusal = sharding_refusal(&["deployment-controller", "ttl-controller"])
            .expect("the ttl controller is refused");
        assert!(refusal.starts_with("ttl-controller cannot be sharded"));
        // Every whole resource is one the controller reads.
        for descriptor in CONTROLLERS {
            if let Implementation {
                sharding: Sharding::ByNamespace { whole },
                resources,
                ..
            } = &descriptor.implementation
            {
                for resource in *whole {
                    assert!(
                        resources.contains(resource),
                        "{}: {resource}",
                        descriptor.name
                    );
                }
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(
            select(&list(&["frobnicator"])),
            Err(SelectionError::Unknown("frobnicator".into()))
        );
        assert_eq!(select(&list(&[""])), Err(SelectionError::Empty));
        // Every controller of KCM 1.29 is one rkcm has: naming any is accepted.
        for descriptor in CONTROLLERS {
            assert_eq!(
                select(&list(&[descriptor.name])),
                Ok(vec![descriptor.name]),
                "{}",
                descriptor.name
            );
        }
    }
}
