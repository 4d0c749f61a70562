//! serviceaccount-token-controller: legacy ServiceAccount token Secrets (upstream
//! `pkg/controller/serviceaccount/tokens_controller.go`). A Secret of type
//! `kubernetes.io/service-account-token` annotated with a ServiceAccount's name is filled
//! in with `token` (a JWT signed with `--service-account-private-key-file`, see [`token`]),
//! `ca.crt` (the root CA: `--root-ca-file`, shared with the root-ca-cert publisher, or the
//! kubeconfig's CA) and `namespace`, and annotated with the ServiceAccount's UID; a token
//! Secret whose ServiceAccount is gone (or has another UID) is deleted; a deleted
//! ServiceAccount's token Secrets are deleted; a deleted token Secret is taken out of its
//! ServiceAccount's `secrets`. A new ServiceAccount gets no Secret (1.29 no longer makes
//! them).
//!
//! As in KCM it runs with the kubeconfig's own identity (client `tokens-controller`), also
//! under `--use-service-account-credentials`, and is started first. Without a key file it
//! logs upstream's "disabled" message and does not run.
//!
//! Two queues, as upstream: `serviceaccount_tokens_service` (keys: namespace, name, UID of
//! a ServiceAccount) and `serviceaccount_tokens_secret` (keys: namespace, name, UID of a
//! Secret, and the name and UID its annotations give its ServiceAccount), each with
//! `--concurrent-serviceaccount-token-syncs` workers, a key dropped after 10 retries. Keys
//! are JSON arrays of those strings, so no value can be mistaken for another.
//!
//! Token contents and key material are never logged.

mod signer;
mod token;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use rand::Rng as _;
use tracing::{debug, error, info};

use crate::api_errors::{is_conflict, is_not_found};
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::store::Store;

use self::signer::Signer;
use self::token::LegacyClaims;

pub const NAME: &str = "serviceaccount-token-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/secrets", "v1/serviceaccounts"];
/// The name its client carries (KCM's `ClientOrDie("tokens-controller")`).
const CLIENT_NAME: &str = "tokens-controller";
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
pub const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
pub const SERVICE_ACCOUNT_UID_KEY: &str = "kubernetes.io/service-account.uid";
const TOKEN_KEY: &str = "token";
const ROOT_CA_KEY: &str = "ca.crt";
const NAMESPACE_KEY: &str = "namespace";
/// Upstream's maxRetries.
const MAX_RETRIES: u32 = 10;
/// Upstream's `RemoveTokenBackoff`: 10 tries, 100 ms apart plus up to 100 ms of jitter.
const REMOVE_REFERENCE_STEPS: u32 = 10;
const REMOVE_REFERENCE_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Filename containing a PEM-encoded private RSA or ECDSA key used to sign service
    /// account tokens.
    #[arg(long)]
    pub service_account_private_key_file: Option<PathBuf>,
    /// The number of service account token objects that are allowed to sync concurrently.
    /// Larger number = more responsive token generation, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_serviceaccount_token_syncs: u32,
}

/// The controller, or none when it is disabled (no key file) or cannot start (an unusable
/// key or `--root-ca-file`: the error is logged and the worker's other controllers run
/// on). `root_ca` is the root-ca-cert publisher's options, where `--root-ca-file` lives.
pub fn build(
    context: &ControllerContext,
    options: &Options,
    root_ca: &crate::controllers::rootcacertpublisher::Options,
) -> anyhow::Result<Vec<Runnable>> {
    let Some(key_file) = options
        .service_account_private_key_file
        .as_ref()
        .filter(|path| !path.as_os_str().is_empty())
    else {
        info!(
            controller = NAME,
            "Controller is disabled because there is no private key"
        );
        return Ok(Vec::new());
    };
    let signer = match read_signer(key_file) {
        Ok(signer) => signer,
        Err(error) => {
            error!(controller = NAME, error = %crate::controller::describe(&error), "not starting the controller: fix --service-account-private-key-file");
            return Ok(Vec::new());
        }
    };
    let root_ca = match root_ca
        .root_ca_file
        .as_ref()
        .filter(|path| !path.as_os_str().is_empty())
    {
        Some(path) => match read_root_ca(path) {
            Ok(bundle) => bundle,
            Err(error) => {
                error!(controller = NAME, error = %crate::controller::describe(&error), "not starting the controller: fix --root-ca-file");
                return Ok(Vec::new());
            }
        },
        // KCM takes its client config's CA data, empty when there is none.
        None => context
            .clients
            .root_ca_pem()
            .unwrap_or_default()
            .into_bytes(),
    };
    info!(
        controller = NAME,
        algorithm = signer.algorithm(),
        key_id = signer.key_id(),
        "signing legacy service account tokens"
    );
    start(
        context,
        signer,
        root_ca,
        options.concurrent_serviceaccount_token_syncs as usize,
    )
}

