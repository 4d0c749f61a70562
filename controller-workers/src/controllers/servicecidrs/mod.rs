//! service-cidr-controller (feature gate `MultiCIDRServiceAllocator`): keeps a ServiceCIDR
//! from going away while Service IPs still depend on it (upstream
//! `pkg/controller/servicecidrs/`).
//!
//! Keys are ServiceCIDR names (queue `ipaddresses`, 5 workers, a key dropped after 15
//! failures). A live ServiceCIDR gets the finalizer `networking.k8s.io/service-cidr-finalizer`
//! (strategic merge patch) and condition Ready True (a forced apply of its status by field
//! manager `service-cidr-controller`; a failed apply is a Warning
//! `KubernetesServiceCIDRError` event). A deleted one keeps the finalizer while an
//! IPAddress of the IP allocator within its ranges is held by no other ServiceCIDR, with
//! Ready False, reason `Terminating`; once none is left it waits out a 10 s grace from its
//! deletion (for allocations in flight) and the finalizer comes off.
//!
//! A ServiceCIDR's creation also queues the ones overlapping it; an IPAddress' creation and
//! deletion queue the ServiceCIDRs holding it.

mod tree;
pub(crate) mod types;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tracing::{debug, info};

use crate::api_errors;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::store::Store;
use tree::{Prefix, Tree};
use types::{IPAddress, ServiceCIDR, ALLOCATOR, API_VERSION, LABEL_IP_FAMILY, LABEL_MANAGED_BY};

pub const NAME: &str = "service-cidr-controller";
pub const RESOURCES: &[&str] = &[
    "networking.k8s.io/v1alpha1/ipaddresses",
    "networking.k8s.io/v1alpha1/servicecidrs",
];
/// Upstream names the queue after the IPAddresses.
const QUEUE: &str = "ipaddresses";
/// KCM starts it with 5 workers, not configurable.
const WORKERS: usize = 5;
const MAX_RETRIES: u32 = 15;
pub(crate) const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// How long a deleted ServiceCIDR is kept after nothing holds it any more.
const DELETION_GRACE: Duration = Duration::from_secs(10);
const TERMINATING_MESSAGE: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";
const READY_MESSAGE: &str = "Kubernetes Service CIDR is ready";

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    cidrs: Store<ServiceCIDR>,
    addresses: Store<IPAddress>,
    queue: Arc<WorkQueue<String>>,
    tree: Mutex<Tree>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue(QUEUE);
    let cidrs = context.informers.get::<ServiceCIDR>();
    let addresses = context.informers.get::<IPAddress>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        cidrs: cidrs.store().clone(),
        addresses: addresses.store().clone(),
        queue: queue.clone(),
        tree: Mutex::new(Tree::default()),
    });
    cidrs.handle(&controller, Controller::on_service_cidr);
    addresses.handle(&controller, Controller::on_ip_address);
    Ok(
        Runnable::new(NAME, queue, WORKERS, controller, |c, key| async move {
            c.sync(&key).await
        })
        .with_max_retries(MAX_RETRIES),
    )
}

/// The address an IPAddress stands for, when the IP allocator made it (its name is the
/// address).
fn allocated_address(ip: &IPAddress) -> Option<IpAddr> {
    let labels = ip.metadata.labels.as_ref()?;
    if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(ALLOCATOR) {
        return None;
    }
    ip.metadata.name.as_deref()?.parse().ok()
}

/// The ServiceCIDRs a new ServiceCIDR overlaps: those holding one of its prefixes, and
/// those within one.
fn overlapping(tree: &Tree, cidr: &ServiceCIDR) -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    for prefix in cidr.spec.cidrs.iter().filter_map(|c| Prefix::parse(c)) {
        names.extend(tree.holding(&prefix));
        names.extend(tree.within(&prefix));
    }
    names.into_iter().collect()
}

