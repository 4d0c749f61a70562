//! kube-sim: rkcm's development cluster. An in-memory Kubernetes API server that speaks
//! the real protocol (HTTPS with client certificates, discovery, OpenAPI v3, list/watch
//! with resourceVersions, patches, deletion propagation, subresources, CRDs), so every test,
//! benchmark and demo of rkcm runs against something kubectl and kube-rs accept as a cluster.
//!
//! In tests: `let sim = KubeSim::start(Config::default()).await?; let client = sim.client().await?;`

pub mod admission_policies;
mod admission_policy_enforce;
pub mod api;
pub mod certs;
pub mod crd;
pub mod csr;
pub mod defaults;
pub mod discovery;
pub mod dra;
pub mod faults;
pub mod gated_apis;
pub mod go_json;
mod go_value;
pub mod hpa_conversion;
pub mod kubernetes_service;
pub mod legacy_tokens;
pub mod managed_fields;
pub mod metrics;
pub mod metrics_api;
pub mod nodesim;
mod omitempty;
mod openapi_docs;
pub mod quantities;
mod quantity_paths;
mod query_options;
pub mod quota;
pub mod rbac;
pub mod request;
pub mod resources;
pub mod server;
pub mod status;
pub mod storage;
pub mod store;
pub mod strategic_merge;
pub mod table;
pub mod typed;
pub mod validation;
pub mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use api::Sim;
pub use faults::Failure;

/// How to run a development cluster.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// How many writes the watch history keeps (older resourceVersions get 410 Gone).
    pub history: usize,
    /// Serve plain HTTP with a bearer token instead of HTTPS (debugging only).
    pub plain_http: bool,
    /// `--service-cluster-ip-range`.
    pub service_cluster_ip_range: String,
    /// `--service-node-port-range`: the node ports of NodePort and LoadBalancer Services
    /// (`LOW-HIGH`, `LOW+OFFSET` or one port; default `30000-32767`).
    pub service_node_port_range: String,
    /// `--advertise-address`: the address the `default/kubernetes` Endpoints list. `None`
    /// takes the listen address, or [`kubernetes_service::DEFAULT_ADVERTISE_ADDRESS`] when
    /// that is loopback or unspecified (an Endpoints address may be neither).
    pub advertise_address: Option<std::net::IpAddr>,
    /// `--pki-dir`: where to write the cluster's keys as kubeadm's `/etc/kubernetes/pki`
    /// holds them: `ca.crt`/`ca.key` (the CA that signs the serving and client
    /// certificates; HTTPS only) and `sa.key`/`sa.pub` (the ServiceAccount token signing
    /// key pair, whose public half verifies legacy tokens). Created if missing; the files
    /// are rewritten at every start.
    pub pki_dir: Option<PathBuf>,
    /// `--service-account-signing-key-file`'s PEM: the ServiceAccount token key pair to
    /// use (RSA, as kubeadm's `sa.key`, or ECDSA P-256; PKCS#8) instead of a fresh P-256
    /// one.
    pub service_account_signing_key: Option<String>,
    /// `--runtime-config`: `networking.k8s.io/v1alpha1=true`,
    /// `internal.apiserver.k8s.io/v1alpha1=true`, `resource.k8s.io/v1alpha2=true` and
    /// `admissionregistration.k8s.io/v1beta1=true` are what kube-sim honours
    /// ([`gated_apis`]); empty serves only the built-in group versions.
    pub runtime_config: String,
    /// `--feature-gates`: `MultiCIDRServiceAllocator`, `StorageVersionAPI`,
    /// `APIServerIdentity`, `DynamicResourceAllocation` and `ValidatingAdmissionPolicy`, as
    /// `Name=bool` pairs.
    pub feature_gates: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: 10_000,
            plain_http: false,
            service_cluster_ip_range: "10.96.0.0/12".into(),
            service_node_port_range: api::port_allocator::DEFAULT_SERVICE_NODE_PORT_RANGE.into(),
            advertise_address: None,
            pki_dir: None,
            service_account_signing_key: None,
            runtime_config: String::new(),
            feature_gates: String::new(),
        }
    }
}

