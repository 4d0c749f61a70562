//! kube-apiserver's legacy ServiceAccount tokens: the JWTs KCM's token controller writes
//! into Secrets of type `kubernetes.io/service-account-token`
//! (pkg/serviceaccount/jwt.go's authenticator and legacy.go's validator, with lookup as
//! kube-apiserver's `--service-account-lookup=true` default), and the
//! legacy-token-tracking controller's ConfigMap
//! (pkg/controlplane/controller/legacytokentracking).
//!
//! - [`ServiceAccountKey`] is the cluster's signing key pair, kubeadm's `sa.key`/`sa.pub`:
//!   a fresh ECDSA P-256 key (ring, which makes kube-sim's keys, cannot make RSA keys), or
//!   a key given as PEM, RSA as kubeadm makes it (RS256) or P-256 (ES256).
//! - [`Sim::authenticate_legacy_token`] verifies a bearer token whose unverified `iss` is
//!   `kubernetes/serviceaccount` with the public key, then looks it up: its
//!   Secret exists, is not being deleted and holds this very token, its ServiceAccount
//!   exists with the UID of the claim. A Secret labelled
//!   `kubernetes.io/legacy-token-invalid-since` refuses the token. Each use labels the
//!   Secret `kubernetes.io/legacy-token-last-used=<today>` (a merge patch, only when the
//!   label is neither today nor tomorrow, so at most about once a day).
//! - [`Sim::reconcile_token_tracking`] keeps the ConfigMap
//!   `kube-system/kube-apiserver-legacy-service-account-token-tracking` with
//!   `since: <UTC date>`: created when missing (at most once per 30 minutes, as upstream's
//!   rate limiter allows), its `since` rewritten to today when it does not parse as a
//!   date.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use rkcm_gocompat::gofmt::quote_list;
use serde_json::{json, Value};

use crate::api::{now, Sim, API_AUDIENCE};
use crate::kubernetes_service::{apiserver, internal_request};
use crate::request::User;
use crate::resources::ResourceDef;

pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
pub const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
pub const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";
pub const TRACKING_CONFIG_MAP: &str = "kube-apiserver-legacy-service-account-token-tracking";
pub const TRACKING_SINCE_KEY: &str = "since";
/// How often kube-sim looks at the tracking ConfigMap (upstream reacts to its watch).
pub const TRACKING_INTERVAL: Duration = Duration::from_secs(10);
/// Upstream's creation rate limit for the tracking ConfigMap.
const TRACKING_CREATION_INTERVAL: Duration = Duration::from_secs(30 * 60);
const DATE_FORMAT: &str = "%Y-%m-%d";

/// The ServiceAccount token signing key pair (kube-apiserver's
/// `--service-account-key-file`, KCM's `--service-account-private-key-file`).
pub struct ServiceAccountKey {
    private_pem: String,
    public_pem: String,
    /// The public key as ring verifies it: the uncompressed P-256 point, or the DER
    /// RSAPublicKey.
    public_raw: Vec<u8>,
    /// The JWS algorithm its tokens are signed with: `ES256` or `RS256`.
    algorithm: &'static str,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private key.
        f.debug_struct("ServiceAccountKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountKey {
    /// A fresh ECDSA P-256 key pair.
    pub fn generate() -> Result<Self, rcgen::Error> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        Ok(ServiceAccountKey {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
            public_raw: key.public_key_raw().to_vec(),
            algorithm: "ES256",
        })
    }

    /// A key pair from a PKCS#8 PEM private key (`openssl genpkey` writes one): RSA, as
    /// kubeadm's `sa.key`, or ECDSA P-256. Other keys are refused with the reason.
    pub fn from_private_key_pem(pem: &str) -> Result<Self, String> {
        let key = rcgen::KeyPair::from_pem(pem).map_err(|e| {
            format!("not a PKCS#8 PEM private key (BEGIN PRIVATE KEY) rcgen can read: {e}")
        })?;
        let algorithm = if key.algorithm() == &rcgen::PKCS_ECDSA_P256_SHA256 {
            "ES256"
        } else if key.algorithm() == &rcgen::PKCS_RSA_SHA256 {
            "RS256"
        } else {
            return Err(format!(
                "a {:?} key: only RSA and ECDSA P-256 keys sign ServiceAccount tokens here",
                key.algorithm()
            ));
        };
        Ok(ServiceAccountKey {
            private_pem: pem.to_string(),
            public_pem: key.public_key_pem(),
            public_raw: key.public_key_raw().to_vec(),
            algorithm,
        })
    }

