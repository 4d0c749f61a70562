//! The token controller's decisions, without a cluster.

use super::signer::test_keys::*;
use super::*;
use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::json;

fn secret(value: serde_json::Value) -> Secret {
    serde_json::from_value(value).expect("a Secret")
}

fn account(name: &str, uid: &str) -> ServiceAccount {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "t1", "uid": uid}}))
        .expect("a ServiceAccount")
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn token_secret(annotations: serde_json::Value, data: serde_json::Value) -> Secret {
    secret(
        json!({"metadata": {"name": "tok", "namespace": "t1", "uid": "s-1",
        "resourceVersion": "7", "annotations": annotations},
        "type": SERVICE_ACCOUNT_TOKEN_TYPE, "data": data}),
    )
}

#[test]
fn keys_carry_names_and_uids_and_refuse_what_upstream_refuses() {
    let sa = account("default", "u-1");
    assert_eq!(
        parse_account_key(&account_key(&sa)),
        Some(AccountKey {
            namespace: "t1".into(),
            name: "default".into(),
            uid: "u-1".into()
        })
    );
    let s = token_secret(
        json!({SERVICE_ACCOUNT_NAME_KEY: "odd/name\"x", SERVICE_ACCOUNT_UID_KEY: "u-1"}),
        json!({}),
    );
    assert_eq!(
        parse_secret_key(&secret_key(&s)),
        Some(SecretKey {
            namespace: "t1".into(),
            name: "tok".into(),
            uid: "s-1".into(),
            account_name: "odd/name\"x".into(),
            account_uid: "u-1".into(),
        }),
        "any annotation value survives the key"
    );
    let unnamed = token_secret(json!({}), json!({}));
    assert_eq!(parse_secret_key(&secret_key(&unnamed)), None);
    assert_eq!(parse_account_key(&account_key(&account("x", ""))), None);
    assert_eq!(parse_secret_key("t1/tok"), None);
    assert_eq!(parse_account_key("[\"a\",\"b\"]"), None);
}

#[test]
fn a_token_secret_belongs_to_the_account_it_names() {
    let named = token_secret(json!({SERVICE_ACCOUNT_NAME_KEY: "default"}), json!({}));
    assert!(is_token_of(&named, "default", "u-1"), "no UID: any UID");
    assert!(!is_token_of(&named, "other", "u-1"));
    let with_uid = token_secret(
        json!({SERVICE_ACCOUNT_NAME_KEY: "default", SERVICE_ACCOUNT_UID_KEY: "u-1"}),
        json!({}),
    );
    assert!(is_token_of(&with_uid, "default", "u-1"));
    assert!(!is_token_of(&with_uid, "default", "u-2"));
    let mut opaque = with_uid.clone();
    opaque.type_ = Some("Opaque".into());
    assert!(!is_token_of(&opaque, "default", "u-1"));
}

#[test]
fn what_a_token_secret_needs() {
    let ca = b"-----BEGIN CERTIFICATE-----\n...";
    let empty = token_secret(json!({SERVICE_ACCOUNT_NAME_KEY: "default"}), json!({}));
    assert_eq!(
        needs(&empty, ca),
        Needs {
            ca: true,
            namespace: true,
            token: true
        }
    );
    assert_eq!(
        needs(&empty, b""),
        Needs {
            ca: false,
            namespace: true,
            token: true
        },
        "no root CA: ca.crt is left alone"
    );
    let full = token_secret(
        json!({SERVICE_ACCOUNT_NAME_KEY: "default"}),
        json!({"token": b64("t"), "namespace": b64("t1"), "ca.crt": b64("old CA")}),
    );
    assert_eq!(
        needs(&full, ca),
        Needs {
            ca: true,
            namespace: false,
            token: false
        },
        "a CA that differs is rewritten; the token is never regenerated"
    );
    assert!(!needs(&full, b"old CA").any());
}

#[test]
fn populating_fills_what_is_missing_and_annotates_the_uid() {
    let ca = b"CA";
    let sa = account("default", "u-1");
    let empty = token_secret(json!({SERVICE_ACCOUNT_NAME_KEY: "default"}), json!({}));
    let wanted = needs(&empty, ca);
    let filled = populated(empty, &sa, ca, wanted, |s| {
        Ok(format!("token-for-{}", s.metadata.name.as_deref().unwrap()))
    })
    .unwrap();
    let data = filled.data.as_ref().unwrap();
    assert_eq!(data["token"].0, b"token-for-tok");
    assert_eq!(data["namespace"].0, b"t1");
    assert_eq!(data["ca.crt"].0, b"CA");
    let annotations = filled.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations[SERVICE_ACCOUNT_NAME_KEY], "default");
    assert_eq!(annotations[SERVICE_ACCOUNT_UID_KEY], "u-1");

    let has_token = token_secret(
        json!({SERVICE_ACCOUNT_NAME_KEY: "default"}),
        json!({"token": b64("kept")}),
    );
    let wanted = needs(&has_token, ca);
    let filled = populated(has_token, &sa, ca, wanted, |_| {
        panic!("an existing token is never regenerated")
    })
    .unwrap();
    assert_eq!(filled.data.as_ref().unwrap()["token"].0, b"kept");
}

