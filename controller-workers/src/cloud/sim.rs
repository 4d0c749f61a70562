//! `--cloud-provider=sim`: the simulated cloud of the development cluster (an rkcm
//! extension; KCM would refuse the name). It keeps no state the cluster does not show,
//! except the route table:
//!
//! - load balancers: a `type: LoadBalancer` Service's balancer gets the ingress IP
//!   `198.51.100.<n>` (TEST-NET-2), `n` from a hash of the Service's namespace and name; it
//!   exists while the Service's status shows that IP. The Service annotation
//!   [`LB_ERROR`] makes every call for it fail with the annotation's value.
//! - instances: a Node's instance exists unless the Node is annotated
//!   [`INSTANCE`]`: terminated`, and is shut down when annotated `stopped`; its providerID
//!   is `node-sim://<name>` (what node-sim registers nodes with).
//! - routes: an in-memory table of this process (lost on restart, which the route
//!   controller repairs at its next pass), shown as the gauge
//!   `rkcm_sim_cloud_route{node,destination_cidr}`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::{self, BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::ResourceExt;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{
    CloudError, CloudProvider, CloudResult, InstanceMetadata, InstancesV2, LoadBalancer, Route,
    Routes,
};
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::metrics::{Labels, Metrics};

pub const NAME: &str = "sim";
/// Service annotation: every load-balancer call for the Service fails with its value.
pub const LB_ERROR: &str = "sim.rkcm.io/lb-error";
/// Node annotation: `terminated` (the instance no longer exists) or `stopped` (shut down).
pub const INSTANCE: &str = "sim.rkcm.io/instance";
/// The providerID scheme of node-sim's nodes.
pub const PROVIDER_ID_PREFIX: &str = "node-sim://";
const ROUTE_METRIC: &str = "rkcm_sim_cloud_route";

/// The simulated cloud.
#[derive(Default)]
pub struct SimCloud {
    /// Routes by name.
    routes: Mutex<BTreeMap<String, Route>>,
}

/// The route table as a gauge (one provider per process, so one family).
fn route_gauge() -> &'static Family<Labels, Gauge> {
    static GAUGE: OnceLock<Family<Labels, Gauge>> = OnceLock::new();
    GAUGE.get_or_init(Family::default)
}

pub fn factory(_config: Option<&str>) -> anyhow::Result<Arc<dyn CloudProvider>> {
    Ok(Arc::new(SimCloud::default()))
}

/// Shows the route table in `metrics` (once per registry).
pub fn register_route_metric(cloud: &dyn CloudProvider, metrics: &Metrics) {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    if cloud.name() != NAME {
        return;
    }
    REGISTERED.get_or_init(|| {
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.register(
            ROUTE_METRIC,
            "Routes of the simulated cloud (rkcm's sim provider): 1 per route, by target node and destination CIDR",
            route_gauge().clone(),
        );
    });
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The ingress IP of a Service's balancer: FNV-1a of `namespace/name` into 1..=254.
pub fn ingress_ip(service: &Service) -> String {
    let key = format!("{}/{}", service.namespace_str(), service.name_str());
    let hash = key.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    format!("198.51.100.{}", hash % 254 + 1)
}

fn lb_error(service: &Service) -> CloudResult<()> {
    match annotation(&service.metadata, LB_ERROR) {
        Some(message) => Err(CloudError::Other(message.to_string())),
        None => Ok(()),
    }
}

fn status_for(service: &Service) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ingress_ip(service)),
            ..Default::default()
        }]),
    }
}

/// Whether the Service's status shows its balancer.
fn shows_balancer(service: &Service) -> bool {
    let ip = ingress_ip(service);
    service
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|ingress| ingress.iter().any(|i| i.ip.as_deref() == Some(ip.as_str())))
}

fn ready<'a, T: Send + 'a>(value: CloudResult<T>) -> BoxFuture<'a, CloudResult<T>> {
    future::ready(value).boxed()
}

impl CloudProvider for SimCloud {
    fn name(&self) -> &str {
        NAME
    }
    fn has_cluster_id(&self) -> bool {
        true
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
}

impl LoadBalancer for SimCloud {
    fn get_load_balancer<'a>(
        &'a self,
        _cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, CloudResult<Option<LoadBalancerStatus>>> {
        ready(Ok(shows_balancer(service).then(|| status_for(service))))
    }

    fn get_load_balancer_name(&self, _cluster: &str, service: &Service) -> String {
        // Upstream's default name: "a" and the UID without dashes, at most 32 characters.
        let uid = service
            .metadata
            .uid
            .as_deref()
            .unwrap_or_default()
            .replace('-', "");
        let mut name = format!("a{uid}");
        name.truncate(32);
        name
    }

    fn ensure_load_balancer<'a>(
        &'a self,
        _cluster: &'a str,
        service: &'a Service,
        _nodes: &'a [Arc<Node>],
    ) -> BoxFuture<'a, CloudResult<LoadBalancerStatus>> {
        ready(lb_error(service).map(|()| status_for(service)))
    }

    fn update_load_balancer<'a>(
        &'a self,
        _cluster: &'a str,
        service: &'a Service,
        _nodes: &'a [Arc<Node>],
    ) -> BoxFuture<'a, CloudResult<()>> {
        ready(lb_error(service))
    }

    fn ensure_load_balancer_deleted<'a>(
        &'a self,
        _cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, CloudResult<()>> {
        ready(lb_error(service))
    }
}

