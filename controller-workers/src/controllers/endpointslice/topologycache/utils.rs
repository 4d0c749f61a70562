//! The steps of giving hints (upstream `topologycache/utils.go`): which zones have more
//! hints than their share and which fewer, moving hints from the former to the latter,
//! checking an unchanged slice's hints against the allocations, and whether a Service's
//! hints overload a zone. Where upstream walks Go maps in random order, this walks zones
//! in name order.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointHints, EndpointSlice, ForZone};
use tracing::info;

use super::{Allocation, EndpointZoneInfo, SliceInfo, OVERLOAD_THRESHOLD};

/// Removes the hints of the slices being written, and of unchanged slices that have any
/// (which become updates).
pub(crate) fn remove_hints_from_slices(info: &mut SliceInfo) {
    for slice in info.to_create.iter_mut().chain(info.to_update.iter_mut()) {
        for endpoint in &mut slice.endpoints {
            endpoint.hints = None;
        }
    }
    let mut still_unchanged = Vec::with_capacity(info.unchanged.len());
    for mut slice in std::mem::take(&mut info.unchanged) {
        if slice
            .endpoints
            .iter()
            .any(|endpoint| endpoint.hints.is_some())
        {
            for endpoint in &mut slice.endpoints {
                endpoint.hints = None;
            }
            info.to_update.push(slice);
        } else {
            still_unchanged.push(slice);
        }
    }
    info.unchanged = still_unchanged;
}

/// `<message>, addressType: <type>`, as every hint event ends.
pub(crate) fn format_with_address_type(message: &str, address_type: &str) -> String {
    format!("{message}, addressType: {address_type}")
}

/// Moves hints of ready endpoints from the giving zones to the receiving ones, in slice
/// and endpoint order; returns how many hints each zone gained (negative: lost).
pub(super) fn redistribute_hints(
    slices: &mut [&mut EndpointSlice],
    mut giving: BTreeMap<String, i64>,
    mut receiving: BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let mut redistributions: BTreeMap<String, i64> = BTreeMap::new();
    for slice in slices.iter_mut() {
        for endpoint in slice.endpoints.iter_mut() {
            if !endpoint_ready(endpoint) {
                continue;
            }
            if giving.is_empty() || receiving.is_empty() {
                return redistributions;
            }
            let Some(giving_zone) = endpoint.zone.clone().filter(|zone| !zone.is_empty()) else {
                // AddHints has refused zoneless endpoints already.
                info!("endpoint found without zone specified");
                continue;
            };
            if giving.get(&giving_zone).is_none_or(|count| *count <= 0) {
                continue;
            }
            let Some(receiving_zone) = receiving
                .iter()
                .find(|(_, count)| **count > 0)
                .map(|(zone, _)| zone.clone())
            else {
                continue;
            };
            endpoint.hints = Some(EndpointHints {
                for_zones: Some(vec![ForZone {
                    name: receiving_zone.clone(),
                }]),
                for_nodes: None,
            });
            take_one(&mut giving, &giving_zone);
            take_one(&mut receiving, &receiving_zone);
            *redistributions.entry(receiving_zone).or_default() += 1;
            *redistributions.entry(giving_zone).or_default() -= 1;
        }
    }
    redistributions
}

/// One less for `zone`, which leaves the map at its last.
fn take_one(zones: &mut BTreeMap<String, i64>, zone: &str) {
    if let Some(count) = zones.get_mut(zone) {
        if *count <= 1 {
            zones.remove(zone);
        } else {
            *count -= 1;
        }
    }
}

