//! What the endpoints, endpointslice and endpointslice-mirroring controllers share
//! (upstream `k8s.io/endpointslice/util` and `pkg/api/v1/endpoints`): which Services a pod
//! belongs to and which pod changes matter to them, which pods are endpoints at all, how a
//! Service port resolves on a pod, the `last-change-trigger-time` tracker, the tracker of
//! the EndpointSlice generations a controller wrote, endpoint sets keyed as upstream keys
//! them, and the repacking of Endpoints subsets.
//!
//! Orders that upstream derives from md5 hashes of Go's debug printing (subsets and ports
//! in a repacked Endpoints) are replaced here by plain sorts on the same fields: the
//! result is deterministic and equal for equal inputs, which is all upstream relies on;
//! comparing an existing object through [`repack_subsets`] first keeps a takeover from
//! KCM from rewriting Endpoints whose content is already right.

mod ip;
mod repack;
mod slice_tracker;
mod trigger_time;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::meta::ResourceNames;
use crate::pods::{is_pod_ready, phase};
use crate::store::{key_of, Store};

pub use self::ip::{address_type_of, parse_ip_sloppy, ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6};
pub use self::repack::{less_endpoint_address, repack_subsets, subsets_equal};
pub use self::slice_tracker::EndpointSliceTracker;
pub use self::trigger_time::TriggerTimeTracker;

/// Annotation on Endpoints and EndpointSlices: when the change they show was triggered.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// Label on Endpoints and EndpointSlices of a Service without a cluster IP.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// Label on an EndpointSlice: the Service it belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label on an EndpointSlice: the controller that manages it.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// Label on Endpoints the mirroring controller must leave alone.
pub const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Annotation of the Endpoints objects old components used as leader-election locks;
/// such objects are neither deleted as leftovers nor mirrored.
pub const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// The generateName of a new EndpointSlice: `<name>-`, or the bare name when the dash would
/// not make a valid name prefix (the API server checks a generated prefix with its trailing
/// dash masked by a letter). Both the endpointslice and the mirroring controllers name
/// their slices so.
pub fn endpoint_slice_prefix(name: &str) -> String {
    if rkcm_gocompat::validation::is_dns1123_subdomain(&format!("{name}a")).is_empty() {
        format!("{name}-")
    } else {
        name.to_string()
    }
}

/// The Service's selector, `None` when it has none: a Service without a selector (or with
/// an empty one, which the API server does not keep) has its Endpoints made by hand.
pub fn service_selector(service: &Service) -> Option<&BTreeMap<String, String>> {
    service
        .spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|selector| !selector.is_empty())
}

/// Whether a selector map selects these labels (every pair present).
pub fn selects(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.and_then(|labels| labels.get(key)) == Some(value))
}

/// Whether the Service has no cluster IP (`None`, or none at all).
pub fn is_headless(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.cluster_ip.as_deref())
        .is_none_or(|ip| ip.is_empty() || ip == "None")
}

/// Whether the Service is `type: ExternalName` (it has no endpoints).
pub fn is_external_name(service: &Service) -> bool {
    service.spec.as_ref().and_then(|spec| spec.type_.as_deref()) == Some("ExternalName")
}

/// The keys (`namespace/name`) of the Services in the pod's namespace whose selector
/// selects it (upstream `GetPodServiceMemberships`).
pub fn pod_service_memberships(services: &Store<Service>, pod: &Pod) -> BTreeSet<String> {
    let namespace = pod.namespace_str();
    services
        .list_namespace(namespace)
        .iter()
        .filter(|service| {
            service_selector(service)
                .is_some_and(|selector| selects(selector, pod.metadata.labels.as_ref()))
        })
        .map(|service| key_of(&service.metadata))
        .collect()
}

/// Whether the pod is an endpoint at all: not finished, with an IP, and (unless
/// `include_terminating`) not being deleted.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    let status = pod.status.as_ref();
    let has_ip = status.is_some_and(|status| {
        status.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
            || status.pod_ips.as_ref().is_some_and(|ips| !ips.is_empty())
    });
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod's endpoint carries its hostname: it names one and its subdomain is
/// this Service, in the same namespace.
pub fn should_set_hostname(pod: &Pod, service: &Service) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|spec| spec.hostname.as_deref())
        .is_some_and(|hostname| !hostname.is_empty())
        && spec.and_then(|spec| spec.subdomain.as_deref()) == service.metadata.name.as_deref()
        && pod.metadata.namespace == service.metadata.namespace
}

/// The pod's IPs, `status.podIPs` or else `status.podIP`.
pub fn pod_ips(pod: &Pod) -> Vec<&str> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    match status.pod_ips.as_ref().filter(|ips| !ips.is_empty()) {
        Some(ips) => ips
            .iter()
            .map(|ip| ip.ip.as_str())
            .filter(|ip| !ip.is_empty())
            .collect(),
        None => status
            .pod_ip
            .as_deref()
            .filter(|ip| !ip.is_empty())
            .into_iter()
            .collect(),
    }
}

/// The container port a Service port reaches on this pod (upstream `podutil.FindPort`): a
/// numeric target port as it is, a named one through the pod's containers' ports of the
/// same name and protocol. The error names the pod, as upstream's.
pub fn find_port(pod: &Pod, service_port: &ServicePort) -> Result<i32, String> {
    let protocol = service_port.protocol.as_deref().unwrap_or("TCP");
    match &service_port.target_port {
        // The API server defaults a missing targetPort to the port.
        None => return Ok(service_port.port),
        Some(IntOrString::Int(port)) => return Ok(*port),
        Some(IntOrString::String(name)) => {
            let found = pod
                .spec
                .iter()
                .flat_map(|spec| spec.containers.iter())
                .flat_map(|container| container.ports.iter().flatten())
                .find(|port| {
                    port.name.as_deref() == Some(name.as_str())
                        && port.protocol.as_deref().unwrap_or("TCP") == protocol
                });
            if let Some(port) = found {
                return Ok(port.container_port);
            }
        }
    }
    Err(format!(
        "no suitable port for manifest: {}",
        pod.metadata.uid.as_deref().unwrap_or_default()
    ))
}

