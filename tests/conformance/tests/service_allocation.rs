//! What kube-apiserver 1.29 allocates for Services: node ports from
//! `--service-node-port-range` (refusing a requested port that is taken or out of range,
//! with the allocator's messages), released on deletion and on a change back to
//! ClusterIP, kept by updates that leave them out; the health-check node port of a
//! LoadBalancer with `externalTrafficPolicy: Local`; none with
//! `allocateLoadBalancerNodePorts: false`; and under `MultiCIDRServiceAllocator` the
//! `IPAddress` object of each cluster IP. Against a real cluster (`RKCM_TEST_KUBECONFIG`)
//! the node-port range is taken to be the default 30000-32767, and the IPAddress test
//! skips when `networking.k8s.io/v1alpha1` is not served.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use rand::Rng;
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::{json, Value};

const NETWORKING_ALPHA: &str = "networking.k8s.io/v1alpha1";
const RANGE: (i64, i64) = (30000, 32767);

fn service(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap_or_default()
}

fn as_json(s: &Service) -> Value {
    serde_json::to_value(s).unwrap_or_default()
}

fn node_ports(s: &Service) -> Vec<i64> {
    as_json(s)["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_i64())
        .collect()
}

fn in_range(port: i64) -> bool {
    (RANGE.0..=RANGE.1).contains(&port)
}

/// A port of the range unlikely to be taken on a shared cluster.
fn random_port() -> i64 {
    RANGE.0 + 200 + rand::rng().random_range(0..2000)
}

fn nodeport(name: &str, node_port: i64) -> Service {
    service(
        name,
        json!({"type": "NodePort", "selector": {"app": name},
               "ports": [{"port": 80, "nodePort": node_port}]}),
    )
}

/// The 422 message of a create, or the created Service's failure to be refused.
async fn refusal(api: &Api<Service>, svc: &Service) -> (u16, String) {
    match api.create(&PostParams::default(), svc).await {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn create(api: &Api<Service>, svc: &Service) -> Service {
    match api.create(&PostParams::default(), svc).await {
        Ok(s) => s,
        Err(e) => panic!("create {:?}: {e}", svc.metadata.name),
    }
}

#[tokio::test]
async fn node_ports_are_allocated_in_range_and_refused_when_taken_or_out_of_range() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("svc-alloc").await.unwrap();
    let api: Api<Service> = Api::namespaced(c.client.clone(), &ns);

    let two = create(
        &api,
        &service(
            "two",
            json!({"type": "NodePort", "selector": {"app": "two"},
                   "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}),
        ),
    )
    .await;
    let ports = node_ports(&two);
    assert_eq!(ports.len(), 2, "{:?}", as_json(&two));
    assert!(ports.iter().all(|p| in_range(*p)), "{ports:?}");
    assert_ne!(ports[0], ports[1]);

    let port = random_port();
    let first = create(&api, &nodeport("first", port)).await;
    assert_eq!(node_ports(&first), vec![port]);
    assert_eq!(
        refusal(&api, &nodeport("second", port)).await,
        (
            422,
            format!("Service \"second\" is invalid: spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated")
        )
    );
    assert_eq!(
        refusal(&api, &nodeport("second", 80)).await,
        (
            422,
            format!(
                "Service \"second\" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is {}-{}",
                RANGE.0, RANGE.1
            )
        )
    );

    // Deleting the Service frees its port for the next one that asks.
    api.delete("first", &DeleteParams::default()).await.unwrap();
    let second = wait_for(
        "the deleted Service's node port free again",
        Duration::from_secs(20),
        || async {
            Ok(api
                .create(&PostParams::default(), &nodeport("second", port))
                .await
                .ok())
        },
    )
    .await
    .unwrap();
    assert_eq!(node_ports(&second), vec![port]);
    c.cleanup().await;
}

#[tokio::test]
async fn updates_keep_node_ports_and_a_change_to_cluster_ip_releases_them() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("svc-alloc").await.unwrap();
    let api: Api<Service> = Api::namespaced(c.client.clone(), &ns);
    let port = random_port();
    let svc = create(&api, &nodeport("kept", port)).await;

    // A replace that leaves the node port out keeps it.
    let mut body = as_json(&svc);
    if let Some(p) = body["spec"]["ports"][0].as_object_mut() {
        p.remove("nodePort");
    }
    body["metadata"]["labels"] = json!({"changed": "yes"});
    let body: Service = serde_json::from_value(body).unwrap();
    let replaced = api
        .replace("kept", &PostParams::default(), &body)
        .await
        .unwrap();
    assert_eq!(node_ports(&replaced), vec![port]);

    // Back to ClusterIP: the node port goes from the Service and from the allocator.
    let patch = json!({"spec": {"type": "ClusterIP"}});
    let back = api
        .patch("kept", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(node_ports(&back), Vec::<i64>::new(), "{:?}", as_json(&back));
    let again = create(&api, &nodeport("again", port)).await;
    assert_eq!(node_ports(&again), vec![port]);
    c.cleanup().await;
}

#[tokio::test]
async fn load_balancers_get_node_ports_and_a_health_check_port_as_asked() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("svc-alloc").await.unwrap();
    let api: Api<Service> = Api::namespaced(c.client.clone(), &ns);
    let local = create(
        &api,
        &service(
            "local",
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                   "selector": {"app": "local"}, "ports": [{"port": 80}]}),
        ),
    )
    .await;
    let hc = as_json(&local)["spec"]["healthCheckNodePort"]
        .as_i64()
        .unwrap_or(0);
    assert!(in_range(hc), "{:?}", as_json(&local));
    let ports = node_ports(&local);
    assert_eq!(ports.len(), 1);
    assert!(in_range(ports[0]) && ports[0] != hc, "{ports:?} {hc}");

    let none = create(
        &api,
        &service(
            "none",
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                   "selector": {"app": "none"}, "ports": [{"port": 80}]}),
        ),
    )
    .await;
    assert_eq!(node_ports(&none), Vec::<i64>::new(), "{:?}", as_json(&none));
    assert!(as_json(&none)["spec"]["healthCheckNodePort"].is_null());

    // Cluster traffic policy: the health-check port is released (and dropped).
    let patch = json!({"spec": {"externalTrafficPolicy": "Cluster"}});
    let cluster = api
        .patch("local", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert!(
        as_json(&cluster)["spec"]["healthCheckNodePort"].is_null(),
        "{:?}",
        as_json(&cluster)
    );
    let reuse = create(
        &api,
        &service(
            "reuse",
            json!({"type": "NodePort", "selector": {"app": "reuse"},
                   "ports": [{"port": 80, "nodePort": hc}]}),
        ),
    )
    .await;
    assert_eq!(node_ports(&reuse), vec![hc]);
    c.cleanup().await;
}

