//! The alpha APIs a kube-apiserver serves only when asked, and what its feature gates add
//! around them: `--runtime-config` and `--feature-gates` with kube-apiserver's names, for
//! the keys and gates kube-sim honours (any other is refused at start, saying so).
//!
//! - `--runtime-config=networking.k8s.io/v1alpha1=true` serves ServiceCIDR (with status)
//!   and IPAddress, both cluster-scoped; `internal.apiserver.k8s.io/v1alpha1=true` serves
//!   StorageVersion (with status). As kube-apiserver's storage providers do, the runtime
//!   config alone decides what is served; the gates decide what runs around it.
//! - `MultiCIDRServiceAllocator`: the bootstrap policy gains
//!   `system:controller:service-cidrs-controller`, and the server keeps the default
//!   ServiceCIDR `kubernetes` (from `--service-cluster-ip-range`, marked Ready by field
//!   manager `kubernetes-service-cidr-controller`) as its default-service-cidr controller
//!   does; with `networking.k8s.io/v1alpha1` served, the IP allocator writes an IPAddress
//!   (named by the address, labelled as `ipallocator.k8s.io`'s, its parentRef the
//!   Service) for every cluster IP it allocates, refuses an address whose IPAddress exists
//!   and deletes it with the Service. Left out: allocating from ServiceCIDRs other than
//!   `--service-cluster-ip-range`.
//! - `StorageVersionAPI` with `APIServerIdentity` (on by default): the bootstrap policy gains
//!   `system:controller:storage-version-garbage-collector`. Left out: the server's own
//!   StorageVersion records of its resources.
//! - `APIServerIdentity`: the server keeps its identity Lease `apiserver-<hash>` in
//!   `kube-system` (labelled `apiserver.kubernetes.io/identity=kube-apiserver`, renewed
//!   every 10 s, 3600 s duration). Left out: the garbage collection of other servers'
//!   expired identity Leases.
//! - `resource.k8s.io/v1alpha2=true` and `DynamicResourceAllocation`: see [`crate::dra`].
//! - `admissionregistration.k8s.io/v1beta1=true` and `ValidatingAdmissionPolicy`: see
//!   [`crate::admission_policies`].

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::api::Sim;
use crate::kubernetes_service::{apiserver, internal_request};
use crate::resources::{ResourceDef, SubresourceDef};

pub const NETWORKING_ALPHA: &str = "networking.k8s.io/v1alpha1";
pub const INTERNAL_ALPHA: &str = "internal.apiserver.k8s.io/v1alpha1";
/// The gates kube-sim honours, with kube-apiserver 1.29's defaults.
const GATES: &[(&str, bool)] = &[
    ("APIServerIdentity", true),
    (crate::dra::GATE, false),
    ("MultiCIDRServiceAllocator", false),
    ("StorageVersionAPI", false),
    (crate::admission_policies::GATE, false),
];
const RUNTIME_KEYS: &[&str] = &[
    NETWORKING_ALPHA,
    INTERNAL_ALPHA,
    crate::dra::RESOURCE_ALPHA,
    crate::admission_policies::RUNTIME_KEY,
];

pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
const IDENTITY_DURATION_SECONDS: i64 = 3600;
const IDENTITY_RENEW: Duration = Duration::from_secs(10);
const DEFAULT_SERVICE_CIDR: &str = "kubernetes";
const DEFAULT_CIDR_MANAGER: &str = "kubernetes-service-cidr-controller";

/// What `--runtime-config` and `--feature-gates` switched on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatedApis {
    pub runtime: BTreeMap<String, bool>,
    pub gates: BTreeMap<String, bool>,
}

fn parse_bool(key: &str, value: &str, flag: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "t" => Ok(true),
        "false" | "0" | "f" => Ok(false),
        _ => Err(format!("invalid value of {key}={value} in {flag}")),
    }
}

