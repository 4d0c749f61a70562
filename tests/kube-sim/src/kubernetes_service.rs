//! kube-apiserver's bootstrap controller for the `default/kubernetes` Service
//! (pkg/controlplane/controller/kubernetesservice with the lease endpoint reconciler and the
//! endpoints adapter of pkg/controlplane/reconcilers), for kube-sim's one API server.
//!
//! Every [`ENDPOINT_INTERVAL`] (and once at start) it:
//! - creates the Service `default/kubernetes` if it is missing (`clusterIP` the first address
//!   of the service range, port `https` 443 → the serving port, `SingleStack`); an existing
//!   Service is never changed (upstream stopped reconciling it in 1.17);
//! - makes the Endpoints `default/kubernetes` list the advertised address: one subset whose
//!   ready addresses are exactly `[{ip: ADVERTISED}]`, ports `[{name: https, port: SERVING
//!   PORT, protocol: TCP}]` when it (re)writes the whole subset, and the label
//!   `endpointslice.kubernetes.io/skip-mirror: "true"` (so the mirroring controller leaves it
//!   alone). As upstream's periodic pass, it does not put back ports someone changed while
//!   the subset is otherwise right (only a stopping server's final pass does);
//! - keeps the EndpointSlice `default/kubernetes` equal to that Endpoints (addressType
//!   IPv4 or, for IPv6 addresses only, IPv6; label `kubernetes.io/service-name: kubernetes`
//!   and nothing else; ready endpoints `{addresses: [ip], conditions: {ready: true}}`, the
//!   Endpoints' ports), replacing the whole object when its endpoints, ports or labels differ,
//!   and deleting and re-creating it when its addressType differs.
//!
//! It writes as kube-apiserver does through its loopback client: with the API's own
//! validation, as `system:apiserver`, field manager `kube-apiserver`. A loopback address
//! cannot be advertised (Endpoints validation refuses it), so kube-sim advertises its listen
//! address only when that is neither loopback nor unspecified, and otherwise
//! [`DEFAULT_ADVERTISE_ADDRESS`] (kube-apiserver picks the host's default interface there).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde_json::{json, Value};

use crate::api::Sim;
use crate::request::{ApiRequest, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::validation::endpoints::{labels_differ, semantic_eq};

/// How often the controller looks (kube-apiserver's `DefaultEndpointReconcilerInterval`).
pub const ENDPOINT_INTERVAL: Duration = Duration::from_secs(10);

/// What kube-sim advertises when it listens on a loopback or unspecified address: the
/// address a kind control-plane node has.
pub const DEFAULT_ADVERTISE_ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(172, 18, 0, 2));

/// The label that keeps the endpointslice-mirroring controller away from an Endpoints.
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// The label naming an EndpointSlice's Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";
const PORT_NAME: &str = "https";

/// The address kube-apiserver would advertise for a server listening on `listen`.
pub fn advertise_address(configured: Option<IpAddr>, listen: SocketAddr) -> SocketAddr {
    let ip = configured
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or_else(|| {
            let ip = listen.ip();
            if ip.is_unspecified() || ip.is_loopback() {
                DEFAULT_ADVERTISE_ADDRESS
            } else {
                ip
            }
        });
    SocketAddr::new(ip, listen.port())
}

