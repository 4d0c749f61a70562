//! End-to-end: `rkcm launcher` started exactly as `deploy/static-pod/rkcm.yaml` starts it,
//! under kubeadm's identity (a kubeconfig for the user `system:kube-controller-manager`)
//! with `--use-service-account-credentials=true`, on a cluster that authorizes with RBAC
//! and the API server's bootstrap policy (kube-sim, or a real cluster).
//!
//! Every controller must converge as its own ServiceAccount, and the API server's record
//! of who wrote what must show the controllers' identities, with the kubeconfig's own user
//! writing only ServiceAccounts, their tokens and the Lease. A controller whose role
//! binding is gone logs its refusals (once per distinct refusal a minute) while the others
//! keep working.
//!
//! On a real cluster set `RKCM_TEST_KCM_KUBECONFIG` to kubeadm's
//! `/etc/kubernetes/controller-manager.conf` (and stop kube-controller-manager: the test
//! campaigns for its Lease); without it these tests say they are skipped.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use rkcm_conformance::{wait_for, TestCluster};

const WAIT: Duration = Duration::from_secs(120);
const KCM_USER: &str = "system:kube-controller-manager";
const SA_PREFIX: &str = "system:serviceaccount:kube-system:";

/// The launcher as the static pod runs it, under kubeadm's identity; `None` on a real
/// cluster without `RKCM_TEST_KCM_KUBECONFIG`.
async fn launch_as_kubeadm(cluster: &TestCluster, dir: &Path) -> Option<Launcher> {
    let kubeconfig = match &cluster.sim {
        Some(sim) => {
            let path = dir.join("controller-manager.conf");
            let yaml = sim
                .kubeconfig_for(KCM_USER, &[])
                .expect("a kubeconfig for system:kube-controller-manager");
            std::fs::write(&path, yaml).expect("writing the kubeconfig");
            path.display().to_string()
        }
        None => match std::env::var("RKCM_TEST_KCM_KUBECONFIG") {
            Ok(path) => path,
            Err(_) => {
                println!("skipped on a real cluster: set RKCM_TEST_KCM_KUBECONFIG to kubeadm's controller-manager.conf");
                return None;
            }
        },
    };
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/static-pod/rkcm.yaml"
    ))
    .expect("the static pod manifest");
    let pod: serde_json::Value = serde_yaml::from_str(&manifest).expect("the manifest is YAML");
    let command: Vec<String> = pod["spec"]["containers"][0]["command"]
        .as_array()
        .expect("the manifest has a command")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert_eq!(&command[..2], ["rkcm", "launcher"]);
    assert!(
        command.contains(&"--use-service-account-credentials=true".to_string()),
        "the manifest runs the controllers with their own credentials, as kubeadm does"
    );
    // kubeadm's CA file (--root-ca-file): on kube-sim, its own cluster CA.
    let root_ca = match cluster.sim.as_ref().and_then(|sim| sim.ca()) {
        Some((ca, _)) => {
            let path = dir.join("ca.crt");
            std::fs::write(&path, ca).expect("writing the cluster CA");
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/ca.crt".to_string(),
    };
    // kubeadm's ServiceAccount signing key: on kube-sim, its own key.
    let sa_key = match &cluster.sim {
        Some(sim) => {
            let path = dir.join("sa.key");
            std::fs::write(&path, sim.service_account_key().private_key_pem())
                .expect("writing the ServiceAccount key");
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/sa.key".to_string(),
    };
    // kubeadm's CA key (--cluster-signing-key-file): on kube-sim, its own CA's key.
    let ca_key = match cluster.sim.as_ref().and_then(|sim| sim.ca()) {
        Some((_, key)) => {
            let path = dir.join("ca.key");
            std::fs::write(&path, key).expect("writing the cluster CA key");
            path.display().to_string()
        }
        None => "/etc/kubernetes/pki/ca.key".to_string(),
    };
    let args: Vec<String> = command[2..]
        .iter()
        .filter(|flag| !flag.starts_with("--runtime-dir"))
        .map(|flag| {
            flag.replace("/etc/kubernetes/controller-manager.conf", &kubeconfig)
                .replace("/etc/kubernetes/pki/ca.crt", &root_ca)
                .replace("/etc/kubernetes/pki/sa.key", &sa_key)
                .replace("/etc/kubernetes/pki/ca.key", &ca_key)
        })
        .collect();
    let launcher = Launcher::start_with(args)
        .await
        .expect("the launcher starts under kubeadm's identity");
    Some(launcher)
}

fn fail(launcher: &Launcher, what: impl std::fmt::Display) -> ! {
    panic!("{what}\nlauncher log:\n{}", launcher.log())
}

async fn wait<T, F, Fut>(launcher: &Launcher, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    match wait_for(what, WAIT, check).await {
        Ok(value) => value,
        Err(error) => fail(launcher, format!("{error:#}")),
    }
}

async fn kubectl(cluster: &TestCluster, launcher: &Launcher, args: &[&str]) -> String {
    match cluster.kubectl_ok(args).await {
        Ok(out) => out,
        Err(error) => fail(launcher, format!("{error:#}")),
    }
}

async fn apply(cluster: &TestCluster, launcher: &Launcher, ns: &str, yaml: &str) {
    if let Err(error) = cluster
        .kubectl_stdin(&["apply", "-n", ns, "-f", "-"], yaml)
        .await
    {
        fail(launcher, format!("{error:#}"));
    }
}

/// A namespace made by the test; its `default` ServiceAccount comes from rkcm's
/// serviceaccount controller, acting as `service-account-controller`.
async fn namespace(cluster: &TestCluster, launcher: &Launcher, prefix: &str) -> String {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let name = format!("{prefix}-{}", kube_sim::api::random_suffix(5));
    kubectl(cluster, launcher, &["create", "namespace", &name]).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &name);
    wait(
        launcher,
        "the default ServiceAccount of a new namespace",
        || {
            let accounts = accounts.clone();
            async move { Ok(accounts.get_opt("default").await?.map(|_| ())) }
        },
    )
    .await;
    name
}