fn read_signer(path: &Path) -> anyhow::Result<Signer> {
    let pem = std::fs::read(path).with_context(|| {
        format!(
            "error reading key for service account token controller: reading {}",
            path.display()
        )
    })?;
    Signer::from_pem(&pem).with_context(|| {
        format!(
            "error reading key for service account token controller: error reading private key file {}",
            path.display()
        )
    })
}

/// `readCA`: the file's bytes, once they are known to hold PEM certificates.
fn read_root_ca(path: &Path) -> anyhow::Result<Vec<u8>> {
    let error = || format!("error parsing root-ca-file at {}", path.display());
    let bytes = std::fs::read(path).with_context(error)?;
    let mut reader = bytes.as_slice();
    let certificates = rustls_pemfile::certs(&mut reader)
        .collect::<Result<Vec<_>, _>>()
        .with_context(error)?;
    if certificates.is_empty() {
        anyhow::bail!(
            "{}: data does not contain any valid RSA or ECDSA certificates",
            error()
        );
    }
    Ok(bytes)
}

fn start(
    context: &ControllerContext,
    signer: Signer,
    root_ca: Vec<u8>,
    workers: usize,
) -> anyhow::Result<Vec<Runnable>> {
    let client = context.clients.client(CLIENT_NAME)?;
    let account_queue = context.queue("serviceaccount_tokens_service");
    let secret_queue = context.queue("serviceaccount_tokens_secret");
    let accounts = context.informers.get::<ServiceAccount>();
    let secrets = context.informers.get::<Secret>();
    {
        let queue = account_queue.clone();
        accounts.add_handler(Arc::new(move |change: &Change<ServiceAccount>| {
            queue.add(account_key(change.latest()));
        }));
    }
    {
        let queue = secret_queue.clone();
        secrets.add_handler(Arc::new(move |change: &Change<Secret>| {
            let secret = change.latest();
            if is_token_secret(secret) {
                queue.add(secret_key(secret));
            }
        }));
    }
    let controller = Arc::new(Controller {
        client,
        signer,
        root_ca,
        accounts: accounts.store().clone(),
        secrets: secrets.store().clone(),
    });
    Ok(vec![
        Runnable::new(
            NAME,
            account_queue,
            workers,
            controller.clone(),
            |controller, key| async move { controller.sync_service_account(&key).await },
        )
        .with_max_retries(MAX_RETRIES),
        Runnable::new(
            NAME,
            secret_queue,
            workers,
            controller,
            |controller, key| async move { controller.sync_secret(&key).await },
        )
        .with_max_retries(MAX_RETRIES),
    ])
}

struct Controller {
    client: kube::Client,
    signer: Signer,
    root_ca: Vec<u8>,
    accounts: Store<ServiceAccount>,
    secrets: Store<Secret>,
}

/// A ServiceAccount's queue key: namespace, name, UID.
#[derive(Debug, PartialEq, Eq)]
struct AccountKey {
    namespace: String,
    name: String,
    uid: String,
}

/// A token Secret's queue key; `account_uid` is empty when the Secret has no UID
/// annotation yet.
#[derive(Debug, PartialEq, Eq)]
struct SecretKey {
    namespace: String,
    name: String,
    uid: String,
    account_name: String,
    account_uid: String,
}

fn account_key(account: &ServiceAccount) -> String {
    let meta = &account.metadata;
    serde_json::json!([
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or(""),
        meta.uid.as_deref().unwrap_or(""),
    ])
    .to_string()
}

fn secret_key(secret: &Secret) -> String {
    let meta = &secret.metadata;
    serde_json::json!([
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or(""),
        meta.uid.as_deref().unwrap_or(""),
        annotation(secret, SERVICE_ACCOUNT_NAME_KEY).unwrap_or(""),
        annotation(secret, SERVICE_ACCOUNT_UID_KEY).unwrap_or(""),
    ])
    .to_string()
}

fn key_parts<const N: usize>(key: &str) -> Option<[String; N]> {
    let parts: Vec<String> = serde_json::from_str(key).ok()?;
    parts.try_into().ok()
}

