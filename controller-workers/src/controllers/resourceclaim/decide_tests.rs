use super::*;
use serde_json::{json, Value};

fn pod(extra: Value) -> ClaimPod {
    let mut pod = json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
        "spec": {"resourceClaims": [
            {"name": "gpu", "source": {"resourceClaimTemplateName": "gpu-template"}},
        ]},
        "status": {"phase": "Pending"},
    });
    merge(&mut pod, extra);
    serde_json::from_value(pod).unwrap()
}

fn claim(extra: Value) -> ResourceClaim {
    let mut claim = json!({
        "metadata": {"name": "p-gpu-abcde", "namespace": "ns",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                          "uid": "pod-uid", "controller": true}]},
        "spec": {"resourceClassName": "gpus"},
    });
    merge(&mut claim, extra);
    serde_json::from_value(claim).unwrap()
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}

#[test]
fn claim_names_come_from_the_source_or_the_pod_status() {
    let generated = pod(json!({"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]}}));
    let cases = [
        (
            pod(
                json!({"spec": {"resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "shared"}}]}}),
            ),
            ClaimName::Named {
                name: "shared".into(),
                check_owner: false,
            },
        ),
        (
            generated,
            ClaimName::Named {
                name: "p-gpu-abcde".into(),
                check_owner: true,
            },
        ),
        (
            pod(json!({"status": {"resourceClaimStatuses": [{"name": "gpu"}]}})),
            ClaimName::NotNeeded,
        ),
        (
            pod(json!({})),
            ClaimName::NotCreatedYet("pod \"ns/p\": ResourceClaim not created yet".into()),
        ),
        (
            pod(json!({"spec": {"resourceClaims": [{"name": "gpu", "source": {}}]}})),
            ClaimName::Unsupported(
                "pod \"ns/p\", spec.resourceClaim \"gpu\": none of the supported fields are set"
                    .into(),
            ),
        ),
    ];
    for (pod, want) in cases {
        assert_eq!(claim_name(&pod, &pod.spec.resource_claims[0]), want);
    }
}

#[test]
fn a_claim_is_for_the_pod_that_controls_it_in_its_namespace() {
    let pod = pod(json!({}));
    assert_eq!(is_for_pod(&pod, &claim(json!({}))), Ok(()));
    let not_owner = "ResourceClaim ns/p-gpu-abcde was not created for pod ns/p (pod is not owner)";
    let other_uid = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "old", "controller": true}]}}));
    assert_eq!(is_for_pod(&pod, &other_uid), Err(not_owner.into()));
    let not_controller = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"}]}}));
    assert_eq!(is_for_pod(&pod, &not_controller), Err(not_owner.into()));
    let elsewhere = claim(json!({"metadata": {"namespace": "other"}}));
    assert_eq!(
        is_for_pod(&pod, &elsewhere),
        Err(
            "ResourceClaim other/p-gpu-abcde was not created for pod ns/p (pod is not owner)"
                .into()
        )
    );
}

#[test]
fn pods_need_claims_until_they_end() {
    let cases = [
        (pod(json!({})), false, (true, "pod might run")),
        (pod(json!({})), true, (false, "pod got removed")),
        (
            pod(json!({"status": {"phase": "Succeeded"}})),
            false,
            (false, "pod has terminated"),
        ),
        (
            pod(json!({"status": {"phase": "Failed"}})),
            false,
            (false, "pod has terminated"),
        ),
        (
            pod(json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})),
            false,
            (false, "pod got deleted before scheduling"),
        ),
        (
            pod(
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
                       "spec": {"nodeName": "n1"}}),
            ),
            false,
            (true, "pod might run"),
        ),
    ];
    for (pod, deleted, want) in cases {
        assert_eq!(pod_needs_claims(&pod, deleted), want);
        if !deleted {
            assert_eq!(is_pod_done(&pod), !want.0, "{:?}", pod.metadata);
        }
    }
}

