//! clusterrole-aggregation-controller: a ClusterRole with an `aggregationRule` gets as its
//! `rules` those of every other ClusterRole its `clusterRoleSelectors` match (upstream
//! `pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go`): that is
//! how `admin`, `edit` and `view` take in the rules of ClusterRoles labelled
//! `rbac.authorization.k8s.io/aggregate-to-admin: "true"` and the like, such as those a CRD's
//! installer ships.
//!
//! Which roles feed which is not known in advance and ClusterRoles are few, so any
//! ClusterRole's change puts every aggregated ClusterRole on the queue, as upstream does.
//! The rules are written by a forced server-side apply whose field manager is the
//! controller's name, so an edit of them by anyone else is undone at the next sync.

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams};
use kube::Resource as _;
use serde_json::json;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::selector::Selector;
use crate::store::Store;

pub const NAME: &str = "clusterrole-aggregation-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["rbac.authorization.k8s.io/v1/clusterroles"];
/// The field manager of its applies.
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

struct Controller {
    client: kube::Client,
    cluster_roles: Store<ClusterRole>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let (client, _recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("ClusterRoleAggregator");
    let cluster_roles = context.informers.get::<ClusterRole>();
    {
        let queue = queue.clone();
        let store = cluster_roles.store().clone();
        cluster_roles.add_handler(Arc::new(move |_: &Change<ClusterRole>| {
            for role in store.list() {
                if role.aggregation_rule.is_some() {
                    if let Some(name) = role.metadata.name.clone() {
                        queue.add(name);
                    }
                }
            }
        }));
    }
    let controller = Arc::new(Controller {
        client,
        cluster_roles: cluster_roles.store().clone(),
    });
    // KCM runs it with five workers.
    Ok(Runnable::new(
        NAME,
        queue,
        5,
        controller,
        |controller, key| async move { controller.sync_cluster_role(&key).await },
    ))
}

/// Two rules are the same when their lists are, an absent list being an empty one
/// (apimachinery's semantic equality).
fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    fn list(l: &Option<Vec<String>>) -> &[String] {
        l.as_deref().unwrap_or_default()
    }
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_rule(a, b))
}

/// The rules `aggregated` should have: for each of its selectors in turn, the rules of the
/// other ClusterRoles it matches, taken in name order, each rule once. `None` when it
/// aggregates nothing; an error for a selector that cannot be evaluated.
fn aggregated_rules(
    aggregated: &ClusterRole,
    roles: &[Arc<ClusterRole>],
) -> Result<Option<Vec<PolicyRule>>, String> {
    let Some(rule) = &aggregated.aggregation_rule else {
        return Ok(None);
    };
    let mut by_name: Vec<&Arc<ClusterRole>> = roles.iter().collect();
    by_name.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for label_selector in rule.cluster_role_selectors.iter().flatten() {
        let selector = Selector::from_label_selector(Some(label_selector))?;
        let matching = by_name.iter().filter(|role| {
            role.metadata.name != aggregated.metadata.name
                && selector.matches(role.metadata.labels.as_ref())
        });
        for role in matching {
            for candidate in role.rules.iter().flatten() {
                if !rules.iter().any(|known| same_rule(known, candidate)) {
                    rules.push(candidate.clone());
                }
            }
        }
    }
    Ok(Some(rules))
}

/// The server-side apply configuration that sets the rules (fields as upstream's
/// apply configuration carries them; none when there are no rules, which lets the ones
/// the controller owned go).
fn apply_configuration(name: &str, rules: &[PolicyRule]) -> serde_json::Value {
    let mut configuration = json!({
        "apiVersion": ClusterRole::api_version(&()),
        "kind": ClusterRole::kind(&()),
        "metadata": {"name": name},
    });
    if !rules.is_empty() {
        let rules: Vec<serde_json::Value> = rules
            .iter()
            .map(|rule| {
                let mut fields = serde_json::Map::new();
                fields.insert("verbs".into(), json!(rule.verbs));
                let optional = [
                    ("apiGroups", &rule.api_groups),
                    ("resources", &rule.resources),
                    ("resourceNames", &rule.resource_names),
                    ("nonResourceURLs", &rule.non_resource_urls),
                ];
                for (field, value) in optional {
                    if let Some(value) = value {
                        fields.insert(field.into(), json!(value));
                    }
                }
                serde_json::Value::Object(fields)
            })
            .collect();
        configuration["rules"] = json!(rules);
    }
    configuration
}

