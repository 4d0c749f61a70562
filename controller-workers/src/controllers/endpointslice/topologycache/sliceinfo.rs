//! The slices of one address type of a Service as a sync is about to leave them
//! (upstream `sliceinfo.go`): those to create, to update, and those unchanged.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::utils::{hints_by_zone, num_ready_endpoints};
use super::{Allocation, EndpointZoneInfo};

pub(crate) struct SliceInfo {
    pub(crate) service_key: String,
    pub(crate) address_type: String,
    pub(crate) to_create: Vec<EndpointSlice>,
    pub(crate) to_update: Vec<EndpointSlice>,
    pub(crate) unchanged: Vec<EndpointSlice>,
}

impl SliceInfo {
    /// The ready endpoints of all its slices.
    pub(super) fn total_ready_endpoints(&self) -> usize {
        self.to_create
            .iter()
            .chain(&self.to_update)
            .chain(&self.unchanged)
            .map(|slice| num_ready_endpoints(&slice.endpoints))
            .sum()
    }

    /// The hints the unchanged slices already give each zone. An unchanged slice whose
    /// hints no longer fit (a ready endpoint without one, a zone that gets none now, more
    /// than a zone's maximum) moves to the updates, to be given new ones.
    pub(super) fn allocated_hints_by_zone(
        &mut self,
        allocations: &BTreeMap<String, Allocation>,
    ) -> EndpointZoneInfo {
        let mut allocated = EndpointZoneInfo::new();
        let mut still_unchanged = Vec::with_capacity(self.unchanged.len());
        for slice in std::mem::take(&mut self.unchanged) {
            match hints_by_zone(&slice, &allocated, allocations) {
                None => self.to_update.push(slice),
                Some(hints) => {
                    for (zone, count) in hints {
                        *allocated.entry(zone).or_default() += count;
                    }
                    still_unchanged.push(slice);
                }
            }
        }
        self.unchanged = still_unchanged;
        allocated
    }
}