#[tokio::test]
async fn cluster_ips_get_ip_address_objects_under_multi_cidr_service_allocator() {
    let c = TestCluster::start_with_config(kube_sim::Config {
        runtime_config: format!("{NETWORKING_ALPHA}=true"),
        feature_gates: "MultiCIDRServiceAllocator=true".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    if !c.serves(NETWORKING_ALPHA).await {
        println!("skipped: the cluster does not serve {NETWORKING_ALPHA} (kube-apiserver needs --runtime-config={NETWORKING_ALPHA}=true and --feature-gates=MultiCIDRServiceAllocator=true)");
        return;
    }
    let ns = c.namespace("svc-alloc").await.unwrap();
    let api: Api<Service> = Api::namespaced(c.client.clone(), &ns);
    let addresses: Api<DynamicObject> = Api::all_with(
        c.client.clone(),
        &ApiResource {
            group: "networking.k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: NETWORKING_ALPHA.into(),
            kind: "IPAddress".into(),
            plural: "ipaddresses".into(),
        },
    );
    let svc = create(
        &api,
        &service(
            "ip",
            json!({"selector": {"app": "ip"}, "ports": [{"port": 80}]}),
        ),
    )
    .await;
    let ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default();
    let address = addresses.get(&ip).await.unwrap();
    let address = serde_json::to_value(&address).unwrap();
    assert_eq!(
        address["metadata"]["labels"],
        json!({"ipaddress.kubernetes.io/ip-family": "IPv4",
               "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"})
    );
    assert_eq!(
        address["spec"]["parentRef"],
        json!({"resource": "services", "namespace": ns, "name": "ip"})
    );

    // The address is taken while its IPAddress exists.
    let (code, message) = refusal(
        &api,
        &service(
            "same",
            json!({"clusterIP": ip, "selector": {"app": "ip"}, "ports": [{"port": 80}]}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        message.ends_with(&format!(
            "failed to allocate IP {ip}: provided IP is already allocated"
        )),
        "{message}"
    );

    api.delete("ip", &DeleteParams::default()).await.unwrap();
    wait_for(
        "the Service's IPAddress gone",
        Duration::from_secs(20),
        || async { Ok(addresses.get_opt(&ip).await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
    c.cleanup().await;
}
