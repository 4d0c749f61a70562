//! What the serviceaccount-token and legacy token cleaner controllers need from the
//! development cluster, checked through the API as a client sees it: the PKI files of
//! `--pki-dir` (kubeadm's /etc/kubernetes/pki), legacy ServiceAccount token authentication
//! with lookup (bearer tokens and TokenReview), the last-used label, the invalid-since
//! refusal, and the legacy-token-tracking ConfigMap.

mod common;

use base64::Engine;
use common::call;
use kube_sim::legacy_tokens::{
    INVALID_SINCE_LABEL, LAST_USED_LABEL, LEGACY_ISSUER, TRACKING_CONFIG_MAP,
};
use kube_sim::{Config, KubeSim};
use serde_json::{json, Value};

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A legacy token as KCM's token controller makes one, signed with `sa.key` (PKCS#8 P-256).
fn mint(key_pem: &str, namespace: &str, secret: &str, account: &str, uid: &str) -> String {
    let der = match rustls_pemfile::read_one_from_slice(key_pem.as_bytes()) {
        Ok(Some((rustls_pemfile::Item::Pkcs8Key(key), _))) => key.secret_pkcs8_der().to_vec(),
        _ => panic!("sa.key is a PKCS#8 key"),
    };
    let rng = ring::rand::SystemRandom::new();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &der,
        &rng,
    )
    .expect("a P-256 key");
    let header = json!({"alg": "ES256", "kid": "test"});
    let claims = json!({"iss": LEGACY_ISSUER,
        "kubernetes.io/serviceaccount/namespace": namespace,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": account,
        "kubernetes.io/serviceaccount/service-account.uid": uid,
        "sub": format!("system:serviceaccount:{namespace}:{account}")});
    let signed = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let signature = pair.sign(&rng, signed.as_bytes()).expect("signs");
    format!("{signed}.{}", b64url(signature.as_ref()))
}

async fn client_with_token(sim: &KubeSim, token: &str) -> kube::Client {
    let (ca, _) = sim.ca().expect("HTTPS");
    let yaml = kube_sim::certs::kubeconfig(&sim.url(), Some(ca), None, Some(token));
    kube_sim::client_from_kubeconfig(&yaml)
        .await
        .expect("a client")
}

/// Who the API server takes the token's bearer for, or the HTTP code it answers.
async fn whoami(sim: &KubeSim, token: &str) -> Result<Value, u16> {
    let client = client_with_token(sim, token).await;
    call(
        &client,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
    )
    .await
    .map(|review| review["status"]["userInfo"].clone())
    .map_err(|(code, _)| code)
}

async fn token_review(admin: &kube::Client, token: &str) -> Value {
    call(
        admin,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}),
        ),
    )
    .await
    .expect("a TokenReview")["status"]
        .clone()
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// A ServiceAccount `sa` and its token Secret `tok` holding a minted token; (token, uid).
async fn account_with_token(sim: &KubeSim, admin: &kube::Client, ns: &str) -> (String, String) {
    let sa = call(
        admin,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}})),
    )
    .await
    .expect("a ServiceAccount");
    let uid = sa["metadata"]["uid"].as_str().unwrap().to_string();
    let token = mint(
        sim.service_account_key().private_key_pem(),
        ns,
        "tok",
        "sa",
        &uid,
    );
    call(
        admin,
        "POST",
        &format!("/api/v1/namespaces/{ns}/secrets"),
        Some(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tok",
                "annotations": {"kubernetes.io/service-account.name": "sa",
                                "kubernetes.io/service-account.uid": uid}},
            "type": "kubernetes.io/service-account-token",
            "data": {"token": base64::engine::general_purpose::STANDARD.encode(&token)}}),
        ),
    )
    .await
    .expect("a token Secret");
    (token, uid)
}

