//! End-to-end tests of the node-ipam controller (range allocator): kube-sim, an
//! informer-server and a worker as separate processes, and node-sim nodes that register
//! without a podCIDR, so their pods wait for the CIDR the controller patches on and take
//! their IPs from it. Covers allocation, release and reuse, a full range, dual-stack, and
//! the start-up checks that make `rkcm launcher` and `rkcm worker` exit 2.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::{
    assert_usage_error, fast_heartbeat_nodes, has_sample, metric_sum, sim_cluster,
    simulated_nodes_with, suite_stack, ControllerStack, Launcher, LauncherStack, RKCM, STACK_WAIT,
};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use rkcm_conformance::wait_for;

suite_stack! {
    struct Stack(LauncherStack);
}

/// `cidr` as (network address, prefix) — enough to check containment in tests.
fn parse(cidr: &str) -> (IpAddr, u8) {
    let (address, prefix) = cidr.split_once('/').expect("a CIDR");
    (
        address.parse().expect("an address"),
        prefix.parse().expect("a prefix"),
    )
}

fn bits(address: IpAddr) -> (u128, u8) {
    match address {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

/// Whether `inner` (a CIDR or a bare address) lies inside `outer`.
fn inside(inner: &str, outer: &str) -> bool {
    let (outer_address, outer_prefix) = parse(outer);
    let inner_address: IpAddr = match inner.split_once('/') {
        Some((address, _)) => address.parse().expect("an address"),
        None => inner.parse().expect("an address"),
    };
    let ((o, width), (i, inner_width)) = (bits(outer_address), bits(inner_address));
    if width != inner_width {
        return false;
    }
    let host = u32::from(width - outer_prefix);
    let mask = if host >= 128 {
        0
    } else {
        !((1u128 << host) - 1)
    };
    o & mask == i & mask
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

impl Stack {
    /// A kube-sim cluster, the launcher running node-ipam (with what pods need to run)
    /// with `flags`, and `nodes` node-sim nodes registered without a podCIDR; `None` on a
    /// real cluster (its nodes have their CIDRs already).
    async fn start(flags: &[&str], nodes: usize) -> Option<Stack> {
        let cluster = sim_cluster("nodes without a podCIDR need node-sim").await?;
        let mut args = vec![
            "--controllers",
            "node-ipam-controller,nodelifecycle,root-ca-cert-publisher,serviceaccount",
        ];
        args.extend_from_slice(flags);
        let nodes = kube_sim::nodesim::NodeSimConfig {
            node_status_report_frequency: Duration::from_secs(1),
            assign_pod_cidrs: false,
            ..fast_heartbeat_nodes(nodes)
        };
        Some(Stack(
            LauncherStack::start_with_nodes(cluster, &args, Some(nodes)).await,
        ))
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.cluster.client.clone())
    }

    /// Waits until `count` nodes exist and `with` of them have pod CIDRs; returns them
    /// by name.
    async fn wait_cidrs(&self, count: usize, with: usize) -> Vec<(String, Vec<String>)> {
        let nodes = self.nodes();
        self.wait(
            &format!("{count} nodes, {with} of them with pod CIDRs"),
            || {
                let nodes = nodes.clone();
                async move {
                    let list = nodes.list(&ListParams::default()).await?;
                    let mut named: Vec<(String, Vec<String>)> = list
                        .items
                        .iter()
                        .map(|n| (n.metadata.name.clone().unwrap_or_default(), pod_cidrs(n)))
                        .collect();
                    named.sort();
                    let allocated = named.iter().filter(|(_, c)| !c.is_empty()).count();
                    Ok((named.len() == count && allocated == with).then_some(named))
                }
            },
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_a_cidr_get_one_and_their_pods_take_ips_from_it() {
    let Some(stack) = Stack::start(
        &[
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16",
            "--node-cidr-mask-size=24",
        ],
        3,
    )
    .await
    else {
        return;
    };
    let nodes = stack.wait_cidrs(3, 3).await;
    let mut seen = Vec::new();
    for (name, cidrs) in &nodes {
        assert_eq!(cidrs.len(), 1, "{name}: {cidrs:?}");
        assert!(inside(&cidrs[0], "10.244.0.0/16"), "{name}: {cidrs:?}");
        assert_eq!(parse(&cidrs[0]).1, 24, "{name}: {cidrs:?}");
        let node = stack.nodes().get(name).await.unwrap();
        assert_eq!(
            node.spec.and_then(|s| s.pod_cidr).as_deref(),
            Some(cidrs[0].as_str()),
            "{name}: spec.podCIDR is spec.podCIDRs[0]"
        );
        seen.push(cidrs[0].clone());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "every node its own CIDR: {nodes:?}");

    // A pod on a node runs with an IP of the node's CIDR.
    let (node, cidrs) = &nodes[1];
    let namespace = format!("ipam-{}", kube_sim::api::random_suffix(5));
    stack
        .cluster
        .kubectl_ok(&["create", "namespace", &namespace])
        .await
        .unwrap_or_else(|e| stack.fail(format!("{e:#}")));
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "p", "namespace": "{namespace}"}},
  "spec": {{"nodeName": "{node}", "containers": [{{"name": "c", "image": "registry.k8s.io/pause:3.9"}}],
    "tolerations": [{{"operator": "Exists"}}]}}}}"#
    );
    stack
        .wait("the pod created (its ServiceAccount exists)", || {
            let manifest = manifest.clone();
            let cluster = &stack.cluster;
            async move {
                Ok(cluster
                    .kubectl_stdin(&["create", "-f", "-"], &manifest)
                    .await
                    .ok()
                    .map(|_| ()))
            }
        })
        .await;
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), &namespace);
    let ip = stack
        .wait("the pod running with an IP", || {
            let pods = pods.clone();
            async move {
                let pod = pods.get("p").await?;
                let status = pod.status.unwrap_or_default();
                Ok((status.phase.as_deref() == Some("Running"))
                    .then_some(status.pod_ip)
                    .flatten())
            }
        })
        .await;
    assert!(
        inside(&ip, &cidrs[0]),
        "pod IP {ip} is not in {node}'s CIDR {}",
        cidrs[0]
    );

    let metrics = stack.metrics().await;
    for (family, value) in [
        ("node_ipam_controller_cidrset_cidrs_allocations_total", 3.0),
        ("node_ipam_controller_cirdset_max_cidrs", 256.0),
    ] {
        let line = format!("{family}{{clusterCIDR=\"10.244.0.0/16\"}} {value}");
        assert!(
            metric_sum(&metrics, family, &[("clusterCIDR", "10.244.0.0/16")]) == Some(value),
            "expected {line:?} in the launcher's metrics:\n{}",
            metrics
                .lines()
                .filter(|l| l.contains("node_ipam"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(has_sample(
        &metrics,
        "node_ipam_controller_cidrset_usage_cidrs{clusterCIDR=\"10.244.0.0/16\"}"
    ));
    assert!(has_sample(
        &metrics,
        "node_ipam_controller_cidrset_allocation_tries_per_request_bucket"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodes_cidr_is_released_and_reused() {
    // Two blocks for two nodes: the node registered again can only get the freed one.
    let Some(stack) = Stack::start(
        &[
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/23",
            "--node-cidr-mask-size=24",
        ],
        2,
    )
    .await
    else {
        return;
    };
    let before = stack.wait_cidrs(2, 2).await;
    let (name, cidrs) = before[0].clone();
    let old_uid = stack.nodes().get(&name).await.unwrap().metadata.uid;
    stack
        .nodes()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| stack.fail(format!("deleting node {name}: {e}")));
    // node-sim registers the node again, as a kubelet whose Node vanished does.
    let nodes = stack.nodes();
    let again = stack
        .wait(&format!("{name} registered again with a pod CIDR"), || {
            let nodes = nodes.clone();
            let name = name.clone();
            let old_uid = old_uid.clone();
            async move {
                Ok(nodes
                    .get_opt(&name)
                    .await?
                    .filter(|n| n.metadata.uid != old_uid && !pod_cidrs(n).is_empty())
                    .map(|n| pod_cidrs(&n)))
            }
        })
        .await;
    assert_eq!(again, cidrs, "{name} gets the block its old self released");
    let metrics = stack.metrics().await;
    assert!(
        metric_sum(
            &metrics,
            "node_ipam_controller_cidrset_cidrs_releases_total",
            &[("clusterCIDR", "10.244.0.0/23")]
        ) == Some(1.0),
        "one release in the metrics:\n{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_range_reports_cidr_not_available() {
    // As its own ServiceAccount: the patches and events are ones `node-controller`'s
    // bootstrap role allows.
    let Some(stack) = Stack::start(
        &[
            "--use-service-account-credentials",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/23",
            "--node-cidr-mask-size=24",
        ],
        3,
    )
    .await
    else {
        return;
    };
    let nodes = stack.wait_cidrs(3, 2).await;
    let (left_out, _) = nodes
        .iter()
        .find(|(_, c)| c.is_empty())
        .cloned()
        .unwrap_or_else(|| stack.fail("no node without a CIDR"));
    let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), "default");
    let message = format!("Node {left_out} status is now: CIDRNotAvailable");
    stack
        .wait(&format!("a CIDRNotAvailable event: {message}"), || {
            let events = events.clone();
            let message = message.clone();
            let left_out = left_out.clone();
            async move {
                let list = events
                    .list(&ListParams::default().fields(&format!("involvedObject.name={left_out}")))
                    .await?;
                Ok(list
                    .items
                    .iter()
                    .any(|e| {
                        e.reason.as_deref() == Some("CIDRNotAvailable")
                            && e.message.as_deref() == Some(message.as_str())
                            && e.source.as_ref().and_then(|s| s.component.as_deref())
                                == Some("cidrAllocator")
                            && e.involved_object.kind.as_deref() == Some("Node")
                    })
                    .then_some(()))
            }
        })
        .await;
    // Still two allocations, and the third node keeps waiting.
    let after = stack.wait_cidrs(3, 2).await;
    assert_eq!(after, nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_nodes_get_one_cidr_per_family() {
    let Some(stack) = Stack::start(
        &[
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
        ],
        2,
    )
    .await
    else {
        return;
    };
    let nodes = stack.wait_cidrs(2, 2).await;
    for (name, cidrs) in &nodes {
        assert_eq!(cidrs.len(), 2, "{name}: {cidrs:?}");
        assert!(inside(&cidrs[0], "10.244.0.0/16"), "{name}: {cidrs:?}");
        assert_eq!(parse(&cidrs[0]).1, 24, "{name}: {cidrs:?}");
        assert!(inside(&cidrs[1], "fd00:10:244::/56"), "{name}: {cidrs:?}");
        assert_eq!(parse(&cidrs[1]).1, 64, "{name}: {cidrs:?}");
    }
    assert_ne!(nodes[0].1, nodes[1].1);
}

/// The launcher takes the flags and passes them on to its worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launcher_passes_the_flags_to_its_worker() {
    let Some(cluster) = sim_cluster("nodes without a podCIDR need node-sim").await else {
        return;
    };
    let launcher = Launcher::start(
        &cluster,
        &format!("rkcm-ipam-{}", kube_sim::api::random_suffix(5)),
        &[
            "--controllers=node-ipam-controller,nodelifecycle",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.200.0.0/16",
            "--node-cidr-mask-size=26",
        ],
    )
    .await
    .unwrap();
    let _nodes = simulated_nodes_with(
        &cluster,
        kube_sim::nodesim::NodeSimConfig {
            nodes: 2,
            assign_pod_cidrs: false,
            ..Default::default()
        },
    )
    .await
    .expect("node-sim on kube-sim");
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let cidrs = wait_for("2 nodes with /26 pod CIDRs", STACK_WAIT, || {
        let nodes = nodes.clone();
        async move {
            let list = nodes.list(&ListParams::default()).await?;
            let cidrs: Vec<Vec<String>> = list.items.iter().map(pod_cidrs).collect();
            Ok((cidrs.len() == 2 && cidrs.iter().all(|c| !c.is_empty())).then_some(cidrs))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nlauncher log:\n{}", launcher.log()));
    for c in cidrs.iter().flatten() {
        assert!(inside(c, "10.200.0.0/16") && parse(c).1 == 26, "{cidrs:?}");
    }
    assert!(
        !launcher.log().contains("not acted on"),
        "the node-ipam flags are acted on now:\n{}",
        launcher.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flag_combinations_exit_2_with_upstreams_message() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().display().to_string();
    for (flags, expected) in [
        (
            vec![
                "--allocate-node-cidrs",
                "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
                "--node-cidr-mask-size=24",
            ],
            "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
        ),
        (
            vec![
                "--allocate-node-cidrs=true",
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size=8",
            ],
            "mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family",
        ),
        (
            vec!["--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16,10.245.0.0/16"],
            "len of ClusterCIDRs==2 and they are not configured as dual stack",
        ),
        (
            vec!["--allocate-node-cidrs", "--cluster-cidr=not-a-cidr"],
            "invalid CIDR[0]: <nil> (invalid CIDR address: not-a-cidr)",
        ),
    ] {
        for command in [
            vec!["launcher", "--runtime-dir", runtime.as_str(), "--secure-port", "0"],
            vec!["worker", "--informer", "unix:///nonexistent/informer.sock"],
        ] {
            assert_usage_error(command.iter().chain(&flags), expected).await;
        }
    }
    // Without --allocate-node-cidrs the same flags are not looked at (KCM does not start
    // the controller, so it does not check them).
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(RKCM)
            .args(["worker", "--informer", "not a url"])
            .args(["--cluster-cidr=not-a-cidr", "--node-cidr-mask-size=8"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("rkcm exits at once on a bad --informer")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--informer") && !stderr.contains("invalid CIDR"),
        "only the --informer error: {stderr}"
    );
}
