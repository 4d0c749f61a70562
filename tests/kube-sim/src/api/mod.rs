//! The request handlers: what kube-apiserver's generic registry, its admission plugins and
//! the per-kind strategies do between an HTTP request and the store. One `Sim` holds the
//! whole cluster state; `Sim::handle` answers one authenticated request.
//!
//! One file per concern: `routing` (a resource request to its verb, body decoding), `read`
//! (get, list, Table), `create`, `update`, `patch` (including server-side apply), `delete`,
//! `subresources` (scale, binding, eviction, token) and `reviews`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::faults::Faults;
use crate::metrics::Metrics;
use crate::request::{ApiResponse, User};
use crate::resources::{Registry, ResourceDef};
use crate::store::Store;
use rkcm_gocompat::{FieldSelector, LabelSelector};

mod create;
mod delete;
mod ip_allocator;
mod patch;
pub mod port_allocator;
mod read;
mod reviews;
mod routing;
mod service_alloc;
mod subresources;
#[cfg(test)]
mod tests;
mod update;

use ip_allocator::IpAllocator;
use port_allocator::PortAllocator;

pub use read::{decode_continue, encode_continue, list_item, partial_metadata};

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
    /// Service node ports from `--service-node-port-range`.
    node_ports: Mutex<PortAllocator>,
    /// The `MultiCIDRServiceAllocator` gate: cluster IPs get `IPAddress` objects (when
    /// `networking.k8s.io/v1alpha1` is served).
    pub multi_cidr_service_allocator: std::sync::atomic::AtomicBool,
    /// The key that verifies legacy ServiceAccount tokens (`sa.pub`), once set.
    service_account_key: RwLock<Option<Arc<crate::legacy_tokens::ServiceAccountKey>>>,
    /// When the legacy-token-tracking ConfigMap was last created (upstream's rate limit).
    pub(crate) tracking_created: Mutex<Option<std::time::Instant>>,
    /// The `DynamicResourceAllocation` gate: whether pods keep their resource claims
    /// ([`crate::dra`]).
    pub dynamic_resource_allocation: std::sync::atomic::AtomicBool,
    /// The `ValidatingAdmissionPolicy` gate: whether policies are enforced.
    pub validating_admission_policy: std::sync::atomic::AtomicBool,
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
            node_ports: Mutex::new(PortAllocator::new(port_allocator::PortRange {
                base: 30000,
                size: 2768,
            })),
            multi_cidr_service_allocator: Default::default(),
            service_account_key: RwLock::new(None),
            tracking_created: Mutex::new(None),
            dynamic_resource_allocation: Default::default(),
            validating_admission_policy: Default::default(),
        }
    }

    /// Sets `--service-node-port-range` (`30000-32767` unless set); call before any Service
    /// is written.
    pub fn set_service_node_port_range(&self, range: &str) -> Result<(), String> {
        let range = port_allocator::PortRange::parse(range)?;
        *self.node_ports() = PortAllocator::new(range);
        Ok(())
    }

    /// The node port range in use, as the flag prints it.
    pub fn service_node_port_range(&self) -> String {
        self.node_ports().range().to_string()
    }

    fn node_ports(&self) -> std::sync::MutexGuard<'_, PortAllocator> {
        self.node_ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cluster_ips(&self) -> std::sync::MutexGuard<'_, IpAllocator> {
        self.ips.lock().unwrap_or_else(|p| p.into_inner())
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
