//! Endpoints subsets in canonical form (upstream `pkg/api/v1/endpoints` `RepackSubsets`):
//! each address once, grouped with every port that reaches exactly the same addresses
//! with the same readiness, an address not ready on a port if any subset says so.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};

/// An address's identity: its IP and its target's UID.
type AddressKey = (String, String);
/// A port's identity, every field (`port: -1` stands for "no ports").
type PortKey = (i32, String, String, String);

fn address_key(address: &EndpointAddress) -> AddressKey {
    let uid = address
        .target_ref
        .as_ref()
        .and_then(|target| target.uid.clone())
        .unwrap_or_default();
    (address.ip.clone(), uid)
}

fn port_key(port: &EndpointPort) -> PortKey {
    (
        port.port,
        port.name.clone().unwrap_or_default(),
        port.protocol.clone().unwrap_or_default(),
        port.app_protocol.clone().unwrap_or_default(),
    )
}

const NO_PORTS: i32 = -1;

/// The subsets repacked: one subset per distinct set of (address, ready) pairs, with the
/// ports that reach that set; addresses sorted by IP then target UID, ports and subsets in
/// a fixed order.
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    // The first copy of each address, by identity.
    let mut addresses: BTreeMap<AddressKey, EndpointAddress> = BTreeMap::new();
    // Per port: which addresses it reaches and whether each is ready there.
    let mut by_port: BTreeMap<PortKey, (EndpointPort, BTreeMap<AddressKey, bool>)> =
        BTreeMap::new();
    for subset in subsets {
        let no_ports = [EndpointPort {
            port: NO_PORTS,
            ..Default::default()
        }];
        let ports = match subset.ports.as_deref() {
            Some(ports) if !ports.is_empty() => ports,
            _ => &no_ports,
        };
        for port in ports {
            let (_, reached) = by_port
                .entry(port_key(port))
                .or_insert_with(|| (port.clone(), BTreeMap::new()));
            let listed = [
                (&subset.addresses, true),
                (&subset.not_ready_addresses, false),
            ];
            for (list, ready) in listed {
                for address in list.iter().flatten() {
                    let key = address_key(address);
                    addresses
                        .entry(key.clone())
                        .or_insert_with(|| address.clone());
                    // Not ready anywhere on this port wins.
                    let entry = reached.entry(key).or_insert(ready);
                    *entry = *entry && ready;
                }
            }
        }
    }
    // Group the ports by the exact address set they reach.
    let mut groups: BTreeMap<Vec<(AddressKey, bool)>, Vec<EndpointPort>> = BTreeMap::new();
    for (key, (port, reached)) in by_port {
        let set: Vec<(AddressKey, bool)> = reached.into_iter().collect();
        let ports = groups.entry(set).or_default();
        if key.0 > 0 {
            ports.push(port);
        }
    }
    let mut repacked: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(set, mut ports)| {
            let mut ready = Vec::new();
            let mut not_ready = Vec::new();
            for (key, is_ready) in set {
                let address = addresses[&key].clone();
                if is_ready {
                    ready.push(address);
                } else {
                    not_ready.push(address);
                }
            }
            ready.sort_by(ordering);
            not_ready.sort_by(ordering);
            ports.sort_by_key(port_key);
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect();
    repacked.sort_by_key(subset_order);
    repacked
}

fn subset_order(subset: &EndpointSubset) -> (Vec<PortKey>, Vec<AddressKey>, Vec<AddressKey>) {
    (
        subset.ports.iter().flatten().map(port_key).collect(),
        subset.addresses.iter().flatten().map(address_key).collect(),
        subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(address_key)
            .collect(),
    )
}

fn ordering(a: &EndpointAddress, b: &EndpointAddress) -> std::cmp::Ordering {
    if less_endpoint_address(a, b) {
        std::cmp::Ordering::Less
    } else if less_endpoint_address(b, a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// Upstream's address order: by IP bytes, then an address without a target first, then by
/// target UID.
pub fn less_endpoint_address(a: &EndpointAddress, b: &EndpointAddress) -> bool {
    match a.ip.as_bytes().cmp(b.ip.as_bytes()) {
        std::cmp::Ordering::Less => return true,
        std::cmp::Ordering::Greater => return false,
        std::cmp::Ordering::Equal => {}
    }
    let Some(b_target) = &b.target_ref else {
        return false;
    };
    let Some(a_target) = &a.target_ref else {
        return true;
    };
    a_target.uid.as_deref().unwrap_or_default() < b_target.uid.as_deref().unwrap_or_default()
}

/// Whether two lists of subsets show the same endpoints once both are repacked, the
/// targets' resourceVersions aside (what the endpoints controller compares before it
/// writes).
pub fn subsets_equal(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    let normal = |subsets: &[EndpointSubset]| {
        let mut repacked = repack_subsets(subsets);
        for subset in &mut repacked {
            for address in subset
                .addresses
                .iter_mut()
                .flatten()
                .chain(subset.not_ready_addresses.iter_mut().flatten())
            {
                if let Some(target) = address.target_ref.as_mut() {
                    target.resource_version = None;
                }
            }
        }
        repacked
    };
    normal(a) == normal(b)
}
