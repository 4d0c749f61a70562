//! `rkcm dev`: the whole thing on one machine, for a first look. It starts the embedded
//! development cluster (kube-sim and node-sim's simulated nodes) with its keys in a PKI
//! directory as kubeadm's `/etc/kubernetes/pki` (`ca.crt`, `ca.key`, `sa.key`, `sa.pub`),
//! then `rkcm launcher` as its own process (which starts the informer-server and the
//! workers) with the flags kubeadm's manifest gives KCM for them (`--root-ca-file`,
//! `--service-account-private-key-file`, `--cluster-signing-{cert,key}-file`, and a hostPath recycler pod template node-sim
//! completes), writes a
//! kubeconfig, creates the default StorageClass `standard` (csi-sim's driver,
//! WaitForFirstConsumer, growable; `--no-csi` leaves csi-sim and the class out), a small demo (namespace `rkcm-demo` with a Deployment `hello`),
//! and says how to watch it with kubectl, grpcurl and curl. Ctrl-C stops everything.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube_sim::nodesim::{self, NodeSim, NodeSimConfig};
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tracing::info;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DevArgs {
    /// Where to write the development cluster's admin kubeconfig.
    #[arg(long, default_value = "./rkcm-dev.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// The development API server's address (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// The launcher's secure port (its /healthz, /readyz, /metrics).
    #[arg(long, default_value_t = 10257)]
    pub secure_port: u16,
    /// The launcher's runtime directory (the informer-server's socket is in it).
    #[arg(long, default_value = "./.rkcm-dev")]
    pub runtime_dir: PathBuf,
    /// Where the development cluster writes its keys (default: `pki` in --runtime-dir).
    #[arg(long)]
    pub pki_dir: Option<PathBuf>,
    /// Do not create the demo namespace and Deployment.
    #[arg(long)]
    pub no_demo: bool,
    /// Do not run csi-sim (the simulated CSI drivers `csi.sim.rkcm.io` and
    /// `noattach.csi.sim.rkcm.io`) nor create the default StorageClass `standard`.
    #[arg(long)]
    pub no_csi: bool,
    /// Passed on to the launcher; `sim` runs the cloud controllers against rkcm's simulated
    /// cloud (node-sim then leaves the NetworkUnavailable condition to the route
    /// controller). None by default, as KCM.
    #[arg(long, default_value = "")]
    pub cloud_provider: String,
    /// kube-sim's `--runtime-config` (kube-apiserver's flag): e.g.
    /// `networking.k8s.io/v1alpha1=true,internal.apiserver.k8s.io/v1alpha1=true`.
    #[arg(long, default_value = "")]
    pub apiserver_runtime_config: String,
    /// kube-sim's `--feature-gates` (kube-apiserver's gates it honours), e.g.
    /// `MultiCIDRServiceAllocator=true,StorageVersionAPI=true`.
    #[arg(long, default_value = "")]
    pub apiserver_feature_gates: String,
    /// Passed on to the launcher (KCM's `--feature-gates`, repeatable).
    #[arg(long)]
    pub feature_gates: Vec<String>,
}

/// The hostPath recycler pod of the development cluster: upstream's default template, whose
/// containers node-sim ends (successfully) after a second.
const RECYCLER_POD_TEMPLATE: &str = r#"apiVersion: v1
kind: Pod
metadata:
  generateName: pv-recycler-
  namespace: default
  annotations:
    sim.rkcm.io/exit-after: 1s
spec:
  restartPolicy: Never
  volumes:
  - name: vol
  containers:
  - name: pv-recycler
    image: registry.k8s.io/build-image/debian-base:bookworm-v1.0.3
    command: ["/bin/sh"]
    args: ["-c", "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1"]
    volumeMounts:
    - name: vol
      mountPath: /scrub
"#;

/// The launcher's cloud flags: none by default; with the simulated cloud, also the node
/// CIDR allocation the route controller needs (node-sim's podCIDRs are in 10.244.0.0/14).
fn cloud_args(provider: &str) -> Vec<String> {
    match provider {
        "" => vec![],
        "sim" => vec![
            "--cloud-provider=sim".into(),
            "--allocate-node-cidrs".into(),
            "--cluster-cidr=10.244.0.0/14".into(),
        ],
        other => vec![format!("--cloud-provider={other}")],
    }
}

