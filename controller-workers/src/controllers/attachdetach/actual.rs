//! The actual state of the world (upstream `attachdetach/cache/actual_state_of_world.go`):
//! which volumes are attached to which nodes (confirmed, or uncertain after a failed or
//! interrupted operation), whether each node still uses each one (its `volumesInUse`),
//! when a detach was first wanted, and per node the list it is to report in
//! `status.volumesAttached` with a flag saying the Node needs patching.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::volumes::VolumeSpec;

/// A (volume, node) pair's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttachState {
    Attached,
    Uncertain,
    Detached,
}

struct NodeAttachment {
    confirmed: bool,
    /// Assumed until the node's `volumesInUse` says otherwise.
    mounted_by_node: bool,
    detach_requested_at: Option<Instant>,
}

struct VolumeEntry {
    /// `None` for a volume only known from a node's `volumesAttached`.
    spec: Option<VolumeSpec>,
    device_path: String,
    nodes: BTreeMap<String, NodeAttachment>,
}

#[derive(Default)]
struct NodeReport {
    update_needed: bool,
    volumes: BTreeSet<String>,
}

/// An attached (or uncertain) volume on one node, as the reconciler reads it.
#[derive(Clone, Debug)]
pub(super) struct AttachedVolume {
    pub(super) unique_name: String,
    pub(super) spec: Option<VolumeSpec>,
    pub(super) node: String,
    pub(super) confirmed: bool,
    pub(super) mounted_by_node: bool,
}

impl AttachedVolume {
    /// A volume seen only in node status has no spec and counts as exclusive.
    pub(super) fn multi_attach(&self) -> bool {
        self.spec.as_ref().is_some_and(|s| s.multi_attach)
    }
}

#[derive(Default)]
pub(super) struct ActualState {
    volumes: BTreeMap<String, VolumeEntry>,
    reports: BTreeMap<String, NodeReport>,
}

impl ActualState {
    /// `AddVolumeNode`: records the pair (attached or uncertain); a confirmed attach is
    /// reported in the node's status.
    pub(super) fn add_volume_node(
        &mut self,
        unique_name: &str,
        spec: Option<VolumeSpec>,
        node: &str,
        device_path: &str,
        attached: bool,
    ) {
        let volume = self
            .volumes
            .entry(unique_name.to_string())
            .or_insert_with(|| VolumeEntry {
                spec: None,
                device_path: String::new(),
                nodes: BTreeMap::new(),
            });
        volume.device_path = device_path.to_string();
        // Upstream stores whatever it is given, a nil spec included.
        volume.spec = spec;
        volume
            .nodes
            .entry(node.to_string())
            .and_modify(|n| n.confirmed = attached)
            .or_insert(NodeAttachment {
                confirmed: attached,
                mounted_by_node: true,
                detach_requested_at: None,
            });
        if attached {
            self.add_volume_to_report(unique_name, node);
        }
    }

    pub(super) fn mark_attached(
        &mut self,
        unique_name: &str,
        spec: Option<VolumeSpec>,
        node: &str,
    ) {
        self.add_volume_node(unique_name, spec, node, "", true);
    }

    pub(super) fn mark_uncertain(
        &mut self,
        unique_name: &str,
        spec: Option<VolumeSpec>,
        node: &str,
    ) {
        self.add_volume_node(unique_name, spec, node, "", false);
    }

    /// `DeleteVolumeNode`: the pair is gone (and no longer reported).
    pub(super) fn mark_detached(&mut self, unique_name: &str, node: &str) {
        if let Some(volume) = self.volumes.get_mut(unique_name) {
            volume.nodes.remove(node);
            if volume.nodes.is_empty() {
                self.volumes.remove(unique_name);
            }
        }
        self.remove_volume_from_report(unique_name, node);
    }

    pub(super) fn set_mounted_by_node(&mut self, unique_name: &str, node: &str, mounted: bool) {
        if let Some(n) = self.node_mut(unique_name, node) {
            n.mounted_by_node = mounted;
        }
    }

    /// Starts the detach clock of the pair if it is not running; how long it has run.
    pub(super) fn set_detach_request_time(
        &mut self,
        unique_name: &str,
        node: &str,
    ) -> Option<Duration> {
        let n = self.node_mut(unique_name, node)?;
        let since = *n.detach_requested_at.get_or_insert_with(Instant::now);
        Some(since.elapsed())
    }

    pub(super) fn reset_detach_request_time(&mut self, unique_name: &str, node: &str) {
        if let Some(n) = self.node_mut(unique_name, node) {
            n.detach_requested_at = None;
        }
    }

    fn node_mut(&mut self, unique_name: &str, node: &str) -> Option<&mut NodeAttachment> {
        self.volumes.get_mut(unique_name)?.nodes.get_mut(node)
    }

    pub(super) fn attach_state(&self, unique_name: &str, node: &str) -> AttachState {
        match self
            .volumes
            .get(unique_name)
            .and_then(|v| v.nodes.get(node))
        {
            Some(n) if n.confirmed => AttachState::Attached,
            Some(_) => AttachState::Uncertain,
            None => AttachState::Detached,
        }
    }

