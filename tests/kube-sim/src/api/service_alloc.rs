//! What kube-apiserver's Service storage allocates around a write (`BeginCreate` /
//! `BeginUpdate`, ahead of the strategy's validation): cluster IPs, node ports and the
//! health-check node port, as a transaction released again when the write fails; and
//! under `MultiCIDRServiceAllocator` the `IPAddress` object of every cluster IP.
//! Single-stack IPv4 only, as kube-sim's cluster is.

use serde_json::{json, Value};

use super::patch::own_fields;
use super::port_allocator::PortError;
use super::{meta_mut, now, str_at, timestamp, Sim};
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::{ResKey, Txn};
use crate::validation::{self, FieldCause};

const NETWORKING: &str = "networking.k8s.io";
const IP_FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
const IP_ALLOCATOR: &str = "ipallocator.k8s.io";

fn svc_type(svc: &Value) -> &str {
    svc["spec"]["type"].as_str().unwrap_or("ClusterIP")
}

fn needs_cluster_ip(svc: &Value) -> bool {
    svc_type(svc) != "ExternalName"
}

fn needs_node_port(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

/// Whether ports without a node port get one (`allocateLoadBalancerNodePorts`).
fn should_allocate_node_ports(svc: &Value) -> bool {
    match svc_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc["spec"]["allocateLoadBalancerNodePorts"]
            .as_bool()
            .unwrap_or(true),
        _ => false,
    }
}

