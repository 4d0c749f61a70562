//! Table tests of the authorizer against upstream's semantics and the recorded server: rule
//! matching, the 403 messages, the bootstrap policy's grants and reasons, role bindings and
//! their errors, and the compiled policy following writes.

use serde_json::json;

use super::*;

fn rule(v: Value) -> Rule {
    Rule::from_json(&v)
}

fn res(verb: &str, group: &str, resource: &str, sub: &str, name: &str, ns: &str) -> Attributes {
    Attributes::resource(
        verb,
        ResourceAttributes {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: ns.into(),
        },
    )
}

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

#[test]
fn rules_match_as_upstream_evaluates_them() {
    let pods = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]});
    let cases: Vec<(Value, Attributes, bool)> = vec![
        (pods.clone(), res("get", "", "pods", "", "p", "a"), true),
        (pods.clone(), res("list", "", "pods", "", "", ""), true),
        (pods.clone(), res("create", "", "pods", "", "", "a"), false),
        (pods.clone(), res("get", "apps", "pods", "", "", "a"), false),
        // A resource does not cover its subresources.
        (
            pods.clone(),
            res("get", "", "pods", "status", "p", "a"),
            false,
        ),
        (
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            res("delete", "apps", "deployments", "scale", "d", "a"),
            true,
        ),
        (
            json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}),
            res("update", "apps", "deployments", "status", "d", "a"),
            true,
        ),
        (
            json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}),
            res("update", "apps", "deployments", "", "d", "a"),
            false,
        ),
        (
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}),
            res("get", "apps", "statefulsets", "scale", "s", "a"),
            true,
        ),
        (
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}),
            res("get", "apps", "statefulsets", "", "s", "a"),
            false,
        ),
        (
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}),
            res("get", "apps", "statefulsets", "status", "s", "a"),
            false,
        ),
        // resourceNames restrict to named objects; a list names none.
        (
            json!({"verbs": ["get", "update", "list"], "apiGroups": ["coordination.k8s.io"],
                   "resources": ["leases"], "resourceNames": ["kube-controller-manager"]}),
            res(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-controller-manager",
                "kube-system",
            ),
            true,
        ),
        (
            json!({"verbs": ["get", "update", "list"], "apiGroups": ["coordination.k8s.io"],
                   "resources": ["leases"], "resourceNames": ["kube-controller-manager"]}),
            res(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "other",
                "kube-system",
            ),
            false,
        ),
        (
            json!({"verbs": ["get", "update", "list"], "apiGroups": ["coordination.k8s.io"],
                   "resources": ["leases"], "resourceNames": ["kube-controller-manager"]}),
            res(
                "list",
                "coordination.k8s.io",
                "leases",
                "",
                "",
                "kube-system",
            ),
            false,
        ),
        // Non-resource URLs: exact, or a prefix ending in `*`; never for resource requests.
        (
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}),
            Attributes::non_resource("get", "/healthz"),
            true,
        ),
        (
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}),
            Attributes::non_resource("get", "/healthz/ping"),
            false,
        ),
        (
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}),
            Attributes::non_resource("get", "/apis/apps/v1"),
            true,
        ),
        (
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}),
            Attributes::non_resource("get", "/apis"),
            false,
        ),
        (
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}),
            Attributes::non_resource("post", "/healthz"),
            false,
        ),
        (
            json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
            res("get", "", "pods", "", "", ""),
            false,
        ),
        (
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}),
            Attributes::non_resource("get", "/metrics"),
            false,
        ),
    ];
    for (i, (r, a, want)) in cases.into_iter().enumerate() {
        assert_eq!(rule(r.clone()).allows(&a), want, "case {i}: {r} vs {a:?}");
    }
}

#[test]
fn forbidden_messages_are_kube_apiservers() {
    let kcm = user("system:kube-controller-manager", &["system:authenticated"]);
    // Record 003.
    let e = forbidden(
        &kcm,
        &res("create", "apps", "replicasets", "", "", "rb"),
        "",
    );
    assert_eq!(
        e.to_status(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "replicasets.apps is forbidden: User \"system:kube-controller-manager\" cannot create resource \"replicasets\" in API group \"apps\" in the namespace \"rb\"",
               "reason": "Forbidden", "details": {"group": "apps", "kind": "replicasets"}, "code": 403})
    );
    let cases = [
        (
            res("get", "", "pods", "", "x", "a"),
            "",
            "pods \"x\" is forbidden: User \"system:kube-controller-manager\" cannot get resource \"pods\" in API group \"\" in the namespace \"a\"",
            json!({"name": "x", "kind": "pods"}),
        ),
        (
            res("list", "", "nodes", "", "", ""),
            "",
            "nodes is forbidden: User \"system:kube-controller-manager\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
            json!({"kind": "nodes"}),
        ),
        (
            res("create", "", "pods", "eviction", "p", "a"),
            "",
            "pods \"p\" is forbidden: User \"system:kube-controller-manager\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"a\"",
            json!({"name": "p", "kind": "pods"}),
        ),
        (
            Attributes::non_resource("get", "/foo"),
            "",
            "forbidden: User \"system:kube-controller-manager\" cannot get path \"/foo\"",
            json!({}),
        ),
        (
            res("get", "", "pods", "", "", "a"),
            "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
            "pods is forbidden: User \"system:kube-controller-manager\" cannot get resource \"pods\" in API group \"\" in the namespace \"a\": RBAC: role.rbac.authorization.k8s.io \"r\" not found",
            json!({"kind": "pods"}),
        ),
    ];
    for (a, reason, message, details) in cases {
        let s = forbidden(&kcm, &a, reason).to_status();
        assert_eq!(s["message"], message);
        assert_eq!(s["details"], details, "{message}");
    }
}