/// Upstream refuses keys missing a namespace, name or UID.
fn parse_account_key(key: &str) -> Option<AccountKey> {
    let [namespace, name, uid] = key_parts(key)?;
    if namespace.is_empty() || name.is_empty() || uid.is_empty() {
        return None;
    }
    Some(AccountKey {
        namespace,
        name,
        uid,
    })
}

/// Upstream refuses keys missing a namespace, name, UID or ServiceAccount name.
fn parse_secret_key(key: &str) -> Option<SecretKey> {
    let [namespace, name, uid, account_name, account_uid] = key_parts(key)?;
    if namespace.is_empty() || name.is_empty() || uid.is_empty() || account_name.is_empty() {
        return None;
    }
    Some(SecretKey {
        namespace,
        name,
        uid,
        account_name,
        account_uid,
    })
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn is_token_secret(secret: &Secret) -> bool {
    secret.type_.as_deref() == Some(SERVICE_ACCOUNT_TOKEN_TYPE)
}

/// `IsServiceAccountToken`: a token Secret naming this ServiceAccount (and its UID, when
/// the Secret names one).
fn is_token_of(secret: &Secret, account_name: &str, account_uid: &str) -> bool {
    if !is_token_secret(secret)
        || annotation(secret, SERVICE_ACCOUNT_NAME_KEY) != Some(account_name)
    {
        return false;
    }
    match annotation(secret, SERVICE_ACCOUNT_UID_KEY) {
        Some(uid) if !uid.is_empty() => uid == account_uid,
        _ => true,
    }
}

/// Whether `uid` (empty: any) is the object's UID.
fn uid_matches(uid: &str, actual: Option<&str>) -> bool {
    uid.is_empty() || Some(uid) == actual
}

/// What a token Secret lacks: (ca.crt, namespace, token).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Needs {
    ca: bool,
    namespace: bool,
    token: bool,
}

impl Needs {
    fn any(self) -> bool {
        self.ca || self.namespace || self.token
    }
}

/// `secretUpdateNeeded`: the CA when there is one and the Secret's differs, the
/// namespace and the token when missing. An existing token is never replaced.
fn needs(secret: &Secret, root_ca: &[u8]) -> Needs {
    let data = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.as_slice())
            .unwrap_or(&[])
    };
    Needs {
        ca: !root_ca.is_empty() && data(ROOT_CA_KEY) != root_ca,
        namespace: data(NAMESPACE_KEY).is_empty(),
        token: data(TOKEN_KEY).is_empty(),
    }
}

/// The Secret filled in as it needs (`token` made by `make_token` only when missing).
fn populated(
    mut secret: Secret,
    account: &ServiceAccount,
    root_ca: &[u8],
    wanted: Needs,
    make_token: impl FnOnce(&Secret) -> Result<String, signer::SignError>,
) -> Result<Secret, signer::SignError> {
    let namespace = secret.namespace_str().to_string();
    let token = if wanted.token {
        Some(make_token(&secret)?)
    } else {
        None
    };
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    if wanted.ca {
        data.insert(ROOT_CA_KEY.into(), ByteString(root_ca.to_vec()));
    }
    if wanted.namespace {
        data.insert(NAMESPACE_KEY.into(), ByteString(namespace.into_bytes()));
    }
    if let Some(token) = token {
        data.insert(TOKEN_KEY.into(), ByteString(token.into_bytes()));
    }
    let annotations = secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    annotations.insert(
        SERVICE_ACCOUNT_NAME_KEY.into(),
        account.name_str().to_string(),
    );
    annotations.insert(
        SERVICE_ACCOUNT_UID_KEY.into(),
        account.metadata.uid.clone().unwrap_or_default(),
    );
    Ok(secret)
}

/// The ServiceAccount without its reference to `secret`, or `None` when it has none.
fn without_reference(account: &ServiceAccount, secret: &str) -> Option<ServiceAccount> {
    let references = account.secrets.as_deref().unwrap_or(&[]);
    if !references.iter().any(|r| r.name.as_deref() == Some(secret)) {
        return None;
    }
    let mut updated = account.clone();
    updated.secrets = Some(
        references
            .iter()
            .filter(|r| r.name.as_deref() != Some(secret))
            .cloned()
            .collect(),
    );
    Some(updated)
}

/// An error worth a retry (requeued, rate limited, at most [`MAX_RETRIES`] times), or one
/// that is only logged.
enum Failure {
    Retry(anyhow::Error),
    Log(anyhow::Error),
}