fn register_admin(sim: &Sim, token: &str) {
    sim.register_token(
        token,
        request::User {
            name: "kubernetes-admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        },
    );
}

/// A running development cluster. Dropping it stops the server.
pub struct KubeSim {
    pub addr: SocketAddr,
    pub sim: Arc<Sim>,
    kubeconfig: String,
    pki: Option<certs::ClusterPki>,
    task: tokio::task::JoinHandle<()>,
    config: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
    admin_token: Option<String>,
    /// kube-apiserver's bootstrap controller for `default/kubernetes`.
    kubernetes_service: tokio::task::JoinHandle<()>,
    /// kube-apiserver's legacy-token-tracking controller.
    token_tracking: tokio::task::JoinHandle<()>,
    service_account_key: Arc<legacy_tokens::ServiceAccountKey>,
    /// The loops of kube-apiserver's gates (identity Lease, default ServiceCIDR).
    gated: tokio::task::JoinHandle<()>,
    apis: gated_apis::GatedApis,
}

/// Builds the store of a (re)started cluster: the built-in resources, the alpha ones the
/// flags serve, the bootstrap objects.
fn new_sim(config: &Config, apis: &gated_apis::GatedApis) -> anyhow::Result<Arc<Sim>> {
    let sim = Arc::new(Sim::new(config.history, &config.service_cluster_ip_range));
    sim.set_service_node_port_range(&config.service_node_port_range)
        .map_err(|e| anyhow::anyhow!("--service-node-port-range: {e}"))?;
    gated_apis::register(&sim, apis);
    Ok(sim)
}

impl KubeSim {
    pub async fn start(config: Config) -> anyhow::Result<KubeSim> {
        // Both ring (ours) and any other provider a dependency enables may be compiled in:
        // name ring as the process default so every rustls user agrees.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
        let addr = listener.local_addr()?;
        let apis = gated_apis::GatedApis::parse(&config.runtime_config, &config.feature_gates)
            .map_err(|e| anyhow::anyhow!(e))?;
        let sim = new_sim(&config, &apis)?;
        let service_account_key = Arc::new(match &config.service_account_signing_key {
            Some(pem) => legacy_tokens::ServiceAccountKey::from_private_key_pem(pem)
                .map_err(|e| anyhow::anyhow!("--service-account-signing-key-file: {e}"))?,
            None => legacy_tokens::ServiceAccountKey::generate()?,
        });
        sim.set_service_account_key(service_account_key.clone());
        let advertise = kubernetes_service::advertise_address(config.advertise_address, addr);
        sim.bootstrap(advertise);
        gated_apis::bootstrap(&sim, &apis);
        let gated = gated_apis::spawn(&sim, &apis, &config.service_cluster_ip_range);
        let kubernetes_service =
            tokio::spawn(kubernetes_service::run(Arc::downgrade(&sim), advertise));
        let token_tracking = tokio::spawn(legacy_tokens::run_tracking(Arc::downgrade(&sim)));
        let state = Arc::new(server::ServerState {
            sim: sim.clone(),
            addr,
            tls: !config.plain_http,
        });
        let (kubeconfig, pki, tls, admin_token) = if config.plain_http {
            let token = format!("kube-sim-admin.{}", api::random_suffix(32));
            register_admin(&sim, &token);
            let kc = certs::kubeconfig(&format!("http://{addr}"), None, None, Some(&token));
            (kc, None, None, Some(token))
        } else {
            let pki = certs::ClusterPki::generate(addr)?;
            let tls = server::tls_config(&pki.serving_cert_pem, &pki.serving_key_pem, &pki.ca_pem)?;
            let kc = certs::kubeconfig(
                &format!("https://{addr}"),
                Some(&pki.ca_pem),
                Some((&pki.admin_cert_pem, &pki.admin_key_pem)),
                None,
            );
            (kc, Some(pki), Some(tls), None)
        };
        if let Some(dir) = &config.pki_dir {
            write_pki(dir, pki.as_ref(), &service_account_key)?;
        }
        let task = tokio::spawn(server::serve(listener, state, tls.clone()));
        Ok(KubeSim {
            addr,
            sim,
            kubeconfig,
            pki,
            task,
            config,
            tls,
            admin_token,
            kubernetes_service,
            token_tracking,
            service_account_key,
            gated,
            apis,
        })
    }

    /// Stops the server and starts a fresh one on the same address with the same
    /// certificates and kubeconfig but empty storage, as an API server that lost its etcd
    /// comes back: every connection ends, clients reconnect and find only the bootstrap
    /// objects.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.task.abort();
        let _ = (&mut self.task).await;
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {} again: {e}", self.addr))?;
        self.kubernetes_service.abort();
        self.token_tracking.abort();
        self.gated.abort();
        let sim = new_sim(&self.config, &self.apis)?;
        sim.set_service_account_key(self.service_account_key.clone());
        let advertise = self.advertise();
        sim.bootstrap(advertise);
        gated_apis::bootstrap(&sim, &self.apis);
        self.gated = gated_apis::spawn(&sim, &self.apis, &self.config.service_cluster_ip_range);
        self.kubernetes_service =
            tokio::spawn(kubernetes_service::run(Arc::downgrade(&sim), advertise));
        self.token_tracking = tokio::spawn(legacy_tokens::run_tracking(Arc::downgrade(&sim)));
        if let Some(token) = &self.admin_token {
            register_admin(&sim, token);
        }
        let state = Arc::new(server::ServerState {
            sim: sim.clone(),
            addr: self.addr,
            tls: self.tls.is_some(),
        });
        self.task = tokio::spawn(server::serve(listener, state, self.tls.clone()));
        self.sim = sim;
        Ok(())
    }

    /// The address and port the `default/kubernetes` Endpoints and EndpointSlice list.
    pub fn advertise(&self) -> SocketAddr {
        kubernetes_service::advertise_address(self.config.advertise_address, self.addr)
    }

    /// `https://ADDR` (or `http://` with plain HTTP).
    pub fn url(&self) -> String {
        let scheme = if self.pki.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The admin kubeconfig (YAML).
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        write_private(path, self.kubeconfig.as_bytes())
    }

    /// The cluster CA (certificate PEM, key PEM), when serving HTTPS.
    pub fn ca(&self) -> Option<(&str, &str)> {
        self.pki
            .as_ref()
            .map(|p| (p.ca_pem.as_str(), p.ca_key_pem()))
    }

    /// The ServiceAccount token signing key pair (`sa.key`/`sa.pub`).
    pub fn service_account_key(&self) -> &legacy_tokens::ServiceAccountKey {
        &self.service_account_key
    }

    /// `--pki-dir`, when given.
    pub fn pki_dir(&self) -> Option<&Path> {
        self.config.pki_dir.as_deref()
    }

    /// A kubeconfig for another user, with a client certificate signed by the cluster CA.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> anyhow::Result<String> {
        let pki = self
            .pki
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("plain-http clusters have no CA"))?;
        let (c, k) = pki.client_cert(user, groups)?;
        Ok(certs::kubeconfig(
            &self.url(),
            Some(&pki.ca_pem),
            Some((&c, &k)),
            None,
        ))
    }

    /// A kube-rs client authenticated as the admin.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Create an object directly in the store's create path (admission, defaults,
    /// validation), bypassing HTTP: for test fixtures while serving is paused.
    pub fn create(&self, obj: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        let def = self.def_of(
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
        )?;
        let ns = obj["metadata"]["namespace"].as_str().map(String::from);
        let admin = request::User {
            name: "kube-sim".into(),
            uid: String::new(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let created = self
            .sim
            .create_object(&def, ns.as_deref(), obj, &admin, false, None)?;
        Ok((*created).clone())
    }

    /// Delete an object directly (default options), bypassing HTTP: for test fixtures
    /// while serving is paused.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> anyhow::Result<()> {
        let def = self.def_of(api_version, kind)?;
        self.sim.delete_object(&def, namespace, name)?;
        Ok(())
    }

    /// The served resource of an apiVersion and kind.
    fn def_of(
        &self,
        api_version: &str,
        kind: &str,
    ) -> anyhow::Result<std::sync::Arc<resources::ResourceDef>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.sim
            .registry
            .by_kind(group, version, kind)
            .ok_or_else(|| anyhow::anyhow!("kube-sim does not serve {api_version} {kind}"))
    }

    /// The `/metrics` text, read in-process (so also while serving is paused).
    pub fn metrics_text(&self) -> String {
        self.sim.metrics.render()
    }

    /// Open watches on `resource` (plural name) from clients whose user agent starts with
    /// `user_agent` (all clients for ""), from `kube_sim_watches`, read in-process.
    pub fn open_watches(&self, resource: &str, user_agent: &str) -> u64 {
        let prefix = format!("kube_sim_watches{{resource=\"{resource}\",user_agent=\"{user_agent}");
        self.metrics_text()
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Which identities made which resource requests (after impersonation), from
    /// `kube_sim_requests_by_user_total`, read in-process: how a test proves that a controller
    /// wrote as its own ServiceAccount.
    pub fn requests_by_user(&self) -> Vec<metrics::UserRequests> {
        self.sim.metrics.requests_by_user()
    }

    pub fn faults(&self) -> &faults::Faults {
        &self.sim.faults
    }

    /// Forget the watch history: any older resourceVersion now gets 410 Gone.
    pub fn compact(&self) {
        self.sim.store.compact();
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        self.task.abort();
        self.kubernetes_service.abort();
        self.token_tracking.abort();
        self.gated.abort();
    }
}

/// Writes the PKI files of `--pki-dir` (see [`Config::pki_dir`]): private keys readable by
/// their owner only.
fn write_pki(
    dir: &Path,
    pki: Option<&certs::ClusterPki>,
    service_account_key: &legacy_tokens::ServiceAccountKey,
) -> anyhow::Result<()> {
    let context = |file: &str| format!("cannot write {}", dir.join(file).display());
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create --pki-dir {}: {e}", dir.display()))?;
    let write = |file: &str, data: &str, private: bool| -> anyhow::Result<()> {
        let path = dir.join(file);
        let written = if private {
            write_private(&path, data.as_bytes())
        } else {
            std::fs::write(&path, data)
        };
        written.map_err(|e| anyhow::anyhow!("{}: {e}", context(file)))
    };
    if let Some(pki) = pki {
        write("ca.crt", &pki.ca_pem, false)?;
        write("ca.key", pki.ca_key_pem(), true)?;
    }
    write("sa.key", service_account_key.private_key_pem(), true)?;
    write("sa.pub", service_account_key.public_key_pem(), false)?;
    Ok(())
}

pub async fn client_from_kubeconfig(yaml: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// Write a file readable by its owner only (it holds credentials).
pub fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(path)?;
    f.write_all(data)
}
