//! What a sync should write for one address type of a Service (upstream
//! `reconcileByAddressType` and `reconcileByPortMapping`, decision part): the endpoints
//! its pods give, grouped by the ports they resolve to, packed into the existing slices
//! and new ones, then the topology hints. Plain functions of the stores' content, so the
//! packing rules are table-tested without a cluster; [`super::reconciler`] writes the
//! result.
//!
//! The packing rules, exactly upstream's: endpoints already in a slice stay there (updated
//! in place when they changed, removed when gone); new endpoints go first into the slices
//! being updated anyway, fullest first; what is left goes into the unchanged slice it
//! fills most exactly, but only when fewer than a whole slice's worth remain; then into
//! new slices. Nothing is ever rebalanced. Where upstream picks in Go's random map order,
//! this picks in key order (endpoints by [`EndpointKey`], slices by name).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tracing::info;

use crate::endpointutil::{
    endpoints_equal_beyond_key, should_pod_be_in_endpoints, EndpointKey, EndpointSet, PortMapKey,
};
use crate::meta::ResourceNames;
use crate::recorder::WARNING;
use crate::store::Store;

use super::metrics::{EfficiencyInfo, ServicePortCache};
use super::topologycache::{
    format_with_address_type, remove_hints_from_slices, SliceInfo, TopologyCache, TopologyEvent,
    TOPOLOGY_AWARE_HINTS_DISABLED,
};
use super::utils::{
    endpoint_ports, endpoint_slice_labels, hints_enabled, new_endpoint_slice, owned_by,
    pod_to_endpoint, publish_not_ready_addresses, same_placeholder, slice_to_fill,
    unchanged_slices, EndpointMeta,
};

/// What one sync decides for one address type of a Service.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) to_create: Vec<EndpointSlice>,
    pub(super) to_update: Vec<EndpointSlice>,
    pub(super) to_delete: Vec<EndpointSlice>,
    /// Topology events for the Service.
    pub(super) events: Vec<TopologyEvent>,
    /// Pods left out for now (their Node is unknown): the sync fails and is retried.
    pub(super) errors: Vec<String>,
    pub(super) added: usize,
    pub(super) removed: usize,
    pub(super) port_cache: ServicePortCache,
}

/// The slices of one port set, as [`Planner::reconcile_by_port_mapping`] leaves them.
#[derive(Default)]
pub(super) struct PortMappingPlan {
    pub(super) to_create: Vec<EndpointSlice>,
    pub(super) to_update: Vec<EndpointSlice>,
    pub(super) to_delete: Vec<EndpointSlice>,
    pub(super) added: usize,
    pub(super) removed: usize,
}

/// What the decision reads.
pub(super) struct Planner<'a> {
    pub(super) nodes: &'a Store<Node>,
    pub(super) max_endpoints_per_slice: usize,
    pub(super) topology: Option<&'a TopologyCache>,
    pub(super) controller_name: &'a str,
}

