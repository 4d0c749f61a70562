//! The pieces slices are built from (upstream `staging/src/k8s.io/endpointslice/utils.go`):
//! the endpoint a pod gives for one address family, the ports a pod resolves a Service's
//! ports to, a new slice for a Service with its name prefix, ownerReference and labels,
//! which families a Service has, and whether it asks for topology hints.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tracing::{debug, info};

use crate::endpointutil::{
    address_type_of, find_port, is_headless, should_set_hostname, ADDRESS_TYPE_IPV4,
    ADDRESS_TYPE_IPV6, HEADLESS_LABEL, LAST_CHANGE_TRIGGER_TIME, MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
};
use crate::meta::ResourceNames;
use crate::pods::is_pod_ready;

/// The Node label naming its zone.
pub(super) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The Service annotation that asks for topology hints (`Auto`).
pub(super) const TOPOLOGY_MODE_ANNOTATION: &str = "service.kubernetes.io/topology-mode";
/// Its deprecated predecessor, which wins when both are set.
pub(super) const DEPRECATED_TOPOLOGY_HINTS_ANNOTATION: &str =
    "service.kubernetes.io/topology-aware-hints";

/// What the slices of one group share: their ports and address type.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EndpointMeta {
    pub(super) ports: Vec<EndpointPort>,
    pub(super) address_type: String,
}

/// Whether the Service publishes its pods whether they are ready or not.
pub(super) fn publish_not_ready_addresses(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// The endpoint of `pod` in the Service's slices of `address_type` (upstream
/// `podToEndpoint`). A terminating pod is never `ready` unless the Service publishes
/// not-ready addresses; `serving` is the pod's readiness whatever its deletion.
pub(super) fn pod_to_endpoint(
    pod: &Pod,
    node: Option<&Node>,
    service: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = publish_not_ready_addresses(service) || (serving && !terminating);
    let spec = pod.spec.as_ref();
    let node_name = spec
        .and_then(|spec| spec.node_name.clone())
        .filter(|name| !name.is_empty());
    let zone = node
        .and_then(|node| node.metadata.labels.as_ref())
        .and_then(|labels| labels.get(ZONE_LABEL))
        .filter(|zone| !zone.is_empty())
        .cloned();
    let hostname = if should_set_hostname(pod, service) {
        spec.and_then(|spec| spec.hostname.clone())
    } else {
        None
    };
    Endpoint {
        addresses: endpoint_addresses(pod, address_type),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
        node_name,
        zone,
        hostname,
        ..Default::default()
    }
}

/// The pod's `status.podIPs` of this family; anything that is not an IPv6 address counts
/// as IPv4, as upstream's check has it.
fn endpoint_addresses(pod: &Pod, address_type: &str) -> Vec<String> {
    pod.status
        .as_ref()
        .and_then(|status| status.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|ip| ip.ip.as_str())
        .filter(|ip| {
            let ipv6 = address_type_of(ip) == Some(ADDRESS_TYPE_IPV6);
            if ipv6 {
                address_type == ADDRESS_TYPE_IPV6
            } else {
                address_type == ADDRESS_TYPE_IPV4
            }
        })
        .map(str::to_string)
        .collect()
}

/// The Service's ports as the pod resolves them (upstream `getEndpointPorts`): a port the
/// pod does not have is left out; a headless Service may have none.
pub(super) fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let spec = service.spec.as_ref();
    let ports = spec.and_then(|spec| spec.ports.as_deref()).unwrap_or(&[]);
    if ports.is_empty() && spec.and_then(|spec| spec.cluster_ip.as_deref()) == Some("None") {
        return Vec::new();
    }
    ports
        .iter()
        .filter_map(|service_port| match find_port(pod, service_port) {
            Ok(port) => Some(EndpointPort {
                name: Some(service_port.name.clone().unwrap_or_default()),
                port: Some(port),
                protocol: Some(
                    service_port
                        .protocol
                        .clone()
                        .unwrap_or_else(|| "TCP".into()),
                ),
                app_protocol: service_port.app_protocol.clone(),
            }),
            Err(error) => {
                debug!(service = ?service.metadata.name, %error, "failed to find port for service");
                None
            }
        })
        .collect()
}