impl GatedApis {
    /// Parses the two flags' values (comma-separated `key=value` pairs, as kube-apiserver
    /// takes them); a key or gate kube-sim cannot honour is an error.
    pub fn parse(runtime_config: &str, feature_gates: &str) -> Result<GatedApis, String> {
        let mut parsed = GatedApis::default();
        for pair in runtime_config
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
            if !RUNTIME_KEYS.contains(&key) {
                return Err(format!(
                    "--runtime-config: kube-sim cannot honour {key:?}; it accepts only {}",
                    RUNTIME_KEYS.join(", ")
                ));
            }
            let on = parse_bool(key, value, "--runtime-config")?;
            parsed.runtime.insert(key.to_string(), on);
        }
        for pair in feature_gates
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!("missing bool value for {pair}"));
            };
            let key = key.trim();
            if !GATES.iter().any(|(name, _)| *name == key) {
                return Err(format!(
                    "--feature-gates: kube-sim cannot honour feature gate {key}; it accepts only {}",
                    GATES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                ));
            }
            let on = parse_bool(key, value.trim(), "--feature-gates")?;
            parsed.gates.insert(key.to_string(), on);
        }
        Ok(parsed)
    }

    pub fn serves(&self, group_version: &str) -> bool {
        self.runtime.get(group_version).copied().unwrap_or(false)
    }

    pub fn gate(&self, name: &str) -> bool {
        self.gates.get(name).copied().unwrap_or_else(|| {
            GATES
                .iter()
                .find(|(n, _)| *n == name)
                .is_some_and(|(_, default)| *default)
        })
    }
}

/// A built-in `storageVersionHash`: the first 8 bytes of the SHA-256 of the storage
/// version's `group/version, Kind=kind`, base64 encoded.
pub(crate) fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine as _;
    let digest = Sha256::digest(format!("{group}/{version}, Kind={kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn def(group: &str, resource: &str, kind: &str, short: &[&str], status: bool) -> ResourceDef {
    alpha_resource(group, "v1alpha1", resource, kind, false, short, status)
}

/// A kind of a gated group version: every verb, and a `status` subresource when asked.
pub(crate) fn alpha_resource(
    group: &str,
    version: &str,
    resource: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
) -> ResourceDef {
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    ResourceDef {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: kind.into(),
        singular: kind.to_ascii_lowercase(),
        namespaced,
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        storage_version_hash: storage_version_hash(group, version, kind),
        subresources: if status {
            vec![SubresourceDef {
                name: "status".into(),
                group: String::new(),
                version: String::new(),
                kind: kind.into(),
                verbs: vec!["get".into(), "patch".into(), "update".into()],
            }]
        } else {
            Vec::new()
        },
        custom: None,
    }
}

/// Serves the group versions `--runtime-config` enabled.
pub fn register(sim: &Sim, apis: &GatedApis) {
    sim.multi_cidr_service_allocator.store(
        apis.gate("MultiCIDRServiceAllocator"),
        std::sync::atomic::Ordering::Relaxed,
    );
    crate::dra::register(sim, apis);
    crate::admission_policies::register(sim, apis);
    if apis.serves(NETWORKING_ALPHA) {
        sim.registry.add_builtin_version(
            "networking.k8s.io",
            "v1alpha1",
            vec![
                def(
                    "networking.k8s.io",
                    "ipaddresses",
                    "IPAddress",
                    &["ip"],
                    false,
                ),
                def(
                    "networking.k8s.io",
                    "servicecidrs",
                    "ServiceCIDR",
                    &[],
                    true,
                ),
            ],
        );
    }
    if apis.serves(INTERNAL_ALPHA) {
        sim.registry.add_builtin_version(
            "internal.apiserver.k8s.io",
            "v1alpha1",
            vec![def(
                "internal.apiserver.k8s.io",
                "storageversions",
                "StorageVersion",
                &[],
                true,
            )],
        );
    }
}

fn bootstrap_metadata(name: &str) -> Value {
    json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
           "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

/// The controller roles the 1.29 bootstrap policy adds under these gates, with their
/// bindings to the controllers' ServiceAccounts, as `(resource, object)` pairs.
pub fn bootstrap_policy(apis: &GatedApis) -> Vec<(&'static str, Value)> {
    let mut roles: Vec<(&str, Vec<Value>)> = Vec::new();
    if apis.gate("MultiCIDRServiceAllocator") {
        let net = "networking.k8s.io";
        roles.push((
            "service-cidrs-controller",
            vec![
                rule(&["get", "list", "watch", "patch", "update"], net, &["servicecidrs"]),
                rule(&["patch", "update"], net, &["servicecidrs/finalizers"]),
                rule(&["patch", "update"], net, &["servicecidrs/status"]),
                rule(&["get", "list", "watch"], net, &["ipaddresses"]),
                json!({"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]}),
            ],
        ));
    }
    if apis.gate("StorageVersionAPI") && apis.gate("APIServerIdentity") {
        let internal = "internal.apiserver.k8s.io";
        roles.push((
            "storage-version-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch"],
                    "coordination.k8s.io",
                    &["leases"],
                ),
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    internal,
                    &["storageversions"],
                ),
                rule(
                    &["get", "patch", "update"],
                    internal,
                    &["storageversions/status"],
                ),
            ],
        ));
    }
    if apis.gate(crate::dra::GATE) {
        roles.push((
            crate::dra::CONTROLLER_ACCOUNT,
            crate::dra::controller_rules(),
        ));
    }
    if apis.gate(crate::admission_policies::GATE) {
        roles.push((
            crate::admission_policies::CONTROLLER_ACCOUNT,
            crate::admission_policies::controller_rules(),
        ));
    }
    let mut out = Vec::new();
    for (account, rules) in &roles {
        let name = format!("system:controller:{account}");
        out.push((
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": bootstrap_metadata(&name), "rules": rules}),
        ));
    }
    for (account, _) in &roles {
        let name = format!("system:controller:{account}");
        out.push((
            "clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": bootstrap_metadata(&name),
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}],
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}),
        ));
    }
    out
}

