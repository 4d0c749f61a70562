//! End-to-end tests of the bootstrap-signer and token-cleaner controllers (WO-3 checks 7,
//! 8 and 9): kube-sim (or the cluster `RKCM_TEST_KUBECONFIG` names) and `rkcm launcher`
//! with kubeadm's `--controllers=*,bootstrapsigner,tokencleaner` and
//! `--use-service-account-credentials=true`, then with plain `*`, which runs neither.
//! Objects are made and read with kubectl and kube-rs.
//!
//! The signature the controller writes into `kube-public/cluster-info` is checked against
//! one the test computes with the openssl command line alone (HMAC-SHA256 and base64), as
//! `kubeadm join` would verify it. On a real cluster the test uses token ids of its own,
//! and puts back the `cluster-info` it found.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{metric_sum, ControllerStack, LauncherStack, STACK_WAIT};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, PostParams};
use rkcm_conformance::wait_for;

const CLUSTER_INFO: &str = "cluster-info";
const KUBE_PUBLIC: &str = "kube-public";
const KUBE_SYSTEM: &str = "kube-system";
const TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";
const SIGNATURE_PREFIX: &str = "jws-kubeconfig-";

/// A kubeconfig as kubeadm publishes it (the server and CA are placeholders: nothing
/// connects with it).
fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
    )
}

/// The detached JWS of `content` for token `id`/`secret`, made by openssl alone:
/// `B64U(header) ".." B64U(HMAC-SHA256(secret, B64U(header) "." B64U(content)))`.
async fn openssl_detached_jws(content: &str, id: &str, secret: &str) -> String {
    const SCRIPT: &str = r#"set -e
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
header=$(printf '{"alg":"HS256","kid":"%s"}' "$ID" | b64url)
payload=$(printf '%s' "$CONTENT" | b64url)
signature=$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -hmac "$SECRET" -binary | b64url)
printf '%s..%s' "$header" "$signature"
"#;
    let out = tokio::process::Command::new("sh")
        .args(["-c", SCRIPT])
        .env("ID", id)
        .env("CONTENT", content)
        .env("SECRET", secret)
        .output()
        .await
        .expect("running sh and openssl");
    assert!(
        out.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("base64url is ASCII")
}

/// A token id of `[a-z0-9]{6}`: kubeadm's example on kube-sim, a fresh one on a real
/// cluster (whose own tokens it must not touch).
fn token_id(stack: &LauncherStack, fixed: &str) -> String {
    if stack.cluster.sim.is_some() {
        fixed.to_string()
    } else {
        kube_sim::api::random_suffix(6)
    }
}

/// A bootstrap token Secret as kubeadm writes one, with `extra` string data.
fn token_manifest(namespace: &str, id: &str, secret: &str, extra: &[(&str, &str)]) -> String {
    let mut data = format!("  token-id: {id}\n  token-secret: \"{secret}\"\n");
    for (key, value) in extra {
        data.push_str(&format!("  {key}: \"{value}\"\n"));
    }
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-{id}\n  namespace: {namespace}\ntype: {TOKEN_TYPE}\nstringData:\n{data}"
    )
}

/// An RFC 3339 time `offset` from now, to the second, and the instant it names.
fn rfc3339_from_now(offset: SignedDuration) -> (String, Timestamp) {
    let at = Timestamp::from_second((Timestamp::now() + offset).as_second()).unwrap();
    (at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(), at)
}

/// The `cluster-info` the cluster had before the test (a real kubeadm cluster has one),
/// put back by [`ClusterInfo::restore`].
struct ClusterInfo {
    api: Api<ConfigMap>,
    original: Option<BTreeMap<String, String>>,
}

impl ClusterInfo {
    async fn save(stack: &LauncherStack) -> ClusterInfo {
        let api: Api<ConfigMap> = Api::namespaced(stack.cluster.client.clone(), KUBE_PUBLIC);
        let original = api
            .get_opt(CLUSTER_INFO)
            .await
            .expect("reading kube-public/cluster-info")
            .map(|cm| cm.data.unwrap_or_default());
        ClusterInfo { api, original }
    }

    async fn data(&self) -> BTreeMap<String, String> {
        self.api
            .get_opt(CLUSTER_INFO)
            .await
            .expect("reading kube-public/cluster-info")
            .and_then(|cm| cm.data)
            .unwrap_or_default()
    }

