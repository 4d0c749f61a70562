//! Authorization as a kube-apiserver with `--authorization-mode=RBAC` does it: the exact 403
//! for a user no binding covers, Roles and bindings taking effect as they are created and
//! deleted, SubjectAccessReviews and the self reviews with the real server's reasons,
//! `kubectl auth can-i` as a controller's ServiceAccount, and impersonation allowed only to
//! those granted the `impersonate` verb. Identities come from impersonation by the admin and
//! from TokenRequest tokens, so every test but the last runs on a real cluster too
//! (`RKCM_TEST_KUBECONFIG`); the last checks what only kube-sim has (client certificates for
//! any identity, its bootstrap objects, per-user request metrics).

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::{json, Value};

/// A client of the cluster acting as `user` (and `groups`), through the admin's impersonation.
async fn acting_as(c: &TestCluster, user: &str, groups: &[&str]) -> kube::Client {
    let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.auth_info.impersonate = Some(user.to_string());
    if !groups.is_empty() {
        cfg.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
    }
    kube::Client::try_from(cfg).unwrap()
}

/// A client of the cluster authenticating with a bearer token (and nothing else).
async fn with_token(c: &TestCluster, token: &str) -> kube::Client {
    let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    kube::Client::try_from(cfg).unwrap()
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 => s,
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", kube_sim::api::random_suffix(6))
}

fn role(name: &str, rules: Value) -> Role {
    serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap()
}

fn binding(name: &str, role_kind: &str, role: &str, subjects: Value) -> RoleBinding {
    serde_json::from_value(json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects}))
    .unwrap()
}

