//! bootstrap-signer-controller: `kube-public/cluster-info` carries, for every bootstrap
//! token allowed to sign, a detached JWS of its `kubeconfig` under `jws-kubeconfig-<id>`,
//! so that `kubeadm join --token <id>.<secret>` can trust the cluster it downloads the
//! kubeconfig from (upstream `pkg/controller/bootstrap/bootstrapsigner.go`).
//!
//! There is one key, `kube-public/cluster-info` (queue `bootstrap_signer_queue`, one
//! worker): additions and updates of that ConfigMap, and every change of a token Secret in
//! `kube-system`, put it on the queue. A sync reads both stores, recomputes the signatures
//! of the tokens [`signing_token`] accepts (the first of a duplicated id wins), drops the
//! `jws-kubeconfig-*` keys of every other id, and writes the ConfigMap only when that
//! changes its data. As upstream, a sync is never retried: a conflict or a ConfigMap gone
//! means a newer event is on its way, and other write errors are logged until the next
//! change or resync.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use tracing::{debug, warn};

use super::jws::compute_detached_signature;
use super::secrets::{is_token_secret, signing_token, SigningToken, SECRET_TYPE, TOKEN_NAMESPACE};
use crate::api_errors::{is_conflict, is_not_found, message};
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::store::Store;

pub const NAME: &str = "bootstrap-signer-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/configmaps", "v1/secrets"];
/// `api.NamespacePublic`.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-public";
/// `bootstrapapi.ConfigMapClusterInfo`.
pub const CONFIG_MAP_NAME: &str = "cluster-info";
/// What is signed.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// `bootstrapapi.JWSSignatureKeyPrefix`: followed by the token id.
pub const SIGNATURE_KEY_PREFIX: &str = "jws-kubeconfig-";
const QUEUE: &str = "bootstrap_signer_queue";

struct Controller {
    client: kube::Client,
    config_maps: Store<ConfigMap>,
    secrets: Store<Secret>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(QUEUE);
    let key = format!("{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}");
    let config_maps = context.informers.get::<ConfigMap>();
    let secrets = context.informers.get::<Secret>();
    {
        let (queue, key) = (queue.clone(), key.clone());
        config_maps.add_handler(Arc::new(move |change: &Change<ConfigMap>| {
            // A deleted cluster-info has nothing left to sign.
            if change.live().is_some_and(|cm| is_cluster_info(cm)) {
                queue.add(key.clone());
            }
        }));
    }
    {
        let queue = queue.clone();
        secrets.add_handler(Arc::new(move |change: &Change<Secret>| {
            if is_token_secret(change.latest()) {
                queue.add(key.clone());
            }
        }));
    }
    let controller = Arc::new(Controller {
        client,
        config_maps: config_maps.store().clone(),
        secrets: secrets.store().clone(),
    });
    Ok(Runnable::new(
        NAME,
        queue,
        1,
        controller,
        |controller, _key| async move {
            controller.sign_config_map(Timestamp::now()).await;
            Ok(())
        },
    ))
}

fn is_cluster_info(config_map: &ConfigMap) -> bool {
    config_map.metadata.namespace.as_deref() == Some(CONFIG_MAP_NAMESPACE)
        && config_map.metadata.name.as_deref() == Some(CONFIG_MAP_NAME)
}

/// What a sync does to the ConfigMap's data.
#[derive(Debug, PartialEq, Eq)]
enum Signing {
    /// No `kubeconfig` key: nothing to sign, nothing touched.
    NoKubeconfig,
    /// Every signature is there and right, and no other is.
    UpToDate,
    /// The data to write.
    Update(BTreeMap<String, String>),
}

