//! ttl-controller: every Node carries the annotation `node.alpha.kubernetes.io/ttl`, the
//! number of seconds its kubelet may cache the Secrets and ConfigMaps its pods use, which
//! grows with the size of the cluster (upstream `pkg/controller/ttl/ttl_controller.go`).
//!
//! The node count comes from the Node informer's additions and deletions; it moves the
//! cluster up a step of [`BOUNDARIES`] when it passes the step's top and down when it
//! falls below the step's bottom, the steps overlapping so that a cluster hovering at a
//! boundary does not flap. Keys are node names (queue `ttlcontroller`, 5 workers): every
//! addition and update queues its node, and a node whose annotation is not the desired
//! integer gets a strategic-merge patch of it. A change of step queues no node: each one
//! takes the new value at its next update (its kubelet's next status report).

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::store::Store;

pub const NAME: &str = "ttl-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/nodes"];
/// `v1.ObjectTTLAnnotationKey`.
pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
const QUEUE: &str = "ttlcontroller";
/// Upstream starts it with 5 workers, not configurable.
const WORKERS: usize = 5;

/// One step of cluster size: the TTL of a cluster of `size_min` to `size_max` nodes.
struct Boundary {
    size_min: i64,
    size_max: i64,
    ttl_seconds: i64,
}

/// Upstream's steps; each overlaps the next.
const BOUNDARIES: [Boundary; 5] = [
    Boundary {
        size_min: 0,
        size_max: 100,
        ttl_seconds: 0,
    },
    Boundary {
        size_min: 90,
        size_max: 500,
        ttl_seconds: 15,
    },
    Boundary {
        size_min: 450,
        size_max: 1000,
        ttl_seconds: 30,
    },
    Boundary {
        size_min: 900,
        size_max: 2000,
        ttl_seconds: 60,
    },
    Boundary {
        size_min: 1800,
        size_max: i32::MAX as i64,
        ttl_seconds: 300,
    },
];

/// The node count and the step it has reached.
#[derive(Debug, Default)]
struct Sizing {
    nodes: i64,
    step: usize,
}

impl Sizing {
    fn node_added(&mut self) {
        self.nodes += 1;
        if self.nodes > BOUNDARIES[self.step].size_max && self.step + 1 < BOUNDARIES.len() {
            self.step += 1;
        }
    }

    fn node_deleted(&mut self) {
        self.nodes -= 1;
        if self.nodes < BOUNDARIES[self.step].size_min && self.step > 0 {
            self.step -= 1;
        }
    }

    fn desired_ttl_seconds(&self) -> i64 {
        BOUNDARIES[self.step].ttl_seconds
    }
}

/// The patch that gives `node` the desired TTL, or `None` when its annotation already is
/// that integer.
fn ttl_patch(node: &Node, desired: i64) -> Option<Value> {
    let current = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(TTL_ANNOTATION));
    let parsed = current.and_then(|value| value.parse::<i64>().ok());
    if parsed == Some(desired) {
        return None;
    }
    if parsed.is_none() {
        if let Some(value) = current {
            debug!(controller = NAME, node = node.name_str(), value = %value, "the ttl annotation is no integer");
        }
    }
    Some(json!({"metadata": {"annotations": {TTL_ANNOTATION: desired.to_string()}}}))
}

pub(crate) struct Controller {
    client: kube::Client,
    nodes: Store<Node>,
    sizing: Mutex<Sizing>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(QUEUE);
    let nodes = context.informers.get::<Node>();
    let controller = Arc::new(Controller {
        client,
        nodes: nodes.store().clone(),
        sizing: Mutex::new(Sizing::default()),
        queue: queue.clone(),
    });
    nodes.handle(&controller, Controller::on_node);
    Ok(Runnable::new(
        NAME,
        queue,
        WORKERS,
        controller,
        |controller, name| async move { controller.sync(&name).await },
    ))
}

