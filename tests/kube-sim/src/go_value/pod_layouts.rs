//! The internal pod types (`k8s.io/kubernetes/pkg/apis/core`) and the object metadata they
//! carry, written by hand from the 1.29 declarations: every struct a `core.PodTemplateSpec`
//! reaches, by value or through a pointer, with its fields in declaration order (the
//! internal order, which is not always the `v1` order) and the `v1` JSON name each is read
//! from. An empty JSON name marks an embedded struct whose fields sit in the same JSON object
//! (`Volume.VolumeSource`, `Probe.ProbeHandler`, `ConfigMapKeySelector.LocalObjectReference`).
//!
//! `core.PodSecurityContext` holds the host namespace fields that `v1` keeps in the pod spec
//! (`hostNetwork`, `hostPID`, `hostIPC`, `shareProcessNamespace`, `hostUsers`): the printer
//! moves them there before printing a pod spec (see `internal_pod_spec`).

use super::Field;

/// Struct layouts, by the name `%#v` prints (`core.Container`, `v1.ObjectMeta`).
pub(super) const POD_STRUCTS: &[(&str, &[Field])] = &[
    // --- metadata ---
    (
        "v1.ObjectMeta",
        &[
            ("Name", "name", "string"),
            ("GenerateName", "generateName", "string"),
            ("Namespace", "namespace", "string"),
            ("SelfLink", "selfLink", "string"),
            ("UID", "uid", "types.UID"),
            ("ResourceVersion", "resourceVersion", "string"),
            ("Generation", "generation", "int64"),
            ("CreationTimestamp", "creationTimestamp", "v1.Time"),
            ("DeletionTimestamp", "deletionTimestamp", "*v1.Time"),
            (
                "DeletionGracePeriodSeconds",
                "deletionGracePeriodSeconds",
                "*int64",
            ),
            ("Labels", "labels", "map[string]string"),
            ("Annotations", "annotations", "map[string]string"),
            ("OwnerReferences", "ownerReferences", "[]v1.OwnerReference"),
            ("Finalizers", "finalizers", "[]string"),
            ("ManagedFields", "managedFields", "[]v1.ManagedFieldsEntry"),
        ],
    ),
    (
        "v1.ManagedFieldsEntry",
        &[
            ("Manager", "manager", "string"),
            ("Operation", "operation", "v1.ManagedFieldsOperationType"),
            ("APIVersion", "apiVersion", "string"),
            ("Time", "time", "*v1.Time"),
            ("FieldsType", "fieldsType", "string"),
            ("FieldsV1", "fieldsV1", "*v1.FieldsV1"),
            ("Subresource", "subresource", "string"),
        ],
    ),
    // --- the template and the pod spec ---
    (
        "core.PodTemplateSpec",
        &[
            ("ObjectMeta", "metadata", "v1.ObjectMeta"),
            ("Spec", "spec", "core.PodSpec"),
        ],
    ),
    (
        "core.PodSpec",
        &[
            ("Volumes", "volumes", "[]core.Volume"),
            ("InitContainers", "initContainers", "[]core.Container"),
            ("Containers", "containers", "[]core.Container"),
            (
                "EphemeralContainers",
                "ephemeralContainers",
                "[]core.EphemeralContainer",
            ),
            ("RestartPolicy", "restartPolicy", "core.RestartPolicy"),
            (
                "TerminationGracePeriodSeconds",
                "terminationGracePeriodSeconds",
                "*int64",
            ),
            ("ActiveDeadlineSeconds", "activeDeadlineSeconds", "*int64"),
            ("DNSPolicy", "dnsPolicy", "core.DNSPolicy"),
            ("NodeSelector", "nodeSelector", "map[string]string"),
            ("ServiceAccountName", "serviceAccountName", "string"),
            (
                "AutomountServiceAccountToken",
                "automountServiceAccountToken",
                "*bool",
            ),
            ("NodeName", "nodeName", "string"),
            (
                "SecurityContext",
                "securityContext",
                "*core.PodSecurityContext",
            ),
            (
                "ImagePullSecrets",
                "imagePullSecrets",
                "[]core.LocalObjectReference",
            ),
            ("Hostname", "hostname", "string"),
            ("Subdomain", "subdomain", "string"),
            ("SetHostnameAsFQDN", "setHostnameAsFQDN", "*bool"),
            ("Affinity", "affinity", "*core.Affinity"),
            ("SchedulerName", "schedulerName", "string"),
            ("Tolerations", "tolerations", "[]core.Toleration"),
            ("HostAliases", "hostAliases", "[]core.HostAlias"),
            ("PriorityClassName", "priorityClassName", "string"),
            ("Priority", "priority", "*int32"),
            (
                "PreemptionPolicy",
                "preemptionPolicy",
                "*core.PreemptionPolicy",
            ),
            ("DNSConfig", "dnsConfig", "*core.PodDNSConfig"),
            (
                "ReadinessGates",
                "readinessGates",
                "[]core.PodReadinessGate",
            ),
            ("RuntimeClassName", "runtimeClassName", "*string"),
            ("Overhead", "overhead", "core.ResourceList"),
            ("EnableServiceLinks", "enableServiceLinks", "*bool"),
            (
                "TopologySpreadConstraints",
                "topologySpreadConstraints",
                "[]core.TopologySpreadConstraint",
            ),
            ("OS", "os", "*core.PodOS"),
            (
                "SchedulingGates",
                "schedulingGates",
                "[]core.PodSchedulingGate",
            ),
            (
                "ResourceClaims",
                "resourceClaims",
                "[]core.PodResourceClaim",
            ),
        ],
    ),
    // --- containers ---
    ("core.Container", CONTAINER_FIELDS),
    (
        "core.EphemeralContainer",
        &[
            (
                "EphemeralContainerCommon",
                "",
                "core.EphemeralContainerCommon",
            ),
            ("TargetContainerName", "targetContainerName", "string"),
        ],
    ),
    ("core.EphemeralContainerCommon", CONTAINER_FIELDS),
    (
        "core.ContainerPort",
        &[
            ("Name", "name", "string"),
            ("HostPort", "hostPort", "int32"),
            ("ContainerPort", "containerPort", "int32"),
            ("Protocol", "protocol", "core.Protocol"),
            ("HostIP", "hostIP", "string"),
        ],
    ),
    (
        "core.EnvFromSource",
        &[
            ("Prefix", "prefix", "string"),
            ("ConfigMapRef", "configMapRef", "*core.ConfigMapEnvSource"),
            ("SecretRef", "secretRef", "*core.SecretEnvSource"),
        ],
    ),
    (
        "core.ConfigMapEnvSource",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.SecretEnvSource",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.EnvVar",
        &[
            ("Name", "name", "string"),
            ("Value", "value", "string"),
            ("ValueFrom", "valueFrom", "*core.EnvVarSource"),
        ],
    ),
    (
        "core.EnvVarSource",
        &[
            ("FieldRef", "fieldRef", "*core.ObjectFieldSelector"),
            (
                "ResourceFieldRef",
                "resourceFieldRef",
                "*core.ResourceFieldSelector",
            ),
            (
                "ConfigMapKeyRef",
                "configMapKeyRef",
                "*core.ConfigMapKeySelector",
            ),
            ("SecretKeyRef", "secretKeyRef", "*core.SecretKeySelector"),
        ],
    ),
    (
        "core.ObjectFieldSelector",
        &[
            ("APIVersion", "apiVersion", "string"),
            ("FieldPath", "fieldPath", "string"),
        ],
    ),
    (
        "core.ResourceFieldSelector",
        &[
            ("ContainerName", "containerName", "string"),
            ("Resource", "resource", "string"),
            ("Divisor", "divisor", "resource.Quantity"),
        ],
    ),
    (
        "core.ConfigMapKeySelector",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Key", "key", "string"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.SecretKeySelector",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Key", "key", "string"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.ResourceRequirements",
        &[
            ("Limits", "limits", "core.ResourceList"),
            ("Requests", "requests", "core.ResourceList"),
            ("Claims", "claims", "[]core.ResourceClaim"),
        ],
    ),
    ("core.ResourceClaim", &[("Name", "name", "string")]),
    (
        "core.ContainerResizePolicy",
        &[
            ("ResourceName", "resourceName", "core.ResourceName"),
            (
                "RestartPolicy",
                "restartPolicy",
                "core.ResourceResizeRestartPolicy",
            ),
        ],
    ),
    (
        "core.VolumeMount",
        &[
            ("Name", "name", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("MountPath", "mountPath", "string"),
            ("SubPath", "subPath", "string"),
            (
                "MountPropagation",
                "mountPropagation",
                "*core.MountPropagationMode",
            ),
            ("SubPathExpr", "subPathExpr", "string"),
        ],
    ),
    (
        "core.VolumeDevice",
        &[
            ("Name", "name", "string"),
            ("DevicePath", "devicePath", "string"),
        ],
    ),
    // --- probes and lifecycle hooks ---
    (
        "core.Probe",
        &[
            ("ProbeHandler", "", "core.ProbeHandler"),
            ("InitialDelaySeconds", "initialDelaySeconds", "int32"),
            ("TimeoutSeconds", "timeoutSeconds", "int32"),
            ("PeriodSeconds", "periodSeconds", "int32"),
            ("SuccessThreshold", "successThreshold", "int32"),
            ("FailureThreshold", "failureThreshold", "int32"),
            (
                "TerminationGracePeriodSeconds",
                "terminationGracePeriodSeconds",
                "*int64",
            ),
        ],
    ),
    (
        "core.ProbeHandler",
        &[
            ("Exec", "exec", "*core.ExecAction"),
            ("HTTPGet", "httpGet", "*core.HTTPGetAction"),
            ("TCPSocket", "tcpSocket", "*core.TCPSocketAction"),
            ("GRPC", "grpc", "*core.GRPCAction"),
        ],
    ),
    ("core.ExecAction", &[("Command", "command", "[]string")]),
    (
        "core.HTTPGetAction",
        &[
            ("Path", "path", "string"),
            ("Port", "port", "intstr.IntOrString"),
            ("Host", "host", "string"),
            ("Scheme", "scheme", "core.URIScheme"),
            ("HTTPHeaders", "httpHeaders", "[]core.HTTPHeader"),
        ],
    ),
    (
        "core.HTTPHeader",
        &[("Name", "name", "string"), ("Value", "value", "string")],
    ),
    (
        "core.TCPSocketAction",
        &[
            ("Port", "port", "intstr.IntOrString"),
            ("Host", "host", "string"),
        ],
    ),
    (
        "core.GRPCAction",
        &[("Port", "port", "int32"), ("Service", "service", "*string")],
    ),
    (
        "core.Lifecycle",
        &[
            ("PostStart", "postStart", "*core.LifecycleHandler"),
            ("PreStop", "preStop", "*core.LifecycleHandler"),
        ],
    ),
    (
        "core.LifecycleHandler",
        &[
            ("Exec", "exec", "*core.ExecAction"),
            ("HTTPGet", "httpGet", "*core.HTTPGetAction"),
            ("TCPSocket", "tcpSocket", "*core.TCPSocketAction"),
            ("Sleep", "sleep", "*core.SleepAction"),
        ],
    ),
    ("core.SleepAction", &[("Seconds", "seconds", "int64")]),
    // --- security contexts ---
    (
        "core.SecurityContext",
        &[
            ("Capabilities", "capabilities", "*core.Capabilities"),
            ("Privileged", "privileged", "*bool"),
            ("SELinuxOptions", "seLinuxOptions", "*core.SELinuxOptions"),
            (
                "WindowsOptions",
                "windowsOptions",
                "*core.WindowsSecurityContextOptions",
            ),
            ("RunAsUser", "runAsUser", "*int64"),
            ("RunAsGroup", "runAsGroup", "*int64"),
            ("RunAsNonRoot", "runAsNonRoot", "*bool"),
            ("ReadOnlyRootFilesystem", "readOnlyRootFilesystem", "*bool"),
            (
                "AllowPrivilegeEscalation",
                "allowPrivilegeEscalation",
                "*bool",
            ),
            ("ProcMount", "procMount", "*core.ProcMountType"),
            ("SeccompProfile", "seccompProfile", "*core.SeccompProfile"),
        ],
    ),
    (
        "core.Capabilities",
        &[
            ("Add", "add", "[]core.Capability"),
            ("Drop", "drop", "[]core.Capability"),
        ],
    ),
    (
        "core.PodSecurityContext",
        &[
            ("HostNetwork", "hostNetwork", "bool"),
            ("HostPID", "hostPID", "bool"),
            ("HostIPC", "hostIPC", "bool"),
            ("ShareProcessNamespace", "shareProcessNamespace", "*bool"),
            ("HostUsers", "hostUsers", "*bool"),
            ("SELinuxOptions", "seLinuxOptions", "*core.SELinuxOptions"),
            (
                "WindowsOptions",
                "windowsOptions",
                "*core.WindowsSecurityContextOptions",
            ),
            ("RunAsUser", "runAsUser", "*int64"),
            ("RunAsGroup", "runAsGroup", "*int64"),
            ("RunAsNonRoot", "runAsNonRoot", "*bool"),
            ("SupplementalGroups", "supplementalGroups", "[]int64"),
            ("FSGroup", "fsGroup", "*int64"),
            (
                "FSGroupChangePolicy",
                "fsGroupChangePolicy",
                "*core.PodFSGroupChangePolicy",
            ),
            ("Sysctls", "sysctls", "[]core.Sysctl"),
            ("SeccompProfile", "seccompProfile", "*core.SeccompProfile"),
        ],
    ),
    (
        "core.SELinuxOptions",
        &[
            ("User", "user", "string"),
            ("Role", "role", "string"),
            ("Type", "type", "string"),
            ("Level", "level", "string"),
        ],
    ),
    (
        "core.WindowsSecurityContextOptions",
        &[
            (
                "GMSACredentialSpecName",
                "gmsaCredentialSpecName",
                "*string",
            ),
            ("GMSACredentialSpec", "gmsaCredentialSpec", "*string"),
            ("RunAsUserName", "runAsUserName", "*string"),
            ("HostProcess", "hostProcess", "*bool"),
        ],
    ),
    (
        "core.SeccompProfile",
        &[
            ("Type", "type", "core.SeccompProfileType"),
            ("LocalhostProfile", "localhostProfile", "*string"),
        ],
    ),
    (
        "core.Sysctl",
        &[("Name", "name", "string"), ("Value", "value", "string")],
    ),
    // --- scheduling ---
    ("core.LocalObjectReference", &[("Name", "name", "string")]),
    (
        "core.Affinity",
        &[
            ("NodeAffinity", "nodeAffinity", "*core.NodeAffinity"),
            ("PodAffinity", "podAffinity", "*core.PodAffinity"),
            (
                "PodAntiAffinity",
                "podAntiAffinity",
                "*core.PodAntiAffinity",
            ),
        ],
    ),
    (
        "core.NodeAffinity",
        &[
            (
                "RequiredDuringSchedulingIgnoredDuringExecution",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "*core.NodeSelector",
            ),
            (
                "PreferredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
                "[]core.PreferredSchedulingTerm",
            ),
        ],
    ),
    (
        "core.NodeSelector",
        &[(
            "NodeSelectorTerms",
            "nodeSelectorTerms",
            "[]core.NodeSelectorTerm",
        )],
    ),
    (
        "core.NodeSelectorTerm",
        &[
            (
                "MatchExpressions",
                "matchExpressions",
                "[]core.NodeSelectorRequirement",
            ),
            (
                "MatchFields",
                "matchFields",
                "[]core.NodeSelectorRequirement",
            ),
        ],
    ),
    (
        "core.NodeSelectorRequirement",
        &[
            ("Key", "key", "string"),
            ("Operator", "operator", "core.NodeSelectorOperator"),
            ("Values", "values", "[]string"),
        ],
    ),
    (
        "core.PreferredSchedulingTerm",
        &[
            ("Weight", "weight", "int32"),
            ("Preference", "preference", "core.NodeSelectorTerm"),
        ],
    ),
    ("core.PodAffinity", POD_AFFINITY_FIELDS),
    ("core.PodAntiAffinity", POD_AFFINITY_FIELDS),
    (
        "core.PodAffinityTerm",
        &[
            ("LabelSelector", "labelSelector", "*v1.LabelSelector"),
            ("Namespaces", "namespaces", "[]string"),
            ("TopologyKey", "topologyKey", "string"),
            (
                "NamespaceSelector",
                "namespaceSelector",
                "*v1.LabelSelector",
            ),
            ("MatchLabelKeys", "matchLabelKeys", "[]string"),
            ("MismatchLabelKeys", "mismatchLabelKeys", "[]string"),
        ],
    ),
    (
        "core.WeightedPodAffinityTerm",
        &[
            ("Weight", "weight", "int32"),
            ("PodAffinityTerm", "podAffinityTerm", "core.PodAffinityTerm"),
        ],
    ),
    (
        "core.HostAlias",
        &[
            ("IP", "ip", "string"),
            ("Hostnames", "hostnames", "[]string"),
        ],
    ),
    (
        "core.PodDNSConfig",
        &[
            ("Nameservers", "nameservers", "[]string"),
            ("Searches", "searches", "[]string"),
            ("Options", "options", "[]core.PodDNSConfigOption"),
        ],
    ),
    (
        "core.PodDNSConfigOption",
        &[("Name", "name", "string"), ("Value", "value", "*string")],
    ),
    (
        "core.PodReadinessGate",
        &[("ConditionType", "conditionType", "core.PodConditionType")],
    ),
    (
        "core.TopologySpreadConstraint",
        &[
            ("MaxSkew", "maxSkew", "int32"),
            ("TopologyKey", "topologyKey", "string"),
            (
                "WhenUnsatisfiable",
                "whenUnsatisfiable",
                "core.UnsatisfiableConstraintAction",
            ),
            ("LabelSelector", "labelSelector", "*v1.LabelSelector"),
            ("MinDomains", "minDomains", "*int32"),
            (
                "NodeAffinityPolicy",
                "nodeAffinityPolicy",
                "*core.NodeInclusionPolicy",
            ),
            (
                "NodeTaintsPolicy",
                "nodeTaintsPolicy",
                "*core.NodeInclusionPolicy",
            ),
            ("MatchLabelKeys", "matchLabelKeys", "[]string"),
        ],
    ),
    ("core.PodOS", &[("Name", "name", "core.OSName")]),
    ("core.PodSchedulingGate", &[("Name", "name", "string")]),
    (
        "core.PodResourceClaim",
        &[
            ("Name", "name", "string"),
            ("Source", "source", "core.ClaimSource"),
        ],
    ),
    (
        "core.ClaimSource",
        &[
            ("ResourceClaimName", "resourceClaimName", "*string"),
            (
                "ResourceClaimTemplateName",
                "resourceClaimTemplateName",
                "*string",
            ),
        ],
    ),
];

/// `core.Container` and `core.EphemeralContainerCommon` have the same fields.
const CONTAINER_FIELDS: &[Field] = &[
    ("Name", "name", "string"),
    ("Image", "image", "string"),
    ("Command", "command", "[]string"),
    ("Args", "args", "[]string"),
    ("WorkingDir", "workingDir", "string"),
    ("Ports", "ports", "[]core.ContainerPort"),
    ("EnvFrom", "envFrom", "[]core.EnvFromSource"),
    ("Env", "env", "[]core.EnvVar"),
    ("Resources", "resources", "core.ResourceRequirements"),
    (
        "ResizePolicy",
        "resizePolicy",
        "[]core.ContainerResizePolicy",
    ),
    (
        "RestartPolicy",
        "restartPolicy",
        "*core.ContainerRestartPolicy",
    ),
    ("VolumeMounts", "volumeMounts", "[]core.VolumeMount"),
    ("VolumeDevices", "volumeDevices", "[]core.VolumeDevice"),
    ("LivenessProbe", "livenessProbe", "*core.Probe"),
    ("ReadinessProbe", "readinessProbe", "*core.Probe"),
    ("StartupProbe", "startupProbe", "*core.Probe"),
    ("Lifecycle", "lifecycle", "*core.Lifecycle"),
    ("TerminationMessagePath", "terminationMessagePath", "string"),
    (
        "TerminationMessagePolicy",
        "terminationMessagePolicy",
        "core.TerminationMessagePolicy",
    ),
    ("ImagePullPolicy", "imagePullPolicy", "core.PullPolicy"),
    (
        "SecurityContext",
        "securityContext",
        "*core.SecurityContext",
    ),
    ("Stdin", "stdin", "bool"),
    ("StdinOnce", "stdinOnce", "bool"),
    ("TTY", "tty", "bool"),
];

/// `core.PodAffinity` and `core.PodAntiAffinity` have the same fields.
const POD_AFFINITY_FIELDS: &[Field] = &[
    (
        "RequiredDuringSchedulingIgnoredDuringExecution",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "[]core.PodAffinityTerm",
    ),
    (
        "PreferredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
        "[]core.WeightedPodAffinityTerm",
    ),
];

/// The named string types of the pod types (`%#v` prints their values quoted).
pub(super) const POD_NAMED: &[&str] = &[
    "v1.ManagedFieldsOperationType",
    "core.RestartPolicy",
    "core.ContainerRestartPolicy",
    "core.DNSPolicy",
    "core.PreemptionPolicy",
    "core.Protocol",
    "core.ResourceName",
    "core.ResourceResizeRestartPolicy",
    "core.MountPropagationMode",
    "core.TerminationMessagePolicy",
    "core.PullPolicy",
    "core.URIScheme",
    "core.Capability",
    "core.ProcMountType",
    "core.PodFSGroupChangePolicy",
    "core.SeccompProfileType",
    "core.NodeSelectorOperator",
    "core.PodConditionType",
    "core.UnsatisfiableConstraintAction",
    "core.NodeInclusionPolicy",
    "core.OSName",
    "core.HostPathType",
    "core.StorageMedium",
    "core.AzureDataDiskCachingMode",
    "core.AzureDataDiskKind",
    "core.PersistentVolumeAccessMode",
    "core.PersistentVolumeMode",
];