/// The data with one signature per token and no other `jws-kubeconfig-*` key; the rest of
/// the data is kept as it is.
fn signed_data(data: Option<&BTreeMap<String, String>>, tokens: &[SigningToken]) -> Signing {
    let Some(content) = data.and_then(|data| data.get(KUBECONFIG_KEY)) else {
        return Signing::NoKubeconfig;
    };
    let mut signed = data.cloned().unwrap_or_default();
    let mut stale: BTreeMap<String, String> = BTreeMap::new();
    signed.retain(|key, value| match key.strip_prefix(SIGNATURE_KEY_PREFIX) {
        Some(id) => {
            stale.insert(id.to_string(), std::mem::take(value));
            false
        }
        None => true,
    });
    let mut changed = false;
    for token in tokens {
        let signature = compute_detached_signature(content, &token.id, &token.secret);
        if stale.remove(&token.id).as_ref() != Some(&signature) {
            changed = true;
        }
        signed.insert(format!("{SIGNATURE_KEY_PREFIX}{}", token.id), signature);
    }
    if changed || !stale.is_empty() {
        Signing::Update(signed)
    } else {
        Signing::UpToDate
    }
}

/// The tokens that may sign at `now`, one per id (the first Secret by name wins).
fn signing_tokens<'a>(
    secrets: impl IntoIterator<Item = &'a Secret>,
    now: Timestamp,
) -> Vec<SigningToken> {
    let mut tokens: Vec<SigningToken> = Vec::new();
    for secret in secrets {
        if secret.type_.as_deref() != Some(SECRET_TYPE) {
            continue;
        }
        let name = secret.name_str();
        match signing_token(secret, now) {
            Ok(token) if tokens.iter().any(|t| t.id == token.id) => {
                debug!(controller = NAME, token_id = %token.id, ignored_secret = name, "duplicate bootstrap tokens found for id, ignoring the duplicate secret");
            }
            Ok(token) => tokens.push(token),
            Err(reason) => {
                debug!(controller = NAME, secret = name, %reason, "the token does not sign cluster-info");
            }
        }
    }
    tokens
}