/// kube-apiserver's own identity, as its loopback client writes (the other kube-sim
/// parts that play the API server's own controllers use it too).
pub(crate) fn apiserver() -> User {
    User {
        name: "system:apiserver".into(),
        uid: String::new(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    }
}

/// A write kube-apiserver makes through its loopback client.
pub(crate) fn internal_request(method: http::Method) -> ApiRequest {
    ApiRequest {
        method,
        path: String::new(),
        query: Vec::new(),
        accept: "application/json".into(),
        content_type: "application/json".into(),
        user_agent: "kube-apiserver".into(),
        body: Default::default(),
        user: Some(apiserver()),
    }
}

fn body_of(resp: crate::request::ApiResponse) -> Value {
    match resp.body {
        crate::request::Body::Json(v) => v,
        _ => Value::Null,
    }
}

/// The Endpoints ports the controller writes.
fn endpoint_ports(port: u16) -> Value {
    json!([{"name": PORT_NAME, "port": port, "protocol": "TCP"}])
}

/// `setSkipMirrorTrue`: whether the label had to be set.
fn set_skip_mirror(e: &mut Value) -> bool {
    if e["metadata"]["labels"][LABEL_SKIP_MIRROR] == "true" {
        return false;
    }
    if !e["metadata"]["labels"].is_object() {
        e["metadata"]["labels"] = json!({});
    }
    e["metadata"]["labels"][LABEL_SKIP_MIRROR] = json!("true");
    true
}

/// `checkEndpointSubsetFormatWithLease` without port checks: (exactly one subset, its ready
/// addresses are exactly the advertised one).
fn check_format(e: &Value, ip: &str) -> (bool, bool) {
    let subsets = e["subsets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if subsets.len() != 1 {
        return (false, false);
    }
    let addresses = subsets[0]["addresses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let ip_ok = addresses.len() == 1 && addresses[0]["ip"] == ip;
    (true, ip_ok)
}

/// `RepackSubsets` for the one subset the controller keeps: addresses deduplicated by IP
/// and target uid (an address listed both ready and not ready is not ready), each list
/// sorted by IP then uid.
fn repack(subset: &mut Value) {
    let key = |a: &Value| {
        (
            a["ip"].as_str().unwrap_or("").to_string(),
            a["targetRef"]["uid"].as_str().unwrap_or("").to_string(),
        )
    };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let mut not_ready: Vec<Value> = Vec::new();
    for a in list(&subset["notReadyAddresses"]) {
        if !not_ready.iter().any(|b| key(b) == key(&a)) {
            not_ready.push(a);
        }
    }
    let mut ready: Vec<Value> = Vec::new();
    for a in list(&subset["addresses"]) {
        if !ready.iter().chain(&not_ready).any(|b| key(b) == key(&a)) {
            ready.push(a);
        }
    }
    ready.sort_by_key(|a| key(a));
    not_ready.sort_by_key(|a| key(a));
    let Some(m) = subset.as_object_mut() else {
        return;
    };
    for (field, addresses) in [("addresses", ready), ("notReadyAddresses", not_ready)] {
        if addresses.is_empty() {
            m.remove(field);
        } else {
            m.insert(field.into(), Value::Array(addresses));
        }
    }
}

fn is_ipv6(ip: &str) -> bool {
    matches!(
        crate::validation::endpoints::parse_ip_sloppy(ip),
        Some(IpAddr::V6(_))
    )
}

/// `endpointSliceFromEndpoints`: the slice the adapter keeps next to the Endpoints.
fn slice_from_endpoints(e: &Value) -> Value {
    let subset = e["subsets"].get(0).cloned().unwrap_or(Value::Null);
    let addresses = |field: &str| subset[field].as_array().cloned().unwrap_or_default();
    let (ready, not_ready) = (addresses("addresses"), addresses("notReadyAddresses"));
    let all_v6 = !(ready.is_empty() && not_ready.is_empty())
        && ready
            .iter()
            .chain(&not_ready)
            .all(|a| is_ipv6(a["ip"].as_str().unwrap_or("")));
    let mut endpoints = Vec::new();
    for (list, is_ready) in [(&ready, true), (&not_ready, false)] {
        for a in list {
            let ip = a["ip"].as_str().unwrap_or("");
            if is_ipv6(ip) != all_v6 {
                continue;
            }
            let mut ep = json!({"addresses": [ip], "conditions": {"ready": is_ready}});
            if !a["targetRef"].is_null() {
                ep["targetRef"] = a["targetRef"].clone();
            }
            if !a["nodeName"].is_null() {
                ep["nodeName"] = a["nodeName"].clone();
            }
            endpoints.push(ep);
        }
    }
    let ports: Vec<Value> = subset["ports"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| json!({"name": p["name"], "port": p["port"], "protocol": p["protocol"]}))
                .collect()
        })
        .unwrap_or_default();
    let name = e["metadata"]["name"].as_str().unwrap_or(NAME);
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL_SERVICE_NAME: name}},
        "addressType": if all_v6 { "IPv6" } else { "IPv4" },
        "endpoints": endpoints,
        "ports": if ports.is_empty() { Value::Null } else { Value::Array(ports) },
    })
}

