//! The table of KCM 1.29's controllers: one descriptor each, in KCM's start order.

use super::*;

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
