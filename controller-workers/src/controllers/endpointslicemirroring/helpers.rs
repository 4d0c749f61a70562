//! The mirroring controller's plain helpers (upstream `utils.go` and
//! `reconciler_helpers.go`): which Endpoints are mirrored and which slices are this
//! controller's, the key that groups endpoints by address type and port set, the
//! desired state built address by address, the slice made from an Endpoints, and the
//! recycling of slices a sync would delete while it creates others.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort as CorePort, Endpoints};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::endpointutil::{
    address_type_of, EndpointKey, EndpointSet, PortMapKey, ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6,
    LAST_CHANGE_TRIGGER_TIME, LEADER_ANNOTATION, MANAGED_BY_LABEL, SERVICE_NAME_LABEL,
    SKIP_MIRROR_LABEL,
};
use crate::meta::ResourceNames;

use super::MANAGED_BY;

/// kubectl's record of the last applied configuration: not mirrored onto slices.
pub(super) const LAST_APPLIED_CONFIG: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Identifies one group of slices: an address type and a set of ports (upstream
/// `addrTypePortMapKey`, `"<addressType>-<port hash>"`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct AddrTypePortMapKey {
    address_type: String,
    ports: PortMapKey,
}

impl AddrTypePortMapKey {
    pub(super) fn new(ports: &[EndpointPort], address_type: &str) -> Self {
        AddrTypePortMapKey {
            address_type: address_type.to_string(),
            ports: PortMapKey::of(ports),
        }
    }

    /// The address type of the group: IPv6 for IPv6 keys, IPv4 for any other.
    pub(super) fn address_type(&self) -> &'static str {
        if self.address_type.starts_with(ADDRESS_TYPE_IPV6) {
            ADDRESS_TYPE_IPV6
        } else {
            ADDRESS_TYPE_IPV4
        }
    }
}

/// Whether the label says "do not mirror me" (exactly `"true"`).
pub(super) fn skip_mirror(endpoints: &Endpoints) -> bool {
    endpoints
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(SKIP_MIRROR_LABEL))
        .is_some_and(|value| value == "true")
}

/// Whether the Endpoints is an old-style leader-election lock.
pub(super) fn has_leader_election(endpoints: &Endpoints) -> bool {
    endpoints
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(LEADER_ANNOTATION))
}

/// Whether the Endpoints may be mirrored at all: no skip-mirror label, no leader-election
/// annotation. Whether its Service exists without a selector is checked by the sync.
pub(super) fn should_mirror(endpoints: &Endpoints) -> bool {
    !skip_mirror(endpoints) && !has_leader_election(endpoints)
}

fn label<'a>(slice: &'a EndpointSlice, key: &str) -> Option<&'a str> {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(key))
        .map(String::as_str)
}

/// Whether the slice is labelled as this controller's.
pub(super) fn managed_by_controller(slice: &EndpointSlice) -> bool {
    label(slice, MANAGED_BY_LABEL) == Some(MANAGED_BY)
}

/// Whether one slice is this controller's and the other not.
pub(super) fn managed_by_changed(a: &EndpointSlice, b: &EndpointSlice) -> bool {
    managed_by_controller(a) != managed_by_controller(b)
}

/// The slice's `kubernetes.io/service-name` label, if set.
pub(super) fn service_name_of(slice: &EndpointSlice) -> Option<&str> {
    label(slice, SERVICE_NAME_LABEL)
}

/// The key (`namespace/name`) of the Endpoints a slice mirrors: its namespace and its
/// service-name label.
pub(super) fn endpoints_key_for_slice(slice: &EndpointSlice) -> Result<String, String> {
    match service_name_of(slice) {
        Some(name) if !name.is_empty() => Ok(format!("{}/{name}", slice.namespace_str())),
        _ => Err(format!("EndpointSlice missing {SERVICE_NAME_LABEL} label")),
    }
}

/// A copy of the map without `keys` (nil and empty maps are the same here, as they are
/// to upstream's semantic comparison).
pub(super) fn clone_and_remove_keys(
    map: Option<&BTreeMap<String, String>>,
    keys: &[&str],
) -> BTreeMap<String, String> {
    let mut copy = map.cloned().unwrap_or_default();
    for key in keys {
        copy.remove(*key);
    }
    copy
}

/// The annotations a mirrored slice carries: the Endpoints' own, but its trigger time and
/// kubectl's record.
pub(super) fn mirrored_annotations(endpoints: &Endpoints) -> BTreeMap<String, String> {
    clone_and_remove_keys(
        endpoints.metadata.annotations.as_ref(),
        &[LAST_CHANGE_TRIGGER_TIME, LAST_APPLIED_CONFIG],
    )
}

pub(super) use crate::endpointutil::endpoint_slice_prefix;