/// On kube-sim a policy change counts from the next request; a real apiserver's authorizer
/// reads its informers' caches, which follow within moments.
async fn eventually<F, Fut>(c: &TestCluster, what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if c.sim.is_some() {
        assert!(check().await, "{what}: not at once");
        return;
    }
    wait_for(what, Duration::from_secs(20), || {
        let f = check();
        async move { Ok(f.await.then_some(())) }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_binding_is_refused_until_a_role_binding_allows_it() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("rbac").await.unwrap();
    let user = unique("rkcm-test-user");
    let client = acting_as(&c, &user, &[]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    let s = forbidden(cms.list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!("configmaps is forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"")
    );
    assert_eq!(s.reason, "Forbidden");
    let details = s.details.clone().unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("", "", "configmaps")
    );
    let s = forbidden(cms.get("settings").await);
    assert_eq!(
        s.message,
        format!("configmaps \"settings\" is forbidden: User \"{user}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"{ns}\"")
    );
    assert_eq!(s.details.unwrap().name, "settings");
    let rs: Api<ReplicaSet> = Api::all(client.clone());
    let s = forbidden(rs.list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!("replicasets.apps is forbidden: User \"{user}\" cannot list resource \"replicasets\" in API group \"apps\" at the cluster scope")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let s = forbidden(
        pods.create_subresource::<Value, Value>(
            "eviction",
            "p",
            &PostParams::default(),
            &json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": ns}}),
        )
        .await,
    );
    assert_eq!(
        s.message,
        format!("pods \"p\" is forbidden: User \"{user}\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"{ns}\"")
    );
    // A non-resource path outside discovery.
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let s = forbidden(client.request_text(req).await);
    assert_eq!(
        s.message,
        format!("forbidden: User \"{user}\" cannot get path \"/metrics\"")
    );

    // A Role and a RoleBinding allow it from then on...
    let admin_roles: Api<Role> = Api::namespaced(c.client.clone(), &ns);
    let admin_bindings: Api<RoleBinding> = Api::namespaced(c.client.clone(), &ns);
    admin_roles
        .create(
            &PostParams::default(),
            &role(
                "cm-reader",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
            ),
        )
        .await
        .unwrap();
    admin_bindings
        .create(
            &PostParams::default(),
            &binding(
                "cm-reader",
                "Role",
                "cm-reader",
                json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]),
            ),
        )
        .await
        .unwrap();
    eventually(&c, "the binding allows the list", || async {
        cms.list(&ListParams::default()).await.is_ok()
    })
    .await;
    // ... only what the Role grants ...
    let s = forbidden(
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await,
    );
    assert!(s.message.starts_with("configmaps is forbidden"), "{s:?}");
    // ... and only in its namespace.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    forbidden(elsewhere.list(&ListParams::default()).await);

    // Deleting the binding forbids it again.
    admin_bindings
        .delete("cm-reader", &DeleteParams::default())
        .await
        .unwrap();
    eventually(&c, "the list is refused again", || async {
        matches!(cms.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 403)
    })
    .await;
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_as_a_controller_service_account() {
    let c = TestCluster::start().await.unwrap();
    let as_sa = "--as=system:serviceaccount:kube-system:deployment-controller";
    let yes = c
        .kubectl(&["auth", "can-i", "create", "replicasets", "-n", "x", as_sa])
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&yes.stdout).trim(),
        "yes",
        "{yes:?}"
    );
    assert!(yes.status.success());
    let no = c
        .kubectl(&["auth", "can-i", "create", "pods", "-n", "x", as_sa])
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no", "{no:?}");
    assert_eq!(no.status.code(), Some(1));
    // The controller manager's own user lists everything and creates no ReplicaSet.
    let kcm = "--as=system:kube-controller-manager";
    let out = c
        .kubectl_ok(&["auth", "can-i", "list", "pods", "--all-namespaces", kcm])
        .await
        .unwrap();
    assert_eq!(out.trim(), "yes");
    let out = c
        .kubectl(&["auth", "can-i", "create", "replicasets", "-n", "x", kcm])
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_reviews_answer_with_the_real_servers_reasons() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("sar").await.unwrap();
    let sars: Api<SubjectAccessReview> = Api::all(c.client.clone());
    let review = |verb: &str, resource: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {
            "user": "system:serviceaccount:kube-system:replicaset-controller",
            "groups": ["system:serviceaccounts"],
            "resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}}))
        .unwrap()
    };
    let allowed = sars
        .create(&PostParams::default(), &review("create", "pods"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(allowed.allowed);
    assert_eq!(
        allowed.reason.as_deref(),
        Some("RBAC: allowed by ClusterRoleBinding \"system:controller:replicaset-controller\" of ClusterRole \"system:controller:replicaset-controller\" to ServiceAccount \"replicaset-controller/kube-system\"")
    );
    let denied = sars
        .create(&PostParams::default(), &review("delete", "secrets"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.reason, None);
    // Non-resource: anyone authenticated reads discovery.
    let discovery: SubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": "someone", "groups": ["system:authenticated"],
        "nonResourceAttributes": {"verb": "get", "path": "/apis/apps/v1"}}}))
    .unwrap();
    let status = sars
        .create(&PostParams::default(), &discovery)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (status.allowed, status.reason.as_deref()),
        (true, Some("RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""))
    );
    // A review with neither attributes is invalid.
    let empty: SubjectAccessReview =
        serde_json::from_value(json!({"spec": {"user": "someone"}})).unwrap();
    match sars.create(&PostParams::default(), &empty).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422);
            assert_eq!(s.message, "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified");
        }
        other => panic!("accepted: {other:?}"),
    }

    // A LocalSubjectAccessReview asks within its namespace.
    let local: Api<LocalSubjectAccessReview> = Api::namespaced(c.client.clone(), &ns);
    let lsar: LocalSubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": "system:kube-controller-manager",
        "resourceAttributes": {"verb": "list", "group": "apps", "resource": "deployments", "namespace": ns}}}))
    .unwrap();
    let status = local
        .create(&PostParams::default(), &lsar)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (status.allowed, status.reason.as_deref()),
        (true, Some("RBAC: allowed by ClusterRoleBinding \"system:kube-controller-manager\" of ClusterRole \"system:kube-controller-manager\" to User \"system:kube-controller-manager\""))
    );

    // The self reviews ask about the requester, here a controller's ServiceAccount.
    let sa = acting_as(
        &c,
        "system:serviceaccount:kube-system:deployment-controller",
        &[],
    )
    .await;
    let ssar: SelfSubjectAccessReview = serde_json::from_value(json!({"spec": {
        "resourceAttributes": {"verb": "create", "group": "apps", "resource": "replicasets", "namespace": ns}}}))
    .unwrap();
    let status = Api::<SelfSubjectAccessReview>::all(sa.clone())
        .create(&PostParams::default(), &ssar)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (status.allowed, status.reason.as_deref()),
        (true, Some("RBAC: allowed by ClusterRoleBinding \"system:controller:deployment-controller\" of ClusterRole \"system:controller:deployment-controller\" to ServiceAccount \"deployment-controller/kube-system\""))
    );
    let ssrr: SelfSubjectRulesReview =
        serde_json::from_value(json!({"spec": {"namespace": ns}})).unwrap();
    let rules = Api::<SelfSubjectRulesReview>::all(sa.clone())
        .create(&PostParams::default(), &ssrr)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(
        rules
            .resource_rules
            .iter()
            .any(|r| r.verbs.contains(&"create".to_string())
                && r.resources.as_deref().unwrap_or_default() == ["replicasets"]
                && r.api_groups.as_deref().unwrap_or_default() == ["apps", "extensions"]),
        "{rules:?}"
    );
    assert!(rules.non_resource_rules.iter().any(|r| r
        .non_resource_urls
        .as_deref()
        .unwrap_or_default()
        .contains(&"/api/*".to_string())));
    assert!(!rules.incomplete);
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_needs_the_impersonate_verb() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("imp").await.unwrap();
    // A ServiceAccount's token: an identity with no rights of its own, on any cluster.
    let sas: Api<ServiceAccount> = Api::namespaced(c.client.clone(), &ns);
    for name in ["impersonator", "target"] {
        sas.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let token = sas
        .create_token_request(
            "impersonator",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let me = format!("system:serviceaccount:{ns}:impersonator");
    let target = format!("system:serviceaccount:{ns}:target");
    let plain = with_token(&c, &token).await;
    let impersonating = |user: String| {
        let token = token.clone();
        let c = &c;
        async move {
            let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
            let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
            let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            cfg.auth_info = kube::config::AuthInfo {
                token: Some(token.into()),
                impersonate: Some(user),
                ..Default::default()
            };
            kube::Client::try_from(cfg).unwrap()
        }
    };
    // Its token works, and what it may do is discovery and its self reviews.
    let req = http::Request::get("/api").body(Vec::new()).unwrap();
    plain.request_text(req).await.unwrap();
    let cms = |client: &kube::Client| Api::<ConfigMap>::namespaced(client.clone(), &ns);
    forbidden(cms(&plain).list(&ListParams::default()).await);

    // Impersonating without the verb is refused, naming what it asked for.
    let as_target = impersonating(target.clone()).await;
    let s = forbidden(cms(&as_target).list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!("serviceaccounts \"target\" is forbidden: User \"{me}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"{ns}\"")
    );
    let as_user = impersonating("jane".into()).await;
    let s = forbidden(cms(&as_user).list(&ListParams::default()).await);
    assert_eq!(
        s.message,
        format!("users \"jane\" is forbidden: User \"{me}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope")
    );

    // Granted `impersonate` on the namespace's ServiceAccounts, it acts as the target, and
    // the target's rights apply (not the impersonator's).
    let roles: Api<Role> = Api::namespaced(c.client.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(c.client.clone(), &ns);
    roles
        .create(
            &PostParams::default(),
            &role(
                "impersonate-sas",
                json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]),
            ),
        )
        .await
        .unwrap();
    roles
        .create(
            &PostParams::default(),
            &role(
                "cm-lister",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "impersonate-sas",
                "Role",
                "impersonate-sas",
                json!([{"kind": "ServiceAccount", "name": "impersonator", "namespace": ns}]),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "cm-lister",
                "Role",
                "cm-lister",
                json!([{"kind": "ServiceAccount", "name": "target"}]),
            ),
        )
        .await
        .unwrap();
    eventually(&c, "impersonation allowed", || async {
        cms(&as_target).list(&ListParams::default()).await.is_ok()
    })
    .await;
    forbidden(cms(&plain).list(&ListParams::default()).await);
    // Still no users.
    forbidden(cms(&as_user).list(&ListParams::default()).await);
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_bindings_grant_only_what_their_writer_holds() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("esc").await.unwrap();
    let user = unique("rkcm-test-delegate");
    let roles: Api<Role> = Api::namespaced(c.client.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(c.client.clone(), &ns);
    roles
        .create(
            &PostParams::default(),
            &role(
                "delegate",
                json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "get"]},
                       {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "delegate",
                "Role",
                "delegate",
                json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]),
            ),
        )
        .await
        .unwrap();
    let client = acting_as(&c, &user, &[]).await;
    let my_roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    let my_bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
    let held = role(
        "cm-reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    );
    eventually(&c, "the delegate may create Roles", || async {
        my_roles.create(&PostParams::default(), &held).await.is_ok()
    })
    .await;
    let s = forbidden(
        my_roles
            .create(
                &PostParams::default(),
                &role(
                    "cm-editor",
                    json!([{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["list", "delete"]}]),
                ),
            )
            .await,
    );
    assert_eq!(
        s.message,
        format!("roles.rbac.authorization.k8s.io \"cm-editor\" is forbidden: user \"{user}\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}}\n{{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\" \"delete\"]}}")
    );
    // Binding what it holds is fine; a role with more is not.
    my_bindings
        .create(
            &PostParams::default(),
            &binding(
                "cm-reader",
                "Role",
                "cm-reader",
                json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "someone"}]),
            ),
        )
        .await
        .unwrap();
    let s = forbidden(
        my_bindings
            .create(
                &PostParams::default(),
                &binding(
                    "deployer",
                    "ClusterRole",
                    "system:controller:deployment-controller",
                    json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "someone"}]),
                ),
            )
            .await,
    );
    assert!(
        s.message.starts_with(&format!("rolebindings.rbac.authorization.k8s.io \"deployer\" is forbidden: user \"{user}\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"events\"], Verbs:[\"create\" \"patch\" \"update\"]}}")),
        "{}",
        s.message
    );
    c.cleanup().await;
}