impl Sim {
    fn served(&self, group: &str, resource: &str) -> std::sync::Arc<ResourceDef> {
        self.registry
            .lookup(group, "v1", resource)
            .expect("built-in resource is registered")
    }

    fn get_opt(&self, def: &ResourceDef, name: &str) -> ApiResult<Option<Value>> {
        match self.get_object(def, Some(NAMESPACE), name) {
            Ok(o) => Ok(Some((*o).clone())),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_as_apiserver(
        &self,
        def: &std::sync::Arc<ResourceDef>,
        obj: Value,
    ) -> ApiResult<Value> {
        let op = Self::system_operation(def);
        let created =
            self.create_object(def, Some(NAMESPACE), obj, &apiserver(), false, Some(&op))?;
        Ok((*created).clone())
    }

    fn update_as_apiserver(
        &self,
        def: &std::sync::Arc<ResourceDef>,
        obj: Value,
    ) -> ApiResult<Value> {
        let name = obj["metadata"]["name"].as_str().unwrap_or(NAME).to_string();
        let op = Self::system_operation(def);
        let resp = self.update_object(
            def,
            Some(NAMESPACE),
            &name,
            None,
            &apiserver(),
            &internal_request(http::Method::PUT),
            Some(&op),
            |_| Ok(obj),
        )?;
        Ok(body_of(resp))
    }

    /// One pass of kube-apiserver's bootstrap controller for `default/kubernetes` (see the
    /// module documentation), advertising `advertise` (address and serving port).
    pub fn reconcile_kubernetes_service(&self, advertise: SocketAddr) -> ApiResult<()> {
        self.ensure_kubernetes_service(advertise.port())?;
        self.reconcile_kubernetes_endpoints(advertise)
    }

    /// `CreateOrUpdateMasterServiceIfNeeded` without reconciling an existing Service.
    fn ensure_kubernetes_service(&self, port: u16) -> ApiResult<()> {
        let def = self.served("", "services");
        if self.get_opt(&def, NAME)?.is_some() {
            return Ok(());
        }
        let svc = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                         "labels": {"provider": "kubernetes", "component": "apiserver"}},
            "spec": {
                "ports": [{"name": PORT_NAME, "protocol": "TCP", "port": 443, "targetPort": port}],
                "clusterIP": self.first_service_ip(),
                "ipFamilyPolicy": "SingleStack",
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        });
        match self.create_as_apiserver(&def, svc) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The lease reconciler's `doReconcile` for one API server, then the adapter's slice.
    fn reconcile_kubernetes_endpoints(&self, advertise: SocketAddr) -> ApiResult<()> {
        let def = self.served("", "endpoints");
        let ip = advertise.ip().to_string();
        let current = self.get_opt(&def, NAME)?;
        let create = current.is_none();
        let mut e = current.unwrap_or_else(|| {
            json!({"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": NAME, "namespace": NAMESPACE}})
        });
        let skip_mirror_changed = set_skip_mirror(&mut e);
        let (format_ok, ip_ok) = check_format(&e, &ip);
        if !skip_mirror_changed && format_ok && ip_ok {
            return self.ensure_kubernetes_slice(&e);
        }
        if !format_ok {
            e["subsets"] = json!([{"addresses": [], "ports": endpoint_ports(advertise.port())}]);
        }
        if !format_ok || !ip_ok {
            e["subsets"][0]["addresses"] = json!([{"ip": ip}]);
            repack(&mut e["subsets"][0]);
        }
        tracing::debug!(ip = %ip, "resetting the endpoints of the kubernetes Service");
        let stored = if create {
            match self.create_as_apiserver(&def, e) {
                Ok(stored) => stored,
                // Someone else made it meanwhile: the next pass looks at it.
                Err(err) if err.code == 409 => return Ok(()),
                Err(err) => return Err(err),
            }
        } else {
            self.update_as_apiserver(&def, e)?
        };
        self.ensure_kubernetes_slice(&stored)
    }