/// A LoadBalancer Service with `externalTrafficPolicy: Local`.
fn needs_health_check(svc: &Value) -> bool {
    svc_type(svc) == "LoadBalancer" && svc["spec"]["externalTrafficPolicy"] == "Local"
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn ports(svc: &Value) -> &[Value] {
    svc["spec"]["ports"].as_array().map_or(&[], Vec::as_slice)
}

fn ports_mut(svc: &mut Value) -> &mut [Value] {
    match svc["spec"].get_mut("ports").and_then(Value::as_array_mut) {
        Some(p) => p.as_mut_slice(),
        None => &mut [],
    }
}

fn set_node_port(port: &mut Value, node_port: i64) {
    if let Some(p) = port.as_object_mut() {
        if node_port == 0 {
            p.remove("nodePort");
        } else {
            p.insert("nodePort".into(), json!(node_port));
        }
    }
}

fn set_health_check_node_port(svc: &mut Value, port: i64) {
    if let Some(spec) = svc["spec"].as_object_mut() {
        if port == 0 {
            spec.remove("healthCheckNodePort");
        } else {
            spec.insert("healthCheckNodePort".into(), json!(port));
        }
    }
}

/// The non-zero node ports of a Service, in port order.
fn node_ports(svc: &Value) -> Vec<i64> {
    ports(svc)
        .iter()
        .map(|p| int(&p["nodePort"]))
        .filter(|n| *n != 0)
        .collect()
}

fn cluster_ip(svc: &Value) -> &str {
    svc["spec"]["clusterIP"].as_str().unwrap_or("")
}

fn is_headless(svc: &Value) -> bool {
    svc["spec"]["clusterIPs"][0] == "None" || cluster_ip(svc) == "None"
}

/// The update fills in what the client left out and was allocated before
/// (`patchAllocatedValues`): cluster IPs, node ports (by port name, unless the port is
/// used by another port of the new spec) and the health-check node port.
pub(super) fn patch_allocated_values(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        if cluster_ip(new).is_empty() && !old["spec"]["clusterIP"].is_null() {
            new["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
        }
        let empty = new["spec"]["clusterIPs"]
            .as_array()
            .is_none_or(|a| a.is_empty());
        if empty
            && old["spec"]["clusterIPs"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        {
            new["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
        }
    }
    if needs_node_port(old) && needs_node_port(new) {
        let old_ports = node_ports(old);
        let new_ports = node_ports(new);
        let used: Vec<i64> = old_ports
            .into_iter()
            .filter(|n| new_ports.contains(n))
            .collect();
        let by_name = |name: &str| {
            ports(old)
                .iter()
                .filter(|p| p["name"].as_str().unwrap_or("") == name)
                .map(|p| int(&p["nodePort"]))
                .next_back()
                .unwrap_or(0)
        };
        let mut fill = Vec::new();
        for (i, p) in ports(new).iter().enumerate() {
            if int(&p["nodePort"]) == 0 {
                let old_value = by_name(p["name"].as_str().unwrap_or(""));
                if old_value != 0 && !used.contains(&old_value) {
                    fill.push((i, old_value));
                }
            }
        }
        let ports = ports_mut(new);
        for (i, n) in fill {
            set_node_port(&mut ports[i], n);
        }
    }
    if needs_health_check(old) && needs_health_check(new) {
        let hc = int(&new["spec"]["healthCheckNodePort"]);
        if hc == 0 {
            let old_hc = int(&old["spec"]["healthCheckNodePort"]);
            set_health_check_node_port(new, old_hc);
        }
    }
}

/// The update strategy clears what the new type does not use, when the client kept the
/// old values (`dropTypeDependentFields`).
pub(super) fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let spec_of = |v: &Value, k: &str| v["spec"][k].clone();
    let remove = |v: &mut Value, k: &str| {
        if let Some(s) = v["spec"].as_object_mut() {
            s.remove(k);
        }
    };
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        if spec_of(old, "clusterIP") == spec_of(new, "clusterIP")
            && spec_of(old, "clusterIPs") == spec_of(new, "clusterIPs")
        {
            remove(new, "clusterIP");
            remove(new, "clusterIPs");
        }
        if spec_of(old, "ipFamilies") == spec_of(new, "ipFamilies") {
            remove(new, "ipFamilies");
        }
        if spec_of(old, "ipFamilyPolicy") == spec_of(new, "ipFamilyPolicy") {
            remove(new, "ipFamilyPolicy");
        }
    }
    if needs_node_port(old) && !needs_node_port(new) {
        let old_ports = node_ports(old);
        if node_ports(new).iter().all(|n| old_ports.contains(n)) {
            for p in ports_mut(new) {
                set_node_port(p, 0);
            }
        }
    }
    if needs_health_check(old)
        && !needs_health_check(new)
        && int(&old["spec"]["healthCheckNodePort"]) == int(&new["spec"]["healthCheckNodePort"])
    {
        set_health_check_node_port(new, 0);
    }
    if svc_type(old) == "LoadBalancer" && svc_type(new) != "LoadBalancer" {
        let (a, b) = (
            spec_of(old, "allocateLoadBalancerNodePorts"),
            spec_of(new, "allocateLoadBalancerNodePorts"),
        );
        if !a.is_null() && a == b {
            remove(new, "allocateLoadBalancerNodePorts");
        }
        if spec_of(old, "loadBalancerClass") == spec_of(new, "loadBalancerClass") {
            remove(new, "loadBalancerClass");
        }
    }
    let externally_accessible = |v: &Value| {
        needs_node_port(v)
            || (svc_type(v) == "ClusterIP"
                && v["spec"]["externalIPs"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty()))
    };
    if externally_accessible(old)
        && !externally_accessible(new)
        && spec_of(old, "externalTrafficPolicy") == spec_of(new, "externalTrafficPolicy")
    {
        remove(new, "externalTrafficPolicy");
    }
    if svc_type(new) != "LoadBalancer" && !new["status"]["loadBalancer"].is_null() {
        new["status"]["loadBalancer"] = json!({});
    }
}

/// What one write took and gives back: taken resources are released when it is dropped
/// uncommitted; released ones go only at [`ServiceTxn::commit`].
pub(super) struct ServiceTxn<'s> {
    sim: &'s Sim,
    ports_taken: Vec<i64>,
    ports_freed: Vec<i64>,
    ip_taken: Option<String>,
    ip_freed: Option<String>,
    done: bool,
}

impl Drop for ServiceTxn<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut np = self.sim.node_ports();
        for p in &self.ports_taken {
            np.release(*p);
        }
        drop(np);
        if let Some(ip) = &self.ip_taken {
            self.sim.cluster_ips().release(ip);
        }
    }
}

