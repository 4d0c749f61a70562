//! `--feature-gates`: KCM 1.29's feature gates, their defaults and stages, parsed and
//! checked as component-base's feature gate does (`key=bool` pairs, unknown names and
//! changes to a gate locked to its default refused with upstream's messages, `AllAlpha` /
//! `AllBeta` applied to the gates of that stage not named explicitly).
//!
//! The table lists every gate KCM's binary registers: Kubernetes' own, the generic API
//! server's and apiextensions' (registered in the same process-wide gate), and the
//! logging and metrics gates KCM adds at start.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A gate's maturity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    #[allow(clippy::upper_case_acronyms)]
    GA,
    Deprecated,
}

use Stage::{Alpha, Beta, Deprecated, GA};

/// One known gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    pub name: &'static str,
    pub default: bool,
    pub stage: Stage,
    /// Setting it to anything but its default is refused.
    pub locked: bool,
}

const fn gate(name: &'static str, default: bool, stage: Stage, locked: bool) -> Gate {
    Gate {
        name,
        default,
        stage,
        locked,
    }
}

/// KCM 1.29's gates, by name.
pub const GATES: &[Gate] = &[
    gate("APIListChunking", true, GA, true),
    gate("APIPriorityAndFairness", true, GA, true),
    gate("APIResponseCompression", true, Beta, false),
    gate("APISelfSubjectReview", true, GA, true),
    gate("APIServerIdentity", true, Beta, false),
    gate("APIServerTracing", true, Beta, false),
    gate("AdmissionWebhookMatchConditions", true, Beta, false),
    gate("AggregatedDiscoveryEndpoint", true, Beta, false),
    gate("AllAlpha", false, Alpha, false),
    gate("AllBeta", false, Beta, false),
    gate("AllowServiceLBStatusOnNonLB", false, Deprecated, false),
    gate("AnyVolumeDataSource", true, Beta, false),
    gate("AppArmor", true, Beta, false),
    gate("CPUManager", true, GA, true),
    gate("CPUManagerPolicyAlphaOptions", false, Alpha, false),
    gate("CPUManagerPolicyBetaOptions", true, Beta, false),
    gate("CPUManagerPolicyOptions", true, Beta, false),
    gate("CRDValidationRatcheting", false, Alpha, false),
    gate("CSIMigrationAzureFile", true, GA, true),
    gate("CSIMigrationPortworx", false, Beta, false),
    gate("CSIMigrationRBD", false, Deprecated, false),
    gate("CSINodeExpandSecret", true, GA, true),
    gate("CSIVolumeHealth", false, Alpha, false),
    gate("CloudControllerManagerWebhook", false, Alpha, false),
    gate("CloudDualStackNodeIPs", true, Beta, false),
    gate("ClusterTrustBundle", false, Alpha, false),
    gate("ClusterTrustBundleProjection", false, Alpha, false),
    gate("ComponentSLIs", true, Beta, false),
    gate("ConsistentHTTPGetHandlers", true, GA, false),
    gate("ConsistentListFromCache", false, Alpha, false),
    gate("ContainerCheckpoint", false, Alpha, false),
    gate("ContextualLogging", false, Alpha, false),
    gate("CronJobsScheduledAnnotation", true, Beta, false),
    gate("CrossNamespaceVolumeDataSource", false, Alpha, false),
    gate("CustomCPUCFSQuotaPeriod", false, Alpha, false),
    gate("CustomResourceValidationExpressions", true, GA, true),
    gate(
        "DefaultHostNetworkHostPortsInPodTemplates",
        false,
        Deprecated,
        false,
    ),
    gate("DevicePluginCDIDevices", true, Beta, false),
    gate("DisableCloudProviders", true, Beta, false),
    gate("DisableKubeletCloudCredentialProviders", true, Beta, false),
    gate("DisableNodeKubeProxyVersion", false, Alpha, false),
    gate("DynamicResourceAllocation", false, Alpha, false),
    gate("EfficientWatchResumption", true, GA, true),
    gate("ElasticIndexedJob", true, Beta, false),
    gate("EventedPLEG", false, Alpha, false),
    gate("ExecProbeTimeout", true, GA, false),
    gate("ExpandedDNSConfig", true, GA, true),
    gate(
        "ExperimentalHostUserNamespaceDefaulting",
        false,
        Deprecated,
        true,
    ),
    gate("GracefulNodeShutdown", true, Beta, false),
    gate("GracefulNodeShutdownBasedOnPodPriority", true, Beta, false),
    gate("HPAContainerMetrics", true, Beta, false),
    gate("HPAScaleToZero", false, Alpha, false),
    gate("HonorPVReclaimPolicy", false, Alpha, false),
    gate("IPTablesOwnershipCleanup", true, GA, true),
    gate("ImageMaximumGCAge", false, Alpha, false),
    gate("InPlacePodVerticalScaling", false, Alpha, false),
    gate("InTreePluginAWSUnregister", false, Alpha, false),
    gate("InTreePluginAzureDiskUnregister", false, Alpha, false),
    gate("InTreePluginAzureFileUnregister", false, Alpha, false),
    gate("InTreePluginGCEUnregister", false, Alpha, false),
    gate("InTreePluginOpenStackUnregister", false, Alpha, false),
    gate("InTreePluginPortworxUnregister", false, Alpha, false),
    gate("InTreePluginRBDUnregister", false, Deprecated, false),
    gate("InTreePluginvSphereUnregister", false, Alpha, false),
    gate("JobBackoffLimitPerIndex", true, Beta, false),
    gate("JobPodFailurePolicy", true, Beta, false),
    gate("JobPodReplacementPolicy", true, Beta, false),
    gate("JobReadyPods", true, GA, true),
    gate("KMSv1", false, Deprecated, false),
    gate("KMSv2", true, GA, true),
    gate("KMSv2KDF", true, GA, true),
    gate("KubeProxyDrainingTerminatingNodes", false, Alpha, false),
    gate("KubeletCgroupDriverFromCRI", false, Alpha, false),
    gate("KubeletInUserNamespace", false, Alpha, false),
    gate("KubeletPodResources", true, GA, true),
    gate("KubeletPodResourcesDynamicResources", false, Alpha, false),
    gate("KubeletPodResourcesGet", false, Alpha, false),
    gate("KubeletPodResourcesGetAllocatable", true, GA, true),
    gate("KubeletSeparateDiskGC", false, Alpha, false),
    gate("KubeletTracing", true, Beta, false),
    gate("LegacyServiceAccountTokenCleanUp", true, Beta, false),
    gate("LegacyServiceAccountTokenTracking", true, GA, true),
    gate("LoadBalancerIPMode", false, Alpha, false),
    gate(
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        false,
        Alpha,
        false,
    ),
    gate("LogarithmicScaleDown", true, Beta, false),
    gate("LoggingAlphaOptions", false, Alpha, false),
    gate("LoggingBetaOptions", true, Beta, false),
    gate("MatchLabelKeysInPodAffinity", false, Alpha, false),
    gate("MatchLabelKeysInPodTopologySpread", true, Beta, false),
    gate("MaxUnavailableStatefulSet", false, Alpha, false),
    gate("MemoryManager", true, Beta, false),
    gate("MemoryQoS", false, Alpha, false),
    gate("MinDomainsInPodTopologySpread", true, Beta, false),
    gate("MinimizeIPTablesRestore", true, GA, true),
    gate("MultiCIDRServiceAllocator", false, Alpha, false),
    gate("NFTablesProxyMode", false, Alpha, false),
    gate("NewVolumeManagerReconstruction", true, Beta, false),
    gate("NodeInclusionPolicyInPodTopologySpread", true, Beta, false),
    gate("NodeLogQuery", false, Alpha, false),
    gate("NodeOutOfServiceVolumeDetach", true, GA, true),
    gate("NodeSwap", false, Beta, false),
    gate("OpenAPIEnums", true, Beta, false),
    gate("PDBUnhealthyPodEvictionPolicy", true, Beta, false),
    gate("PersistentVolumeLastPhaseTransitionTime", true, Beta, false),
    gate("PodAndContainerStatsFromCRI", false, Alpha, false),
    gate("PodDeletionCost", true, Beta, false),
    gate("PodDisruptionConditions", true, Beta, false),
    gate("PodHostIPs", true, Beta, false),
    gate("PodIndexLabel", true, Beta, false),
    gate("PodLifecycleSleepAction", false, Alpha, false),
    gate("PodReadyToStartContainersCondition", true, Beta, false),
    gate("PodSchedulingReadiness", true, Beta, false),
    gate("ProcMountType", false, Alpha, false),
    gate("ProxyTerminatingEndpoints", true, GA, true),
    gate("QOSReserved", false, Alpha, false),
    gate("ReadWriteOncePod", true, GA, true),
    gate("RecoverVolumeExpansionFailure", false, Alpha, false),
    gate("RemainingItemCount", true, GA, true),
    gate("RemoveSelfLink", true, GA, true),
    gate("RotateKubeletServerCertificate", true, Beta, false),
    gate("RuntimeClassInImageCriApi", false, Alpha, false),
    gate("SELinuxMountReadWriteOncePod", true, Beta, false),
    gate("SchedulerQueueingHints", false, Beta, false),
    gate("SecurityContextDeny", false, Alpha, false),
    gate("SeparateCacheWatchRPC", true, Beta, false),
    gate("SeparateTaintEvictionController", true, Beta, false),
    gate("ServerSideApply", true, GA, true),
    gate("ServerSideFieldValidation", true, GA, true),
    gate("ServiceAccountTokenJTI", false, Alpha, false),
    gate("ServiceAccountTokenNodeBinding", false, Alpha, false),
    gate(
        "ServiceAccountTokenNodeBindingValidation",
        false,
        Alpha,
        false,
    ),
    gate("ServiceAccountTokenPodNodeInfo", false, Alpha, false),
    gate("ServiceNodePortStaticSubrange", true, GA, true),
    gate("SidecarContainers", true, Beta, false),
    gate("SizeMemoryBackedVolumes", true, Beta, false),
    gate("SkipReadOnlyValidationGCE", true, Deprecated, false),
    gate("StableLoadBalancerNodeSet", true, Beta, false),
    gate("StatefulSetAutoDeletePVC", true, Beta, false),
    gate("StatefulSetStartOrdinal", true, Beta, false),
    gate("StorageVersionAPI", false, Alpha, false),
    gate("StorageVersionHash", true, Beta, false),
    gate("StructuredAuthenticationConfiguration", false, Alpha, false),
    gate("StructuredAuthorizationConfiguration", false, Alpha, false),
    gate("TopologyAwareHints", true, Beta, false),
    gate("TopologyManagerPolicyAlphaOptions", false, Alpha, false),
    gate("TopologyManagerPolicyBetaOptions", true, Beta, false),
    gate("TopologyManagerPolicyOptions", true, Beta, false),
    gate("TranslateStreamCloseWebsocketRequests", false, Alpha, false),
    gate("UnauthenticatedHTTP2DOSMitigation", true, Beta, false),
    gate("UnknownVersionInteroperabilityProxy", false, Alpha, false),
    gate("UserNamespacesPodSecurityStandards", false, Alpha, false),
    gate("UserNamespacesSupport", false, Alpha, false),
    gate("ValidatingAdmissionPolicy", false, Beta, false),
    gate("VolumeAttributesClass", false, Alpha, false),
    gate("VolumeCapacityPriority", false, Alpha, false),
    gate("WatchBookmark", true, GA, true),
    gate("WatchFromStorageWithoutResourceVersion", false, Beta, false),
    gate("WatchList", false, Alpha, false),
    gate("WinDSR", false, Alpha, false),
    gate("WinOverlay", true, Beta, false),
    gate("WindowsHostNetwork", true, Alpha, false),
    gate("ZeroLimitedNominalConcurrencyShares", false, Beta, false),
];

