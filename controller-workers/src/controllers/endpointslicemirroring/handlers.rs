//! Which changes put an Endpoints key (`namespace/name`) on the mirroring queue
//! (upstream's event handlers): Endpoints that may be mirrored (before or after the
//! change); Services without a selector when added or deleted, and Services whose
//! selector comes or goes; slices of this controller that someone else changed or
//! deleted.

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tracing::{info, trace, warn};

use crate::endpointutil::service_selector;
use crate::informer::Change;
use crate::store::key_of;

use super::helpers::{
    endpoints_key_for_slice, managed_by_changed, managed_by_controller, service_name_of,
    should_mirror,
};
use super::{Controller, NAME};

impl Controller {
    fn queue_key_of(&self, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
        self.queue.add(key_of(meta));
    }

    pub(super) fn on_endpoints(&self, change: &Change<Endpoints>) {
        let wanted = match change {
            Change::Added(endpoints) => should_mirror(endpoints),
            Change::Updated { old, new } => should_mirror(new) || should_mirror(old),
            Change::Deleted(deleted) => should_mirror(deleted.object()),
        };
        let endpoints = change.latest();
        if wanted {
            self.queue_key_of(&endpoints.metadata);
        } else {
            trace!(controller = NAME, endpoints = %key_of(&endpoints.metadata), "skipping mirroring");
        }
    }

    pub(super) fn on_service(&self, change: &Change<Service>) {
        let wanted = match change {
            Change::Added(service) => service_selector(service).is_none(),
            Change::Updated { old, new } => {
                service_selector(new).is_none() != service_selector(old).is_none()
            }
            Change::Deleted(deleted) => service_selector(deleted.object()).is_none(),
        };
        if wanted {
            self.queue_key_of(&change.latest().metadata);
        }
    }

    pub(super) fn on_endpoint_slice(&self, change: &Change<EndpointSlice>) {
        match change {
            Change::Added(slice) => {
                if managed_by_controller(slice) && self.tracker.should_sync(slice) {
                    self.queue_endpoints_for_slice(slice);
                }
            }
            Change::Updated { old, new } => {
                if service_name_of(old) != service_name_of(new) {
                    info!(controller = NAME, slice = %key_of(&new.metadata), old = ?service_name_of(old), new = ?service_name_of(new), "kubernetes.io/service-name label changed");
                    self.queue_endpoints_for_slice(old);
                    self.queue_endpoints_for_slice(new);
                    return;
                }
                // Upstream hands this handler its two objects the other way round, so
                // the tracker is asked about the previous state: an edit of a mirrored
                // slice by someone else is not undone until the Endpoints changes.
                if managed_by_changed(old, new)
                    || (managed_by_controller(old) && self.tracker.should_sync(old))
                {
                    self.queue_endpoints_for_slice(old);
                }
            }
            Change::Deleted(deleted) => {
                let slice = deleted.object();
                // A deletion the controller did not make is undone.
                if managed_by_controller(slice)
                    && self.tracker.has(slice)
                    && !self.tracker.handle_deletion(slice)
                {
                    self.queue_endpoints_for_slice(slice);
                }
            }
        }
    }

    /// Queues the Endpoints a slice mirrors, after the batch period.
    fn queue_endpoints_for_slice(&self, slice: &EndpointSlice) {
        match endpoints_key_for_slice(slice) {
            Ok(key) => self.queue.add_after(key, self.batch_period),
            Err(error) => {
                warn!(controller = NAME, slice = %key_of(&slice.metadata), %error, "cannot tell which Endpoints the EndpointSlice mirrors")
            }
        }
    }
}
