//! Deleting: DeleteOptions, graceful deletion, finalizers and deletecollection.

use super::read::list_item;
use super::{finalizers, meta_mut, now, set_finalizers, str_at, timestamp, Sim};
use crate::request::{ApiRequest, ApiResponse};
use crate::resources::ResourceDef;
use crate::status::{success, ApiError, ApiResult, Subject};
use crate::store::{obj_key, Txn};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    /// DeleteOptions from the body or the query, validated ([`crate::query_options`]).
    fn delete_options(&self, req: &ApiRequest) -> ApiResult<Value> {
        crate::query_options::delete_options(req)
    }

    pub(super) fn delete(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("delete") {
            return Err(ApiError::method_not_allowed("delete"));
        }
        let opts = self.delete_options(req)?;
        let dry = crate::query_options::delete_is_dry_run(&opts);
        let policy_admission = self.policy_admission();
        let mut t = self.store.lock();
        let ns_s = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&def.key(), ns_s, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
        if let Some(vap) = &policy_admission {
            let user = req.user.clone().unwrap_or_default();
            vap.admit_delete(&t, &self.registry, def, &current, &opts, &user)?;
        }
        let (code, body) = self.delete_locked(&mut t, def, &current, &opts, dry)?;
        Ok(ApiResponse::json(code, body))
    }

    /// Deletes an object with default options, bypassing HTTP: for test fixtures while
    /// serving is paused.
    pub fn delete_object(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<Value> {
        let mut t = self.store.lock();
        let ns_s = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&def.key(), ns_s, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
        let (_, body) = self.delete_locked(&mut t, def, &current, &json!({}), false)?;
        Ok(body)
    }

    /// Graceful deletion, propagation finalizers and removal, as the generic registry does.
    pub(super) fn delete_locked(
        &self,
        t: &mut Txn,
        def: &ResourceDef,
        current: &Value,
        opts: &Value,
        dry: bool,
    ) -> ApiResult<(u16, Value)> {
        let (ns, name) = obj_key(current);
        check_deletable(def, current, opts, &name)?;
        let Some(grace) = deletion_grace(def, current, opts) else {
            // An earlier, shorter grace period stands.
            return Ok((200, self.present(def, current)));
        };
        let fins = propagation_finalizers(current, opts);
        let spec_fins = def.kind == "Namespace"
            && current["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        if fins.is_empty() && !spec_fins && grace == 0 {
            if dry {
                return Ok((200, self.present(def, current)));
            }
            return Ok((200, self.remove_now(t, def, current, &ns, &name)));
        }
        // The object stays, marked for deletion.
        let already_deleting = !current["metadata"]["deletionTimestamp"].is_null();
        let next = marked_for_deletion(def, current, fins.clone(), grace);
        if already_deleting && fins == finalizers(current) && next == *current {
            return Ok((200, self.present(def, current)));
        }
        if dry {
            return Ok((200, self.present(def, &next)));
        }
        let stored = t.put(&def.key(), next);
        Ok((200, self.present(def, &stored)))
    }

    /// Removes the object now; the answer is the object (for the kinds whose storage returns
    /// it, and custom resources) or a Status naming it.
    fn remove_now(
        &self,
        t: &mut Txn,
        def: &ResourceDef,
        current: &Value,
        ns: &str,
        name: &str,
    ) -> Value {
        let gone = self.remove_locked(t, def, ns, name);
        let returns_object = def.group.is_empty()
            && matches!(def.kind.as_str(), "Pod" | "Service" | "Namespace")
            || def.custom.is_some();
        if returns_object {
            let mut shown = self.present(def, &gone);
            let m = meta_mut(&mut shown);
            if m.get("deletionTimestamp").is_none_or(Value::is_null) {
                m.insert("deletionTimestamp".into(), json!(timestamp(now())));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            return shown;
        }
        let mut details =
            json!({"name": name, "kind": def.resource, "uid": current["metadata"]["uid"]});
        if !def.group.is_empty() {
            details["group"] = json!(def.group);
        }
        success(None, Some(details))
    }

    pub(super) fn delete_collection(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("deletecollection") {
            return Err(ApiError::method_not_allowed("deletecollection"));
        }
        let opts = self.list_options(def, req)?;
        let del = self.delete_options(req)?;
        let dry = crate::query_options::delete_is_dry_run(&del);
        let policy_admission = self.policy_admission();
        let user = req.user.clone().unwrap_or_default();
        let mut refused = None;
        let mut t = self.store.lock();
        let targets: Vec<Arc<Value>> = t
            .range(&def.key(), ns, None)
            .filter(|(_, o)| self.selected(def, &opts, o))
            .map(|(_, o)| o.clone())
            .collect();
        let mut items = Vec::new();
        for obj in targets {
            // Deletion of each is independent, as upstream's DeleteCollection does it; the
            // first refusal by a policy is the request's answer.
            if let Some(vap) = &policy_admission {
                if let Err(e) = vap.admit_delete(&t, &self.registry, def, &obj, &del, &user) {
                    refused.get_or_insert(e);
                    continue;
                }
            }
            if self.delete_locked(&mut t, def, &obj, &del, dry).is_ok() {
                items.push(list_item(&obj));
            }
        }
        if let Some(e) = refused {
            return Err(e);
        }
        let rv = t.rv().to_string();
        Ok(ApiResponse::json(
            200,
            json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(),
                   "metadata": {"resourceVersion": rv}, "items": items}),
        ))
    }
}