/// A new, empty slice for the Service (upstream `newEndpointSlice`): named by the API
/// server from `<service>-`, controlled by the Service (the garbage collector deletes it
/// with the Service), labelled as [`endpoint_slice_labels`] says.
pub(super) fn new_endpoint_slice(
    service: &Service,
    meta: &EndpointMeta,
    controller_name: &str,
) -> EndpointSlice {
    let name = service.name_str().to_string();
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: name.clone(),
        uid: service.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let (labels, _) = endpoint_slice_labels(None, service, controller_name);
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(endpoint_slice_prefix(&name)),
            namespace: service.metadata.namespace.clone(),
            owner_references: Some(vec![owner]),
            labels: Some(labels),
            ..Default::default()
        },
        address_type: meta.address_type.clone(),
        endpoints: Vec::new(),
        ports: Some(meta.ports.clone()),
    }
}

pub(super) use crate::endpointutil::endpoint_slice_prefix;

/// Whether the slice's ownerReferences name this Service (by UID).
pub(super) fn owned_by(slice: &EndpointSlice, service: &Service) -> bool {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == uid && owner.kind == "Service" && owner.api_version == "v1")
}

/// Of slices holding `lengths[i]` endpoints, the one that `count` more endpoints fill
/// most exactly without overflowing `max` (upstream `getSliceToFill`); ties go to the
/// first.
pub(super) fn slice_to_fill(lengths: &[usize], count: usize, max: usize) -> Option<usize> {
    let mut closest: Option<(usize, usize)> = None;
    for (index, length) in lengths.iter().enumerate() {
        let Some(room) = max.checked_sub(count + length) else {
            continue;
        };
        if room < closest.map_or(max, |(_, best)| best) {
            closest = Some((index, room));
            if room == 0 {
                break;
            }
        }
    }
    closest.map(|(index, _)| index)
}

/// Sets the slice's `last-change-trigger-time` to `trigger_time`, or removes it when
/// there is none.
pub(super) fn add_trigger_time_annotation(
    slice: &mut EndpointSlice,
    trigger_time: Option<Timestamp>,
) {
    let annotations = slice.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match trigger_time {
        Some(time) => {
            annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), format_rfc3339_nano(time));
        }
        None => {
            annotations.remove(LAST_CHANGE_TRIGGER_TIME);
        }
    }
}

/// Go's `time.RFC3339Nano` in UTC: fractional seconds without trailing zeros, none when
/// zero.
pub(super) fn format_rfc3339_nano(time: Timestamp) -> String {
    let seconds = time.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = time.subsec_nanosecond();
    if nanos == 0 {
        return format!("{seconds}Z");
    }
    let fraction = format!("{:09}", nanos.unsigned_abs());
    format!("{seconds}.{}Z", fraction.trim_end_matches('0'))
}

/// The queue key of the Service a slice belongs to, from its service-name label.
pub(super) fn service_controller_key(slice: &EndpointSlice) -> Result<String, String> {
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(SERVICE_NAME_LABEL))
        .filter(|name| !name.is_empty())
        .ok_or_else(|| format!("EndpointSlice missing {SERVICE_NAME_LABEL} label"))?;
    Ok(format!("{}/{service}", slice.namespace_str()))
}

/// The labels a slice of the Service should have (upstream `setEndpointSliceLabels`):
/// the Service's own, minus the reserved ones, plus service-name, managed-by and the
/// headless label when the Service has no cluster IP; and whether the slice's current
/// labels (reserved ones aside) differ from the Service's.
pub(super) fn endpoint_slice_labels(
    slice_labels: Option<&BTreeMap<String, String>>,
    service: &Service,
    controller_name: &str,
) -> (BTreeMap<String, String>, bool) {
    let current: BTreeMap<&String, &String> = slice_labels
        .into_iter()
        .flatten()
        .filter(|(key, _)| !is_reserved_label_key(key))
        .collect();
    let mut labels = BTreeMap::new();
    for (key, value) in service.labels().iter() {
        if is_reserved_label_key(key) {
            info!(service = ?service.metadata.name, label = %key, %value, "Service using reserved endpoint slices label; skipping it");
            continue;
        }
        labels.insert(key.clone(), value.clone());
    }
    let updated = current.len() != labels.len()
        || current
            .iter()
            .any(|(key, value)| labels.get(*key) != Some(*value));
    if is_headless(service) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels.insert(SERVICE_NAME_LABEL.into(), service.name_str().to_string());
    labels.insert(MANAGED_BY_LABEL.into(), controller_name.into());
    (labels, updated)
}

