//! Subresources: scale, binding, eviction and token requests.

use super::patch::own_fields;
use super::{labels_of, meta_mut, now, str_at, timestamp, Sim, API_AUDIENCE};
use crate::managed_fields;
use crate::managed_fields::Operation;
use crate::request::{ApiRequest, ApiResponse, User};
use crate::resources::ResourceDef;
use crate::status::{success, ApiError, ApiResult, Subject};
use crate::store::ResKey;
use crate::validation::FieldCause;
use base64::Engine;
use chrono::{DateTime, Utc};
use http::Method;
use rand::Rng;
use rkcm_gocompat::LabelSelector;
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    pub(super) fn scale(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        let paths = scale_paths(def);
        let current = self.get_object(def, ns, name)?;
        let scale_of = |obj: &Value| -> Value {
            let mut md = json!({});
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "creationTimestamp",
            ] {
                if let Some(v) = obj["metadata"].get(k) {
                    md[k] = v.clone();
                }
            }
            let mut status =
                json!({"replicas": pointer(obj, &paths.1).cloned().unwrap_or(json!(0))});
            if let Some(sel) = paths.2.as_ref().and_then(|p| pointer(obj, p)) {
                status["selector"] = match sel {
                    Value::String(s) => json!(s),
                    other => json!(selector_string(other)),
                };
            }
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": md,
                   "spec": {"replicas": pointer(obj, &paths.0).cloned().unwrap_or(json!(0))},
                   "status": status})
        };
        match req.method {
            Method::GET => Ok(ApiResponse::json(200, scale_of(&current))),
            Method::PUT | Method::PATCH => {
                let desired = if req.method == Method::PUT {
                    self.decode_json(req)?
                } else {
                    let scale = scale_of(&current);
                    let ct = Self::media_type(req);
                    let patch: Value = serde_json::from_slice(&req.body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                    match ct {
                        "application/json-patch+json" => {
                            let ops: json_patch::Patch = serde_json::from_value(patch)
                                .map_err(|e| ApiError::bad_request(e.to_string()))?;
                            let mut doc = scale;
                            json_patch::patch(&mut doc, &ops)
                                .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
                            doc
                        }
                        _ => {
                            let mut doc = scale;
                            json_patch::merge(&mut doc, &patch);
                            doc
                        }
                    }
                };
                let replicas = desired["spec"]["replicas"].as_i64().ok_or_else(|| {
                    ApiError::bad_request("Scale spec.replicas must be an integer")
                })?;
                if replicas < 0 {
                    return Err(ApiError::invalid(
                        Subject::new("autoscaling", "Scale", name),
                        &[FieldCause {
                            reason: "FieldValueInvalid",
                            message: format!(
                                "Invalid value: {replicas}: must be greater than or equal to 0"
                            ),
                            field: "spec.replicas".into(),
                        }],
                    ));
                }
                let rv = desired["metadata"]["resourceVersion"].clone();
                let spec_path = paths.0.clone();
                let fm = self.operation(def, req, Some("scale"), None);
                let resp = self.update_object(
                    def,
                    ns,
                    name,
                    Some("scale"),
                    user,
                    req,
                    Some(&fm),
                    move |cur| {
                        let mut next = cur.clone();
                        if rv.is_string() {
                            next["metadata"]["resourceVersion"] = rv;
                        }
                        set_pointer(&mut next, &spec_path, json!(replicas));
                        Ok(next)
                    },
                )?;
                let obj = match &resp.body {
                    crate::request::Body::Json(v) => v.clone(),
                    _ => Value::Null,
                };
                Ok(ApiResponse::json(200, scale_of(&obj)))
            }
            _ => Err(ApiError::method_not_allowed(req.method.as_str())),
        }
    }

    pub(super) fn bind(
        &self,
        _def: &ResourceDef,
        ns: &str,
        name: Option<&str>,
        binding: Value,
    ) -> ApiResult<ApiResponse> {
        let pod_name = name
            .map(String::from)
            .or_else(|| str_at(&binding, &["metadata", "name"]).map(String::from))
            .unwrap_or_default();
        let node = str_at(&binding, &["target", "name"])
            .unwrap_or("")
            .to_string();
        let subject = Subject::new("", "pods/binding", &pod_name);
        if node.is_empty() {
            return Err(ApiError::invalid(
                Subject::new("", "Binding", &pod_name),
                &[FieldCause {
                    reason: "FieldValueRequired",
                    message: "Required value".into(),
                    field: "target.name".into(),
                }],
            ));
        }
        let pods = ResKey::new("", "pods");
        let mut t = self.store.lock();
        let pod = t
            .get(&pods, ns, &pod_name)
            .ok_or_else(|| ApiError::not_found(Subject::new("", "pods", &pod_name)))?;
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            return Err(ApiError::conflict(
                subject,
                &format!("pod {pod_name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if let Some(existing) = str_at(&pod, &["spec", "nodeName"]).filter(|s| !s.is_empty()) {
            return Err(ApiError::conflict(
                subject,
                &format!("pod {pod_name} is already assigned to node \"{existing}\""),
            ));
        }
        let mut next = (*pod).clone();
        next["spec"]["nodeName"] = json!(node);
        if let Some(ann) = binding["metadata"]["annotations"].as_object() {
            let m = meta_mut(&mut next);
            if !m.get("annotations").is_some_and(Value::is_object) {
                m.insert("annotations".into(), json!({}));
            }
            for (k, v) in ann {
                m["annotations"][k] = v.clone();
            }
        }
        if !next["status"].is_object() {
            next["status"] = json!({});
        }
        let mut conds: Vec<Value> = next["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conds.retain(|c| c["type"] != "PodScheduled");
        conds.push(
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                          "lastTransitionTime": timestamp(now())}),
        );
        next["status"]["conditions"] = json!(conds);
        t.put(&pods, next);
        Ok(ApiResponse::json(201, success(Some(201), None)))
    }

    pub(super) fn evict(
        &self,
        ns: &str,
        name: &str,
        eviction: Value,
        query_dry_run: bool,
    ) -> ApiResult<ApiResponse> {
        if eviction["metadata"]["name"].as_str().unwrap_or("") != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        // The request's dryRun goes to the eviction's DeleteOptions when they have none.
        let mut opts = if eviction["deleteOptions"].is_object() {
            eviction["deleteOptions"].clone()
        } else {
            json!({})
        };
        let body_dry_run = opts["dryRun"].as_array().is_some_and(|a| !a.is_empty());
        if query_dry_run && !body_dry_run {
            opts["dryRun"] = json!(["All"]);
        }
        let dry = crate::query_options::delete_is_dry_run(&opts);
        let pods = ResKey::new("", "pods");
        let pdbs = ResKey::new("policy", "poddisruptionbudgets");
        let mut t = self.store.lock();
        let pod = t
            .get(&pods, ns, name)
            .ok_or_else(|| ApiError::not_found(Subject::new("", "pods", name)))?;
        let labels = labels_of(&pod);
        let matching: Vec<Arc<Value>> = t
            .range(&pdbs, Some(ns), None)
            .filter(|(_, p)| {
                LabelSelector::from_label_selector_json(&p["spec"]["selector"])
                    .map(|s| !s.is_empty() && s.matches(&labels))
                    .unwrap_or(false)
            })
            .map(|(_, p)| p.clone())
            .collect();
        let terminal = matches!(
            str_at(&pod, &["status", "phase"]),
            Some("Succeeded" | "Failed")
        );
        let pending = str_at(&pod, &["status", "phase"]) == Some("Pending");
        if matching.len() > 1 {
            return Err(ApiError::internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."));
        }
        if let (Some(pdb), false, false) = (matching.first(), terminal, pending) {
            let pdb_name = str_at(pdb, &["metadata", "name"]).unwrap_or("").to_string();
            let gen = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
            let observed = pdb["status"]["observedGeneration"].as_i64().unwrap_or(0);
            if observed < gen {
                return Err(ApiError::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
                    .with_details(json!({"causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {pdb_name} is still being processed by the server.")}]})));
            }
            let allowed = pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed <= 0 {
                let healthy = pdb["status"]["currentHealthy"].as_i64().unwrap_or(0);
                let desired = pdb["status"]["desiredHealthy"].as_i64().unwrap_or(0);
                let mut e = ApiError::new(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                );
                e.details = Some(Box::new(json!({"causes": [{"reason": "DisruptionBudget",
                    "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently")}]})));
                return Err(e);
            }
            let mut next = (**pdb).clone();
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !next["status"]["disruptedPods"].is_object() {
                next["status"]["disruptedPods"] = json!({});
            }
            next["status"]["disruptedPods"][name] = json!(timestamp(now()));
            if !dry {
                t.put(&pdbs, next);
            }
        }
        let def = self.def("", "v1", "pods");
        self.delete_locked(&mut t, &def, &pod, &opts, dry)?;
        Ok(ApiResponse::json(201, success(Some(201), None)))
    }

    /// TokenRequest (`serviceaccounts/NAME/token`): a token for the ServiceAccount, shaped
    /// as the service-account issuer's JWTs are, that authenticates as it from now on.
    pub(super) fn token_request(
        &self,
        ns: &str,
        sa: &str,
        body: Value,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        let sa_obj = self.get_object(&self.def("", "v1", "serviceaccounts"), Some(ns), sa)?;
        let ttl = body["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
        crate::query_options::check_token_expiration(ttl)?;
        let audiences: Vec<Value> = body["spec"]["audiences"]
            .as_array()
            .filter(|a| !a.is_empty())
            .cloned()
            .unwrap_or_else(|| vec![json!(API_AUDIENCE)]);
        let uid = sa_obj["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let issued = now();
        let token = self.service_account_jwt(ns, sa, &uid, &audiences, issued, ttl);
        self.register_token(
            &token,
            User {
                name: format!("system:serviceaccount:{ns}:{sa}"),
                uid,
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".into(),
                ],
                ..Default::default()
            },
        );
        // The TokenRequest's own fields, as its writer sent them, are what it owns.
        let mut sent = body.clone();
        if !sent["metadata"].is_object() {
            sent["metadata"] = json!({});
        }
        let op = Operation {
            manager: managed_fields::manager_name(req.param("fieldManager"), &req.user_agent),
            subresource: "token".into(),
            api_version: "authentication.k8s.io/v1".into(),
            group: "authentication.k8s.io".into(),
            kind: "TokenRequest".into(),
            has_status: false,
            now: timestamp(issued),
            apply: None,
        };
        own_fields(&op, None, &mut sent)?;
        let mut metadata =
            json!({"name": sa, "namespace": ns, "creationTimestamp": timestamp(issued)});
        if let Some(m) = sent["metadata"].get("managedFields") {
            metadata["managedFields"] = m.clone();
        }
        let out = json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": metadata,
            "spec": {"audiences": audiences, "expirationSeconds": ttl,
                     "boundObjectRef": body["spec"]["boundObjectRef"].clone()},
            "status": {"token": token, "expirationTimestamp": timestamp(issued + chrono::Duration::seconds(ttl))}});
        Ok(ApiResponse::json(201, out))
    }

    /// A token with the service-account issuer's header and claims (the signature is random:
    /// kube-sim recognises its tokens by registration, not by signature).
    fn service_account_jwt(
        &self,
        ns: &str,
        sa: &str,
        uid: &str,
        audiences: &[Value],
        issued: DateTime<Utc>,
        ttl: i64,
    ) -> String {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let header = json!({"alg": "RS256", "kid": self.token_key_id});
        let iat = issued.timestamp();
        let claims = json!({"aud": audiences, "exp": iat + ttl, "iat": iat, "iss": API_AUDIENCE,
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": uid}},
            "nbf": iat, "sub": format!("system:serviceaccount:{ns}:{sa}")});
        let mut signature = [0u8; 256];
        rand::rng().fill(&mut signature[..]);
        format!(
            "{}.{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes()),
            b64(&signature)
        )
    }
}

