//! End-to-end tests of the controllers KCM 1.29 runs only behind feature gates that are off
//! by default (issue 27, part A): service-cidr-controller (`MultiCIDRServiceAllocator`) and
//! storageversion-garbage-collector-controller (`APIServerIdentity` and
//! `StorageVersionAPI`), run by the real `rkcm launcher` with `--feature-gates`, on kube-sim
//! started with the matching `--runtime-config` and `--feature-gates` (or the real cluster
//! named by `RKCM_TEST_KUBECONFIG`, where a test whose API the server does not serve is
//! skipped, saying so). Every change is made with kubectl and read back from the API server.
//!
//! Also: with its gate off a gated controller does not run and the launcher says why, and
//! an unknown gate stops `rkcm launcher` with exit status 2.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};

const NETWORKING_ALPHA: &str = "networking.k8s.io/v1alpha1";
const INTERNAL_ALPHA: &str = "internal.apiserver.k8s.io/v1alpha1";
const CIDR_FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";

/// kube-sim serving both alpha APIs with the gates on, or the real cluster.
async fn gated_cluster() -> TestCluster {
    TestCluster::start_with_config(kube_sim::Config {
        runtime_config: format!("{NETWORKING_ALPHA}=true,{INTERNAL_ALPHA}=true"),
        feature_gates: "MultiCIDRServiceAllocator=true,StorageVersionAPI=true".into(),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn suffix() -> String {
    kube_sim::api::random_suffix(6)
}

/// An object read with kubectl as JSON, or `None` once it is gone.
async fn get_json(stack: &LauncherStack, args: &[&str]) -> anyhow::Result<Option<Value>> {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json", "--ignore-not-found"]);
    let out = stack.cluster.kubectl_ok(&full).await?;
    if out.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_str(&out)?))
}

fn ready_condition(cidr: &Value) -> Option<&Value> {
    cidr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

/// An IPAddress as kube-apiserver's IP allocator writes one.
fn allocated_ip(address: &str) -> Value {
    json!({"apiVersion": NETWORKING_ALPHA, "kind": "IPAddress",
           "metadata": {"name": address, "labels": {
               "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
               "ipaddress.kubernetes.io/ip-family": "IPv4"}},
           "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "e2e"}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn service_cidr_controller_guards_ranges_in_use() {
    let cluster = gated_cluster().await;
    if !cluster.serves(NETWORKING_ALPHA).await {
        println!("skipped: the cluster does not serve {NETWORKING_ALPHA} (kube-apiserver needs --runtime-config={NETWORKING_ALPHA}=true and --feature-gates=MultiCIDRServiceAllocator=true)");
        return;
    }
    let stack = LauncherStack::start_with_nodes(
        cluster,
        &[
            "--controllers=service-cidr-controller",
            "--feature-gates=MultiCIDRServiceAllocator=true",
        ],
        None,
    )
    .await;
    // A /24 in a range test clusters leave alone.
    let octet = 200 + (u32::from_str_radix(&suffix()[..2], 36).unwrap_or(0) % 50);
    let name = format!("e2e-{}", suffix());
    let range = format!("10.{octet}.7.0/24");
    let host = format!("10.{octet}.7.10");

    // Check 1: a new ServiceCIDR gets the finalizer and Ready True, applied by the
    // controller's field manager.
    stack
        .kubectl_stdin(
            &["create", "-f", "-"],
            &json!({"apiVersion": NETWORKING_ALPHA, "kind": "ServiceCIDR",
                    "metadata": {"name": name}, "spec": {"cidrs": [range]}})
            .to_string(),
        )
        .await;
    let cidr = stack
        .wait(
            "the finalizer and Ready True on a new ServiceCIDR",
            || async {
                let cidr =
                    get_json(&stack, &["servicecidr", &name, "--show-managed-fields"]).await?;
                Ok(cidr.filter(|c| {
                    has_finalizer(c, CIDR_FINALIZER)
                        && ready_condition(c).is_some_and(|r| r["status"] == "True")
                }))
            },
        )
        .await;
    let ready = ready_condition(&cidr).cloned().unwrap_or_default();
    assert_eq!(
        ready["message"], "Kubernetes Service CIDR is ready",
        "{cidr}"
    );
    let managers: Vec<&str> = cidr["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        managers.contains(&"service-cidr-controller"),
        "{managers:?}"
    );

    // The server's default ServiceCIDR is guarded too.
    let default = stack
        .wait("the finalizer on the default ServiceCIDR", || async {
            let cidr = get_json(&stack, &["servicecidr", "kubernetes"]).await?;
            Ok(cidr.filter(|c| has_finalizer(c, CIDR_FINALIZER)))
        })
        .await;
    assert!(
        ready_condition(&default).is_some_and(|r| r["status"] == "True"),
        "{default}"
    );

    // Check 2: deleting it while an allocated address in it is held by no other range
    // leaves it Terminating, with Ready False.
    stack
        .kubectl_stdin(&["create", "-f", "-"], &allocated_ip(&host).to_string())
        .await;
    stack
        .kubectl(&["delete", "servicecidr", &name, "--wait=false"])
        .await;
    let blocked = stack
        .wait(
            "Ready False, Terminating, on the deleted ServiceCIDR",
            || async {
                let cidr = get_json(&stack, &["servicecidr", &name]).await?;
                Ok(cidr.filter(|c| {
                    ready_condition(c)
                        .is_some_and(|r| r["status"] == "False" && r["reason"] == "Terminating")
                }))
            },
        )
        .await;
    assert!(has_finalizer(&blocked, CIDR_FINALIZER), "{blocked}");
    assert_eq!(
        ready_condition(&blocked).map(|r| r["message"].clone()),
        Some(json!("There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"))
    );

    // Check 3: once the address is released, the range goes, after the 10 s grace counted
    // from its deletion.
    let freed = Instant::now();
    stack.kubectl(&["delete", "ipaddress", &host]).await;
    stack
        .wait("the deleted ServiceCIDR gone once free", || async {
            let cidr = get_json(&stack, &["servicecidr", &name]).await?;
            Ok(cidr.is_none().then_some(()))
        })
        .await;
    println!(
        "the ServiceCIDR went {:?} after its last address",
        freed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn storage_version_gc_drops_records_of_gone_servers() {
    let cluster = gated_cluster().await;
    if !cluster.serves(INTERNAL_ALPHA).await {
        println!("skipped: the cluster does not serve {INTERNAL_ALPHA} (kube-apiserver needs --runtime-config={INTERNAL_ALPHA}=true and --feature-gates=StorageVersionAPI=true)");
        return;
    }
    let stack = LauncherStack::start_with_nodes(
        cluster,
        &[
            "--controllers=storage-version-gc",
            "--feature-gates=StorageVersionAPI=true",
        ],
        None,
    )
    .await;
    let selector = format!("{IDENTITY_LABEL}=kube-apiserver");
    let live = stack
        .wait("a kube-apiserver identity Lease", || async {
            let out = stack
                .cluster
                .kubectl_ok(&[
                    "get",
                    "leases",
                    "-n",
                    "kube-system",
                    "-l",
                    &selector,
                    "-o",
                    "jsonpath={.items[0].metadata.name}",
                ])
                .await?;
            Ok(Some(out.trim().to_string()).filter(|n| !n.is_empty()))
        })
        .await;
    let gone = format!("apiserver-e2e{}", suffix());
    stack
        .kubectl_stdin(
            &["create", "-f", "-"],
            &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": gone, "namespace": "kube-system",
                                 "labels": {IDENTITY_LABEL: "kube-apiserver"}},
                    "spec": {"holderIdentity": gone, "leaseDurationSeconds": 3600}})
            .to_string(),
        )
        .await;
    let record = |id: &str| {
        json!({"apiServerID": id, "encodingVersion": "e2e.rkcm.io/v1",
               "decodableVersions": ["e2e.rkcm.io/v1"], "servedVersions": ["e2e.rkcm.io/v1"]})
    };
    let create_with = |name: String, records: Vec<Value>| {
        let stack = &stack;
        async move {
            stack
                .kubectl_stdin(
                    &["create", "-f", "-"],
                    &json!({"apiVersion": INTERNAL_ALPHA, "kind": "StorageVersion",
                            "metadata": {"name": name}, "spec": {}})
                    .to_string(),
                )
                .await;
            let status = json!({"status": {"storageVersions": records,
                                           "commonEncodingVersion": "e2e.rkcm.io/v1"}});
            stack
                .patch_status("storageversion", None, &name, &status)
                .await;
        }
    };

    // Check 1: when a server's identity Lease is deleted, its record goes from the
    // StorageVersions listing it; the others stay, with their common version.
    let shared = format!("e2e.rkcm.io.widgets{}", suffix());
    create_with(shared.clone(), vec![record(&live), record(&gone)]).await;
    stack
        .kubectl(&["delete", "lease", "-n", "kube-system", &gone])
        .await;
    let cleaned = stack
        .wait("the gone server's record dropped", || async {
            let sv = get_json(&stack, &["storageversion", &shared]).await?;
            Ok(sv.filter(|sv| sv["status"]["storageVersions"].as_array().map(Vec::len) == Some(1)))
        })
        .await;
    assert_eq!(
        cleaned["status"]["storageVersions"][0]["apiServerID"],
        json!(live),
        "{cleaned}"
    );
    assert_eq!(
        cleaned["status"]["commonEncodingVersion"], "e2e.rkcm.io/v1",
        "{cleaned}"
    );
    let equal = cleaned["status"]["conditions"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["type"] == "AllEncodingVersionsEqual")
                .cloned()
        })
        .unwrap_or_default();
    assert_eq!(equal["status"], "True", "{cleaned}");
    assert_eq!(equal["reason"], "CommonEncodingVersionSet", "{cleaned}");

    // Check 2: a StorageVersion whose only record is of a server with no identity Lease is
    // deleted.
    let orphan = format!("e2e.rkcm.io.gadgets{}", suffix());
    let nobody = format!("apiserver-nobody{}", suffix());
    create_with(orphan.clone(), vec![record(&nobody)]).await;
    stack
        .wait("the StorageVersion of no live server deleted", || async {
            let sv = get_json(&stack, &["storageversion", &orphan]).await?;
            Ok(sv.is_none().then_some(()))
        })
        .await;
    stack.kubectl(&["delete", "storageversion", &shared]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gated_controllers_stay_off_with_their_gates_off() {
    let stack = LauncherStack::start_with_nodes(
        TestCluster::start().await.unwrap(),
        &["--controllers=service-cidr-controller,storage-version-gc,ttl"],
        None,
    )
    .await;
    let log = stack
        .wait_within(
            "the launcher's feature gate notices",
            Duration::from_secs(30),
            || async {
                let log = stack.launcher.log();
                Ok((log
                    .matches("Controller is disabled by a feature gate")
                    .count()
                    >= 2)
                    .then_some(log))
            },
        )
        .await;
    for (controller, gates) in [
        ("service-cidr-controller", "MultiCIDRServiceAllocator"),
        (
            "storageversion-garbage-collector-controller",
            "APIServerIdentity, StorageVersionAPI",
        ),
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("Controller is disabled by a feature gate")
                    && l.contains(controller)
                    && l.contains(gates)),
            "no notice for {controller}:\n{log}"
        );
    }
    let metrics = stack.metrics().await;
    assert!(
        !has_sample(&metrics, r#"workqueue_adds_total{name="ipaddresses"}"#),
        "the service-cidr-controller's queue exists with its gate off"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_gate_stops_the_launcher() {
    let dir = tempfile::tempdir().unwrap();
    assert_usage_error(
        [
            "launcher",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--feature-gates=NoSuchGate=true",
            &format!("--runtime-dir={}", dir.path().display()),
        ],
        "unrecognized feature gate: NoSuchGate",
    )
    .await;
}
