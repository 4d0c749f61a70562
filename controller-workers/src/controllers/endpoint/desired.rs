//! What a Service's Endpoints object should hold, decided without the API (the decision
//! half of upstream's `syncService`): an address per selected pod in the Service's IP
//! family, its ports resolved on that pod, the subsets repacked, the labels and the
//! annotations; the truncation to 1000 addresses; and whether the object in the cache is
//! already right, compared as upstream compares it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::Timestamp;
use tracing::{debug, info};

use crate::endpointutil::{
    find_port, is_headless, pod_ips, repack_subsets, should_pod_be_in_endpoints,
    should_set_hostname, subsets_equal, HEADLESS_LABEL, LAST_CHANGE_TRIGGER_TIME,
};
use crate::meta::ResourceNames;
use crate::pods::is_pod_ready;

/// The most addresses an Endpoints object holds (upstream `maxCapacity`).
pub(super) const MAX_CAPACITY: usize = 1000;
/// Set on Endpoints whose addresses were cut to [`MAX_CAPACITY`].
pub(super) const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Its one value.
pub(super) const TRUNCATED: &str = "truncated";

/// The subsets the selected pods make, and how many addresses went each way (for the log).
#[derive(Debug, Default)]
pub(super) struct Desired {
    pub(super) subsets: Vec<EndpointSubset>,
    pub(super) ready: usize,
    pub(super) not_ready: usize,
}

/// Whether an address string is IPv6 as Go's `utilnet.IsIPv6String` sees it: an IPv4
/// address written as IPv4-mapped IPv6 is IPv4, and text that is no address is neither.
fn is_ipv6(text: &str) -> bool {
    matches!(text.parse::<IpAddr>(), Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none())
}

/// The pod's address for this Service (upstream `podToEndpointAddressForService`): its IP
/// of the Service's first IP family (or, from an API server that does not set families,
/// the family of the cluster IP, or of the pod's IP for a headless Service), its node and
/// a reference to the pod.
pub(super) fn endpoint_address(service: &Service, pod: &Pod) -> Result<EndpointAddress, String> {
    let spec = service.spec.as_ref();
    let families = spec.and_then(|spec| spec.ip_families.as_ref());
    let want_ipv6 = match families.and_then(|families| families.first()) {
        Some(family) => family == "IPv6",
        None => match spec
            .and_then(|spec| spec.cluster_ip.as_deref())
            .filter(|ip| !ip.is_empty() && *ip != "None")
        {
            Some(cluster_ip) => is_ipv6(cluster_ip),
            None => pod
                .status
                .as_ref()
                .and_then(|status| status.pod_ip.as_deref())
                .is_some_and(is_ipv6),
        },
    };
    let ip = pod_ips(pod)
        .into_iter()
        .find(|ip| is_ipv6(ip) == want_ipv6)
        .ok_or_else(|| {
            format!(
                "failed to find a matching endpoint for service {}",
                service.name_str()
            )
        })?;
    Ok(EndpointAddress {
        ip: ip.to_string(),
        // Upstream points at the pod's node name whatever it is.
        node_name: Some(
            pod.spec
                .as_ref()
                .and_then(|spec| spec.node_name.clone())
                .unwrap_or_default(),
        ),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".to_string()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
        hostname: None,
    })
}

/// The endpoint port of a Service port that reaches container port `number`.
pub(super) fn endpoint_port(service_port: &ServicePort, number: i32) -> EndpointPort {
    EndpointPort {
        name: service_port.name.clone().filter(|name| !name.is_empty()),
        port: number,
        protocol: service_port
            .protocol
            .clone()
            .filter(|protocol| !protocol.is_empty()),
        app_protocol: service_port.app_protocol.clone(),
    }
}

