//! The events csi-sim's sidecars post, each as its own component.

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::Csi;

impl Csi {
    pub(super) async fn claim_event(
        &self,
        claim: &PersistentVolumeClaim,
        driver: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let component = self.provisioner_component(driver);
        self.object_event(claim_reference(claim), &component, type_, reason, message)
            .await;
    }

    pub(super) async fn object_event(
        &self,
        involved: Value,
        component: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        if !self.shared.config.events {
            return;
        }
        if let Err(e) = post_event(
            &self.shared.client,
            involved,
            component,
            type_,
            reason,
            message,
        )
        .await
        {
            tracing::debug!(reason, error = %e, "cannot post a csi-sim event");
        }
    }
}

pub(super) fn claim_reference(claim: &PersistentVolumeClaim) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "namespace": claim.namespace(), "name": claim.name_any(),
        "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version})
}

/// Posts a core/v1 Event about `involved` (an ObjectReference) as `component`, in the
/// object's namespace (`default` for cluster-scoped objects).
async fn post_event(
    client: &kube::Client,
    involved: Value,
    component: &str,
    type_: &str,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let ns = involved
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default")
        .to_string();
    let name = involved
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let now = Time(crate::nodesim::now_seconds());
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.{:x}", rand::random::<u64>()), "namespace": ns},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": type_,
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<Event>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &event)
        .await?;
    Ok(())
}
