//! The mirroring reconciler (upstream `reconciler.go`): from an Endpoints and the slices
//! mirrored for it so far, what to create, update and delete ([`plan`], a plain function),
//! then the writes ([`Reconciler::reconcile`]).
//!
//! The Endpoints' subsets are repacked first. Each subset gives one group of slices per
//! address type, keyed by its port set; its ready addresses come before its not-ready
//! ones, and at most `--mirroring-max-endpoints-per-subset` of them are mirrored (the rest
//! are reported with `TooManyAddressesToMirror`); addresses that are not IPs are skipped
//! (`InvalidIPAddress`). A group keeps its first existing slice, rewritten only when its
//! endpoints, labels or annotations differ, and loses the others; groups no longer wanted
//! lose all theirs; a slice about to be deleted is reused for a slice about to be created.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use kube::api::{Api, DeleteParams, PostParams};
use kube::ResourceExt;
use tracing::info;

use crate::api_errors::is_namespace_terminating;
use crate::endpointutil::{
    endpoints_equal_beyond_key, repack_subsets, EndpointKey, EndpointSet, EndpointSliceTracker,
    MANAGED_BY_LABEL, SERVICE_NAME_LABEL,
};
use crate::meta::ResourceNames;
use crate::recorder::{Recorder, WARNING};

use super::helpers::{
    clone_and_remove_keys, mirrored_annotations, new_endpoint_slice, recycle_slices,
    AddrTypePortMapKey, DesiredCalc, SlicesByAction, TotalsByAction,
};
use super::metrics::{EfficiencyInfo, EndpointPortCache, MetricsCache, MirroringMetrics};

/// Event reason: an Endpoints address is not an IP and was not mirrored.
pub(super) const INVALID_IP_ADDRESS: &str = "InvalidIPAddress";
/// Event reason: a subset has more addresses than may be mirrored.
pub(super) const TOO_MANY_ADDRESSES_TO_MIRROR: &str = "TooManyAddressesToMirror";

/// What one sync decided.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(super) slices: SlicesByAction,
    pub(super) totals: TotalsByAction,
    /// The addresses skipped because they are not IPs.
    pub(super) invalid_addresses: Vec<String>,
    /// Every address not mirrored: not an IP, or over the per-subset maximum.
    pub(super) addresses_skipped: usize,
    /// Desired endpoints and resulting slices per group, for the metrics.
    pub(super) efficiency: EndpointPortCache,
}

impl Plan {
    /// The Warning events the sync records on the Endpoints: (reason, message).
    pub(super) fn events(&self, max_per_subset: usize) -> Vec<(&'static str, String)> {
        let mut events = Vec::new();
        let invalid = self.invalid_addresses.len();
        if invalid > 0 {
            events.push((
                INVALID_IP_ADDRESS,
                format!("Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices"),
            ));
        }
        if self.addresses_skipped > invalid {
            events.push((
                TOO_MANY_ADDRESSES_TO_MIRROR,
                format!(
                    "A max of {max_per_subset} addresses can be mirrored to EndpointSlices per Endpoints subset. {} addresses were skipped",
                    self.addresses_skipped
                ),
            ));
        }
        events
    }
}

