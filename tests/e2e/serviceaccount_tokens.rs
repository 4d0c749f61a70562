//! End-to-end tests of the serviceaccount-token and legacy-serviceaccount-token-cleaner
//! controllers in `rkcm worker` (started by `rkcm launcher`) (WO-2 checks 1 and 3 to 6): kube-sim with its keys
//! written as kubeadm's /etc/kubernetes/pki holds them, the real `rkcm launcher` with
//! its informer-server and worker as separate processes, every check made with kubectl or kube-rs.
//!
//! The test checks each minted JWT itself with nothing but `sa.pub`: the header's `alg`
//! and `kid`, the six claims, and the signature. The token then authenticates to the API
//! server as its ServiceAccount (RBAC applying), and the API server records its use.
//!
//! The tests that need the cluster's signing key run on kube-sim only; on a real cluster
//! (RKCM_TEST_KUBECONFIG) they say they are skipped.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};
use x509_parser::prelude::FromDer as _;

const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const LAST_USED: &str = "kubernetes.io/legacy-token-last-used";
const INVALID_SINCE: &str = "kubernetes.io/legacy-token-invalid-since";
const TRACKING: &str = "kube-apiserver-legacy-service-account-token-tracking";

/// kube-sim's keys written as kubeadm's PKI directory: (dir, ca.crt, sa.key, sa.pub).
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    key: PathBuf,
    public: PathBuf,
}

/// The cluster's PKI files, or `None` (said) on a real cluster, whose keys the test has not.
/// The ServiceAccount key is an RSA key made by openssl, as kubeadm's `sa.key` is, which
/// kube-sim then verifies tokens with (its `--service-account-signing-key-file`).
fn pki(cluster: &TestCluster, test: &str) -> Option<Pki> {
    let Some(sim) = cluster.sim.as_ref() else {
        println!("{test}: skipped on a real cluster: it needs kube-sim's PKI (sa.key, sa.pub)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, data: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        path
    };
    let (ca, _) = sim.ca().expect("kube-sim serves HTTPS");
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("running openssl genpkey");
    assert!(out.status.success(), "openssl genpkey failed");
    let pem = String::from_utf8(out.stdout).unwrap();
    let key = kube_sim::legacy_tokens::ServiceAccountKey::from_private_key_pem(&pem)
        .expect("kube-sim takes the RSA key");
    assert_eq!(key.algorithm(), "RS256");
    let public = key.public_key_pem().to_string();
    sim.sim.set_service_account_key(std::sync::Arc::new(key));
    Some(Pki {
        ca: write("ca.crt", ca),
        key: write("sa.key", &pem),
        public: write("sa.pub", &public),
        _dir: dir,
    })
}

/// WO-2 check 3's key id, computed with openssl from `sa.key` alone: `openssl pkey -in
/// sa.key -pubout -outform DER | openssl dgst -sha256 -binary`, unpadded base64url.
fn openssl_kid(key: &Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl pkey -in '{}' -pubout -outform DER | openssl dgst -sha256 -binary",
            key.display()
        ))
        .output()
        .expect("running openssl");
    assert!(out.status.success(), "openssl pkey | openssl dgst");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&out.stdout)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn b64url(part: &str) -> Vec<u8> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("unpadded base64url")
}

/// Checks a minted token with `sa.pub` alone, as a relying party would: the header is
/// exactly `{"alg":"RS256","kid":K}` with K the unpadded base64url SHA-256 of the DER
/// SubjectPublicKeyInfo (and the same as openssl's from `sa.key`), the payload exactly
/// upstream's six legacy claims, and the signature verifies.
fn verify_jwt(token: &str, pki: &Pki, expected_claims: &Value) {
    let pem = std::fs::read(&pki.public).unwrap();
    let der = match public_key_der(&pem) {
        Some(der) => der,
        None => panic!("sa.pub holds a PUBLIC KEY block"),
    };
    let kid = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(ring::digest::digest(&ring::digest::SHA256, &der).as_ref());
    assert_eq!(kid, openssl_kid(&pki.key), "the kid of sa.pub is openssl's");
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a compact JWS: {} parts", parts.len());
    let header = String::from_utf8(b64url(parts[0])).unwrap();
    assert_eq!(header, format!("{{\"alg\":\"RS256\",\"kid\":\"{kid}\"}}"));
    let payload: Value = serde_json::from_slice(&b64url(parts[1])).unwrap();
    assert_eq!(&payload, expected_claims, "exactly the six legacy claims");
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der).unwrap();
    let signed = format!("{}.{}", parts[0], parts[1]);
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        spki.subject_public_key.data.as_ref(),
    )
    .verify(signed.as_bytes(), &b64url(parts[2]))
    .expect("the signature verifies with sa.pub");
}