impl Planner<'_> {
    /// The plan for the Service's slices of `address_type`, given the pods its selector
    /// picks and the existing managed slices of that type.
    pub(super) fn plan_address_type(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: &[Arc<EndpointSlice>],
        address_type: &str,
    ) -> Plan {
        let mut plan = Plan::default();
        let namespace = service.namespace_str();
        let name = service.name_str();

        // Existing slices by port set; another Service's (an older one of the same name)
        // are replaced.
        let mut existing_by_ports: BTreeMap<PortMapKey, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for slice in existing {
            if owned_by(slice, service) {
                let key = PortMapKey::of(slice.ports.as_deref().unwrap_or(&[]));
                existing_by_ports
                    .entry(key)
                    .or_default()
                    .push(slice.clone());
            } else {
                plan.to_delete.push(slice.as_ref().clone());
            }
        }

        // Desired endpoints by port set.
        let mut desired_meta: BTreeMap<PortMapKey, EndpointMeta> = BTreeMap::new();
        let mut desired: BTreeMap<PortMapKey, EndpointSet> = BTreeMap::new();
        for pod in pods {
            if !should_pod_be_in_endpoints(pod, true) {
                continue;
            }
            let ports = endpoint_ports(service, pod);
            let key = PortMapKey::of(&ports);
            desired.entry(key.clone()).or_default();
            desired_meta
                .entry(key.clone())
                .or_insert_with(|| EndpointMeta {
                    ports,
                    address_type: address_type.to_string(),
                });
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|spec| spec.node_name.as_deref())
                .unwrap_or_default();
            let node = self.nodes.get(node_name);
            if node.is_none() && !publish_not_ready_addresses(service) {
                // Left out, and the sync retried: a pod on a Node that is gone must not
                // keep the slices from being written.
                let pod_name = pod.name_str();
                info!(pod = pod_name, service = %format!("{namespace}/{name}"), node = node_name, "skipping Pod for Service, Node not found");
                plan.errors.push(format!(
                    "skipping Pod {pod_name} for Service {namespace}/{name}: Node {node_name} Not Found"
                ));
                continue;
            }
            let endpoint = pod_to_endpoint(pod, node.as_deref(), service, address_type);
            if !endpoint.addresses.is_empty() {
                if let Some(set) = desired.get_mut(&key) {
                    set.insert(EndpointKey::of(&endpoint), endpoint);
                }
            }
        }

        let desired_keys: BTreeSet<PortMapKey> = desired.keys().cloned().collect();
        for (key, endpoints) in desired {
            let count = endpoints.len();
            let existing_here = existing_by_ports
                .get(&key)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let Some(meta) = desired_meta.get(&key) else {
                continue;
            };
            let result = self.reconcile_by_port_mapping(service, existing_here, endpoints, meta);
            plan.added += result.added;
            plan.removed += result.removed;
            plan.port_cache.set(
                key,
                EfficiencyInfo {
                    endpoints: count,
                    slices: (existing_here.len() + result.to_create.len())
                        .saturating_sub(result.to_delete.len()),
                },
            );
            plan.to_create.extend(result.to_create);
            plan.to_update.extend(result.to_update);
            plan.to_delete.extend(result.to_delete);
        }
        // Port sets no pod gives any more.
        for (key, slices) in &existing_by_ports {
            if !desired_keys.contains(key) {
                plan.to_delete
                    .extend(slices.iter().map(|slice| slice.as_ref().clone()));
            }
        }

        // A Service without endpoints keeps exactly one empty slice.
        if existing.len() == plan.to_delete.len() && plan.to_create.is_empty() {
            let placeholder = new_endpoint_slice(
                service,
                &EndpointMeta {
                    ports: Vec::new(),
                    address_type: address_type.to_string(),
                },
                self.controller_name,
            );
            if plan.to_delete.len() == 1 && same_placeholder(&plan.to_delete[0], &placeholder) {
                // The existing placeholder is right: neither delete nor recreate it.
                plan.to_delete.clear();
            } else {
                plan.to_create.push(placeholder);
            }
            plan.port_cache.set(
                PortMapKey::of(&[]),
                EfficiencyInfo {
                    endpoints: 0,
                    slices: 1,
                },
            );
        }

        self.apply_topology(service, existing, address_type, &mut plan);
        plan
    }

    /// Hints are given per address type: on the slices being written, and on unchanged
    /// ones whose hints no longer fit.
    fn apply_topology(
        &self,
        service: &Service,
        existing: &[Arc<EndpointSlice>],
        address_type: &str,
        plan: &mut Plan,
    ) {
        let namespace = service.namespace_str();
        let name = service.name_str();
        let mut info = SliceInfo {
            service_key: format!("{namespace}/{name}"),
            address_type: address_type.to_string(),
            unchanged: unchanged_slices(existing, &plan.to_update, &plan.to_delete),
            to_create: std::mem::take(&mut plan.to_create),
            to_update: std::mem::take(&mut plan.to_update),
        };
        match self.topology {
            Some(topology) if hints_enabled(service.metadata.annotations.as_ref()) => {
                plan.events.extend(topology.add_hints(&mut info));
            }
            topology => {
                if let Some(topology) = topology {
                    if topology.has_populated_hints(&info.service_key) {
                        info!(service = %info.service_key, address_type, "TopologyAwareHints annotation has changed, removing hints");
                        plan.events.push(TopologyEvent {
                            event_type: WARNING,
                            reason: TOPOLOGY_AWARE_HINTS_DISABLED,
                            message: format_with_address_type(
                                super::topologycache::TOPOLOGY_AWARE_HINTS_DISABLED_MESSAGE,
                                address_type,
                            ),
                        });
                    }
                    topology.remove_hints(&info.service_key, address_type);
                }
                remove_hints_from_slices(&mut info);
            }
        }
        plan.to_create = info.to_create;
        plan.to_update = info.to_update;
    }

    /// The slices of one port set: existing ones updated or deleted as their endpoints
    /// changed or went, then the endpoints left placed by the packing rules.
    pub(super) fn reconcile_by_port_mapping(
        &self,
        service: &Service,
        existing: &[Arc<EndpointSlice>],
        mut desired: EndpointSet,
        meta: &EndpointMeta,
    ) -> PortMappingPlan {
        let max = self.max_endpoints_per_slice.max(1);
        let mut slices: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let mut unchanged: BTreeSet<String> = BTreeSet::new();
        let mut to_update: BTreeSet<String> = BTreeSet::new();
        let mut to_delete: BTreeSet<String> = BTreeSet::new();
        let mut removed = 0;

        // 1. Keep the endpoints still desired where they are, as they should be now.
        for slice in existing {
            let name = slice.name_str().to_string();
            let mut kept = Vec::new();
            let mut endpoint_updated = false;
            for endpoint in &slice.endpoints {
                if let Some(wanted) = desired.remove(&EndpointKey::of(endpoint)) {
                    if !endpoints_equal_beyond_key(&wanted, endpoint) {
                        endpoint_updated = true;
                    }
                    kept.push(wanted);
                }
            }
            let (labels, labels_changed) = endpoint_slice_labels(
                slice.metadata.labels.as_ref(),
                service,
                self.controller_name,
            );
            let mut copy = slice.as_ref().clone();
            if endpoint_updated || slice.endpoints.len() != kept.len() {
                removed += slice.endpoints.len().saturating_sub(kept.len());
                if kept.is_empty() {
                    to_delete.insert(name.clone());
                } else {
                    copy.endpoints = kept;
                    copy.metadata.labels = Some(labels);
                    to_update.insert(name.clone());
                }
            } else if labels_changed {
                copy.metadata.labels = Some(labels);
                to_update.insert(name.clone());
            } else {
                unchanged.insert(name.clone());
            }
            slices.insert(name, copy);
        }

        let added = desired.len();

        // 2. Fill the slices being updated anyway, fullest first.
        if !desired.is_empty() && !to_update.is_empty() {
            let mut names: Vec<&String> = to_update.iter().collect();
            names.sort_by_key(|name| {
                std::cmp::Reverse(slices.get(*name).map_or(0, |s| s.endpoints.len()))
            });
            for name in names {
                if let Some(slice) = slices.get_mut(name) {
                    fill(slice, &mut desired, max);
                }
            }
        }

        // 3. The rest: into the unchanged slice they fill most exactly when less than a
        //    slice's worth remains, else into new slices.
        let mut to_create = Vec::new();
        while !desired.is_empty() {
            let mut target = None;
            if desired.len() < max && !unchanged.is_empty() {
                let candidates: Vec<&String> = unchanged.iter().collect();
                let lengths: Vec<usize> = candidates
                    .iter()
                    .map(|name| slices.get(*name).map_or(0, |s| s.endpoints.len()))
                    .collect();
                target = slice_to_fill(&lengths, desired.len(), max)
                    .map(|index| candidates[index].clone());
            }
            match target.and_then(|name| slices.get_mut(&name).map(|slice| (name, slice))) {
                Some((name, slice)) => {
                    fill(slice, &mut desired, max);
                    unchanged.remove(&name);
                    to_update.insert(name);
                }
                None => {
                    let mut slice = new_endpoint_slice(service, meta, self.controller_name);
                    fill(&mut slice, &mut desired, max);
                    to_create.push(slice);
                }
            }
        }

        let take = |names: &BTreeSet<String>, slices: &BTreeMap<String, EndpointSlice>| {
            names
                .iter()
                .filter_map(|name| slices.get(name).cloned())
                .collect::<Vec<_>>()
        };
        PortMappingPlan {
            to_update: take(&to_update, &slices),
            to_delete: take(&to_delete, &slices),
            to_create,
            added,
            removed,
        }
    }
}

/// Moves desired endpoints into the slice until it holds `max`.
fn fill(slice: &mut EndpointSlice, desired: &mut EndpointSet, max: usize) {
    while slice.endpoints.len() < max {
        let Some((_, endpoint)) = desired.pop_first() else {
            break;
        };
        slice.endpoints.push(endpoint);
    }
}