impl Failure {
    /// Upstream's `retry` flag: requeue, or log and forget.
    fn settle(result: Result<(), Failure>, key: &str) -> anyhow::Result<()> {
        match result {
            Ok(()) => Ok(()),
            Err(Failure::Retry(error)) => Err(error),
            Err(Failure::Log(error)) => {
                error!(controller = NAME, key, error = %crate::controller::describe(&error), "not retried");
                Ok(())
            }
        }
    }
}

impl Controller {
    fn secrets_api(&self, namespace: &str) -> Api<Secret> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn accounts_api(&self, namespace: &str) -> Api<ServiceAccount> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// `syncServiceAccount`: only a ServiceAccount that is gone (or replaced) matters: its
    /// token Secrets are deleted.
    async fn sync_service_account(&self, key: &str) -> anyhow::Result<()> {
        let Some(key) = parse_account_key(key) else {
            error!(controller = NAME, key, "invalid serviceaccount key");
            return Ok(());
        };
        if self
            .cached_account(&key.namespace, &key.name, &key.uid)
            .is_some()
        {
            return Ok(());
        }
        debug!(controller = NAME, namespace = %key.namespace, serviceaccount = %key.name, "Service account deleted, removing tokens");
        let tokens: Vec<Arc<Secret>> = self
            .secrets
            .list_namespace(&key.namespace)
            .into_iter()
            .filter(|secret| is_token_of(secret, &key.name, &key.uid))
            .collect();
        let mut failures = Vec::new();
        for secret in tokens {
            let meta = &secret.metadata;
            let (name, uid) = (
                meta.name.as_deref().unwrap_or(""),
                meta.uid.as_deref().unwrap_or(""),
            );
            if let Err(error) = self.delete_token(&key.namespace, name, uid).await {
                failures.push(format!("{name}: {}", crate::controller::describe(&error)));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            anyhow::bail!(
                "deleting the token Secrets of serviceaccount {}/{}: {}",
                key.namespace,
                key.name,
                failures.join("; ")
            )
        }
    }

    /// `syncSecret`.
    async fn sync_secret(&self, raw_key: &str) -> anyhow::Result<()> {
        let Some(key) = parse_secret_key(raw_key) else {
            error!(controller = NAME, key = raw_key, "invalid secret key");
            return Ok(());
        };
        let cached = self
            .secrets
            .get_in(&key.namespace, &key.name)
            .filter(|secret| secret.metadata.uid.as_deref() == Some(key.uid.as_str()));
        let result = match cached {
            None => {
                // The Secret is gone: its ServiceAccount, if there, drops the reference.
                if self
                    .cached_account(&key.namespace, &key.account_name, &key.account_uid)
                    .is_some()
                {
                    if let Err(error) = self.remove_reference_with_retries(&key).await {
                        error!(controller = NAME, key = raw_key, error = %crate::controller::describe(&error), "Removing secret reference");
                    }
                }
                Ok(())
            }
            Some(secret) => match self.account_for(&key).await {
                Err(error) => Err(Failure::Retry(error)),
                Ok(None) => {
                    debug!(controller = NAME, secret = %format!("{}/{}", key.namespace, key.name), "Service account does not exist, deleting token");
                    self.delete_token(&key.namespace, &key.name, &key.uid)
                        .await
                        .map_err(Failure::Retry)
                }
                Ok(Some(account)) => self.generate_token_if_needed(&account, &secret).await,
            },
        };
        Failure::settle(result, raw_key)
    }

    /// The cached ServiceAccount of that name (and UID, when given).
    fn cached_account(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Option<Arc<ServiceAccount>> {
        self.accounts
            .get_in(namespace, name)
            .filter(|account| uid_matches(uid, account.metadata.uid.as_deref()))
    }

    /// The Secret's ServiceAccount, from the cache or else read live (the cache may not
    /// have seen a new one yet).
    async fn account_for(&self, key: &SecretKey) -> anyhow::Result<Option<ServiceAccount>> {
        if let Some(account) =
            self.cached_account(&key.namespace, &key.account_name, &key.account_uid)
        {
            return Ok(Some((*account).clone()));
        }
        match self
            .accounts_api(&key.namespace)
            .get(&key.account_name)
            .await
        {
            Ok(account) if uid_matches(&key.account_uid, account.metadata.uid.as_deref()) => {
                Ok(Some(account))
            }
            Ok(_) => Ok(None),
            Err(error) if is_not_found(&error) => Ok(None),
            Err(error) => Err(anyhow::Error::new(error).context(format!(
                "getting serviceaccount {}/{}",
                key.namespace, key.account_name
            ))),
        }
    }

    /// Deletes a token Secret with a UID precondition: gone already, or replaced by
    /// another of the same name, is done.
    async fn delete_token(&self, namespace: &str, name: &str, uid: &str) -> anyhow::Result<()> {
        let params = DeleteParams {
            preconditions: (!uid.is_empty()).then(|| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.secrets_api(namespace).delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(()),
            Err(error) => {
                Err(anyhow::Error::new(error)
                    .context(format!("deleting secret {namespace}/{name}")))
            }
        }
    }

    /// `generateTokenIfNeeded`: fills in a live copy of the Secret, only when the cache is
    /// as recent as the server (otherwise an update event follows).
    async fn generate_token_if_needed(
        &self,
        account: &ServiceAccount,
        cached: &Secret,
    ) -> Result<(), Failure> {
        if !needs(cached, &self.root_ca).any() {
            return Ok(());
        }
        let namespace = cached.namespace_str();
        let name = cached.name_str();
        let api = self.secrets_api(namespace);
        let live = match api.get(name).await {
            Ok(live) => live,
            Err(error) => {
                let retry = !is_not_found(&error);
                let error =
                    anyhow::Error::new(error).context(format!("getting secret {namespace}/{name}"));
                return Err(if retry {
                    Failure::Retry(error)
                } else {
                    Failure::Log(error)
                });
            }
        };
        if live.metadata.resource_version != cached.metadata.resource_version {
            debug!(controller = NAME, secret = %format!("{namespace}/{name}"), "Secret is not up to date, skipping token population");
            return Ok(());
        }
        let wanted = needs(&live, &self.root_ca);
        if !wanted.any() {
            return Ok(());
        }
        let updated = populated(live, account, &self.root_ca, wanted, |secret| {
            token::legacy_token(
                &self.signer,
                &LegacyClaims {
                    namespace: account.namespace_str(),
                    service_account_name: account.name_str(),
                    service_account_uid: account.metadata.uid.as_deref().unwrap_or(""),
                    secret_name: secret.name_str(),
                },
            )
        })
        .map_err(|error| {
            Failure::Log(anyhow::Error::new(error).context(format!(
                "populating serviceaccount token {namespace}/{name}"
            )))
        })?;
        match api.replace(name, &PostParams::default(), &updated).await {
            Ok(_) => {
                debug!(controller = NAME, secret = %format!("{namespace}/{name}"), token = wanted.token, ca = wanted.ca, "populated serviceaccount token secret");
                Ok(())
            }
            // Someone else changed it (an update event follows), or it is gone.
            Err(error) if is_conflict(&error) || is_not_found(&error) => Ok(()),
            Err(error) => Err(Failure::Retry(
                anyhow::Error::new(error).context(format!("updating secret {namespace}/{name}")),
            )),
        }
    }

    /// `RetryOnConflict(RemoveTokenBackoff, removeSecretReference)`.
    async fn remove_reference_with_retries(&self, key: &SecretKey) -> anyhow::Result<()> {
        let mut attempt = 1;
        loop {
            match self.remove_reference(key).await {
                Err(error) if is_conflict(&error) && attempt < REMOVE_REFERENCE_STEPS => {
                    attempt += 1;
                    let jitter = rand::rng().random_range(0.0..1.0);
                    tokio::time::sleep(REMOVE_REFERENCE_INTERVAL.mul_f64(1.0 + jitter)).await;
                }
                result => {
                    return result.map_err(|error| {
                        anyhow::Error::new(error).context(format!(
                            "removing secret {} from serviceaccount {}/{}",
                            key.name, key.namespace, key.account_name
                        ))
                    })
                }
            }
        }
    }

    /// `removeSecretReference`: on a live copy of the ServiceAccount (of the same UID,
    /// when the Secret named one).
    async fn remove_reference(&self, key: &SecretKey) -> Result<(), kube::Error> {
        let api = self.accounts_api(&key.namespace);
        let account = match api.get(&key.account_name).await {
            Ok(account) => account,
            Err(error) if is_not_found(&error) => return Ok(()),
            Err(error) => return Err(error),
        };
        if !uid_matches(&key.account_uid, account.metadata.uid.as_deref()) {
            return Ok(());
        }
        let Some(updated) = without_reference(&account, &key.name) else {
            return Ok(());
        };
        match api
            .replace(&key.account_name, &PostParams::default(), &updated)
            .await
        {
            Err(error) if is_not_found(&error) => Ok(()),
            result => result.map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests;
