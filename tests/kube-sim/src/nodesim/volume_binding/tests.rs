use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::*;
use crate::nodesim::csi::ANN_SELECTED_NODE;

#[derive(Default)]
struct Fake {
    claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    volumes: HashMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
}

impl StorageLookup for Fake {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(&format!("{namespace}/{name}")).cloned()
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name).cloned()
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(name).cloned()
    }
    fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.volumes
            .values()
            .filter(|v| csi::volume_class(v) == class)
            .cloned()
            .collect()
    }
}

impl Fake {
    fn with_claim(mut self, name: &str, extra: Value) -> Self {
        let mut c = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "5"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}});
        json_patch::merge(&mut c, &extra);
        self.claims.insert(
            format!("ns/{name}"),
            Arc::new(serde_json::from_value(c).unwrap()),
        );
        self
    }
    fn with_volume(mut self, name: &str, extra: Value) -> Self {
        let mut v = json!({"metadata": {"name": name, "resourceVersion": "5"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
            "status": {"phase": "Available"}});
        json_patch::merge(&mut v, &extra);
        self.volumes
            .insert(name.into(), Arc::new(serde_json::from_value(v).unwrap()));
        self
    }
    fn with_class(mut self, name: &str, mode: &str, provisioner: &str) -> Self {
        let c = json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
        self.classes
            .insert(name.into(), Arc::new(serde_json::from_value(c).unwrap()));
        self
    }
}

fn pod(volumes: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes}}),
    )
    .unwrap()
}

fn node(name: &str, zone: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, csi::ZONE_LABEL: zone}}}))
    .unwrap()
}

fn claim_volume(claim: &str) -> Value {
    json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
}

fn bound(volume: &str) -> Value {
    json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": volume}, "status": {"phase": "Bound"}})
}

#[test]
fn pre_filter_messages() {
    let fake = Fake::default()
        .with_class("wait", "WaitForFirstConsumer", csi::DRIVER)
        .with_class("now", "Immediate", csi::DRIVER)
        .with_claim(
            "deleting",
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        )
        .with_claim(
            "lost",
            json!({"spec": {"volumeName": "gone"}, "status": {"phase": "Lost"}}),
        )
        .with_claim("immediate", json!({"spec": {"storageClassName": "now"}}))
        .with_claim("noclass", json!({"spec": {"storageClassName": ""}}))
        .with_claim("delayed", json!({"spec": {"storageClassName": "wait"}}))
        .with_claim("p-scratch", json!({}));
    let cases = [
        ("missing", "persistentvolumeclaim \"missing\" not found"),
        (
            "deleting",
            "persistentvolumeclaim \"deleting\" is being deleted",
        ),
        (
            "lost",
            "persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"gone\"",
        ),
        ("immediate", UNBOUND_IMMEDIATE),
        ("noclass", UNBOUND_IMMEDIATE),
    ];
    for (claim, message) in cases {
        assert_eq!(
            pre_filter(&pod(claim_volume(claim)), &fake).unwrap_err(),
            message
        );
    }
    let split = pre_filter(&pod(claim_volume("delayed")), &fake)
        .unwrap()
        .unwrap();
    assert_eq!((split.bound.len(), split.delayed.len()), (0, 1));
    assert!(
        pre_filter(&pod(json!([{"name": "e", "emptyDir": {}}])), &fake)
            .unwrap()
            .is_none()
    );
    let ephemeral =
        json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
    assert_eq!(
        pre_filter(&pod(ephemeral.clone()), &fake).unwrap_err(),
        "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"
    );
    let unmade = json!([{"name": "other", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
    assert_eq!(
        pre_filter(&pod(unmade), &fake).unwrap_err(),
        "waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-other\""
    );
    let owned = Fake::default().with_claim(
        "p-scratch",
        json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]}}),
    );
    assert_eq!(
        pre_filter(&pod(ephemeral), &owned).unwrap_err(),
        UNBOUND_IMMEDIATE,
        "owned, but not bound and of no class"
    );
}

#[test]
fn bound_volumes_must_allow_the_node() {
    let affinity = json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}}});
    let fake = Fake::default()
        .with_claim("c", bound("local"))
        .with_volume("local", affinity)
        .with_claim("orphan", bound("nothing"));
    let claims = pre_filter(&pod(claim_volume("c")), &fake).unwrap().unwrap();
    let none = HashSet::new();
    assert!(filter(&claims, &node("n2", "a"), &fake, &none).is_ok());
    assert_eq!(
        filter(&claims, &node("n1", "a"), &fake, &none).unwrap_err(),
        vec![REASON_NODE_CONFLICT]
    );
    let claims = pre_filter(&pod(claim_volume("orphan")), &fake)
        .unwrap()
        .unwrap();
    assert_eq!(
        filter(&claims, &node("n1", "a"), &fake, &none).unwrap_err(),
        vec![REASON_PV_NOT_EXIST]
    );
}

