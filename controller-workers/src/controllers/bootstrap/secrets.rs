//! What a bootstrap token Secret says, read as cluster-bootstrap reads it (its `token/api`
//! names, `util/secrets` and the signer's `validateSecretForSigning`): the token's id and
//! secret, its expiration, and whether it may sign `cluster-info`.
//!
//! A token is `<id>.<secret>`; its Secret is `kube-system/bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token`. The API server checks none of that (the type has no
//! validation of its own), so every field is read defensively: a missing key reads as
//! empty, as upstream's `GetData` returns it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;

use super::rfc3339;
use crate::meta::ResourceNames;

/// `bootstrapapi.SecretTypeBootstrapToken`.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Where both controllers look for tokens (`api.NamespaceSystem`).
pub const TOKEN_NAMESPACE: &str = "kube-system";
/// `bootstrapapi.BootstrapTokenSecretPrefix`.
pub const SECRET_NAME_PREFIX: &str = "bootstrap-token-";
pub const TOKEN_ID_KEY: &str = "token-id";
pub const TOKEN_SECRET_KEY: &str = "token-secret";
/// An RFC 3339 time; past it (or unreadable) the token is expired.
pub const EXPIRATION_KEY: &str = "expiration";
/// `"true"` lets the token sign `cluster-info`; any other value does not.
pub const USAGE_SIGNING_KEY: &str = "usage-bootstrap-signing";

/// Whether the controllers watch this Secret at all: a bootstrap token in `kube-system`
/// (both controllers' informer filter).
pub(super) fn is_token_secret(secret: &Secret) -> bool {
    secret.type_.as_deref() == Some(SECRET_TYPE)
        && secret.metadata.namespace.as_deref() == Some(TOKEN_NAMESPACE)
}

/// The value of `key`, empty when it is absent.
fn data<'a>(secret: &'a Secret, key: &str) -> &'a [u8] {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .map_or(&[], |value| value.0.as_slice())
}

/// The token id in a Secret name `bootstrap-token-<id>`, `<id>` being six of `[a-z0-9]`.
pub(super) fn parse_name(name: &str) -> Option<&str> {
    let id = name.strip_prefix(SECRET_NAME_PREFIX)?;
    let valid = id.len() == 6
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    valid.then_some(id)
}

/// When a token expires, as upstream's `GetExpiration` judges it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Expiration {
    /// No `expiration` (or an empty one): the token never expires.
    Never,
    /// It expires after this long.
    In(Duration),
    /// The time has come (a remaining time of zero included).
    Past,
    /// The text is no time Go's `time.Parse(time.RFC3339, …)` reads: treated as expired.
    Unparsable,
}

impl Expiration {
    pub(super) fn expired(&self) -> bool {
        matches!(self, Expiration::Past | Expiration::Unparsable)
    }
}

pub(super) fn expiration(secret: &Secret, now: Timestamp) -> Expiration {
    let text = data(secret, EXPIRATION_KEY);
    if text.is_empty() {
        return Expiration::Never;
    }
    let Some(expires) = std::str::from_utf8(text).ok().and_then(rfc3339::parse) else {
        return Expiration::Unparsable;
    };
    let remaining = expires - now.as_nanosecond();
    if remaining <= 0 {
        return Expiration::Past;
    }
    // Go's time.Duration, hence its Sub, stops at about 292 years.
    let nanos = u64::try_from(remaining.min(i128::from(i64::MAX))).unwrap_or(i64::MAX as u64);
    Expiration::In(Duration::from_nanos(nanos))
}

/// A token that may sign `cluster-info`.
#[derive(PartialEq, Eq)]
pub(super) struct SigningToken {
    pub(super) id: String,
    /// The HMAC key.
    pub(super) secret: Vec<u8>,
}

/// Without the secret, so that no log or test failure ever shows it.
impl std::fmt::Debug for SigningToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningToken")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Why a token Secret signs nothing (upstream logs each at V(3)).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NotSigning {
    #[error("invalid secret name, must be of the form {SECRET_NAME_PREFIX}<secret-id>")]
    BadName,
    #[error("no {TOKEN_ID_KEY} key in the secret")]
    NoTokenId,
    #[error("the {TOKEN_ID_KEY} does not match the secret name")]
    IdMismatch,
    #[error("no {TOKEN_SECRET_KEY} key in the secret")]
    NoTokenSecret,
    #[error("the token has expired, or its {EXPIRATION_KEY} is no RFC 3339 time")]
    Expired,
    #[error("{USAGE_SIGNING_KEY} is not \"true\"")]
    NotForSigning,
}