#[tokio::test]
async fn pki_dir_holds_the_ca_and_the_service_account_key_pair() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let sim = KubeSim::start(Config {
        pki_dir: Some(pki.clone()),
        ..Config::default()
    })
    .await
    .unwrap();
    let read = |file: &str| std::fs::read_to_string(pki.join(file)).expect(file);
    let (ca, ca_key) = sim.ca().unwrap();
    assert_eq!(read("ca.crt"), ca);
    assert_eq!(read("ca.key"), ca_key);
    assert!(read("sa.key").starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(read("sa.pub").starts_with("-----BEGIN PUBLIC KEY-----"));
    assert_eq!(sim.pki_dir(), Some(pki.as_path()));
    use std::os::unix::fs::PermissionsExt;
    for private in ["ca.key", "sa.key"] {
        let mode = std::fs::metadata(pki.join(private))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{private} is readable by its owner only");
    }

    // A token signed with sa.key authenticates: the files are the cluster's keys.
    let admin = sim.client().await.unwrap();
    let sa = call(
        &admin,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}})),
    )
    .await
    .unwrap();
    let uid = sa["metadata"]["uid"].as_str().unwrap();
    let token = mint(&read("sa.key"), "default", "tok", "sa", uid);
    call(
        &admin,
        "POST",
        "/api/v1/namespaces/default/secrets",
        Some(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tok",
                "annotations": {"kubernetes.io/service-account.name": "sa"}},
            "type": "kubernetes.io/service-account-token",
            "stringData": {"token": token}}),
        ),
    )
    .await
    .unwrap();
    let user = whoami(&sim, &token).await.expect("authenticated");
    assert_eq!(user["username"], "system:serviceaccount:default:sa");
}

#[tokio::test]
async fn a_legacy_token_authenticates_as_its_service_account_and_is_tracked() {
    let sim = KubeSim::start(Config::default()).await.unwrap();
    let admin = sim.client().await.unwrap();
    let (token, uid) = account_with_token(&sim, &admin, "default").await;

    let user = whoami(&sim, &token).await.expect("authenticated");
    assert_eq!(
        user,
        json!({"username": "system:serviceaccount:default:sa", "uid": uid,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default",
                       "system:authenticated"]})
    );
    // RBAC applies to it: it may not list pods until a role allows it.
    let as_sa = client_with_token(&sim, &token).await;
    let pods = "/api/v1/namespaces/default/pods";
    let (code, message) = call(&as_sa, "GET", pods, None).await.unwrap_err();
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("\"system:serviceaccount:default:sa\""),
        "{message}"
    );
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pods"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})))
        .await
        .unwrap();
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]})))
        .await
        .unwrap();
    call(&as_sa, "GET", pods, None).await.expect("allowed now");

    // The use is recorded once a day, by kube-apiserver.
    let secret_path = "/api/v1/namespaces/default/secrets/tok";
    let secret = call(&admin, "GET", secret_path, None).await.unwrap();
    assert_eq!(secret["metadata"]["labels"][LAST_USED_LABEL], today());
    let managers: Vec<&str> = secret["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kube-apiserver"), "{managers:?}");
    let version = secret["metadata"]["resourceVersion"].clone();
    whoami(&sim, &token).await.expect("authenticated again");
    let secret = call(&admin, "GET", secret_path, None).await.unwrap();
    assert_eq!(
        secret["metadata"]["resourceVersion"], version,
        "no second write the same day"
    );

    let review = token_review(&admin, &token).await;
    assert_eq!(review["authenticated"], true, "{review}");
    assert_eq!(
        review["user"]["username"],
        "system:serviceaccount:default:sa"
    );
}