fn route_labels(route: &Route) -> Labels {
    vec![
        ("node".to_string(), route.target_node.clone()),
        (
            "destination_cidr".to_string(),
            route.destination_cidr.clone(),
        ),
    ]
}

impl SimCloud {
    fn insert_route(&self, name: String, route: Route) {
        route_gauge().get_or_create(&route_labels(&route)).set(1);
        lock(&self.routes).insert(name, route);
    }

    fn remove_route(&self, name: &str) {
        if let Some(route) = lock(&self.routes).remove(name) {
            route_gauge().remove(&route_labels(&route));
        }
    }
}

impl Routes for SimCloud {
    fn list_routes<'a>(&'a self, _cluster: &'a str) -> BoxFuture<'a, CloudResult<Vec<Route>>> {
        ready(Ok(lock(&self.routes).values().cloned().collect()))
    }

    fn create_route<'a>(
        &'a self,
        cluster: &'a str,
        name_hint: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, CloudResult<()>> {
        let name = format!("{cluster}-{name_hint}-{}", route.destination_cidr);
        let mut stored = route.clone();
        stored.name = name.clone();
        self.insert_route(name, stored);
        ready(Ok(()))
    }

    fn delete_route<'a>(
        &'a self,
        _cluster: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, CloudResult<()>> {
        self.remove_route(&route.name);
        ready(Ok(()))
    }
}

impl InstancesV2 for SimCloud {
    fn instance_exists<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, CloudResult<bool>> {
        ready(Ok(
            annotation(&node.metadata, INSTANCE) != Some("terminated")
        ))
    }

    fn instance_shutdown<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, CloudResult<bool>> {
        ready(Ok(annotation(&node.metadata, INSTANCE) == Some("stopped")))
    }

    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
    ) -> BoxFuture<'a, CloudResult<InstanceMetadata>> {
        if annotation(&node.metadata, INSTANCE) == Some("terminated") {
            return ready(Err(CloudError::InstanceNotFound));
        }
        let name = node.name_str().to_string();
        let label = |key: &str| node.labels().get(key).cloned().unwrap_or_default();
        ready(Ok(InstanceMetadata {
            provider_id: node
                .spec
                .as_ref()
                .and_then(|spec| spec.provider_id.clone())
                .unwrap_or_else(|| format!("{PROVIDER_ID_PREFIX}{name}")),
            instance_type: "sim".into(),
            node_addresses: node
                .status
                .as_ref()
                .and_then(|status| status.addresses.clone())
                .unwrap_or_default(),
            zone: label("topology.kubernetes.io/zone"),
            region: label("topology.kubernetes.io/region"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(annotations: serde_json::Value, ingress: Option<&str>) -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web", "uid": "1234-5678", "annotations": annotations},
            "status": {"loadBalancer": {"ingress": ingress.map(|ip| vec![json!({"ip": ip})])}},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn balancers_follow_the_service() {
        let cloud = SimCloud::default();
        let plain = service(json!({}), None);
        let ip = ingress_ip(&plain);
        assert!(ip.starts_with("198.51.100."));
        assert_eq!(ip, ingress_ip(&service(json!({}), None)), "stable");
        assert_eq!(cloud.get_load_balancer("c", &plain).await, Ok(None));
        let status = cloud.ensure_load_balancer("c", &plain, &[]).await.unwrap();
        assert_eq!(status, status_for(&plain));
        let shown = service(json!({}), Some(&ip));
        assert_eq!(cloud.get_load_balancer("c", &shown).await, Ok(Some(status)));
        let failing = service(json!({LB_ERROR: "boom"}), None);
        assert_eq!(
            cloud.ensure_load_balancer("c", &failing, &[]).await,
            Err(CloudError::Other("boom".into()))
        );
        assert_eq!(cloud.get_load_balancer_name("c", &plain), "a12345678");
    }

    #[tokio::test]
    async fn instances_follow_the_node_annotation() {
        let cloud = SimCloud::default();
        let node = |value: Option<&str>| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": value.map(|v| json!({INSTANCE: v}))}}))
                .unwrap()
        };
        assert_eq!(cloud.instance_exists(&node(None)).await, Ok(true));
        assert_eq!(cloud.instance_shutdown(&node(None)).await, Ok(false));
        assert_eq!(
            cloud.instance_exists(&node(Some("terminated"))).await,
            Ok(false)
        );
        assert_eq!(
            cloud.instance_shutdown(&node(Some("stopped"))).await,
            Ok(true)
        );
        assert_eq!(
            cloud
                .instance_metadata(&node(None))
                .await
                .unwrap()
                .provider_id,
            "node-sim://n1"
        );
    }

    #[tokio::test]
    async fn the_route_table_keeps_what_was_created() {
        let cloud = SimCloud::default();
        let route = Route {
            target_node: "n1".into(),
            destination_cidr: "10.244.0.0/24".into(),
            ..Default::default()
        };
        cloud.create_route("k", "uid1", &route).await.unwrap();
        let listed = cloud.list_routes("k").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "k-uid1-10.244.0.0/24");
        cloud.delete_route("k", &listed[0]).await.unwrap();
        assert!(cloud.list_routes("k").await.unwrap().is_empty());
    }
}