    /// `EnsureEndpointSliceFromEndpoints`.
    fn ensure_kubernetes_slice(&self, endpoints: &Value) -> ApiResult<()> {
        let def = self.served("discovery.k8s.io", "endpointslices");
        let want = slice_from_endpoints(endpoints);
        let Some(current) = self.get_opt(&def, NAME)? else {
            return match self.create_as_apiserver(&def, want) {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            };
        };
        if current["addressType"] != want["addressType"] {
            self.delete_object(&def, Some(NAMESPACE), NAME)?;
            self.create_as_apiserver(&def, want)?;
            return Ok(());
        }
        if semantic_eq(&current["endpoints"], &want["endpoints"])
            && semantic_eq(&current["ports"], &want["ports"])
            && !labels_differ(&current, &want)
        {
            return Ok(());
        }
        self.update_as_apiserver(&def, want).map(|_| ())
    }
}

/// Run the controller until `sim` is gone: a pass every [`ENDPOINT_INTERVAL`] (the first
/// pass is the caller's, at start).
pub async fn run(sim: std::sync::Weak<Sim>, advertise: SocketAddr) {
    let mut tick = tokio::time::interval(ENDPOINT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(sim) = sim.upgrade() else { return };
        if let Err(e) = sim.reconcile_kubernetes_service(advertise) {
            log_failure(&e);
        }
    }
}

pub(crate) fn log_failure(e: &ApiError) {
    tracing::warn!(code = e.code, error = %e.message, "unable to sync kubernetes service");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_unspecified_listeners_advertise_the_host_address() {
        let listen = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            advertise_address(None, listen("127.0.0.1:6443")),
            listen("172.18.0.2:6443")
        );
        assert_eq!(
            advertise_address(None, listen("0.0.0.0:443")),
            listen("172.18.0.2:443")
        );
        assert_eq!(
            advertise_address(None, listen("192.168.1.5:6443")),
            listen("192.168.1.5:6443")
        );
        assert_eq!(
            advertise_address(Some("10.1.2.3".parse().unwrap()), listen("127.0.0.1:1")),
            listen("10.1.2.3:1")
        );
    }

    #[test]
    fn the_slice_follows_the_endpoints() {
        let e = json!({"metadata": {"name": "kubernetes", "labels": {LABEL_SKIP_MIRROR: "true"}},
                       "subsets": [{"addresses": [{"ip": "10.0.0.5", "nodeName": "n"}],
                                    "notReadyAddresses": [{"ip": "10.0.0.6"}, {"ip": "2001:db8::1"}],
                                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]});
        assert_eq!(
            slice_from_endpoints(&e),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "kubernetes", "namespace": "default",
                                "labels": {"kubernetes.io/service-name": "kubernetes"}},
                   "addressType": "IPv4",
                   "endpoints": [
                       {"addresses": ["10.0.0.5"], "conditions": {"ready": true}, "nodeName": "n"},
                       {"addresses": ["10.0.0.6"], "conditions": {"ready": false}}],
                   "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
        );
        let v6 = json!({"metadata": {"name": "kubernetes"},
                        "subsets": [{"addresses": [{"ip": "2001:db8::1"}]}]});
        let s = slice_from_endpoints(&v6);
        assert_eq!(s["addressType"], "IPv6");
        assert_eq!(s["ports"], Value::Null);
        assert_eq!(s["endpoints"][0]["addresses"], json!(["2001:db8::1"]));
    }

    #[test]
    fn subsets_are_checked_and_repacked_as_the_lease_reconciler_does() {
        let e = json!({"subsets": [{"addresses": [{"ip": "10.0.0.5"}]}]});
        assert_eq!(check_format(&e, "10.0.0.5"), (true, true));
        assert_eq!(check_format(&e, "10.0.0.6"), (true, false));
        assert_eq!(check_format(&json!({}), "10.0.0.5"), (false, false));
        let two = json!({"subsets": [{"addresses": [{"ip": "10.0.0.5"}, {"ip": "10.0.0.6"}]}]});
        assert_eq!(check_format(&two, "10.0.0.5"), (true, false));

        let mut subset = json!({"addresses": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.9"}],
                                "notReadyAddresses": [{"ip": "10.0.0.1"}]});
        repack(&mut subset);
        assert_eq!(
            subset,
            json!({"addresses": [{"ip": "10.0.0.9"}], "notReadyAddresses": [{"ip": "10.0.0.1"}]})
        );

        let mut e = json!({"metadata": {}});
        assert!(set_skip_mirror(&mut e));
        assert!(!set_skip_mirror(&mut e));
        assert_eq!(e["metadata"]["labels"], json!({LABEL_SKIP_MIRROR: "true"}));
    }
}
