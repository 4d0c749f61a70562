use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
use serde_json::{json, Value};

use super::fields::bytes_of;
use super::*;

fn claim(extra: Value) -> PersistentVolumeClaim {
    let mut c = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
            "annotations": {ANN_STORAGE_PROVISIONER: DRIVER}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"}});
    json_patch::merge(&mut c, &extra);
    serde_json::from_value(c).unwrap()
}

fn class(extra: Value) -> StorageClass {
    let mut c = json!({"metadata": {"name": "standard"}, "provisioner": DRIVER,
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
    json_patch::merge(&mut c, &extra);
    serde_json::from_value(c).unwrap()
}

fn ours(node: &str) -> bool {
    node.starts_with("sim-node-")
}

fn decide(c: &PersistentVolumeClaim, sc: Option<&StorageClass>) -> ProvisionDecision {
    provision_decision(c, sc, &ours, false, Instant::now())
}

#[test]
fn waits_for_first_consumer_then_provisions_on_the_selected_node() {
    let sc = class(json!({}));
    assert_eq!(
        decide(&claim(json!({})), Some(&sc)),
        ProvisionDecision::Skip
    );
    let selected = claim(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "sim-node-1"}}}));
    assert_eq!(
        decide(&selected, Some(&sc)),
        ProvisionDecision::Provision {
            driver: DRIVER.into(),
            node: Some("sim-node-1".into())
        }
    );
    let elsewhere = claim(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "other-0"}}}));
    assert_eq!(decide(&elsewhere, Some(&sc)), ProvisionDecision::Skip);
    let immediate = class(json!({"volumeBindingMode": "Immediate"}));
    assert_eq!(
        decide(&claim(json!({})), Some(&immediate)),
        ProvisionDecision::Provision {
            driver: DRIVER.into(),
            node: None
        }
    );
}

#[test]
fn only_unbound_claims_handed_to_our_drivers() {
    let sc = class(json!({"volumeBindingMode": "Immediate"}));
    let other =
        claim(json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: "example.com/x"}}}));
    assert_eq!(decide(&other, Some(&sc)), ProvisionDecision::Skip);
    let beta = claim(
        json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: null,
        ANN_BETA_STORAGE_PROVISIONER: NOATTACH_DRIVER}}}),
    );
    let noattach = class(json!({"provisioner": NOATTACH_DRIVER, "volumeBindingMode": "Immediate"}));
    assert!(matches!(
        decide(&beta, Some(&noattach)),
        ProvisionDecision::Provision { .. }
    ));
    let bound = claim(json!({"spec": {"volumeName": "pv-1"}}));
    assert_eq!(decide(&bound, Some(&sc)), ProvisionDecision::Skip);
    assert_eq!(
        provision_decision(&claim(json!({})), Some(&sc), &ours, true, Instant::now()),
        ProvisionDecision::Skip,
        "already provisioned"
    );
    assert_eq!(
        decide(&claim(json!({})), None),
        ProvisionDecision::ClassMissing("standard".into())
    );
    let mismatch = class(json!({"provisioner": "example.com/x", "volumeBindingMode": "Immediate"}));
    assert_eq!(
        decide(&claim(json!({})), Some(&mismatch)),
        ProvisionDecision::Skip
    );
}

#[test]
fn knobs_from_the_claim_win_over_the_class() {
    let sc = class(json!({"volumeBindingMode": "Immediate",
        "parameters": {PROVISION_ERROR: "class says no", PROVISION_DELAY: "1h"}}));
    let started = Instant::now();
    assert!(matches!(
        provision_decision(&claim(json!({})), Some(&sc), &ours, false, started),
        ProvisionDecision::WaitUntil(_)
    ));
    let c = claim(
        json!({"metadata": {"annotations": {PROVISION_DELAY: "0s", PROVISION_ERROR: "boom"}}}),
    );
    assert_eq!(
        provision_decision(&c, Some(&sc), &ours, false, started),
        ProvisionDecision::Fail("boom".into())
    );
    let bad =
        claim(json!({"metadata": {"annotations": {PROVISION_DELAY: "soon", PROVISION_ERROR: ""}}}));
    assert_eq!(
        provision_decision(&bad, Some(&sc), &ours, false, started),
        ProvisionDecision::Fail("class says no".into()),
        "an unreadable delay counts as none, an empty error as none"
    );
}

