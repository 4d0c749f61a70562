//! Which Services a change concerns (upstream's event handlers): Services are queued by
//! their own changes (registered in `build`); pods queue the Services that select them,
//! after the batch period; slices this controller manages queue their Service when
//! someone else changed or deleted them; Nodes, when their readiness or zone changes,
//! update the zones' CPU shares and queue the Services whose hints they overload.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use tracing::{debug, info, warn};

use crate::endpointutil::{
    pod_service_memberships, services_to_update_on_pod_change, SERVICE_NAME_LABEL,
};
use crate::informer::Change;

use super::topologycache::is_node_ready;
use super::utils::{managed_by, service_controller_key, ZONE_LABEL};
use super::{Controller, CONTROLLER_NAME, NAME, SLICE_CHANGE_MIN_SYNC_DELAY};

impl Controller {
    pub(super) fn on_pod(&self, change: &Change<Pod>) {
        let services = match change {
            Change::Added(pod) => pod_service_memberships(&self.services, pod),
            Change::Updated { old, new } => {
                services_to_update_on_pod_change(&self.services, old, new)
            }
            // The Services it belonged to, from its last state.
            Change::Deleted(deleted) => pod_service_memberships(&self.services, deleted.object()),
        };
        for key in services {
            self.queue.add_after(key, self.batch_period);
        }
    }

    pub(super) fn on_endpoint_slice(&self, change: &Change<EndpointSlice>) {
        match change {
            Change::Added(slice) => {
                if is_managed(slice) && self.tracker.should_sync(slice) {
                    self.queue_service_for_slice(slice);
                }
            }
            Change::Updated { old, new } => {
                // The generation does not change with labels: a slice moved to another
                // Service must still sync both.
                let service_name = |slice: &EndpointSlice| {
                    slice
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|labels| labels.get(SERVICE_NAME_LABEL))
                        .cloned()
                        .unwrap_or_default()
                };
                let (before, after) = (service_name(old), service_name(new));
                if before != after {
                    info!(controller = NAME, label = SERVICE_NAME_LABEL, old_service = %before, new_service = %after, slice = ?new.metadata.name, "label changed");
                    self.queue_service_for_slice(new);
                    self.queue_service_for_slice(old);
                    return;
                }
                if is_managed(old) != is_managed(new)
                    || (is_managed(new) && self.tracker.should_sync(new))
                {
                    self.queue_service_for_slice(new);
                }
            }
            Change::Deleted(deleted) => {
                let slice = deleted.object();
                // Only an unexpected deletion of a slice it wrote needs undoing.
                if is_managed(slice)
                    && self.tracker.has(slice)
                    && !self.tracker.handle_deletion(slice)
                {
                    self.queue_service_for_slice(slice);
                }
            }
        }
    }

    /// Queues the slice's Service after at least a second, so changes to several of its
    /// slices are handled by one sync.
    fn queue_service_for_slice(&self, slice: &EndpointSlice) {
        match service_controller_key(slice) {
            Ok(key) => {
                let delay: Duration = SLICE_CHANGE_MIN_SYNC_DELAY.max(self.batch_period);
                self.queue.add_after(key, delay);
            }
            Err(error) => {
                warn!(controller = NAME, slice = ?slice.metadata.name, namespace = ?slice.metadata.namespace, %error, "couldn't get the Service of an EndpointSlice")
            }
        }
    }

    pub(super) fn on_node(&self, change: &Change<Node>) {
        match change {
            Change::Added(_) | Change::Deleted(_) => self.check_node_topology_distribution(),
            Change::Updated { old, new } => {
                // The zone label may come later than the Node (cloud providers set it).
                if is_node_ready(old) != is_node_ready(new) || zone(old) != zone(new) {
                    self.check_node_topology_distribution();
                }
            }
        }
    }

    /// Updates the zones' CPU shares and queues the Services whose hints now overload
    /// some zone.
    fn check_node_topology_distribution(&self) {
        let Some(topology) = &self.topology else {
            return;
        };
        let nodes = self.nodes.list();
        topology.set_nodes(&nodes);
        for key in topology.overloaded_services() {
            debug!(controller = NAME, key = %key, "queuing Service after Node change due to overloading");
            self.queue.add(key);
        }
    }
}

fn is_managed(slice: &EndpointSlice) -> bool {
    managed_by(slice) == Some(CONTROLLER_NAME)
}

fn zone(node: &Node) -> &str {
    node.labels().get(ZONE_LABEL).map_or("", String::as_str)
}