/// The namespaces that may not be deleted, and DeleteOptions' preconditions against the
/// stored object.
fn check_deletable(def: &ResourceDef, current: &Value, opts: &Value, name: &str) -> ApiResult<()> {
    if def.kind == "Namespace"
        && def.group.is_empty()
        && matches!(name, "default" | "kube-system" | "kube-public")
    {
        return Err(ApiError::forbidden(
            Subject::new("", "namespaces", name),
            "this namespace may not be deleted",
        ));
    }
    let pre = &opts["preconditions"];
    if let Some(uid) = pre["uid"].as_str() {
        let actual = current["metadata"]["uid"].as_str().unwrap_or("");
        if uid != actual {
            return Err(ApiError::conflict(
                Subject::new(&def.group, &def.kind, name),
                &format!("the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"),
            ));
        }
    }
    if let Some(rv) = pre["resourceVersion"].as_str() {
        let actual = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("");
        if rv != actual {
            return Err(ApiError::conflict(
                Subject::new(&def.group, &def.kind, name),
                &format!("the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"),
            ));
        }
    }
    Ok(())
}

/// The grace period of this deletion: a pod's from the options or its spec (none for a pod
/// never bound or already finished), zero for every other kind. `None` when the pod is
/// already being deleted with a grace period no longer than the one asked for.
fn deletion_grace(def: &ResourceDef, current: &Value, opts: &Value) -> Option<i64> {
    if !(def.kind == "Pod" && def.group.is_empty()) {
        return Some(0);
    }
    let mut grace = opts["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0);
    let unbound = str_at(current, &["spec", "nodeName"])
        .unwrap_or("")
        .is_empty();
    let finished = matches!(
        str_at(current, &["status", "phase"]),
        Some("Succeeded" | "Failed")
    );
    if unbound || finished {
        grace = 0;
    }
    if !current["metadata"]["deletionTimestamp"].is_null() {
        let existing = current["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0);
        if grace >= existing && grace > 0 {
            return None;
        }
    }
    Some(grace)
}

/// The object's finalizers after the propagation policy: Orphan and Foreground hold the
/// object with a finalizer for the garbage collector, Background drops both.
fn propagation_finalizers(current: &Value, opts: &Value) -> Vec<String> {
    let policy = match opts["propagationPolicy"].as_str() {
        Some(p) => p,
        None if opts["orphanDependents"] == json!(true) => "Orphan",
        None if opts["orphanDependents"] == json!(false) => "Background",
        None => "",
    };
    let mut fins = finalizers(current);
    match policy {
        "Orphan" => {
            fins.retain(|f| f != "foregroundDeletion");
            if !fins.iter().any(|f| f == "orphan") {
                fins.push("orphan".into());
            }
        }
        "Foreground" => {
            fins.retain(|f| f != "orphan");
            if !fins.iter().any(|f| f == "foregroundDeletion") {
                fins.push("foregroundDeletion".into());
            }
        }
        "Background" => fins.retain(|f| f != "orphan" && f != "foregroundDeletion"),
        _ => {}
    }
    fins
}

/// The object as a deletion that waits leaves it: its finalizers, its deletion timestamp
/// and grace period (a later request only moves them earlier, as `BeforeDelete` does), a
/// namespace's Terminating phase.
fn marked_for_deletion(def: &ResourceDef, current: &Value, fins: Vec<String>, grace: i64) -> Value {
    let mut next = current.clone();
    set_finalizers(&mut next, fins);
    let m = meta_mut(&mut next);
    if current["metadata"]["deletionTimestamp"].is_null() {
        let at = now() + chrono::Duration::seconds(grace);
        m.insert("deletionTimestamp".into(), json!(timestamp(at)));
        if def.kind != "Namespace" {
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if let Some(g) = m.get("generation").and_then(Value::as_i64) {
            if g > 0 {
                m.insert("generation".into(), json!(g + 1));
            }
        }
    } else {
        // Already being deleted: only a shorter grace period (zero included) moves the
        // deletion earlier, counted from when it was asked for.
        let existing = current["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0);
        let asked_at = current["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc) - chrono::Duration::seconds(existing));
        if let (true, Some(asked_at)) = (grace < existing, asked_at) {
            let at = asked_at + chrono::Duration::seconds(grace);
            m.insert("deletionTimestamp".into(), json!(timestamp(at)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
    }
    if def.kind == "Namespace" && def.group.is_empty() {
        if !next["status"].is_object() {
            next["status"] = json!({});
        }
        next["status"]["phase"] = json!("Terminating");
    }
    next
}