    /// The JWS algorithm of its tokens (`ES256` or `RS256`).
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// `sa.key`: the private key, PKCS#8 PEM.
    pub fn private_key_pem(&self) -> &str {
        &self.private_pem
    }

    /// `sa.pub`: the public key, PKIX (SubjectPublicKeyInfo) PEM.
    pub fn public_key_pem(&self) -> &str {
        &self.public_pem
    }

    /// Whether `signature` is this key's JWS signature (alg `alg`) of `message`.
    fn verifies(&self, alg: &str, message: &[u8], signature: &[u8]) -> bool {
        let verification: &dyn ring::signature::VerificationAlgorithm = match alg {
            "ES256" if self.algorithm == "ES256" => &ring::signature::ECDSA_P256_SHA256_FIXED,
            "RS256" if self.algorithm == "RS256" => &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            _ => return false,
        };
        ring::signature::UnparsedPublicKey::new(verification, &self.public_raw)
            .verify(message, signature)
            .is_ok()
    }
}

/// What the legacy authenticator makes of a bearer token.
#[derive(Debug, PartialEq)]
pub enum LegacyOutcome {
    /// Not a legacy ServiceAccount token (other authenticators may know it).
    NotLegacy,
    Authenticated(User),
    /// A legacy token that does not authenticate, and why (TokenReview's `status.error`).
    Refused(String),
}

fn b64url(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

/// The username of a ServiceAccount.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `SplitUsername`: (namespace, name) of a ServiceAccount username.
fn split_username(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    if namespace.is_empty() || name.is_empty() || name.contains(':') {
        return None;
    }
    Some((namespace, name))
}

/// A claim that must be a string when present (Go's unmarshalling fails otherwise).
fn string_claim(claims: &Value, key: &str) -> Result<String, String> {
    match claims.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            go_type_name(other)
        )),
    }
}

fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Null => "null",
    }
}

/// The `aud` claim: a string or a list of strings.
fn audiences(claims: &Value) -> Result<Vec<String>, String> {
    match claims.get("aud") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(String::from)
                    .ok_or_else(|| "square/go-jose/jwt: expected string or array value to unmarshal to Audience".to_string())
            })
            .collect(),
        Some(_) => Err(
            "square/go-jose/jwt: expected string or array value to unmarshal to Audience".into(),
        ),
    }
}

/// A verified token's claims, before the lookup.
struct LegacyClaims {
    subject: String,
    namespace: String,
    secret_name: String,
    service_account_name: String,
    service_account_uid: String,
}

/// The authenticator's checks that need no cluster state: issuer, signature, audiences,
/// claims. `Err(None)` is a token that is not a legacy one.
fn verify(
    key: &ServiceAccountKey,
    token: &str,
    requested_audiences: Option<&[String]>,
) -> Result<LegacyClaims, Option<String>> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, signature] = parts[..] else {
        return Err(None);
    };
    let claims: Value = b64url(payload)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(None)?;
    if claims.get("iss").and_then(Value::as_str) != Some(LEGACY_ISSUER) {
        return Err(None);
    }
    let header: Value = b64url(header)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(None)?;
    let alg = header.get("alg").and_then(Value::as_str).ok_or(None)?;
    let signature = b64url(signature).ok_or(None)?;
    let signed = &token[..token.len() - parts[2].len() - 1];
    if !key.verifies(alg, signed.as_bytes(), &signature) {
        return Err(Some(
            "square/go-jose: error in cryptographic primitive".into(),
        ));
    }
    let token_audiences = audiences(&claims).map_err(Some)?;
    let implicit = vec![API_AUDIENCE.to_string()];
    let token_audiences = if token_audiences.is_empty() {
        implicit.clone()
    } else {
        token_audiences
    };
    let requested = requested_audiences
        .filter(|r| !r.is_empty())
        .map(<[String]>::to_vec)
        .unwrap_or(implicit);
    if !token_audiences.iter().any(|a| requested.contains(a)) {
        return Err(Some(format!(
            "token audiences {} is invalid for the target audiences {}",
            quote_list(&token_audiences),
            quote_list(&requested)
        )));
    }
    let claim = |key: &str| string_claim(&claims, key).map_err(Some);
    let verified = LegacyClaims {
        subject: claim("sub")?,
        namespace: claim("kubernetes.io/serviceaccount/namespace")?,
        secret_name: claim("kubernetes.io/serviceaccount/secret.name")?,
        service_account_name: claim("kubernetes.io/serviceaccount/service-account.name")?,
        service_account_uid: claim("kubernetes.io/serviceaccount/service-account.uid")?,
    };
    let missing = |what: &str| Err(Some(format!("{what} claim is missing")));
    if verified.subject.is_empty() {
        return missing("sub");
    }
    if verified.namespace.is_empty() {
        return missing("namespace");
    }
    if verified.secret_name.is_empty() {
        return missing("secretName");
    }
    if verified.service_account_name.is_empty() {
        return missing("serviceAccountName");
    }
    if verified.service_account_uid.is_empty() {
        return missing("serviceAccountUID");
    }
    match split_username(&verified.subject) {
        Some((namespace, name))
            if namespace == verified.namespace && name == verified.service_account_name => {}
        _ => return Err(Some("sub claim is invalid".into())),
    }
    Ok(verified)
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["labels"][key].as_str()
}