/// The ServiceCIDRs holding an allocated address.
fn containing(tree: &Tree, ip: &IPAddress) -> Vec<String> {
    let Some(address) = allocated_address(ip) else {
        return Vec::new();
    };
    let mut names: Vec<String> = tree
        .host_matches(address)
        .into_iter()
        .flat_map(|set| set.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `canDeleteCIDR`: whether a deleted ServiceCIDR may go. It may when each of its
/// prefixes is also held by another ServiceCIDR; otherwise only when no allocated
/// address of its families is held by it alone.
fn can_delete(tree: &Tree, cidr: &ServiceCIDR, addresses: &[Arc<IPAddress>]) -> bool {
    let name = cidr.name_str();
    let prefixes: Vec<Prefix> = cidr
        .spec
        .cidrs
        .iter()
        .filter_map(|c| Prefix::parse(c))
        .collect();
    let alone = |set: &std::collections::BTreeSet<String>| set.len() == 1 && set.contains(name);
    if !prefixes.iter().any(|p| alone(&tree.holding(p))) {
        return true;
    }
    for prefix in &prefixes {
        for ip in addresses {
            let labels = ip.metadata.labels.as_ref();
            let family = labels
                .and_then(|l| l.get(LABEL_IP_FAMILY))
                .map(String::as_str);
            if family != Some(prefix.family()) {
                continue;
            }
            let Some(address) = allocated_address(ip) else {
                continue;
            };
            let matches = tree.host_matches(address);
            if matches.len() == 1 && matches.iter().any(|set| alone(set)) {
                return false;
            }
        }
    }
    true
}

/// What a sync does with a ServiceCIDR.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    /// Live: make sure of the finalizer, and say it is Ready.
    Ready,
    /// Deleted, still holding addresses: say it is Terminating.
    Blocked,
    /// Deleted, free: come back after the rest of the grace.
    Wait(Duration),
    /// Deleted, free, grace over.
    Release,
}

fn action_for(deleted_for: Option<Duration>, free: bool) -> Action {
    match deleted_for {
        None => Action::Ready,
        Some(_) if !free => Action::Blocked,
        Some(elapsed) if elapsed < DELETION_GRACE => Action::Wait(DELETION_GRACE - elapsed),
        Some(_) => Action::Release,
    }
}

/// The status apply of the Ready condition.
fn ready_apply(name: &str, ready: bool, now: &str) -> serde_json::Value {
    let condition = if ready {
        json!({"type": "Ready", "status": "True", "message": READY_MESSAGE, "lastTransitionTime": now})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "Terminating",
               "message": TERMINATING_MESSAGE, "lastTransitionTime": now})
    };
    json!({"apiVersion": API_VERSION, "kind": "ServiceCIDR", "metadata": {"name": name},
           "status": {"conditions": [condition]}})
}