#[tokio::test]
async fn invalidated_mismatched_and_orphaned_tokens_get_401() {
    let sim = KubeSim::start(Config::default()).await.unwrap();
    let admin = sim.client().await.unwrap();
    let (token, _) = account_with_token(&sim, &admin, "default").await;
    let secret_path = "/api/v1/namespaces/default/secrets/tok";

    // Labelled invalid: refused, and the use is still recorded.
    call(
        &admin,
        "PATCH",
        secret_path,
        Some(
            json!({"metadata": {"labels": {INVALID_SINCE_LABEL: "2020-01-01",
                                             LAST_USED_LABEL: "2020-01-01"}}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(whoami(&sim, &token).await, Err(401));
    let review = token_review(&admin, &token).await;
    assert_eq!(review["authenticated"], Value::Null);
    assert_eq!(
        review["error"],
        "the token in secret default/tok for service account default/sa has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the 'kubernetes.io/legacy-token-invalid-since' label from the secret to temporarily allow use of this token"
    );
    let secret = call(&admin, "GET", secret_path, None).await.unwrap();
    assert_eq!(secret["metadata"]["labels"][LAST_USED_LABEL], today());
    call(
        &admin,
        "PATCH",
        secret_path,
        Some(json!({"metadata": {"labels": {INVALID_SINCE_LABEL: null}}})),
    )
    .await
    .unwrap();
    whoami(&sim, &token)
        .await
        .expect("valid again without the label");

    // A ServiceAccount of the same name but another UID: refused.
    call(
        &admin,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/sa",
        None,
    )
    .await
    .unwrap();
    let review = token_review(&admin, &token).await;
    assert_eq!(review["error"], "serviceaccounts \"sa\" not found");
    let sa = call(
        &admin,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}})),
    )
    .await
    .unwrap();
    assert_eq!(whoami(&sim, &token).await, Err(401));
    let review = token_review(&admin, &token).await;
    assert!(
        review["error"].as_str().unwrap().starts_with(&format!(
            "ServiceAccount UID ({})",
            sa["metadata"]["uid"].as_str().unwrap()
        )),
        "{review}"
    );

    // A token that is not the Secret's copy, or whose Secret is gone: refused.
    let (other_token, _) = account_with_token(&sim, &admin, "kube-public").await;
    call(
        &admin,
        "PATCH",
        "/api/v1/namespaces/kube-public/secrets/tok",
        Some(json!({"data": {"token": base64::engine::general_purpose::STANDARD.encode("x")}})),
    )
    .await
    .unwrap();
    assert_eq!(whoami(&sim, &other_token).await, Err(401));
    assert_eq!(
        token_review(&admin, &other_token).await["error"],
        "Token does not match server's copy"
    );
    call(
        &admin,
        "DELETE",
        "/api/v1/namespaces/kube-public/secrets/tok",
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        token_review(&admin, &other_token).await["error"],
        "Token has been invalidated"
    );

    // A token signed with another key is refused; one with another issuer is not ours.
    let stranger = kube_sim::legacy_tokens::ServiceAccountKey::generate().unwrap();
    let forged = mint(stranger.private_key_pem(), "default", "tok", "sa", "u");
    assert_eq!(whoami(&sim, &forged).await, Err(401));
    assert_eq!(
        token_review(&admin, &forged).await["error"],
        "square/go-jose: error in cryptographic primitive"
    );
}

#[tokio::test]
async fn the_tracking_config_map_records_the_first_start() {
    let sim = KubeSim::start(Config::default()).await.unwrap();
    let admin = sim.client().await.unwrap();
    let path = format!("/api/v1/namespaces/kube-system/configmaps/{TRACKING_CONFIG_MAP}");
    let map = call(&admin, "GET", &path, None)
        .await
        .expect("created at start");
    assert_eq!(map["data"], json!({"since": today()}));
    // An unparsable date is replaced by today's; a valid one is left alone.
    call(
        &admin,
        "PATCH",
        &path,
        Some(json!({"data": {"since": "garbage"}})),
    )
    .await
    .unwrap();
    sim.sim.reconcile_token_tracking();
    let map = call(&admin, "GET", &path, None).await.unwrap();
    assert_eq!(map["data"]["since"], today());
    call(
        &admin,
        "PATCH",
        &path,
        Some(json!({"data": {"since": "2020-01-01"}})),
    )
    .await
    .unwrap();
    sim.sim.reconcile_token_tracking();
    let map = call(&admin, "GET", &path, None).await.unwrap();
    assert_eq!(map["data"]["since"], "2020-01-01");
    // Re-created when deleted, at most once per 30 minutes (upstream's rate limit): the
    // creation at start counts.
    call(&admin, "DELETE", &path, None).await.unwrap();
    sim.sim.reconcile_token_tracking();
    assert_eq!(call(&admin, "GET", &path, None).await.unwrap_err().0, 404);
}
