//! The two things about the v1.29 API types the OpenAPI definitions cannot say, written by
//! hand per definition (see the parent module).

/// Optional fields that are Go pointers to a scalar or to a custom-typed value (a zero is
/// kept, only null goes), by definition. Read from the v1.29 API types; the OpenAPI
/// definitions do not tell a pointer from a value.
pub(super) const POINTERS: &[(&str, &[&str])] = &[
    // ObjectMeta: a pending deletion's grace period and timestamp.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &["deletionGracePeriodSeconds", "deletionTimestamp"],
    ),
    // OwnerReference: the controller and blocking flags.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        &["controller", "blockOwnerDeletion"],
    ),
    // ManagedFieldsEntry: when, and the field set.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
        &["time", "fieldsV1"],
    ),
    // DeleteOptions (in an Eviction): grace period, orphaning, propagation.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        &[
            "gracePeriodSeconds",
            "orphanDependents",
            "propagationPolicy",
        ],
    ),
    // Preconditions of a deletion.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Preconditions",
        &["resourceVersion", "uid"],
    ),
    // ListMeta: the remaining item count.
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
        &["remainingItemCount"],
    ),
    // Webhooks: policies and timeout.
    (
        "io.k8s.api.admissionregistration.v1.MutatingWebhook",
        &[
            "failurePolicy",
            "matchPolicy",
            "reinvocationPolicy",
            "timeoutSeconds",
        ],
    ),
    (
        "io.k8s.api.admissionregistration.v1.ValidatingWebhook",
        &["failurePolicy", "matchPolicy", "timeoutSeconds"],
    ),
    // A webhook rule's scope.
    (
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        &["scope"],
    ),
    // A webhook's service path and port, and its URL.
    (
        "io.k8s.api.admissionregistration.v1.ServiceReference",
        &["path", "port"],
    ),
    (
        "io.k8s.api.admissionregistration.v1.WebhookClientConfig",
        &["url"],
    ),
    // Deployment spec: replicas, history limit, progress deadline.
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        &[
            "replicas",
            "revisionHistoryLimit",
            "progressDeadlineSeconds",
        ],
    ),
    // ReplicaSet spec: replicas.
    ("io.k8s.api.apps.v1.ReplicaSetSpec", &["replicas"]),
    // StatefulSet spec: replicas and history limit.
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        &["replicas", "revisionHistoryLimit"],
    ),
    // DaemonSet spec: history limit.
    (
        "io.k8s.api.apps.v1.DaemonSetSpec",
        &["revisionHistoryLimit"],
    ),
    // Workload statuses: the collision count.
    ("io.k8s.api.apps.v1.DeploymentStatus", &["collisionCount"]),
    ("io.k8s.api.apps.v1.StatefulSetStatus", &["collisionCount"]),
    ("io.k8s.api.apps.v1.DaemonSetStatus", &["collisionCount"]),
    // Rolling updates: surge and unavailability (int or percent), a StatefulSet's partition.
    (
        "io.k8s.api.apps.v1.RollingUpdateDeployment",
        &["maxUnavailable", "maxSurge"],
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateDaemonSet",
        &["maxUnavailable", "maxSurge"],
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy",
        &["partition", "maxUnavailable"],
    ),
    // HPA v1: replica floor, CPU target and status.
    (
        "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerSpec",
        &["minReplicas", "targetCPUUtilizationPercentage"],
    ),
    (
        "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerStatus",
        &[
            "observedGeneration",
            "lastScaleTime",
            "currentCPUUtilizationPercentage",
        ],
    ),
    // HPA v2: replica floor, scaling rules, targets and status.
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec",
        &["minReplicas"],
    ),
    (
        "io.k8s.api.autoscaling.v2.HPAScalingRules",
        &["stabilizationWindowSeconds", "selectPolicy"],
    ),
    (
        "io.k8s.api.autoscaling.v2.MetricTarget",
        &["value", "averageValue", "averageUtilization"],
    ),
    (
        "io.k8s.api.autoscaling.v2.MetricValueStatus",
        &["value", "averageValue", "averageUtilization"],
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        &["observedGeneration", "lastScaleTime"],
    ),
    // Job spec: sizes, limits, suspension, modes.
    (
        "io.k8s.api.batch.v1.JobSpec",
        &[
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
            "manualSelector",
            "ttlSecondsAfterFinished",
            "completionMode",
            "suspend",
            "podReplacementPolicy",
        ],
    ),
    // Job status: times, ready and terminating counts, failed indexes.
    (
        "io.k8s.api.batch.v1.JobStatus",
        &[
            "startTime",
            "completionTime",
            "terminating",
            "failedIndexes",
            "ready",
        ],
    ),
    // CronJob spec: time zone, deadline, suspension, history limits.
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        &[
            "timeZone",
            "startingDeadlineSeconds",
            "suspend",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ],
    ),
    // CronJob status: schedule times.
    (
        "io.k8s.api.batch.v1.CronJobStatus",
        &["lastScheduleTime", "lastSuccessfulTime"],
    ),
    // CSR spec: requested duration.
    (
        "io.k8s.api.certificates.v1.CertificateSigningRequestSpec",
        &["expirationSeconds"],
    ),
    // Lease spec: every field.
    (
        "io.k8s.api.coordination.v1.LeaseSpec",
        &[
            "holderIdentity",
            "leaseDurationSeconds",
            "acquireTime",
            "renewTime",
            "leaseTransitions",
        ],
    ),
    // Pod spec: grace periods, deadlines, token mounting, sharing, priority, runtime class.
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            "terminationGracePeriodSeconds",
            "activeDeadlineSeconds",
            "automountServiceAccountToken",
            "shareProcessNamespace",
            "priority",
            "runtimeClassName",
            "enableServiceLinks",
            "preemptionPolicy",
            "setHostnameAsFQDN",
            "hostUsers",
        ],
    ),
    // Pod status: start time.
    ("io.k8s.api.core.v1.PodStatus", &["startTime"]),
    // Pod security context: ids, groups, non-root, fsGroup policy.
    (
        "io.k8s.api.core.v1.PodSecurityContext",
        &[
            "runAsUser",
            "runAsGroup",
            "runAsNonRoot",
            "fsGroup",
            "fsGroupChangePolicy",
        ],
    ),
    // Container security context: privileges, ids, proc mount, read-only root.
    (
        "io.k8s.api.core.v1.SecurityContext",
        &[
            "privileged",
            "runAsUser",
            "runAsGroup",
            "runAsNonRoot",
            "readOnlyRootFilesystem",
            "allowPrivilegeEscalation",
            "procMount",
        ],
    ),
    // Windows options: credential spec, user, host process.
    (
        "io.k8s.api.core.v1.WindowsSecurityContextOptions",
        &[
            "gmsaCredentialSpecName",
            "gmsaCredentialSpec",
            "runAsUserName",
            "hostProcess",
        ],
    ),
    // Seccomp: the localhost profile.
    ("io.k8s.api.core.v1.SeccompProfile", &["localhostProfile"]),
    // Containers (init, ephemeral): the restart policy.
    ("io.k8s.api.core.v1.Container", &["restartPolicy"]),
    ("io.k8s.api.core.v1.EphemeralContainer", &["restartPolicy"]),
    // Container status: started.
    ("io.k8s.api.core.v1.ContainerStatus", &["started"]),
    // Probe: its own grace period.
    (
        "io.k8s.api.core.v1.Probe",
        &["terminationGracePeriodSeconds"],
    ),
    // Volume mount: propagation.
    ("io.k8s.api.core.v1.VolumeMount", &["mountPropagation"]),
    // Toleration: seconds.
    ("io.k8s.api.core.v1.Toleration", &["tolerationSeconds"]),
    // Taint: when it was added.
    ("io.k8s.api.core.v1.Taint", &["timeAdded"]),
    // Topology spread: minimum domains and inclusion policies.
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        &["minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"],
    ),
    // DNS option value.
    ("io.k8s.api.core.v1.PodDNSConfigOption", &["value"]),
    // Pod resource claims: the claim source and its status.
    (
        "io.k8s.api.core.v1.ClaimSource",
        &["resourceClaimName", "resourceClaimTemplateName"],
    ),
    (
        "io.k8s.api.core.v1.PodResourceClaimStatus",
        &["resourceClaimName"],
    ),
    // ConfigMap and Secret: immutability.
    ("io.k8s.api.core.v1.ConfigMap", &["immutable"]),
    ("io.k8s.api.core.v1.Secret", &["immutable"]),
    // References to ConfigMaps and Secrets: optional.
    ("io.k8s.api.core.v1.ConfigMapEnvSource", &["optional"]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &["optional"]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &["optional"]),
    ("io.k8s.api.core.v1.SecretEnvSource", &["optional"]),
    ("io.k8s.api.core.v1.SecretKeySelector", &["optional"]),
    ("io.k8s.api.core.v1.SecretProjection", &["optional"]),
    // Volume sources with modes and optional flags.
    (
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        &["defaultMode", "optional"],
    ),
    (
        "io.k8s.api.core.v1.SecretVolumeSource",
        &["defaultMode", "optional"],
    ),
    (
        "io.k8s.api.core.v1.DownwardAPIVolumeSource",
        &["defaultMode"],
    ),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", &["defaultMode"]),
    ("io.k8s.api.core.v1.KeyToPath", &["mode"]),
    ("io.k8s.api.core.v1.DownwardAPIVolumeFile", &["mode"]),
    // Projections: cluster trust bundles and service account tokens.
    (
        "io.k8s.api.core.v1.ClusterTrustBundleProjection",
        &["name", "signerName", "optional"],
    ),
    (
        "io.k8s.api.core.v1.ServiceAccountTokenProjection",
        &["expirationSeconds"],
    ),
    // Other volume sources: types, fs types, read-only flags, sizes, LUNs, initiators.
    ("io.k8s.api.core.v1.HostPathVolumeSource", &["type"]),
    ("io.k8s.api.core.v1.EmptyDirVolumeSource", &["sizeLimit"]),
    (
        "io.k8s.api.core.v1.AzureDiskVolumeSource",
        &["cachingMode", "fsType", "readOnly"],
    ),
    (
        "io.k8s.api.core.v1.CSIVolumeSource",
        &["readOnly", "fsType"],
    ),
    ("io.k8s.api.core.v1.FCVolumeSource", &["lun"]),
    ("io.k8s.api.core.v1.ISCSIVolumeSource", &["initiatorName"]),
    (
        "io.k8s.api.core.v1.ISCSIPersistentVolumeSource",
        &["initiatorName"],
    ),
    (
        "io.k8s.api.core.v1.GlusterfsPersistentVolumeSource",
        &["endpointsNamespace"],
    ),
    ("io.k8s.api.core.v1.LocalVolumeSource", &["fsType"]),
    // PV and PVC: storage class, volume mode, attributes class, phase transition time.
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        &[
            "storageClassName",
            "volumeMode",
            "volumeAttributesClassName",
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        &["currentVolumeAttributesClassName"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        &["volumeMode", "volumeAttributesClassName"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeStatus",
        &["lastPhaseTransitionTime"],
    ),
    // A typed object reference's namespace.
    ("io.k8s.api.core.v1.TypedObjectReference", &["namespace"]),
    // ReplicationController spec: replicas.
    (
        "io.k8s.api.core.v1.ReplicationControllerSpec",
        &["replicas"],
    ),
    // Service spec: node ports, traffic and family policies, load balancer class.
    (
        "io.k8s.api.core.v1.ServiceSpec",
        &[
            "ipFamilyPolicy",
            "allocateLoadBalancerNodePorts",
            "loadBalancerClass",
            "internalTrafficPolicy",
        ],
    ),
    // Service port: app protocol.
    ("io.k8s.api.core.v1.ServicePort", &["appProtocol"]),
    // Session affinity timeout.
    ("io.k8s.api.core.v1.ClientIPConfig", &["timeoutSeconds"]),
    // Load balancer status: IP mode, port errors.
    ("io.k8s.api.core.v1.LoadBalancerIngress", &["ipMode"]),
    ("io.k8s.api.core.v1.PortStatus", &["error"]),
    // ServiceAccount: token mounting.
    (
        "io.k8s.api.core.v1.ServiceAccount",
        &["automountServiceAccountToken"],
    ),
    // Endpoints: an address's node, a port's app protocol.
    ("io.k8s.api.core.v1.EndpointAddress", &["nodeName"]),
    ("io.k8s.api.core.v1.EndpointPort", &["appProtocol"]),
    // EndpointSlice endpoints: conditions, host, node, zone; ports.
    (
        "io.k8s.api.discovery.v1.EndpointConditions",
        &["ready", "serving", "terminating"],
    ),
    (
        "io.k8s.api.discovery.v1.Endpoint",
        &["hostname", "nodeName", "zone"],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointPort",
        &["name", "protocol", "port", "appProtocol"],
    ),
    // Priority levels (v1 and v1beta3): shares and lending percentages.
    (
        "io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration",
        &["lendablePercent", "borrowingLimitPercent"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.ExemptPriorityLevelConfiguration",
        &["nominalConcurrencyShares", "lendablePercent"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.LimitedPriorityLevelConfiguration",
        &["lendablePercent", "borrowingLimitPercent"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.ExemptPriorityLevelConfiguration",
        &["nominalConcurrencyShares", "lendablePercent"],
    ),
    // Ingress: class name, class parameters, port errors.
    (
        "io.k8s.api.networking.v1.IngressSpec",
        &["ingressClassName"],
    ),
    (
        "io.k8s.api.networking.v1.IngressClassParametersReference",
        &["apiGroup", "namespace"],
    ),
    ("io.k8s.api.networking.v1.IngressPortStatus", &["error"]),
    // NetworkPolicy port: protocol, port, end port.
    (
        "io.k8s.api.networking.v1.NetworkPolicyPort",
        &["protocol", "port", "endPort"],
    ),
    // PDB spec: budgets and eviction policy.
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        &[
            "minAvailable",
            "maxUnavailable",
            "unhealthyPodEvictionPolicy",
        ],
    ),
    // PriorityClass: preemption policy.
    (
        "io.k8s.api.scheduling.v1.PriorityClass",
        &["preemptionPolicy"],
    ),
    // StorageClass: reclaim policy, expansion, binding mode.
    (
        "io.k8s.api.storage.v1.StorageClass",
        &["reclaimPolicy", "allowVolumeExpansion", "volumeBindingMode"],
    ),
    // CSIDriver spec: every flag and policy.
    (
        "io.k8s.api.storage.v1.CSIDriverSpec",
        &[
            "attachRequired",
            "podInfoOnMount",
            "storageCapacity",
            "fsGroupPolicy",
            "requiresRepublish",
            "seLinuxMount",
        ],
    ),
    ("io.k8s.api.storage.v1.TokenRequest", &["expirationSeconds"]),
    // CSINode allocatable count, CSIStorageCapacity sizes.
    ("io.k8s.api.storage.v1.VolumeNodeResources", &["count"]),
    (
        "io.k8s.api.storage.v1.CSIStorageCapacity",
        &["capacity", "maximumVolumeSize"],
    ),
    // VolumeAttachment source: the PV name.
    (
        "io.k8s.api.storage.v1.VolumeAttachmentSource",
        &["persistentVolumeName"],
    ),
];

/// Optional fields whose json tag has no `omitempty` (Go encodes them whatever they hold),
/// by definition; the OpenAPI lists them as optional all the same.
pub(super) const NOT_OMITEMPTY: &[(&str, &[&str])] = &[
    // StatefulSet: the ordinals' start and the available count.
    ("io.k8s.api.apps.v1.StatefulSetOrdinals", &["start"]),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        &["availableReplicas"],
    ),
    // HPA v2 status: the current metrics.
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        &["currentMetrics"],
    ),
    // Job pod failure policy: a rule's pod conditions, an exit-code rule's container.
    (
        "io.k8s.api.batch.v1.PodFailurePolicyRule",
        &["onPodConditions"],
    ),
    (
        "io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement",
        &["containerName"],
    ),
    // Core Event: the reporting component and instance.
    (
        "io.k8s.api.core.v1.Event",
        &["reportingComponent", "reportingInstance"],
    ),
    // Node image names, projected volume sources.
    ("io.k8s.api.core.v1.ContainerImage", &["names"]),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", &["sources"]),
    // References: Azure file secret namespace, gRPC probe service, typed refs' API group.
    (
        "io.k8s.api.core.v1.AzureFilePersistentVolumeSource",
        &["secretNamespace"],
    ),
    ("io.k8s.api.core.v1.GRPCAction", &["service"]),
    (
        "io.k8s.api.core.v1.TypedLocalObjectReference",
        &["apiGroup"],
    ),
    ("io.k8s.api.core.v1.TypedObjectReference", &["apiGroup"]),
    // EndpointSlice: its ports.
    ("io.k8s.api.discovery.v1.EndpointSlice", &["ports"]),
    // Flow schemas and priority levels (v1 and v1beta3): precedence, queuing, shares, rules.
    (
        "io.k8s.api.flowcontrol.v1.FlowSchemaSpec",
        &["matchingPrecedence"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.QueuingConfiguration",
        &["queues", "handSize", "queueLengthLimit"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration",
        &["nominalConcurrencyShares"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.ResourcePolicyRule",
        &["namespaces"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.FlowSchemaSpec",
        &["matchingPrecedence"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.QueuingConfiguration",
        &["queues", "handSize", "queueLengthLimit"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.LimitedPriorityLevelConfiguration",
        &["nominalConcurrencyShares"],
    ),
    (
        "io.k8s.api.flowcontrol.v1beta3.ResourcePolicyRule",
        &["namespaces"],
    ),
    // IngressClass parameters: scope.
    (
        "io.k8s.api.networking.v1.IngressClassParametersReference",
        &["scope"],
    ),
    // RBAC roles: their rules.
    ("io.k8s.api.rbac.v1.Role", &["rules"]),
    ("io.k8s.api.rbac.v1.ClusterRole", &["rules"]),
    // CSINode driver: topology keys.
    ("io.k8s.api.storage.v1.CSINodeDriver", &["topologyKeys"]),
];
