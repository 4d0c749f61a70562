//! Field projections (`fields` in a List, Get or Watch request): the subscriber receives
//! each object with only the fields it names, plus `apiVersion`, `kind` and the whole of
//! `metadata` (managedFields aside, as always).
//!
//! A path is dot-separated from the object's root (`spec.containers`, `status.phase`);
//! through a list it applies to every element (`spec.containers.name` keeps each
//! container's name only); a path that reaches a scalar before its end keeps the scalar;
//! a path that is a prefix of another keeps the whole subtree.
//!
//! Watch subscribers of the same projection of a resource share one [`SharedProjection`]:
//! an object version is projected and encoded when the first of them is sent it, and the
//! others send the same bytes while it is among the last [`RECENT_BODIES`] built (a change
//! reaches every subscriber within that window; an initial list builds the bodies it
//! sends). Its bodies live while a subscriber of the projection does (the last one to
//! leave frees them) and follow the cache: a deleted object's body goes with it, a relist
//! empties them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use serde_json::Value;

use crate::object::{CachedObject, ObjectKey};

/// Fields every projection keeps whole.
const ALWAYS_KEPT: [&str; 3] = ["apiVersion", "kind", "metadata"];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProjectionError {
    #[error("invalid field path {0:?}: a path is dot-separated field names, as spec.containers")]
    Path(String),
    #[error("fields apply to the FULL projection only (METADATA sends metadata alone)")]
    WithMetadata,
}

