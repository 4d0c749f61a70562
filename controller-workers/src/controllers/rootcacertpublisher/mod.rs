//! root-ca-certificate-publisher-controller: every namespace holds the ConfigMap
//! `kube-root-ca.crt` with the CA bundle that verifies the API server (`ca.crt`), which
//! the `kube-api-access-*` volume of every pod mounts (upstream
//! `pkg/controller/certificates/rootcacertpublisher/publisher.go`). It is created in each
//! new namespace, and put back as it should be when someone deletes it or changes its data
//! or empties its description. The bundle is `--root-ca-file`, or without it the CA the
//! kubeconfig trusts.
//!
//! Keys are namespace names: a namespace's additions and updates (while Active), and any
//! change or deletion of a `kube-root-ca.crt`, put its namespace on the queue.

mod metrics;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tracing::{debug, error, warn};

use crate::api_errors::{is_namespace_terminating, is_not_found};
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::store::Store;

use self::metrics::{code_of, PublisherMetrics};

pub const NAME: &str = "root-ca-certificate-publisher-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/configmaps", "v1/namespaces"];
/// The ConfigMap published in every namespace.
pub const CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// Its one key.
pub const CA_KEY: &str = "ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Upstream's words, kept as they are: clients may show them.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// If set, this root certificate authority will be included in service account's
    /// token secret. This must be a valid PEM-encoded CA bundle.
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,
}

struct Controller {
    client: kube::Client,
    root_ca: String,
    namespaces: Store<Namespace>,
    config_maps: Store<ConfigMap>,
    metrics: PublisherMetrics,
}

/// The controller, or none when `--root-ca-file` cannot be used: it is then not started
/// (the error is logged) and the worker's other controllers run on.
pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    let root_ca = match &options.root_ca_file {
        Some(path) => match read_ca_bundle(path) {
            Ok(bundle) => bundle,
            Err(error) => {
                error!(controller = NAME, error = %crate::controller::describe(&error), "not starting the controller: fix --root-ca-file");
                return Ok(Vec::new());
            }
        },
        None => context.clients.root_ca_pem().unwrap_or_else(|| {
            // KCM publishes its client config's CA data, empty when there is none.
            warn!(
                controller = NAME,
                "the kubeconfig names no certificate authority and --root-ca-file is not set: publishing an empty ca.crt"
            );
            String::new()
        }),
    };
    let (client, _recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("root_ca_cert_publisher");
    let config_maps = context.informers.get::<ConfigMap>();
    let namespaces = context.informers.get::<Namespace>();
    {
        let queue = queue.clone();
        config_maps.add_handler(Arc::new(move |change: &Change<ConfigMap>| {
            // Additions are the publisher's own; updates and deletions may need undoing.
            if matches!(change, Change::Added(_)) {
                return;
            }
            let meta = &change.latest().metadata;
            if meta.name.as_deref() == Some(CONFIG_MAP_NAME) {
                if let Some(namespace) = meta.namespace.clone() {
                    queue.add(namespace);
                }
            }
        }));
    }
    {
        let queue = queue.clone();
        namespaces.add_handler(Arc::new(move |change: &Change<Namespace>| match change {
            Change::Added(namespace) => {
                if let Some(name) = namespace.metadata.name.clone() {
                    queue.add(name);
                }
            }
            Change::Updated { new, .. } if is_active(new) => {
                if let Some(name) = new.metadata.name.clone() {
                    queue.add(name);
                }
            }
            Change::Updated { .. } | Change::Deleted(_) => {}
        }));
    }
    let controller = Arc::new(Controller {
        client,
        root_ca,
        namespaces: namespaces.store().clone(),
        config_maps: config_maps.store().clone(),
        metrics: PublisherMetrics::register(&context.metrics),
    });
    // KCM runs it with one worker.
    Ok(vec![Runnable::new(
        NAME,
        queue,
        1,
        controller,
        |controller, key| async move { controller.sync_namespace(&key).await },
    )])
}

/// The file's bytes, once they are known to hold PEM certificates (KCM refuses to start
/// the controller otherwise).
fn read_ca_bundle(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("reading --root-ca-file {}", path.display()))?;
    let mut reader = bytes.as_slice();
    let certificates = rustls_pemfile::certs(&mut reader)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing --root-ca-file {}", path.display()))?;
    if certificates.is_empty() {
        anyhow::bail!("--root-ca-file {} holds no PEM certificate", path.display());
    }
    String::from_utf8(bytes)
        .with_context(|| format!("--root-ca-file {} is not text", path.display()))
}

fn is_active(namespace: &Namespace) -> bool {
    namespace.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active")
}

/// The data the ConfigMap must hold.
fn wanted_data(root_ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CA_KEY.to_string(), root_ca.to_string())])
}

/// The ConfigMap to create in a namespace that has none.
fn new_config_map(namespace: &str, root_ca: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIG_MAP_NAME.to_string()),
            namespace: Some(namespace.to_string()),
            annotations: Some(BTreeMap::from([(
                DESCRIPTION_ANNOTATION.to_string(),
                DESCRIPTION.to_string(),
            )])),
            ..Default::default()
        },
        data: Some(wanted_data(root_ca)),
        ..Default::default()
    }
}

