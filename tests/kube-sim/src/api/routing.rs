//! Request routing: one resource request to its verb's handler, and body decoding with
//! field validation.

use super::{json_type, truncate, with_warnings, FieldValidation, Sim};
use crate::request::{ApiRequest, ApiResponse, Representation, ResourcePath, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::typed;
use http::Method;
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    /// Answer a request under /api or /apis that names a resource.
    pub fn handle_resource(
        self: &Arc<Self>,
        req: &ApiRequest,
        p: ResourcePath,
    ) -> ApiResult<ApiResponse> {
        let user = req.user.clone().ok_or_else(ApiError::unauthorized)?;
        let def = self.resolve(&p)?;
        let ns = p.namespace.as_deref();
        let wants = req.wants();
        if wants == Representation::Unsupported {
            return Err(ApiError::new(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/yaml",
            ));
        }
        crate::query_options::check_request(req)?;
        let m = &req.method;
        match (p.name.as_deref(), p.subresource.as_deref()) {
            (None, None) if *m == Method::GET => {
                if req.flag("watch") {
                    crate::watch::start(self.clone(), def, ns, req)
                } else {
                    self.list(&def, ns, req)
                }
            }
            (None, None) if *m == Method::POST => self.post_collection(&def, ns, req, &user),
            (None, None) if *m == Method::DELETE => self.delete_collection(&def, ns, req),
            (Some(name), None) if *m == Method::GET => {
                let obj = self.get_object(&def, ns, name)?;
                Ok(ApiResponse::json(
                    200,
                    self.represent_one(&def, &obj, wants),
                ))
            }
            (Some(name), sub @ (None | Some("status"))) if *m == Method::PUT => {
                let body = self.decode_body(&def, req)?;
                let (obj, warnings) = self.check_fields(&def, body, req)?;
                let fm = self.operation(&def, req, sub, None);
                let out =
                    self.update_object(&def, ns, name, sub, &user, req, Some(&fm), |_| Ok(obj))?;
                Ok(with_warnings(out, warnings))
            }
            (Some(name), sub @ (None | Some("status"))) if *m == Method::PATCH => {
                self.patch(&def, ns, name, sub, req, &user)
            }
            (Some(name), None) if *m == Method::DELETE => self.delete(&def, ns, name, req),
            (Some(name), Some("status" | "approval")) if *m == Method::GET => {
                let obj = self.get_object(&def, ns, name)?;
                Ok(ApiResponse::json(200, self.present(&def, &obj)))
            }
            (Some(name), Some("scale")) => self.scale(&def, ns, name, req, &user),
            (Some(name), Some("binding")) if *m == Method::POST => {
                let body = self.decode_json(req)?;
                self.bind(&def, ns.unwrap_or_default(), Some(name), body)
            }
            (Some(name), Some("eviction")) if *m == Method::POST => {
                let body = self.decode_json(req)?;
                let dry_run = req.param("dryRun").is_some();
                self.evict(ns.unwrap_or_default(), name, body, dry_run)
            }
            (Some(name), Some("finalize")) if *m == Method::PUT => {
                self.finalize(&def, name, req, &user)
            }
            (Some(name), Some("approval")) if *m == Method::PUT || *m == Method::PATCH => {
                self.approve(&def, ns, name, req, &user)
            }
            (Some(name), Some("token")) if *m == Method::POST => {
                let body = self.decode_json(req)?;
                self.token_request(ns.unwrap_or_default(), name, body, req)
            }
            _ => Err(ApiError::method_not_allowed(m.as_str())),
        }
    }

    /// The resource a path names, if the path addresses it the way it is scoped and names
    /// one of its subresources.
    fn resolve(&self, p: &ResourcePath) -> ApiResult<Arc<ResourceDef>> {
        let def = self
            .registry
            .lookup(&p.group, &p.version, &p.resource)
            .ok_or_else(ApiError::no_route)?;
        if def.namespaced != p.namespace.is_some() && !(def.namespaced && p.name.is_none()) {
            // A namespaced resource addressed without a namespace (or the reverse) with a name.
            return Err(ApiError::no_route());
        }
        if let Some(sub) = &p.subresource {
            if def.subresource(sub).is_none() {
                return Err(ApiError::no_route());
            }
        }
        Ok(def)
    }

    /// POST to a collection: a binding, a review, or a create.
    fn post_collection(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        let body = self.decode_body(def, req)?;
        if def.resource == "bindings" {
            return self.bind(def, ns.unwrap_or_default(), None, body);
        }
        if !def.is_stored() {
            return self.review(def, ns, body, user, req);
        }
        let (obj, warnings) = self.check_fields(def, body, req)?;
        let dry = req.param("dryRun").is_some();
        let fm = self.operation(def, req, None, None);
        let created = self.create_object(def, ns, obj, user, dry, Some(&fm))?;
        Ok(with_warnings(
            ApiResponse::json(201, self.present(def, &created)),
            warnings,
        ))
    }

    /// PUT namespaces/{name}/finalize: only the spec's finalizers change.
    fn finalize(
        &self,
        def: &Arc<ResourceDef>,
        name: &str,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        let body = self.decode_json(req)?;
        let fins = body["spec"]["finalizers"].clone();
        let change = move |cur: &Value| {
            let mut next = cur.clone();
            let empty = fins.as_array().is_none_or(|a| a.is_empty());
            if empty {
                if let Some(spec) = next["spec"].as_object_mut() {
                    spec.remove("finalizers");
                }
            } else {
                next["spec"]["finalizers"] = fins;
            }
            Ok(next)
        };
        self.update_object(def, None, name, Some("finalize"), user, req, None, change)
    }

    /// PUT or PATCH of a CertificateSigningRequest's approval: only its conditions change.
    fn approve(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        req: &ApiRequest,
        user: &User,
    ) -> ApiResult<ApiResponse> {
        let body = if req.method == Method::PUT {
            self.decode_json(req)?
        } else {
            let cur = self.get_object(def, ns, name)?;
            self.apply_patch(def, &cur, req)?
        };
        let conds = body["status"]["conditions"].clone();
        let fm = self.operation(def, req, Some("approval"), None);
        let change = move |cur: &Value| {
            let mut next = cur.clone();
            if !next["status"].is_object() {
                next["status"] = json!({});
            }
            next["status"]["conditions"] = conds;
            Ok(next)
        };
        self.update_object(
            def,
            None,
            name,
            Some("approval"),
            user,
            req,
            Some(&fm),
            change,
        )
    }

    // ----- decoding -----

    /// The request body's media type, without parameters.
    pub(super) fn media_type(req: &ApiRequest) -> &str {
        req.content_type.split(';').next().unwrap_or("").trim()
    }

    pub(super) fn decode_json(&self, req: &ApiRequest) -> ApiResult<Value> {
        let ct = Self::media_type(req);
        if ct.contains("yaml") {
            let text =
                std::str::from_utf8(&req.body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let y: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
                ApiError::bad_request(format!("error converting YAML to JSON: {e}"))
            })?;
            return serde_json::to_value(y).map_err(|e| ApiError::bad_request(e.to_string()));
        }
        if !ct.is_empty() && ct != "application/json" && ct != "*/*" {
            return Err(ApiError::unsupported_media(ct));
        }
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("json parse error: {e}")))
    }

    /// Decode a create/update body and check it names this kind and namespace.
    fn decode_body(&self, def: &ResourceDef, req: &ApiRequest) -> ApiResult<Value> {
        let unrecognized = |error: String| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {error} ({})",
                def.kind,
                crate::go_json::summarize(&req.body)
            ))
        };
        if !Self::media_type(req).contains("yaml") {
            // Go's words for a malformed document, as kube-apiserver passes them on.
            if let Some(error) = crate::go_json::syntax_error(&req.body) {
                return Err(unrecognized(error));
            }
        }
        let body = self.decode_json(req).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; {}",
                def.kind, e.message
            ))
        })?;
        if !body.is_object() {
            return Err(unrecognized(format!(
                "json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
                json_type(&body)
            )));
        }
        let kind = body["kind"].as_str().unwrap_or("");
        let api_version = body["apiVersion"].as_str().unwrap_or("");
        let expected_kind = self.body_kind(def);
        if kind.is_empty() || api_version.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Object '{}' is missing in '{}'",
                if kind.is_empty() {
                    "Kind"
                } else {
                    "apiVersion"
                },
                truncate(&body.to_string(), 200)
            )));
        }
        if kind != expected_kind {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{}\" cannot be handled as a {expected_kind}: converting ({}.{kind}) to ({}.{expected_kind}): unknown conversion",
                api_version.rsplit('/').next().unwrap_or(api_version),
                api_version.rsplit('/').next().unwrap_or(api_version),
                if def.group.is_empty() { "core" } else { def.group.split('.').next().unwrap_or("") },
            )));
        }
        Ok(body)
    }

    fn body_kind(&self, def: &ResourceDef) -> String {
        match def.resource.as_str() {
            "bindings" => "Binding".into(),
            _ => def.kind.clone(),
        }
    }

    /// Typed decoding and field validation (Strict: unknown fields are an error; Warn: a header).
    pub(super) fn check_fields(
        &self,
        def: &ResourceDef,
        body: Value,
        req: &ApiRequest,
    ) -> ApiResult<(Value, Vec<String>)> {
        let mode = match req.param("fieldValidation") {
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            // Anything else was refused with the request's options.
            _ => FieldValidation::Warn,
        };
        let body_version = body["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit('/').next())
            .unwrap_or(&def.version)
            .to_string();
        match typed::decode(&def.group, &body_version, &def.kind, &body) {
            None => Ok((body, Vec::new())),
            Some(Err(e)) => Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {}",
                def.kind, def.version, def.kind, e
            ))),
            Some(Ok(mut d)) => {
                let (group, kind) = (&def.group, &def.kind);
                crate::quantities::canonicalize(group, &body_version, kind, &mut d.object)
                    .map_err(|e| {
                        ApiError::bad_request(format!(
                            "{kind} in version \"{}\" cannot be handled as a {kind}: {e}",
                            def.version
                        ))
                    })?;
                if d.unknown_fields.is_empty() || mode == FieldValidation::Ignore {
                    return Ok((d.object, Vec::new()));
                }
                if mode == FieldValidation::Strict {
                    let list = d
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field \"{f}\""))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                        def.kind, def.version, def.kind, list
                    )));
                }
                let warnings = d
                    .unknown_fields
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect();
                Ok((d.object, warnings))
            }
        }
    }
}