/// The gate of this name, if KCM 1.29 has one.
pub fn lookup(name: &str) -> Option<&'static Gate> {
    GATES
        .binary_search_by(|gate| gate.name.cmp(name))
        .ok()
        .map(|index| &GATES[index])
}

/// The gates given with `--feature-gates` (possibly several times; later values win),
/// over KCM 1.29's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    explicit: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Whether `name` is on: as given, else as `AllAlpha`/`AllBeta` say for its stage, else
    /// its default. An unknown name is off.
    pub fn enabled(&self, name: &str) -> bool {
        let Some(gate) = lookup(name) else {
            return false;
        };
        if let Some(&value) = self.explicit.get(gate.name) {
            return value;
        }
        let all = match gate.stage {
            Alpha => self.explicit.get("AllAlpha"),
            Beta => self.explicit.get("AllBeta"),
            GA | Deprecated => None,
        };
        all.copied().unwrap_or(gate.default)
    }

    /// Whether every one of these gates is on.
    pub fn all_enabled(&self, names: &[&str]) -> bool {
        names.iter().all(|name| self.enabled(name))
    }

    /// Adds the gates of another `--feature-gates` value (a repeated flag), the later
    /// value winning for a gate named twice.
    pub fn merge(&mut self, other: &FeatureGates) {
        self.explicit
            .extend(other.explicit.iter().map(|(name, value)| (*name, *value)));
    }

    /// The warnings component-base logs for gates set explicitly: deprecated and GA gates
    /// will be removed.
    pub fn warnings(&self) -> Vec<String> {
        self.explicit
            .iter()
            .filter_map(|(name, value)| {
                let kind = match lookup(name)?.stage {
                    Deprecated => "deprecated",
                    GA => "GA",
                    Alpha | Beta => return None,
                };
                Some(format!(
                    "Setting {kind} feature gate {name}={value}. It will be removed in a future release."
                ))
            })
            .collect()
    }
}

