//! The request handlers: what kube-apiserver's generic registry, its admission plugins and
//! the per-kind strategies do between an HTTP request and the store. One `Sim` holds the
//! whole cluster state; `Sim::handle` answers one authenticated request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};
use http::Method;
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::faults::Faults;
use crate::managed_fields::{self, Operation};
use crate::metrics::Metrics;
use crate::request::{ApiRequest, ApiResponse, Representation, ResourcePath, User};
use crate::resources::{Registry, ResourceDef};
use crate::status::{success, ApiError, ApiResult, Subject};
use crate::store::{obj_key, ResKey, Store, Txn};
use crate::validation::FieldCause;
use crate::{defaults, strategic_merge, table, typed, validation};
use rkcm_gocompat::{FieldSelector, LabelSelector};

pub struct Sim {
    pub registry: Registry,
    pub store: Store,
    pub metrics: Metrics,
    pub faults: Faults,
    pub authorizer: crate::rbac::Authorizer,
    tokens: RwLock<HashMap<String, User>>,
    /// The `kid` of the tokens this cluster issues (upstream: the signing key's hash).
    token_key_id: String,
    ips: Mutex<IpAllocator>,
    /// The key that verifies legacy ServiceAccount tokens (`sa.pub`), once set.
    service_account_key: RwLock<Option<Arc<crate::legacy_tokens::ServiceAccountKey>>>,
    /// When the legacy-token-tracking ConfigMap was last created (upstream's rate limit).
    pub(crate) tracking_created: Mutex<Option<std::time::Instant>>,
    /// The `DynamicResourceAllocation` gate: whether pods keep their resource claims
    /// ([`crate::dra`]).
    pub dynamic_resource_allocation: std::sync::atomic::AtomicBool,
}

/// Service cluster IPs from `--service-cluster-ip-range` (IPv4).
struct IpAllocator {
    base: u32,
    size: u32,
    next: u32,
    used: std::collections::HashSet<u32>,
}

impl IpAllocator {
    fn new(cidr: &str) -> Self {
        let (ip, bits) = cidr.split_once('/').unwrap_or((cidr, "24"));
        let base: u32 = ip
            .parse::<std::net::Ipv4Addr>()
            .map(u32::from)
            .unwrap_or(0x0a60_0000);
        let bits: u32 = bits.parse().unwrap_or(12).clamp(8, 30);
        let size = 1u32 << (32 - bits);
        IpAllocator {
            base: base & !(size - 1),
            size,
            next: 1,
            used: Default::default(),
        }
    }

    fn allocate(&mut self) -> Option<String> {
        for _ in 0..self.size {
            let off = self.next;
            self.next = if self.next + 2 >= self.size {
                1
            } else {
                self.next + 1
            };
            if self.used.insert(off) {
                return Some(std::net::Ipv4Addr::from(self.base + off).to_string());
            }
        }
        None
    }

    /// The range as `net.IPNet` prints it.
    fn cidr(&self) -> String {
        format!(
            "{}/{}",
            std::net::Ipv4Addr::from(self.base),
            32 - self.size.trailing_zeros()
        )
    }

    /// Take a requested IP; the error is the bitmap allocator's.
    fn reserve(&mut self, ip: &str) -> Result<(), String> {
        let addr = match crate::validation::endpoints::parse_ip_sloppy(ip) {
            Some(std::net::IpAddr::V4(a)) => a,
            _ => return Err(format!("failed to parse service IP {}", validation::q(ip))),
        };
        let off = u32::from(addr).wrapping_sub(self.base);
        if off == 0 || off >= self.size - 1 {
            return Err(format!(
                "the provided IP ({addr}) is not in the valid range. The range of valid IPs is {}",
                self.cidr()
            ));
        }
        if !self.used.insert(off) {
            return Err("provided IP is already allocated".into());
        }
        Ok(())
    }

    fn release(&mut self, ip: &str) {
        if let Ok(addr) = ip.parse::<std::net::Ipv4Addr>() {
            self.used.remove(&u32::from(addr).wrapping_sub(self.base));
        }
    }
}

/// The API server's audience and service-account issuer (kube-apiserver's default
/// `--api-audiences` and `--service-account-issuer` as kubeadm sets them).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc";

pub fn now() -> DateTime<Utc> {
    Utc::now()
}

pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The 5 random characters upstream appends to generateName.
pub fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..n)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn meta(obj: &Value) -> &Value {
    &obj["metadata"]
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    meta(obj)["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn set_finalizers(obj: &mut Value, f: Vec<String>) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(f));
    }
}

/// Everything but metadata and status: what a spec change is measured on.
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