    async fn restore(self) {
        match self.original {
            None => {
                let _ = self
                    .api
                    .delete(CLUSTER_INFO, &DeleteParams::default())
                    .await;
            }
            Some(data) => {
                for _ in 0..5 {
                    let Ok(mut current) = self.api.get(CLUSTER_INFO).await else {
                        return;
                    };
                    current.data = Some(data.clone());
                    if self
                        .api
                        .replace(CLUSTER_INFO, &PostParams::default(), &current)
                        .await
                        .is_ok()
                    {
                        return;
                    }
                }
            }
        }
    }
}

async fn apply_cluster_info(stack: &LauncherStack, kubeconfig: &str) {
    let manifest = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CLUSTER_INFO, "namespace": KUBE_PUBLIC},
        "data": {"kubeconfig": kubeconfig},
    });
    stack.apply(&manifest).await;
}

/// Waits until `cluster-info` carries `value` (or, with `None`, no value) for token `id`.
async fn wait_signature(stack: &LauncherStack, info: &ClusterInfo, id: &str, value: Option<&str>) {
    let key = format!("{SIGNATURE_PREFIX}{id}");
    let what = match value {
        Some(value) => format!("cluster-info's {key} to be {value}"),
        None => format!("cluster-info to lose {key}"),
    };
    let last = Arc::new(Mutex::new(None::<String>));
    let waited = wait_for(&what, STACK_WAIT, || {
        let (key, last) = (key.clone(), last.clone());
        async move {
            let seen = info.data().await.get(&key).cloned();
            let done = seen.as_deref() == value;
            *last.lock().unwrap() = seen;
            Ok(done.then_some(()))
        }
    })
    .await;
    if let Err(error) = waited {
        stack.fail(format!(
            "{error:#}; last seen: {:?}",
            last.lock().unwrap().clone()
        ));
    }
}

