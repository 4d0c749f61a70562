//! The garbage collector's owner/dependent graph (upstream `graph.go`): one node per
//! object UID, with its owner references and the UIDs of its dependents. A node is
//! *virtual* while it is known only as somebody's owner, not yet observed by a monitor;
//! the collector verifies such a node with a live read before acting on it.
//!
//! What repeats from node to node (apiVersions, kinds, namespaces, in identities and in
//! owner references) is interned: each distinct string is held once, as an `Arc<str>`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// What identifies an object to act on it: where it is and which incarnation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    pub api_version: Arc<str>,
    pub kind: Arc<str>,
    /// Empty for cluster-scoped objects.
    pub namespace: Arc<str>,
    pub name: String,
    pub uid: String,
}

/// An owner reference as the graph keeps it (apiVersion and kind interned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub api_version: Arc<str>,
    pub kind: Arc<str>,
    pub name: String,
    pub uid: String,
    pub controller: Option<bool>,
    pub block_owner_deletion: Option<bool>,
}

/// Each distinct string once. Strings nobody else holds any more are dropped when the
/// set has doubled since the last sweep, so deleted namespaces do not pile up.
#[derive(Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    swept_at: usize,
}

impl Interner {
    pub fn intern(&mut self, text: &str) -> Arc<str> {
        if let Some(held) = self.strings.get(text) {
            return held.clone();
        }
        if self.strings.len() >= 2 * self.swept_at.max(64) {
            self.strings.retain(|s| Arc::strong_count(s) > 1);
            self.swept_at = self.strings.len();
        }
        let held: Arc<str> = Arc::from(text);
        self.strings.insert(held.clone());
        held
    }

    /// The number of distinct strings held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.strings.len()
    }
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
    pub owners: Vec<Owner>,
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
    pub strings: Interner,
}

impl Graph {
    /// `identity` with its apiVersion, kind and namespace interned.
    pub fn intern_identity(&mut self, identity: ObjectRef) -> ObjectRef {
        ObjectRef {
            api_version: self.strings.intern(&identity.api_version),
            kind: self.strings.intern(&identity.kind),
            namespace: self.strings.intern(&identity.namespace),
            ..identity
        }
    }

    /// Owner references as the graph keeps them.
    pub fn owners(&mut self, references: &[OwnerReference]) -> Vec<Owner> {
        references
            .iter()
            .map(|r| Owner {
                api_version: self.strings.intern(&r.api_version),
                kind: self.strings.intern(&r.kind),
                name: r.name.clone(),
                uid: r.uid.clone(),
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            })
            .collect()
    }

    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Links `dependent` under each of `owners`, making virtual nodes for owners not seen
    /// yet; returns the UIDs of the virtual nodes made (to be verified).
    pub fn link(&mut self, dependent: &ObjectRef, owners: &[Owner]) -> Vec<String> {
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

    pub fn unlink(&mut self, dependent_uid: &str, owners: &[Owner]) {
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
pub fn owner_diff(old: &[Owner], new: &[Owner]) -> (Vec<Owner>, Vec<Owner>, Vec<(Owner, Owner)>) {
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

    fn owner(uid: &str, block: bool) -> Owner {
        Owner {
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
    fn interned_strings_are_held_once_and_swept_when_unheld() {
        let mut strings = Interner::default();
        let a = strings.intern("apps/v1");
        let b = strings.intern("apps/v1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(strings.len(), 1);
        // Namespaces come and go: once nobody holds them, a sweep drops them.
        for i in 0..200 {
            strings.intern(&format!("ns-{i}"));
        }
        assert!(
            strings.len() < 200,
            "unheld strings were swept: {}",
            strings.len()
        );
        assert!(
            Arc::ptr_eq(&a, &strings.intern("apps/v1")),
            "held ones stay"
        );
    }

    #[test]
    fn nodes_share_what_repeats() {
        let mut graph = Graph::default();
        let references = [1, 2].map(|i| OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs{i}"),
            uid: format!("rs{i}"),
            ..Default::default()
        });
        let owners = graph.owners(&references);
        assert!(Arc::ptr_eq(&owners[0].api_version, &owners[1].api_version));
        assert!(Arc::ptr_eq(&owners[0].kind, &owners[1].kind));
        assert_eq!(&*owners[1].kind, "ReplicaSet");
        let pods = ["p1", "p2"].map(|name| graph.intern_identity(r(name)));
        assert!(Arc::ptr_eq(&pods[0].namespace, &pods[1].namespace));
        assert_eq!(pods[0], r("p1"), "interning keeps the values");
        graph.link(&pods[0], &owners[..1]);
        graph.link(&pods[1], &owners[1..]);
        let (rs1, rs2) = (&graph.nodes["rs1"].identity, &graph.nodes["rs2"].identity);
        assert!(Arc::ptr_eq(&rs1.kind, &rs2.kind));
        assert!(Arc::ptr_eq(&rs1.namespace, &pods[0].namespace));
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