/// Parsed list/watch options.
pub struct ListOptions {
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl Sim {
    pub fn new(history: usize, service_cidr: &str) -> Self {
        Sim {
            registry: {
                let registry = Registry::builtin();
                crate::metrics_api::register(&registry);
                registry
            },
            store: Store::new(history),
            metrics: Metrics::new(),
            faults: Faults::default(),
            authorizer: crate::rbac::Authorizer::default(),
            tokens: RwLock::new(HashMap::new()),
            token_key_id: {
                let mut key = [0u8; 32];
                rand::rng().fill(&mut key[..]);
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
            },
            ips: Mutex::new(IpAllocator::new(service_cidr)),
            service_account_key: RwLock::new(None),
            tracking_created: Mutex::new(None),
            dynamic_resource_allocation: Default::default(),
        }
    }

    /// Whether the `DynamicResourceAllocation` gate is on.
    pub fn dra_enabled(&self) -> bool {
        self.dynamic_resource_allocation
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the ServiceAccount signing key whose public half verifies legacy tokens
    /// (kube-apiserver's `--service-account-key-file`).
    pub fn set_service_account_key(&self, key: Arc<crate::legacy_tokens::ServiceAccountKey>) {
        *self
            .service_account_key
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(key);
    }

    pub fn service_account_key(&self) -> Option<Arc<crate::legacy_tokens::ServiceAccountKey>> {
        self.service_account_key
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// What kube-apiserver creates at start: the system namespaces, the `kubernetes` Service
    /// with its Endpoints and EndpointSlice (advertising `advertise`, see
    /// [`crate::kubernetes_service`]) and the bootstrap RBAC policy.
    pub fn bootstrap(&self, advertise: std::net::SocketAddr) {
        let admin = User {
            name: "system:apiserver".into(),
            uid: uuid::Uuid::new_v4().to_string(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let _ = self.create_object(
                &self.def("", "v1", "namespaces"),
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                &admin,
                false,
                Some(&Self::system_operation(&self.def("", "v1", "namespaces"))),
            );
        }
        if let Err(e) = self.reconcile_kubernetes_service(advertise) {
            crate::kubernetes_service::log_failure(&e);
        }
        for (resource, obj) in crate::rbac::bootstrap_objects() {
            let def = self.def(crate::rbac::GROUP, "v1", resource);
            let ns = obj["metadata"]["namespace"].as_str().map(String::from);
            if let Err(e) = self.create_object(
                &def,
                ns.as_deref(),
                obj,
                &admin,
                false,
                Some(&Self::system_operation(&def)),
            ) {
                tracing::warn!(error = %e, resource, "bootstrap policy object not created");
            }
        }
        // kube-apiserver's legacy-token-tracking controller starts with the server.
        self.reconcile_token_tracking();
    }

    /// The first address of the service range: the `kubernetes` Service's cluster IP.
    pub(crate) fn first_service_ip(&self) -> String {
        let ips = self.ips.lock().unwrap_or_else(|p| p.into_inner());
        std::net::Ipv4Addr::from(ips.base + 1).to_string()
    }

    /// The policy to check a write of an RBAC object against for escalation, when it needs
    /// checking (an RBAC kind written by someone outside `system:masters`).
    fn escalation_policy(
        &self,
        def: &ResourceDef,
        user: &User,
    ) -> Option<Arc<crate::rbac::Policy>> {
        (def.group == crate::rbac::GROUP && def.custom.is_none() && !user.is_admin())
            .then(|| self.authorizer.policy(&self.store))
    }

    /// Whether `user` may do what `attrs` describe, as kube-apiserver's authorizers say.
    pub fn authorize(&self, user: &User, attrs: &crate::rbac::Attributes) -> crate::rbac::Decision {
        self.authorizer.authorize(&self.store, user, attrs)
    }

    fn def(&self, g: &str, v: &str, r: &str) -> Arc<ResourceDef> {
        self.registry
            .lookup(g, v, r)
            .expect("built-in resource is registered")
    }

    pub fn register_token(&self, token: &str, user: User) {
        self.tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_string(), user);
    }

    pub fn user_for_token(&self, token: &str) -> Option<User> {
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }

    /// Answer a request under /api or /apis that names a resource.
    pub fn handle_resource(
        self: &Arc<Self>,
        req: &ApiRequest,
        p: ResourcePath,
    ) -> ApiResult<ApiResponse> {
        let user = req.user.clone().ok_or_else(ApiError::unauthorized)?;
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
            (None, None) if *m == Method::POST => {
                let body = self.decode_body(&def, req)?;
                if def.resource == "bindings" {
                    return self.bind(&def, ns.unwrap_or_default(), None, body);
                }
                if !def.is_stored() {
                    return self.review(&def, ns, body, &user, req);
                }
                let (obj, warnings) = self.check_fields(&def, body, req)?;
                let dry = req.param("dryRun").is_some();
                let fm = self.operation(&def, req, None, None);
                let created = self.create_object(&def, ns, obj, &user, dry, Some(&fm))?;
                Ok(with_warnings(
                    ApiResponse::json(201, self.present(&def, &created)),
                    warnings,
                ))
            }
            (None, None) if *m == Method::DELETE => self.delete_collection(&def, ns, req),
            (Some(name), None) if *m == Method::GET => {
                let obj = self.get_object(&def, ns, name)?;
                Ok(ApiResponse::json(
                    200,
                    self.represent_one(&def, &obj, wants),
                ))
            }
            (Some(name), None | Some("status")) if *m == Method::PUT => {
                let body = self.decode_body(&def, req)?;
                let (obj, warnings) = self.check_fields(&def, body, req)?;
                let sub = p.subresource.as_deref();
                let fm = self.operation(&def, req, sub, None);
                let out =
                    self.update_object(&def, ns, name, sub, &user, req, Some(&fm), |_| Ok(obj))?;
                Ok(with_warnings(out, warnings))
            }
            (Some(name), None | Some("status")) if *m == Method::PATCH => {
                self.patch(&def, ns, name, p.subresource.as_deref(), req, &user)
            }
            (Some(name), None) if *m == Method::DELETE => self.delete(&def, ns, name, req),
            (Some(name), Some("status")) if *m == Method::GET => {
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
                let body = self.decode_json(req)?;
                let fins = body["spec"]["finalizers"].clone();
                self.update_object(
                    &def,
                    None,
                    name,
                    Some("finalize"),
                    &user,
                    req,
                    None,
                    move |cur| {
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
                    },
                )
            }
            (Some(name), Some("approval")) if *m == Method::PUT || *m == Method::PATCH => {
                let body = if *m == Method::PUT {
                    self.decode_json(req)?
                } else {
                    let cur = self.get_object(&def, ns, name)?;
                    self.apply_patch(&def, &cur, req)?
                };
                let conds = body["status"]["conditions"].clone();
                let fm = self.operation(&def, req, Some("approval"), None);
                self.update_object(
                    &def,
                    None,
                    name,
                    Some("approval"),
                    &user,
                    req,
                    Some(&fm),
                    move |cur| {
                        let mut next = cur.clone();
                        if !next["status"].is_object() {
                            next["status"] = json!({});
                        }
                        next["status"]["conditions"] = conds;
                        Ok(next)
                    },
                )
            }
            (Some(name), Some("approval")) if *m == Method::GET => {
                let obj = self.get_object(&def, ns, name)?;
                Ok(ApiResponse::json(200, self.present(&def, &obj)))
            }
            (Some(name), Some("token")) if *m == Method::POST => {
                let body = self.decode_json(req)?;
                self.token_request(ns.unwrap_or_default(), name, body, req)
            }
            _ => Err(ApiError::method_not_allowed(m.as_str())),
        }
    }

    // ----- decoding -----

    /// The request body's media type, without parameters.
    fn media_type(req: &ApiRequest) -> &str {
        req.content_type.split(';').next().unwrap_or("").trim()
    }

    fn decode_json(&self, req: &ApiRequest) -> ApiResult<Value> {
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
    fn check_fields(
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

    // ----- reading -----

    pub fn get_object(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<Arc<Value>> {
        self.store
            .lock()
            .get(&def.key(), ns.unwrap_or(""), name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))
    }

    /// An object as served in `def`'s version.
    pub fn present(&self, def: &ResourceDef, obj: &Value) -> Value {
        let mut o = obj.clone();
        crate::hpa_conversion::to_served(&def.group, &def.version, &def.kind, &mut o);
        if let Some(m) = o.as_object_mut() {
            m.insert("apiVersion".into(), json!(def.api_version()));
            m.insert("kind".into(), json!(def.kind));
        }
        o
    }

    /// A stored object with the metadata it has as served in `def`'s version (a v1 HPA's
    /// round-trip annotations); stored objects are returned as they are otherwise.
    pub fn served_metadata<'a>(
        &self,
        def: &ResourceDef,
        obj: &'a Value,
    ) -> std::borrow::Cow<'a, Value> {
        if crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
            std::borrow::Cow::Owned(self.present(def, obj))
        } else {
            std::borrow::Cow::Borrowed(obj)
        }
    }

    /// What a Table row is printed from: the object as served, except that an object
    /// converted from its storage version is printed from the stored one (kube-apiserver
    /// prints from its internal version, which holds all of it) under the served metadata.
    pub fn table_source(&self, def: &ResourceDef, obj: &Value) -> Value {
        let served = self.present(def, obj);
        if !crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
            return served;
        }
        let mut o = obj.clone();
        o["metadata"] = served["metadata"].clone();
        o
    }