/// The subsets the Service's selected pods make, repacked: each pod that should be an
/// endpoint gives its address once per Service port it has (ready, or not ready unless
/// the Service publishes not-ready addresses); a headless Service without ports takes the
/// addresses alone.
pub(super) fn desired_subsets(service: &Service, pods: &[&Pod]) -> Desired {
    let spec = service.spec.clone().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses.unwrap_or(false);
    let ports = spec.ports.unwrap_or_default();
    let service_name = service.name_str();
    let namespace = service.namespace_str();
    let mut desired = Desired::default();
    let mut add = |pod: &Pod, address: &EndpointAddress, port: Option<EndpointPort>| {
        let ready = publish_not_ready || is_pod_ready(pod);
        let addresses = Some(vec![address.clone()]);
        let mut subset = EndpointSubset {
            ports: port.map(|port| vec![port]),
            ..Default::default()
        };
        if ready {
            subset.addresses = addresses;
            desired.ready += 1;
        } else {
            debug!(service = %format!("{namespace}/{service_name}"), pod = pod.name_str(), "Pod is out of service");
            subset.not_ready_addresses = addresses;
            desired.not_ready += 1;
        }
        desired.subsets.push(subset);
    };
    for pod in pods {
        let pod_name = pod.name_str();
        if !should_pod_be_in_endpoints(pod, publish_not_ready) {
            debug!(service = %format!("{namespace}/{service_name}"), pod = pod_name, "Pod is not included on endpoints for Service");
            continue;
        }
        let mut address = match endpoint_address(service, pod) {
            Ok(address) => address,
            Err(error) => {
                // Pods of single-stack nodes in a cluster turning dual-stack, typically.
                info!(
                    service = %format!("{namespace}/{service_name}"),
                    cluster_ip = spec.cluster_ip.as_deref().unwrap_or_default(),
                    pod = pod_name,
                    %error,
                    "Failed to find endpoint for service with ClusterIP on pod with error"
                );
                continue;
            }
        };
        if should_set_hostname(pod, service) {
            address.hostname = pod.spec.as_ref().and_then(|spec| spec.hostname.clone());
        }
        if ports.is_empty() {
            // Only a headless Service may have no ports: its pods are addresses alone.
            if spec.cluster_ip.as_deref() == Some("None") {
                add(pod, &address, None);
            }
            continue;
        }
        for service_port in &ports {
            match find_port(pod, service_port) {
                Ok(number) => add(pod, &address, Some(endpoint_port(service_port, number))),
                Err(error) => {
                    debug!(service = %format!("{namespace}/{service_name}"), %error, "Failed to find port for service");
                }
            }
        }
    }
    desired.subsets = repack_subsets(&desired.subsets);
    desired
}

fn count(addresses: &Option<Vec<EndpointAddress>>) -> usize {
    addresses.as_ref().map_or(0, Vec::len)
}

/// Cuts the subsets to [`MAX_CAPACITY`] addresses (upstream `truncateEndpoints`), ready
/// ones first: when the ready addresses alone are too many, every not-ready one goes and
/// each subset keeps its share of the ready ones; otherwise the ready ones all stay and
/// each subset keeps its share of the room left for not-ready ones. Shares are rounded
/// up, so the last subsets may get less. Whether anything was cut.
pub(super) fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let total_ready: usize = subsets.iter().map(|s| count(&s.addresses)).sum();
    let total_not_ready: usize = subsets.iter().map(|s| count(&s.not_ready_addresses)).sum();
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let cut_ready = total_ready > MAX_CAPACITY;
    let (room, total) = if cut_ready {
        (MAX_CAPACITY, total_ready)
    } else {
        (MAX_CAPACITY - total_ready, total_not_ready)
    };
    let mut left = room;
    for subset in subsets.iter_mut() {
        let here = if cut_ready {
            count(&subset.addresses)
        } else {
            count(&subset.not_ready_addresses)
        };
        // The same float arithmetic as upstream, so shares round alike.
        let share = ((here as f64 / total as f64) * room as f64).ceil() as usize;
        let keep = share.min(left);
        let list = if cut_ready {
            subset.not_ready_addresses = None;
            &mut subset.addresses
        } else {
            &mut subset.not_ready_addresses
        };
        if let Some(addresses) = list.as_mut() {
            addresses.truncate(keep);
        }
        if list.as_ref().is_some_and(Vec::is_empty) {
            *list = None;
        }
        left = left.saturating_sub(count(list));
    }
    true
}

