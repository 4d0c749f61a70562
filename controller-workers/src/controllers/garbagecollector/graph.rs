//! The garbage collector's owner/dependent graph (upstream `graph.go`): one node per
//! object UID, with its owner references and the UIDs of its dependents. A node is
//! *virtual* while it is known only as somebody's owner, not yet observed by a monitor;
//! the collector verifies such a node with a live read before acting on it.

use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// What identifies an object to act on it: where it is and which incarnation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(
                f,
                "{}/{} {} ({})",
                self.api_version, self.kind, self.name, self.uid
            )
        } else {
            write!(
                f,
                "{}/{} {}/{} ({})",
                self.api_version, self.kind, self.namespace, self.name, self.uid
            )
        }
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub identity: ObjectRef,
    pub owners: Vec<OwnerReference>,
    pub dependents: HashSet<String>,
    /// Known only from a dependent's ownerReference.
    pub virtual_node: bool,
    /// deletionTimestamp is set.
    pub being_deleted: bool,
    /// Being deleted with the foregroundDeletion finalizer: waits for its dependents.
    pub deleting_dependents: bool,
    /// Being deleted with the orphan finalizer: a dependent that turns up now must be
    /// released too before the finalizer goes.
    pub orphaning: bool,
}

#[derive(Default)]
pub struct Graph {
    pub nodes: HashMap<String, Node>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Links `dependent` under each of `owners`, making virtual nodes for owners not seen
    /// yet; returns the UIDs of the virtual nodes made (to be verified).
    pub fn link(&mut self, dependent: &ObjectRef, owners: &[OwnerReference]) -> Vec<String> {
        let mut made = Vec::new();
        for owner in owners {
            let node = self.nodes.entry(owner.uid.clone()).or_insert_with(|| {
                made.push(owner.uid.clone());
                Node {
                    identity: ObjectRef {
                        api_version: owner.api_version.clone(),
                        kind: owner.kind.clone(),
                        // An owner is in its dependent's namespace, or cluster-scoped;
                        // which one is settled when the owner is verified.
                        namespace: dependent.namespace.clone(),
                        name: owner.name.clone(),
                        uid: owner.uid.clone(),
                    },
                    owners: Vec::new(),
                    dependents: HashSet::new(),
                    virtual_node: true,
                    being_deleted: false,
                    deleting_dependents: false,
                    orphaning: false,
                }
            });
            node.dependents.insert(dependent.uid.clone());
        }
        made
    }

    pub fn unlink(&mut self, dependent_uid: &str, owners: &[OwnerReference]) {
        for owner in owners {
            if let Some(node) = self.nodes.get_mut(&owner.uid) {
                node.dependents.remove(dependent_uid);
            }
        }
    }

    /// Removes a node; returns it (its dependents and owners tell what to revisit).
    pub fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        self.unlink(uid, &node.owners);
        // A virtual owner left with no dependents has nothing to verify any more.
        for owner in &node.owners {
            if self
                .nodes
                .get(&owner.uid)
                .is_some_and(|o| o.virtual_node && o.dependents.is_empty())
            {
                self.nodes.remove(&owner.uid);
            }
        }
        Some(node)
    }

    /// Dependents of `uid` whose reference to it has blockOwnerDeletion.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(uid) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|dep| self.nodes.get(dep))
            .filter(|dep| {
                dep.owners
                    .iter()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
            })
            .collect()
    }
}

/// Owner references added, removed, or changed (same UID, other fields) between two
/// lists.
pub fn owner_diff(
    old: &[OwnerReference],
    new: &[OwnerReference],
) -> (
    Vec<OwnerReference>,
    Vec<OwnerReference>,
    Vec<(OwnerReference, OwnerReference)>,
) {
    let added = new
        .iter()
        .filter(|n| !old.iter().any(|o| o.uid == n.uid))
        .cloned()
        .collect();
    let removed = old
        .iter()
        .filter(|o| !new.iter().any(|n| n.uid == o.uid))
        .cloned()
        .collect();
    let changed = old
        .iter()
        .filter_map(|o| {
            new.iter()
                .find(|n| n.uid == o.uid && *n != o)
                .map(|n| (o.clone(), n.clone()))
        })
        .collect();
    (added, removed, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(uid: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
        }
    }

    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: uid.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        }
    }

    #[test]
    fn virtual_owners_come_and_go_with_their_dependents() {
        let mut graph = Graph::default();
        let made = graph.link(&r("p1"), &[owner("rs", true)]);
        assert_eq!(made, ["rs"]);
        graph.nodes.insert(
            "p1".into(),
            Node {
                identity: r("p1"),
                owners: vec![owner("rs", true)],
                dependents: HashSet::new(),
                virtual_node: false,
                being_deleted: false,
                deleting_dependents: false,
                orphaning: false,
            },
        );
        assert!(graph.get("rs").unwrap().virtual_node);
        assert_eq!(graph.blocking_dependents("rs").len(), 1);
        graph.remove("p1");
        assert!(
            graph.get("rs").is_none(),
            "an unverified owner with no dependents is dropped"
        );
    }

    #[test]
    fn diffs_owner_lists() {
        let (added, removed, changed) = owner_diff(
            &[owner("a", true), owner("b", true)],
            &[owner("b", false), owner("c", true)],
        );
        assert_eq!(added[0].uid, "c");
        assert_eq!(removed[0].uid, "a");
        assert_eq!(changed[0].1.block_owner_deletion, Some(false));
    }
}
