//! The policy type checker (upstream `validatingadmissionpolicy.TypeChecker`): which kinds a
//! policy's rules name, their schemas as CEL types, and each validation expression (and its
//! message expression) compiled against every one of them with cel-go's checker
//! ([`rkcm_cel`]).
//!
//! As upstream: rules with a wildcard group or version give no kind, wildcard resources and
//! subresources are skipped, at most ten kinds are collected per rule, a kind without a
//! schema is not checked, `params` is declared only when the `paramKind`'s schema resolves,
//! and only `spec.validations[*].expression` / `.messageExpression` are checked (1.29 checks
//! neither variables, audit annotations nor match conditions).

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::admissionregistration::v1beta1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicySpec,
};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{ListResourcesRequest, ResourceInfo};
use tonic::transport::Channel;
use tracing::debug;

use super::schemas::SchemaResolver;

/// Upstream's `maxTypesToCheck`.
const MAX_TYPES_TO_CHECK: usize = 10;

/// One entry of `status.typeChecking.expressionWarnings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExpressionWarning {
    pub(crate) field_ref: String,
    pub(crate) warning: String,
}

/// A group/version/kind, ordered by group, version, kind as upstream sorts them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Gvk {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
}

impl std::fmt::Display for Gvk {
    /// apimachinery's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// The API's resources as discovery lists them: the REST mapper's `KindsFor` for fully
/// specified group/version/resource triples.
pub(crate) struct RestMapping {
    resources: Vec<ResourceInfo>,
}

impl RestMapping {
    pub(crate) fn new(resources: Vec<ResourceInfo>) -> Self {
        RestMapping { resources }
    }

    /// The kinds served at `group/version/resource` (the plural or singular name, any case),
    /// or `None` when discovery does not list it (the mapper's "no matches" error).
    pub(crate) fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Option<Vec<Gvk>> {
        let resource = resource.to_lowercase();
        let kinds: Vec<Gvk> = self
            .resources
            .iter()
            .filter(|r| r.group == group && r.version == version && !r.resource.contains('/'))
            .filter(|r| r.resource == resource || r.kind.to_lowercase() == resource)
            .map(|r| Gvk {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
            })
            .collect();
        (!kinds.is_empty()).then_some(kinds)
    }
}

/// The kinds a policy's match constraints name, sorted, with whether some lookup missed
/// (upstream then refreshes its mapper once and tries again).
pub(crate) fn types_to_check(
    spec: &ValidatingAdmissionPolicySpec,
    mapping: &RestMapping,
) -> (Vec<Gvk>, bool) {
    let mut missed = false;
    let Some(rules) = spec
        .match_constraints
        .as_ref()
        .and_then(|m| m.resource_rules.as_ref())
        .filter(|r| !r.is_empty())
    else {
        return (Vec::new(), missed);
    };
    let mut gvks = BTreeSet::new();
    for rule in rules {
        let no_wildcard = |values: &Option<Vec<String>>| -> Option<Vec<String>> {
            let values = values.as_deref().unwrap_or_default();
            if values.iter().any(|v| v.contains('*')) {
                return None;
            }
            let mut values = values.to_vec();
            values.sort();
            (!values.is_empty()).then_some(values)
        };
        let Some(groups) = no_wildcard(&rule.api_groups) else {
            continue;
        };
        let Some(versions) = no_wildcard(&rule.api_versions) else {
            continue;
        };
        let mut resources: Vec<String> = rule
            .resources
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|r| !r.contains(['*', '/']))
            .cloned()
            .collect();
        if resources.is_empty() {
            continue;
        }
        resources.sort();
        // Upstream counts per rule, duplicates included, and stops the whole collection
        // when one rule reaches the limit.
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(kinds) = mapping.kinds_for(group, version, resource) else {
                        missed = true;
                        continue;
                    };
                    for kind in kinds.into_iter().filter(|k| !k.kind.is_empty()) {
                        gvks.insert(kind);
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            return (gvks.into_iter().collect(), missed);
                        }
                    }
                }
            }
        }
    }
    (gvks.into_iter().collect(), missed)
}

/// `paramKind` as a group/version/kind (`schema.ParseGroupVersion`): `None` without one,
/// with an empty one, or with an apiVersion of more than one slash.
pub(crate) fn params_gvk(spec: &ValidatingAdmissionPolicySpec) -> Option<Gvk> {
    let param_kind = spec.param_kind.as_ref()?;
    let api_version = param_kind.api_version.as_deref().unwrap_or_default();
    let kind = param_kind.kind.as_deref().unwrap_or_default();
    let (group, version) = match api_version.split_once('/') {
        None => ("", api_version),
        Some((_, rest)) if rest.contains('/') => return None,
        Some((group, version)) => (group, version),
    };
    let gvk = Gvk {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
    };
    (!(gvk.group.is_empty() && gvk.version.is_empty() && gvk.kind.is_empty())).then_some(gvk)
}