#[test]
fn a_deleted_secret_leaves_its_accounts_references() {
    let mut sa = account("default", "u-1");
    sa.secrets = Some(vec![
        ObjectReference {
            name: Some("a".into()),
            ..Default::default()
        },
        ObjectReference {
            name: Some("tok".into()),
            ..Default::default()
        },
    ]);
    let updated = without_reference(&sa, "tok").expect("it was referenced");
    let names: Vec<_> = updated
        .secrets
        .unwrap()
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    assert_eq!(names, ["a"]);
    assert!(without_reference(&sa, "other").is_none());
    assert!(without_reference(&account("x", "u"), "tok").is_none());
}

#[test]
fn the_filled_token_is_the_accounts_legacy_jwt() {
    let signer = Signer::from_pem(TEST_RSA_PKCS1_KEY.as_bytes()).unwrap();
    let sa = account("default", "u-1");
    let empty = token_secret(json!({SERVICE_ACCOUNT_NAME_KEY: "default"}), json!({}));
    let wanted = needs(&empty, b"");
    let filled = populated(empty, &sa, b"", wanted, |s| {
        token::legacy_token(
            &signer,
            &LegacyClaims {
                namespace: "t1",
                service_account_name: "default",
                service_account_uid: "u-1",
                secret_name: s.metadata.name.as_deref().unwrap(),
            },
        )
    })
    .unwrap();
    let jwt = String::from_utf8(filled.data.unwrap()["token"].0.clone()).unwrap();
    let payload = jwt.split('.').nth(1).unwrap();
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    let claims: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(
        claims,
        json!({"iss": "kubernetes/serviceaccount",
            "kubernetes.io/serviceaccount/namespace": "t1",
            "kubernetes.io/serviceaccount/secret.name": "tok",
            "kubernetes.io/serviceaccount/service-account.name": "default",
            "kubernetes.io/serviceaccount/service-account.uid": "u-1",
            "sub": "system:serviceaccount:t1:default"})
    );
}

fn context() -> (ControllerContext, Arc<crate::factory::Informers>) {
    let informer =
        rkcm_client::informer::connect("unix:///nonexistent/informer.sock", None).unwrap();
    let informers = Arc::new(crate::factory::Informers::new(
        informer,
        "test".into(),
        Duration::from_secs(3600),
    ));
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let context = ControllerContext {
        informers: informers.clone(),
        clients: crate::client::ClientFactory::from_config(config, 20.0, 30, None).unwrap(),
        metrics: crate::metrics::Metrics::new(),
        ready_checks: Default::default(),
    };
    (context, informers)
}

fn options(key: Option<PathBuf>) -> Options {
    Options {
        service_account_private_key_file: key,
        concurrent_serviceaccount_token_syncs: 5,
    }
}

fn no_root_ca() -> crate::controllers::rootcacertpublisher::Options {
    crate::controllers::rootcacertpublisher::Options { root_ca_file: None }
}

#[tokio::test]
async fn with_a_key_it_runs_two_queues_reading_what_it_declares() {
    let (context, informers) = context();
    let signer = Signer::from_pem(TEST_EC_P256_SEC1_KEY.as_bytes()).unwrap();
    let runnables = start(&context, signer, Vec::new(), 5).unwrap();
    let queues: Vec<&str> = runnables.iter().map(|r| r.queue.name()).collect();
    assert_eq!(
        queues,
        [
            "serviceaccount_tokens_service",
            "serviceaccount_tokens_secret"
        ]
    );
    assert!(runnables
        .iter()
        .all(|r| r.workers == 5 && r.max_retries == Some(10)));
    let mut declared: Vec<String> = RESOURCES.iter().map(|r| r.to_string()).collect();
    declared.sort();
    assert_eq!(informers.resources(), declared);
}

#[tokio::test]
async fn without_a_usable_key_or_root_ca_it_does_not_run() {
    let (context, informers) = context();
    assert!(build(&context, &options(None), &no_root_ca())
        .unwrap()
        .is_empty());
    assert!(
        build(&context, &options(Some(PathBuf::new())), &no_root_ca())
            .unwrap()
            .is_empty()
    );
    let missing = PathBuf::from("/nonexistent/sa.key");
    assert!(
        build(&context, &options(Some(missing.clone())), &no_root_ca())
            .unwrap()
            .is_empty()
    );
    let error = read_signer(&missing).unwrap_err();
    assert!(crate::controller::describe(&error)
        .starts_with("error reading key for service account token controller"));
    let bad_ca = crate::controllers::rootcacertpublisher::Options {
        root_ca_file: Some(missing),
    };
    let key = std::env::temp_dir().join(format!("rkcm-test-sa-{}.key", std::process::id()));
    std::fs::write(&key, TEST_EC_P256_SEC1_KEY).unwrap();
    let built = build(&context, &options(Some(key.clone())), &bad_ca).unwrap();
    assert!(built.is_empty(), "an unreadable --root-ca-file stops it");
    assert!(
        informers.resources().is_empty(),
        "nothing is read when it does not run"
    );
    let built = build(&context, &options(Some(key.clone())), &no_root_ca()).unwrap();
    let _ = std::fs::remove_file(&key);
    assert_eq!(built.len(), 2);
}
