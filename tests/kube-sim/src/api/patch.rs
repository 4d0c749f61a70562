//! Patching: JSON, merge and strategic-merge patches, server-side apply, and field ownership.

use super::{meta_mut, now, timestamp, with_warnings, Sim};
use crate::managed_fields::Operation;
use crate::request::{ApiRequest, ApiResponse, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::{managed_fields, strategic_merge};
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    pub(super) fn patch(
        self: &Arc<Self>,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("patch") {
            return Err(ApiError::method_not_allowed("patch"));
        }
        let ct = req
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if ct == "application/apply-patch+yaml" {
            return self.server_side_apply(def, ns, name, sub, req, user);
        }
        let current = self.get_object(def, ns, name)?;
        let patched = self.apply_patch(def, &current, req)?;
        let (patched, warnings) = self.check_fields(def, self.with_kind(def, patched), req)?;
        let fm = self.operation(def, req, sub, None);
        let out = self.update_object(def, ns, name, sub, user, req, Some(&fm), |cur| {
            // The patch was computed on `current`; if it changed meanwhile, recompute on the
            // new state (kube-apiserver retries a patch on conflict the same way).
            if cur["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
                Ok(patched)
            } else {
                let again = self.apply_patch(def, cur, req)?;
                Ok(self.with_kind(def, again))
            }
        })?;
        Ok(with_warnings(out, warnings))
    }

    fn with_kind(&self, def: &ResourceDef, mut v: Value) -> Value {
        if v.is_object() {
            v["apiVersion"] = json!(def.api_version());
            v["kind"] = json!(def.kind);
        }
        v
    }

    /// Apply the request's patch (by content type) to `current` as served.
    pub fn apply_patch(
        &self,
        def: &ResourceDef,
        current: &Value,
        req: &ApiRequest,
    ) -> ApiResult<Value> {
        let ct = Self::media_type(req);
        let served = self.present(def, current);
        let patch: Value = serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        match ct {
            "application/merge-patch+json" => {
                let mut doc = served;
                json_patch::merge(&mut doc, &patch);
                Ok(doc)
            }
            "application/json-patch+json" => {
                let ops: json_patch::Patch = serde_json::from_value(patch).map_err(|e| {
                    ApiError::bad_request(format!(
                        "the server rejected our request due to an error in our request: {e}"
                    ))
                })?;
                let mut doc = served;
                json_patch::patch(&mut doc, &ops).map_err(|e| {
                    if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) {
                        // Upstream says no more than this for a failed `test` operation.
                        ApiError::new(
                            422,
                            "Invalid",
                            "the server rejected our request due to an error in our request",
                        )
                        .with_details(json!({}))
                    } else {
                        ApiError::new(422, "Invalid", e.to_string())
                    }
                })?;
                Ok(doc)
            }
            "application/strategic-merge-patch+json" => {
                if def.custom.is_some() || !strategic_merge::merge_keys_known(&def.kind) {
                    return Err(ApiError::unsupported_media(ct));
                }
                if !patch.is_object() {
                    return Err(ApiError::bad_request(
                        "error decoding patch: expected a JSON object",
                    ));
                }
                strategic_merge::apply(&def.kind, &served, &patch).map_err(patch_error)
            }
            other => Err(ApiError::unsupported_media(other)),
        }
    }

    /// Server-side apply: create when absent, else merge the applied configuration. The
    /// applier owns exactly its configuration's fields: a field another manager owns and the
    /// configuration changes is a conflict unless `force`; a field it owned before and no
    /// longer sets, which nobody else owns, is removed.
    fn server_side_apply(
        self: &Arc<Self>,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        let text =
            std::str::from_utf8(&req.body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let y: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        let applied = serde_json::to_value(y).map_err(|e| ApiError::bad_request(e.to_string()))?;
        if !applied.is_object() {
            return Err(ApiError::bad_request("apply patch must be an object"));
        }
        let (applied, warnings) = self.check_fields(def, applied, req)?;
        let fm = self.operation(def, req, sub, Some(&applied));
        let existing = self.store.lock().get(
            &def.key(),
            if def.namespaced { ns.unwrap_or("") } else { "" },
            name,
        );
        match existing {
            None if sub.is_none() => {
                let mut obj = applied;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let created = self.create_object(
                    def,
                    ns,
                    obj,
                    user,
                    req.param("dryRun").is_some(),
                    Some(&fm),
                )?;
                Ok(with_warnings(
                    ApiResponse::json(201, self.present(def, &created)),
                    warnings,
                ))
            }
            None => Err(ApiError::not_found(Subject::new(
                &def.group,
                &def.resource,
                name,
            ))),
            Some(_) => {
                let out = self.update_object(def, ns, name, sub, user, req, Some(&fm), |cur| {
                    let mut applied = applied.clone();
                    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                        m.remove("managedFields");
                    }
                    let served = self.present(def, cur);
                    let mut merged = if def.custom.is_none()
                        && strategic_merge::merge_keys_known(&def.kind)
                    {
                        strategic_merge::apply(&def.kind, &served, &applied).map_err(patch_error)?
                    } else {
                        let mut doc = served;
                        json_patch::merge(&mut doc, &applied);
                        doc
                    };
                    fm.prune_unapplied(cur, &mut merged);
                    Ok(merged)
                })?;
                Ok(with_warnings(out, warnings))
            }
        }
    }

    /// The API server's own writes (its bootstrap objects), as manager `kube-apiserver`.
    pub(crate) fn system_operation(def: &ResourceDef) -> Operation {
        Self::operation_by(def, "kube-apiserver".into(), None)
    }

    pub(crate) fn operation_by(def: &ResourceDef, manager: String, sub: Option<&str>) -> Operation {
        Operation {
            manager,
            subresource: sub.unwrap_or("").to_string(),
            api_version: def.api_version(),
            group: def.group.clone(),
            kind: def.kind.clone(),
            has_status: def.has_status(),
            now: timestamp(now()),
            apply: None,
        }
    }

    /// What a write is for field ownership: who writes, through which subresource, and for a
    /// server-side apply the configuration's fields.
    pub(super) fn operation(
        &self,
        def: &ResourceDef,
        req: &ApiRequest,
        sub: Option<&str>,
        applied: Option<&Value>,
    ) -> Operation {
        let manager = managed_fields::manager_name(req.param("fieldManager"), &req.user_agent);
        let mut op = Self::operation_by(def, manager, sub);
        if let Some(config) = applied {
            let set = managed_fields::to_field_set(config, op.ty());
            op.apply = Some((set, req.flag("force")));
        }
        op
    }
}

/// Works out the `managedFields` of `new` after `op` turned `old` into it, in place; an apply
/// conflict is kube-apiserver's 409.
pub(super) fn own_fields(op: &Operation, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
    op.run(old, new).map_err(|c| {
        let causes: Vec<Value> = c
            .0
            .iter()
            .map(|(m, p)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p})
            })
            .collect();
        ApiError::new(409, "Conflict", c.message()).with_details(json!({"causes": causes}))
    })
}

/// Puts computed `managedFields` on an object (none: the key goes).
pub(super) fn set_managed_fields(obj: &mut Value, managed: Value) {
    let m = meta_mut(obj);
    if managed.is_null() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), managed);
    }
}

/// A strategic-merge failure with the code upstream gives it (400 malformed, 422, else 500).
fn patch_error(e: strategic_merge::PatchError) -> ApiError {
    match e.status_code() {
        400 => ApiError::bad_request(e.0),
        422 => ApiError::new(422, "Invalid", e.0),
        code => ApiError::new(code, "", e.0),
    }
}