/// What must change for `existing` (the slices mirrored for `endpoints`) to mirror it.
pub(crate) fn plan(
    endpoints: &Endpoints,
    existing: &[Arc<EndpointSlice>],
    max_per_subset: usize,
) -> Plan {
    let mut desired = DesiredCalc::default();
    let mut plan = Plan::default();
    for subset in repack_subsets(endpoints.subsets.as_deref().unwrap_or_default()) {
        let keys = desired.init_ports(subset.ports.as_deref().unwrap_or_default());
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(|a| (a, false));
        let mut total = 0;
        let mut added = 0;
        for (address, is_ready) in ready.chain(not_ready) {
            total += 1;
            if added >= max_per_subset {
                continue;
            }
            if desired.add_address(address, &keys, is_ready) {
                added += 1;
            } else {
                plan.invalid_addresses.push(address.ip.clone());
            }
        }
        plan.addresses_skipped += total - added;
    }

    let existing_by_key = slices_by_key(existing);
    let DesiredCalc {
        ports_by_key,
        endpoints_by_key,
    } = desired;
    let wanted_keys: BTreeSet<AddrTypePortMapKey> = endpoints_by_key.keys().cloned().collect();
    for (key, desired_set) in endpoints_by_key {
        let existing = existing_by_key
            .get(&key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let ports = ports_by_key
            .get(&key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let wanted = desired_set.len();
        let (slices, totals) = reconcile_by_port_mapping(
            endpoints,
            existing,
            desired_set,
            ports,
            key.address_type(),
            max_per_subset,
        );
        plan.efficiency.insert(
            key,
            EfficiencyInfo {
                endpoints: wanted,
                slices: (existing.len() + slices.to_create.len())
                    .saturating_sub(slices.to_delete.len()),
            },
        );
        plan.slices.append(slices);
        plan.totals.add(totals);
    }
    // Groups no longer wanted lose all their slices.
    for (key, slices) in existing_by_key {
        if !wanted_keys.contains(&key) {
            plan.slices.to_delete.extend(slices);
        }
    }
    plan
}

/// The existing slices by group, each group's in name order (the first one is kept).
fn slices_by_key(
    existing: &[Arc<EndpointSlice>],
) -> BTreeMap<AddrTypePortMapKey, Vec<Arc<EndpointSlice>>> {
    let mut by_key: BTreeMap<AddrTypePortMapKey, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
    for slice in existing {
        let key = AddrTypePortMapKey::new(
            slice.ports.as_deref().unwrap_or_default(),
            &slice.address_type,
        );
        by_key.entry(key).or_default().push(slice.clone());
    }
    for slices in by_key.values_mut() {
        slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    by_key
}

/// One group's changes: the slices to write and the endpoint counts (upstream
/// `reconcileByPortMapping`).
fn reconcile_by_port_mapping(
    endpoints: &Endpoints,
    existing: &[Arc<EndpointSlice>],
    mut desired: EndpointSet,
    ports: &[EndpointPort],
    address_type: &str,
    max_per_subset: usize,
) -> (SlicesByAction, TotalsByAction) {
    let mut slices = SlicesByAction::default();
    let mut totals = TotalsByAction::default();
    if desired.is_empty() {
        slices.to_delete = existing.to_vec();
        totals.removed = existing.iter().map(|slice| slice.endpoints.len()).sum();
        return (slices, totals);
    }
    let kept = existing.first();
    match kept {
        None => totals.added = desired.len(),
        Some(first) => {
            slices.to_delete = existing[1..].to_vec();
            totals = total_changes(first, &desired);
            let labels = clone_and_remove_keys(
                first.metadata.labels.as_ref(),
                &[MANAGED_BY_LABEL, SERVICE_NAME_LABEL],
            );
            let unchanged = totals == TotalsByAction::default()
                && endpoints.labels().clone() == labels
                && mirrored_annotations(endpoints) == first.annotations().clone();
            if unchanged {
                return (slices, totals);
            }
        }
    }
    let name = kept.and_then(|slice| slice.metadata.name.as_deref());
    let mut slice = new_endpoint_slice(endpoints, ports, address_type, name);
    while slice.endpoints.len() < max_per_subset {
        let Some((_, endpoint)) = desired.pop_first() else {
            break;
        };
        slice.endpoints.push(endpoint);
    }
    if slice.metadata.name.is_some() {
        slices.to_update.push(slice);
    } else {
        slices.to_create.push(slice);
    }
    (slices, totals)
}

/// How many endpoints must be added, updated and removed for `existing` to hold exactly
/// `desired`.
pub(super) fn total_changes(existing: &EndpointSlice, desired: &EndpointSet) -> TotalsByAction {
    let mut totals = TotalsByAction::default();
    let mut matches = 0;
    for endpoint in &existing.endpoints {
        match desired.get(&EndpointKey::of(endpoint)) {
            None => totals.removed += 1,
            Some(wanted) => {
                matches += 1;
                if !endpoints_equal_beyond_key(wanted, endpoint) {
                    totals.updated += 1;
                }
            }
        }
    }
    totals.added = desired.len().saturating_sub(matches);
    totals
}

/// The reconciler's effects: events, metrics and writes.
pub(crate) struct Reconciler {
    pub(super) client: kube::Client,
    pub(super) tracker: Arc<EndpointSliceTracker>,
    pub(super) recorder: Recorder,
    pub(super) max_endpoints_per_subset: usize,
    pub(super) metrics: MirroringMetrics,
    pub(super) cache: MetricsCache,
}

impl Reconciler {
    /// Makes the slices mirrored for `endpoints` (`existing`) mirror it.
    pub(super) async fn reconcile(
        &self,
        endpoints: &Endpoints,
        existing: &[Arc<EndpointSlice>],
    ) -> anyhow::Result<()> {
        let plan = plan(endpoints, existing, self.max_endpoints_per_subset);
        let namespace = endpoints.namespace_str();
        let name = endpoints.name_str();
        for ip in &plan.invalid_addresses {
            info!(controller = super::NAME, endpoints = %format!("{namespace}/{name}"), ip = %ip, "address in Endpoints is not a valid IP; it will not be mirrored to an EndpointSlice");
        }
        self.metrics
            .addresses_skipped_per_sync
            .observe(plan.addresses_skipped as f64);
        for (reason, message) in plan.events(self.max_endpoints_per_subset) {
            if reason == TOO_MANY_ADDRESSES_TO_MIRROR {
                info!(controller = super::NAME, endpoints = %format!("{namespace}/{name}"), skipped = plan.addresses_skipped, "addresses in Endpoints were skipped for exceeding --mirroring-max-endpoints-per-subset");
            }
            self.recorder.event(endpoints, WARNING, reason, message);
        }
        self.metrics
            .endpoints_added_per_sync
            .observe(plan.totals.added as f64);
        self.metrics
            .endpoints_updated_per_sync
            .observe(plan.totals.updated as f64);
        self.metrics
            .endpoints_removed_per_sync
            .observe(plan.totals.removed as f64);
        self.cache
            .update_endpoint_port_cache(namespace, name, plan.efficiency);
        self.finalize(endpoints, plan.slices).await
    }

    /// Writes the slices: creates (not while the Endpoints is being deleted), updates,
    /// then deletes, each recorded in the tracker.
    async fn finalize(
        &self,
        endpoints: &Endpoints,
        mut slices: SlicesByAction,
    ) -> anyhow::Result<()> {
        recycle_slices(&mut slices);
        let namespace = endpoints.namespace_str();
        let name = endpoints.name_str();
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        if endpoints.metadata.deletion_timestamp.is_none() {
            for slice in &slices.to_create {
                match api.create(&PostParams::default(), slice).await {
                    Ok(created) => {
                        self.tracker.update(&created);
                        self.metrics.changes.inc("create");
                    }
                    // A terminating namespace takes no new slices: nothing to retry.
                    Err(error) if is_namespace_terminating(&error) => return Ok(()),
                    Err(error) => {
                        return Err(error).with_context(|| {
                            format!(
                                "failed to create EndpointSlice for Endpoints {namespace}/{name}"
                            )
                        })
                    }
                }
            }
        }
        for slice in &slices.to_update {
            let slice_name = slice.name_str();
            let updated = api
                .replace(slice_name, &PostParams::default(), slice)
                .await
                .with_context(|| {
                    format!(
                        "failed to update {slice_name} EndpointSlice for Endpoints {namespace}/{name}"
                    )
                })?;
            self.tracker.update(&updated);
            self.metrics.changes.inc("update");
        }
        for slice in &slices.to_delete {
            let slice_name = slice.name_str();
            api.delete(slice_name, &DeleteParams::default())
                .await
                .with_context(|| {
                    format!(
                        "failed to delete {slice_name} EndpointSlice for Endpoints {namespace}/{name}"
                    )
                })?;
            self.tracker.expect_deletion(slice);
            self.metrics.changes.inc("delete");
        }
        Ok(())
    }

    /// Deletes every slice mirrored for the Endpoints `namespace/name` and forgets it in
    /// the metrics; every deletion is tried, the first error reported.
    pub(super) async fn delete_endpoints(
        &self,
        namespace: &str,
        name: &str,
        slices: &[Arc<EndpointSlice>],
    ) -> anyhow::Result<()> {
        self.cache.delete_endpoints(namespace, name);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        let mut errors = Vec::new();
        for slice in slices {
            let slice_name = slice.name_str();
            if let Err(error) = api.delete(slice_name, &DeleteParams::default()).await {
                errors.push(error);
            }
        }
        let failed = errors.len();
        match errors.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(anyhow::Error::new(first).context(format!(
                "error(s) deleting {failed}/{} EndpointSlices for {namespace}/{name} Endpoints, including",
                slices.len()
            ))),
        }
    }
}