fn is_being_deleted(object: &Value) -> bool {
    !object["metadata"]["deletionTimestamp"].is_null()
}

/// Whether a `since` value is a date as upstream writes and parses them.
fn is_date(text: &str) -> bool {
    text.len() == 10 && chrono::NaiveDate::parse_from_str(text, DATE_FORMAT).is_ok()
}

impl Sim {
    fn served_v1(&self, resource: &str) -> Arc<ResourceDef> {
        self.registry
            .lookup("", "v1", resource)
            .expect("built-in resource is registered")
    }

    /// kube-apiserver's legacy ServiceAccount token authenticator, with lookup (see the
    /// module documentation). `requested_audiences` are a TokenReview's `spec.audiences`.
    pub fn authenticate_legacy_token(
        &self,
        token: &str,
        requested_audiences: Option<&[String]>,
    ) -> LegacyOutcome {
        let Some(key) = self.service_account_key() else {
            return LegacyOutcome::NotLegacy;
        };
        let claims = match verify(&key, token, requested_audiences) {
            Ok(claims) => claims,
            Err(None) => return LegacyOutcome::NotLegacy,
            Err(Some(why)) => return LegacyOutcome::Refused(why),
        };
        match self.look_up_legacy_token(token, &claims) {
            Ok(()) => LegacyOutcome::Authenticated(User {
                name: service_account_username(&claims.namespace, &claims.service_account_name),
                uid: claims.service_account_uid.clone(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{}", claims.namespace),
                    "system:authenticated".into(),
                ],
                ..Default::default()
            }),
            Err(why) => LegacyOutcome::Refused(why),
        }
    }

    /// The validator's lookup: the Secret and the ServiceAccount as the token names them.
    fn look_up_legacy_token(&self, token: &str, claims: &LegacyClaims) -> Result<(), String> {
        let namespace = claims.namespace.as_str();
        let secrets = self.served_v1("secrets");
        let invalidated = || "Token has been invalidated".to_string();
        let secret = self
            .get_object(&secrets, Some(namespace), &claims.secret_name)
            .map_err(|_| invalidated())?;
        if is_being_deleted(&secret) {
            return Err(invalidated());
        }
        let stored = secret["data"]["token"]
            .as_str()
            .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
            .unwrap_or_default();
        if stored != token.as_bytes() {
            return Err("Token does not match server's copy".into());
        }
        let accounts = self.served_v1("serviceaccounts");
        let sa_name = claims.service_account_name.as_str();
        let account = self
            .get_object(&accounts, Some(namespace), sa_name)
            .map_err(|e| e.message)?;
        if is_being_deleted(&account) {
            return Err(format!(
                "ServiceAccount {namespace}/{sa_name} has been deleted"
            ));
        }
        let uid = account["metadata"]["uid"].as_str().unwrap_or("");
        if uid != claims.service_account_uid {
            return Err(format!(
                "ServiceAccount UID ({uid}) does not match claim ({})",
                claims.service_account_uid
            ));
        }
        let result = match label(&secret, INVALID_SINCE_LABEL) {
            Some(since) if !since.is_empty() => Err(format!(
                "the token in secret {namespace}/{secret_name} for service account {namespace}/{sa_name} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token",
                secret_name = claims.secret_name
            )),
            _ => Ok(()),
        };
        self.record_legacy_token_use(&secrets, &secret);
        result
    }

