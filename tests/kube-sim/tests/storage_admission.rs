//! kube-sim's storage admission and strategies, checked through the API as a client sees
//! them: DefaultStorageClass, PersistentVolumeClaimResize's refusals, the protection
//! finalizers of StorageObjectInUseProtection, and a PersistentVolume's phase transition
//! time.

mod common;

use common::{call, start};
use serde_json::{json, Value};

const CLAIMS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";
const VOLUMES: &str = "/api/v1/persistentvolumes";
const CLASSES: &str = "/apis/storage.k8s.io/v1/storageclasses";

fn claim(name: &str, class: Option<&str>) -> Value {
    let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    if let Some(class) = class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    claim
}

async fn class(client: &kube::Client, name: &str, default: bool, expand: bool) {
    let mut class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": "example.com/p", "allowVolumeExpansion": expand});
    if default {
        class["metadata"]["annotations"] =
            json!({"storageclass.kubernetes.io/is-default-class": "true"});
    }
    call(client, "POST", CLASSES, Some(class))
        .await
        .expect("class created");
}

async fn create_claim(client: &kube::Client, body: Value) -> Value {
    call(client, "POST", CLAIMS, Some(body))
        .await
        .expect("claim created")
}

#[tokio::test]
async fn a_claim_without_a_class_gets_the_default_one() {
    let (_sim, client) = start().await;
    let none = create_claim(&client, claim("before", None)).await;
    assert!(
        none["spec"].get("storageClassName").is_none(),
        "no default class yet: {none}"
    );
    assert_eq!(
        none["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );

    class(&client, "plain", false, false).await;
    class(&client, "standard", true, false).await;
    let defaulted = create_claim(&client, claim("after", None)).await;
    assert_eq!(defaulted["spec"]["storageClassName"], "standard");
    // The admission's change is not the client's field.
    let owned = defaulted["metadata"]["managedFields"].to_string();
    assert!(!owned.contains("storageClassName"), "{owned}");

    let empty = create_claim(&client, claim("empty", Some(""))).await;
    assert_eq!(empty["spec"]["storageClassName"], "");
    let named = create_claim(&client, claim("named", Some("plain"))).await;
    assert_eq!(named["spec"]["storageClassName"], "plain");
    let mut beta = claim("beta", None);
    beta["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "plain"});
    let beta = create_claim(&client, beta).await;
    assert!(beta["spec"].get("storageClassName").is_none(), "{beta}");

    // A dry run is defaulted too; a status sent at create is dropped.
    let mut sent = claim("dry", None);
    sent["status"] = json!({"phase": "Bound"});
    let dry = call(&client, "POST", &format!("{CLAIMS}?dryRun=All"), Some(sent))
        .await
        .expect("dry run");
    assert_eq!(dry["spec"]["storageClassName"], "standard");
    assert_eq!(dry["status"], json!({"phase": "Pending"}));
}

/// Sets a claim's phase through its status, as the binder does.
async fn bind(client: &kube::Client, name: &str) -> Value {
    let mut current = call(client, "GET", &format!("{CLAIMS}/{name}"), None)
        .await
        .expect("claim");
    current["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    call(
        client,
        "PUT",
        &format!("{CLAIMS}/{name}/status"),
        Some(current),
    )
    .await
    .expect("status written")
}

async fn grow(client: &kube::Client, name: &str, size: &str) -> Result<Value, (u16, String)> {
    call(
        client,
        "PATCH",
        &format!("{CLAIMS}/{name}"),
        Some(json!({"spec": {"resources": {"requests": {"storage": size}}}})),
    )
    .await
}

#[tokio::test]
async fn a_claim_grows_only_if_its_class_allows_expansion() {
    let (_sim, client) = start().await;
    class(&client, "fixed", false, false).await;
    class(&client, "elastic", false, true).await;
    let refusal = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
    for (name, class) in [
        ("fixed-claim", Some("fixed")),
        ("no-class", Some("")),
        ("gone", Some("missing")),
    ] {
        create_claim(&client, claim(name, class)).await;
        bind(&client, name).await;
        assert_eq!(
            grow(&client, name, "2Gi").await.err(),
            Some((
                403,
                format!("persistentvolumeclaims \"{name}\" is forbidden: {refusal}")
            )),
            "{name}"
        );
    }

    create_claim(&client, claim("elastic-claim", Some("elastic"))).await;
    // Pending: validation refuses the change first, as kube-apiserver's does.
    let (code, _) = grow(&client, "elastic-claim", "2Gi")
        .await
        .expect_err("a pending claim does not grow");
    assert_eq!(code, 422);
    bind(&client, "elastic-claim").await;
    let grown = grow(&client, "elastic-claim", "2Gi")
        .await
        .expect("an expandable class lets it grow");
    assert_eq!(grown["spec"]["resources"]["requests"]["storage"], "2Gi");
    // The same size again, or other fields, need no expansion.
    grow(&client, "fixed-claim", "1Gi")
        .await
        .expect("no growth, no refusal");
    call(
        &client,
        "PATCH",
        &format!("{CLAIMS}/fixed-claim"),
        Some(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .expect("labels change");
}

#[tokio::test]
async fn a_volume_records_when_its_phase_changed() {
    let (_sim, client) = start().await;
    let created = call(
        &client,
        "POST",
        VOLUMES,
        Some(
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/tmp/pv1"}},
            "status": {"phase": "Bound", "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}}),
        ),
    )
    .await
    .expect("volume created");
    assert_eq!(
        created["status"]["phase"], "Pending",
        "the sent status is dropped"
    );
    assert_ne!(
        created["status"]["lastPhaseTransitionTime"],
        "2020-01-01T00:00:00Z"
    );
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["kubernetes.io/pv-protection"])
    );

    let write_status = |status: Value| {
        let client = client.clone();
        async move {
            call(
                &client,
                "PATCH",
                &format!("{VOLUMES}/pv1/status"),
                Some(json!({"status": status})),
            )
            .await
            .expect("status written")
        }
    };
    // A client may set the time along with a new phase.
    let available = write_status(
        json!({"phase": "Available", "lastPhaseTransitionTime": "2021-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        available["status"]["lastPhaseTransitionTime"],
        "2021-01-01T00:00:00Z"
    );
    // A new phase with the time left as it was: now.
    let bound = write_status(json!({"phase": "Bound"})).await;
    let stamped = bound["status"]["lastPhaseTransitionTime"].clone();
    assert_ne!(stamped, "2021-01-01T00:00:00Z");
    assert!(stamped.is_string(), "{bound}");
    // The same phase: the time stays.
    let again = write_status(json!({"phase": "Bound", "message": "m"})).await;
    assert_eq!(again["status"]["lastPhaseTransitionTime"], stamped);
    // The main resource does not write status.
    let relabelled = call(
        &client,
        "PATCH",
        &format!("{VOLUMES}/pv1"),
        Some(json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}})),
    )
    .await
    .expect("labels written");
    assert_eq!(relabelled["status"]["phase"], "Bound");
    assert_eq!(relabelled["status"]["lastPhaseTransitionTime"], stamped);
}