impl ServiceTxn<'_> {
    /// Keeps what was taken and gives back what the write freed; a dry run keeps nothing.
    /// Under `MultiCIDRServiceAllocator` the cluster IPs' `IPAddress` objects follow.
    pub(super) fn commit(mut self, t: &mut Txn, svc: &Value, dry_run: bool) {
        if dry_run {
            return;
        }
        self.done = true;
        let mut np = self.sim.node_ports();
        for p in &self.ports_freed {
            np.release(*p);
        }
        drop(np);
        if let Some(ip) = &self.ip_freed {
            self.sim.release_cluster_ip(t, ip);
        }
        if let Some(ip) = &self.ip_taken {
            self.sim.write_ip_address(t, ip, svc);
        }
    }

    fn take_port(&mut self, port: i64) -> Result<(), PortError> {
        self.sim.node_ports().allocate(port)?;
        self.ports_taken.push(port);
        Ok(())
    }

    fn take_next_port(&mut self) -> Result<i64, PortError> {
        let port = self.sim.node_ports().allocate_next()?;
        self.ports_taken.push(port);
        Ok(port)
    }
}

fn internal(message: String) -> ApiError {
    ApiError::internal(format!("Internal error occurred: {message}"))
}

fn invalid_node_port(name: &str, i: usize, port: i64, e: &PortError) -> ApiError {
    ApiError::invalid(
        Subject::new("", "Service", name),
        &[FieldCause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {port}: {e}"),
            field: format!("spec.ports[{i}].nodePort"),
        }],
    )
}

impl Sim {
    fn ip_address_key() -> ResKey {
        ResKey::new(NETWORKING, "ipaddresses")
    }

    /// Whether cluster IPs are recorded as `IPAddress` objects (the gate is on and the API
    /// served).
    fn ip_address_objects(&self) -> bool {
        self.multi_cidr_service_allocator
            .load(std::sync::atomic::Ordering::Relaxed)
            && self
                .registry
                .lookup(NETWORKING, "v1alpha1", "ipaddresses")
                .is_some()
    }