/// The existing ConfigMap put right, or `None` when it already is: its data must be the
/// bundle alone, and its description present (as upstream, any non-empty description is
/// left as it is).
fn restored(existing: &ConfigMap, root_ca: &str) -> Option<ConfigMap> {
    let data = wanted_data(root_ca);
    let described = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    if existing.data.as_ref() == Some(&data) && described {
        return None;
    }
    let mut fixed = existing.clone();
    fixed.data = Some(data);
    fixed
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string());
    Some(fixed)
}

impl Controller {
    async fn sync_namespace(&self, namespace: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        let result = self.publish(namespace).await;
        self.metrics
            .record(code_of(&result), started.elapsed().as_secs_f64());
        debug!(controller = NAME, namespace, elapsed = ?started.elapsed(), "finished syncing namespace");
        result
    }

    async fn publish(&self, namespace: &str) -> anyhow::Result<()> {
        // A namespace that is gone or being deleted takes no new content.
        match self.namespaces.get(namespace) {
            Some(ns) if ns.metadata.deletion_timestamp.is_none() && is_active(&ns) => {}
            _ => return Ok(()),
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        match self.config_maps.get_in(namespace, CONFIG_MAP_NAME) {
            None => {
                let wanted = new_config_map(namespace, &self.root_ca);
                match api.create(&PostParams::default(), &wanted).await {
                    Ok(_) => Ok(()),
                    Err(error) if is_not_found(&error) || is_namespace_terminating(&error) => {
                        Ok(())
                    }
                    Err(error) => Err(anyhow::Error::new(error)
                        .context(format!("creating ConfigMap {namespace}/{CONFIG_MAP_NAME}"))),
                }
            }
            Some(existing) => {
                let Some(fixed) = restored(&existing, &self.root_ca) else {
                    return Ok(());
                };
                api.replace(CONFIG_MAP_NAME, &PostParams::default(), &fixed)
                    .await
                    .map(|_| ())
                    .with_context(|| format!("restoring ConfigMap {namespace}/{CONFIG_MAP_NAME}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn config_map(data: &[(&str, &str)], annotations: &[(&str, &str)]) -> ConfigMap {
        let pairs = |p: &[(&str, &str)]| {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(CONFIG_MAP_NAME.into()),
                namespace: Some("team".into()),
                resource_version: Some("7".into()),
                annotations: Some(pairs(annotations)),
                ..Default::default()
            },
            data: Some(pairs(data)),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_namespace_gets_the_bundle_and_the_description() {
        let cm = new_config_map("team", CA);
        assert_eq!(cm.metadata.name.as_deref(), Some("kube-root-ca.crt"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(cm.data, Some(wanted_data(CA)));
        assert_eq!(
            cm.metadata.annotations.unwrap()["kubernetes.io/description"],
            DESCRIPTION
        );
    }

    #[test]
    fn edits_are_undone_and_the_rest_is_kept() {
        let good = [(DESCRIPTION_ANNOTATION, DESCRIPTION), ("team", "a")];
        // As it should be: nothing to do, whatever else it carries.
        assert_eq!(restored(&config_map(&[(CA_KEY, CA)], &good), CA), None);
        // A non-empty description of someone else's is left, as upstream leaves it.
        assert_eq!(
            restored(
                &config_map(&[(CA_KEY, CA)], &[(DESCRIPTION_ANNOTATION, "mine")]),
                CA
            ),
            None
        );
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Pairs, Pairs); 4] = [
            (&[(CA_KEY, "forged")], &good),
            (&[(CA_KEY, CA), ("extra", "x")], &good),
            (&[(CA_KEY, CA)], &[("team", "a")]),
            (
                &[(CA_KEY, CA)],
                &[(DESCRIPTION_ANNOTATION, ""), ("team", "a")],
            ),
        ];
        for (data, annotations) in cases {
            let fixed = restored(&config_map(data, annotations), CA)
                .unwrap_or_else(|| panic!("{data:?} {annotations:?} must be restored"));
            assert_eq!(fixed.data, Some(wanted_data(CA)));
            let annotations = fixed.metadata.annotations.unwrap();
            assert_eq!(annotations[DESCRIPTION_ANNOTATION], DESCRIPTION);
            assert_eq!(annotations["team"], "a", "other annotations are kept");
            assert_eq!(fixed.metadata.resource_version.as_deref(), Some("7"));
        }
    }

    #[test]
    fn the_root_ca_file_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("rkcm-root-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.crt");
        assert!(read_ca_bundle(&missing).is_err());
        let empty = dir.join("empty.crt");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert!(read_ca_bundle(&empty).is_err());
        let good = dir.join("ca.crt");
        std::fs::write(&good, CA).unwrap();
        assert_eq!(read_ca_bundle(&good).unwrap(), CA);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