/// The DER of the first `PUBLIC KEY` PEM block.
fn public_key_der(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let body = text
        .split("-----BEGIN PUBLIC KEY-----")
        .nth(1)?
        .split("-----END PUBLIC KEY-----")
        .next()?;
    let joined: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(joined)
        .ok()
}

fn legacy_claims(ns: &str, secret: &str, account: &str, uid: &str) -> Value {
    json!({"iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": account,
        "kubernetes.io/serviceaccount/service-account.uid": uid,
        "sub": format!("system:serviceaccount:{ns}:{account}")})
}

fn data(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

fn label(secret: &Secret, key: &str) -> Option<String> {
    secret.metadata.labels.as_ref()?.get(key).cloned()
}

fn today() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date()
        .to_string()
}

fn token_secret(name: &str, account: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Secret", "type": TOKEN_TYPE,
        "metadata": {"name": name, "labels": labels,
            "annotations": {"kubernetes.io/service-account.name": account}}})
    .to_string()
}

/// kubectl with a kubeconfig that carries only the cluster CA and `token`: (exit code,
/// stdout, stderr).
async fn kubectl_with_token(
    stack: &LauncherStack,
    dir: &Path,
    token: &str,
    args: &[&str],
) -> (bool, String, String) {
    let sim = stack.cluster.sim.as_ref().expect("kube-sim");
    let (ca, _) = sim.ca().expect("HTTPS");
    let kubeconfig = dir.join(format!(
        "token-{}.kubeconfig",
        kube_sim::api::random_suffix(5)
    ));
    std::fs::write(
        &kubeconfig,
        kube_sim::certs::kubeconfig(&sim.url(), Some(ca), None, Some(token)),
    )
    .unwrap();
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .output()
        .await
        .expect("running kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Secret once its token is filled in.
async fn filled(stack: &LauncherStack, secrets: &Api<Secret>, name: &str) -> Secret {
    stack
        .wait(&format!("Secret {name} filled in"), || {
            let secrets = secrets.clone();
            let name = name.to_string();
            async move {
                Ok(secrets
                    .get_opt(&name)
                    .await?
                    .filter(|s| data(s, "token").is_some_and(|t| !t.is_empty())))
            }
        })
        .await
}

async fn gone(stack: &LauncherStack, secrets: &Api<Secret>, name: &str) {
    stack
        .wait(&format!("Secret {name} deleted"), || {
            let secrets = secrets.clone();
            let name = name.to_string();
            async move { Ok(secrets.get_opt(&name).await?.is_none().then_some(())) }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_secrets_are_filled_authenticate_and_follow_their_service_account() {
    let cluster = TestCluster::start().await.unwrap();
    let Some(pki) = pki(&cluster, "token_secrets_are_filled") else {
        return;
    };
    let stack = LauncherStack::start_on(
        cluster,
        &[
            "--controllers",
            "serviceaccount,serviceaccount-token",
            "--service-account-private-key-file",
            path(&pki.key),
            "--root-ca-file",
            path(&pki.ca),
        ],
    )
    .await;
    let ns = stack.namespace("sa-tokens").await;
    let secrets: Api<Secret> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let accounts: Api<ServiceAccount> = Api::namespaced(stack.cluster.client.clone(), &ns);
    stack
        .kubectl(&["create", "serviceaccount", "s1", "-n", &ns])
        .await;
    stack
        .kubectl(&["create", "serviceaccount", "s2", "-n", &ns])
        .await;

    // WO-2 check 3: a token Secret naming `default` is filled in within seconds.
    let asked = Instant::now();
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &token_secret("tok", "default", json!({})),
        )
        .await;
    let tok = filled(&stack, &secrets, "tok").await;
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(10), "filled after {took:?}");
    let default_uid = accounts.get("default").await.unwrap().metadata.uid.unwrap();
    let ca = std::fs::read_to_string(&pki.ca).unwrap();
    assert_eq!(data(&tok, "ca.crt").as_deref(), Some(ca.as_str()));
    assert_eq!(data(&tok, "namespace").as_deref(), Some(ns.as_str()));
    let annotations = tok.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("kubernetes.io/service-account.uid"),
        Some(&default_uid)
    );
    let token = data(&tok, "token").unwrap();
    verify_jwt(
        &token,
        &pki,
        &legacy_claims(&ns, "tok", "default", &default_uid),
    );

    // WO-2 check 4: the token is `default`'s identity; the API server records its use.
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = kubectl_with_token(
        &stack,
        dir.path(),
        &token,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out, format!("system:serviceaccount:{ns}:default"));
    let tok = secrets.get("tok").await.unwrap();
    assert_eq!(label(&tok, LAST_USED), Some(today()));
    // RBAC applies to it: no pods until a role allows it.
    let (ok, _, err) =
        kubectl_with_token(&stack, dir.path(), &token, &["get", "pods", "-n", &ns]).await;
    assert!(!ok && err.contains("Forbidden"), "{err}");
    stack
        .kubectl(&[
            "create",
            "role",
            "pods",
            "--verb=list",
            "--resource=pods",
            "-n",
            &ns,
        ])
        .await;
    stack
        .kubectl(&[
            "create",
            "rolebinding",
            "pods",
            "--role=pods",
            &format!("--serviceaccount={ns}:default"),
            "-n",
            &ns,
        ])
        .await;
    let (ok, _, err) =
        kubectl_with_token(&stack, dir.path(), &token, &["get", "pods", "-n", &ns]).await;
    assert!(ok, "allowed once bound: {err}");

    // WO-2 check 5: a Secret naming no existing ServiceAccount is deleted.
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &token_secret("orphan", "nope", json!({})),
        )
        .await;
    gone(&stack, &secrets, "orphan").await;

    // A deleted ServiceAccount's token Secrets are deleted.
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &token_secret("s1-token", "s1", json!({})),
        )
        .await;
    filled(&stack, &secrets, "s1-token").await;
    stack
        .kubectl(&["delete", "serviceaccount", "s1", "-n", &ns])
        .await;
    gone(&stack, &secrets, "s1-token").await;

    // A deleted Secret listed in its ServiceAccount's `secrets` leaves the list.
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &token_secret("listed", "default", json!({})),
        )
        .await;
    filled(&stack, &secrets, "listed").await;
    accounts
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"secrets": [{"name": "listed"}, {"name": "tok"}]})),
        )
        .await
        .unwrap();
    stack
        .kubectl(&["delete", "secret", "listed", "-n", &ns])
        .await;
    stack
        .wait("`listed` taken out of default's secrets", || {
            let accounts = accounts.clone();
            async move {
                let names: Vec<String> = accounts
                    .get("default")
                    .await?
                    .secrets
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|r| r.name)
                    .collect();
                Ok((names == ["tok"]).then_some(()))
            }
        })
        .await;

    // A new ServiceAccount gets no Secret (1.29 makes none): only the test's own remain.
    let mut names: Vec<String> = secrets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| s.type_.as_deref() == Some(TOKEN_TYPE))
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    assert_eq!(names, ["tok"], "s2 got no token Secret");
    let log = stack.log();
    assert!(!log.contains(&token), "the token is never logged");
}