/// What only kube-sim has: client certificates for any identity, its bootstrap policy as
/// recorded, the anonymous user's view, and who wrote what in its metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_sim_identities_bootstrap_policy_and_request_accounting() {
    let c = TestCluster::start().await.unwrap();
    let Some(sim) = c.sim_only("client certificates for any user and kube_sim_requests_by_user")
    else {
        return;
    };
    let ns = c.namespace("kcm").await.unwrap();
    let kc = sim
        .kubeconfig_for("system:kube-controller-manager", &[])
        .unwrap();
    let kcm = kube_sim::client_from_kubeconfig(&kc).await.unwrap();
    Api::<Pod>::all(kcm.clone())
        .list(&ListParams::default().limit(1))
        .await
        .unwrap();
    let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "x"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    let s = forbidden(
        Api::<ReplicaSet>::namespaced(kcm.clone(), &ns)
            .create(&PostParams::default(), &rs)
            .await,
    );
    assert_eq!(
        s.message,
        format!("replicasets.apps is forbidden: User \"system:kube-controller-manager\" cannot create resource \"replicasets\" in API group \"apps\" in the namespace \"{ns}\"")
    );
    let sa = acting_as(
        &c,
        "system:serviceaccount:kube-system:deployment-controller",
        &[],
    )
    .await;
    Api::<ReplicaSet>::namespaced(sa, &ns)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let by_user = sim.requests_by_user();
    let count = |user: &str, verb: &str, resource: &str, code: u16| {
        by_user
            .iter()
            .filter(|r| {
                r.user == user && r.verb == verb && r.resource == resource && r.code == code
            })
            .map(|r| r.count)
            .sum::<u64>()
    };
    assert_eq!(
        count(
            "system:kube-controller-manager",
            "create",
            "replicasets",
            403
        ),
        1
    );
    assert_eq!(
        count("system:kube-controller-manager", "list", "pods", 200),
        1
    );
    assert_eq!(
        count(
            "system:serviceaccount:kube-system:deployment-controller",
            "create",
            "replicasets",
            201
        ),
        1
    );
    assert!(sim.metrics_text().contains(
        "kube_sim_requests_by_user_total{user=\"system:serviceaccount:kube-system:deployment-controller\",verb=\"create\",group=\"apps\",resource=\"replicasets\",subresource=\"\",code=\"201\"} 1"
    ));

    // The bootstrap policy is served as the recorded server served it.
    for (resource, recorded) in kube_sim::rbac::bootstrap_objects() {
        let ns = recorded["metadata"]["namespace"].as_str();
        let name = recorded["metadata"]["name"].as_str().unwrap();
        let path = match ns {
            Some(ns) => {
                format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{resource}/{name}")
            }
            None => format!("/apis/rbac.authorization.k8s.io/v1/{resource}/{name}"),
        };
        let path = path.replace(':', "%3A");
        let req = http::Request::get(&path).body(Vec::new()).unwrap();
        let mut served: Value = c.client.request(req).await.unwrap();
        let meta = served["metadata"].as_object_mut().unwrap();
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            assert!(meta.remove(k).is_some(), "{path}: no {k}");
        }
        let managed = meta.remove("managedFields").unwrap();
        assert_eq!(managed[0]["manager"], "kube-apiserver", "{path}");
        assert_eq!(served, recorded, "{path}");
    }

    // Without a credential: the anonymous user, allowed health and version only.
    let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.auth_info = kube::config::AuthInfo::default();
    let anonymous = kube::Client::try_from(cfg).unwrap();
    let get = |path: &str| http::Request::get(path).body(Vec::new()).unwrap();
    assert_eq!(anonymous.request_text(get("/readyz")).await.unwrap(), "ok");
    anonymous.request_text(get("/version")).await.unwrap();
    let s = forbidden(anonymous.request_text(get("/api")).await);
    assert_eq!(
        s.message,
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
}