/// Whether a pod update changes its endpoints (first) or which Services select it
/// (second): labels, hostname or subdomain for the latter; deletion, readiness and IPs for
/// the former.
fn pod_endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let spec_field =
        |pod: &Pod, field: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<&String>| {
            pod.spec
                .as_ref()
                .and_then(field)
                .cloned()
                .unwrap_or_default()
        };
    let labels_changed = old.labels().clone() != new.labels().clone()
        || spec_field(old, |s| s.hostname.as_ref()) != spec_field(new, |s| s.hostname.as_ref())
        || spec_field(old, |s| s.subdomain.as_ref()) != spec_field(new, |s| s.subdomain.as_ref());
    let changed = old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || is_pod_ready(old) != is_pod_ready(new)
        || status_pod_ips(old) != status_pod_ips(new);
    (changed, labels_changed)
}

fn status_pod_ips(pod: &Pod) -> Vec<&str> {
    pod.status
        .as_ref()
        .and_then(|status| status.pod_ips.as_ref())
        .map(|ips| ips.iter().map(|ip| ip.ip.as_str()).collect())
        .unwrap_or_default()
}

/// The Services to sync after a pod update (upstream `GetServicesToUpdateOnPodChange`):
/// none for a resync or a change that matters to no endpoint; the Services selecting the
/// pod before or after when its endpoints changed; only those that gained or lost it when
/// just its labels changed.
pub fn services_to_update_on_pod_change(
    services: &Store<Service>,
    old: &Pod,
    new: &Pod,
) -> BTreeSet<String> {
    if old.metadata.resource_version.is_some()
        && old.metadata.resource_version == new.metadata.resource_version
    {
        return BTreeSet::new();
    }
    let (changed, labels_changed) = pod_endpoints_changed(old, new);
    if !changed && !labels_changed {
        return BTreeSet::new();
    }
    let now = pod_service_memberships(services, new);
    if !labels_changed {
        return now;
    }
    let before = pod_service_memberships(services, old);
    if changed {
        now.union(&before).cloned().collect()
    } else {
        now.symmetric_difference(&before).cloned().collect()
    }
}

/// What identifies an endpoint of a slice across syncs (upstream `hashEndpoint`): its
/// sorted addresses, hostname and target's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointKey {
    addresses: Vec<String>,
    hostname: String,
    namespace: String,
    name: String,
}

impl EndpointKey {
    pub fn of(endpoint: &Endpoint) -> Self {
        let mut addresses = endpoint.addresses.clone();
        addresses.sort();
        let target = endpoint.target_ref.as_ref();
        EndpointKey {
            addresses,
            hostname: endpoint.hostname.clone().unwrap_or_default(),
            namespace: target.and_then(|t| t.namespace.clone()).unwrap_or_default(),
            name: target.and_then(|t| t.name.clone()).unwrap_or_default(),
        }
    }
}

/// Endpoints by [`EndpointKey`] (upstream `EndpointSet`); iteration is in key order.
pub type EndpointSet = BTreeMap<EndpointKey, Endpoint>;

/// Builds an [`EndpointSet`].
pub fn endpoint_set(endpoints: impl IntoIterator<Item = Endpoint>) -> EndpointSet {
    endpoints
        .into_iter()
        .map(|endpoint| (EndpointKey::of(&endpoint), endpoint))
        .collect()
}

/// Whether two endpoints with the same [`EndpointKey`] are equal in everything a slice
/// shows (upstream `EndpointsEqualBeyondHash`): node, zone, the three conditions and the
/// target (its resourceVersion aside).
pub fn endpoints_equal_beyond_key(a: &Endpoint, b: &Endpoint) -> bool {
    let conditions = |e: &Endpoint| {
        let c = e.conditions.clone().unwrap_or_default();
        (c.ready, c.serving, c.terminating)
    };
    let target = |e: &Endpoint| {
        e.target_ref.clone().map(|mut t| {
            t.resource_version = None;
            t
        })
    };
    a.node_name == b.node_name
        && a.zone == b.zone
        && conditions(a) == conditions(b)
        && target(a) == target(b)
}

/// The identity of a set of slice ports, whatever their order (upstream `PortMapKey`):
/// endpoints whose ports resolve alike share slices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortMapKey(Vec<(String, i32, String, String)>);

impl PortMapKey {
    pub fn of(ports: &[EndpointPort]) -> Self {
        let mut key: Vec<_> = ports
            .iter()
            .map(|port| {
                (
                    port.name.clone().unwrap_or_default(),
                    port.port.unwrap_or_default(),
                    port.protocol.clone().unwrap_or_default(),
                    port.app_protocol.clone().unwrap_or_default(),
                )
            })
            .collect();
        key.sort();
        PortMapKey(key)
    }
}

/// The ports in the order [`PortMapKey`] gives them.
pub fn sort_endpoint_ports(ports: &mut [EndpointPort]) {
    ports.sort_by_key(|port| PortMapKey::of(std::slice::from_ref(port)));
}

#[cfg(test)]
mod tests;
