//! What the kubelets remember between passes: each pod's runtime, keyed by uid, and the pod
//! addresses in use on each node.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Pod;

use super::PodRuntime;
use crate::nodesim::nodes;

#[derive(Default)]
pub(super) struct State {
    pub(super) pods: HashMap<String, PodRuntime>,
    /// Host numbers in use, per node (`.2` … `.254` of its podCIDR).
    pub(super) ips: HashMap<String, BTreeSet<u8>>,
    /// Pods seen during a relist, to forget the ones that vanished.
    pub(super) relisting: Option<HashSet<String>>,
}

impl State {
    pub(super) fn allocate(&mut self, network: nodes::PodNetwork, node: &str) -> Option<Ipv4Addr> {
        let used = self.ips.entry(node.into()).or_default();
        // Addresses are known by their last byte: networks are /24 or smaller, or start
        // at a .0.
        let ip = (2u8..=254)
            .filter_map(|h| network.address(h))
            .find(|ip| !used.contains(&ip.octets()[3]))?;
        used.insert(ip.octets()[3]);
        Some(ip)
    }

    pub(super) fn reserve(&mut self, node: &str, ip: Ipv4Addr) {
        self.ips
            .entry(node.into())
            .or_default()
            .insert(ip.octets()[3]);
    }

    pub(super) fn release(&mut self, node: &str, ip: Ipv4Addr) {
        if let Some(used) = self.ips.get_mut(node) {
            used.remove(&ip.octets()[3]);
        }
    }

    pub(super) fn forget(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        if let Some(rt) = self.pods.remove(uid) {
            if let (Some(ip), None) = (rt.ip, rt.terminal) {
                self.release(&rt.node, ip);
            }
        }
    }
}