async fn running_pods(pods: &Api<Pod>, labels: &str) -> anyhow::Result<usize> {
    let list = pods.list(&ListParams::default().labels(labels)).await?;
    Ok(list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count())
}

const STATEFULSET: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9}]
"#;

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9}]
"#;

const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata:
      annotations: {sim.rkcm.io/exit-after: 300ms}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox:1.36, command: ["sh", "-c", "exit 0"]}]
"#;

async fn job_completes(cluster: &TestCluster, launcher: &Launcher, ns: &str) {
    apply(cluster, launcher, ns, JOB).await;
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), ns);
    wait(launcher, "the Job to complete", || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get("once").await?;
            let complete = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Complete" && c.status == "True")
                });
            Ok(complete.then_some(()))
        }
    })
    .await;
}

/// One line of kube-sim's `kube_sim_requests_by_user_total`.
#[derive(Debug)]
struct Request {
    user: String,
    verb: String,
    resource: String,
    code: String,
    count: f64,
}

fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let needle = format!("{name}=\"");
    labels
        .split(',')
        .find_map(|part| part.trim().strip_prefix(needle.as_str()))
        .map(|value| value.trim_end_matches('"'))
        .unwrap_or("")
}

fn requests_by_user(metrics: &str) -> Vec<Request> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("kube_sim_requests_by_user_total{"))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            let subresource = label(labels, "subresource");
            let resource = if subresource.is_empty() {
                label(labels, "resource").to_string()
            } else {
                format!("{}/{subresource}", label(labels, "resource"))
            };
            Some(Request {
                user: label(labels, "user").to_string(),
                verb: label(labels, "verb").to_lowercase(),
                resource,
                code: label(labels, "code").to_string(),
                count: value.trim().parse().ok()?,
            })
        })
        .collect()
}

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection" | "post" | "put"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_kubeadms_identity_every_controller_writes_as_its_own_service_account() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let Some(launcher) = launch_as_kubeadm(&cluster, dir.path()).await else {
        return;
    };
    let _nodes = simulated_nodes(&cluster, 3).await;
    let ns = namespace(&cluster, &launcher, "kubeadm").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns);

    // A Deployment rolls out, rolls forward and rolls back.
    kubectl(
        &cluster,
        &launcher,
        &[
            "create",
            "deployment",
            "web",
            "--image=registry.k8s.io/pause:3.9",
            "--replicas=2",
            "-n",
            &ns,
        ],
    )
    .await;
    wait(&launcher, "2 running pods of the Deployment", || async {
        Ok((running_pods(&pods, "app=web").await? == 2).then_some(()))
    })
    .await;
    let rollout = [
        "rollout",
        "status",
        "deployment/web",
        "--timeout=120s",
        "-n",
        &ns,
    ];
    kubectl(
        &cluster,
        &launcher,
        &[
            "set",
            "image",
            "deployment/web",
            "pause=registry.k8s.io/pause:3.10",
            "-n",
            &ns,
        ],
    )
    .await;
    kubectl(&cluster, &launcher, &rollout).await;
    kubectl(
        &cluster,
        &launcher,
        &["rollout", "undo", "deployment/web", "-n", &ns],
    )
    .await;
    kubectl(&cluster, &launcher, &rollout).await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), &ns);
    let image = deployments
        .get("web")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0]
        .image
        .clone();
    assert_eq!(
        image.as_deref(),
        Some("registry.k8s.io/pause:3.9"),
        "rolled back"
    );

    // A Service in front of it gets Endpoints and an EndpointSlice listing both pods.
    kubectl(
        &cluster,
        &launcher,
        &[
            "expose",
            "deployment",
            "web",
            "--port=80",
            "--target-port=8080",
            "-n",
            &ns,
        ],
    )
    .await;
    let endpoints: Api<Endpoints> = Api::namespaced(cluster.client.clone(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), &ns);
    wait(&launcher, "Endpoints and an EndpointSlice with the 2 pods", || {
        let (endpoints, slices) = (endpoints.clone(), slices.clone());
        async move {
            let ready: usize = endpoints
                .get_opt("web")
                .await?
                .and_then(|e| e.subsets)
                .iter()
                .flatten()
                .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
                .sum();
            let managed = ListParams::default().labels(
                "kubernetes.io/service-name=web,endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io",
            );
            let slice_ready = slices
                .list(&managed)
                .await?
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .count();
            Ok((ready == 2 && slice_ready == 2).then_some(()))
        }
    })
    .await;

    // A StatefulSet and a DaemonSet become ready; a Job completes.
    apply(&cluster, &launcher, &ns, STATEFULSET).await;
    apply(&cluster, &launcher, &ns, DAEMONSET).await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), &ns);
    wait(&launcher, "the StatefulSet's 2 replicas ready", || {
        let statefulsets = statefulsets.clone();
        async move {
            let status = statefulsets.get("db").await?.status.unwrap_or_default();
            Ok((status.ready_replicas == Some(2)).then_some(()))
        }
    })
    .await;
    let daemonsets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), &ns);
    wait(&launcher, "the DaemonSet ready on every node", || {
        let daemonsets = daemonsets.clone();
        async move {
            let status = daemonsets.get("agent").await?.status.unwrap_or_default();
            Ok((status.desired_number_scheduled > 0
                && status.number_ready == status.desired_number_scheduled)
                .then_some(()))
        }
    })
    .await;
    job_completes(&cluster, &launcher, &ns).await;

    // Background and foreground cascades finish.
    let replicasets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), &ns);
    for (name, policy) in [
        ("background", PropagationPolicy::Background),
        ("foreground", PropagationPolicy::Foreground),
    ] {
        kubectl(
            &cluster,
            &launcher,
            &[
                "create",
                "deployment",
                name,
                "--image=registry.k8s.io/pause:3.9",
                "--replicas=1",
                "-n",
                &ns,
            ],
        )
        .await;
        let selector = format!("app={name}");
        wait(
            &launcher,
            &format!("the {name} Deployment's pod"),
            || async { Ok((running_pods(&pods, &selector).await? == 1).then_some(())) },
        )
        .await;
        deployments
            .delete(
                name,
                &DeleteParams {
                    propagation_policy: Some(policy),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        wait(
            &launcher,
            &format!("the {name} cascade to finish"),
            || async {
                let left_deployment = deployments.get_opt(name).await?.is_some();
                let left_replicasets = replicasets
                    .list(&ListParams::default().labels(&selector))
                    .await?
                    .items
                    .len();
                let left_pods = pods
                    .list(&ListParams::default().labels(&selector))
                    .await?
                    .items
                    .len();
                Ok((!left_deployment && left_replicasets == 0 && left_pods == 0).then_some(()))
            },
        )
        .await;
    }

    // Nothing a controller wrote so far was refused. (From here on a 403 can be right: the
    // API server refuses new content in a terminating namespace with 403, as a real one does.)
    let refused_before_deletion: Vec<Request> = cluster
        .sim
        .as_ref()
        .map(|sim| requests_by_user(&sim.metrics_text()))
        .unwrap_or_default()
        .into_iter()
        .filter(|r| is_write(&r.verb) && r.user.starts_with(SA_PREFIX) && r.code == "403")
        .collect();
    assert!(
        refused_before_deletion.is_empty(),
        "controllers were refused writes their bootstrap roles should allow: {refused_before_deletion:#?}\nlauncher log:\n{}",
        launcher.log()
    );

    // A namespace with content is deleted.
    let doomed = namespace(&cluster, &launcher, "doomed").await;
    kubectl(
        &cluster,
        &launcher,
        &["create", "configmap", "c", "-n", &doomed],
    )
    .await;
    kubectl(
        &cluster,
        &launcher,
        &[
            "create",
            "deployment",
            "d",
            "--image=registry.k8s.io/pause:3.9",
            "-n",
            &doomed,
        ],
    )
    .await;
    kubectl(
        &cluster,
        &launcher,
        &["delete", "namespace", &doomed, "--wait=false"],
    )
    .await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    wait(
        &launcher,
        "the namespace with content to be deleted",
        || {
            let namespaces = namespaces.clone();
            let doomed = doomed.clone();
            async move { Ok(namespaces.get_opt(&doomed).await?.is_none().then_some(())) }
        },
    )
    .await;

    // Who wrote what, as the API server saw it.
    let Some(sim) = cluster.sim_only("the record of requests by user") else {
        cluster.cleanup().await;
        return;
    };
    let requests = requests_by_user(&sim.metrics_text());
    assert!(!requests.is_empty(), "kube-sim records requests by user");
    let writes: Vec<&Request> = requests.iter().filter(|r| is_write(&r.verb)).collect();
    for request in &writes {
        if request.user == KCM_USER {
            let allowed = ["serviceaccounts", "serviceaccounts/token", "leases"];
            assert!(
                allowed.contains(&request.resource.as_str()),
                "{KCM_USER} itself wrote {} {} ({}x): only ServiceAccounts, tokens and the Lease are its own\nlauncher log:\n{}",
                request.verb,
                request.resource,
                request.count,
                launcher.log()
            );
        }
    }
    for (account, resource) in [
        ("deployment-controller", "replicasets"),
        ("replicaset-controller", "pods"),
        ("statefulset-controller", "pods"),
        ("daemon-set-controller", "pods"),
        ("job-controller", "pods"),
        ("service-account-controller", "serviceaccounts"),
        ("generic-garbage-collector", "replicasets"),
        ("endpoint-controller", "endpoints"),
        ("endpointslice-controller", "endpointslices"),
    ] {
        let user = format!("{SA_PREFIX}{account}");
        assert!(
            writes
                .iter()
                .any(|r| r.user == user && r.resource == resource && r.code.starts_with('2')),
            "no successful write of {resource} by {user}: {writes:#?}"
        );
    }
    assert!(
        writes.iter().any(
            |r| r.user == format!("{SA_PREFIX}namespace-controller") && r.code.starts_with('2')
        ),
        "the namespace controller wrote as namespace-controller"
    );
    assert!(
        !launcher.log().contains("not acted on")
            || !launcher.log().lines().any(
                |l| l.contains("not acted on") && l.contains("use-service-account-credentials")
            ),
        "--use-service-account-credentials is acted on"
    );
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_without_its_role_binding_logs_refusals_and_the_others_converge() {
    let cluster = TestCluster::start().await.unwrap();
    if cluster
        .sim_only("deleting a bootstrap role binding")
        .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(launcher) = launch_as_kubeadm(&cluster, dir.path()).await else {
        return;
    };
    let _nodes = simulated_nodes(&cluster, 2).await;
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    let binding_name = "system:controller:replicaset-controller";
    let binding = bindings.get(binding_name).await.unwrap();
    bindings
        .delete(binding_name, &DeleteParams::default())
        .await
        .unwrap();

    let ns = namespace(&cluster, &launcher, "norbac").await;
    kubectl(
        &cluster,
        &launcher,
        &[
            "create",
            "deployment",
            "web",
            "--image=registry.k8s.io/pause:3.9",
            "--replicas=2",
            "-n",
            &ns,
        ],
    )
    .await;
    let refusal = |log: &str| {
        log.lines()
            .filter(|line| {
                line.contains("refused")
                    && line.contains("replicaset-controller")
                    && line.contains(&format!("{SA_PREFIX}replicaset-controller"))
                    && line.contains("create")
                    && line.contains(&format!("pods in namespace {ns}"))
            })
            .count()
    };
    wait(
        &launcher,
        "the replicaset controller to log its refusal",
        || async { Ok((refusal(&launcher.log()) > 0).then_some(())) },
    )
    .await;

    // The others keep working: the Deployment made its ReplicaSet, a Job completes.
    let replicasets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), &ns);
    let made = replicasets.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        made.items.len(),
        1,
        "the deployment controller made its ReplicaSet"
    );
    job_completes(&cluster, &launcher, &ns).await;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns);
    assert_eq!(running_pods(&pods, "app=web").await.unwrap(), 0);
    // The controller retried many times meanwhile; the refusal was logged once (the job
    // took well under a minute).
    assert_eq!(
        refusal(&launcher.log()),
        1,
        "one log line per distinct refusal a minute\n{}",
        launcher.log()
    );

    // The binding back: the pods come, with no restart.
    let mut restored = binding;
    restored.metadata.resource_version = None;
    restored.metadata.uid = None;
    restored.metadata.creation_timestamp = None;
    restored.metadata.managed_fields = None;
    bindings
        .create(&PostParams::default(), &restored)
        .await
        .unwrap();
    wait(
        &launcher,
        "the ReplicaSet's pods once the binding is back",
        || async { Ok((running_pods(&pods, "app=web").await? == 2).then_some(())) },
    )
    .await;
    cluster.cleanup().await;
}