/// One level of the paths: keep the whole value, or only the named children.
#[derive(Clone, Debug, Default, PartialEq)]
struct Node {
    whole: bool,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn insert<'a>(&mut self, mut segments: impl Iterator<Item = &'a str>) {
        if self.whole {
            return;
        }
        match segments.next() {
            None => {
                self.whole = true;
                self.children.clear();
            }
            Some(segment) => self
                .children
                .entry(segment.to_string())
                .or_default()
                .insert(segments),
        }
    }

    fn project(&self, value: &mut Value) {
        if self.whole {
            return;
        }
        match value {
            Value::Object(map) => {
                map.retain(|k, _| self.children.contains_key(k));
                for (k, v) in map.iter_mut() {
                    if let Some(child) = self.children.get(k) {
                        child.project(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.project(item)),
            _ => {}
        }
    }

    fn paths(&self, prefix: &str, out: &mut Vec<String>) {
        if self.whole {
            out.push(prefix.to_string());
            return;
        }
        for (name, child) in &self.children {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            child.paths(&path, out);
        }
    }
}

/// The field paths a request keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldPaths {
    root: Node,
}

impl FieldPaths {
    /// The paths of a request; `None` when it names none (the whole object). A path's
    /// segments are non-empty; `metadata...`, `apiVersion` and `kind` are kept anyway.
    pub fn parse(paths: &[String]) -> Result<Option<FieldPaths>, ProjectionError> {
        if paths.is_empty() {
            return Ok(None);
        }
        let mut root = Node::default();
        for path in paths {
            if path.split('.').any(str::is_empty) {
                return Err(ProjectionError::Path(path.clone()));
            }
            root.insert(path.split('.'));
        }
        for kept in ALWAYS_KEPT {
            root.children.remove(kept);
        }
        Ok(Some(FieldPaths { root }))
    }

    /// The paths, sorted, without those another one covers: the same for every request
    /// that keeps the same fields.
    pub fn canonical(&self) -> String {
        let mut out = Vec::new();
        self.root.paths("", &mut out);
        out.join(",")
    }

    /// Removes from `object` every field the paths do not keep.
    pub fn apply(&self, object: &mut Value) {
        let Value::Object(map) = object else { return };
        map.retain(|k, _| ALWAYS_KEPT.contains(&k.as_str()) || self.root.children.contains_key(k));
        for (k, v) in map.iter_mut() {
            if let Some(child) = self.root.children.get(k) {
                child.project(v);
            }
        }
    }
}

/// How many recently built bodies a projection keeps: enough for every subscriber of it to
/// be sent a change (a burst of them) from the same bytes, while a body held for every
/// cached object would double the cache's memory for the one worker that usually
/// subscribes (a list or a resumed watch builds the bodies it sends again).
pub const RECENT_BODIES: usize = 1024;

/// The bodies kept: per object, the version each was built from (compared by identity),
/// the body, and its place in the order they were built.
#[derive(Default)]
struct Bodies {
    by_key: HashMap<ObjectKey, (Weak<CachedObject>, Bytes, u64)>,
    order: VecDeque<(ObjectKey, u64)>,
    next: u64,
}

/// One projection of a resource, with the bodies its subscribers share.
pub struct SharedProjection {
    pub paths: FieldPaths,
    bodies: Mutex<Bodies>,
    bytes: AtomicUsize,
}

impl SharedProjection {
    pub fn new(paths: FieldPaths) -> Self {
        SharedProjection {
            paths,
            bodies: Mutex::new(Bodies::default()),
            bytes: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Bodies> {
        self.bodies.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The projected envelope of `object`, built once per object version while it is
    /// among the [`RECENT_BODIES`] last built.
    pub fn body(&self, object: &Arc<CachedObject>) -> Bytes {
        if let Some((built_from, body, _)) = self.lock().by_key.get(&object.key) {
            if std::ptr::eq(built_from.as_ptr(), Arc::as_ptr(object)) {
                return body.clone();
            }
        }
        // Built outside the lock: two subscribers racing build it twice, harmlessly.
        let body = object.projected_body(&self.paths);
        let mut bodies = self.lock();
        let serial = bodies.next;
        bodies.next += 1;
        let previous = bodies.by_key.insert(
            object.key.clone(),
            (Arc::downgrade(object), body.clone(), serial),
        );
        bodies.order.push_back((object.key.clone(), serial));
        self.bytes.fetch_add(body.len(), Ordering::Relaxed);
        if let Some((_, previous, _)) = previous {
            self.bytes.fetch_sub(previous.len(), Ordering::Relaxed);
        }
        while bodies.by_key.len() > RECENT_BODIES {
            let Some((key, serial)) = bodies.order.pop_front() else {
                break;
            };
            // An older entry of a key built again since stays.
            if bodies
                .by_key
                .get(&key)
                .is_some_and(|(_, _, s)| *s == serial)
            {
                if let Some((_, body, _)) = bodies.by_key.remove(&key) {
                    self.bytes.fetch_sub(body.len(), Ordering::Relaxed);
                }
            }
        }
        // Stale order entries (keys built again or forgotten) are bounded too.
        if bodies.order.len() > 4 * RECENT_BODIES {
            let Bodies { by_key, order, .. } = &mut *bodies;
            order.retain(|(key, serial)| by_key.get(key).is_some_and(|(_, _, s)| s == serial));
        }
        body
    }

    /// Drops the body of an object that left the cache.
    pub fn forget(&self, key: &str) {
        if let Some((_, body, _)) = self.lock().by_key.remove(key) {
            self.bytes.fetch_sub(body.len(), Ordering::Relaxed);
        }
    }

    /// Drops every body (the cache was replaced).
    pub fn clear(&self) {
        let mut bodies = self.lock();
        *bodies = Bodies::default();
        self.bytes.store(0, Ordering::Relaxed);
    }

    /// Bytes of the bodies held.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// How many bodies are held.
    pub fn held(&self) -> usize {
        self.lock().by_key.len()
    }
}

/// The projections of one resource that have subscribers, by canonical paths.
#[derive(Default)]
pub struct Projections(Mutex<HashMap<String, Weak<SharedProjection>>>);

impl Projections {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Weak<SharedProjection>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared projection for `paths`, made if no subscriber holds it.
    pub fn get(&self, paths: FieldPaths) -> Arc<SharedProjection> {
        let mut all = self.lock();
        all.retain(|_, p| p.strong_count() > 0);
        let canonical = paths.canonical();
        if let Some(live) = all.get(&canonical).and_then(Weak::upgrade) {
            return live;
        }
        let made = Arc::new(SharedProjection::new(paths));
        all.insert(canonical, Arc::downgrade(&made));
        made
    }

    /// Every projection still held by a subscriber.
    pub fn live(&self) -> Vec<Arc<SharedProjection>> {
        self.lock().values().filter_map(Weak::upgrade).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkcm_proto::v1::GroupVersionResource;
    use serde_json::json;

    fn paths(p: &[&str]) -> FieldPaths {
        let p: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        FieldPaths::parse(&p).unwrap().unwrap()
    }

    fn pod(rv: u64) -> Arc<CachedObject> {
        named_pod("p", rv)
    }

    fn named_pod(name: &str, rv: u64) -> Arc<CachedObject> {
        let gvr = Arc::new(GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        });
        let object = json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ns", "uid": "u", "resourceVersion": rv.to_string(),
                "labels": {"app": "web"}, "managedFields": [{"manager": "m"}]},
            "spec": {
                "containers": [
                    {"name": "a", "image": "i1", "resources": {"requests": {"cpu": "1"}}},
                    {"name": "b", "image": "i2", "resources": {}}
                ],
                "nodeName": "n1", "restartPolicy": "Always",
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}]}
        });
        Arc::new(CachedObject::from_value(&gvr, object).unwrap())
    }

    #[test]
    fn paths_parse_to_one_canonical_form() {
        for (given, canonical) in [
            (
                vec!["status.phase", "spec.nodeName"],
                "spec.nodeName,status.phase",
            ),
            (vec!["spec.containers.name", "spec"], "spec"),
            (vec!["spec", "spec.containers.name"], "spec"),
            (vec!["spec.a.b", "spec.a"], "spec.a"),
            (vec!["metadata.labels", "kind", "status"], "status"),
        ] {
            assert_eq!(paths(&given).canonical(), canonical, "{given:?}");
        }
        assert_eq!(FieldPaths::parse(&[]), Ok(None));
        for bad in ["", "spec..x", ".spec", "spec."] {
            assert_eq!(
                FieldPaths::parse(&[bad.to_string()]),
                Err(ProjectionError::Path(bad.to_string())),
                "{bad:?}"
            );
        }
    }

    /// Lists apply the rest of the path to each element; metadata stays whole; the
    /// object's field order is kept.
    #[test]
    fn a_pod_keeps_only_what_the_paths_name() {
        let object = pod(1);
        let projected = object.projected_json(&paths(&[
            "spec.containers.name",
            "spec.containers.resources.requests",
            "spec.nodeName",
            "status.phase",
            "status.podIP.deeper",
        ]));
        let expected = json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                "labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1"}}},
                    {"name": "b", "resources": {}}
                ],
                "nodeName": "n1"
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        });
        assert_eq!(
            std::str::from_utf8(&projected).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
        // Nothing named: type and metadata only.
        let bare = object.projected_json(&paths(&["nothing"]));
        let bare: Value = serde_json::from_slice(&bare).unwrap();
        assert_eq!(
            bare.as_object().unwrap().keys().collect::<Vec<_>>(),
            vec!["kind", "apiVersion", "metadata"]
        );
    }

    #[test]
    fn subscribers_of_one_projection_share_each_body() {
        let projections = Projections::default();
        let first = projections.get(paths(&["status.phase", "spec.nodeName"]));
        let second = projections.get(paths(&["spec.nodeName", "status.phase"]));
        assert!(Arc::ptr_eq(&first, &second));
        let other = projections.get(paths(&["spec"]));
        assert!(!Arc::ptr_eq(&first, &other));

        let v1 = pod(1);
        let a = first.body(&v1);
        let b = second.body(&v1);
        assert_eq!(a.as_ptr(), b.as_ptr(), "built once, shared");
        assert_eq!(first.bytes(), a.len());
        // A new version is built anew, replacing the old one.
        let v2 = pod(2);
        let c = second.body(&v2);
        assert_ne!(c.as_ptr(), a.as_ptr());
        assert_eq!(first.bytes(), c.len());
        first.forget(&v2.key);
        assert_eq!(first.bytes(), 0);
        other.body(&v2);
        other.clear();
        assert_eq!(other.bytes(), 0);

        // The last subscriber gone, the projection goes with its bodies.
        drop((first, second));
        assert_eq!(projections.live().len(), 1);
        let again = projections.get(paths(&["spec.nodeName", "status.phase"]));
        assert_eq!(again.bytes(), 0);
    }

    #[test]
    fn only_the_recently_built_bodies_are_kept() {
        let projections = Projections::default();
        let projection = projections.get(paths(&["status.phase"]));
        let objects: Vec<_> = (0..RECENT_BODIES + 10)
            .map(|i| named_pod(&format!("p{i}"), i as u64))
            .collect();
        for object in &objects {
            projection.body(object);
        }
        assert_eq!(projection.held(), RECENT_BODIES);
        // Names and versions 10..1033: the kept bodies differ by a few digits.
        let longest = projection.body(&objects[RECENT_BODIES + 9]).len();
        assert!(projection.bytes() <= RECENT_BODIES * longest);
        assert!(projection.bytes() >= RECENT_BODIES * (longest - 8));
        // The newest is still shared; the oldest is built again (and then kept).
        let newest = projection.body(&objects[RECENT_BODIES + 9]);
        assert_eq!(
            newest.as_ptr(),
            projection.body(&objects[RECENT_BODIES + 9]).as_ptr()
        );
        let oldest = projection.body(&objects[0]);
        assert_eq!(oldest.as_ptr(), projection.body(&objects[0]).as_ptr());
        assert_eq!(projection.held(), RECENT_BODIES);
        // A key built again many times keeps one body.
        for rv in 0..(3 * RECENT_BODIES as u64) {
            projection.body(&named_pod("p0", 10_000 + rv));
        }
        assert_eq!(projection.held(), RECENT_BODIES);
    }
}