    /// Allocates for a new Service (`allocateCreate`): its cluster IP, then its node
    /// ports, then its health-check node port.
    pub(super) fn allocate_service_create(
        &self,
        t: &Txn,
        svc: &mut Value,
        name: &str,
    ) -> ApiResult<ServiceTxn<'_>> {
        let mut txn = self.service_txn();
        if needs_cluster_ip(svc) {
            self.allocate_cluster_ip(t, svc, name, &mut txn)?;
        }
        if needs_node_port(svc) {
            init_node_ports(svc, name, &mut txn)?;
        }
        if needs_health_check(svc) {
            allocate_health_check_port(svc, &mut txn)?;
        }
        Ok(txn)
    }

    /// Allocates and frees for an update (`BeginUpdate`), then clears what the new type
    /// does not use.
    pub(super) fn allocate_service_update(
        &self,
        t: &Txn,
        new: &mut Value,
        old: &Value,
        name: &str,
    ) -> ApiResult<ServiceTxn<'_>> {
        patch_allocated_values(new, old);
        let mut txn = self.service_txn();
        if !needs_cluster_ip(old) && needs_cluster_ip(new) {
            self.allocate_cluster_ip(t, new, name, &mut txn)?;
        } else if needs_cluster_ip(old) && !needs_cluster_ip(new) && !is_headless(old) {
            txn.ip_freed = Some(cluster_ip(old).to_string()).filter(|ip| !ip.is_empty());
        }
        if needs_node_port(old) && matches!(svc_type(new), "ExternalName" | "ClusterIP") {
            txn.ports_freed.extend(node_ports(old));
        }
        if needs_node_port(new) {
            update_node_ports(new, old, name, &mut txn)?;
        }
        match (needs_health_check(old), needs_health_check(new)) {
            (false, true) => allocate_health_check_port(new, &mut txn)?,
            (true, false) => {
                let hc = int(&old["spec"]["healthCheckNodePort"]);
                if hc != 0 {
                    txn.ports_freed.push(hc);
                }
            }
            _ => {}
        }
        drop_type_dependent_fields(new, old);
        Ok(txn)
    }

    /// Gives back what a deleted Service held (`releaseAllocatedResources`).
    pub(super) fn release_service(&self, t: &mut Txn, svc: &Value) {
        if needs_cluster_ip(svc) && !is_headless(svc) && !cluster_ip(svc).is_empty() {
            self.release_cluster_ip(t, cluster_ip(svc));
        }
        let mut np = self.node_ports();
        for p in node_ports(svc) {
            np.release(p);
        }
        let hc = int(&svc["spec"]["healthCheckNodePort"]);
        if needs_health_check(svc) && hc > 0 {
            np.release(hc);
        }
    }

    fn service_txn(&self) -> ServiceTxn<'_> {
        ServiceTxn {
            sim: self,
            ports_taken: Vec::new(),
            ports_freed: Vec::new(),
            ip_taken: None,
            ip_freed: None,
            done: false,
        }
    }

    fn release_cluster_ip(&self, t: &mut Txn, ip: &str) {
        self.cluster_ips().release(ip);
        if self.ip_address_objects() {
            t.remove(&Self::ip_address_key(), "", ip);
        }
    }

    /// The `IPAddress` the IP allocator writes for a Service's cluster IP.
    fn write_ip_address(&self, t: &mut Txn, ip: &str, svc: &Value) {
        let Some(def) = self
            .registry
            .lookup(NETWORKING, "v1alpha1", "ipaddresses")
            .filter(|_| self.ip_address_objects())
        else {
            return;
        };
        let mut obj = json!({
            "apiVersion": def.api_version(), "kind": def.kind,
            "metadata": {"name": ip, "labels": {IP_FAMILY_LABEL: "IPv4", MANAGED_BY_LABEL: IP_ALLOCATOR}},
            "spec": {"parentRef": {"resource": "services",
                                   "namespace": str_at(svc, &["metadata", "namespace"]).unwrap_or(""),
                                   "name": str_at(svc, &["metadata", "name"]).unwrap_or("")}},
        });
        if own_fields(&Self::system_operation(&def), None, &mut obj).is_err() {
            meta_mut(&mut obj).remove("managedFields");
        }
        let m = meta_mut(&mut obj);
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(timestamp(now())));
        t.put(&Self::ip_address_key(), obj);
    }

    /// The Service's cluster IP: the requested one, or the next free one. Under the gate
    /// an address whose `IPAddress` exists is taken.
    fn allocate_cluster_ip(
        &self,
        t: &Txn,
        svc: &mut Value,
        name: &str,
        txn: &mut ServiceTxn<'_>,
    ) -> ApiResult<()> {
        let requested = cluster_ip(svc).to_string();
        let objects = self.ip_address_objects();
        let recorded = |ip: &str| objects && t.get(&Self::ip_address_key(), "", ip).is_some();
        let mut ips = self.cluster_ips();
        let ip = match requested.as_str() {
            "None" => "None".to_string(),
            "" => {
                let mut skipped = Vec::new();
                let found = loop {
                    match ips.allocate() {
                        Some(ip) if recorded(&ip) => skipped.push(ip),
                        other => break other,
                    }
                };
                for ip in &skipped {
                    ips.release(ip);
                }
                let ip = found.ok_or_else(|| {
                    internal("failed to allocate a serviceIP: range is full".into())
                })?;
                txn.ip_taken = Some(ip.clone());
                ip
            }
            ip => {
                let taken = ips.reserve(ip).and_then(|()| {
                    if recorded(ip) {
                        ips.release(ip);
                        Err("provided IP is already allocated".to_string())
                    } else {
                        Ok(())
                    }
                });
                taken.map_err(|why| {
                    ApiError::invalid(
                        Subject::new("", "Service", name),
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
                txn.ip_taken = Some(ip.to_string());
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
}

/// The node ports of a new NodePort or LoadBalancer Service (`initNodePorts`): ports with
/// the same port number share one node port.
fn init_node_ports(svc: &mut Value, name: &str, txn: &mut ServiceTxn<'_>) -> ApiResult<()> {
    let allocate_all = should_allocate_node_ports(svc);
    let numbers: Vec<(i64, i64)> = ports(svc)
        .iter()
        .map(|p| (int(&p["port"]), int(&p["nodePort"])))
        .collect();
    let requested_for = |port: i64| {
        numbers
            .iter()
            .find(|(p, n)| *p == port && *n != 0)
            .map_or(0, |(_, n)| *n)
    };
    let mut given: Vec<(i64, i64)> = Vec::new();
    for (i, (port, node_port)) in numbers.iter().copied().enumerate() {
        if node_port == 0 && !allocate_all {
            continue;
        }
        let shared = given
            .iter()
            .find(|(p, _)| *p == port)
            .map_or(0, |(_, n)| *n);
        let chosen = if shared == 0 {
            let want = requested_for(port);
            let chosen = if want != 0 {
                txn.take_port(want)
                    .map_err(|e| invalid_node_port(name, i, want, &e))?;
                want
            } else {
                txn.take_next_port()
                    .map_err(|e| internal(format!("failed to allocate a nodePort: {e}")))?
            };
            given.push((port, chosen));
            chosen
        } else if node_port == 0 {
            shared
        } else if node_port != shared {
            txn.take_port(node_port)
                .map_err(|e| invalid_node_port(name, i, node_port, &e))?;
            node_port
        } else {
            node_port
        };
        set_node_port(&mut ports_mut(svc)[i], chosen);
    }
    Ok(())
}

/// The node ports of an updated NodePort or LoadBalancer Service (`updateNodePorts`): new
/// ones are taken, the ones it no longer uses are freed.
fn update_node_ports(
    new: &mut Value,
    old: &Value,
    name: &str,
    txn: &mut ServiceTxn<'_>,
) -> ApiResult<()> {
    let old_numbers = node_ports(old);
    let allocate_all = should_allocate_node_ports(new);
    let mut seen: Vec<(String, i64)> = Vec::new();
    let mut taken_here: Vec<i64> = Vec::new();
    for i in 0..ports(new).len() {
        let port = &ports(new)[i];
        let mut node_port = int(&port["nodePort"]);
        let protocol = port["protocol"].as_str().unwrap_or("TCP").to_string();
        if node_port == 0 && !allocate_all {
            continue;
        }
        if node_port != 0 {
            if !old_numbers.contains(&node_port) && !taken_here.contains(&node_port) {
                txn.take_port(node_port)
                    .map_err(|e| invalid_node_port(name, i, node_port, &e))?;
                taken_here.push(node_port);
            }
        } else {
            node_port = txn
                .take_next_port()
                .map_err(|e| internal(format!("failed to allocate a nodePort: {e}")))?;
            set_node_port(&mut ports_mut(new)[i], node_port);
        }
        let key = (protocol, node_port);
        if seen.contains(&key) {
            return Err(internal(format!(
                "duplicate nodePort: {{{} {}}}",
                key.0, key.1
            )));
        }
        seen.push(key);
    }
    let new_numbers = node_ports(new);
    txn.ports_freed
        .extend(old_numbers.into_iter().filter(|n| !new_numbers.contains(n)));
    Ok(())
}

/// The health-check node port of a LoadBalancer Service with local traffic policy.
fn allocate_health_check_port(svc: &mut Value, txn: &mut ServiceTxn<'_>) -> ApiResult<()> {
    let requested = int(&svc["spec"]["healthCheckNodePort"]);
    if requested != 0 {
        return txn.take_port(requested).map_err(|e| {
            internal(format!(
                "failed to allocate requested HealthCheck NodePort {requested}: {e}"
            ))
        });
    }
    let port = txn
        .take_next_port()
        .map_err(|e| internal(format!("failed to allocate a HealthCheck NodePort 0: {e}")))?;
    set_health_check_node_port(svc, port);
    Ok(())
}

#[cfg(test)]
#[path = "service_alloc_tests.rs"]
mod tests;
