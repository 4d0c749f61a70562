//! The API server client configuration every rkcm process starts from: `--kubeconfig`, or
//! the in-cluster config / `$KUBECONFIG` without it, refused at once (with the file, the
//! reason and the remedy) when its TLS material cannot be used.

use std::path::Path;

use anyhow::{bail, Context};

/// The client configuration from `--kubeconfig`, or in-cluster / $KUBECONFIG without it.
pub async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .with_context(|| format!("loading kubeconfig {}", path.display()))?;
            if let Some(problem) =
                crate::tls_material::client_certificate_problem(&config.auth_info)
            {
                bail!("kubeconfig {}: {problem}", path.display());
            }
            // Build a client once, so TLS material the stack refuses (a key type it does not
            // know, a key that does not match) is named here with the file, not later in a
            // handshake.
            kube::Client::try_from(config.clone()).with_context(|| {
                format!(
                    "kubeconfig {}: its TLS material cannot be used",
                    path.display()
                )
            })?;
            Ok(config)
        }
        None => kube::Config::infer()
            .await
            .context("no --kubeconfig given and no in-cluster config or $KUBECONFIG found"),
    }
}
