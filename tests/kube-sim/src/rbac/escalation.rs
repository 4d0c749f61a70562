//! Escalation prevention, as kube-apiserver's RBAC storage enforces it: a user may create or
//! update a Role or ClusterRole only with rules they already hold (in that namespace, or
//! cluster-wide), unless allowed the `escalate` verb on it; and a RoleBinding or
//! ClusterRoleBinding only to a role whose rules they hold, unless allowed the `bind` verb on
//! that role. Members of `system:masters` may do anything; an update that only touches what
//! the garbage collector manages (owner references, finalizers) is never an escalation. The
//! refusal is upstream's 403 listing the rules not held.

use std::collections::BTreeSet;

use rkcm_gocompat::gofmt::quote_list;
use serde_json::Value;

use super::{Attributes, Policy, ResourceAttributes, Rule, GROUP, PRIVILEGED_GROUP};
use crate::request::User;
use crate::status::{ApiError, Subject};
use crate::validation::q;

/// Checks a write of an RBAC object (`resource` is its plural name; `request_name` the name
/// in the URL, empty for a create) of `new`, replacing `old` when it is an update.
pub fn confirm(
    policy: &Policy,
    user: &User,
    resource: &str,
    namespace: &str,
    request_name: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Ok(());
    }
    if old.is_some_and(|old| only_gc_fields_change(old, new)) {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or("");
    let refuse = |why: String| ApiError::forbidden(Subject::new(GROUP, resource, name), &why);
    let allowed = |verb: &str, group: &str, resource: &str, name: &str| {
        let attrs = Attributes::resource(
            verb,
            ResourceAttributes {
                group: group.into(),
                version: "*".into(),
                resource: resource.into(),
                subresource: String::new(),
                name: name.into(),
                namespace: namespace.into(),
            },
        );
        policy.authorize(user, &attrs).allowed
    };
    match resource {
        "roles" | "clusterroles" => {
            if allowed("escalate", GROUP, resource, request_name) {
                return Ok(());
            }
            let rules = Rule::list_from_json(&new["rules"]);
            confirm_no_escalation(policy, user, namespace, &rules).map_err(refuse)?;
            if resource == "clusterroles" && has_aggregation_rule(new) {
                // An aggregation rule can gather anything: it takes every right there is.
                let everything = [
                    Rule {
                        verbs: vec!["*".into()],
                        api_groups: vec!["*".into()],
                        resources: vec!["*".into()],
                        ..Rule::default()
                    },
                    Rule {
                        verbs: vec!["*".into()],
                        non_resource_urls: vec!["*".into()],
                        ..Rule::default()
                    },
                ];
                confirm_no_escalation(policy, user, namespace, &everything).map_err(|_| {
                    refuse("must have cluster-admin privileges to use the aggregationRule".into())
                })?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = &new["roleRef"];
            let kind = role_ref["kind"].as_str().unwrap_or("");
            let role_name = role_ref["name"].as_str().unwrap_or("");
            let role_resource = match kind {
                "ClusterRole" => Some("clusterroles"),
                "Role" => Some("roles"),
                _ => None,
            };
            if let Some(role_resource) = role_resource {
                let group = role_ref["apiGroup"].as_str().unwrap_or("");
                if allowed("bind", group, role_resource, role_name) {
                    return Ok(());
                }
            }
            let rules = policy
                .role_rules(kind, namespace, role_name)
                .map_err(&refuse)?;
            confirm_no_escalation(policy, user, namespace, &rules).map_err(refuse)
        }
        _ => Ok(()),
    }
}

fn has_aggregation_rule(cluster_role: &Value) -> bool {
    cluster_role["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .is_some_and(|s| !s.is_empty())
}

/// Whether an update changes nothing but what the garbage collector may change.
fn only_gc_fields_change(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "ownerReferences",
                "finalizers",
                "selfLink",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                // Set by the server, whatever the request says.
                "resourceVersion",
                "managedFields",
                "uid",
                "creationTimestamp",
                "generation",
            ] {
                m.remove(k);
            }
            if m.get("labels")
                .is_some_and(|l| l.as_object().is_some_and(|l| l.is_empty()))
            {
                m.remove("labels");
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// Upstream's `ConfirmNoEscalation`: the user's rules in `namespace` must cover `rules`.
fn confirm_no_escalation(
    policy: &Policy,
    user: &User,
    namespace: &str,
    rules: &[Rule],
) -> Result<(), String> {
    let (owned, errors) = policy.rules_for(user, namespace);
    let missing = uncovered(&owned, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    let groups = quote_list(&user.groups);
    let mut msg = format!(
        "user {} (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{}",
        q(&user.name),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            super::aggregate(&errors)
        ));
    }
    Err(msg)
}

/// The atomic rules of `servant` (one group, resource, verb and name each; or one URL and
/// verb) that no rule of `owner` covers.
pub fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

fn breakdown(rule: &Rule) -> Vec<Rule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = Rule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..Rule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    for n in &rule.resource_names {
                        out.push(Rule {
                            resource_names: one(n),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(Rule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..Rule::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover_all(set: &[String], wanted: &[String]) -> bool {
    if has(set, "*") || has_all(set, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        if has(set, path) {
            return true;
        }
        // `*/scale` covers every resource's scale.
        match path.split_once('/') {
            Some((_, sub)) => has(set, &format!("*/{sub}")),
            None => false,
        }
    })
}

fn non_resource_urls_cover_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        set.iter().any(|owner| {
            owner == path
                || owner
                    .strip_suffix('*')
                    .is_some_and(|_| path.starts_with(owner.trim_end_matches('*')))
        })
    })
}

fn rule_covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs
        && groups
        && resources_cover_all(&owner.resources, &sub.resources)
        && names
        && non_resource_urls_cover_all(&owner.non_resource_urls, &sub.non_resource_urls)
}

/// Merges rules that differ only by verb and name one group and one resource (at most one
/// object), as upstream's `CompactRules` does for the escalation message.
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut simple: Vec<Rule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.len() <= 1
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == r.api_groups
                && s.resources == r.resources
                && s.resource_names == r.resource_names
        }) {
            Some(s) => {
                for v in r.verbs {
                    if !has(&s.verbs, &v) {
                        s.verbs.push(v);
                    }
                }
            }
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

/// A rule as upstream's `CompactString` prints it:
/// `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
fn compact_string(r: &Rule) -> String {
    let parts: Vec<String> = [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ]
    .iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k}:{}", quote_list(v)))
    .collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rbac::PolicyObjects;

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn coverage_follows_upstreams_comparator() {
        let owner = [
            rule(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/scale"]}),
            ),
            rule(
                json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]}),
            ),
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]})),
        ];
        let cases = [
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
                0,
            ),
            (
                json!({"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]}),
                1,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"]}),
                1,
            ),
            (
                json!({"verbs": ["list"], "apiGroups": [""], "resources": ["replicationcontrollers/scale"]}),
                0,
            ),
            (
                json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]}),
                0,
            ),
            (
                json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web", "db"]}),
                1,
            ),
            (
                json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]}),
                1,
            ),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/apis/apps", "/healthz"]}),
                0,
            ),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]}),
                1,
            ),
        ];
        for (servant, missing) in cases {
            assert_eq!(
                uncovered(&owner, &[rule(servant.clone())]).len(),
                missing,
                "{servant}"
            );
        }
    }

    #[test]
    fn missing_rights_are_described_as_upstream_does() {
        let missing = uncovered(
            &[],
            &[
                rule(
                    json!({"verbs": ["get", "list"], "apiGroups": ["", "apps"], "resources": ["pods"]}),
                ),
                rule(json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]})),
            ],
        );
        let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
        assert_eq!(
            described.into_iter().collect::<Vec<_>>(),
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}",
                "{APIGroups:[\"apps\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}",
                "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
            ]
        );
    }

    fn policy() -> Policy {
        let objects = PolicyObjects {
            cluster_roles: vec![std::sync::Arc::new(
                json!({"metadata": {"name": "pod-reader"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            )],
            roles: vec![std::sync::Arc::new(
                json!({"metadata": {"name": "manager", "namespace": "a"},
                "rules": [{"verbs": ["create", "update"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"]},
                          {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]}),
            )],
            cluster_role_bindings: vec![],
            role_bindings: vec![std::sync::Arc::new(
                json!({"metadata": {"name": "manager", "namespace": "a"},
                "roleRef": {"kind": "Role", "name": "manager"},
                "subjects": [{"kind": "User", "name": "jane"}]}),
            )],
        };
        Policy::compile(1, &objects)
    }

    #[test]
    fn roles_and_bindings_grant_only_what_their_writer_holds() {
        let p = policy();
        let jane = User {
            name: "jane".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        };
        let held = json!({"metadata": {"name": "r", "namespace": "a"},
            "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]});
        assert!(confirm(&p, &jane, "roles", "a", "", &held, None).is_ok());
        let more = json!({"metadata": {"name": "r", "namespace": "a"},
            "rules": [{"verbs": ["list", "delete"], "apiGroups": [""], "resources": ["configmaps", "secrets"]}]});
        let e = confirm(&p, &jane, "roles", "a", "", &more, None).unwrap_err();
        assert_eq!(
            e.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\" \"delete\"]}"
        );
        // Only the garbage collector's fields changing is no escalation.
        let mut owned = more.clone();
        owned["metadata"]["finalizers"] = json!(["x"]);
        assert!(confirm(&p, &jane, "roles", "a", "r", &owned, Some(&more)).is_ok());
        // Binding a role needs its rules (or `bind`).
        let bind = |role_kind: &str, role: &str| {
            json!({"metadata": {"name": "b", "namespace": "a"},
                   "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role},
                   "subjects": [{"kind": "User", "name": "joe"}]})
        };
        assert!(confirm(
            &p,
            &jane,
            "rolebindings",
            "a",
            "",
            &bind("Role", "manager"),
            None
        )
        .is_ok());
        let e = confirm(
            &p,
            &jane,
            "rolebindings",
            "a",
            "",
            &bind("ClusterRole", "pod-reader"),
            None,
        )
        .unwrap_err();
        assert!(e.message.starts_with("rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}"), "{}", e.message);
        let e = confirm(
            &p,
            &jane,
            "rolebindings",
            "a",
            "",
            &bind("ClusterRole", "gone"),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
        );
        // Allowed `escalate`, anything goes.
        let escalating = Policy::compile(
            2,
            &PolicyObjects {
                cluster_roles: vec![std::sync::Arc::new(
                    json!({"metadata": {"name": "escalator"},
                    "rules": [{"verbs": ["escalate"], "apiGroups": [GROUP], "resources": ["roles"]}]}),
                )],
                cluster_role_bindings: vec![std::sync::Arc::new(
                    json!({"metadata": {"name": "escalator"},
                    "roleRef": {"kind": "ClusterRole", "name": "escalator"},
                    "subjects": [{"kind": "User", "name": "jane"}]}),
                )],
                ..PolicyObjects::default()
            },
        );
        assert!(confirm(&escalating, &jane, "roles", "a", "", &more, None).is_ok());
        // The privileged group needs no check.
        let admin = User {
            name: "admin".into(),
            groups: vec![PRIVILEGED_GROUP.into()],
            ..User::default()
        };
        assert!(confirm(&p, &admin, "roles", "a", "", &more, None).is_ok());
    }
}