#[test]
fn delayed_claims_match_the_smallest_fitting_volume_or_provision() {
    let fake = Fake::default()
        .with_class("local", "WaitForFirstConsumer", NOT_SUPPORTED_PROVISIONER)
        .with_class("standard", "WaitForFirstConsumer", csi::DRIVER)
        .with_claim("c", json!({"spec": {"storageClassName": "local"}}))
        .with_volume(
            "big",
            json!({"spec": {"storageClassName": "local", "capacity": {"storage": "10Gi"}}}),
        )
        .with_volume(
            "small",
            json!({"spec": {"storageClassName": "local", "capacity": {"storage": "2Gi"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": csi::ZONE_LABEL, "operator": "In", "values": ["b"]}]}]}}}}),
        )
        .with_volume(
            "tiny",
            json!({"spec": {"storageClassName": "local", "capacity": {"storage": "1Mi"}}}),
        )
        .with_volume(
            "taken",
            json!({"spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"},
            "claimRef": {"namespace": "ns", "name": "other"}}}),
        )
        .with_claim("d", json!({"spec": {"storageClassName": "standard"}}));
    let claims = pre_filter(&pod(claim_volume("c")), &fake).unwrap().unwrap();
    let none = HashSet::new();
    let on_b = filter(&claims, &node("n1", "b"), &fake, &none).unwrap();
    assert_eq!(on_b.static_bindings[0].0.name_any(), "small");
    let on_a = filter(&claims, &node("n0", "a"), &fake, &none).unwrap();
    assert_eq!(on_a.static_bindings[0].0.name_any(), "big");
    let promised: HashSet<String> = ["big".to_string()].into();
    assert_eq!(
        filter(&claims, &node("n0", "a"), &fake, &promised).unwrap_err(),
        vec![REASON_BIND_CONFLICT],
        "no volume left and the class cannot provision"
    );
    let claims = pre_filter(&pod(claim_volume("d")), &fake).unwrap().unwrap();
    let provision = filter(&claims, &node("n0", "a"), &fake, &none).unwrap();
    assert_eq!(provision.provisions.len(), 1);
    assert!(provision.static_bindings.is_empty());
    let selected = Fake::default()
        .with_class("standard", "WaitForFirstConsumer", csi::DRIVER)
        .with_claim(
            "d",
            json!({"spec": {"storageClassName": "standard"},
            "metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}}),
        );
    let claims = pre_filter(&pod(claim_volume("d")), &selected)
        .unwrap()
        .unwrap();
    assert!(filter(&claims, &node("n1", "a"), &selected, &none).is_ok());
    assert_eq!(
        filter(&claims, &node("n0", "a"), &selected, &none).unwrap_err(),
        vec![REASON_BIND_CONFLICT]
    );
}

#[test]
fn selectors_modes_and_volume_modes() {
    let fake = Fake::default()
        .with_class("local", "WaitForFirstConsumer", NOT_SUPPORTED_PROVISIONER)
        .with_claim("sel", json!({"spec": {"storageClassName": "local",
            "selector": {"matchLabels": {"tier": "gold"}}}}))
        .with_claim("rwx", json!({"spec": {"storageClassName": "local", "accessModes": ["ReadWriteMany"]}}))
        .with_claim("block", json!({"spec": {"storageClassName": "local", "volumeMode": "Block"}}))
        .with_volume("silver", json!({"metadata": {"labels": {"tier": "silver"}}, "spec": {"storageClassName": "local"}}));
    let none = HashSet::new();
    for claim in ["sel", "rwx", "block"] {
        let claims = pre_filter(&pod(claim_volume(claim)), &fake)
            .unwrap()
            .unwrap();
        assert!(
            filter(&claims, &node("n0", "a"), &fake, &none).is_err(),
            "{claim}"
        );
    }
    let expr: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["gold"]}, {"key": "zone", "operator": "DoesNotExist"}]}))
    .unwrap();
    assert!(selector_matches(
        &expr,
        &[("tier".to_string(), "silver".to_string())].into()
    ));
}

#[test]
fn bindings_complete_when_the_binder_finishes() {
    let n1 = node("n1", "a");
    let written = vec![
        Written {
            claim: "ns/c".into(),
            volume: Some("pv".into()),
            resource_version: "6".into(),
        },
        Written {
            claim: "ns/d".into(),
            volume: None,
            resource_version: "6".into(),
        },
    ];
    let claim_ref = json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}, "metadata": {"resourceVersion": "6"}});
    let selected =
        json!({"metadata": {"resourceVersion": "7", "annotations": {ANN_SELECTED_NODE: "n1"}}});
    let pending = Fake::default()
        .with_volume("pv", claim_ref.clone())
        .with_claim("c", json!({}))
        .with_claim("d", selected.clone());
    assert_eq!(check_bindings(&n1, &written, &pending), Progress::Waiting);
    let lagging = Fake::default()
        .with_volume("pv", json!({}))
        .with_claim("c", json!({}))
        .with_claim("d", selected.clone());
    assert_eq!(
        check_bindings(&n1, &written, &lagging),
        Progress::Waiting,
        "the store has not seen the write yet"
    );
    let mut done_d = selected.clone();
    json_patch::merge(&mut done_d, &bound("pvc-d"));
    let done = Fake::default()
        .with_volume("pv", claim_ref.clone())
        .with_volume("pvc-d", json!({}))
        .with_claim("c", bound("pv"))
        .with_claim("d", done_d);
    assert_eq!(check_bindings(&n1, &written, &done), Progress::Bound);
    let gave_up = Fake::default()
        .with_volume("pv", claim_ref)
        .with_claim("c", bound("pv"))
        .with_claim("d", json!({"metadata": {"resourceVersion": "8"}}));
    assert_eq!(
        check_bindings(&n1, &written, &gave_up),
        Progress::Failed("provisioning failed for PVC \"d\"".into())
    );
    let reset = Fake::default()
        .with_volume("pv", json!({"metadata": {"resourceVersion": "9"}}))
        .with_claim("c", json!({}));
    assert_eq!(
        check_bindings(&n1, &written[..1], &reset),
        Progress::Failed("ClaimRef got reset for pv \"pv\"".into())
    );
}