/// Polls a Secret until it is gone: (when it was last seen, when it was first seen gone),
/// or `None` if it is still there after three times [`STACK_WAIT`].
async fn watch_until_gone(api: Api<Secret>, name: String) -> Option<(Timestamp, Timestamp)> {
    let deadline = Instant::now() + 3 * STACK_WAIT;
    let mut last_seen = Timestamp::now();
    while Instant::now() < deadline {
        let now = Timestamp::now();
        match api.get_opt(&name).await {
            Ok(Some(_)) => last_seen = now,
            Ok(None) => return Some((last_seen, now)),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

async fn exists(api: &Api<Secret>, name: &str) -> bool {
    api.get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading Secret {name}: {e}"))
        .is_some()
}

/// WO-3 checks 7, 8 and the metrics of 9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeadms_controllers_sign_cluster_info_and_delete_expired_tokens() {
    // As kubeadm runs them: each controller as its own ServiceAccount, so every write is
    // one its bootstrap role allows (the signer may update cluster-info, not patch it).
    let stack = LauncherStack::start(&[
        "--controllers=*,bootstrapsigner,tokencleaner",
        "--use-service-account-credentials=true",
    ])
    .await;
    let secrets: Api<Secret> = Api::namespaced(stack.cluster.client.clone(), KUBE_SYSTEM);
    let in_default: Api<Secret> = Api::namespaced(stack.cluster.client.clone(), "default");

    // Check 8 first, as its token with 20 s to live runs while the rest is checked.
    let soon_id = token_id(&stack, "soon20");
    let (soon_text, soon_at) = rfc3339_from_now(SignedDuration::from_secs(20));
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &token_manifest(
                KUBE_SYSTEM,
                &soon_id,
                "0123456789abcdef",
                &[("expiration", &soon_text)],
            ),
        )
        .await;
    let soon_name = format!("bootstrap-token-{soon_id}");
    let soon_watch = tokio::spawn(watch_until_gone(secrets.clone(), soon_name.clone()));

    // Check 7: cluster-info signed with the token, re-signed when its kubeconfig changes,
    // its signature removed when the token stops being a signing token.
    let info = ClusterInfo::save(&stack).await;
    let id = token_id(&stack, "abcdef");
    let token_secret = "0123456789abcdef";
    let first = kubeconfig("https://10.0.0.1:6443");
    apply_cluster_info(&stack, &first).await;
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &token_manifest(
                KUBE_SYSTEM,
                &id,
                token_secret,
                &[("usage-bootstrap-signing", "true")],
            ),
        )
        .await;
    let expected = openssl_detached_jws(&first, &id, token_secret).await;
    wait_signature(&stack, &info, &id, Some(&expected)).await;
    let shown = stack
        .kubectl(&[
            "get",
            "configmap",
            CLUSTER_INFO,
            "-n",
            KUBE_PUBLIC,
            "-o",
            &format!("jsonpath={{.data.{SIGNATURE_PREFIX}{id}}}"),
        ])
        .await;
    assert_eq!(
        shown, expected,
        "kubectl shows the signature openssl computes"
    );

    let second = kubeconfig("https://10.0.0.2:6443");
    let patch = serde_json::json!({"data": {"kubeconfig": second}}).to_string();
    stack
        .kubectl(&[
            "patch",
            "configmap",
            CLUSTER_INFO,
            "-n",
            KUBE_PUBLIC,
            "--type",
            "merge",
            "-p",
            &patch,
        ])
        .await;
    let resigned = openssl_detached_jws(&second, &id, token_secret).await;
    assert_ne!(resigned, expected);
    wait_signature(&stack, &info, &id, Some(&resigned)).await;

    stack
        .kubectl(&[
            "patch",
            "secret",
            &format!("bootstrap-token-{id}"),
            "-n",
            KUBE_SYSTEM,
            "--type",
            "merge",
            "-p",
            r#"{"data":{"usage-bootstrap-signing":"ZmFsc2U="}}"#,
        ])
        .await;
    wait_signature(&stack, &info, &id, None).await;
    assert!(
        info.data().await.get("kubeconfig") == Some(&second),
        "the kubeconfig itself is left as it is"
    );

    // Check 8: a token in another namespace is never the cleaner's, however expired.
    let (hour_ago, _) = rfc3339_from_now(SignedDuration::from_hours(-1));
    let other_id = token_id(&stack, "dflt01");
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &token_manifest(
                "default",
                &other_id,
                "0123456789abcdef",
                &[("expiration", &hour_ago)],
            ),
        )
        .await;

    // Expired an hour ago: deleted within 2 s.
    let expired_id = token_id(&stack, "exp001");
    let expired_name = format!("bootstrap-token-{expired_id}");
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &token_manifest(
                KUBE_SYSTEM,
                &expired_id,
                "0123456789abcdef",
                &[("expiration", &hour_ago)],
            ),
        )
        .await;
    let created = Instant::now();
    stack
        .wait("the token that expired an hour ago to be deleted", || {
            let (secrets, name) = (secrets.clone(), expired_name.clone());
            async move { Ok((!exists(&secrets, &name).await).then_some(())) }
        })
        .await;
    let took = created.elapsed();
    assert!(
        took <= Duration::from_secs(2),
        "the expired token was deleted {took:?} after its creation, not within 2 s"
    );

    // An expiration that is no time: deleted as expired.
    let garbage_id = token_id(&stack, "garb01");
    let garbage_name = format!("bootstrap-token-{garbage_id}");
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &token_manifest(
                KUBE_SYSTEM,
                &garbage_id,
                "0123456789abcdef",
                &[("expiration", "garbage")],
            ),
        )
        .await;
    stack
        .wait(
            "the token with expiration \"garbage\" to be deleted",
            || {
                let (secrets, name) = (secrets.clone(), garbage_name.clone());
                async move { Ok((!exists(&secrets, &name).await).then_some(())) }
            },
        )
        .await;

    // Expiring 20 s after its creation: there until then, gone soon after.
    let Ok(Some((last_seen, gone_by))) = soon_watch.await else {
        stack.fail(format!("the token expiring at {soon_at} was not deleted"));
    };
    assert!(
        last_seen >= soon_at - SignedDuration::from_millis(500),
        "the token expiring at {soon_at} was already gone after {last_seen}"
    );
    assert!(
        gone_by <= soon_at + SignedDuration::from_secs(5),
        "the token expiring at {soon_at} was still there at {last_seen} (seen gone at {gone_by})"
    );

    // What the cleaner keeps: a token without expiration, and the one in `default`.
    assert!(
        exists(&secrets, &format!("bootstrap-token-{id}")).await,
        "a token without expiration is kept"
    );
    let other_name = format!("bootstrap-token-{other_id}");
    assert!(
        exists(&in_default, &other_name).await,
        "an expired token outside kube-system is kept"
    );

    // Check 9's metrics: both queues report under upstream's names.
    let metrics = stack.metrics().await;
    for queue in ["bootstrap_signer_queue", "token_cleaner"] {
        let adds = metric_sum(&metrics, "workqueue_adds_total", &[("name", queue)]);
        assert!(
            adds.is_some_and(|n| n >= 1.0),
            "workqueue_adds_total{{name=\"{queue}\"}} is {adds:?}"
        );
    }

    // Who wrote (kube-sim's record): each controller as its own ServiceAccount, and the
    // signer by update, the one write its role allows on cluster-info; none refused.
    if let Some(sim) = stack.cluster.sim.as_ref() {
        let record = sim.metrics_text();
        for (account, verb, resource) in [
            ("bootstrap-signer", "update", "configmaps"),
            ("token-cleaner", "delete", "secrets"),
        ] {
            let user = format!("system:serviceaccount:kube-system:{account}");
            let done = metric_sum(
                &record,
                "kube_sim_requests_by_user_total",
                &[
                    ("user", &user),
                    ("verb", verb),
                    ("resource", resource),
                    ("code", "200"),
                ],
            );
            assert!(
                done.is_some_and(|n| n >= 1.0),
                "no successful {verb} of {resource} by {user}"
            );
            for (_, labels, _) in record.lines().filter_map(common::parse_sample) {
                let by_account = labels.iter().any(|(k, v)| k == "user" && *v == user);
                let refused = labels
                    .iter()
                    .any(|(k, v)| k == "code" && (v == "401" || v == "403"));
                assert!(!(by_account && refused), "{user} was refused: {labels:?}");
            }
        }
    }

    let _ = secrets
        .delete(&format!("bootstrap-token-{id}"), &DeleteParams::default())
        .await;
    let _ = in_default
        .delete(&other_name, &DeleteParams::default())
        .await;
    info.restore().await;
    stack.cluster.cleanup().await;
}