#[test]
fn the_volume_takes_the_claim_and_class() {
    let sc = class(json!({"reclaimPolicy": "Retain", "mountOptions": ["noatime"]}));
    let c = claim(json!({"spec": {"volumeMode": "Filesystem"}}));
    let pv = volume_for(&c, &sc, DRIVER, Some("zone-b"), "id-1").unwrap();
    assert_eq!(pv["metadata"]["name"], "pvc-u-1");
    assert_eq!(pv["metadata"]["annotations"][ANN_PROVISIONED_BY], DRIVER);
    let spec = &pv["spec"];
    assert_eq!(spec["capacity"]["storage"], "1Gi");
    assert_eq!(spec["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(spec["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(spec["storageClassName"], "standard");
    assert_eq!(spec["mountOptions"], json!(["noatime"]));
    assert_eq!(spec["csi"]["driver"], DRIVER);
    assert_eq!(spec["csi"]["volumeHandle"], "u-1");
    assert_eq!(spec["csi"]["fsType"], "ext4");
    assert_eq!(spec["claimRef"]["uid"], "u-1");
    assert_eq!(spec["claimRef"]["namespace"], "ns");
    assert_eq!(
        spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": ZONE_LABEL, "operator": "In", "values": ["zone-b"]})
    );
    serde_json::from_value::<PersistentVolume>(pv).unwrap();
    let block = claim(json!({"spec": {"volumeMode": "Block"}}));
    let pv = volume_for(&block, &class(json!({})), DRIVER, None, "id-1").unwrap();
    assert!(pv["spec"]["csi"].get("fsType").is_none());
    assert!(pv["spec"].get("nodeAffinity").is_none());
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    let bad = claim(json!({"spec": {"resources": {"requests": {"storage": "lots"}}}}));
    assert!(volume_for(&bad, &sc, DRIVER, None, "id")
        .unwrap_err()
        .contains("not a quantity"));
}

#[test]
fn capacities_print_as_binary_quantities() {
    assert_eq!(bytes_quantity(1 << 30), "1Gi");
    assert_eq!(bytes_quantity(3 << 20), "3Mi");
    assert_eq!(bytes_quantity(1_000_000_000), "1000000000");
    assert_eq!(bytes_quantity(1536), "1536");
    assert_eq!(bytes_quantity(512), "512");
    assert_eq!(bytes_of("1G"), Some(1_000_000_000));
    assert_eq!(bytes_of("0.5"), Some(1), "rounded up");
}

fn volume(extra: Value) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": "pvc-u-1", "annotations": {ANN_PROVISIONED_BY: DRIVER}},
        "spec": {"capacity": {"storage": "1Gi"}, "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": DRIVER, "volumeHandle": "u-1"},
            "claimRef": {"namespace": "ns", "name": "c", "uid": "u-1"}},
        "status": {"phase": "Released"}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

#[test]
fn deletes_only_its_released_delete_volumes() {
    assert!(should_delete(&volume(json!({}))));
    assert!(!should_delete(&volume(
        json!({"status": {"phase": "Bound"}})
    )));
    assert!(!should_delete(&volume(
        json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
    )));
    assert!(!should_delete(&volume(
        json!({"metadata": {"annotations": {ANN_PROVISIONED_BY: "kubernetes.io/host-path"}}})
    )));
    assert!(!should_delete(&volume(
        json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
    )));
}

#[test]
fn resizes_bound_claims_that_ask_for_more() {
    let bound = |request: &str, capacity: &str| {
        claim(
            json!({"spec": {"volumeName": "pvc-u-1", "resources": {"requests": {"storage": request}}},
            "status": {"phase": "Bound", "capacity": {"storage": capacity}}}),
        )
    };
    let pv = volume(json!({"status": {"phase": "Bound"}}));
    assert_eq!(
        resize_decision(&bound("2Gi", "1Gi"), Some(&pv)),
        ResizeDecision::Resize("2Gi".into())
    );
    assert_eq!(
        resize_decision(&bound("1Gi", "1Gi"), Some(&pv)),
        ResizeDecision::Skip
    );
    assert_eq!(
        resize_decision(&bound("2Gi", "1Gi"), None),
        ResizeDecision::Skip
    );
    let pending = claim(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}));
    assert_eq!(resize_decision(&pending, Some(&pv)), ResizeDecision::Skip);
    let gce = volume(json!({"spec": {"csi": null, "gcePersistentDisk": {"pdName": "d"}}}));
    assert_eq!(
        resize_decision(&bound("2Gi", "1Gi"), Some(&gce)),
        ResizeDecision::Skip
    );
    let other_claim = volume(json!({"spec": {"claimRef": {"uid": "u-2"}}}));
    assert_eq!(
        resize_decision(&bound("2Gi", "1Gi"), Some(&other_claim)),
        ResizeDecision::Skip
    );
    let grown = volume(json!({"spec": {"capacity": {"storage": "2Gi"}}}));
    let pending_fs = claim(
        json!({"spec": {"volumeName": "pvc-u-1", "resources": {"requests": {"storage": "2Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
            "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}}),
    );
    assert_eq!(
        resize_decision(&pending_fs, Some(&grown)),
        ResizeDecision::Skip
    );
    assert_eq!(
        resize_decision(&bound("2Gi", "1Gi"), Some(&grown)),
        ResizeDecision::Resize("2Gi".into()),
        "a grown volume whose claim is still Resizing is finished"
    );
}

fn va(extra: Value) -> VolumeAttachment {
    let mut v = json!({"metadata": {"name": "csi-abc", "finalizers": [ATTACHER_FINALIZER]},
        "spec": {"attacher": DRIVER, "nodeName": "sim-node-0", "source": {"persistentVolumeName": "pvc-u-1"}},
        "status": {"attached": false}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

#[test]
fn attaches_with_a_finalizer_and_detaches_by_dropping_it() {
    let now = Instant::now();
    assert_eq!(
        attach_decision(
            &va(json!({"metadata": {"finalizers": null}})),
            None,
            None,
            now
        ),
        AttachDecision::AddFinalizer
    );
    assert_eq!(
        attach_decision(&va(json!({})), None, None, now),
        AttachDecision::Attach
    );
    assert_eq!(
        attach_decision(&va(json!({"status": {"attached": true}})), None, None, now),
        AttachDecision::Skip
    );
    assert_eq!(
        attach_decision(
            &va(json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})),
            None,
            None,
            now
        ),
        AttachDecision::Detach
    );
    assert_eq!(
        attach_decision(
            &va(json!({"spec": {"attacher": NOATTACH_DRIVER}})),
            None,
            None,
            now
        ),
        AttachDecision::Skip
    );
    let c = claim(json!({"metadata": {"annotations": {ATTACH_ERROR: "boom"}}}));
    assert_eq!(
        attach_decision(&va(json!({})), Some(&c), None, now),
        AttachDecision::Fail("boom".into())
    );
    assert_eq!(
        attach_decision(
            &va(json!({"status": {"attachError": {"message": "boom"}}})),
            Some(&c),
            None,
            now
        ),
        AttachDecision::Skip,
        "recorded once"
    );
    let slow = class(json!({"parameters": {ATTACH_DELAY: "5m"}}));
    assert!(matches!(
        attach_decision(&va(json!({})), None, Some(&slow), now),
        AttachDecision::WaitUntil(_)
    ));
}

#[test]
fn csi_objects() {
    let node = csi_node_object("sim-node-0", "uid-0");
    assert_eq!(node["metadata"]["ownerReferences"][0]["uid"], "uid-0");
    assert_eq!(node["spec"]["drivers"][0]["name"], DRIVER);
    assert_eq!(node["spec"]["drivers"][1]["name"], NOATTACH_DRIVER);
    assert_eq!(
        node["spec"]["drivers"][0]["topologyKeys"],
        json!([ZONE_LABEL])
    );
    serde_json::from_value::<CSINode>(node.clone()).unwrap();
    let driver = csi_driver_object(NOATTACH_DRIVER, false);
    assert_eq!(driver["spec"]["attachRequired"], false);
    serde_json::from_value::<CSIDriver>(driver).unwrap();
    assert!(node["metadata"]["annotations"][ANN_MIGRATED_PLUGINS]
        .as_str()
        .unwrap()
        .contains("kubernetes.io/gce-pd"));
}
