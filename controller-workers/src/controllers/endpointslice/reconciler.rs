//! The reconciler's effects (upstream `staging/src/k8s.io/endpointslice/reconciler.go`,
//! `Reconcile` and `finalize`): per address type of the Service, the plan of
//! [`super::packing`] is written: creates first (none while the Service is being
//! deleted, so the garbage collector is not raced), then updates, then deletes, each
//! recorded in the slice tracker; a slice about to be deleted while another is created is
//! recycled instead (updated under its name). Slices of a family the Service no longer
//! has are deleted last. Errors are gathered, as upstream aggregates them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use tracing::info;

use crate::api_errors::{is_namespace_terminating, message};
use crate::meta::ResourceNames;

use super::packing::Planner;
use super::utils::{
    add_trigger_time_annotation, address_types_for_service, hints_enabled, owned_by,
    service_controller_key,
};
use super::{Controller, CONTROLLER_NAME};

impl Controller {
    /// Creates, updates and deletes the Service's slices so they hold the endpoints of
    /// `pods`; `existing` are its managed slices, as the store shows them.
    pub(super) async fn reconcile(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: Vec<Arc<EndpointSlice>>,
        trigger_time: Option<Timestamp>,
    ) -> anyhow::Result<()> {
        let namespace = service.namespace_str();
        let name = service.name_str();
        let supported = address_types_for_service(service);
        let mut errors = Errors::default();

        let mut unsupported = Vec::new();
        let mut by_type: std::collections::BTreeMap<&str, Vec<Arc<EndpointSlice>>> =
            supported.iter().map(|t| (*t, Vec::new())).collect();
        for slice in existing {
            match by_type.get_mut(slice.address_type.as_str()) {
                Some(slices) => slices.push(slice),
                None => {
                    if let Some(topology) = &self.topology {
                        match service_controller_key(&slice) {
                            Ok(key) => topology.remove_hints(&key, &slice.address_type),
                            Err(error) => {
                                info!(slice = ?slice.metadata.name, %error, "couldn't get key to remove EndpointSlice from topology cache")
                            }
                        }
                    }
                    unsupported.push(slice);
                }
            }
        }

        let planner = Planner {
            nodes: &self.nodes,
            max_endpoints_per_slice: self.max_endpoints_per_slice,
            topology: self.topology.as_ref(),
            controller_name: CONTROLLER_NAME,
        };
        for (address_type, slices) in &by_type {
            let plan = planner.plan_address_type(service, pods, slices, address_type);
            self.metrics
                .endpoints_added_and_removed(plan.added, plan.removed);
            self.port_cache
                .update_service(namespace, name, plan.port_cache);
            errors.messages(plan.errors);
            if let Err(error) = self
                .finalize(
                    service,
                    plan.to_create,
                    plan.to_update,
                    plan.to_delete,
                    trigger_time,
                )
                .await
            {
                errors.push(error);
            }
            for event in plan.events {
                self.recorder
                    .event(service, event.event_type, event.reason, event.message);
            }
        }

        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        for slice in unsupported {
            let slice_name = slice.name_str();
            match api.delete(slice_name, &DeleteParams::default()).await {
                Ok(_) => {
                    self.tracker.expect_deletion(&slice);
                    self.metrics.change("delete");
                }
                Err(error) => {
                    let text = format!(
                        "error deleting {slice_name} EndpointSlice for Service {namespace}/{name}: {}",
                        message(&error)
                    );
                    errors.push(anyhow::Error::new(error).context(text));
                }
            }
        }
        errors.into_result()
    }

    /// Writes one address type's slices: creates, updates, deletes.
    async fn finalize(
        &self,
        service: &Service,
        mut to_create: Vec<EndpointSlice>,
        mut to_update: Vec<EndpointSlice>,
        mut to_delete: Vec<EndpointSlice>,
        trigger_time: Option<Timestamp>,
    ) -> anyhow::Result<()> {
        let namespace = service.namespace_str();
        let name = service.name_str();
        recycle(service, &mut to_create, &mut to_update, &mut to_delete);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);