impl Controller {
    async fn sign_config_map(&self, now: Timestamp) {
        let Some(config_map) = self
            .config_maps
            .get_in(CONFIG_MAP_NAMESPACE, CONFIG_MAP_NAME)
        else {
            return;
        };
        let secrets = self.secrets.list_namespace(TOKEN_NAMESPACE);
        let tokens = signing_tokens(secrets.iter().map(|s| s.as_ref()), now);
        let data = match signed_data(config_map.data.as_ref(), &tokens) {
            Signing::NoKubeconfig => {
                debug!(controller = NAME, key = KUBECONFIG_KEY, config_map = %format!("{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}"), "no key in ConfigMap");
                return;
            }
            Signing::UpToDate => return,
            Signing::Update(data) => data,
        };
        let mut updated = ConfigMap::clone(&config_map);
        updated.data = Some(data);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), CONFIG_MAP_NAMESPACE);
        match api
            .replace(CONFIG_MAP_NAME, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => debug!(
                controller = NAME,
                signatures = tokens.len(),
                "updated the signatures of {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}"
            ),
            // Our cache was behind, or the ConfigMap went: the event that says so queues
            // the key again.
            Err(error) if is_conflict(&error) || is_not_found(&error) => {
                debug!(controller = NAME, error = %message(&error), "ConfigMap changed while signing it");
            }
            Err(error) => warn!(
                controller = NAME,
                error = %message(&error),
                "error updating ConfigMap {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}; retried at its next change or resync"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    /// Upstream's signature of "payload" with token abc123 / "tokenSecret".
    const SIGNATURE: &str =
        "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiYzEyMyJ9..QSxpUG7Q542CirTI2ECPSZjvBOJURUW5a7XqFpNI958";

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn token(id: &str, secret: &str) -> SigningToken {
        SigningToken {
            id: id.into(),
            secret: secret.as_bytes().to_vec(),
        }
    }

    fn secret(name: &str, type_: &str, pairs: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(TOKEN_NAMESPACE.into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// Upstream's TestNoConfigMap/SimpleSign/NoSignNeeded/UpdateSignature/RemoveSignature,
    /// and the keys it leaves alone.
    #[test]
    fn signatures_follow_the_tokens() {
        let abc = [token("abc123", "tokenSecret")];
        let payload = data(&[("kubeconfig", "payload")]);
        let signed = data(&[
            ("kubeconfig", "payload"),
            ("jws-kubeconfig-abc123", SIGNATURE),
        ]);
        assert_eq!(signed_data(None, &abc), Signing::NoKubeconfig);
        assert_eq!(
            signed_data(Some(&data(&[("other", "x")])), &abc),
            Signing::NoKubeconfig
        );
        assert_eq!(
            signed_data(Some(&payload), &abc),
            Signing::Update(signed.clone())
        );
        assert_eq!(signed_data(Some(&signed), &abc), Signing::UpToDate);
        let old = data(&[
            ("kubeconfig", "payload"),
            ("jws-kubeconfig-abc123", "old signature"),
        ]);
        assert_eq!(
            signed_data(Some(&old), &abc),
            Signing::Update(signed.clone())
        );
        assert_eq!(
            signed_data(Some(&old), &[]),
            Signing::Update(payload.clone())
        );
        assert_eq!(signed_data(Some(&payload), &[]), Signing::UpToDate);
        // Other keys stay; a stale signature goes while a valid one stays.
        let mixed = data(&[
            ("kubeconfig", "payload"),
            ("note", "kept"),
            ("jws-kubeconfig-abc123", SIGNATURE),
            ("jws-kubeconfig-zzz999", "stale"),
            ("jws-kubeconfig-", "no id"),
        ]);
        assert_eq!(
            signed_data(Some(&mixed), &abc),
            Signing::Update(data(&[
                ("kubeconfig", "payload"),
                ("note", "kept"),
                ("jws-kubeconfig-abc123", SIGNATURE),
            ]))
        );
        // A changed kubeconfig is signed again.
        let changed = data(&[("kubeconfig", "new"), ("jws-kubeconfig-abc123", SIGNATURE)]);
        let Signing::Update(resigned) = signed_data(Some(&changed), &abc) else {
            panic!("a new kubeconfig needs a new signature");
        };
        assert_eq!(
            resigned["jws-kubeconfig-abc123"],
            compute_detached_signature("new", "abc123", b"tokenSecret")
        );
    }

    #[test]
    fn tokens_are_the_valid_signing_secrets_once_per_id() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        let good = |name: &str, id: &str, secret_value: &str| {
            secret(
                name,
                SECRET_TYPE,
                &[
                    ("token-id", id),
                    ("token-secret", secret_value),
                    ("usage-bootstrap-signing", "true"),
                ],
            )
        };
        let secrets = [
            good("bootstrap-token-abc123", "abc123", "first"),
            good("bootstrap-token-abc123", "abc123", "second"),
            good("bootstrap-token-def456", "def456", "other"),
            secret(
                "bootstrap-token-ghi789",
                "Opaque",
                &[
                    ("token-id", "ghi789"),
                    ("token-secret", "s"),
                    ("usage-bootstrap-signing", "true"),
                ],
            ),
            secret(
                "bootstrap-token-jkl012",
                SECRET_TYPE,
                &[
                    ("token-id", "jkl012"),
                    ("token-secret", "s"),
                    ("usage-bootstrap-signing", "true"),
                    ("expiration", "2024-05-01T11:59:59Z"),
                ],
            ),
            secret(
                "bootstrap-token-mno345",
                SECRET_TYPE,
                &[
                    ("token-id", "mno345"),
                    ("token-secret", "s"),
                    ("usage-bootstrap-signing", "false"),
                ],
            ),
        ];
        let tokens = signing_tokens(secrets.iter(), now);
        assert_eq!(
            tokens,
            vec![token("abc123", "first"), token("def456", "other")]
        );
    }

    #[test]
    fn only_cluster_info_in_kube_public_is_watched() {
        let config_map = |namespace: &str, name: &str| ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(is_cluster_info(&config_map("kube-public", "cluster-info")));
        assert!(!is_cluster_info(&config_map("default", "cluster-info")));
        assert!(!is_cluster_info(&config_map("kube-public", "other")));
    }

    #[test]
    fn the_token_secret_never_shows_in_debug_output() {
        let shown = format!("{:?}", token("abc123", "hunter2-secret"));
        assert!(
            shown.contains("abc123") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
