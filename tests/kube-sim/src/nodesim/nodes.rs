//! The node half of the simulated kubelet: registers one Node per simulated machine (capacity,
//! labels spread over three zones, podCIDR, addresses, nodeInfo), keeps its status conditions
//! and heartbeats the way kubelet does — a Lease in `kube-node-lease` renewed every 10 s, and
//! the NodeStatus posted when it changes and at least every 5 minutes. Faults (heartbeat
//! stopped, a partition, a pressure condition, a killed node) are read from
//! [`super::NodeFaults`]. Taints are never touched: the admission's startup taint and every
//! health taint are the node-lifecycle controller's business, as on a real cluster.
//!
//! [`node_object`], [`conditions`] and [`lease_object`] are pure; [`run`] is the per-node loop.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::{now_seconds, ConditionType, NodeFaults, NodeSimConfig, Shared};

pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Every simulated node carries this label, valued by its node-sim's name prefix (trimmed to a
/// valid label value), so a workload can ask for one node-sim's nodes with a nodeSelector.
pub const POOL_LABEL: &str = "sim.rkcm.io/node-sim";

/// The [`POOL_LABEL`] value of a name prefix: `sim-node-` → `sim-node`.
pub fn pool(prefix: &str) -> String {
    let v: String = prefix
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(63)
        .collect();
    let v = v.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if v.is_empty() {
        "node-sim".into()
    } else {
        v.into()
    }
}

/// The zone of node `index`: three zones, round robin.
pub fn zone(index: usize) -> String {
    format!("zone-{}", ["a", "b", "c"][index % 3])
}

/// The node's InternalIP (`172.16.0.0/12`, one per index).
pub fn internal_ip(index: usize) -> Ipv4Addr {
    let i = index as u32 + 1;
    Ipv4Addr::from(0xAC10_0000u32 + i)
}

/// The node's podCIDR: `10.<244 + index/256>.<index % 256>.0/24`.
pub fn pod_cidr_base(index: usize) -> [u8; 3] {
    [10, (244 + index / 256).min(255) as u8, (index % 256) as u8]
}

pub fn pod_cidr(index: usize) -> String {
    let [a, b, c] = pod_cidr_base(index);
    format!("{a}.{b}.{c}.0/24")
}

/// An IPv4 pod network: pods get `.2` … `.254` past its base, as far as it reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodNetwork {
    pub base: Ipv4Addr,
    pub prefix: u8,
}

impl PodNetwork {
    /// An IPv4 `a.b.c.d/n` (`None` for IPv6 or garbage).
    pub fn parse(cidr: &str) -> Option<PodNetwork> {
        let (address, prefix) = cidr.split_once('/')?;
        let address: Ipv4Addr = address.parse().ok()?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        Some(PodNetwork {
            base: Ipv4Addr::from(u32::from(address) & mask),
            prefix,
        })
    }

    /// The `host`th address, if the network holds it.
    pub fn address(&self, host: u8) -> Option<Ipv4Addr> {
        let size = 1u64 << (32 - u32::from(self.prefix));
        // The network's last address is its broadcast address.
        (u64::from(host) < size.saturating_sub(1))
            .then(|| Ipv4Addr::from(u32::from(self.base).wrapping_add(u32::from(host))))
    }
}