fn policy(objects: Vec<Value>) -> Policy {
    let mut p = PolicyObjects::default();
    for o in objects {
        let list = match o["kind"].as_str().unwrap() {
            "ClusterRole" => &mut p.cluster_roles,
            "Role" => &mut p.roles,
            "ClusterRoleBinding" => &mut p.cluster_role_bindings,
            _ => &mut p.role_bindings,
        };
        list.push(Arc::new(o));
    }
    Policy::compile(1, &p)
}

fn bootstrap_policy() -> Policy {
    policy(bootstrap_objects().into_iter().map(|(_, o)| o).collect())
}

#[test]
fn the_bootstrap_policy_grants_what_the_records_show() {
    let p = bootstrap_policy();
    let sa = |name: &str| {
        user(
            &format!("system:serviceaccount:kube-system:{name}"),
            &["system:serviceaccounts", "system:authenticated"],
        )
    };
    let kcm = user("system:kube-controller-manager", &["system:authenticated"]);
    // Record 002: the controller manager lists everything.
    assert!(
        p.authorize(&kcm, &res("list", "", "pods", "", "", ""))
            .allowed
    );
    // Record 003: but creates no ReplicaSet, and says no more than no.
    assert_eq!(
        p.authorize(&kcm, &res("create", "apps", "replicasets", "", "", "rb")),
        Decision::default()
    );
    // Records 005 and 006: it makes ServiceAccounts and their tokens.
    assert!(
        p.authorize(
            &kcm,
            &res("create", "", "serviceaccounts", "", "", "kube-system")
        )
        .allowed
    );
    assert!(
        p.authorize(
            &kcm,
            &res(
                "create",
                "",
                "serviceaccounts",
                "token",
                "deployment-controller",
                "kube-system"
            )
        )
        .allowed
    );
    // Its Lease by name only, through the kube-system leader-locking Role for the rest.
    assert!(
        p.authorize(
            &kcm,
            &res(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-controller-manager",
                "kube-system"
            )
        )
        .allowed
    );
    // Records 007 and 008.
    assert!(
        p.authorize(
            &sa("deployment-controller"),
            &res("create", "apps", "replicasets", "", "", "rb")
        )
        .allowed
    );
    assert!(
        !p.authorize(
            &sa("deployment-controller"),
            &res("create", "", "pods", "", "", "rb")
        )
        .allowed
    );
    // Record 009: the reason names the binding, the role and the subject.
    assert_eq!(
        p.authorize(
            &user(
                "system:serviceaccount:kube-system:replicaset-controller",
                &["system:serviceaccounts"]
            ),
            &res("create", "", "pods", "", "", "rb")
        ),
        Decision {
            allowed: true,
            reason: "RBAC: allowed by ClusterRoleBinding \"system:controller:replicaset-controller\" of ClusterRole \"system:controller:replicaset-controller\" to ServiceAccount \"replicaset-controller/kube-system\"".into()
        }
    );
    // Discovery and public information for everyone authenticated, health for anyone.
    let anyone = user("jane", &["system:authenticated"]);
    for path in [
        "/api",
        "/apis/apps/v1",
        "/openapi/v3",
        "/version",
        "/healthz",
    ] {
        assert!(
            p.authorize(&anyone, &Attributes::non_resource("get", path))
                .allowed,
            "{path}"
        );
    }
    assert!(
        !p.authorize(&anyone, &Attributes::non_resource("get", "/metrics"))
            .allowed
    );
    let anonymous = User::anonymous();
    assert!(
        p.authorize(&anonymous, &Attributes::non_resource("get", "/readyz"))
            .allowed
    );
    assert!(
        !p.authorize(&anonymous, &Attributes::non_resource("get", "/api"))
            .allowed
    );
    assert_eq!(
        p.authorize(
            &anyone,
            &res(
                "create",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
                "",
                ""
            )
        )
        .reason,
        "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
    );
}