/// Upstream's `generateUniqueTypeName`: the kind and the nanosecond of the current second.
fn unique_type_name(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{kind}{nanos}")
}

/// The kinds to check against with their CEL types (`None`: the schema gave no type, so
/// `object` is `dyn`), and the params' type when its schema resolves.
pub(crate) struct Context {
    kinds: Vec<(Gvk, Option<rkcm_cel::Type>)>,
    /// Declared only when the `paramKind`'s schema gives a type (upstream tests the
    /// `DeclType` for nil).
    params: Option<rkcm_cel::Type>,
}

impl Context {
    /// The policy's warnings: `spec.validations[i].expression` and, when set,
    /// `.messageExpression`, each with the checker's text for every kind it fails on.
    pub(crate) fn warnings(&self, spec: &ValidatingAdmissionPolicySpec) -> Vec<ExpressionWarning> {
        let mut warnings = Vec::new();
        for (i, validation) in spec.validations.iter().flatten().enumerate() {
            let expressions = [
                ("expression", Some(validation.expression.as_str())),
                (
                    "messageExpression",
                    validation.message_expression.as_deref(),
                ),
            ];
            for (field, expression) in expressions {
                let Some(expression) = expression.filter(|e| !e.is_empty()) else {
                    continue;
                };
                let results = self.check_expression(expression);
                if !results.is_empty() {
                    warnings.push(ExpressionWarning {
                        field_ref: format!("spec.validations[{i}].{field}"),
                        warning: results.join("\n"),
                    });
                }
            }
        }
        warnings
    }

    /// One text per kind the expression does not check against (upstream's
    /// `TypeCheckingResult.String()`: the kind, cel-go's issues, a newline).
    fn check_expression(&self, expression: &str) -> Vec<String> {
        self.kinds
            .iter()
            .filter_map(|(gvk, object)| {
                let env = rkcm_cel::Env::admission(
                    object.clone(),
                    self.params.clone(),
                    self.params.is_some(),
                    true,
                );
                rkcm_cel::compile(&env, expression)
                    .err()
                    .map(|issues| format!("{gvk}: {issues}\n"))
            })
            .collect()
    }
}

/// The checker: the REST mapping from the informer-server's discovery, the schemas from
/// the built-in definitions and then the API server's `/openapi/v3`.
pub(crate) struct TypeChecker {
    client: kube::Client,
    informer: InformerClient<Channel>,
}

impl TypeChecker {
    pub(crate) fn new(client: kube::Client, informer: InformerClient<Channel>) -> Self {
        TypeChecker { client, informer }
    }

    async fn mapping(&self) -> RestMapping {
        let mut informer = self.informer.clone();
        match informer.list_resources(ListResourcesRequest {}).await {
            Ok(response) => RestMapping::new(response.into_inner().resources),
            Err(status) => {
                // Every lookup then misses: the policy gets no kind to check, as upstream's
                // mapper without discovery.
                debug!(error = %status.message(), "validatingadmissionpolicy-status: discovery failed");
                RestMapping::new(Vec::new())
            }
        }
    }

    /// Upstream's `CreateContext`: kinds, their types and the params' type.
    pub(crate) async fn context(&self, spec: &ValidatingAdmissionPolicySpec) -> Context {
        let mut mapping = self.mapping().await;
        let (mut gvks, missed) = types_to_check(spec, &mapping);
        if missed {
            // At most one refresh per policy, as upstream.
            mapping = self.mapping().await;
            gvks = types_to_check(spec, &mapping).0;
        }
        let mut resolver = SchemaResolver::new(self.client.clone());
        let mut kinds = Vec::with_capacity(gvks.len());
        for gvk in gvks {
            match resolver.resolve(&gvk).await {
                Ok(schema) => {
                    let ty =
                        rkcm_cel::schema_decl_type(&schema, true, &unique_type_name(&gvk.kind));
                    kinds.push((gvk, ty));
                }
                Err(error) => {
                    debug!(%gvk, %error, "validatingadmissionpolicy-status: no schema; not checked")
                }
            }
        }
        let params = match params_gvk(spec) {
            None => None,
            Some(gvk) => match resolver.resolve(&gvk).await {
                Ok(schema) => {
                    rkcm_cel::schema_decl_type(&schema, true, &unique_type_name(&gvk.kind))
                }
                Err(error) => {
                    debug!(%gvk, %error, "validatingadmissionpolicy-status: no schema for params");
                    None
                }
            },
        };
        Context { kinds, params }
    }

    pub(crate) async fn check(&self, policy: &ValidatingAdmissionPolicy) -> Vec<ExpressionWarning> {
        let default = ValidatingAdmissionPolicySpec::default();
        let spec = policy.spec.as_ref().unwrap_or(&default);
        self.context(spec).await.warnings(spec)
    }
}

#[cfg(test)]
impl Context {
    pub(crate) fn for_test(
        kinds: Vec<(Gvk, Option<rkcm_cel::Type>)>,
        params: Option<rkcm_cel::Type>,
    ) -> Self {
        Context { kinds, params }
    }
}