/// WO-2 check 1: without `--service-account-private-key-file` the controller says it is
/// disabled and the others run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_token_controller_is_disabled() {
    let stack =
        LauncherStack::start(&["--controllers", "serviceaccount,serviceaccount-token"]).await;
    // The serviceaccount controller runs: a new namespace gets its `default` account.
    stack.namespace("sa-tokens-off").await;
    let log = stack.log();
    assert!(
        log.contains("Controller is disabled because there is no private key"),
        "{log}"
    );
}

/// WO-2 check 6: with a period of one second and usage tracked since 2020, a restarted
/// worker's first pass labels an unused token invalid (which then no longer
/// authenticates), deletes one invalid for longer than a period, and leaves alone one a pod
/// mounts and one used today.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_cleaner_invalidates_then_deletes_unused_tokens() {
    let cluster = TestCluster::start().await.unwrap();
    let Some(pki) = pki(&cluster, "the_legacy_cleaner") else {
        return;
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "kube-system");
    config_maps
        .patch(
            TRACKING,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"since": "2020-01-01"}})),
        )
        .await
        .unwrap();
    let stack = LauncherStack::start_on(
        cluster,
        &[
            "--controllers",
            "serviceaccount,serviceaccount-token,legacy-service-account-token-cleaner",
            "--service-account-private-key-file",
            path(&pki.key),
            "--legacy-service-account-token-clean-up-period=1s",
        ],
    )
    .await;
    let ns = stack.namespace("sa-cleaner").await;
    let secrets: Api<Secret> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let accounts: Api<ServiceAccount> = Api::namespaced(stack.cluster.client.clone(), &ns);
    stack
        .kubectl(&["create", "serviceaccount", "app", "-n", &ns])
        .await;
    let manifests = [
        token_secret("unused", "app", json!({})),
        token_secret("invalid", "app", json!({INVALID_SINCE: "2020-01-01"})),
        token_secret("mounted", "app", json!({})),
        token_secret("used", "app", json!({})),
    ];
    for manifest in &manifests {
        stack
            .kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], manifest)
            .await;
    }
    accounts
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"secrets": [{"name": "unused"}, {"name": "invalid"},
                                             {"name": "mounted"}, {"name": "used"}]})),
        )
        .await
        .unwrap();
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mounts"},
                "spec": {"serviceAccountName": "app",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                    "volumes": [{"name": "t", "secret": {"secretName": "mounted"}}]}})
            .to_string(),
        )
        .await;
    let unused_token = data(&filled(&stack, &secrets, "unused").await, "token").unwrap();
    for name in ["invalid", "mounted", "used"] {
        filled(&stack, &secrets, name).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let used_token = data(&secrets.get("used").await.unwrap(), "token").unwrap();
    let (ok, _, err) =
        kubectl_with_token(&stack, dir.path(), &used_token, &["auth", "whoami"]).await;
    assert!(ok, "{err}");
    let (ok, _, err) =
        kubectl_with_token(&stack, dir.path(), &unused_token, &["auth", "whoami"]).await;
    assert!(ok, "valid until the cleaner's pass: {err}");
    // Unused means not since before the last used date: clear the label that use set.
    secrets
        .patch(
            "unused",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LAST_USED: null}}})),
        )
        .await
        .unwrap();
    // The Secrets must be older than the period (a second) at the pass.
    stack
        .wait("the Secrets older than the period", || {
            let secrets = secrets.clone();
            async move {
                let newest = secrets
                    .list(&Default::default())
                    .await?
                    .items
                    .iter()
                    .filter_map(|s| s.metadata.creation_timestamp.as_ref().map(|t| t.0))
                    .max();
                let old_enough = newest.is_some_and(|t| {
                    k8s_openapi::jiff::Timestamp::now().duration_since(t)
                        > k8s_openapi::jiff::SignedDuration::from_millis(1500)
                });
                Ok(old_enough.then_some(()))
            }
        })
        .await;

    // The worker restarts (as the launcher restarts a killed one); its pass runs at start.
    stack.kill_workers().await;
    gone(&stack, &secrets, "invalid").await;
    let unused = stack
        .wait("`unused` labelled invalid", || {
            let secrets = secrets.clone();
            async move {
                Ok(secrets
                    .get("unused")
                    .await
                    .ok()
                    .filter(|s| label(s, INVALID_SINCE).is_some()))
            }
        })
        .await;
    assert_eq!(label(&unused, INVALID_SINCE), Some(today()));
    let (ok, _, err) =
        kubectl_with_token(&stack, dir.path(), &unused_token, &["auth", "whoami"]).await;
    assert!(
        !ok && err.contains("Unauthorized"),
        "an invalid token is refused: {err}"
    );
    let mounted = secrets.get("mounted").await.unwrap();
    assert_eq!(
        label(&mounted, INVALID_SINCE),
        None,
        "a mounted token is left alone"
    );
    let used = secrets.get("used").await.unwrap();
    assert_eq!(
        label(&used, INVALID_SINCE),
        None,
        "a token used today is kept"
    );
    assert_eq!(label(&used, LAST_USED), Some(today()));
}