/// RFC 4648 base32 without padding, lower-cased: how kube-apiserver spells its id.
fn base32_lower(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in data {
        buffer = (buffer << 8) | u32::from(*byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// kube-apiserver's id for a host: `apiserver-` and the base32 of the first 16 bytes of
/// the SHA-256 of its hostname.
pub fn apiserver_id(hostname: &str) -> String {
    let digest = Sha256::digest(hostname.as_bytes());
    format!("apiserver-{}", base32_lower(&digest[..16]))
}

pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kube-sim".into())
}

/// RFC 3339 with microseconds, as a Lease's MicroTime is written.
fn now() -> String {
    crate::api::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// Creates or renews the identity Lease.
fn renew_identity(
    sim: &Sim,
    id: &str,
    holder: &str,
    hostname: &str,
) -> crate::status::ApiResult<()> {
    let Some(def) = sim.registry.lookup("coordination.k8s.io", "v1", "leases") else {
        return Ok(());
    };
    let op = Sim::system_operation(&def);
    match sim.get_object(&def, Some("kube-system"), id) {
        Ok(current) => {
            let mut next = (*current).clone();
            next["spec"]["renewTime"] = json!(now());
            sim.update_object(
                &def,
                Some("kube-system"),
                id,
                None,
                &apiserver(),
                &internal_request(http::Method::PUT),
                Some(&op),
                |_| Ok(next),
            )?;
        }
        Err(e) if e.code == 404 => {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": id, "namespace": "kube-system",
                             "labels": {IDENTITY_LABEL: "kube-apiserver", "kubernetes.io/hostname": hostname}},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": IDENTITY_DURATION_SECONDS,
                         "acquireTime": now(), "renewTime": now()}
            });
            sim.create_object(
                &def,
                Some("kube-system"),
                lease,
                &apiserver(),
                false,
                Some(&op),
            )?;
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Creates the default ServiceCIDR if missing and marks it Ready, as kube-apiserver's
/// default-service-cidr controller does (it leaves a deleted one and a not-Ready one be).
fn reconcile_default_service_cidr(sim: &Sim, cidrs: &[String]) -> crate::status::ApiResult<()> {
    let Some(def) = sim
        .registry
        .lookup("networking.k8s.io", "v1alpha1", "servicecidrs")
    else {
        return Ok(());
    };
    let op = Sim::system_operation(&def);
    let current = match sim.get_object(&def, None, DEFAULT_SERVICE_CIDR) {
        Ok(current) => current,
        Err(e) if e.code == 404 => {
            let object = json!({"apiVersion": NETWORKING_ALPHA, "kind": "ServiceCIDR",
                                "metadata": {"name": DEFAULT_SERVICE_CIDR},
                                "spec": {"cidrs": cidrs}});
            sim.create_object(&def, None, object, &apiserver(), false, Some(&op))?
        }
        Err(e) => return Err(e),
    };
    if !current["metadata"]["deletionTimestamp"].is_null() {
        return Ok(());
    }
    let conditions = current["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if conditions.iter().any(|c| c["type"] == "Ready") || current["spec"]["cidrs"] != json!(cidrs) {
        return Ok(());
    }
    let ready = json!({"type": "Ready", "status": "True", "reason": "",
                       "message": "Kubernetes default Service CIDR is ready",
                       "lastTransitionTime": crate::api::timestamp(crate::api::now())});
    let manager = Sim::operation_by(&def, DEFAULT_CIDR_MANAGER.into(), Some("status"));
    sim.update_object(
        &def,
        None,
        DEFAULT_SERVICE_CIDR,
        Some("status"),
        &apiserver(),
        &internal_request(http::Method::PUT),
        Some(&manager),
        move |latest| {
            let mut next = latest.clone();
            next["status"] = json!({"conditions": [ready]});
            Ok(next)
        },
    )?;
    Ok(())
}

/// Sets up what the gates add at start: the bootstrap roles, the default ServiceCIDR and
/// the identity Lease (the last two kept by [`run`]).
pub fn bootstrap(sim: &Sim, apis: &GatedApis) {
    for (resource, obj) in bootstrap_policy(apis) {
        let Some(def) = sim.registry.lookup(crate::rbac::GROUP, "v1", resource) else {
            continue;
        };
        if let Err(e) = sim.create_object(
            &def,
            None,
            obj,
            &apiserver(),
            false,
            Some(&Sim::system_operation(&def)),
        ) {
            tracing::warn!(error = %e.message, resource, "gated bootstrap policy object not created");
        }
    }
}

/// kube-apiserver's post-start loops these gates turn on: the identity Lease's renewal and
/// the default ServiceCIDR's upkeep.
pub async fn run(sim: Weak<Sim>, apis: GatedApis, service_cidrs: Vec<String>) {
    let identity = apis.gate("APIServerIdentity");
    let default_cidr = apis.gate("MultiCIDRServiceAllocator") && apis.serves(NETWORKING_ALPHA);
    if !identity && !default_cidr {
        return;
    }
    let hostname = hostname();
    let id = apiserver_id(&hostname);
    let holder = format!("{id}_{}", uuid::Uuid::new_v4());
    let mut tick = tokio::time::interval(IDENTITY_RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(sim) = sim.upgrade() else { return };
        if identity {
            if let Err(e) = renew_identity(&sim, &id, &holder, &hostname) {
                tracing::warn!(error = %e.message, "cannot renew the apiserver identity lease");
            }
        }
        if default_cidr {
            if let Err(e) = reconcile_default_service_cidr(&sim, &service_cidrs) {
                tracing::warn!(error = %e.message, "cannot keep the default ServiceCIDR");
            }
        }
        drop(sim);
    }
}

/// The identity loop's handle, kept by the running cluster.
pub fn spawn(sim: &Arc<Sim>, apis: &GatedApis, service_cidrs: &str) -> tokio::task::JoinHandle<()> {
    let cidrs = service_cidrs
        .split(',')
        .map(|c| c.trim().to_string())
        .collect();
    tokio::spawn(run(Arc::downgrade(sim), apis.clone(), cidrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_accept_only_what_kube_sim_honours() {
        let apis = GatedApis::parse(
            "networking.k8s.io/v1alpha1=true,internal.apiserver.k8s.io/v1alpha1",
            "MultiCIDRServiceAllocator=true, StorageVersionAPI=true",
        )
        .unwrap();
        assert!(apis.serves(NETWORKING_ALPHA) && apis.serves(INTERNAL_ALPHA));
        assert!(apis.gate("MultiCIDRServiceAllocator") && apis.gate("APIServerIdentity"));
        let defaults = GatedApis::parse("", "").unwrap();
        assert!(!defaults.serves(NETWORKING_ALPHA));
        assert!(!defaults.gate("StorageVersionAPI") && defaults.gate("APIServerIdentity"));
        assert!(GatedApis::parse("api/all=true", "")
            .unwrap_err()
            .contains("cannot honour \"api/all\""));
        assert!(GatedApis::parse("", "Foo=true")
            .unwrap_err()
            .contains("cannot honour feature gate Foo"));
        assert_eq!(
            GatedApis::parse("", "StorageVersionAPI").unwrap_err(),
            "missing bool value for StorageVersionAPI"
        );
        assert!(GatedApis::parse(&format!("{NETWORKING_ALPHA}=maybe"), "").is_err());
    }

    #[test]
    fn roles_follow_the_gates() {
        let names = |rt: &str, gates: &str| -> Vec<String> {
            bootstrap_policy(&GatedApis::parse(rt, gates).unwrap())
                .into_iter()
                .map(|(r, o)| format!("{r}/{}", o["metadata"]["name"].as_str().unwrap_or("")))
                .collect()
        };
        assert!(names("", "").is_empty());
        assert_eq!(
            names("", "MultiCIDRServiceAllocator=true"),
            [
                "clusterroles/system:controller:service-cidrs-controller",
                "clusterrolebindings/system:controller:service-cidrs-controller"
            ]
        );
        assert!(names("", "StorageVersionAPI=true,APIServerIdentity=false").is_empty());
        assert_eq!(names("", "StorageVersionAPI=true").len(), 2);
    }

    #[test]
    fn the_identity_is_the_hostname_hash_in_lower_base32() {
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        let id = apiserver_id("node-1");
        assert!(
            id.starts_with("apiserver-") && id.len() == "apiserver-".len() + 26,
            "{id}"
        );
    }
}