impl Controller {
    async fn sync_cluster_role(&self, name: &str) -> anyhow::Result<()> {
        let Some(role) = self.cluster_roles.get(name) else {
            return Ok(());
        };
        let wanted = aggregated_rules(&role, &self.cluster_roles.list())
            .map_err(|error| anyhow::anyhow!("ClusterRole {name}: {error}"))?;
        let Some(wanted) = wanted else {
            return Ok(());
        };
        if same_rules(&wanted, role.rules.as_deref().unwrap_or_default()) {
            return Ok(());
        }
        let api: Api<ClusterRole> = Api::all(self.client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(
            name,
            &params,
            &Patch::Apply(&apply_configuration(name, &wanted)),
        )
        .await
        .map(|_| ())
        .with_context(|| format!("applying the aggregated rules of ClusterRole {name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, labels: &[(&str, &str)], rules: serde_json::Value) -> Arc<ClusterRole> {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "rules": rules,
            }))
            .unwrap(),
        )
    }

    fn aggregating(name: &str, selectors: serde_json::Value) -> Arc<ClusterRole> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "aggregationRule": {"clusterRoleSelectors": selectors},
                "rules": null,
            }))
            .unwrap(),
        )
    }

    fn rule(verbs: &[&str], resources: &[&str]) -> serde_json::Value {
        json!({"apiGroups": [""], "verbs": verbs, "resources": resources})
    }

    fn resources(rules: &[PolicyRule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| r.resources.clone().unwrap_or_default().join(","))
            .collect()
    }

    #[test]
    fn rules_come_by_selector_then_by_name_each_once() {
        let to_admin = [("rbac.authorization.k8s.io/aggregate-to-admin", "true")];
        let to_edit = [("rbac.authorization.k8s.io/aggregate-to-edit", "true")];
        let admin = aggregating(
            "admin",
            json!([
                {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
                {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}
            ]),
        );
        let roles = vec![
            admin.clone(),
            role(
                "zeta",
                &to_admin,
                json!([rule(&["get"], &["widgets"]), rule(&["get"], &["pods"])]),
            ),
            role("alpha", &to_admin, json!([rule(&["get"], &["pods"])])),
            role("edit-part", &to_edit, json!([rule(&["create"], &["pods"])])),
            role("unrelated", &[], json!([rule(&["*"], &["*"])])),
            // Matched by the second selector too: its rule is already in.
            role(
                "both",
                &[to_admin[0], to_edit[0]],
                json!([{"apiGroups": [""], "verbs": ["get"], "resources": ["pods"], "resourceNames": []}]),
            ),
        ];
        let rules = aggregated_rules(&admin, &roles).unwrap().unwrap();
        assert_eq!(resources(&rules), ["pods", "widgets", "pods"]);
        assert_eq!(rules[2].verbs, ["create"]);
    }

    #[test]
    fn roles_without_aggregation_are_left_alone_and_an_empty_result_is_kept() {
        let plain = role("plain", &[], json!([rule(&["get"], &["pods"])]));
        assert_eq!(
            aggregated_rules(&plain, std::slice::from_ref(&plain)),
            Ok(None)
        );
        // It never takes its own rules, even when its selector matches it.
        let own = aggregating("own", json!([{}]));
        assert_eq!(
            aggregated_rules(&own, std::slice::from_ref(&own)),
            Ok(Some(vec![]))
        );
        let bad = aggregating(
            "bad",
            json!([{"matchExpressions": [{"key": "a", "operator": "Near"}]}]),
        );
        assert!(aggregated_rules(&bad, &[]).is_err());
    }

    #[test]
    fn absent_and_empty_lists_are_the_same_rule() {
        let a: PolicyRule = serde_json::from_value(rule(&["get"], &["pods"])).unwrap();
        let mut b = a.clone();
        b.resource_names = Some(vec![]);
        assert!(same_rule(&a, &b));
        b.verbs = vec!["list".into()];
        assert!(!same_rule(&a, &b));
    }

    #[test]
    fn the_apply_configuration_carries_only_the_rules() {
        let rules: Vec<PolicyRule> =
            vec![serde_json::from_value(rule(&["get"], &["pods"])).unwrap()];
        assert_eq!(
            apply_configuration("admin", &rules),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "admin"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
            })
        );
        assert!(apply_configuration("admin", &[]).get("rules").is_none());
    }
}