/// (spec replicas, status replicas, label selector) JSON paths of a scalable resource.
pub(super) fn scale_paths(def: &ResourceDef) -> (String, String, Option<String>) {
    if let Some(s) = def.custom.as_ref().and_then(|c| c.scale.clone()) {
        return (s.spec_replicas, s.status_replicas, s.label_selector);
    }
    // ReplicationController's selector is a plain map; selector_string handles both shapes.
    (
        ".spec.replicas".into(),
        ".status.replicas".into(),
        Some(".spec.selector".into()),
    )
}

pub(super) fn pointer<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    let mut cur = v;
    for p in dotted.trim_start_matches('.').split('.') {
        cur = cur.get(p)?;
    }
    Some(cur)
}

fn set_pointer(v: &mut Value, dotted: &str, val: Value) {
    let parts: Vec<&str> = dotted.trim_start_matches('.').split('.').collect();
    let mut cur = v;
    for p in &parts[..parts.len() - 1] {
        if !cur.get(*p).is_some_and(Value::is_object) {
            cur[*p] = json!({});
        }
        cur = &mut cur[*p];
    }
    cur[parts[parts.len() - 1]] = val;
}

/// A selector (LabelSelector JSON or a plain map, as ReplicationController has) as a string.
pub(super) fn selector_string(sel: &Value) -> String {
    let mut parts = Vec::new();
    let labels = sel.get("matchLabels").unwrap_or(sel);
    if let Some(m) = labels.as_object() {
        for (k, v) in m {
            if let Some(v) = v.as_str() {
                parts.push(format!("{k}={v}"));
            }
        }
    }
    if let Some(exprs) = sel["matchExpressions"].as_array() {
        for e in exprs {
            let key = e["key"].as_str().unwrap_or("");
            let vals: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or("") {
                "In" => parts.push(format!("{key} in ({})", vals.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}