impl Controller {
    fn on_node(&self, change: &Change<Node>) {
        match change {
            Change::Added(node) => {
                lock(&self.sizing).node_added();
                self.enqueue(node);
            }
            // Every update, so that a node picks up a new step at its next status report.
            Change::Updated { new, .. } => self.enqueue(new),
            // Nothing to write on a node that is gone.
            Change::Deleted(_) => lock(&self.sizing).node_deleted(),
        }
    }

    fn enqueue(&self, node: &Node) {
        if let Some(name) = &node.metadata.name {
            self.queue.add(name.clone());
        }
    }

    async fn sync(&self, name: &str) -> anyhow::Result<()> {
        let Some(node) = self.nodes.get(name) else {
            return Ok(());
        };
        let desired = lock(&self.sizing).desired_ttl_seconds();
        let Some(patch) = ttl_patch(&node, desired) else {
            return Ok(());
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .with_context(|| format!("setting the ttl annotation of node {name} to {desired}"))?;
        debug!(
            controller = NAME,
            node = name,
            ttl_seconds = desired,
            "changed the ttl annotation"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The desired TTL after each operation: `+n` adds n nodes, `-n` deletes n.
    #[test]
    fn the_ttl_steps_with_hysteresis() {
        let mut sizing = Sizing::default();
        let cases: &[(i64, i64, i64)] = &[
            // (nodes added (+) or deleted (-), then node count, then TTL)
            (100, 100, 0),
            (1, 101, 15),
            (-11, 90, 15),
            (-1, 89, 0),
            (11, 100, 0),
            (1, 101, 15),
            (400, 501, 30),
            (-51, 450, 30),
            (-1, 449, 15),
            (552, 1001, 60),
            (-101, 900, 60),
            (1101, 2001, 300),
            (-201, 1800, 300),
            (-1, 1799, 60),
            (-900, 899, 30),
            (-450, 449, 15),
            (-360, 89, 0),
            (-89, 0, 0),
        ];
        for &(change, nodes, ttl) in cases {
            for _ in 0..change.abs() {
                if change > 0 {
                    sizing.node_added()
                } else {
                    sizing.node_deleted()
                }
            }
            assert_eq!(sizing.nodes, nodes);
            assert_eq!(sizing.desired_ttl_seconds(), ttl, "at {nodes} nodes");
        }
        // A deletion never counted as an addition does not go below the first step.
        sizing.node_deleted();
        assert_eq!(sizing.desired_ttl_seconds(), 0);
        assert_eq!(sizing.step, 0);
    }

    #[test]
    fn one_step_per_node_even_past_the_last_boundary() {
        let mut sizing = Sizing {
            nodes: i32::MAX as i64,
            step: 4,
        };
        sizing.node_added();
        assert_eq!(sizing.step, 4);
        assert_eq!(sizing.desired_ttl_seconds(), 300);
    }

    fn node(annotation: Option<&str>) -> Node {
        let mut node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n", "annotations": {"other": "x"}}}),
        )
        .unwrap();
        if let Some(value) = annotation {
            node.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(TTL_ANNOTATION.into(), value.into());
        }
        node
    }

    #[test]
    fn the_annotation_is_patched_unless_it_is_the_desired_integer() {
        let patch = |value: &str| json!({"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": value}}});
        assert_eq!(ttl_patch(&node(Some("0")), 0), None);
        assert_eq!(ttl_patch(&node(Some("+15")), 15), None, "Atoi takes a sign");
        assert_eq!(ttl_patch(&node(Some("15")), 0), Some(patch("0")));
        assert_eq!(ttl_patch(&node(Some("99")), 0), Some(patch("0")));
        assert_eq!(ttl_patch(&node(Some("x")), 0), Some(patch("0")));
        assert_eq!(ttl_patch(&node(Some(" 0")), 0), Some(patch("0")));
        assert_eq!(ttl_patch(&node(None), 15), Some(patch("15")));
        let mut bare = node(None);
        bare.metadata.annotations = None;
        assert_eq!(ttl_patch(&bare, 0), Some(patch("0")));
    }
}
