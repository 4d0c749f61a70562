//! What the endpoints, endpointslice and endpointslice-mirroring controllers need from the
//! development cluster, checked through the API as a client sees it: kube-apiserver's
//! `default/kubernetes` Endpoints and EndpointSlice (kept by its bootstrap controller),
//! the EndpointSlice generation rule, Endpoints and EndpointSlice validation, and the
//! Services `kubectl expose` and headless Services make.

mod common;

use common::{call, start};
use std::time::Duration;

use kube_sim::kubernetes_service::{DEFAULT_ADVERTISE_ADDRESS, ENDPOINT_INTERVAL};
use serde_json::{json, Value};

async fn get(client: &kube::Client, path: &str) -> Value {
    call(client, "GET", path, None).await.expect(path)
}

const EP: &str = "/api/v1/namespaces/default/endpoints/kubernetes";
const SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes";
const SVC: &str = "/api/v1/namespaces/default/services/kubernetes";

fn manager(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            format!(
                "{}/{}",
                m["manager"].as_str().unwrap_or(""),
                m["operation"].as_str().unwrap_or("")
            )
        })
        .collect()
}

async fn assert_kubernetes_endpoints(client: &kube::Client, port: u16) {
    let ip = DEFAULT_ADVERTISE_ADDRESS.to_string();
    let ep = get(client, EP).await;
    assert_eq!(
        ep["metadata"]["labels"],
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"})
    );
    assert_eq!(
        ep["subsets"],
        json!([{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    assert_eq!(manager(&ep), ["kube-apiserver/Update"]);
    let slice = get(client, SLICE).await;
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"kubernetes.io/service-name": "kubernetes"})
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": [ip], "conditions": {"ready": true}}])
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "https", "protocol": "TCP", "port": port}])
    );
    assert_eq!(manager(&slice), ["kube-apiserver/Update"]);
}

