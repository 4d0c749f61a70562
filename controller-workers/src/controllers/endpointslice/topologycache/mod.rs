//! Topology hints (upstream `staging/src/k8s.io/endpointslice/topologycache`): for a
//! Service annotated `service.kubernetes.io/topology-mode: Auto`, each ready endpoint gets
//! `hints.forZones`, so that every zone is served by about its share of the cluster's
//! allocatable CPU (Ready Nodes only, control-plane Nodes aside) and no endpoint takes
//! more than 20% above its fair load.
//!
//! The cache holds the zones' CPU shares (set from the Node store on every Node change
//! that matters) and, per Service and address type, how many hints each zone got, so a
//! Node change can queue the Services it overloads. When hints cannot be given (too few
//! endpoints, Nodes without zone or CPU, an endpoint without zone) they are removed and
//! the Service gets a `TopologyAwareHintsDisabled` event saying why, with upstream's
//! words.

mod sliceinfo;
mod utils;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::{EndpointHints, ForZone};
use tracing::{debug, info};

use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::recorder::{NORMAL, WARNING};
use rkcm_gocompat::quantity::Quantity;

use super::utils::ZONE_LABEL;

pub(super) use self::sliceinfo::SliceInfo;
use self::utils::{
    endpoint_ready, giving_and_receiving_zones, has_excluded_labels, redistribute_hints,
    service_overloaded,
};
pub(super) use self::utils::{format_with_address_type, is_node_ready, remove_hints_from_slices};

/// The reason of the events that say hints were removed.
pub(super) const TOPOLOGY_AWARE_HINTS_DISABLED: &str = "TopologyAwareHintsDisabled";
/// The reason of the event that says hints were given.
pub(super) const TOPOLOGY_AWARE_HINTS_ENABLED: &str = "TopologyAwareHintsEnabled";

// Upstream's event messages (topologycache/event.go), each followed by the address type.
pub(super) const NO_ZONE_SPECIFIED: &str = "One or more endpoints do not have a zone specified";
pub(super) const NO_ALLOCATED_HINTS_FOR_ZONES: &str = "No hints allocated for zones";
pub(super) const TOPOLOGY_AWARE_HINTS_ENABLED_MESSAGE: &str =
    "Topology Aware Hints has been enabled";
pub(super) const TOPOLOGY_AWARE_HINTS_DISABLED_MESSAGE: &str =
    "Topology Aware Hints has been disabled";
pub(super) const INSUFFICIENT_NODE_INFO: &str =
    "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes";
pub(super) const NODES_READY_IN_ONE_ZONE_ONLY: &str = "Nodes only ready in one zone";
pub(super) const INSUFFICIENT_NUMBER_OF_ENDPOINTS: &str = "Insufficient number of endpoints";
pub(super) const MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD: &str =
    "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold";

/// The most load above its fair share any endpoint should take.
const OVERLOAD_THRESHOLD: f64 = 0.2;

/// An event for the Service, decided while planning and recorded after the writes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TopologyEvent {
    pub(super) event_type: &'static str,
    pub(super) reason: &'static str,
    pub(super) message: String,
}

fn disabled(message: String) -> TopologyEvent {
    TopologyEvent {
        event_type: WARNING,
        reason: TOPOLOGY_AWARE_HINTS_DISABLED,
        message,
    }
}

/// Hints given per zone.
pub(super) type EndpointZoneInfo = BTreeMap<String, i64>;

/// How many endpoints a zone should get: at least `minimum`, at most `maximum`, ideally
/// `desired`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Allocation {
    pub(super) minimum: i64,
    pub(super) maximum: i64,
    pub(super) desired: f64,
}

struct State {
    /// Each zone's share of the allocatable CPU: empty before any Node was seen, `None`
    /// when the Nodes say too little.
    cpu_ratios_by_zone: Option<BTreeMap<String, f64>>,
    /// Hints per zone, by address type, by Service key.
    endpoints_by_service: HashMap<String, BTreeMap<String, EndpointZoneInfo>>,
    hints_populated_by_service: HashSet<String>,
}

pub(crate) struct TopologyCache {
    state: Mutex<State>,
}

impl TopologyCache {
    pub(crate) fn new() -> Self {
        TopologyCache {
            state: Mutex::new(State {
                cpu_ratios_by_zone: Some(BTreeMap::new()),
                endpoints_by_service: HashMap::new(),
                hints_populated_by_service: HashSet::new(),
            }),
        }
    }

