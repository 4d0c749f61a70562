//! Create-only review kinds: TokenReview and the access reviews.

use super::patch::own_fields;
use super::{now, str_at, timestamp, Sim, API_AUDIENCE};
use crate::request::{ApiRequest, ApiResponse, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::validation::FieldCause;
use serde_json::{json, Value};

impl Sim {
    /// Create-only review kinds: authentication and authorization answers, from the same
    /// authorizer every request goes through.
    pub(super) fn review(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        body: Value,
        user: &User,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let kind = def.kind.as_str();
        let mut out = body;
        out["apiVersion"] = json!(def.api_version());
        out["kind"] = json!(def.kind);
        if !out["metadata"].is_object() {
            out["metadata"] = json!({});
        }
        match kind {
            // These two answer with an object of their own, not the one sent.
            "SelfSubjectReview" => {
                let mut info = json!({"username": user.name});
                if !user.uid.is_empty() {
                    info["uid"] = json!(user.uid);
                }
                if !user.groups.is_empty() {
                    info["groups"] = json!(user.groups);
                }
                if !user.extra.is_empty() {
                    info["extra"] = json!(user.extra);
                }
                return Ok(ApiResponse::json(
                    201,
                    json!({"kind": def.kind, "apiVersion": def.api_version(),
                           "metadata": {"creationTimestamp": timestamp(now())},
                           "status": {"userInfo": info}}),
                ));
            }
            "SelfSubjectRulesReview" => {
                let namespace = str_at(&out, &["spec", "namespace"]).unwrap_or("");
                if namespace.is_empty() {
                    return Err(ApiError::bad_request("no namespace on request"));
                }
                let (rules, errors) = self
                    .authorizer
                    .policy(&self.store)
                    .rules_for(user, namespace);
                return Ok(ApiResponse::json(
                    201,
                    json!({"kind": def.kind, "apiVersion": def.api_version(),
                           "metadata": {"creationTimestamp": null}, "spec": {},
                           "status": crate::rbac::rules_review_status(&rules, &errors)}),
                ));
            }
            "TokenReview" => {
                if str_at(&out, &["spec", "token"]).unwrap_or("").is_empty() {
                    return Err(ApiError::bad_request(
                        "token is required for TokenReview in authentication",
                    ));
                }
            }
            "LocalSubjectAccessReview" => {
                let ns = ns.unwrap_or("");
                let body_ns = str_at(&out, &["metadata", "namespace"]).unwrap_or("");
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                out["metadata"]["namespace"] = json!(ns);
                self.validate_access_review(def, &out, Some(ns))?;
            }
            _ => self.validate_access_review(def, &out, None)?,
        }
        let op = self.operation(def, req, None, None);
        own_fields(&op, None, &mut out)?;
        out["metadata"]["creationTimestamp"] = Value::Null;
        if kind == "TokenReview" {
            let token = str_at(&out, &["spec", "token"]).unwrap_or("").to_string();
            let requested: Option<Vec<String>> = out["spec"]["audiences"].as_array().map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            });
            let legacy = match self.user_for_token(&token) {
                Some(_) => crate::legacy_tokens::LegacyOutcome::NotLegacy,
                None => self.authenticate_legacy_token(&token, requested.as_deref()),
            };
            let known = match legacy {
                crate::legacy_tokens::LegacyOutcome::Authenticated(user) => Ok(Some(user)),
                crate::legacy_tokens::LegacyOutcome::Refused(why) => Err(why),
                crate::legacy_tokens::LegacyOutcome::NotLegacy => Ok(self.user_for_token(&token)),
            };
            out["status"] = match known {
                Err(why) => json!({"user": {}, "error": why}),
                Ok(None) => json!({"user": {}, "error": "invalid bearer token"}),
                Ok(Some(u)) => {
                    let audiences = match out["spec"]["audiences"].as_array() {
                        Some(a) if !a.is_empty() => json!(a),
                        _ => json!([API_AUDIENCE]),
                    };
                    let mut info = json!({"username": u.name});
                    if !u.uid.is_empty() {
                        info["uid"] = json!(u.uid);
                    }
                    if !u.groups.is_empty() {
                        info["groups"] = json!(u.groups);
                    }
                    json!({"authenticated": true, "user": info, "audiences": audiences})
                }
            };
            return Ok(ApiResponse::json(201, out));
        }
        let asker = (kind == "SelfSubjectAccessReview").then_some(user);
        let (subject, attrs) = crate::rbac::review_attributes(&out["spec"], asker);
        let decision = self.authorize(&subject, &attrs);
        let mut status = json!({"allowed": decision.allowed});
        if !decision.reason.is_empty() {
            status["reason"] = json!(decision.reason);
        }
        out["status"] = status;
        Ok(ApiResponse::json(201, out))
    }

    /// What kube-apiserver's validation of the access reviews refuses (422).
    fn validate_access_review(
        &self,
        def: &ResourceDef,
        review: &Value,
        local_namespace: Option<&str>,
    ) -> ApiResult<()> {
        let spec = &review["spec"];
        let invalid = |field: &str, value: String, why: &str| FieldCause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: {why}"),
            field: field.into(),
        };
        let resource = spec["resourceAttributes"].as_object();
        let non_resource = spec["nonResourceAttributes"].as_object();
        let mut causes = Vec::new();
        match (resource, non_resource) {
            (Some(_), Some(n)) => {
                let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or("");
                causes.push(invalid(
                    "spec.nonResourceAttributes",
                    format!(
                        "authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
                        crate::validation::q(s("path")),
                        crate::validation::q(s("verb"))
                    ),
                    "cannot be specified in combination with resourceAttributes",
                ));
            }
            (None, None) => causes.push(invalid(
                "spec.resourceAttributes",
                "\"null\"".into(),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )),
            _ => {}
        }
        let user = str_at(spec, &["user"]).unwrap_or("");
        let no_groups = spec["groups"].as_array().is_none_or(|g| g.is_empty());
        if def.kind != "SelfSubjectAccessReview" && user.is_empty() && no_groups {
            causes.push(invalid(
                "spec.user",
                "\"\"".into(),
                "at least one of user or group must be specified",
            ));
        }
        if let Some(ns) = local_namespace {
            if let Some(r) = resource {
                let asked = r.get("namespace").and_then(Value::as_str).unwrap_or("");
                if asked != ns {
                    causes.push(invalid(
                        "spec.resourceAttributes.namespace",
                        crate::validation::q(asked),
                        "must match metadata.namespace",
                    ));
                }
            }
            if non_resource.is_some() {
                causes.push(FieldCause {
                    reason: "FieldValueInvalid",
                    message: "Invalid value: \"\": disallowed on this kind of request".into(),
                    field: "spec.nonResourceAttributes".into(),
                });
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, ""),
                &causes,
            ))
        }
    }
}