/// A controller whose ServiceAccount token cannot be had waits, named with the reason in
/// the worker's `/readyz`, while the others run; once the token can be had it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_without_credentials_waits_and_the_others_run() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let cluster = TestCluster::start().await.unwrap();
    let Some(sim) = cluster.sim_only("a kubeconfig for a test identity") else {
        return;
    };
    // An identity that may ask tokens for service-account-controller only.
    let user = "rkcm-partial";
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
    "metadata": {"name": user},
    "rules": [
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
         "resourceNames": ["service-account-controller"]},
    ]}))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    let binding = |name: &str, role: &str| -> ClusterRoleBinding {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}))
        .unwrap()
    };
    bindings
        .create(&PostParams::default(), &binding(user, user))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("partial.conf");
    std::fs::write(&kubeconfig, sim.kubeconfig_for(user, &[]).unwrap()).unwrap();

    let informer = InformerServer::start(&cluster, &[]).await.unwrap();
    let health = format!("127.0.0.1:{}", free_port());
    let log_path = dir.path().join("worker.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _worker = tokio::process::Command::new(RKCM)
        .args(["worker", "--kubeconfig", &kubeconfig.display().to_string()])
        .args([
            "--informer",
            &informer.address(),
            "--health-bind-address",
            &health,
        ])
        .args([
            "--controllers=serviceaccount,deployment",
            "--use-service-account-credentials",
        ])
        .env("RKCM_LOG", "info")
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let worker_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let readyz = wait_for(
        "/readyz to name the controller without credentials",
        WAIT,
        || {
            let health = health.clone();
            async move {
                Ok(match http_get(&health, "/readyz").await {
                    // The first refusal may take a moment to come back: wait for it.
                    Ok((500, body))
                        if body.contains("credentials of deployment-controller")
                            && body.contains("forbidden") =>
                    {
                        Some(body)
                    }
                    _ => None,
                })
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", worker_log()));
    assert!(
        !readyz.contains("credentials of serviceaccount-controller: requesting"),
        "only the deployment controller is refused: {readyz}"
    );

    // The serviceaccount controller runs meanwhile, as itself.
    let ns = format!("partial-{}", kube_sim::api::random_suffix(5));
    cluster
        .kubectl_ok(&["create", "namespace", &ns])
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &ns);
    wait_for(
        "the default ServiceAccount from the running controller",
        WAIT,
        || {
            let accounts = accounts.clone();
            async move { Ok(accounts.get_opt("default").await?.map(|_| ())) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", worker_log()));
    cluster
        .kubectl_ok(&[
            "create",
            "deployment",
            "web",
            "--image=registry.k8s.io/pause:3.9",
            "-n",
            &ns,
        ])
        .await
        .unwrap();

    // Tokens for everyone: the waiting controller starts without a restart.
    bindings
        .create(
            &PostParams::default(),
            &binding("rkcm-partial-kcm", "system:kube-controller-manager"),
        )
        .await
        .unwrap();
    let replicasets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), &ns);
    wait_for(
        "the deployment controller to start and make its ReplicaSet",
        WAIT,
        || {
            let replicasets = replicasets.clone();
            async move {
                let made = replicasets.list(&ListParams::default()).await?.items.len();
                Ok((made == 1).then_some(()))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", worker_log()));
    assert!(matches!(http_get(&health, "/readyz").await, Ok((200, _))));
}