    /// The Services whose hints leave some zone with too few endpoints for its share.
    pub(super) fn overloaded_services(&self) -> Vec<String> {
        let state = lock(&self.state);
        let ratios = state.cpu_ratios_by_zone.clone().unwrap_or_default();
        let mut keys: Vec<String> = state
            .endpoints_by_service
            .iter()
            .filter(|(_, by_type)| {
                by_type
                    .values()
                    .any(|zones| service_overloaded(zones, &ratios))
            })
            .map(|(key, _)| key.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Gives hints to the ready endpoints of the slices being written (and of unchanged
    /// slices whose hints no longer fit, which become updates), or removes them all when
    /// they cannot be given; returns the events for the Service.
    pub(super) fn add_hints(&self, info: &mut SliceInfo) -> Vec<TopologyEvent> {
        let mut events = Vec::new();
        let total = info.total_ready_endpoints();
        let allocations = match self.allocations(total) {
            Ok(allocations) => allocations,
            Err(mut event) => {
                info!(key = %info.service_key, address_type = %info.address_type, "{}, removing hints", event.message);
                event.message = format_with_address_type(&event.message, &info.address_type);
                events.push(event);
                self.remove_all(info);
                return events;
            }
        };
        let mut allocated = info.allocated_hints_by_zone(&allocations);

        // 1. Every ready endpoint starts with a hint for its own zone. (A not-ready one
        //    keeps what it has, as upstream's loop leaves it.)
        let zoneless = info
            .to_create
            .iter()
            .chain(&info.to_update)
            .flat_map(|slice| &slice.endpoints)
            .any(|endpoint| {
                endpoint_ready(endpoint) && endpoint.zone.as_deref().unwrap_or_default().is_empty()
            });
        if zoneless {
            info!(key = %info.service_key, address_type = %info.address_type, "endpoint found without zone specified, removing hints");
            events.push(disabled(format_with_address_type(
                NO_ZONE_SPECIFIED,
                &info.address_type,
            )));
            self.remove_all(info);
            return events;
        }
        for slice in info.to_create.iter_mut().chain(info.to_update.iter_mut()) {
            for endpoint in slice.endpoints.iter_mut().filter(|e| endpoint_ready(e)) {
                let zone = endpoint.zone.clone().unwrap_or_default();
                *allocated.entry(zone.clone()).or_default() += 1;
                endpoint.hints = Some(EndpointHints {
                    for_zones: Some(vec![ForZone { name: zone }]),
                    for_nodes: None,
                });
            }
        }

        // 2. Which zones have more than their share and which fewer; 3. move hints.
        let (giving, receiving) = giving_and_receiving_zones(&allocations, &allocated);
        let mut allocatable: Vec<&mut k8s_openapi::api::discovery::v1::EndpointSlice> = info
            .to_create
            .iter_mut()
            .chain(info.to_update.iter_mut())
            .collect();
        let redistributions = redistribute_hints(&mut allocatable, giving, receiving);
        for (zone, difference) in redistributions {
            *allocated.entry(zone).or_default() += difference;
        }

        if allocated.is_empty() {
            debug!(key = %info.service_key, address_type = %info.address_type, "no hints allocated for zones, removing them");
            events.push(disabled(format_with_address_type(
                NO_ALLOCATED_HINTS_FOR_ZONES,
                &info.address_type,
            )));
            self.remove_all(info);
            return events;
        }

        let mut state = lock(&self.state);
        let enabled_before = state.hints_populated_by_service.contains(&info.service_key);
        set_hints_locked(&mut state, &info.service_key, &info.address_type, allocated);
        if !enabled_before {
            info!(key = %info.service_key, address_type = %info.address_type, "Topology Aware Hints has been enabled, adding hints");
            events.push(TopologyEvent {
                event_type: NORMAL,
                reason: TOPOLOGY_AWARE_HINTS_ENABLED,
                message: format_with_address_type(
                    TOPOLOGY_AWARE_HINTS_ENABLED_MESSAGE,
                    &info.address_type,
                ),
            });
        }
        events
    }

    fn remove_all(&self, info: &mut SliceInfo) {
        self.remove_hints(&info.service_key, &info.address_type);
        remove_hints_from_slices(info);
    }

    /// Forgets the hints of the Service's endpoints of `address_type`.
    pub(super) fn remove_hints(&self, key: &str, address_type: &str) {
        let mut state = lock(&self.state);
        if let Some(by_type) = state.endpoints_by_service.get_mut(key) {
            by_type.remove(address_type);
            if by_type.is_empty() {
                state.endpoints_by_service.remove(key);
            }
        }
        state.hints_populated_by_service.remove(key);
    }

    /// Whether the Service's endpoints have hints this controller gave.
    pub(super) fn has_populated_hints(&self, key: &str) -> bool {
        lock(&self.state).hints_populated_by_service.contains(key)
    }

    /// Takes the zones' CPU from the Nodes: Ready ones, control-plane ones aside. One Node
    /// without a zone or allocatable CPU, or fewer than two zones, leaves no shares at
    /// all (hints are then removed everywhere).
    pub(super) fn set_nodes(&self, nodes: &[Arc<Node>]) {
        let mut cpu_by_zone: BTreeMap<String, i64> = BTreeMap::new();
        let mut sufficient = true;
        let mut total: i64 = 0;
        for node in nodes {
            let name = node.name_str();
            if has_excluded_labels(node.metadata.labels.as_ref()) {
                debug!(
                    node = name,
                    "ignoring node because it has an excluded label"
                );
                continue;
            }
            if !is_node_ready(node) {
                debug!(node = name, "ignoring node because it is not ready");
                continue;
            }
            let cpu = node
                .status
                .as_ref()
                .and_then(|status| status.allocatable.as_ref())
                .and_then(|allocatable| allocatable.get("cpu"))
                .and_then(|quantity| Quantity::from_api(&quantity.0).ok()?.milli_value())
                .unwrap_or(0);
            let zone = node
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(ZONE_LABEL))
                .filter(|zone| !zone.is_empty());
            let Some(zone) = zone.filter(|_| cpu != 0) else {
                cpu_by_zone.clear();
                sufficient = false;
                info!(node = name, "can't get CPU or zone information for node");
                break;
            };
            total = total.saturating_add(cpu);
            let entry = cpu_by_zone.entry(zone.clone()).or_default();
            *entry = entry.saturating_add(cpu);
        }

        let mut state = lock(&self.state);
        if total == 0 || !sufficient || cpu_by_zone.len() < 2 {
            debug!(
                zones = cpu_by_zone.len(),
                total_cpu_millis = total,
                sufficient,
                "insufficient node info for topology hints"
            );
            state.cpu_ratios_by_zone = None;
        } else {
            let ratios = cpu_by_zone
                .iter()
                .map(|(zone, cpu)| (zone.clone(), *cpu as f64 / total as f64))
                .collect();
            state.cpu_ratios_by_zone = Some(ratios);
        }
    }

    /// Each zone's minimum and maximum number of endpoints for `endpoints` ready ones,
    /// or the event that says why there are none.
    pub(super) fn allocations(
        &self,
        endpoints: usize,
    ) -> Result<BTreeMap<String, Allocation>, TopologyEvent> {
        let state = lock(&self.state);
        let Some(ratios) = state.cpu_ratios_by_zone.as_ref() else {
            return Err(disabled(INSUFFICIENT_NODE_INFO.into()));
        };
        if ratios.len() < 2 {
            return Err(disabled(NODES_READY_IN_ONE_ZONE_ONLY.into()));
        }
        let zones = ratios.len();
        if zones > endpoints {
            return Err(disabled(format!(
                "{INSUFFICIENT_NUMBER_OF_ENDPOINTS} ({endpoints} endpoints, {zones} zones)"
            )));
        }
        let total = i64::try_from(endpoints).unwrap_or(i64::MAX);
        let mut remaining = total;
        let mut minimum_total = 0;
        let mut allocations = BTreeMap::new();
        for (zone, ratio) in ratios {
            let desired = ratio * endpoints as f64;
            let minimum = (desired * (1.0 / (1.0 + OVERLOAD_THRESHOLD))).ceil() as i64;
            allocations.insert(
                zone.clone(),
                Allocation {
                    minimum,
                    maximum: 0,
                    desired: desired.max(minimum as f64),
                },
            );
            minimum_total += minimum;
            remaining -= minimum;
            if remaining < 0 {
                return Err(disabled(format!(
                    "{MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD} ({endpoints} endpoints, {zones} zones)"
                )));
            }
        }
        for allocation in allocations.values_mut() {
            allocation.maximum = allocation.minimum + total - minimum_total;
        }
        Ok(allocations)
    }
}

fn set_hints_locked(state: &mut State, key: &str, address_type: &str, allocated: EndpointZoneInfo) {
    state
        .endpoints_by_service
        .entry(key.to_string())
        .or_default()
        .insert(address_type.to_string(), allocated);
    state.hints_populated_by_service.insert(key.to_string());
}