        if service.metadata.deletion_timestamp.is_none() {
            for slice in &mut to_create {
                add_trigger_time_annotation(slice, trigger_time);
                match api.create(&PostParams::default(), slice).await {
                    Ok(created) => {
                        self.tracker.update(&created);
                        self.metrics.change("create");
                    }
                    // The namespace is going away: its content goes with it.
                    Err(error) if is_namespace_terminating(&error) => return Ok(()),
                    Err(error) => {
                        let text = format!(
                            "failed to create EndpointSlice for Service {namespace}/{name}: {}",
                            message(&error)
                        );
                        return Err(anyhow::Error::new(error).context(text));
                    }
                }
            }
        }

        for slice in &mut to_update {
            add_trigger_time_annotation(slice, trigger_time);
            let slice_name = slice.name_str().to_string();
            match api
                .replace(&slice_name, &PostParams::default(), slice)
                .await
            {
                Ok(updated) => {
                    self.tracker.update(&updated);
                    self.metrics.change("update");
                }
                Err(error) => {
                    let text = format!(
                        "failed to update {slice_name} EndpointSlice for Service {namespace}/{name}: {}",
                        message(&error)
                    );
                    return Err(anyhow::Error::new(error).context(text));
                }
            }
        }

        for slice in &to_delete {
            let slice_name = slice.name_str().to_string();
            if let Err(error) = api.delete(&slice_name, &DeleteParams::default()).await {
                let text = format!(
                    "failed to delete {slice_name} EndpointSlice for Service {namespace}/{name}: {}",
                    message(&error)
                );
                return Err(anyhow::Error::new(error).context(text));
            }
            self.tracker.expect_deletion(slice);
            self.metrics.change("delete");
        }

        let topology =
            if self.topology.is_some() && hints_enabled(service.metadata.annotations.as_ref()) {
                "Auto"
            } else {
                "Disabled"
            };
        self.metrics.slices_changed(
            topology,
            to_create.len() + to_update.len() + to_delete.len(),
        );
        Ok(())
    }
}

/// Turns creates into updates of slices that would otherwise be deleted: the last slice
/// to create takes the name of a slice to delete of the same address type that this
/// Service owns (never one an older Service of the same name owns, which the garbage
/// collector may be deleting).
pub(super) fn recycle(
    service: &Service,
    to_create: &mut Vec<EndpointSlice>,
    to_update: &mut Vec<EndpointSlice>,
    to_delete: &mut Vec<EndpointSlice>,
) {
    let mut index = 0;
    while index < to_delete.len() {
        let Some(last) = to_create.last() else {
            break;
        };
        let candidate = &to_delete[index];
        if candidate.address_type == last.address_type && owned_by(candidate, service) {
            let recycled = to_delete.remove(index);
            if let Some(mut slice) = to_create.pop() {
                slice.metadata.name = recycled.metadata.name;
                to_update.push(slice);
            }
        } else {
            index += 1;
        }
    }
}

/// A sync's errors, reported as upstream's aggregate: one error as it is, several as
/// `[first, second]` (repeated messages once).
#[derive(Default)]
struct Errors(Vec<anyhow::Error>);

impl Errors {
    fn push(&mut self, error: anyhow::Error) {
        self.0.push(error);
    }

    fn messages(&mut self, messages: Vec<String>) {
        self.0.extend(messages.into_iter().map(anyhow::Error::msg));
    }

    fn into_result(mut self) -> anyhow::Result<()> {
        match self.0.len() {
            0 => Ok(()),
            1 => Err(self.0.remove(0)),
            _ => {
                let mut seen: Vec<String> = Vec::new();
                for error in &self.0 {
                    let text = error.to_string();
                    if !seen.contains(&text) {
                        seen.push(text);
                    }
                }
                if seen.len() == 1 {
                    Err(anyhow::Error::msg(seen.remove(0)))
                } else {
                    Err(anyhow::Error::msg(format!("[{}]", seen.join(", "))))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_aggregate_as_upstreams() {
        assert!(Errors::default().into_result().is_ok());
        let mut one = Errors::default();
        one.push(anyhow::anyhow!("first"));
        assert_eq!(one.into_result().unwrap_err().to_string(), "first");
        let mut many = Errors::default();
        many.messages(vec!["a".into(), "b".into(), "a".into()]);
        assert_eq!(many.into_result().unwrap_err().to_string(), "[a, b]");
        let mut same = Errors::default();
        same.messages(vec!["a".into(), "a".into()]);
        assert_eq!(same.into_result().unwrap_err().to_string(), "a");
    }
}