#[test]
fn role_bindings_apply_in_their_namespace_and_describe_themselves() {
    let p = policy(vec![
        json!({"kind": "Role", "metadata": {"name": "reader", "namespace": "a"},
               "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "lister"},
               "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "read", "namespace": "a"},
               "roleRef": {"kind": "Role", "name": "reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "User", "name": "jane"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "list", "namespace": "a"},
               "roleRef": {"kind": "ClusterRole", "name": "lister"},
               "subjects": [{"kind": "Group", "name": "devs"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "dangling", "namespace": "b"},
               "roleRef": {"kind": "Role", "name": "gone"},
               "subjects": [{"kind": "User", "name": "jane"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "dangling"},
               "roleRef": {"kind": "ClusterRole", "name": "gone"},
               "subjects": [{"kind": "Group", "name": "devs"}]}),
    ]);
    let sa = user("system:serviceaccount:a:sa", &[]);
    assert_eq!(
        p.authorize(&sa, &res("get", "", "pods", "", "p", "a"))
            .reason,
        "RBAC: allowed by RoleBinding \"read/a\" of Role \"reader\" to ServiceAccount \"sa/a\""
    );
    // A ServiceAccount subject without a namespace is the binding namespace's.
    assert!(
        !p.authorize(
            &user("system:serviceaccount:b:sa", &[]),
            &res("get", "", "pods", "", "p", "a")
        )
        .allowed
    );
    assert!(
        !p.authorize(&sa, &res("get", "", "pods", "", "p", "c"))
            .allowed
    );
    let jane = user("jane", &["devs"]);
    assert_eq!(
        p.authorize(&jane, &res("list", "", "pods", "", "", "a"))
            .reason,
        "RBAC: allowed by RoleBinding \"list/a\" of ClusterRole \"lister\" to Group \"devs\""
    );
    // A binding to a missing role gives its error as the reason of the refusal.
    assert_eq!(
        p.authorize(&jane, &res("list", "", "pods", "", "", "b")),
        Decision {
            allowed: false,
            reason: "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"gone\" not found]".into()
        }
    );
    let (rules, errors) = p.rules_for(&jane, "a");
    assert_eq!(rules.len(), 2);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        rules_review_status(&rules, &errors),
        json!({"resourceRules": [
                  {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                  {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}],
               "nonResourceRules": [], "incomplete": false,
               "evaluationError": "clusterrole.rbac.authorization.k8s.io \"gone\" not found"})
    );
}

#[test]
fn errors_aggregate_like_apimachinery() {
    assert_eq!(aggregate(&["a".into()]), "a");
    assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
    assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
}

#[test]
fn the_bootstrap_policy_is_the_recorded_one() {
    let objects = bootstrap_objects();
    let count = |r: &str| objects.iter().filter(|(res, _)| *res == r).count();
    assert_eq!(
        (
            count("clusterroles"),
            count("clusterrolebindings"),
            count("roles"),
            count("rolebindings")
        ),
        (63, 44, 7, 7)
    );
    let admin = objects
        .iter()
        .find(|(_, o)| o["metadata"]["name"] == "admin")
        .map(|(_, o)| o)
        .unwrap();
    assert_eq!(admin["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(admin["kind"], "ClusterRole");
    // Aggregated roles are recorded before any aggregation controller filled them.
    assert!(admin["rules"].is_null());
    assert_eq!(
        admin["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
}

#[test]
fn the_cached_policy_follows_rbac_writes() {
    let store = Store::new(100);
    let authz = Authorizer::default();
    let jane = user("jane", &["system:authenticated"]);
    let get = res("get", "", "pods", "", "p", "a");
    assert!(!authz.authorize(&store, &jane, &get).allowed);
    let crb = ResKey::new(GROUP, "clusterrolebindings");
    let cr = ResKey::new(GROUP, "clusterroles");
    store.lock().put(
        &cr,
        json!({"kind": "ClusterRole", "metadata": {"name": "r"},
               "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
    );
    store.lock().put(
        &crb,
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
               "roleRef": {"kind": "ClusterRole", "name": "r"},
               "subjects": [{"kind": "User", "name": "jane"}]}),
    );
    assert!(authz.authorize(&store, &jane, &get).allowed);
    let first = authz.policy(&store);
    assert!(Arc::ptr_eq(&first, &authz.policy(&store)));
    // Writes elsewhere keep the compiled policy.
    store.lock().put(
        &ResKey::new("", "configmaps"),
        json!({"metadata": {"name": "c", "namespace": "a"}}),
    );
    assert!(Arc::ptr_eq(&first, &authz.policy(&store)));
    store.lock().remove(&crb, "", "b");
    assert!(!authz.authorize(&store, &jane, &get).allowed);
    // The privileged group needs no policy at all.
    let admin = user("root", &["system:masters"]);
    assert_eq!(
        authz.authorize(&store, &admin, &get),
        Decision {
            allowed: true,
            reason: String::new()
        }
    );
}