/// The slice for one (address type, port set) of an Endpoints, without endpoints:
/// `slice_name` names an existing slice it replaces, `None` makes a new one.
pub(super) fn new_endpoint_slice(
    endpoints: &Endpoints,
    ports: &[EndpointPort],
    address_type: &str,
    slice_name: Option<&str>,
) -> EndpointSlice {
    let name = endpoints.name_str().to_string();
    let mut labels = endpoints.labels().clone();
    labels.insert(SERVICE_NAME_LABEL.to_string(), name.clone());
    labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    let owner = OwnerReference {
        api_version: "v1".to_string(),
        kind: "Endpoints".to_string(),
        name: name.clone(),
        uid: endpoints.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let (slice_name, generate_name) = match slice_name {
        Some(existing) => (Some(existing.to_string()), None),
        None => (None, Some(endpoint_slice_prefix(&name))),
    };
    EndpointSlice {
        metadata: ObjectMeta {
            name: slice_name,
            generate_name,
            namespace: endpoints.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(mirrored_annotations(endpoints)),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        address_type: address_type.to_string(),
        endpoints: Vec::new(),
        ports: Some(ports.to_vec()),
    }
}

/// An Endpoints address as a slice endpoint: its IP, its readiness (and no other
/// condition), hostname, node and target.
pub(super) fn address_to_endpoint(address: &EndpointAddress, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![address.ip.clone()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..Default::default()
        }),
        hostname: address.hostname.clone().filter(|h| !h.is_empty()),
        node_name: address.node_name.clone(),
        target_ref: address.target_ref.clone(),
        ..Default::default()
    }
}

/// An Endpoints subset's ports as slice ports, in the same order.
pub(super) fn endpoint_ports(ports: &[CorePort]) -> Vec<EndpointPort> {
    ports
        .iter()
        .map(|port| EndpointPort {
            name: Some(port.name.clone().unwrap_or_default()),
            port: Some(port.port),
            // The API server defaults a missing protocol to TCP on both kinds.
            protocol: Some(port.protocol.clone().unwrap_or_else(|| "TCP".to_string())),
            app_protocol: port.app_protocol.clone(),
        })
        .collect()
}

/// The slices a sync writes.
#[derive(Debug, Default)]
pub(crate) struct SlicesByAction {
    pub(super) to_create: Vec<EndpointSlice>,
    pub(super) to_update: Vec<EndpointSlice>,
    pub(super) to_delete: Vec<Arc<EndpointSlice>>,
}

impl SlicesByAction {
    pub(super) fn append(&mut self, other: SlicesByAction) {
        self.to_create.extend(other.to_create);
        self.to_update.extend(other.to_update);
        self.to_delete.extend(other.to_delete);
    }
}

/// How many endpoints a sync adds, updates and removes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TotalsByAction {
    pub(super) added: usize,
    pub(super) updated: usize,
    pub(super) removed: usize,
}

impl TotalsByAction {
    pub(super) fn add(&mut self, other: TotalsByAction) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
    }
}

/// The keys of one subset's port set, one per address type.
pub(super) struct MultiKey {
    ipv4: AddrTypePortMapKey,
    ipv6: AddrTypePortMapKey,
}

/// The desired endpoints and ports by key, built subset by subset.
#[derive(Debug, Default)]
pub(crate) struct DesiredCalc {
    pub(super) ports_by_key: BTreeMap<AddrTypePortMapKey, Vec<EndpointPort>>,
    pub(super) endpoints_by_key: BTreeMap<AddrTypePortMapKey, EndpointSet>,
}

impl DesiredCalc {
    /// Registers a subset's ports for both address types (each gets its set, empty until
    /// addresses come) and returns their keys.
    pub(super) fn init_ports(&mut self, subset_ports: &[CorePort]) -> MultiKey {
        let ports = endpoint_ports(subset_ports);
        let ipv4 = AddrTypePortMapKey::new(&ports, ADDRESS_TYPE_IPV4);
        let ipv6 = AddrTypePortMapKey::new(&ports, ADDRESS_TYPE_IPV6);
        for key in [&ipv4, &ipv6] {
            self.endpoints_by_key.entry(key.clone()).or_default();
            self.ports_by_key.insert(key.clone(), ports.clone());
        }
        MultiKey { ipv4, ipv6 }
    }

    /// Adds an address to the set of its family; `false` (nothing added) when its IP is
    /// not an IP.
    pub(super) fn add_address(
        &mut self,
        address: &EndpointAddress,
        keys: &MultiKey,
        ready: bool,
    ) -> bool {
        let key = match address_type_of(&address.ip) {
            Some(ADDRESS_TYPE_IPV6) => &keys.ipv6,
            Some(_) => &keys.ipv4,
            None => return false,
        };
        let endpoint = address_to_endpoint(address, ready);
        self.endpoints_by_key
            .entry(key.clone())
            .or_default()
            .insert(EndpointKey::of(&endpoint), endpoint);
        true
    }
}

/// Turns creates into updates of slices that would be deleted, pair by pair within an
/// address type, so a changed port set renames nothing and the slice count stays put.
pub(super) fn recycle_slices(slices: &mut SlicesByAction) {
    let creates = std::mem::take(&mut slices.to_create);
    let mut deletes = std::mem::take(&mut slices.to_delete);
    for mut create in creates {
        let reusable = deletes
            .iter()
            .position(|delete| delete.address_type == create.address_type);
        match reusable {
            Some(index) => {
                let recycled = deletes.remove(index);
                create.metadata.name = recycled.metadata.name.clone();
                slices.to_update.push(create);
            }
            None => slices.to_create.push(create),
        }
    }
    slices.to_delete = deletes;
}