    /// Labels the Secret with today's date unless it says today or tomorrow already.
    fn record_legacy_token_use(&self, def: &Arc<ResourceDef>, secret: &Value) {
        let today_time = now();
        let today = today_time.format(DATE_FORMAT).to_string();
        let tomorrow = (today_time + chrono::Duration::days(1))
            .format(DATE_FORMAT)
            .to_string();
        let last_used = label(secret, LAST_USED_LABEL).unwrap_or("");
        if last_used == today || last_used == tomorrow {
            return;
        }
        let name = secret["metadata"]["name"].as_str().unwrap_or("");
        let namespace = secret["metadata"]["namespace"].as_str().unwrap_or("");
        let patch = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {
            "name": name, "namespace": namespace, "uid": secret["metadata"]["uid"],
            "labels": {LAST_USED_LABEL: today}}});
        let op = Self::system_operation(def);
        let written = self.update_object(
            def,
            Some(namespace),
            name,
            None,
            &apiserver(),
            &internal_request(http::Method::PATCH),
            Some(&op),
            |current| {
                let mut doc = self.present(def, current);
                json_patch::merge(&mut doc, &patch);
                Ok(doc)
            },
        );
        if let Err(e) = written {
            tracing::warn!(secret = %format!("{namespace}/{name}"), error = %e.message,
                "failed to label legacy service account token with last-used date");
        }
    }

    /// The legacy-token-tracking controller's pass (see the module documentation).
    pub fn reconcile_token_tracking(&self) {
        let def = self.served_v1("configmaps");
        let today = now().format(DATE_FORMAT).to_string();
        let op = Self::system_operation(&def);
        match self.get_object(&def, Some("kube-system"), TRACKING_CONFIG_MAP) {
            Err(e) if e.code == 404 => {
                let mut last = self
                    .tracking_created
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if last.is_some_and(|at: Instant| at.elapsed() < TRACKING_CREATION_INTERVAL) {
                    return;
                }
                let map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": TRACKING_CONFIG_MAP, "namespace": "kube-system"},
                    "data": {TRACKING_SINCE_KEY: today}});
                match self.create_object(
                    &def,
                    Some("kube-system"),
                    map,
                    &apiserver(),
                    false,
                    Some(&op),
                ) {
                    Ok(_) => *last = Some(Instant::now()),
                    Err(e) if e.code == 409 => {}
                    Err(e) => {
                        tracing::warn!(error = %e.message, "legacy token tracking: ConfigMap not created")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "legacy token tracking: ConfigMap not read")
            }
            Ok(map) => {
                if map["data"][TRACKING_SINCE_KEY]
                    .as_str()
                    .is_some_and(is_date)
                {
                    return;
                }
                let written = self.update_object(
                    &def,
                    Some("kube-system"),
                    TRACKING_CONFIG_MAP,
                    None,
                    &apiserver(),
                    &internal_request(http::Method::PUT),
                    Some(&op),
                    |current| {
                        let mut fixed = self.present(&def, current);
                        if !fixed["data"].is_object() {
                            fixed["data"] = json!({});
                        }
                        fixed["data"][TRACKING_SINCE_KEY] = json!(today);
                        Ok(fixed)
                    },
                );
                if let Err(e) = written {
                    if e.code != 404 && e.code != 409 {
                        tracing::warn!(error = %e.message, "legacy token tracking: ConfigMap not updated");
                    }
                }
            }
        }
    }
}

