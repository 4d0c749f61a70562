//! token-cleaner-controller: a bootstrap token Secret is deleted once its `expiration` has
//! passed, or at once when that is no time at all (upstream
//! `pkg/controller/bootstrap/tokencleaner.go`).
//!
//! Keys are `kube-system/<name>` of Secrets of type `bootstrap.kubernetes.io/token`
//! (queue `token_cleaner`, one worker), put on the queue by their additions and updates.
//! A sync judges the Secret in the store ([`decide`]): expired or unparsable → DELETE with
//! its UID as precondition (a Secret recreated meanwhile under the same name is not
//! touched); expiring later → the key comes back when the time is up; no expiration →
//! kept for ever. As upstream, a failed delete is logged, not retried: the next update or
//! resync of the Secret tries again.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Preconditions};
use tracing::{debug, warn};

use super::secrets::{expiration, is_token_secret, Expiration, EXPIRATION_KEY, SECRET_TYPE};
use crate::api_errors::{is_conflict, is_not_found, message};
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::queue::WorkQueue;
use crate::store::{key_of, split_key, Store};

pub const NAME: &str = "token-cleaner-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/secrets"];
const QUEUE: &str = "token_cleaner";

struct Controller {
    client: kube::Client,
    secrets: Store<Secret>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(QUEUE);
    let secrets = context.informers.get::<Secret>();
    {
        let queue = queue.clone();
        secrets.add_handler(Arc::new(move |change: &Change<Secret>| {
            // A deleted token needs no cleaning.
            if let Some(secret) = change.live().filter(|s| is_token_secret(s)) {
                queue.add(key_of(&secret.metadata));
            }
        }));
    }
    let controller = Arc::new(Controller {
        client,
        secrets: secrets.store().clone(),
        queue: queue.clone(),
    });
    Ok(Runnable::new(
        NAME,
        queue,
        1,
        controller,
        |controller, key| async move {
            controller.sync(&key, Timestamp::now()).await;
            Ok(())
        },
    ))
}

/// What becomes of a token Secret at `now`.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Not a bootstrap token, or one that never expires.
    Keep,
    Delete(Expiration),
    /// Look again once this much time has passed.
    RecheckAfter(Duration),
}

fn decide(secret: &Secret, now: Timestamp) -> Verdict {
    if secret.type_.as_deref() != Some(SECRET_TYPE) {
        return Verdict::Keep;
    }
    match expiration(secret, now) {
        Expiration::Never => Verdict::Keep,
        Expiration::In(remaining) => Verdict::RecheckAfter(remaining),
        expired => Verdict::Delete(expired),
    }
}

impl Controller {
    async fn sync(&self, key: &str, now: Timestamp) {
        let Some(secret) = self.secrets.get(key) else {
            debug!(controller = NAME, secret = key, "Secret has been deleted");
            return;
        };
        match decide(&secret, now) {
            Verdict::Keep => {}
            Verdict::RecheckAfter(remaining) => self.queue.add_after(key.to_string(), remaining),
            Verdict::Delete(why) => self.delete(key, &secret, why).await,
        }
    }

    async fn delete(&self, key: &str, secret: &Secret, why: Expiration) {
        let (namespace, name) = split_key(key);
        let expiration_text = secret
            .data
            .as_ref()
            .and_then(|data| data.get(EXPIRATION_KEY))
            .map(|value| String::from_utf8_lossy(&value.0).into_owned())
            .unwrap_or_default();
        match why {
            Expiration::Unparsable => {
                debug!(controller = NAME, secret = key, expiration = %expiration_text, "unparseable expiration time: treating the token as expired")
            }
            _ => {
                debug!(controller = NAME, secret = key, expiration = %expiration_text, "deleting expired secret")
            }
        }
        let params = DeleteParams {
            preconditions: secret
                .metadata
                .uid
                .clone()
                .filter(|uid| !uid.is_empty())
                .map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &params).await {
            Ok(_) => debug!(
                controller = NAME,
                secret = key,
                "deleted expired bootstrap token"
            ),
            // Already gone, or the name now belongs to another Secret (the UID differs).
            Err(error) if is_not_found(&error) || is_conflict(&error) => {
                debug!(controller = NAME, secret = key, error = %message(&error), "the expired secret is already gone");
            }
            Err(error) => warn!(
                controller = NAME,
                secret = key,
                error = %message(&error),
                "error deleting expired bootstrap token; retried at its next update or resync"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, expiration: Option<&str>) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("bootstrap-token-abc123".into()),
                namespace: Some("kube-system".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(
                expiration
                    .map(|e| {
                        (
                            EXPIRATION_KEY.to_string(),
                            ByteString(e.as_bytes().to_vec()),
                        )
                    })
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// Upstream's TestCleanerNoExpiration/Expired/NotExpired/ExpiredAt, and garbage.
    #[test]
    fn verdicts() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        let cases = [
            (SECRET_TYPE, None, Verdict::Keep),
            (SECRET_TYPE, Some(""), Verdict::Keep),
            (
                SECRET_TYPE,
                Some("2024-05-01T11:00:00Z"),
                Verdict::Delete(Expiration::Past),
            ),
            (
                SECRET_TYPE,
                Some("2024-05-01T12:00:00Z"),
                Verdict::Delete(Expiration::Past),
            ),
            (
                SECRET_TYPE,
                Some("garbage"),
                Verdict::Delete(Expiration::Unparsable),
            ),
            (
                SECRET_TYPE,
                Some("2024-05-01T13:00:00Z"),
                Verdict::RecheckAfter(Duration::from_secs(3600)),
            ),
            (
                SECRET_TYPE,
                Some("2024-05-01T12:00:02Z"),
                Verdict::RecheckAfter(Duration::from_secs(2)),
            ),
            ("Opaque", Some("2024-05-01T11:00:00Z"), Verdict::Keep),
            ("Opaque", Some("garbage"), Verdict::Keep),
        ];
        for (type_, expiration, expected) in cases {
            assert_eq!(
                decide(&secret(type_, expiration), now),
                expected,
                "{type_} {expiration:?}"
            );
        }
    }
}