/// Whether the over-capacity annotation is as it should be on an object holding these
/// subsets (upstream `capacityAnnotationSetCorrectly`): absent, and the subsets within
/// capacity (an object over capacity always needs truncating).
fn capacity_annotation_right(
    annotations: Option<&BTreeMap<String, String>>,
    subsets: &[EndpointSubset],
) -> bool {
    let addresses: usize = subsets
        .iter()
        .map(|s| count(&s.addresses) + count(&s.not_ready_addresses))
        .sum();
    if addresses > MAX_CAPACITY {
        return false;
    }
    !annotations.is_some_and(|annotations| annotations.contains_key(OVER_CAPACITY))
}

/// Go's `time.RFC3339Nano` of the time in UTC: the fraction of a second without its
/// trailing zeros, and none at all on a whole second.
pub(super) fn rfc3339_nano(time: Timestamp) -> String {
    let civil = time.to_zoned(TimeZone::UTC).datetime();
    let nanos = civil.subsec_nanosecond();
    let fraction = if nanos == 0 {
        String::new()
    } else {
        let digits = format!("{nanos:09}");
        format!(".{}", digits.trim_end_matches('0'))
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}Z",
        civil.year(),
        civil.month(),
        civil.day(),
        civil.hour(),
        civil.minute(),
        civil.second()
    )
}

/// An Endpoints object to write, and whether it is created (or else replaced).
#[derive(Debug)]
pub(super) struct Write {
    pub(super) endpoints: Endpoints,
    pub(super) create: bool,
}

fn labels_or_empty(labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    labels.cloned().unwrap_or_default()
}

/// The Endpoints object to write for the Service, or `None` when the one in the cache
/// (`current`) is already right: the same subsets (the pods' resourceVersions aside),
/// the Service's labels (the headless label aside, which the Service does not carry) and
/// the over-capacity annotation right. The trigger time is not compared: on its own it
/// never causes a write. Other labels are replaced by the Service's; other annotations
/// are kept.
pub(super) fn endpoints_to_write(
    service: &Service,
    current: Option<&Endpoints>,
    subsets: Vec<EndpointSubset>,
    trigger_time: Option<Timestamp>,
) -> Option<Write> {
    let base = match current {
        Some(current) => current.clone(),
        None => Endpoints {
            // Namespace left empty as upstream leaves it: the request's path gives it.
            metadata: ObjectMeta {
                name: service.metadata.name.clone(),
                labels: service.metadata.labels.clone(),
                ..Default::default()
            },
            ..Default::default()
        },
    };
    let create = base
        .metadata
        .resource_version
        .as_deref()
        .is_none_or(str::is_empty);
    let service_labels = labels_or_empty(service.metadata.labels.as_ref());
    if !create {
        let mut compared = labels_or_empty(base.metadata.labels.as_ref());
        compared.remove(HEADLESS_LABEL);
        let current_subsets = base.subsets.as_deref().unwrap_or_default();
        if subsets_equal(current_subsets, &subsets)
            && compared == service_labels
            && capacity_annotation_right(base.metadata.annotations.as_ref(), current_subsets)
        {
            return None;
        }
    }
    let mut endpoints = base;
    let mut subsets = subsets;
    let truncated = truncate(&mut subsets);
    endpoints.subsets = (!subsets.is_empty()).then_some(subsets);
    let annotations = endpoints
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    match trigger_time {
        Some(time) => {
            annotations.insert(LAST_CHANGE_TRIGGER_TIME.to_string(), rfc3339_nano(time));
        }
        None => {
            annotations.remove(LAST_CHANGE_TRIGGER_TIME);
        }
    }
    if truncated {
        annotations.insert(OVER_CAPACITY.to_string(), TRUNCATED.to_string());
    } else {
        annotations.remove(OVER_CAPACITY);
    }
    let mut labels = service_labels;
    if is_headless(service) {
        labels.insert(HEADLESS_LABEL.to_string(), String::new());
    } else {
        labels.remove(HEADLESS_LABEL);
    }
    endpoints.metadata.labels = Some(labels);
    Some(Write { endpoints, create })
}

#[cfg(test)]
mod tests;