#[tokio::test]
async fn the_kubernetes_service_has_endpoints_and_a_slice_from_the_start() {
    let (sim, client) = start().await;
    let port = sim.addr.port();
    assert_eq!(sim.advertise().ip(), DEFAULT_ADVERTISE_ADDRESS);
    let svc = get(&client, SVC).await;
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}])
    );
    assert_eq!(svc["spec"]["ipFamilyPolicy"], "SingleStack");
    assert!(svc["spec"].get("selector").is_none());
    assert_kubernetes_endpoints(&client, port).await;
    let slices = get(
        &client,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
    )
    .await;
    assert_eq!(slices["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn the_bootstrap_controller_repairs_what_was_changed_or_deleted() {
    let (sim, client) = start().await;
    let port = sim.addr.port();
    // A pass over objects that are right writes nothing.
    let rv = |v: Value| v["metadata"]["resourceVersion"].clone();
    let (ep_rv, slice_rv) = (rv(get(&client, EP).await), rv(get(&client, SLICE).await));
    sim.sim
        .reconcile_kubernetes_service(sim.advertise())
        .unwrap();
    assert_eq!(rv(get(&client, EP).await), ep_rv);
    assert_eq!(rv(get(&client, SLICE).await), slice_rv);
    // A changed address, a dropped label and an edited slice are put back; so are deleted
    // objects, the Service included (with the same cluster IP).
    call(
        &client,
        "PATCH",
        EP,
        Some(json!({"metadata": {"labels": null},
                    "subsets": [{"addresses": [{"ip": "10.1.1.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]})),
    )
    .await
    .unwrap();
    let before = get(&client, SLICE).await;
    let edited = call(
        &client,
        "PATCH",
        SLICE,
        Some(json!({"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        edited["metadata"]["generation"], 2,
        "labels move the generation"
    );
    sim.sim
        .reconcile_kubernetes_service(sim.advertise())
        .unwrap();
    assert_kubernetes_endpoints(&client, port).await;
    let after = get(&client, SLICE).await;
    assert!(after["metadata"].get("annotations").is_none(), "{after}");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    // Endpoints back to the advertised address, and the label fix: generation 3.
    assert_eq!(after["metadata"]["generation"], 3);

    for path in [SLICE, EP, SVC] {
        call(&client, "DELETE", path, None).await.unwrap();
    }
    sim.sim
        .reconcile_kubernetes_service(sim.advertise())
        .unwrap();
    assert_kubernetes_endpoints(&client, port).await;
    assert_eq!(get(&client, SVC).await["spec"]["clusterIP"], "10.96.0.1");

    // Upstream's periodic pass does not put back the ports of an otherwise right subset.
    call(
        &client,
        "PATCH",
        EP,
        Some(
            json!({"subsets": [{"addresses": [{"ip": DEFAULT_ADVERTISE_ADDRESS.to_string()}],
                                 "ports": [{"name": "https", "port": 1234, "protocol": "TCP"}]}]}),
        ),
    )
    .await
    .unwrap();
    sim.sim
        .reconcile_kubernetes_service(sim.advertise())
        .unwrap();
    let slice = get(&client, SLICE).await;
    assert_eq!(
        slice["ports"][0]["port"], 1234,
        "the slice follows the Endpoints"
    );
}

#[tokio::test]
async fn a_deleted_kubernetes_slice_is_back_within_the_reconcile_interval() {
    let (_sim, client) = start().await;
    call(&client, "DELETE", SLICE, None).await.unwrap();
    let deadline = tokio::time::Instant::now() + ENDPOINT_INTERVAL + Duration::from_secs(3);
    loop {
        if call(&client, "GET", SLICE, None).await.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kubernetes EndpointSlice was not re-created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn endpoint_slice_generation_moves_on_content_and_label_changes_only() {
    let (_sim, client) = start().await;
    call(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})),
    )
    .await
    .unwrap();
    let base = "/apis/discovery.k8s.io/v1/namespaces/t/endpointslices";
    let created = call(
        &client,
        "POST",
        base,
        Some(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "web-abc"}, "addressType": "IPv4",
                    "endpoints": [{"addresses": ["10.0.0.1"],
                                   "deprecatedTopology": {"kubernetes.io/hostname": "n1"}}],
                    "ports": [{"port": 80}]}),
        ),
    )
    .await
    .unwrap();
    // As the recorded answer of kube-apiserver: defaults filled in, generation 1, and the
    // deprecated topology dropped on v1.
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(
        created["endpoints"],
        json!([{"addresses": ["10.0.0.1"], "conditions": {}}])
    );
    assert_eq!(
        created["ports"],
        json!([{"name": "", "protocol": "TCP", "port": 80}])
    );
    let path = format!("{base}/web-abc");
    let generation = |v: &Value| v["metadata"]["generation"].as_i64().unwrap();
    let patch = |body: Value| {
        let (client, path) = (client.clone(), path.clone());
        async move { call(&client, "PATCH", &path, Some(body)).await.unwrap() }
    };
    let v = patch(json!({"metadata": {"annotations": {"a": "b"}}})).await;
    assert_eq!(generation(&v), 1, "annotations do not count");
    let v =
        patch(json!({"metadata": {"labels": {"endpointslice.kubernetes.io/managed-by": "me"}}}))
            .await;
    assert_eq!(generation(&v), 2, "labels do");
    let v = patch(json!({"endpoints": [{"addresses": ["10.0.0.2"]}]})).await;
    assert_eq!(generation(&v), 3, "endpoints do");
    let rv = v["metadata"]["resourceVersion"].clone();
    let v =
        patch(json!({"metadata": {"labels": {"endpointslice.kubernetes.io/managed-by": "me"}}}))
            .await;
    assert_eq!(generation(&v), 3, "the same labels are no change");
    assert_eq!(v["metadata"]["resourceVersion"], rv, "nor a write");
    let v = patch(json!({"metadata": {"labels": null}})).await;
    assert_eq!(generation(&v), 4, "removing the labels is a change");
    let v = patch(json!({"ports": []})).await;
    assert_eq!(generation(&v), 5, "ports are content");
    // Empty lists read back as null (etcd keeps no empty repeated field), and an empty list
    // is the same as a nil one.
    assert_eq!(v["ports"], Value::Null);
    let v = patch(json!({"ports": null})).await;
    assert_eq!(generation(&v), 5);
    let v = patch(json!({"ports": []})).await;
    assert_eq!(generation(&v), 5);
    let empty = call(
        &client,
        "POST",
        base,
        Some(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "empty"}, "addressType": "IPv4",
                    "endpoints": [], "ports": []}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        (&empty["endpoints"], &empty["ports"]),
        (&Value::Null, &Value::Null)
    );

    // The address type cannot change.
    let err = call(
        &client,
        "PATCH",
        &path,
        Some(json!({"addressType": "IPv6", "endpoints": []})),
    )
    .await
    .unwrap_err();
    assert_eq!(err.0, 422);
    assert_eq!(
        err.1,
        "EndpointSlice.discovery.k8s.io \"web-abc\" is invalid: addressType: Invalid value: \"IPv6\": field is immutable"
    );
}

#[tokio::test]
async fn endpoints_and_slices_are_validated_as_kube_apiserver_does() {
    let (_sim, client) = start().await;
    call(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})),
    )
    .await
    .unwrap();
    let err = call(
        &client,
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/t/endpointslices",
        Some(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "s"}, "addressType": "IPv4",
                    "endpoints": [{"addresses": ["127.0.0.1"]}, {"addresses": []}],
                    "ports": [{"name": "p", "protocol": "ICMP"}]}),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.0, 422);
    assert_eq!(
        err.1,
        "EndpointSlice.discovery.k8s.io \"s\" is invalid: [endpoints[0].addresses[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128), endpoints[1].addresses: Required value: must contain at least 1 address, ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"]"
    );
    let err = call(
        &client,
        "POST",
        "/api/v1/namespaces/t/endpoints",
        Some(
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"},
                    "subsets": [{"addresses": [{"ip": "169.254.169.254"}],
                                 "ports": [{"port": 80}, {"name": "b", "port": 81}]}]}),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.0, 422);
    assert_eq!(
        err.1,
        "Endpoints \"e\" is invalid: [subsets[0].addresses[0].ip: Invalid value: \"169.254.169.254\": may not be in the link-local range (169.254.0.0/16, fe80::/10), subsets[0].ports[0].name: Required value]"
    );
    let ok = call(
        &client,
        "POST",
        "/api/v1/namespaces/t/endpoints",
        Some(
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"},
                    "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(ok["subsets"][0]["ports"][0]["protocol"], "TCP");
    // Empty lists are not kept (they are all omitempty, and etcd keeps no empty list).
    let empty = call(
        &client,
        "POST",
        "/api/v1/namespaces/t/endpoints",
        Some(
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "empty"},
                    "subsets": []}),
        ),
    )
    .await
    .unwrap();
    assert!(empty.get("subsets").is_none(), "{empty}");
    let headless = call(
        &client,
        "PUT",
        "/api/v1/namespaces/t/endpoints/empty",
        Some(json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "empty"},
                    "subsets": [{"addresses": [{"ip": "10.0.0.3"}], "notReadyAddresses": [], "ports": []}]})),
    )
    .await
    .unwrap();
    assert_eq!(
        headless["subsets"],
        json!([{"addresses": [{"ip": "10.0.0.3"}]}])
    );
}