    /// Every pair, attached or uncertain.
    pub(super) fn attached_volumes(&self) -> Vec<AttachedVolume> {
        let mut out = Vec::new();
        for (unique_name, volume) in &self.volumes {
            for (node, n) in &volume.nodes {
                out.push(AttachedVolume {
                    unique_name: unique_name.clone(),
                    spec: volume.spec.clone(),
                    node: node.clone(),
                    confirmed: n.confirmed,
                    mounted_by_node: n.mounted_by_node,
                });
            }
        }
        out
    }

    pub(super) fn attached_volumes_for_node(&self, node: &str) -> Vec<String> {
        self.volumes
            .iter()
            .filter(|(_, v)| v.nodes.contains_key(node))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The confirmed attachments by node (what the periodic verification checks).
    pub(super) fn attached_volumes_per_node(&self) -> BTreeMap<String, Vec<AttachedVolume>> {
        let mut out: BTreeMap<String, Vec<AttachedVolume>> = BTreeMap::new();
        for volume in self.attached_volumes().into_iter().filter(|v| v.confirmed) {
            out.entry(volume.node.clone()).or_default().push(volume);
        }
        out
    }

    /// The nodes the volume is confirmed attached to.
    pub(super) fn nodes_for_volume(&self, unique_name: &str) -> Vec<String> {
        self.volumes
            .get(unique_name)
            .map(|v| {
                v.nodes
                    .iter()
                    .filter(|(_, n)| n.confirmed)
                    .map(|(node, _)| node.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn add_volume_to_report(&mut self, unique_name: &str, node: &str) {
        let known = self
            .volumes
            .get(unique_name)
            .is_some_and(|v| v.nodes.contains_key(node));
        if !known {
            return;
        }
        let report = self.reports.entry(node.to_string()).or_insert(NodeReport {
            update_needed: true,
            volumes: BTreeSet::new(),
        });
        if report.volumes.insert(unique_name.to_string()) {
            report.update_needed = true;
        }
    }

    /// Whether it was reported (and so the node needs patching).
    pub(super) fn remove_volume_from_report(&mut self, unique_name: &str, node: &str) -> bool {
        let Some(report) = self.reports.get_mut(node) else {
            return false;
        };
        let removed = report.volumes.remove(unique_name);
        if removed {
            report.update_needed = true;
        }
        removed
    }

    pub(super) fn set_node_status_update_needed(&mut self, node: &str) {
        if let Some(report) = self.reports.get_mut(node) {
            report.update_needed = true;
        }
    }

    /// The `volumesAttached` of the node if it needs patching, clearing the flag.
    pub(super) fn take_node_update(&mut self, node: &str) -> Option<Vec<(String, String)>> {
        let report = self.reports.get_mut(node)?;
        if !report.update_needed {
            return None;
        }
        report.update_needed = false;
        let volumes = &self.volumes;
        Some(
            report
                .volumes
                .iter()
                .map(|name| {
                    let path = volumes
                        .get(name)
                        .map(|v| v.device_path.clone())
                        .unwrap_or_default();
                    (name.clone(), path)
                })
                .collect(),
        )
    }

    /// The nodes whose status needs patching.
    pub(super) fn nodes_needing_update(&self) -> Vec<String> {
        self.reports
            .iter()
            .filter(|(_, r)| r.update_needed)
            .map(|(node, _)| node.clone())
            .collect()
    }

    /// The specs of the attached pairs, for the total-volumes metric.
    pub(super) fn specs(&self) -> Vec<Option<VolumeSpec>> {
        self.volumes
            .values()
            .flat_map(|v| v.nodes.keys().map(|_| v.spec.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmed_attachments_are_reported_and_detaches_unreport() {
        let mut asw = ActualState::default();
        asw.mark_uncertain("v", None, "n1");
        assert_eq!(asw.attach_state("v", "n1"), AttachState::Uncertain);
        assert!(asw.take_node_update("n1").is_none());
        asw.mark_attached("v", None, "n1");
        assert_eq!(asw.attach_state("v", "n1"), AttachState::Attached);
        assert_eq!(asw.nodes_for_volume("v"), vec!["n1".to_string()]);
        assert_eq!(
            asw.take_node_update("n1"),
            Some(vec![("v".to_string(), String::new())])
        );
        assert!(asw.take_node_update("n1").is_none());
        assert!(asw.remove_volume_from_report("v", "n1"));
        assert_eq!(asw.take_node_update("n1"), Some(vec![]));
        asw.add_volume_to_report("v", "n1");
        asw.mark_detached("v", "n1");
        assert_eq!(asw.attach_state("v", "n1"), AttachState::Detached);
        assert_eq!(asw.take_node_update("n1"), Some(vec![]));
        assert!(asw.attached_volumes().is_empty());
    }

    #[test]
    fn the_detach_clock_starts_once_and_resets() {
        let mut asw = ActualState::default();
        assert!(asw.set_detach_request_time("v", "n1").is_none());
        asw.mark_attached("v", None, "n1");
        assert!(asw.attached_volumes()[0].mounted_by_node);
        asw.set_mounted_by_node("v", "n1", false);
        assert!(!asw.attached_volumes()[0].mounted_by_node);
        let first = asw.set_detach_request_time("v", "n1").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let second = asw.set_detach_request_time("v", "n1").unwrap();
        assert!(second > first);
        asw.reset_detach_request_time("v", "n1");
        assert!(asw.set_detach_request_time("v", "n1").unwrap() < second);
    }
}