/// Runs [`Sim::reconcile_token_tracking`] every [`TRACKING_INTERVAL`] while the cluster
/// lives.
pub async fn run_tracking(sim: std::sync::Weak<Sim>) {
    let mut tick = tokio::time::interval(TRACKING_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(sim) = sim.upgrade() else { return };
        sim.reconcile_token_tracking();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(key_pem: &str, header: &Value, claims: &Value) -> String {
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let (_, der) = rustls_pemfile::read_one_from_slice(key_pem.as_bytes())
            .ok()
            .flatten()
            .map(|(item, _)| match item {
                rustls_pemfile::Item::Pkcs8Key(k) => ((), k.secret_pkcs8_der().to_vec()),
                _ => panic!("a PKCS#8 key"),
            })
            .unwrap();
        let rng = ring::rand::SystemRandom::new();
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = if header["alg"] == "RS256" {
            let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
            let mut signature = vec![0; pair.public().modulus_len()];
            pair.sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &rng,
                signed.as_bytes(),
                &mut signature,
            )
            .unwrap();
            signature
        } else {
            let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
                &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &der,
                &rng,
            )
            .unwrap();
            pair.sign(&rng, signed.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec()
        };
        format!("{signed}.{}", b64(&signature))
    }

    #[test]
    fn an_rsa_key_as_kubeadm_makes_it_verifies_rs256_only() {
        let out = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .output()
            .expect("running openssl");
        assert!(out.status.success(), "openssl genpkey");
        let pem = String::from_utf8(out.stdout).unwrap();
        let key = ServiceAccountKey::from_private_key_pem(&pem).unwrap();
        assert_eq!(key.algorithm(), "RS256");
        assert!(key
            .public_key_pem()
            .starts_with("-----BEGIN PUBLIC KEY-----"));
        assert!(!format!("{key:?}").contains("PRIVATE"), "never the key");
        let rs256 = sign(&pem, &json!({"alg": "RS256", "kid": "k"}), &claims());
        assert!(verify(&key, &rs256, None).is_ok());
        let mut tampered = claims();
        tampered["sub"] = json!("system:serviceaccount:ns:other");
        let parts: Vec<&str> = rs256.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tampered.to_string()),
            parts[2]
        );
        assert!(verify(&key, &forged, None).is_err());
        // An ES256 header on an RSA key is refused, as a key of another type would be.
        let mut relabelled = rs256.clone();
        let es_header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!({"alg": "ES256", "kid": "k"}).to_string());
        relabelled.replace_range(..parts[0].len(), &es_header);
        assert!(verify(&key, &relabelled, None).is_err());
        assert!(ServiceAccountKey::from_private_key_pem("not a key").is_err());
    }

    fn claims() -> Value {
        json!({"iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": "ns",
            "kubernetes.io/serviceaccount/secret.name": "tok",
            "kubernetes.io/serviceaccount/service-account.name": "sa",
            "kubernetes.io/serviceaccount/service-account.uid": "u-1",
            "sub": "system:serviceaccount:ns:sa"})
    }

    #[test]
    fn verification_checks_issuer_signature_audiences_and_claims() {
        let key = ServiceAccountKey::generate().unwrap();
        let other = ServiceAccountKey::generate().unwrap();
        let header = json!({"alg": "ES256", "kid": "k"});
        let good = sign(key.private_key_pem(), &header, &claims());
        let verified = verify(&key, &good, None).expect("verifies");
        assert_eq!(verified.secret_name, "tok");
        assert_eq!(verified.service_account_uid, "u-1");

        let forged = sign(other.private_key_pem(), &header, &claims());
        assert_eq!(
            verify(&key, &forged, None).err(),
            Some(Some(
                "square/go-jose: error in cryptographic primitive".into()
            ))
        );
        let mut foreign = claims();
        foreign["iss"] = json!("https://kubernetes.default.svc");
        let foreign = sign(key.private_key_pem(), &header, &foreign);
        assert_eq!(verify(&key, &foreign, None).err(), Some(None), "not ours");
        assert_eq!(verify(&key, "kube-sim.abc", None).err(), Some(None));

        let mut bad_sub = claims();
        bad_sub["sub"] = json!("system:serviceaccount:other:sa");
        let bad_sub = sign(key.private_key_pem(), &header, &bad_sub);
        assert_eq!(
            verify(&key, &bad_sub, None).err(),
            Some(Some("sub claim is invalid".into()))
        );
        let mut no_uid = claims();
        no_uid
            .as_object_mut()
            .unwrap()
            .remove("kubernetes.io/serviceaccount/service-account.uid");
        let no_uid = sign(key.private_key_pem(), &header, &no_uid);
        assert_eq!(
            verify(&key, &no_uid, None).err(),
            Some(Some("serviceAccountUID claim is missing".into()))
        );
        let elsewhere = ["https://elsewhere".to_string()];
        assert_eq!(
            verify(&key, &good, Some(&elsewhere)).err(),
            Some(Some(
                "token audiences [\"https://kubernetes.default.svc\"] is invalid for the target audiences [\"https://elsewhere\"]".into()
            ))
        );
    }

    #[test]
    fn dates_are_upstreams() {
        assert!(is_date("2020-01-01"));
        assert!(!is_date("2020-1-1"));
        assert!(!is_date("yesterday"));
        assert_eq!(
            split_username("system:serviceaccount:a:b"),
            Some(("a", "b"))
        );
        assert_eq!(split_username("system:serviceaccount:a"), None);
    }
}