#[tokio::test]
async fn service_ip_families_are_checked_for_a_single_stack_cluster() {
    let (_sim, client) = start().await;
    call(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})),
    )
    .await
    .unwrap();
    let create = |name: &str, spec: Value| {
        let client = client.clone();
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
        async move { call(&client, "POST", "/api/v1/namespaces/t/services", Some(body)).await }
    };
    let err = create("a", json!({"ipFamilyPolicy": "RequireDualStack", "selector": {"a": "b"}, "ports": [{"port": 80}]}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        (422, "Service \"a\" is invalid: spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services".into())
    );
    let err = create(
        "b",
        json!({"ipFamilies": ["IPv6"], "ports": [{"port": 80}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.1,
        "Service \"b\" is invalid: spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"
    );
    let err = create(
        "c",
        json!({"clusterIP": "1.2.3.4", "ports": [{"port": 80}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.1,
        "Service \"c\" is invalid: spec.clusterIPs: Invalid value: []string{\"1.2.3.4\"}: failed to allocate IP 1.2.3.4: the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
    );
    let err = create(
        "d",
        json!({"clusterIP": "10.96.0.1", "ports": [{"port": 80}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.1,
        "Service \"d\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.1\"}: failed to allocate IP 10.96.0.1: provided IP is already allocated"
    );
    let err = create(
        "e",
        json!({"clusterIP": "nonsense", "ports": [{"port": 80}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.1,
        "Service \"e\" is invalid: spec.clusterIPs[0]: Invalid value: \"nonsense\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
    );
    // PreferDualStack falls back to one family; a headless selectorless Service gets both.
    let v = create("f", json!({"ipFamilyPolicy": "PreferDualStack", "selector": {"a": "b"}, "ports": [{"port": 80}]}))
        .await
        .unwrap();
    assert_eq!(v["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(v["spec"]["clusterIPs"].as_array().map(Vec::len), Some(1));
    let v = create("g", json!({"clusterIP": "None", "ports": [{"port": 80}]}))
        .await
        .unwrap();
    assert_eq!(v["spec"]["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(v["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
    assert_eq!(v["spec"]["clusterIPs"], json!(["None"]));
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_expose_and_a_headless_service_work() {
    let (sim, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let kc2 = kc.clone();
    let run = move |args: &[&str]| {
        let (ok, out, err) = kubectl(&kc2, args);
        assert!(ok, "kubectl {args:?}: {err}");
        out
    };
    let run = std::sync::Arc::new(run);
    let r = run.clone();
    tokio::task::spawn_blocking(move || {
        r(&["create", "namespace", "x"]);
        r(&[
            "-n",
            "x",
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--port=8080",
        ]);
        r(&[
            "-n",
            "x",
            "expose",
            "deployment",
            "web",
            "--port=80",
            "--target-port=8080",
        ]);
    })
    .await
    .unwrap();
    let svc: Value = serde_json::from_str(
        &tokio::task::spawn_blocking({
            let r = run.clone();
            move || r(&["-n", "x", "get", "service", "web", "-o", "json"])
        })
        .await
        .unwrap(),
    )
    .unwrap();
    let spec = &svc["spec"];
    assert_eq!(spec["selector"], json!({"app": "web"}));
    assert_eq!(
        spec["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 8080}])
    );
    assert_eq!(spec["type"], "ClusterIP");
    let ip = spec["clusterIP"].as_str().unwrap();
    assert!(ip.starts_with("10.9") && ip != "10.96.0.1", "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(svc["metadata"]["labels"], json!({"app": "web"}));

    let headless: Value = serde_json::from_str(
        &tokio::task::spawn_blocking({
            let r = run.clone();
            move || {
                r(&[
                    "-n",
                    "x",
                    "create",
                    "service",
                    "clusterip",
                    "db",
                    "--clusterip=None",
                    "--tcp=5432:5432",
                    "-o",
                    "json",
                ])
            }
        })
        .await
        .unwrap(),
    )
    .unwrap();
    let spec = &headless["spec"];
    assert_eq!(spec["clusterIP"], "None");
    assert_eq!(spec["clusterIPs"], json!(["None"]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["selector"], json!({"app": "db"}));

    // What `kubectl get endpoints,endpointslices -n default` shows of the API server.
    let out = tokio::task::spawn_blocking({
        let r = run.clone();
        move || {
            r(&[
                "-n",
                "default",
                "get",
                "endpoints,endpointslices",
                "--no-headers",
            ])
        }
    })
    .await
    .unwrap();
    let port = sim.addr.port();
    let ip = DEFAULT_ADVERTISE_ADDRESS;
    assert!(
        out.contains(&format!("{ip}:{port}"))
            && out.contains("IPv4")
            && out.contains(&format!("{port}")),
        "{out}"
    );
    assert_eq!(out.lines().count(), 2, "{out}");
}

/// The pod's Ready condition: (status, reason, message).
fn ready_condition(pod: &Value) -> (String, String, String) {
    let c = pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or(Value::Null);
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

async fn wait_ready(client: &kube::Client, path: &str, want: (&str, &str, &str)) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pod = get(client, path).await;
        let got = ready_condition(&pod);
        if (got.0.as_str(), got.1.as_str(), got.2.as_str()) == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pod Ready is {got:?}, not {want:?}: {pod}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ready_annotation_turns_a_running_pod_unready_and_back() {
    let (_sim, client) = start().await;
    let _nodes = kube_sim::nodesim::NodeSim::start(
        client.clone(),
        kube_sim::nodesim::NodeSimConfig {
            nodes: 1,
            start_delay: Duration::from_millis(100),
            events: false,
            ..Default::default()
        },
    );
    for (path, body) in [
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}),
        ),
        (
            "/api/v1/namespaces/t/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        ),
        (
            "/api/v1/namespaces/t/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
                   "data": {"ca.crt": "x"}}),
        ),
        (
            "/api/v1/namespaces/t/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                   // No node-lifecycle controller here lifts the new node's not-ready taint.
                   "spec": {"containers": [{"name": "c", "image": "nginx"}],
                            "tolerations": [{"key": "node.kubernetes.io/not-ready",
                                             "operator": "Exists", "effect": "NoSchedule"}]}}),
        ),
    ] {
        call(&client, "POST", path, Some(body)).await.unwrap();
    }
    let pod = "/api/v1/namespaces/t/pods/web";
    wait_ready(&client, pod, ("True", "", "")).await;
    let annotate = |value: Value| {
        let client = client.clone();
        async move {
            call(
                &client,
                "PATCH",
                pod,
                Some(json!({"metadata": {"annotations": {"sim.rkcm.io/ready": value}}})),
            )
            .await
            .unwrap()
        }
    };
    annotate(json!("false")).await;
    wait_ready(
        &client,
        pod,
        (
            "False",
            "ContainersNotReady",
            "containers with unready status: [c]",
        ),
    )
    .await;
    let p = get(&client, pod).await;
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(p["status"]["containerStatuses"][0]["ready"], false);
    annotate(Value::Null).await;
    wait_ready(&client, pod, ("True", "", "")).await;
}
