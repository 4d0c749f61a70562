//! KCM's controllers by name, and `--controllers` with KCM's semantics.
//!
//! Every controller of KCM 1.29 is listed with its canonical name, its legacy alias (both
//! accepted), whether KCM runs it by default, and whether this version of rkcm has it.
//! `*` selects every default-enabled controller rkcm implements; `name` adds one, `-name`
//! removes one. Naming a controller rkcm does not implement is an error that says so; a
//! name KCM does not know is an error too.

use std::collections::BTreeSet;

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
    pub implemented: bool,
}

const fn d(
    name: &'static str,
    alias: Option<&'static str>,
    availability: Availability,
    implemented: bool,
) -> Descriptor {
    Descriptor {
        name,
        alias,
        availability,
        implemented,
    }
}

use Availability::*;

/// KCM 1.29's controllers (cmd/kube-controller-manager/names), in KCM's start order.
pub const CONTROLLERS: &[Descriptor] = &[
    d(
        "serviceaccount-token-controller",
        Some("serviceaccount-token"),
        Default,
        false,
    ),
    d("endpoints-controller", Some("endpoint"), Default, false),
    d(
        "endpointslice-controller",
        Some("endpointslice"),
        Default,
        false,
    ),
    d(
        "endpointslice-mirroring-controller",
        Some("endpointslicemirroring"),
        Default,
        false,
    ),
    d(
        "replicationcontroller-controller",
        Some("replicationcontroller"),
        Default,
        true,
    ),
    d(
        "pod-garbage-collector-controller",
        Some("podgc"),
        Default,
        false,
    ),
    d(
        "resourcequota-controller",
        Some("resourcequota"),
        Default,
        false,
    ),
    d("namespace-controller", Some("namespace"), Default, true),
    d(
        "serviceaccount-controller",
        Some("serviceaccount"),
        Default,
        true,
    ),
    d(
        "garbage-collector-controller",
        Some("garbagecollector"),
        Default,
        true,
    ),
    d("daemonset-controller", Some("daemonset"), Default, true),
    d("job-controller", Some("job"), Default, true),
    d("deployment-controller", Some("deployment"), Default, true),
    d("replicaset-controller", Some("replicaset"), Default, true),
    d(
        "horizontal-pod-autoscaler-controller",
        Some("horizontalpodautoscaling"),
        Default,
        false,
    ),
    d("disruption-controller", Some("disruption"), Default, true),
    d("statefulset-controller", Some("statefulset"), Default, true),
    d("cronjob-controller", Some("cronjob"), Default, true),
    d(
        "certificatesigningrequest-signing-controller",
        Some("csrsigning"),
        Default,
        false,
    ),
    d(
        "certificatesigningrequest-approving-controller",
        Some("csrapproving"),
        Default,
        false,
    ),
    d(
        "certificatesigningrequest-cleaner-controller",
        Some("csrcleaner"),
        Default,
        false,
    ),
    d("ttl-controller", Some("ttl"), Default, false),
    d(
        "bootstrap-signer-controller",
        Some("bootstrapsigner"),
        DisabledByDefault,
        false,
    ),
    d(
        "token-cleaner-controller",
        Some("tokencleaner"),
        DisabledByDefault,
        false,
    ),
    d("node-ipam-controller", Some("nodeipam"), Default, false),
    d(
        "node-lifecycle-controller",
        Some("nodelifecycle"),
        Default,
        false,
    ),
    d("taint-eviction-controller", None, Default, false),
    d(
        "persistentvolume-binder-controller",
        Some("persistentvolume-binder"),
        Default,
        false,
    ),
    d(
        "persistentvolume-attach-detach-controller",
        Some("attachdetach"),
        Default,
        false,
    ),
    d(
        "persistentvolume-expander-controller",
        Some("persistentvolume-expander"),
        Default,
        false,
    ),
    d(
        "clusterrole-aggregation-controller",
        Some("clusterrole-aggregation"),
        Default,
        false,
    ),
    d(
        "persistentvolumeclaim-protection-controller",
        Some("pvc-protection"),
        Default,
        false,
    ),
    d(
        "persistentvolume-protection-controller",
        Some("pv-protection"),
        Default,
        false,
    ),
    d(
        "ttl-after-finished-controller",
        Some("ttl-after-finished"),
        Default,
        true,
    ),
    d(
        "root-ca-certificate-publisher-controller",
        Some("root-ca-cert-publisher"),
        Default,
        false,
    ),
    d(
        "ephemeral-volume-controller",
        Some("ephemeral-volume"),
        Default,
        false,
    ),
    d(
        "storageversion-garbage-collector-controller",
        Some("storage-version-gc"),
        FeatureGated("APIServerIdentity,StorageVersionAPI"),
        false,
    ),
    d(
        "resourceclaim-controller",
        Some("resource-claim-controller"),
        FeatureGated("DynamicResourceAllocation"),
        false,
    ),
    d(
        "legacy-serviceaccount-token-cleaner-controller",
        Some("legacy-service-account-token-cleaner"),
        Default,
        false,
    ),
    d(
        "validatingadmissionpolicy-status-controller",
        None,
        FeatureGated("ValidatingAdmissionPolicy"),
        false,
    ),
    d(
        "service-cidr-controller",
        None,
        FeatureGated("MultiCIDRServiceAllocator"),
        false,
    ),
    d("service-lb-controller", Some("service"), Cloud, false),
    d("node-route-controller", Some("route"), Cloud, false),
    d(
        "cloud-node-lifecycle-controller",
        Some("cloud-node-lifecycle"),
        Cloud,
        false,
    ),
];

pub fn lookup(name: &str) -> Option<&'static Descriptor> {
    CONTROLLERS
        .iter()
        .find(|descriptor| descriptor.name == name || descriptor.alias == Some(name))
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectionError {
    #[error("--controllers: {0:?} is not a kube-controller-manager controller")]
    Unknown(String),
    #[error("--controllers: {0} is not implemented in this version of rkcm")]
    NotInThisVersion(&'static str),
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
            if !descriptor.implemented {
                return Err(SelectionError::NotInThisVersion(descriptor.name));
            }
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
            star && descriptor.implemented && descriptor.availability == Default
        })
        .map(|descriptor| descriptor.name)
        .collect())
}

/// The controllers KCM runs by default that this version of rkcm does not have.
pub fn default_controllers_missing() -> Vec<&'static str> {
    CONTROLLERS
        .iter()
        .filter(|descriptor| descriptor.availability == Default && !descriptor.implemented)
        .map(|descriptor| descriptor.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
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
        assert_eq!(
            select(&list(&["-endpoint", "*"])).unwrap(),
            all,
            "disabling a controller rkcm does not have changes nothing"
        );
        let without_gc = select(&list(&["-garbagecollector", "*"])).unwrap();
        assert!(!without_gc.contains(&"garbage-collector-controller"));
        assert!(all.contains(&"garbage-collector-controller"));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(
            select(&list(&["frobnicator"])),
            Err(SelectionError::Unknown("frobnicator".into()))
        );
        assert_eq!(
            select(&list(&["*", "tokencleaner"])),
            Err(SelectionError::NotInThisVersion("token-cleaner-controller"))
        );
        assert_eq!(select(&list(&[""])), Err(SelectionError::Empty));
        assert!(default_controllers_missing().contains(&"endpoints-controller"));
        assert!(!default_controllers_missing().contains(&"statefulset-controller"));
        assert!(!default_controllers_missing().contains(&"namespace-controller"));
    }
}