/// Why a `--feature-gates` value is refused (component-base's messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateError(String);

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GateError {}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for FeatureGates {
    type Err = GateError;

    /// `key1=value1,key2=value2`: empty items are skipped, keys and values trimmed.
    fn from_str(text: &str) -> Result<Self, GateError> {
        let mut given = Vec::new();
        for item in text.split(',').filter(|item| !item.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(GateError(format!("missing bool value for {}", item.trim())));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(value) = parse_go_bool(value) else {
                return Err(GateError(format!(
                    "invalid value of {key}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
                )));
            };
            given.push((key, value));
        }
        let mut gates = FeatureGates::default();
        for (key, value) in given {
            let Some(gate) = lookup(key) else {
                return Err(GateError(format!("unrecognized feature gate: {key}")));
            };
            if gate.locked && gate.default != value {
                return Err(GateError(format!(
                    "cannot set feature gate {key} to {value}, feature is locked to {}",
                    gate.default
                )));
            }
            gates.explicit.insert(gate.name, value);
        }
        Ok(gates)
    }
}

/// clap's value parser for `--feature-gates`.
pub fn parse_feature_gates(text: &str) -> Result<FeatureGates, String> {
    text.parse().map_err(|error: GateError| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_unique() {
        assert!(GATES.windows(2).all(|pair| pair[0].name < pair[1].name));
        assert!(GATES.len() > 150);
    }

    #[test]
    fn defaults_explicit_values_and_all_alpha() {
        let none = FeatureGates::default();
        assert!(none.enabled("DisableCloudProviders"));
        assert!(!none.enabled("MultiCIDRServiceAllocator"));
        assert!(none.enabled("APIServerIdentity"));
        assert!(!none.enabled("NoSuchGate"));

        let given: FeatureGates = "MultiCIDRServiceAllocator=true, DisableCloudProviders=false,"
            .parse()
            .unwrap();
        assert!(given.enabled("MultiCIDRServiceAllocator"));
        assert!(!given.enabled("DisableCloudProviders"));

        let all: FeatureGates = "AllAlpha=true,DynamicResourceAllocation=false"
            .parse()
            .unwrap();
        assert!(all.enabled("StorageVersionAPI"));
        assert!(!all.enabled("DynamicResourceAllocation"));
        assert!(
            all.enabled("DisableCloudProviders"),
            "a beta gate keeps its default"
        );
        assert!(all.all_enabled(&["StorageVersionAPI", "APIServerIdentity"]));
    }

    #[test]
    fn refusals_say_what_component_base_says() {
        let cases = [
            ("Frobnicate=true", "unrecognized feature gate: Frobnicate"),
            ("DisableCloudProviders", "missing bool value for DisableCloudProviders"),
            (
                "DisableCloudProviders=yes",
                "invalid value of DisableCloudProviders=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            (
                "APIListChunking=false",
                "cannot set feature gate APIListChunking to false, feature is locked to true",
            ),
        ];
        for (value, message) in cases {
            assert_eq!(parse_feature_gates(value).unwrap_err(), message, "{value}");
        }
    }

    #[test]
    fn merging_repeated_flags_and_warnings() {
        let mut gates: FeatureGates = "MultiCIDRServiceAllocator=true".parse().unwrap();
        gates.merge(
            &"MultiCIDRServiceAllocator=false,KMSv1=true"
                .parse()
                .unwrap(),
        );
        assert!(!gates.enabled("MultiCIDRServiceAllocator"));
        assert_eq!(
            gates.warnings(),
            vec!["Setting deprecated feature gate KMSv1=true. It will be removed in a future release."]
        );
    }
}