pub(crate) async fn run(args: DevArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.runtime_dir)
        .with_context(|| format!("creating {}", args.runtime_dir.display()))?;
    let runtime_dir = std::fs::canonicalize(&args.runtime_dir)?;
    let pki_dir = args
        .pki_dir
        .clone()
        .unwrap_or_else(|| runtime_dir.join("pki"));
    let sim = kube_sim::KubeSim::start(kube_sim::Config {
        listen: args.listen,
        pki_dir: Some(pki_dir.clone()),
        runtime_config: args.apiserver_runtime_config.clone(),
        feature_gates: args.apiserver_feature_gates.clone(),
        ..Default::default()
    })
    .await
    .context("starting the development cluster")?;
    sim.write_kubeconfig(&args.kubeconfig_out)
        .with_context(|| format!("writing {}", args.kubeconfig_out.display()))?;
    let kubeconfig = std::fs::canonicalize(&args.kubeconfig_out)?;
    info!(url = %sim.url(), kubeconfig = %kubeconfig.display(), "development cluster ready");
    let _nodes = NodeSim::start(
        nodesim::client_from_kubeconfig(sim.kubeconfig()).await?,
        NodeSimConfig {
            nodes: args.nodes,
            csi: !args.no_csi,
            network_condition: args.cloud_provider != "sim",
            ..Default::default()
        },
    );
    let pki_dir = std::fs::canonicalize(&pki_dir)?;
    let recycler_template = runtime_dir.join("recycler-pod.yaml");
    std::fs::write(&recycler_template, RECYCLER_POD_TEMPLATE)
        .with_context(|| format!("writing {}", recycler_template.display()))?;
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    crate::supervisor::die_with_parent_in_own_group(&mut command);
    let mut launcher = command
        .arg("launcher")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--runtime-dir")
        .arg(&runtime_dir)
        // As kubeadm's manifest names /etc/kubernetes/pki's files.
        .arg("--root-ca-file")
        .arg(pki_dir.join("ca.crt"))
        .arg("--service-account-private-key-file")
        .arg(pki_dir.join("sa.key"))
        .arg("--cluster-signing-cert-file")
        .arg(pki_dir.join("ca.crt"))
        .arg("--cluster-signing-key-file")
        .arg(pki_dir.join("ca.key"))
        // node-sim runs the recycler pod for a second; the binder recycles hostPath volumes.
        .arg("--pv-recycler-pod-template-filepath-hostpath")
        .arg(&recycler_template)
        .args(cloud_args(&args.cloud_provider))
        .args(
            args.feature_gates
                .iter()
                .map(|g| format!("--feature-gates={g}")),
        )
        .args([
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            &args.secure_port.to_string(),
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting rkcm launcher")?;

    let client = sim.client().await?;
    if !args.no_csi {
        create_default_storage_class(&client).await?;
    }
    if !args.no_demo {
        create_demo(&client).await?;
    }
    let socket = runtime_dir.join("informer.sock");
    println!(
        "\nrkcm dev is running: kube-sim at {url} with {nodes} simulated nodes, rkcm launcher (pid {pid}).\n\
         \n  export KUBECONFIG={kc}\n\
         \x20 kubectl get deployments,replicasets,pods -n rkcm-demo\n\
         \x20 kubectl scale deployment/hello -n rkcm-demo --replicas=5\n\
         \x20 kubectl set image deployment/hello -n rkcm-demo pause=registry.k8s.io/pause:3.10\n\
         \x20 grpcurl -plaintext -unix {socket} list\n\
         \x20 grpcurl -plaintext -unix -d '{{\"resource\":{{\"group\":\"apps\",\"version\":\"v1\",\"resource\":\"deployments\"}},\"namespace\":\"rkcm-demo\"}}' {socket} rkcm.informer.v1.Informer/Watch\n\
         \x20 curl -k https://127.0.0.1:{port}/healthz\n\
         \nCtrl-C stops everything.\n",
        url = sim.url(),
        nodes = args.nodes,
        pid = launcher.id().unwrap_or(0),
        kc = kubeconfig.display(),
        socket = socket.display(),
        port = args.secure_port,
    );

    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let exited = tokio::select! {
        status = launcher.wait() => Some(status),
        _ = terminate.recv() => None,
        _ = interrupt.recv() => None,
    };
    if let Some(status) = exited {
        anyhow::bail!("rkcm launcher exited: {:?}", status.ok());
    }
    info!("stopping");
    if let Some(pid) = launcher.id() {
        // SAFETY: kill(2) on our own child.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    if tokio::time::timeout(Duration::from_secs(40), launcher.wait())
        .await
        .is_err()
    {
        let _ = launcher.kill().await;
    }
    Ok(())
}

/// The development cluster's default StorageClass: csi-sim's driver, volumes made for the
/// node the scheduler picks, and growable.
async fn create_default_storage_class(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::api::storage::v1::StorageClass;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let standard: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": nodesim::csi::DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": true,
    }))?;
    match classes.create(&PostParams::default(), &standard).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error).context("creating the default StorageClass standard"),
    }
}

async fn create_demo(client: &kube::Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rkcm-demo"}}))?,
        )
        .await
        .context("creating the demo namespace")?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "rkcm-demo");
    let hello: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "hello", "labels": {"app": "hello"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "hello"}},
            "template": {"metadata": {"labels": {"app": "hello"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}}}}))?;
    deployments
        .create(&PostParams::default(), &hello)
        .await
        .context("creating the demo Deployment")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binder reads the template `rkcm dev` writes, as it reads any.
    #[test]
    fn the_recycler_template_is_one_the_binder_takes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recycler-pod.yaml");
        std::fs::write(&path, RECYCLER_POD_TEMPLATE).unwrap();
        let options = rkcm_controller_workers::controllers::pvbinder::Options {
            pv_recycler_pod_template_filepath_hostpath: path.display().to_string(),
            ..rkcm_controller_workers::registry::ControllerOptions::default().pv_binder
        };
        options.validate().unwrap();
    }
}