/// How many endpoints each zone should give away and how many each should receive, from
/// the allocations (what should be) and the hints given (what is): whole endpoints,
/// moved from the most over-served zone to the most under-served while both differ by
/// at least half an endpoint and one of them by a whole one.
pub(super) fn giving_and_receiving_zones(
    allocations: &BTreeMap<String, Allocation>,
    allocated: &EndpointZoneInfo,
) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let mut giving_desired: BTreeMap<String, f64> = BTreeMap::new();
    let mut receiving_desired: BTreeMap<String, f64> = BTreeMap::new();
    for (zone, allocation) in allocations {
        let hints = allocated.get(zone).copied().unwrap_or(0) as f64;
        let target = allocation.desired;
        if hints > target {
            giving_desired.insert(zone.clone(), hints - target);
        } else if hints < target {
            receiving_desired.insert(zone.clone(), target - hints);
        }
    }
    let mut giving: BTreeMap<String, i64> = BTreeMap::new();
    let mut receiving: BTreeMap<String, i64> = BTreeMap::new();
    loop {
        let (giving_zone, to_give) = most(&giving_desired);
        let (receiving_zone, to_receive) = most(&receiving_desired);
        let (Some(giving_zone), Some(receiving_zone)) = (giving_zone, receiving_zone) else {
            break;
        };
        if (to_give < 1.0 && to_receive < 1.0) || to_give < 0.5 || to_receive < 0.5 {
            break;
        }
        *giving.entry(giving_zone.clone()).or_default() += 1;
        *receiving.entry(receiving_zone.clone()).or_default() += 1;
        if let Some(value) = giving_desired.get_mut(&giving_zone) {
            *value -= 1.0;
        }
        if let Some(value) = receiving_desired.get_mut(&receiving_zone) {
            *value -= 1.0;
        }
    }
    (giving, receiving)
}

/// The zone with the greatest positive value (the first of equals), and that value.
fn most(zones: &BTreeMap<String, f64>) -> (Option<String>, f64) {
    let mut best: (Option<String>, f64) = (None, 0.0);
    for (zone, value) in zones {
        if *value > best.1 {
            best = (Some(zone.clone()), *value);
        }
    }
    best
}

/// The hints an unchanged slice gives each zone, or `None` when they must be given
/// again: a ready endpoint without a hint, a hint for a zone without allocation, or more
/// hints for a zone than its maximum allows with those already counted.
pub(super) fn hints_by_zone(
    slice: &EndpointSlice,
    allocated: &EndpointZoneInfo,
    allocations: &BTreeMap<String, Allocation>,
) -> Option<EndpointZoneInfo> {
    let mut hints = EndpointZoneInfo::new();
    for endpoint in slice.endpoints.iter().filter(|e| endpoint_ready(e)) {
        let zones = endpoint
            .hints
            .as_ref()
            .and_then(|hints| hints.for_zones.as_ref())
            .filter(|zones| !zones.is_empty())?;
        for zone in zones {
            if !allocations.contains_key(&zone.name) {
                return None;
            }
            *hints.entry(zone.name.clone()).or_default() += 1;
        }
    }
    for (zone, count) in &hints {
        let already = allocated.get(zone).copied().unwrap_or(0);
        let allocation = allocations.get(zone)?;
        if count + already > allocation.maximum {
            return None;
        }
    }
    Some(hints)
}

/// Whether a Service's hints leave some zone with fewer endpoints than its CPU share
/// needs (within the overload threshold).
pub(super) fn service_overloaded(hints: &EndpointZoneInfo, ratios: &BTreeMap<String, f64>) -> bool {
    if hints.is_empty() {
        return false;
    }
    if ratios.is_empty() {
        return true;
    }
    let total: f64 = hints.values().map(|count| *count as f64).sum();
    ratios.iter().any(|(zone, ratio)| match hints.get(zone) {
        None => true,
        Some(count) => {
            let minimum = (total * ratio * (1.0 / (1.0 + OVERLOAD_THRESHOLD))).ceil();
            (*count as f64) < minimum
        }
    })
}

/// Nodes with either label are left out of the zones' CPU.
pub(super) fn has_excluded_labels(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels.is_some_and(|labels| {
        labels.contains_key("node-role.kubernetes.io/control-plane")
            || labels.contains_key("node-role.kubernetes.io/master")
    })
}

/// Whether the Node's Ready condition is True.
pub(crate) fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|condition| condition.status == "True")
}

/// The ready endpoints among `endpoints`.
pub(super) fn num_ready_endpoints(endpoints: &[Endpoint]) -> usize {
    endpoints.iter().filter(|e| endpoint_ready(e)).count()
}

/// Whether the endpoint's `ready` condition is true.
pub(super) fn endpoint_ready(endpoint: &Endpoint) -> bool {
    endpoint
        .conditions
        .as_ref()
        .and_then(|conditions| conditions.ready)
        .unwrap_or(false)
}