/// The Node node-sim registers (spec, labels and status), as kubelet's `initialNode` builds it.
pub fn node_object(name: &str, index: usize, config: &NodeSimConfig, now: Timestamp) -> Value {
    let c = &config.capacity;
    let capacity = json!({"cpu": c.cpu, "memory": c.memory, "pods": c.pods,
        "ephemeral-storage": c.ephemeral_storage, "hugepages-2Mi": "0"});
    let mut conditions = conditions(&NodeFaults::default(), &[], now);
    reported_only(config, &mut conditions);
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {super::attach::ANN_CONTROLLER_MANAGED: "true"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone(index),
                "topology.kubernetes.io/region": "sim-region",
                POOL_LABEL: pool(&config.name_prefix),
            },
        },
        "spec": if config.assign_pod_cidrs {
            json!({"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)], "providerID": format!("node-sim://{name}")})
        } else {
            json!({"providerID": format!("node-sim://{name}")})
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": internal_ip(index).to_string()},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": format!("{:032x}", index + 1),
                "systemUUID": format!("00000000-0000-0000-0000-{:012x}", index + 1),
                "bootID": uuid::Uuid::new_v4().to_string(),
                "kernelVersion": "6.1.0-node-sim",
                "osImage": "node-sim",
                "containerRuntimeVersion": format!("node-sim://{}", env!("CARGO_PKG_VERSION")),
                "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "v1.33.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}

/// The five conditions kubelet reports, with its reasons and messages. A condition whose
/// status did not change keeps its lastTransitionTime from `previous`.
pub fn conditions(
    faults: &NodeFaults,
    previous: &[NodeCondition],
    now: Timestamp,
) -> Vec<NodeCondition> {
    let wanted =
        |t: ConditionType| -> bool { faults.conditions.get(&t).copied().unwrap_or(t.healthy()) };
    let mut out = Vec::new();
    for t in [
        ConditionType::MemoryPressure,
        ConditionType::DiskPressure,
        ConditionType::PIDPressure,
        ConditionType::Ready,
        ConditionType::NetworkUnavailable,
    ] {
        let on = wanted(t);
        let (reason, message) = t.reason(on);
        let status = if on { "True" } else { "False" }.to_string();
        let transition = previous
            .iter()
            .find(|c| c.type_ == t.as_str() && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        out.push(NodeCondition {
            type_: t.as_str().into(),
            status,
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: Some(transition),
        });
    }
    out
}

/// Leaves out the conditions node-sim was told not to report.
pub fn reported_only(config: &NodeSimConfig, conditions: &mut Vec<NodeCondition>) {
    if !config.network_condition {
        conditions.retain(|c| c.type_ != ConditionType::NetworkUnavailable.as_str());
    }
}

/// Do two condition lists say the same thing (ignoring heartbeat times)?
pub fn same_conditions(a: &[NodeCondition], b: &[NodeCondition]) -> bool {
    let key = |c: &NodeCondition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        )
    };
    let mut x: Vec<_> = a.iter().map(key).collect();
    let mut y: Vec<_> = b.iter().map(key).collect();
    x.sort();
    y.sort();
    x == y
}

/// The node's Lease, owned by its Node as kubelet makes it.
pub fn lease_object(
    name: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
    now: Timestamp,
) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": duration_seconds,
                 "renewTime": MicroTime(now)},
    });
    if let Some(uid) = node_uid {
        lease["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]);
    }
    lease
}

/// Retry delays after a failed call: 200 ms doubling to 10 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << failures.min(6))).min(Duration::from_secs(10))
}

/// Create the Node, or adopt it when it already exists (a restarted node-sim), and post its status.
async fn register(shared: &Shared, name: &str, index: usize) -> Result<Node, kube::Error> {
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let obj = node_object(name, index, &shared.config, now_seconds());
    let node: Node = serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)?;
    let created = match nodes.create(&PostParams::default(), &node).await {
        Ok(n) => n,
        Err(kube::Error::Api(s)) if s.code == 409 => nodes.get(name).await?,
        Err(e) => return Err(e),
    };
    let managed = created
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(super::attach::ANN_CONTROLLER_MANAGED));
    if !managed {
        // kubelet reconciles the annotation on a Node it finds already registered.
        let patch =
            json!({"metadata": {"annotations": {super::attach::ANN_CONTROLLER_MANAGED: "true"}}});
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    // Some servers drop status on create; post it through the status subresource too.
    let patch = json!({"status": obj["status"]});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(created)
}

