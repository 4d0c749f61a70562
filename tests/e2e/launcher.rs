//! End-to-end tests of `rkcm launcher` and `rkcm dev`: the real binary as its own process
//! (re-executing itself for the informer-server and the workers), against the test
//! cluster; checked with kube-rs, kubectl, curl on the secure port and /proc.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use rkcm_conformance::{wait_for, TestCluster};

const WAIT: Duration = Duration::from_secs(90);

fn lease_name() -> String {
    format!("rkcm-test-{}", kube_sim::api::random_suffix(6))
}

async fn nodes(cluster: &TestCluster) -> Option<common::SimNodes> {
    simulated_nodes(cluster, 2).await
}

async fn holder(cluster: &TestCluster, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
    leases
        .get_opt(lease)
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// Creates `web` with `replicas` pods in a new namespace and waits until they run.
async fn deployment_runs(cluster: &TestCluster, ns: &str, replicas: u32, what: &str) {
    let out = cluster
        .kubectl(&[
            "scale",
            "deployment/web",
            "--replicas",
            &replicas.to_string(),
            "-n",
            ns,
        ])
        .await
        .unwrap();
    if !out.status.success() {
        cluster
            .kubectl_ok(&[
                "create",
                "deployment",
                "web",
                "--image",
                "registry.k8s.io/pause:3.9",
                "--replicas",
                &replicas.to_string(),
                "-n",
                ns,
            ])
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), ns);
    wait_for(what, WAIT, || async {
        let list = pods.list(&ListParams::default()).await?;
        let running = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        Ok((running == replicas as usize).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_launchers_elect_one_leader_and_fail_over_after_sigkill() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let _nodes = nodes(&cluster).await;
    let lease = lease_name();
    let mut a = Launcher::start(&cluster, &lease, &[]).await.unwrap();
    let mut b = Launcher::start(&cluster, &lease, &[]).await.unwrap();
    let identities = [a.identity().unwrap(), b.identity().unwrap()];
    let first = wait_for("a leader in the Lease", WAIT, || async {
        Ok(holder(&cluster, &lease).await)
    })
    .await
    .unwrap();
    assert!(identities.contains(&first), "{first} is neither launcher");
    let (leader, standby) = if first == identities[0] {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    wait_for("the leader's metrics to say so", WAIT, || async {
        Ok(leader.leading().await.then_some(()))
    })
    .await
    .unwrap();
    assert!(!standby.leading().await, "exactly one leads");
    assert!(
        standby.children("worker").is_empty(),
        "the standby runs no worker"
    );
    assert_eq!(
        standby.children("informer-server").len(),
        1,
        "the standby keeps a warm informer-server"
    );

    let ns = cluster.namespace("failover").await.unwrap();
    deployment_runs(&cluster, &ns, 2, "2 pods under the first leader").await;

    let orphans = leader.children("worker");
    assert_eq!(
        orphans.len(),
        2,
        "default and garbage-collector: {}",
        leader.log()
    );
    leader.child.start_kill().unwrap();
    leader.child.wait().await.unwrap();
    let killed = Instant::now();
    let standby_id = standby.identity().unwrap();
    wait_for("the standby to take the Lease", WAIT, || async {
        Ok((holder(&cluster, &lease).await.as_deref() == Some(standby_id.as_str())).then_some(()))
    })
    .await
    .unwrap();
    println!(
        "failover: the standby holds the Lease {:?} after the leader's SIGKILL (lease duration 4s)",
        killed.elapsed()
    );
    wait_for("the old leader's worker to die with it", WAIT, || async {
        Ok(orphans
            .iter()
            .all(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .then_some(()))
    })
    .await
    .unwrap();
    deployment_runs(&cluster, &ns, 4, "4 pods under the new leader").await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
    let spec = leases.get(&lease).await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1), "{spec:?}");
    assert!(standby
        .log()
        .contains(&format!("successfully acquired lease kube-system/{lease}")));
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_restarted_and_the_cluster_converges() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let _nodes = nodes(&cluster).await;
    let launcher = Launcher::start(&cluster, &lease_name(), &[]).await.unwrap();
    let ns = cluster.namespace("restart").await.unwrap();
    deployment_runs(&cluster, &ns, 2, "2 pods").await;
    let before = launcher.children("worker --group default");
    assert_eq!(before.len(), 1, "{}", launcher.log());
    // SAFETY: kill(2) on a test-owned process.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(before[0] as i32, libc::SIGKILL);
    }
    wait_for("a restarted worker", WAIT, || async {
        let metrics = launcher.metrics().await?;
        let restarted =
            metrics.contains("rkcm_child_restarts_total{rkcm_child=\"worker-default\"} 1");
        let now = launcher.children("worker --group default");
        Ok((restarted && now.len() == 1 && now != before).then_some(()))
    })
    .await
    .unwrap();
    deployment_runs(&cluster, &ns, 3, "3 pods after the restart").await;
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_in_separate_processes_share_one_watch_per_resource() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let _nodes = nodes(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups.yaml");
    std::fs::write(
        &groups,
        "groups:\n- name: apps\n  controllers: [deployment]\n- name: replicas\n  controllers: [replicaset]\n  shards: 2\n- name: rest\n  controllers: ['*', -deployment, -replicaset]\n",
    )
    .unwrap();
    let launcher = Launcher::start(
        &cluster,
        &lease_name(),
        &["--process-groups", groups.to_str().unwrap()],
    )
    .await
    .unwrap();
    wait_for("four workers", WAIT, || async {
        Ok((launcher.children("rkcm worker").len() == 4).then_some(()))
    })
    .await
    .unwrap();
    let ns = cluster.namespace("groups").await.unwrap();
    deployment_runs(&cluster, &ns, 3, "3 pods from split groups").await;
    let ps: Vec<String> = launcher
        .children("rkcm worker")
        .iter()
        .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .collect();
    for expected in [
        "--group apps",
        "--group replicas",
        "--shard 0/2",
        "--shard 1/2",
        "--group rest",
    ] {
        assert!(
            ps.iter().any(|c| c.contains(expected)),
            "no worker with {expected}: {ps:#?}"
        );
    }
    if let Some(sim) = cluster.sim_only("kube_sim_watches") {
        for resource in ["pods", "replicasets.apps", "deployments.apps"] {
            // A re-established watch may overlap its predecessor for a moment.
            let what = format!("{resource}: one watch from all of rkcm");
            wait_for(&what, WAIT, || async {
                let open = sim.open_watches(resource, "rkcm-");
                Ok((open == 1).then_some(()).or_else(|| {
                    println!("{resource}: {open} watches open");
                    None
                }))
            })
            .await
            .unwrap();
        }
    }
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_answers_curl_like_kcm() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let launcher = Launcher::start(&cluster, &lease_name(), &[]).await.unwrap();
    assert_eq!(
        curl(&format!("{}/healthz", launcher.secure)).await.unwrap(),
        "ok"
    );
    let verbose = curl(&format!("{}/healthz?verbose", launcher.secure))
        .await
        .unwrap();
    assert!(
        verbose.contains("[+]leaderElection ok") && verbose.contains("healthz check passed"),
        "{verbose}"
    );
    wait_for("readyz with every child", WAIT, || async {
        let ready = curl(&format!("{}/readyz?verbose", launcher.secure)).await?;
        Ok((ready.contains("[+]informer-server ok")
            && ready.contains("[+]worker-default ok")
            && ready.contains("[+]worker-garbage-collector ok"))
        .then_some(ready))
    })
    .await
    .unwrap();
    let metrics = launcher.metrics().await.unwrap();
    for expected in [
        "leader_election_master_status{name=\"",
        "rkcm_child_restarts_total{rkcm_child=\"worker-default\"}",
        "rkcm_informer_watches{rkcm_child=\"informer-server\"",
        "workqueue_depth{rkcm_child=\"worker-default\",name=\"deployment\"}",
    ] {
        assert!(metrics.contains(expected), "no {expected} in:\n{metrics}");
    }
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configuration_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups.yaml");
    std::fs::write(
        &groups,
        "groups:\n- name: a\n  controllers: [deployment]\n- name: b\n  controllers:\n  - deployment\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("bad.kubeconfig");
    std::fs::write(&kubeconfig, "this: [is not a kubeconfig").unwrap();
    let runtime = dir.path().join("run");
    let runtime = runtime.to_str().unwrap();
    let groups_flag = groups.to_str().unwrap();
    let kubeconfig_flag = kubeconfig.to_str().unwrap();
    for (args, expected) in [
        (vec!["--frobnicate"], "unexpected argument '--frobnicate'"),
        (
            vec!["--process-groups", groups_flag],
            "groups.yaml:6: deployment-controller is in both group \"a\" and group \"b\"",
        ),
        (vec!["--kubeconfig", kubeconfig_flag], "bad.kubeconfig"),
        (
            vec!["--leader-elect-resource-lock", "endpoints"],
            "invalid value 'endpoints'",
        ),
        (
            vec!["--controllers", "*,frobnicator"],
            "\"frobnicator\" is not a kube-controller-manager controller",
        ),
        (
            vec!["--leader-elect-lease-duration", "5s"],
            "must be greater than --leader-elect-renew-deadline",
        ),
    ] {
        let command = ["launcher", "--runtime-dir", runtime, "--secure-port", "0"];
        assert_usage_error(command.into_iter().chain(args), expected).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rkcm_dev_brings_the_demo_deployment_to_available() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("rkcm-dev.kubeconfig");
    let log = std::fs::File::create(dir.path().join("dev.log")).unwrap();
    let mut dev = tokio::process::Command::new(RKCM)
        .arg("dev")
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--runtime-dir")
        .arg(dir.path().join("run"))
        .args(["--secure-port", &free_port().to_string()])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let dev_log = || std::fs::read_to_string(dir.path().join("dev.log")).unwrap_or_default();
    let client = wait_for("rkcm dev's kubeconfig", WAIT, || async {
        let yaml = std::fs::read_to_string(&kubeconfig)?;
        Ok(Some(kube_sim::client_from_kubeconfig(&yaml).await?))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", dev_log()));
    let deployments: Api<Deployment> = Api::namespaced(client, "rkcm-demo");
    wait_for("the demo Deployment to be Available", WAIT, || async {
        let Some(hello) = deployments.get_opt("hello").await? else {
            return Ok(None);
        };
        let available = hello
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True");
        Ok(available.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", dev_log()));
    assert!(
        dev_log().contains("kubectl get deployments,replicasets,pods -n rkcm-demo"),
        "{}",
        dev_log()
    );
    // The development cluster's keys, as kubeadm's /etc/kubernetes/pki holds them, are
    // given to the launcher as kubeadm's manifest gives them to KCM: no flag is ignored.
    for file in ["ca.crt", "ca.key", "sa.key", "sa.pub"] {
        assert!(
            dir.path().join("run/pki").join(file).is_file(),
            "run/pki/{file}"
        );
    }
    assert!(!dev_log().contains("not acted on"), "{}", dev_log());
    assert!(
        dev_log().contains("signing legacy service account tokens"),
        "the serviceaccount-token controller runs with the cluster's key:\n{}",
        dev_log()
    );
    // Ctrl-C stops everything.
    // SAFETY: kill(2) on our own child.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(dev.id().unwrap() as i32, libc::SIGINT);
    }
    let status = tokio::time::timeout(WAIT, dev.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}\n{}", dev_log());
}

/// The static pod's command line, with the node's paths replaced by the test's, starts
/// the launcher: every kubeadm flag is accepted, and the ones rkcm does not act on yet
/// are named in warnings. (`kubeadm_identity.rs` runs the same command line under
/// kubeadm's own identity.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_static_pod_manifest_flags_start_the_launcher() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/static-pod/rkcm.yaml"
    ))
    .unwrap();
    let pod: serde_json::Value = serde_yaml::from_str(&manifest).unwrap();
    let command: Vec<String> = pod["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(&command[..2], ["rkcm", "launcher"]);
    // On kube-sim, kubeadm's own identity (which may hold only KCM's Lease, so that one);
    // on a real cluster the test's kubeconfig and a Lease of the test's own.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = match &cluster.sim {
        Some(sim) => {
            let path = dir.path().join("controller-manager.conf");
            std::fs::write(
                &path,
                sim.kubeconfig_for("system:kube-controller-manager", &[])
                    .unwrap(),
            )
            .unwrap();
            path.display().to_string()
        }
        None => cluster.kubeconfig.display().to_string(),
    };
    // kubeadm's CA file (--root-ca-file, acted on by the root-ca publisher): on kube-sim,
    // its own cluster CA.
    let root_ca = match cluster.sim.as_ref().and_then(|sim| sim.ca()) {
        Some((ca, _)) => {
            let path = dir.path().join("ca.crt");
            std::fs::write(&path, ca).unwrap();
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/ca.crt".to_string(),
    };
    // kubeadm's ServiceAccount signing key (--service-account-private-key-file, acted on by
    // the token controller): on kube-sim, its own key.
    let sa_key = match &cluster.sim {
        Some(sim) => {
            let path = dir.path().join("sa.key");
            std::fs::write(&path, sim.service_account_key().private_key_pem()).unwrap();
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/sa.key".to_string(),
    };
    // kubeadm's CA key (--cluster-signing-key-file, acted on by the CSR signer): on
    // kube-sim, its own CA's key.
    let ca_key = match cluster.sim.as_ref().and_then(|sim| sim.ca()) {
        Some((_, key)) => {
            let path = dir.path().join("ca.key");
            std::fs::write(&path, key).unwrap();
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/ca.key".to_string(),
    };
    let mut args: Vec<String> = command[2..]
        .iter()
        .filter(|flag| !flag.starts_with("--runtime-dir"))
        .map(|flag| {
            flag.replace("/etc/kubernetes/controller-manager.conf", &kubeconfig)
                .replace("/etc/kubernetes/pki/ca.crt", &root_ca)
                .replace("/etc/kubernetes/pki/sa.key", &sa_key)
                .replace("/etc/kubernetes/pki/ca.key", &ca_key)
        })
        .collect();
    if cluster.sim.is_none() {
        args.push(format!("--leader-elect-resource-name={}", lease_name()));
    }
    let launcher = Launcher::start_with(args).await.unwrap();
    let log = launcher.log();
    for flag in ["--client-ca-file", "--requestheader-client-ca-file"] {
        assert!(
            log.contains(&format!("flag=\"{flag}\"")) || log.contains(&format!("flag={flag}")),
            "no warning naming {flag}:\n{log}"
        );
    }
    for flag in [
        "--use-service-account-credentials",
        "--root-ca-file",
        "--cluster-signing-cert-file",
        "--cluster-signing-key-file",
        "--service-account-private-key-file",
    ] {
        assert!(
            !log.contains(&format!("flag=\"{flag}\"")) && !log.contains(&format!("flag={flag} ")),
            "{flag} is acted on, not warned about:\n{log}"
        );
    }
    // Delegated authentication is on (--authentication-kubeconfig): /metrics needs a token.
    let out = tokio::process::Command::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{}/metrics", launcher.secure),
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
    assert_eq!(
        curl(&format!("{}/healthz", launcher.secure)).await.unwrap(),
        "ok"
    );
    cluster.cleanup().await;
}

/// The distributed mode's wiring: certificates from `rkcm certs`, the informer-server
/// on TCP with mutual TLS, a worker connecting with its client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certs_from_rkcm_certs_connect_a_worker_to_a_tcp_informer_server() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let out = tokio::process::Command::new(RKCM)
        .args([
            "certs",
            "--out-dir",
            certs.to_str().unwrap(),
            "--server-name",
            "127.0.0.1",
            "--client-name",
            "rkcm-worker",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = |name: &str| certs.join(name).display().to_string();
    let port = free_port();
    let informer = tokio::process::Command::new(RKCM)
        .args([
            "informer-server",
            "--kubeconfig",
            &cluster.kubeconfig.display().to_string(),
        ])
        .args(["--listen", &format!("tcp://127.0.0.1:{port}")])
        .args([
            "--tls-cert",
            &path("server.crt"),
            "--tls-key",
            &path("server.key"),
            "--client-ca",
            &path("ca.crt"),
        ])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .kill_on_drop(true)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let health = format!("127.0.0.1:{}", free_port());
    let worker = tokio::process::Command::new(RKCM)
        .args([
            "worker",
            "--kubeconfig",
            &cluster.kubeconfig.display().to_string(),
        ])
        .args([
            "--controllers",
            "serviceaccount",
            "--health-bind-address",
            &health,
        ])
        .args(["--informer", &format!("tcp://127.0.0.1:{port}")])
        .args([
            "--informer-cert",
            &path("rkcm-worker.crt"),
            "--informer-key",
            &path("rkcm-worker.key"),
            "--informer-ca",
            &path("ca.crt"),
        ])
        .kill_on_drop(true)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the worker, over mutual TLS, to be ready", WAIT, || async {
        Ok(matches!(http_get(&health, "/readyz").await, Ok((200, _))).then_some(()))
    })
    .await
    .unwrap();
    drop((informer, worker));
    cluster.cleanup().await;
}