/// The token a Secret holds if it may sign at `now`: named `bootstrap-token-<id>`, its
/// `token-id` that id, a non-empty `token-secret`, not expired, `usage-bootstrap-signing`
/// exactly `"true"`.
pub(super) fn signing_token(secret: &Secret, now: Timestamp) -> Result<SigningToken, NotSigning> {
    let name = secret.name_str();
    let name_id = parse_name(name).ok_or(NotSigning::BadName)?;
    let id = data(secret, TOKEN_ID_KEY);
    if id.is_empty() {
        return Err(NotSigning::NoTokenId);
    }
    if id != name_id.as_bytes() {
        return Err(NotSigning::IdMismatch);
    }
    let token_secret = data(secret, TOKEN_SECRET_KEY);
    if token_secret.is_empty() {
        return Err(NotSigning::NoTokenSecret);
    }
    if expiration(secret, now).expired() {
        return Err(NotSigning::Expired);
    }
    if data(secret, USAGE_SIGNING_KEY) != b"true" {
        return Err(NotSigning::NotForSigning);
    }
    Ok(SigningToken {
        id: name_id.to_string(),
        secret: token_secret.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(TOKEN_NAMESPACE.into()),
                ..Default::default()
            },
            type_: Some(SECRET_TYPE.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn names_carry_six_lowercase_letters_or_digits() {
        assert_eq!(parse_name("bootstrap-token-abc123"), Some("abc123"));
        for name in [
            "abc123",
            "bootstrap-token-",
            "bootstrap-token-abc12",
            "bootstrap-token-abc1234",
            "bootstrap-token-ABC123",
            "bootstrap-token-abc-12",
            "bootstrap-token-abc12\n",
            "xbootstrap-token-abc123",
            "bootstrap-token-abc12é",
        ] {
            assert_eq!(parse_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn expirations() {
        let cases = [
            (None, Expiration::Never),
            (Some(""), Expiration::Never),
            (
                Some("2024-05-01T13:00:00Z"),
                Expiration::In(Duration::from_secs(3600)),
            ),
            (
                Some("2024-05-01T14:00:00.5+02:00"),
                Expiration::In(Duration::from_millis(500)),
            ),
            (Some("2024-05-01T12:00:00Z"), Expiration::Past),
            (Some("2024-05-01T11:00:00Z"), Expiration::Past),
            (Some("2024-05-01T13:00:00+02:00"), Expiration::Past),
            (
                Some("9999-12-31T23:59:59Z"),
                Expiration::In(Duration::from_nanos(i64::MAX as u64)),
            ),
            (Some("garbage"), Expiration::Unparsable),
            (Some("2024-05-01T13:00:00"), Expiration::Unparsable),
            (Some("2024-05-01"), Expiration::Unparsable),
        ];
        for (text, expected) in cases {
            let data: Vec<(&str, &str)> = text.map(|t| (EXPIRATION_KEY, t)).into_iter().collect();
            assert_eq!(
                expiration(&secret("bootstrap-token-abc123", &data), now()),
                expected,
                "{text:?}"
            );
        }
        let mut binary = secret("bootstrap-token-abc123", &[]);
        binary
            .data
            .get_or_insert_with(BTreeMap::new)
            .insert(EXPIRATION_KEY.into(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(expiration(&binary, now()), Expiration::Unparsable);
        assert!(Expiration::Unparsable.expired() && Expiration::Past.expired());
        assert!(!Expiration::Never.expired());
        assert!(!Expiration::In(Duration::from_secs(1)).expired());
    }

    /// Upstream's TestValidateSecretForSigning table, plus the name checks.
    #[test]
    fn which_tokens_may_sign() {
        let hour_later = "2024-05-01T13:00:00Z";
        let hour_ago = "2024-05-01T11:00:00Z";
        let name = "bootstrap-token-abc123";
        // (secret name, token-id, token-secret, usage-bootstrap-signing, expiration, verdict)
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            Result<(), NotSigning>,
        );
        let cases: [Case; 11] = [
            (name, "abc123", "tokenSecret", "true", "", Ok(())),
            (name, "abc123", "tokenSecret", "true", hour_later, Ok(())),
            (
                name,
                "abc123",
                "tokenSecret",
                "true",
                hour_ago,
                Err(NotSigning::Expired),
            ),
            (
                name,
                "abc123",
                "tokenSecret",
                "true",
                "garbage",
                Err(NotSigning::Expired),
            ),
            (
                name,
                "abc123",
                "tokenSecret",
                "",
                "garbage",
                Err(NotSigning::Expired),
            ),
            (
                name,
                "abc123",
                "tokenSecret",
                "",
                "",
                Err(NotSigning::NotForSigning),
            ),
            (
                name,
                "abc123",
                "tokenSecret",
                "True",
                "",
                Err(NotSigning::NotForSigning),
            ),
            (
                name,
                "",
                "tokenSecret",
                "true",
                "",
                Err(NotSigning::NoTokenId),
            ),
            (
                name,
                "abc123",
                "",
                "true",
                "",
                Err(NotSigning::NoTokenSecret),
            ),
            (
                "abc123",
                "abc123",
                "tokenSecret",
                "true",
                "",
                Err(NotSigning::BadName),
            ),
            (
                "bootstrap-token-def456",
                "abc123",
                "tokenSecret",
                "true",
                "",
                Err(NotSigning::IdMismatch),
            ),
        ];
        for (name, id, token_secret, usage, expiration, expected) in cases {
            let s = secret(
                name,
                &[
                    (TOKEN_ID_KEY, id),
                    (TOKEN_SECRET_KEY, token_secret),
                    (USAGE_SIGNING_KEY, usage),
                    (EXPIRATION_KEY, expiration),
                ],
            );
            let expected = expected.map(|()| SigningToken {
                id: id.to_string(),
                secret: token_secret.as_bytes().to_vec(),
            });
            assert_eq!(
                signing_token(&s, now()),
                expected,
                "{name} id={id:?} usage={usage:?} expiration={expiration:?}"
            );
        }
        // No data at all.
        let mut bare = secret(name, &[]);
        bare.data = None;
        assert_eq!(signing_token(&bare, now()), Err(NotSigning::NoTokenId));
    }

    #[test]
    fn only_kube_system_bootstrap_tokens_are_watched() {
        let token = secret("bootstrap-token-abc123", &[]);
        assert!(is_token_secret(&token));
        let mut elsewhere = token.clone();
        elsewhere.metadata.namespace = Some("default".into());
        assert!(!is_token_secret(&elsewhere));
        let mut opaque = token.clone();
        opaque.type_ = Some("Opaque".into());
        assert!(!is_token_secret(&opaque));
        let mut untyped = token;
        untyped.type_ = None;
        assert!(!is_token_secret(&untyped));
    }
}