fn has_finalizer(cidr: &ServiceCIDR) -> bool {
    cidr.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

impl Controller {
    fn current_tree(&self) -> std::sync::MutexGuard<'_, Tree> {
        self.tree.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn on_service_cidr(&self, change: &Change<ServiceCIDR>) {
        let cidr = change.latest();
        let Some(name) = cidr.metadata.name.clone() else {
            return;
        };
        if let Change::Added(cidr) = change {
            for other in overlapping(&self.current_tree(), cidr) {
                self.queue.add(other);
            }
        }
        self.queue.add(name);
    }

    fn on_ip_address(&self, change: &Change<IPAddress>) {
        if matches!(change, Change::Updated { .. }) {
            return;
        }
        for cidr in containing(&self.current_tree(), change.latest()) {
            self.queue.add(cidr);
        }
    }

    /// `syncCIDRs`: the tree rebuilt from the cache.
    fn rebuild_tree(&self) {
        let cidrs = self.cidrs.list();
        let tree = Tree::build(
            cidrs
                .iter()
                .filter_map(|c| Some((c.metadata.name.as_deref()?, c.spec.cidrs.as_slice()))),
        );
        *self.current_tree() = tree;
    }

    async fn sync(&self, name: &str) -> anyhow::Result<()> {
        self.rebuild_tree();
        let Some(cidr) = self.cidrs.get(name) else {
            debug!(
                controller = NAME,
                service_cidr = name,
                "ServiceCIDR no longer exists"
            );
            return Ok(());
        };
        let deleted_for = cidr.metadata.deletion_timestamp.as_ref().map(|t| {
            let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
            Duration::try_from(elapsed).unwrap_or(Duration::ZERO)
        });
        let free = deleted_for.is_some() && {
            let addresses = self.addresses.list();
            can_delete(&self.current_tree(), &cidr, &addresses)
        };
        match action_for(deleted_for, free) {
            Action::Blocked => self.apply_ready(name, false).await,
            Action::Wait(rest) => {
                self.queue.add_after(name.to_string(), rest);
                Ok(())
            }
            Action::Release => {
                info!(
                    controller = NAME,
                    service_cidr = name,
                    "ServiceCIDR no longer has orphan IPs"
                );
                self.patch_finalizer(&cidr, false).await
            }
            Action::Ready => {
                self.patch_finalizer(&cidr, true).await?;
                if let Err(e) = self.apply_ready(name, true).await {
                    info!(controller = NAME, service_cidr = name, error = %e, "error updating ServiceCIDR status");
                    self.recorder.event(
                        cidr.as_ref(),
                        "Warning",
                        "KubernetesServiceCIDRError",
                        "The ServiceCIDR Status can not be set to Ready=True",
                    );
                    return Err(e);
                }
                Ok(())
            }
        }
    }

    async fn apply_ready(&self, name: &str, ready: bool) -> anyhow::Result<()> {
        let api: Api<ServiceCIDR> = Api::all(self.client.clone());
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let params = PatchParams::apply(NAME).force();
        api.patch_status(name, &params, &Patch::Apply(ready_apply(name, ready, &now)))
            .await
            .with_context(|| format!("applying the Ready condition of ServiceCIDR {name}"))?;
        Ok(())
    }

    /// Adds (`add`) or removes the finalizer by strategic merge patch, when needed; a
    /// ServiceCIDR gone meanwhile is no error.
    async fn patch_finalizer(&self, cidr: &ServiceCIDR, add: bool) -> anyhow::Result<()> {
        if has_finalizer(cidr) == add {
            return Ok(());
        }
        let name = cidr.name_str();
        let patch = if add {
            json!({"metadata": {"finalizers": [FINALIZER]}})
        } else {
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}})
        };
        let api: Api<ServiceCIDR> = Api::all(self.client.clone());
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                debug!(
                    controller = NAME,
                    service_cidr = name,
                    add,
                    "patched the protection finalizer"
                );
                Ok(())
            }
            Err(e) if api_errors::is_not_found(&e) => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("patching the finalizer of ServiceCIDR {name}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn cidr(name: &str, cidrs: &[&str]) -> ServiceCIDR {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"cidrs": cidrs}}))
            .unwrap()
    }

    fn ip(address: &str, labels: Value) -> Arc<IPAddress> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": address, "labels": labels}}))
                .unwrap(),
        )
    }

    fn allocated(address: &str, family: &str) -> Arc<IPAddress> {
        ip(
            address,
            json!({LABEL_MANAGED_BY: ALLOCATOR, LABEL_IP_FAMILY: family}),
        )
    }

    fn tree_of(cidrs: &[&ServiceCIDR]) -> Tree {
        Tree::build(
            cidrs
                .iter()
                .map(|c| (c.metadata.name.as_deref().unwrap(), c.spec.cidrs.as_slice())),
        )
    }

    #[test]
    fn a_deleted_range_waits_for_the_addresses_it_alone_holds() {
        let doomed = cidr("doomed", &["10.0.0.0/24"]);
        let wider = cidr("wider", &["10.0.0.0/16"]);
        let twin = cidr("twin", &["10.0.0.0/24"]);
        let in_use = [allocated("10.0.0.5", "IPv4")];
        let cases: Vec<(&str, Tree, Vec<Arc<IPAddress>>, bool)> = vec![
            ("no addresses", tree_of(&[&doomed]), vec![], true),
            (
                "an allocated address",
                tree_of(&[&doomed]),
                in_use.to_vec(),
                false,
            ),
            (
                "not the allocator's",
                tree_of(&[&doomed]),
                vec![ip("10.0.0.5", json!({LABEL_IP_FAMILY: "IPv4"}))],
                true,
            ),
            (
                "other family label",
                tree_of(&[&doomed]),
                vec![allocated("10.0.0.5", "IPv6")],
                true,
            ),
            (
                "outside the range",
                tree_of(&[&doomed]),
                vec![allocated("10.0.1.5", "IPv4")],
                true,
            ),
            (
                "the network address",
                tree_of(&[&doomed]),
                vec![allocated("10.0.0.0", "IPv4")],
                true,
            ),
            (
                "a twin holds the range",
                tree_of(&[&doomed, &twin]),
                in_use.to_vec(),
                true,
            ),
            // A wider range holds the prefix: the deleted one has a parent and may go.
            (
                "a wider range",
                tree_of(&[&doomed, &wider]),
                in_use.to_vec(),
                true,
            ),
        ];
        for (what, tree, addresses, want) in cases {
            assert_eq!(can_delete(&tree, &doomed, &addresses), want, "{what}");
        }
    }

    #[test]
    fn the_wider_range_is_blocked_by_addresses_outside_the_narrow_one() {
        let narrow = cidr("narrow", &["10.0.0.0/24"]);
        let wider = cidr("wider", &["10.0.0.0/16"]);
        let tree = tree_of(&[&narrow, &wider]);
        assert!(!can_delete(&tree, &wider, &[allocated("10.0.1.5", "IPv4")]));
        // Inside the narrow one, two prefixes match: upstream lets the wide one go.
        assert!(can_delete(&tree, &wider, &[allocated("10.0.0.5", "IPv4")]));
    }

    #[test]
    fn actions_follow_deletion_and_grace() {
        let s = Duration::from_secs;
        assert_eq!(action_for(None, false), Action::Ready);
        assert_eq!(action_for(Some(s(1)), false), Action::Blocked);
        assert_eq!(action_for(Some(s(3)), true), Action::Wait(s(7)));
        assert_eq!(action_for(Some(s(10)), true), Action::Release);
        assert_eq!(action_for(Some(s(60)), true), Action::Release);
    }

    #[test]
    fn events_queue_the_ranges_concerned() {
        let a = cidr("a", &["10.0.0.0/24"]);
        let b = cidr("b", &["10.0.0.0/16"]);
        let c = cidr("c", &["192.168.0.0/24"]);
        let tree = tree_of(&[&a, &b, &c]);
        assert_eq!(
            overlapping(&tree, &cidr("new", &["10.0.0.0/20"])),
            ["a", "b"]
        );
        assert_eq!(
            containing(&tree, &allocated("10.0.0.9", "IPv4")),
            ["a", "b"]
        );
        assert!(containing(&tree, &ip("10.0.0.9", json!({}))).is_empty());
        assert!(containing(&tree, &allocated("172.16.0.1", "IPv4")).is_empty());
    }

    #[test]
    fn the_ready_apply_is_upstreams() {
        let ready = ready_apply("kubernetes", true, "T");
        assert_eq!(ready["status"]["conditions"][0]["message"], READY_MESSAGE);
        assert!(ready["status"]["conditions"][0].get("reason").is_none());
        let terminating = ready_apply("x", false, "T");
        assert_eq!(
            terminating["status"]["conditions"][0]["reason"],
            "Terminating"
        );
        assert_eq!(terminating["status"]["conditions"][0]["status"], "False");
        assert_eq!(terminating["apiVersion"], API_VERSION);
    }
}