#[test]
fn scheduled_claims_get_a_scheduling_context_or_a_reservation() {
    let pod = pod(json!({"spec": {"nodeName": "n1"}}));
    let allocated = json!({"status": {"allocation": {"availableOnNodes": {}}}});
    let cases = [
        (claim(json!({})), ScheduledClaim::EnsureSchedulingContext),
        (
            claim(json!({"spec": {"allocationMode": "WaitForFirstConsumer"}})),
            ScheduledClaim::EnsureSchedulingContext,
        ),
        (
            claim(json!({"spec": {"allocationMode": "Immediate"}})),
            ScheduledClaim::Nothing,
        ),
        (claim(allocated.clone()), ScheduledClaim::Reserve),
        (
            claim(json!({"status": {"allocation": {}, "reservedFor": [
                {"resource": "pods", "name": "p", "uid": "pod-uid"}]}})),
            ScheduledClaim::Nothing,
        ),
        (
            claim(json!({"status": {"allocation": {}, "reservedFor": [
                {"resource": "pods", "name": "q", "uid": "q-uid"}]}})),
            ScheduledClaim::Nothing,
        ),
        (
            claim(
                json!({"status": {"allocation": {"shareable": true}, "reservedFor": [
                {"resource": "pods", "name": "q", "uid": "q-uid"}]}}),
            ),
            ScheduledClaim::Reserve,
        ),
    ];
    for (claim, want) in cases {
        assert_eq!(
            scheduled_claim_work(&pod, &claim),
            want,
            "{:?}",
            claim.status
        );
    }
}

#[test]
fn generate_names_are_shortened_in_proportion() {
    assert_eq!(generate_name("web-0", "gpu"), "web-0-gpu-");
    let pod = "p".repeat(40);
    let claim = "c".repeat(30);
    // 72 bytes: each part keeps its share of 57.
    let name = generate_name(&pod, &claim);
    assert_eq!(
        name,
        format!("{}-{}", "p".repeat(40 * 57 / 72), "c".repeat(30 * 57 / 72))
    );
    assert!(name.len() <= 57);
}

#[test]
fn the_claim_comes_from_the_template() {
    let pod = pod(json!({}));
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "metadata": {"name": "gpu-template", "namespace": "ns"},
        "spec": {"metadata": {"labels": {"app": "a"}, "annotations": {"note": "n"}},
                 "spec": {"resourceClassName": "gpus", "allocationMode": "Immediate"}},
    }))
    .unwrap();
    let claim = serde_json::to_value(claim_from_template(&pod, "gpu", &template)).unwrap();
    assert_eq!(
        claim,
        json!({
            "apiVersion": "resource.k8s.io/v1alpha2",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": "p-gpu-",
                "labels": {"app": "a"},
                "annotations": {"note": "n", "resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                                     "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"resourceClassName": "gpus", "allocationMode": "Immediate"},
        })
    );
}

#[test]
fn generated_claims_are_found_by_annotation_or_old_name() {
    let pod = pod(json!({}));
    let annotated = |name: &str, pod_claim: &str| {
        claim(json!({"metadata": {"name": name,
            "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim}}}))
    };
    let claims = [annotated("p-other-1", "other"), annotated("p-gpu-2", "gpu")];
    let found = find_generated(&pod, "gpu", &claims).and_then(|c| c.metadata.name.clone());
    assert_eq!(found.as_deref(), Some("p-gpu-2"));
    let old = [
        claim(json!({"metadata": {"name": "p-gpu"}})),
        claim(json!({})),
    ];
    let found = find_generated(&pod, "gpu", &old).and_then(|c| c.metadata.name.clone());
    assert_eq!(found.as_deref(), Some("p-gpu"));
    assert!(find_generated(&pod, "gpu", &[claim(json!({}))]).is_none());
}

#[test]
fn reservations_hold_while_their_pod_may_run() {
    let entry = ConsumerReference {
        resource: "pods".into(),
        name: "p".into(),
        uid: "pod-uid".into(),
        ..Default::default()
    };
    assert!(is_pod_reservation(&entry));
    assert!(!is_pod_reservation(&ConsumerReference {
        api_group: "example.com".into(),
        ..entry.clone()
    }));
    let running = pod(json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}));
    assert!(keep_reservation(&entry, false, Some(&running)));
    assert!(
        !keep_reservation(&entry, true, Some(&running)),
        "seen deleted"
    );
    assert!(!keep_reservation(&entry, false, None), "gone");
    let replaced = pod(json!({"metadata": {"uid": "new"}}));
    assert!(!keep_reservation(&entry, false, Some(&replaced)));
    let done = pod(json!({"status": {"phase": "Succeeded"}}));
    assert!(!keep_reservation(&entry, false, Some(&done)));
}

#[test]
fn owning_pods_are_controlling_v1_pods() {
    assert_eq!(owning_pod(&claim(json!({}))), Some(("p", "pod-uid")));
    let not_controller = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"}]}}));
    assert_eq!(owning_pod(&not_controller), None);
    let not_pod = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]}}));
    assert_eq!(owning_pod(&not_pod), None);
}