    fn represent_one(&self, def: &ResourceDef, obj: &Value, wants: Representation) -> Value {
        match wants {
            Representation::Metadata => partial_metadata(&self.served_metadata(def, obj)),
            Representation::Table => {
                self.table(def, &[self.table_source(def, obj)], true, "", None)
            }
            _ => self.present(def, obj),
        }
    }

    pub fn table(
        &self,
        def: &ResourceDef,
        items: &[Value],
        headers: bool,
        rv: &str,
        cont: Option<&str>,
    ) -> Value {
        match &def.custom {
            Some(c) => table::to_table_custom(
                &c.printer_columns,
                items,
                headers,
                table::IncludeObject::Metadata,
                rv,
                cont,
                now(),
            ),
            None => table::to_table(
                &def.group,
                &def.kind,
                items,
                headers,
                table::IncludeObject::Metadata,
                rv,
                cont,
                now(),
            ),
        }
    }

    pub fn list_options(&self, def: &ResourceDef, req: &ApiRequest) -> ApiResult<ListOptions> {
        // Decoding (integers, then the selectors' syntax), validation, then the field
        // selector's fields, in the order of kube-apiserver's list handler.
        let numbers = crate::query_options::list_numbers(req)?;
        let labels = match req.param("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        let fields = match req.param("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(FieldSelector::parse(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        crate::query_options::check_list(req)?;
        let fields = match fields {
            Some(f) => {
                if def.custom.is_some() {
                    for name in f.field_names() {
                        if name != "metadata.name" && name != "metadata.namespace" {
                            return Err(ApiError::bad_request(format!(
                                "\"{name}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                            )));
                        }
                    }
                } else {
                    let qualified = def.qualified_resource();
                    f.check_supported(&qualified)
                        .map_err(ApiError::bad_request)?;
                }
                Some(f)
            }
            None => None,
        };
        let limit = numbers.limit.max(0) as usize;
        Ok(ListOptions {
            labels,
            fields,
            limit,
            continue_token: req
                .param("continue")
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version: req
                .param("resourceVersion")
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version_match: req
                .param("resourceVersionMatch")
                .filter(|s| !s.is_empty())
                .map(String::from),
        })
    }

    /// Whether `obj` passes the label and field selectors of `opts`.
    pub fn selected(&self, def: &ResourceDef, opts: &ListOptions, obj: &Value) -> bool {
        if let Some(l) = &opts.labels {
            if !l.matches(&labels_of(obj)) {
                return false;
            }
        }
        if let Some(f) = &opts.fields {
            let resource = def.qualified_resource();
            let get = |field: &str| rkcm_gocompat::fields::field_value(&resource, obj, field);
            if !f.matches(&get) {
                return false;
            }
        }
        true
    }

    fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("list") {
            return Err(ApiError::method_not_allowed("list"));
        }
        let opts = self.list_options(def, req)?;
        if let Some(tok) = &opts.continue_token {
            crate::query_options::decode_continue(tok)?;
            if opts.resource_version.as_deref().is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        }
        let t = self.store.lock();
        let current = t.rv();
        if let Some(rv) = &opts.resource_version {
            let n: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
            // kube-sim keeps no past states: an exact list at an older resourceVersion is
            // answered as a compacted one would be (clients relist on 410).
            if opts.resource_version_match.as_deref() == Some("Exact") && n < current {
                return Err(ApiError::expired(
                    "The resourceVersion for the provided list is too old.",
                ));
            }
            if n > current {
                return Err(ApiError::new(
                    504,
                    "Timeout",
                    format!("Too large resource version: {n}, current: {current}"),
                )
                .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})));
            }
        }
        let mut after: Option<(String, String)> = None;
        let mut list_rv = current;
        if let Some(tok) = &opts.continue_token {
            let (rv, start) = crate::query_options::decode_continue(tok)?;
            if rv < t.compacted_rv() {
                return Err(ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."));
            }
            list_rv = rv;
            after = Some(match (ns, def.namespaced) {
                (Some(n), _) => (n.to_string(), start),
                (None, true) => match start.split_once('/') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => (String::new(), start),
                },
                (None, false) => (String::new(), start),
            });
        }
        let mut items = Vec::new();
        let mut next: Option<String> = None;
        let mut remaining = 0usize;
        let filtering = opts.labels.is_some() || opts.fields.is_some();
        // As etcd pages: once `limit` objects are taken, a continue token is given if any
        // key follows in the range, whether or not it would pass the selectors.
        for (_, obj) in t.range(&def.key(), ns, after.as_ref()) {
            if opts.limit > 0 && items.len() >= opts.limit {
                if next.is_none() {
                    let last: &Value = items.last().map(|v: &Arc<Value>| v.as_ref()).unwrap_or(obj);
                    let (lns, lname) = obj_key(last);
                    let start = if ns.is_none() && def.namespaced {
                        format!("{lns}/{lname}")
                    } else {
                        lname
                    };
                    next = Some(encode_continue(list_rv, &start));
                    if filtering {
                        break;
                    }
                }
                remaining += 1;
                continue;
            }
            if self.selected(def, &opts, obj) {
                items.push(obj.clone());
            }
        }
        drop(t);
        let rv = list_rv.to_string();
        let wants = req.wants();
        let body = match wants {
            Representation::Table => {
                let objs: Vec<Value> = items.iter().map(|o| self.table_source(def, o)).collect();
                let headers =
                    !req.accept.contains("noHeaders") && req.param("includeObject") != Some("None");
                self.table(def, &objs, headers, &rv, next.as_deref())
            }
            Representation::Metadata => {
                let mut md = json!({"resourceVersion": rv});
                if let Some(c) = &next {
                    md["continue"] = json!(c);
                }
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": md,
                       "items": items.iter().map(|o| partial_metadata(&self.served_metadata(def, o))).collect::<Vec<_>>()})
            }
            _ => {
                let mut md = json!({"resourceVersion": rv});
                if let Some(c) = &next {
                    md["continue"] = json!(c);
                    if !filtering {
                        md["remainingItemCount"] = json!(remaining);
                    }
                }
                // Serialized straight from the stored objects: a list of 10k pods would
                // otherwise deep-copy every one of them first. Only objects served in
                // another version than the stored one are copied, to be converted.
                let converted: Vec<Value> =
                    if crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
                        items.iter().map(|o| self.present(def, o)).collect()
                    } else {
                        Vec::new()
                    };
                let body = ListBody {
                    kind: format!("{}List", def.kind),
                    api_version: def.api_version(),
                    metadata: md,
                    items: if converted.is_empty() {
                        items.iter().map(|o| ListItem(o.as_ref())).collect()
                    } else {
                        converted.iter().map(ListItem).collect()
                    },
                };
                let bytes = serde_json::to_vec(&body)
                    .map_err(|e| ApiError::internal(format!("encoding the list: {e}")))?;
                return Ok(ApiResponse {
                    code: 200,
                    body: crate::request::Body::Raw(bytes.into(), "application/json"),
                    content_type: None,
                    headers: Vec::new(),
                });
            }
        };
        Ok(ApiResponse::json(200, body))
    }

    // ----- creating -----

    /// The whole create path: metadata, defaults, admission, validation, storage.
    pub fn create_object(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        mut obj: Value,
        user: &User,
        dry_run: bool,
        fm: Option<&Operation>,
    ) -> ApiResult<Arc<Value>> {
        if !def.has_verb("create") {
            return Err(ApiError::method_not_allowed("create"));
        }
        if let Some(policy) = self.escalation_policy(def, user) {
            let ns = if def.namespaced { ns.unwrap_or("") } else { "" };
            crate::rbac::escalation::confirm(&policy, user, &def.resource, ns, "", &obj, None)?;
        }
        let body_ns = str_at(&obj, &["metadata", "namespace"])
            .unwrap_or("")
            .to_string();
        if def.namespaced {
            let ns = ns.unwrap_or("");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        let mut name = str_at(&obj, &["metadata", "name"])
            .unwrap_or("")
            .to_string();
        let generate = str_at(&obj, &["metadata", "generateName"])
            .unwrap_or("")
            .to_string();
        if name.is_empty() && !generate.is_empty() {
            name = format!("{generate}{}", random_suffix(5));
            meta_mut(&mut obj).insert("name".into(), json!(name));
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, ""),
                &[FieldCause {
                    reason: "FieldValueRequired",
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        {
            let m = meta_mut(&mut obj);
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "generation",
            ] {
                m.remove(k);
            }
        }
        let body_version = obj["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit('/').next())
            .unwrap_or(&def.version)
            .to_string();
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if def.custom.is_none() {
            defaults::apply_defaults(&def.group, &body_version, &def.kind, &mut obj);
            crate::hpa_conversion::to_storage(&def.group, &body_version, &def.kind, &mut obj);
            if def.group.is_empty() && def.kind == "Pod" {
                crate::dra::drop_disabled_pod_fields(self.dra_enabled(), &mut obj, None);
            }
        }
        if def.kind == "Service" && def.group.is_empty() {
            // The service storage checks the IP fields before it fills them in and
            // allocates, ahead of the strategy's validation.
            let causes = validation::service_ip_family_errors(&obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, &name),
                    &causes,
                ));
            }
        }
        // Field ownership is worked out on the object as decoded and defaulted, before
        // admission and the strategy add their own fields.
        let mut snapshot = obj.clone();
        if def.custom.is_none() {
            defaults::after_defaulting(&def.group, &def.kind, &mut obj, true);
            defaults::prepare_for_create(
                &def.group,
                &body_version,
                &def.kind,
                &mut obj,
                &timestamp(now()),
            );
        }
        if let Some(op) = fm {
            own_fields(op, None, &mut snapshot)?;
            set_managed_fields(&mut obj, snapshot["metadata"]["managedFields"].take());
        }
        self.mutate_on_create(def, &mut obj, user);
        let mut t = self.store.lock();
        let subject = Subject::new(&def.group, &def.resource, &name);
        if let Some(ns) = ns.filter(|_| def.namespaced) {
            self.admit_namespace(&t, ns, &subject)?;
        }
        if def.kind == "Pod" && def.group.is_empty() {
            self.admit_pod(&t, &mut obj, &subject)?;
        }
        if def.kind == "PersistentVolumeClaim" && def.group.is_empty() {
            crate::storage::default_claim_class(&t, &mut obj);
        }
        if t.get(&def.key(), &body_ns_or(ns, def), &name).is_some() {
            return Err(ApiError::already_exists(subject));
        }
        let causes = self.validate(def, &obj, None);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, &name),
                &causes,
            ));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        {
            let m = meta_mut(&mut obj);
            m.insert("uid".into(), json!(uid));
            // The clock fault moves creation times (only them), for tests that age objects.
            let created = now() + self.faults.clock_offset();
            m.insert("creationTimestamp".into(), json!(timestamp(created)));
            if def.tracks_generation() {
                m.insert("generation".into(), json!(1));
            }
        }
        if def.kind == "Job" && def.group == "batch" {
            defaults::job_selector_and_labels(&mut obj, &uid);
            let causes = self.validate(def, &obj, None);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, &name),
                    &causes,
                ));
            }
        }
        // ResourceQuota admission, after validation; ahead of the IP allocation here so a
        // refusal leaks no address (kube-apiserver allocates first and rolls back).
        if let Some(ns) = ns.filter(|_| def.namespaced) {
            let op = crate::quota::evaluator::Operation::Create;
            crate::quota::admit(&mut t, def, ns, op, &obj, None, dry_run)?;
        }
        if def.kind == "Service" && def.group.is_empty() {
            self.allocate_cluster_ip(&mut obj, &subject)?;
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut obj)
                .map_err(|c| ApiError::invalid(Subject::new(&def.group, &def.kind, &name), &c))?;
        }
        if dry_run {
            return Ok(Arc::new(obj));
        }
        let stored = t.put(&def.key(), obj);
        if def.kind == "CustomResourceDefinition" {
            let established = t.put(&def.key(), crate::crd::establish(&stored));
            drop(t);
            crate::crd::register(&self.registry, &established);
        }
        Ok(stored)
    }

    /// The CSR strategy records who asked.
    fn mutate_on_create(&self, def: &ResourceDef, obj: &mut Value, user: &User) {
        if crate::csr::is_csr(&def.group, &def.kind) {
            crate::csr::prepare_for_create(obj, user);
        }
    }

    /// NamespaceLifecycle admission: the namespace exists and is not terminating.
    fn admit_namespace(&self, t: &Txn, ns: &str, subject: &Subject) -> ApiResult<()> {
        let nsdef = ResKey::new("", "namespaces");
        match t.get(&nsdef, "", ns) {
            None => Err(ApiError::not_found(Subject::new("", "namespaces", ns))),
            Some(n)
                if !n["metadata"]["deletionTimestamp"].is_null()
                    || n["status"]["phase"] == "Terminating" =>
            {
                let mut e = ApiError::forbidden(
                    subject.clone(),
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                );
                if let Some(d) = e.details.as_deref_mut() {
                    d["causes"] = json!([{"reason": "NamespaceTerminating",
                                          "message": format!("namespace {ns} is being terminated"),
                                          "field": "metadata.namespace"}]);
                }
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }

    /// ServiceAccount admission: the pod's service account must exist; mount its token.
    fn admit_pod(&self, t: &Txn, pod: &mut Value, subject: &Subject) -> ApiResult<()> {
        let ns = str_at(pod, &["metadata", "namespace"])
            .unwrap_or("")
            .to_string();
        let sa = str_at(pod, &["spec", "serviceAccountName"])
            .filter(|s| !s.is_empty())
            .or_else(|| str_at(pod, &["spec", "serviceAccount"]).filter(|s| !s.is_empty()))
            .unwrap_or("default")
            .to_string();
        let is_mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
        if !is_mirror
            && t.get(&ResKey::new("", "serviceaccounts"), &ns, &sa)
                .is_none()
        {
            return Err(ApiError::forbidden(
                subject.clone(),
                &format!(
                    "error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"
                ),
            ));
        }
        if !is_mirror {
            if !pod["spec"].is_object() {
                pod["spec"] = json!({});
            }
            pod["spec"]["serviceAccountName"] = json!(sa);
            defaults::admit_pod_service_account(pod, &random_suffix(5));
        }
        Ok(())
    }

    fn allocate_cluster_ip(&self, svc: &mut Value, subject: &Subject) -> ApiResult<()> {
        let ty = str_at(svc, &["spec", "type"])
            .unwrap_or("ClusterIP")
            .to_string();
        if ty == "ExternalName" {
            return Ok(());
        }
        let requested = str_at(svc, &["spec", "clusterIP"])
            .unwrap_or("")
            .to_string();
        let mut ips = self.ips.lock().unwrap_or_else(|p| p.into_inner());
        let ip = match requested.as_str() {
            "None" => "None".to_string(),
            "" => ips.allocate().ok_or_else(|| {
                ApiError::internal("failed to allocate a serviceIP: range is full")
            })?,
            ip => {
                ips.reserve(ip).map_err(|why| {
                    ApiError::invalid(
                        Subject::new("", "Service", subject.name),
                        &[FieldCause {
                            reason: "FieldValueInvalid",
                            message: format!(
                                "Invalid value: []string{{{}}}: failed to allocate IP {ip}: {why}",
                                validation::q(ip)
                            ),
                            field: "spec.clusterIPs".into(),
                        }],
                    )
                })?;
                ip.to_string()
            }
        };
        svc["spec"]["clusterIP"] = json!(ip);
        svc["spec"]["clusterIPs"] = json!([ip]);
        if ip == "None" && svc["spec"]["ipFamilyPolicy"].is_null() {
            svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
        }
        Ok(())
    }

    fn validate(&self, def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<FieldCause> {
        if def.custom.is_some() {
            let name = str_at(obj, &["metadata", "name"]).unwrap_or("");
            return validation::validate_name(&def.kind, name)
                .into_iter()
                .collect();
        }
        validation::validate(&def.group, &def.version, &def.kind, obj, old)
    }

    // ----- updating -----

    /// The update path shared by PUT, PATCH and the subresources: `change` turns the current
    /// object into the requested one; this applies the strategy (what each subresource may
    /// change, generation, finalizer rules), validation and optimistic concurrency.
    #[allow(clippy::too_many_arguments)]
    pub fn update_object(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        user: &User,
        req: &ApiRequest,
        fm: Option<&Operation>,
        change: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("update") && sub.is_none() {
            return Err(ApiError::method_not_allowed("update"));
        }
        // Compiled before the store's lock is taken: compiling reads the store.
        let escalation_policy = self.escalation_policy(def, user);
        let mut t = self.store.lock();
        let key = def.key();
        let ns_s = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&key, ns_s, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
        let mut next = change(&current)?;
        if !next.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        if def.custom.is_none() {
            // Kept in its storage version from here on, like `current`.
            let written_in = str_at(&next, &["apiVersion"])
                .and_then(|a| a.rsplit('/').next())
                .unwrap_or(&def.version)
                .to_string();
            crate::hpa_conversion::to_storage(&def.group, &written_in, &def.kind, &mut next);
        }
        if let Some(policy) = &escalation_policy {
            crate::rbac::escalation::confirm(
                policy,
                user,
                &def.resource,
                ns_s,
                name,
                &next,
                Some(&current),
            )?;
        }
        let subject = Subject::new(&def.group, &def.resource, name);
        // Optimistic concurrency: a resourceVersion in the request must be the current one.
        if let Some(rv) = str_at(&next, &["metadata", "resourceVersion"]).filter(|s| !s.is_empty())
        {
            if Some(rv) != str_at(&current, &["metadata", "resourceVersion"]) {
                return Err(ApiError::stale(subject));
            }
        }
        let body_name = str_at(&next, &["metadata", "name"])
            .unwrap_or("")
            .to_string();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced {
            let body_ns = str_at(&next, &["metadata", "namespace"]).unwrap_or("");
            if !body_ns.is_empty() && body_ns != ns_s {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        next = match sub {
            // The main resource ignores status; the status subresource changes only status.
            None => {
                if def.has_status() {
                    match current.get("status") {
                        Some(s) => next["status"] = s.clone(),
                        None => {
                            if let Some(m) = next.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                next
            }
            // Built-in status strategies reset the spec (and a few fields per kind) but
            // take the rest of the metadata from the request: the deployment controller
            // records its revision annotation through deployments/status. Custom
            // resources' status updates change only status.
            Some("status") if def.custom.is_none() => {
                let mut n = next;
                match current.get("spec") {
                    Some(spec) => n["spec"] = spec.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("spec");
                        }
                    }
                }
                let preserved: &[&str] = match (def.group.as_str(), def.resource.as_str()) {
                    ("apps", "deployments") => &["labels"],
                    ("", "pods") => &["ownerReferences", "deletionTimestamp"],
                    _ => &[],
                };
                let cm = current["metadata"].as_object().cloned().unwrap_or_default();
                let m = meta_mut(&mut n);
                for key in preserved {
                    match cm.get(*key) {
                        Some(v) => {
                            m.insert((*key).to_string(), v.clone());
                        }
                        None => {
                            m.remove(*key);
                        }
                    }
                }
                n
            }
            Some("status") => {
                let mut n = (*current).clone();
                match next.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                n
            }
            _ => next,
        };
        if sub == Some("status") && def.kind == "PersistentVolume" && def.group.is_empty() {
            crate::storage::stamp_phase_transition(&mut next, &current, &timestamp(now()));
        }
        // System metadata is the server's.
        {
            let cm = current["metadata"].as_object().cloned().unwrap_or_default();
            let m = meta_mut(&mut next);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
                "generateName",
            ] {
                match cm.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.remove("resourceVersion");
            m.remove("selfLink");
        }
        next["apiVersion"] = json!(def.api_version());
        next["kind"] = json!(def.kind);
        if def.custom.is_none() {
            defaults::apply_defaults(&def.group, &def.version, &def.kind, &mut next);
            crate::hpa_conversion::keep_storage_version(&def.group, &def.kind, &mut next);
            if def.group.is_empty() && def.kind == "Pod" {
                crate::dra::drop_disabled_pod_fields(self.dra_enabled(), &mut next, Some(&current));
            }
        }
        // Field ownership, on the defaulted object before the strategy's changes.
        match fm {
            Some(op) if op.subresource == "scale" => {
                let (spec_path, _, _) = scale_paths(def);
                if pointer(&current, &spec_path) != pointer(&next, &spec_path) {
                    let path: Vec<&str> = spec_path.split('.').filter(|s| !s.is_empty()).collect();
                    op.run_scale(&mut next, &path);
                }
            }
            Some(op) => own_fields(op, Some(&current), &mut next)?,
            None => {}
        }
        if def.custom.is_none() {
            defaults::after_defaulting(&def.group, &def.kind, &mut next, false);
            defaults::prepare_for_update(&def.group, &def.version, &def.kind, &mut next, &current);
            if crate::csr::is_csr(&def.group, &def.kind) {
                crate::csr::prepare_for_update(sub, &mut next, &current, &timestamp(now()));
            }
        }
        // No new finalizers while deleting.
        if !current["metadata"]["deletionTimestamp"].is_null() {
            let old = finalizers(&current);
            let added: Vec<String> = finalizers(&next)
                .into_iter()
                .filter(|f| !old.contains(f))
                .collect();
            if !added.is_empty() {
                let msg = format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
                );
                let cause = FieldCause {
                    reason: "FieldValueForbidden",
                    message: msg,
                    field: "metadata.finalizers".into(),
                };
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, name),
                    &[cause.clone(), cause],
                ));
            }
        }
        let mut causes = self.validate(def, &next, Some(&current));
        if crate::csr::is_csr(&def.group, &def.kind) {
            causes.extend(validation::csr::validate_update(&next, &current, sub));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, name),
                &causes,
            ));
        }
        if sub.is_none() && def.kind == "PersistentVolumeClaim" && def.group.is_empty() {
            crate::storage::admit_claim_resize(&t, &next, &current, name)?;
        }
        if def.kind == "Service" && def.group.is_empty() {
            // The cluster IP is immutable and kept when a client leaves it out.
            for f in ["clusterIP", "clusterIPs"] {
                if next["spec"][f].is_null() && !current["spec"][f].is_null() {
                    next["spec"][f] = current["spec"][f].clone();
                }
            }
        }
        if def.tracks_generation() {
            let changed = if def.kind == "EndpointSlice" && def.group == "discovery.k8s.io" {
                // Semantically: an empty list is no change from a nil one.
                let mut a = (*current).clone();
                let mut b = next.clone();
                for v in [&mut a, &mut b] {
                    if let Some(m) = v.as_object_mut() {
                        m.remove("metadata");
                    }
                }
                !validation::endpoints::semantic_eq(&a, &b)
            } else if def.has_status() {
                spec_part(&current) != spec_part(&next)
            } else {
                let strip = |v: &Value| {
                    let mut v = v.clone();
                    if let Some(m) = v.as_object_mut() {
                        m.remove("metadata");
                    }
                    v
                };
                strip(&current) != strip(&next)
            };
            // A Deployment's annotation change counts too (they are copied to its
            // ReplicaSets), as kube-apiserver's deployment strategy has it; nil and empty
            // maps are equal.
            let annotations = |v: &Value| {
                v["metadata"]["annotations"]
                    .as_object()
                    .filter(|m| !m.is_empty())
                    .cloned()
            };
            let changed = changed
                || (sub.is_none()
                    && def.group == "apps"
                    && def.kind == "Deployment"
                    && annotations(&current) != annotations(&next));
            // An EndpointSlice's label change counts too (the endpointslice strategy): the
            // controllers that own slices tell their own writes by generation.
            let changed = changed
                || (def.group == "discovery.k8s.io"
                    && def.kind == "EndpointSlice"
                    && validation::endpoints::labels_differ(&current, &next));
            if changed {
                let g = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                meta_mut(&mut next).insert("generation".into(), json!(g));
            }
        }
        // A no-op update is not written (no new resourceVersion), as kube-apiserver does.
        let mut probe = next.clone();
        meta_mut(&mut probe).insert(
            "resourceVersion".into(),
            current["metadata"]["resourceVersion"].clone(),
        );
        if probe == *current {
            return Ok(ApiResponse::json(200, self.present(def, &current)));
        }
        if sub.is_none() {
            let op = crate::quota::evaluator::Operation::Update;
            let dry_run = req.param("dryRun").is_some();
            crate::quota::admit(&mut t, def, ns_s, op, &next, Some(&current), dry_run)?;
        }
        if req.param("dryRun").is_some() {
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut next)
                .map_err(|c| ApiError::invalid(Subject::new(&def.group, &def.kind, name), &c))?;
            next = crate::crd::establish(&next);
        }
        // Removed by the update that leaves it without finalizers, once a deletion was asked
        // for and no grace period is running (ShouldDeleteDuringUpdate): a pod whose
        // kubelet has not finished it yet stays until the kubelet's own deletion.
        let pending_grace = current["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0);
        if !current["metadata"]["deletionTimestamp"].is_null()
            && pending_grace == 0
            && self.finalized(def, &next)
        {
            // The answer is the object as this update left it, the moment before it went.
            self.remove_locked(&mut t, def, ns_s, name);
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        let stored = t.put(&key, next);
        drop(t);
        if def.kind == "CustomResourceDefinition" {
            crate::crd::register(&self.registry, &stored);
        }
        Ok(ApiResponse::json(200, self.present(def, &stored)))
    }

    /// Nothing holds this object any more: no finalizers (and for a namespace, no spec finalizers).
    fn finalized(&self, def: &ResourceDef, obj: &Value) -> bool {
        let spec_fins = def.kind == "Namespace"
            && obj["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        finalizers(obj).is_empty() && !spec_fins
    }

    fn remove_locked(&self, t: &mut Txn, def: &ResourceDef, ns: &str, name: &str) -> Arc<Value> {
        let gone = t
            .remove(&def.key(), ns, name)
            .unwrap_or_else(|| Arc::new(Value::Null));
        if def.kind == "Service" && def.group.is_empty() {
            if let Some(ip) = gone["spec"]["clusterIP"].as_str() {
                self.ips
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .release(ip);
            }
        }
        if def.kind == "CustomResourceDefinition" {
            let crd_name = name.to_string();
            for r in self.registry.unregister_crd(&crd_name) {
                // Custom resources go with their definition.
                let keys: Vec<(String, String)> = t
                    .range(&r.key(), None, None)
                    .map(|(k, _)| k.clone())
                    .collect();
                for (ns, n) in keys {
                    t.remove(&r.key(), &ns, &n);
                }
                t.drop_resource(&r.key());
            }
        }
        gone
    }

    // ----- patching -----

    fn patch(
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
    fn operation(
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

    // ----- deleting -----

    /// DeleteOptions from the body or the query, validated ([`crate::query_options`]).
    fn delete_options(&self, req: &ApiRequest) -> ApiResult<Value> {
        crate::query_options::delete_options(req)
    }

    fn delete(
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
        let mut t = self.store.lock();
        let ns_s = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&def.key(), ns_s, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
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
    fn delete_locked(
        &self,
        t: &mut Txn,
        def: &ResourceDef,
        current: &Value,
        opts: &Value,
        dry: bool,
    ) -> ApiResult<(u16, Value)> {
        let (ns, name) = obj_key(current);
        if def.kind == "Namespace"
            && def.group.is_empty()
            && matches!(name.as_str(), "default" | "kube-system" | "kube-public")
        {
            return Err(ApiError::forbidden(
                Subject::new("", "namespaces", &name),
                "this namespace may not be deleted",
            ));
        }
        let pre = &opts["preconditions"];
        if let Some(uid) = pre["uid"].as_str() {
            let actual = current["metadata"]["uid"].as_str().unwrap_or("");
            if uid != actual {
                return Err(ApiError::conflict(
                    Subject::new(&def.group, &def.kind, &name),
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
                    Subject::new(&def.group, &def.kind, &name),
                    &format!("the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"),
                ));
            }
        }
        let mut next = current.clone();
        let already_deleting = !current["metadata"]["deletionTimestamp"].is_null();
        // Graceful deletion (pods): the kubelet finishes it.
        let mut grace: i64 = 0;
        if def.kind == "Pod" && def.group.is_empty() {
            grace = opts["gracePeriodSeconds"]
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
            if already_deleting {
                let existing = current["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0);
                if grace >= existing && grace > 0 {
                    return Ok((200, self.present(def, current)));
                }
            }
        }
        // Propagation: Orphan and Foreground hold the object with a finalizer for the garbage collector.
        let policy = match opts["propagationPolicy"].as_str() {
            Some(p) => p.to_string(),
            None if opts["orphanDependents"] == json!(true) => "Orphan".into(),
            None if opts["orphanDependents"] == json!(false) => "Background".into(),
            None => String::new(),
        };
        let mut fins = finalizers(current);
        let before = fins.clone();
        match policy.as_str() {
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
        let spec_fins = def.kind == "Namespace"
            && next["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        if fins.is_empty() && !spec_fins && grace == 0 {
            if dry {
                return Ok((200, self.present(def, current)));
            }
            let gone = self.remove_locked(t, def, &ns, &name);
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
                return Ok((200, shown));
            }
            let mut details =
                json!({"name": name, "kind": def.resource, "uid": current["metadata"]["uid"]});
            if !def.group.is_empty() {
                details["group"] = json!(def.group);
            }
            return Ok((200, success(None, Some(details))));
        }
        // The object stays, marked for deletion.
        set_finalizers(&mut next, fins.clone());
        let m = meta_mut(&mut next);
        if !already_deleting {
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
            // deletion earlier, counted from when it was asked for, as kube-apiserver's
            // BeforeDelete does.
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
        if already_deleting && fins == before && next == *current {
            return Ok((200, self.present(def, current)));
        }
        if dry {
            return Ok((200, self.present(def, &next)));
        }
        let stored = t.put(&def.key(), next);
        Ok((200, self.present(def, &stored)))
    }

    fn delete_collection(
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
        let mut t = self.store.lock();
        let targets: Vec<Arc<Value>> = t
            .range(&def.key(), ns, None)
            .filter(|(_, o)| self.selected(def, &opts, o))
            .map(|(_, o)| o.clone())
            .collect();
        let mut items = Vec::new();
        for obj in targets {
            // Deletion of each is independent, as upstream's DeleteCollection does it.
            if self.delete_locked(&mut t, def, &obj, &del, dry).is_ok() {
                items.push(list_item(&obj));
            }
        }
        let rv = t.rv().to_string();
        Ok(ApiResponse::json(
            200,
            json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(),
                   "metadata": {"resourceVersion": rv}, "items": items}),
        ))
    }

    // ----- subresources -----

    fn scale(
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

    fn bind(
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

    fn evict(
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
    fn token_request(
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

    /// Create-only review kinds: authentication and authorization answers, from the same
    /// authorizer every request goes through.
    fn review(
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

/// Works out the `managedFields` of `new` after `op` turned `old` into it, in place; an apply
/// conflict is kube-apiserver's 409.
fn own_fields(op: &Operation, old: Option<&Value>, new: &mut Value) -> ApiResult<()> {
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
fn set_managed_fields(obj: &mut Value, managed: Value) {
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

fn body_ns_or(ns: Option<&str>, def: &ResourceDef) -> String {
    if def.namespaced {
        ns.unwrap_or("").to_string()
    } else {
        String::new()
    }
}

fn with_warnings(mut r: ApiResponse, warnings: Vec<String>) -> ApiResponse {
    for w in warnings {
        r.headers.push((
            "Warning".into(),
            format!("299 - \"{}\"", w.replace('"', "\\\"")),
        ));
    }
    r
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[derive(serde::Serialize)]
struct ListBody<'a> {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Value,
    items: Vec<ListItem<'a>>,
}

/// A stored object serialized as a list item (without kind/apiVersion), without a copy.
struct ListItem<'a>(&'a Value);

impl serde::Serialize for ListItem<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            Value::Object(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "kind" && k != "apiVersion" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

/// A list item: the object without kind/apiVersion, as kube-apiserver's list encoding has it.
pub fn list_item(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    o
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"].clone()})
}

pub fn encode_continue(rv: u64, start: &str) -> String {
    let raw =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

pub fn decode_continue(tok: &str) -> Option<(u64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok.trim_end_matches('='))
        .ok()?;
    let v: Value = serde_json::from_slice(&raw).ok()?;
    if v["v"] != "meta.k8s.io/v1" {
        return None;
    }
    let rv = v["rv"].as_u64()?;
    let start = v["start"].as_str()?.trim_end_matches('\u{0}').to_string();
    Some((rv, start))
}

/// (spec replicas, status replicas, label selector) JSON paths of a scalable resource.
fn scale_paths(def: &ResourceDef) -> (String, String, Option<String>) {
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

fn pointer<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
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
fn selector_string(sel: &Value) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_in_upstream_format() {
        let t = encode_continue(224, "page1");
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjI0LCJzdGFydCI6InBhZ2UxXHUwMDAwIn0"
        );
        assert_eq!(decode_continue(&t), Some((224, "page1".to_string())));
        assert_eq!(decode_continue("garbage"), None);
    }

    #[test]
    fn cluster_ips_come_from_the_range_and_are_not_reused() {
        let mut a = IpAllocator::new("10.96.0.0/12");
        assert_eq!(a.allocate().as_deref(), Some("10.96.0.1"));
        assert!(a.reserve("10.96.0.1").is_err());
        assert!(a.reserve("10.96.0.10").is_ok());
        assert!(a.reserve("192.168.0.1").is_err());
        a.release("10.96.0.10");
        assert!(a.reserve("10.96.0.10").is_ok());
    }

    #[test]
    fn selectors_print_like_upstream() {
        assert_eq!(
            selector_string(&json!({"matchLabels": {"app": "web"}})),
            "app=web"
        );
        assert_eq!(selector_string(&json!({"app": "web"})), "app=web");
    }
}