/// WO-3 check 9: with plain `*` (KCM's default set) neither controller runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_controllers_leave_bootstrap_tokens_alone() {
    let stack = LauncherStack::start(&["--controllers=*"]).await;
    let secrets: Api<Secret> = Api::namespaced(stack.cluster.client.clone(), KUBE_SYSTEM);
    let info = ClusterInfo::save(&stack).await;
    let id = token_id(&stack, "abcdef");
    let expired_id = token_id(&stack, "exp001");
    let (hour_ago, _) = rfc3339_from_now(SignedDuration::from_hours(-1));
    for manifest in [
        token_manifest(
            KUBE_SYSTEM,
            &id,
            "0123456789abcdef",
            &[("usage-bootstrap-signing", "true")],
        ),
        token_manifest(
            KUBE_SYSTEM,
            &expired_id,
            "0123456789abcdef",
            &[
                ("usage-bootstrap-signing", "true"),
                ("expiration", &hour_ago),
            ],
        ),
    ] {
        stack.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    }
    apply_cluster_info(&stack, &kubeconfig("https://10.0.0.1:6443")).await;

    // A barrier through the same worker: the root-CA publisher puts back an edited
    // kube-root-ca.crt on the ConfigMap stream that brought cluster-info before it.
    let namespace = stack.namespace("bootstrap").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.cluster.client.clone(), &namespace);
    stack
        .wait("kube-root-ca.crt in a new namespace", || {
            let config_maps = config_maps.clone();
            async move { Ok(config_maps.get_opt("kube-root-ca.crt").await?.map(|_| ())) }
        })
        .await;
    stack
        .kubectl(&[
            "patch",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            &namespace,
            "--type",
            "merge",
            "-p",
            r#"{"data":{"ca.crt":"edited"}}"#,
        ])
        .await;
    stack
        .wait("the root-CA publisher to undo the edit", || {
            let config_maps = config_maps.clone();
            async move {
                let cm = config_maps.get("kube-root-ca.crt").await?;
                let data = cm.data.unwrap_or_default();
                Ok((data.get("ca.crt").map(String::as_str) != Some("edited")).then_some(()))
            }
        })
        .await;

    let key = format!("{SIGNATURE_PREFIX}{id}");
    assert!(
        !info.data().await.contains_key(&key),
        "cluster-info got {key} without the bootstrap signer"
    );
    assert!(
        exists(&secrets, &format!("bootstrap-token-{expired_id}")).await,
        "an expired token was deleted without the token cleaner"
    );
    let metrics = stack.metrics().await;
    for queue in ["bootstrap_signer_queue", "token_cleaner"] {
        assert_eq!(
            metric_sum(&metrics, "workqueue_adds_total", &[("name", queue)]),
            None,
            "no {queue} queue without its controller"
        );
    }

    for name in [
        format!("bootstrap-token-{id}"),
        format!("bootstrap-token-{expired_id}"),
    ] {
        let _ = secrets.delete(&name, &DeleteParams::default()).await;
    }
    info.restore().await;
    stack.cluster.cleanup().await;
}