/// Renews the node's Lease, creating it when it is missing; `Ok(true)` when it had to
/// be created (a Lease that vanished says the API server may have lost the Node too).
async fn renew_lease(
    shared: &Shared,
    name: &str,
    node_uid: Option<&str>,
) -> Result<bool, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), LEASE_NAMESPACE);
    let now = Timestamp::now();
    let duration = shared.config.lease_duration_seconds;
    let patch = json!({"spec": {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": MicroTime(now)}});
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let lease: Lease = serde_json::from_value(lease_object(name, node_uid, duration, now))
                .map_err(kube::Error::SerdeError)?;
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

async fn post_status(
    shared: &Shared,
    name: &str,
    conditions: &[NodeCondition],
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(shared.client.clone());
    // A strategic-merge patch, as kubelet's: conditions merge by type, so a condition
    // another writer owns (the route controller's NetworkUnavailable) stays.
    let patch = json!({"status": {"conditions": conditions}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}

/// One node's life: register, then heartbeat until killed or node-sim stops.
pub async fn run(shared: Arc<Shared>, name: String, index: usize) {
    let wake = shared.node_wake(&name);
    let cfg = shared.config.clone();
    let mut failures = 0u32;
    let node = loop {
        if shared.faults(&name).killed {
            return;
        }
        match register(&shared, &name, index).await {
            Ok(n) => break n,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "cannot register node; retrying");
                tokio::time::sleep(backoff(failures)).await;
                failures += 1;
            }
        }
    };
    let mut node_uid = node.metadata.uid.clone();
    let mut posted: Vec<NodeCondition> = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let start = tokio::time::Instant::now();
    let mut next_lease = start;
    let mut next_status = start;
    let mut last_report = start;
    let mut force_report = true;
    let mut was_stopped = false;
    loop {
        let faults = shared.faults(&name);
        if faults.killed {
            tracing::info!(node = %name, "node killed: no more heartbeats or pod updates");
            return;
        }
        let now = tokio::time::Instant::now();
        if faults.heartbeat_stopped || faults.partitioned {
            was_stopped = true;
        } else {
            if was_stopped {
                // Back from a silence: report at once, as a restarted kubelet does.
                was_stopped = false;
                next_lease = now;
                force_report = true;
            }
            if now >= next_lease {
                match renew_lease(&shared, &name, node_uid.as_deref()).await {
                    Ok(recreated) => {
                        failures = 0;
                        next_lease = now + cfg.lease_renew_interval;
                        if recreated {
                            // Report the status at once: if the Node is gone too, that
                            // finds out and registers it again.
                            force_report = true;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(node = %name, error = %e, "lease renewal failed; retrying");
                        next_lease = now + backoff(failures).min(cfg.lease_renew_interval);
                        failures += 1;
                    }
                }
            }
            let mut wanted = conditions(&faults, &posted, now_seconds());
            reported_only(&shared.config, &mut wanted);
            let changed = !same_conditions(&wanted, &posted);
            if changed || force_report || now >= next_status {
                next_status = now + cfg.node_status_update_frequency;
                if changed
                    || force_report
                    || now.duration_since(last_report) >= cfg.node_status_report_frequency
                {
                    match post_status(&shared, &name, &wanted).await {
                        Ok(()) => {
                            posted = wanted;
                            last_report = now;
                            force_report = false;
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            // The Node is gone (a restarted API server): register again.
                            match register(&shared, &name, index).await {
                                Ok(n) => {
                                    node_uid = n.metadata.uid.clone();
                                    force_report = true;
                                    next_lease = now;
                                }
                                Err(e) => {
                                    tracing::debug!(node = %name, error = %e, "re-registration failed")
                                }
                            }
                            next_status = now + backoff(failures);
                            failures += 1;
                        }
                        Err(e) => {
                            tracing::debug!(node = %name, error = %e, "node status update failed; retrying");
                            next_status = now + backoff(failures);
                            failures += 1;
                        }
                    }
                }
            }
        }
        // A silenced node only waits for its fault to be lifted.
        let next = if faults.heartbeat_stopped || faults.partitioned {
            now + Duration::from_secs(3600)
        } else {
            next_lease.min(next_status)
        };
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep_until(next) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_healthy_node_reports_like_kubelet() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let cs = conditions(&NodeFaults::default(), &[], now);
        let by_type = |t: &str| cs.iter().find(|c| c.type_ == t).unwrap().clone();
        assert_eq!(by_type("Ready").status, "True");
        assert_eq!(by_type("Ready").reason.as_deref(), Some("KubeletReady"));
        assert_eq!(by_type("MemoryPressure").status, "False");
        assert_eq!(
            by_type("MemoryPressure").reason.as_deref(),
            Some("KubeletHasSufficientMemory")
        );
        assert_eq!(
            by_type("DiskPressure").reason.as_deref(),
            Some("KubeletHasNoDiskPressure")
        );
        assert_eq!(
            by_type("PIDPressure").reason.as_deref(),
            Some("KubeletHasSufficientPID")
        );
        assert_eq!(by_type("NetworkUnavailable").status, "False");
    }

    #[test]
    fn nodes_can_register_without_a_pod_cidr() {
        let cfg = NodeSimConfig {
            assign_pod_cidrs: false,
            ..Default::default()
        };
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let n: Node = serde_json::from_value(node_object("sim-node-1", 1, &cfg, now)).unwrap();
        let spec = n.spec.unwrap();
        assert_eq!(spec.pod_cidr, None);
        assert_eq!(spec.pod_cidrs, None);
        assert_eq!(spec.provider_id.as_deref(), Some("node-sim://sim-node-1"));
    }

    #[test]
    fn a_pressure_fault_flips_one_condition_and_keeps_the_others_transition_times() {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap();
        let t1 = Timestamp::from_second(1_700_000_100).unwrap();
        let before = conditions(&NodeFaults::default(), &[], t0);
        let mut faults = NodeFaults::default();
        faults
            .conditions
            .insert(ConditionType::MemoryPressure, true);
        let after = conditions(&faults, &before, t1);
        assert!(!same_conditions(&before, &after));
        let mem = after.iter().find(|c| c.type_ == "MemoryPressure").unwrap();
        assert_eq!(mem.status, "True");
        assert_eq!(mem.reason.as_deref(), Some("KubeletHasInsufficientMemory"));
        assert_eq!(mem.last_transition_time, Some(Time(t1)));
        let ready = after.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time, Some(Time(t0)));
        assert_eq!(ready.last_heartbeat_time, Some(Time(t1)));
        assert!(same_conditions(&after, &conditions(&faults, &after, t1)));
    }

    #[test]
    fn node_objects_spread_zones_and_cidrs() {
        let cfg = NodeSimConfig::default();
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let zones: Vec<String> = (0..4).map(zone).collect();
        assert_eq!(zones, ["zone-a", "zone-b", "zone-c", "zone-a"]);
        let n: Node = serde_json::from_value(node_object("sim-node-257", 257, &cfg, now)).unwrap();
        let spec = n.spec.unwrap();
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.245.1.0/24"));
        let status = n.status.unwrap();
        assert_eq!(status.allocatable.unwrap()["pods"].0, "110");
        assert_eq!(status.addresses.unwrap()[0].address, "172.16.1.2");
        assert_eq!(
            n.metadata.labels.unwrap()["topology.kubernetes.io/zone"],
            "zone-c"
        );
    }

    #[test]
    fn leases_are_owned_by_their_node() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let l: Lease = serde_json::from_value(lease_object("n1", Some("uid-1"), 40, now)).unwrap();
        let spec = l.spec.unwrap();
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(l.metadata.owner_references.unwrap()[0].uid, "uid-1");
    }
}