fn is_reserved_label_key(key: &str) -> bool {
    key == SERVICE_NAME_LABEL || key == MANAGED_BY_LABEL || key == HEADLESS_LABEL
}

/// The address types of the Service's slices: one per `spec.ipFamilies`; for a Service
/// written before the API server knew families, the family of its cluster IP, or both
/// when it is headless.
pub(super) fn address_types_for_service(service: &Service) -> BTreeSet<&'static str> {
    let spec = service.spec.as_ref();
    let mut types = BTreeSet::new();
    for family in spec
        .and_then(|spec| spec.ip_families.as_ref())
        .into_iter()
        .flatten()
    {
        match family.as_str() {
            "IPv4" => types.insert(ADDRESS_TYPE_IPV4),
            "IPv6" => types.insert(ADDRESS_TYPE_IPV6),
            _ => false,
        };
    }
    if !types.is_empty() {
        return types;
    }
    let cluster_ip = spec
        .and_then(|spec| spec.cluster_ip.as_deref())
        .unwrap_or_default();
    if !cluster_ip.is_empty() && cluster_ip != "None" {
        let family = if address_type_of(cluster_ip) == Some(ADDRESS_TYPE_IPV6) {
            ADDRESS_TYPE_IPV6
        } else {
            ADDRESS_TYPE_IPV4
        };
        debug!(service = ?service.metadata.name, address_type = family, "Service has no ipFamilies; using the family of its cluster IP");
        types.insert(family);
        return types;
    }
    debug!(service = ?service.metadata.name, "headless Service has no ipFamilies; using both families until the API server defaults them");
    types.insert(ADDRESS_TYPE_IPV4);
    types.insert(ADDRESS_TYPE_IPV6);
    types
}

/// The slices of `existing` that are neither updated nor deleted (by name).
pub(super) fn unchanged_slices(
    existing: &[std::sync::Arc<EndpointSlice>],
    to_update: &[EndpointSlice],
    to_delete: &[EndpointSlice],
) -> Vec<EndpointSlice> {
    let changed: BTreeSet<&str> = to_update
        .iter()
        .chain(to_delete)
        .filter_map(|slice| slice.metadata.name.as_deref())
        .collect();
    existing
        .iter()
        .filter(|slice| !changed.contains(slice.name_str()))
        .map(|slice| slice.as_ref().clone())
        .collect()
}

/// Whether the Service asks for topology hints: the deprecated annotation when it is
/// there, else `topology-mode`, set to `Auto` or `auto`.
pub(super) fn hints_enabled(annotations: Option<&BTreeMap<String, String>>) -> bool {
    let Some(annotations) = annotations else {
        return false;
    };
    let value = annotations
        .get(DEPRECATED_TOPOLOGY_HINTS_ANNOTATION)
        .or_else(|| annotations.get(TOPOLOGY_MODE_ANNOTATION));
    matches!(value.map(String::as_str), Some("Auto" | "auto"))
}

/// Whether two slices are the same placeholder (upstream `placeholderSliceCompare`):
/// namespace, labels, address type, no endpoints and no ports; names, annotations and
/// owners aside.
pub(super) fn same_placeholder(a: &EndpointSlice, b: &EndpointSlice) -> bool {
    let labels = |slice: &EndpointSlice| slice.labels().clone();
    let ports = |slice: &EndpointSlice| slice.ports.clone().unwrap_or_default();
    a.namespace_str() == b.namespace_str()
        && labels(a) == labels(b)
        && a.address_type == b.address_type
        && a.endpoints == b.endpoints
        && ports(a) == ports(b)
}

/// The slice's managed-by label.
pub(super) fn managed_by(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get(MANAGED_BY_LABEL)
        .map(String::as_str)
}
