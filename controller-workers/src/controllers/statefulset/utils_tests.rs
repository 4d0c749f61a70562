use super::*;
use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetStatus, StatefulSetUpdateStrategy,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

fn set(replicas: i32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid",
                     "annotations": {"note": "kept"}},
        "spec": {
            "replicas": replicas,
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}],
                         "volumes": [{"name": "cache", "emptyDir": {}}]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data", "labels": {"tier": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .unwrap()
}

fn named(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[test]
fn names_parse_as_parent_and_ordinal() {
    assert_eq!(parent_and_ordinal("web-0"), (Some("web"), 0));
    assert_eq!(parent_and_ordinal("my-web-12"), (Some("my-web"), 12));
    assert_eq!(parent_and_ordinal("web-007"), (Some("web"), 7));
    assert_eq!(parent_and_ordinal("web"), (None, -1));
    assert_eq!(parent_and_ordinal("web-"), (None, -1));
    assert_eq!(parent_and_ordinal("web-1a"), (None, -1));
    assert_eq!(parent_and_ordinal("web-99999999999"), (Some("web"), -1));
    assert_eq!(parent_and_ordinal("-3"), (Some(""), 3));
}

#[test]
fn ordinal_ranges_follow_ordinals_start() {
    let mut s = set(3);
    assert_eq!((start_ordinal(&s), end_ordinal(&s)), (0, 2));
    assert!(pod_in_ordinal_range(&named("web-2"), &s));
    assert!(!pod_in_ordinal_range(&named("web-3"), &s));
    s.spec.as_mut().unwrap().ordinals = Some(StatefulSetOrdinals { start: Some(5) });
    assert_eq!((start_ordinal(&s), end_ordinal(&s)), (5, 7));
    assert!(!pod_in_ordinal_range(&named("web-2"), &s));
    assert!(pod_in_ordinal_range(&named("web-7"), &s));
    assert_eq!(pod_name(&s, 5), "web-5");
}

#[test]
fn new_pods_have_identity_storage_and_owner() {
    let s = set(3);
    let pod = new_stateful_set_pod(&s, 1);
    assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "nginx");
    assert_eq!(labels[POD_NAME_LABEL], "web-1");
    assert_eq!(labels[POD_INDEX_LABEL], "1");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    let volumes: Vec<_> = spec
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["data", "cache"]);
    assert_eq!(
        spec.volumes.as_ref().unwrap()[0]
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .claim_name,
        "data-web-1"
    );
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", "set-uid", Some(true))
    );
    assert!(identity_matches(&s, &pod));
    assert!(storage_matches(&s, &pod));
}

#[test]
fn identity_and_storage_mismatches_are_found_and_fixed() {
    let s = set(3);
    let mut pod = new_stateful_set_pod(&s, 0);
    pod.metadata.labels.as_mut().unwrap().remove(POD_NAME_LABEL);
    assert!(!identity_matches(&s, &pod));
    update_identity(&s, &mut pod);
    assert!(identity_matches(&s, &pod));

    pod.spec.as_mut().unwrap().volumes = Some(vec![Volume {
        name: "data".into(),
        empty_dir: Some(Default::default()),
        ..Volume::default()
    }]);
    assert!(!storage_matches(&s, &pod));
    update_storage(&s, &mut pod);
    assert!(storage_matches(&s, &pod));
    assert_eq!(
        pod.spec.as_ref().unwrap().volumes.as_ref().unwrap().len(),
        1
    );

    let other = named("db-0");
    assert!(!identity_matches(&s, &other));
    assert!(!storage_matches(&s, &named("web")));
    let mut wrong_ns = new_stateful_set_pod(&s, 0);
    wrong_ns.metadata.namespace = Some("elsewhere".into());
    assert!(!identity_matches(&s, &wrong_ns));
}

#[test]
fn claims_carry_template_and_selector_labels() {
    let mut s = set(1);
    let claims = claims_for(&s, 4);
    assert_eq!(claims.len(), 1);
    let (template, claim) = &claims[0];
    assert_eq!(template, "data");
    assert_eq!(claim.metadata.name.as_deref(), Some("data-web-4"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
    let labels = claim.metadata.labels.as_ref().unwrap();
    assert_eq!(
        (labels["tier"].as_str(), labels["app"].as_str()),
        ("db", "nginx")
    );
    // A template without labels gets the selector's.
    s.spec
        .as_mut()
        .unwrap()
        .volume_claim_templates
        .as_mut()
        .unwrap()[0]
        .metadata
        .labels = None;
    let claims = claims_for(&s, 0);
    assert_eq!(
        claims[0].1.metadata.labels,
        Some([("app".to_string(), "nginx".to_string())].into())
    );
    s.spec.as_mut().unwrap().selector = LabelSelector::default();
    assert_eq!(claims_for(&s, 0)[0].1.metadata.labels, None);
}

#[test]
fn membership_is_by_name() {
    let s = set(1);
    assert!(is_member_of(&s, &named("web-9").metadata));
    assert!(!is_member_of(&s, &named("webby-0").metadata));
    assert!(!is_member_of(&s, &named("web").metadata));
}

#[test]
fn versioned_pods_respect_the_partition() {
    let mut current = set(4);
    current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(2),
            max_unavailable: None,
        }),
    });
    let mut update = current.clone();
    update
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:2".into());
    let image = |pod: &Pod| {
        pod.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    let low = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 1);
    let high = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 2);
    assert_eq!(
        (pod_revision(&low), image(&low).as_str()),
        ("web-a", "nginx:1")
    );
    assert_eq!(
        (pod_revision(&high), image(&high).as_str()),
        ("web-b", "nginx:2")
    );

    // Without a rollingUpdate, status.currentReplicas plays the partition.
    current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: None,
    });
    current.status = Some(StatefulSetStatus {
        current_replicas: Some(3),
        ..Default::default()
    });
    let pod = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 2);
    assert_eq!(pod_revision(&pod), "web-a");
    // OnDelete creates at the update revision.
    current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(ON_DELETE.into()),
        rolling_update: None,
    });
    let pod = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 0);
    assert_eq!(pod_revision(&pod), "web-b");
}

#[test]
fn revisions_round_trip_the_template_and_keep_annotations() {
    let s = set(1);
    let revision = new_revision(&s, 3, 0);
    assert_eq!(revision.revision, 3);
    let name = revision.metadata.name.clone().unwrap();
    let hash = &revision.metadata.labels.as_ref().unwrap()[history::CONTROLLER_REVISION_HASH_LABEL];
    assert_eq!(name, format!("web-{hash}"));
    assert_eq!(revision.metadata.labels.as_ref().unwrap()["app"], "nginx");
    assert_eq!(
        revision.metadata.annotations.as_ref().unwrap()["note"],
        "kept"
    );
    assert_ne!(new_revision(&s, 3, 1).metadata.name, revision.metadata.name);

    let mut changed = s.clone();
    changed
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:2".into());
    let restored = apply_revision(&changed, &revision).unwrap();
    // Equal as Go writes templates (the revision spells out the empty `resources`).
    let go = |set: &StatefulSet| {
        history::go_json(&history::go_template_value(
            &set.spec.as_ref().unwrap().template,
        ))
    };
    assert_eq!(go(&restored), go(&s));
    assert!(history::equal_revision(
        &revision,
        &new_revision(&restored, 9, 0)
    ));
    assert!(apply_revision(&s, &ControllerRevision::default()).is_err());
}

#[test]
fn descending_ordinal_order() {
    let mut pods: Vec<Arc<Pod>> = ["web-1", "web-10", "x", "web-2"]
        .iter()
        .map(|n| Arc::new(named(n)))
        .collect();
    sort_descending_ordinal(&mut pods);
    let names: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["web-10", "web-2", "web-1", "x"]);
}

fn running(name: &str, revision: &str, ready: bool) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"controller-revision-hash": revision}},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap(),
    )
}

#[test]
fn pods_split_into_slots_and_condemned() {
    let mut s = set(3);
    s.spec.as_mut().unwrap().ordinals = Some(StatefulSetOrdinals { start: Some(1) });
    let pods: Vec<Arc<Pod>> = ["web-1", "web-3", "web-0", "web-7", "web-x", "web-5"]
        .iter()
        .map(|n| Arc::new(named(n)))
        .collect();
    let (slots, condemned) = split_pods(&s, &pods);
    let slot_names: Vec<Option<&str>> = slots
        .iter()
        .map(|p| p.as_ref().and_then(|p| p.metadata.name.as_deref()))
        .collect();
    assert_eq!(slot_names, [Some("web-1"), None, Some("web-3")]);
    let condemned: Vec<&str> = condemned
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(condemned, ["web-7", "web-5", "web-0"]);
}

#[test]
fn update_revision_is_the_latest_a_renumbered_one_or_new() {
    let v1 = set(1);
    let mut v2 = set(1);
    v2.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:2".into());
    let first = Arc::new(new_revision(&v1, 1, 0));
    let second = Arc::new(new_revision(&v2, 2, 0));

    assert!(
        matches!(choose_update_revision(&v1, &[], 0), UpdateRevision::Create(r) if r.revision == 1)
    );
    let history = [first.clone(), second.clone()];
    assert!(
        matches!(choose_update_revision(&v2, &history, 0), UpdateRevision::Latest(r) if Arc::ptr_eq(&r, &second))
    );
    // A rollback to v1 renumbers the first revision past the latest.
    assert!(matches!(choose_update_revision(&v1, &history, 0),
        UpdateRevision::Renumber(r, 3) if Arc::ptr_eq(&r, &first)));
    let mut v3 = set(1);
    v3.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:3".into());
    match choose_update_revision(&v3, &history, 4) {
        UpdateRevision::Create(r) => {
            assert_eq!(r.revision, 3);
            assert_eq!(r.metadata.name, new_revision(&v3, 3, 4).metadata.name);
        }
        other => panic!("expected a new revision, got {other:?}"),
    }

    let mut with_status = v1.clone();
    with_status.status = Some(StatefulSetStatus {
        current_revision: second.metadata.name.clone(),
        ..Default::default()
    });
    assert!(
        named_current_revision(&with_status, &history).is_some_and(|r| Arc::ptr_eq(&r, &second))
    );
    assert!(named_current_revision(&v1, &history).is_none());
}

#[test]
fn history_keeps_live_revisions_and_the_limit() {
    let mut s = set(1);
    s.spec.as_mut().unwrap().revision_history_limit = Some(1);
    let revisions: Vec<Arc<ControllerRevision>> = (1..=5)
        .map(|n| {
            let mut r = ControllerRevision::default();
            r.metadata.name = Some(format!("web-r{n}"));
            r.revision = n;
            Arc::new(r)
        })
        .collect();
    let pods = vec![running("web-0", "web-r2", true)];
    let doomed: Vec<&str> = revisions_to_truncate(&s, &pods, &revisions, &["web-r5", "web-r4"])
        .iter()
        .filter_map(|r| r.metadata.name.as_deref())
        .collect();
    // r2 is live (a pod uses it); of r1 and r3 one may stay: the newer.
    assert_eq!(doomed, ["web-r1"]);
    s.spec.as_mut().unwrap().revision_history_limit = None;
    assert!(revisions_to_truncate(&s, &pods, &revisions, &[]).is_empty());
}

#[test]
fn rolling_updates_go_down_from_the_top_to_the_partition() {
    let mut s = set(3);
    let replicas = vec![
        running("web-0", "old", true),
        running("web-1", "old", true),
        running("web-2", "old", true),
    ];
    assert_eq!(
        next_rolling_step(&s, &replicas, "new"),
        RollingStep::Delete(2)
    );
    let replicas = vec![
        running("web-0", "old", true),
        running("web-1", "old", true),
        running("web-2", "new", false),
    ];
    assert_eq!(
        next_rolling_step(&s, &replicas, "new"),
        RollingStep::Wait(2)
    );
    let replicas = vec![
        running("web-0", "old", true),
        running("web-1", "new", true),
        running("web-2", "new", true),
    ];
    assert_eq!(
        next_rolling_step(&s, &replicas, "new"),
        RollingStep::Delete(0)
    );
    s.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(1),
            max_unavailable: None,
        }),
    });
    assert_eq!(next_rolling_step(&s, &replicas, "new"), RollingStep::Done);
    // A pod already going is not deleted again; the walk goes on below it.
    let mut going = (*running("web-2", "old", false)).clone();
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(1).unwrap(),
    ));
    let replicas = vec![
        running("web-0", "old", true),
        running("web-1", "old", true),
        Arc::new(going),
    ];
    assert_eq!(
        next_rolling_step(&s, &replicas, "new"),
        RollingStep::Wait(2)
    );
}

fn claim_with_refs(refs: &[(&str, &str)]) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data-web-0".into()),
            owner_references: Some(
                refs.iter()
                    .map(|(name, uid)| OwnerReference {
                        name: name.to_string(),
                        uid: uid.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Default::default()
    }
}

fn with_policy(deleted: &str, scaled: &str) -> StatefulSet {
    let mut s = set(2);
    s.spec
        .as_mut()
        .unwrap()
        .persistent_volume_claim_retention_policy =
        Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
            when_deleted: Some(deleted.into()),
            when_scaled: Some(scaled.into()),
        });
    s
}

#[test]
fn retention_policy_owner_refs() {
    let mut in_range = named("web-0");
    in_range.metadata.uid = Some("pod-0".into());
    let mut condemned = named("web-5");
    condemned.metadata.uid = Some("pod-5".into());

    // Retain/Retain: nobody owns the claim.
    let s = with_policy(RETAIN, RETAIN);
    let mut claim = claim_with_refs(&[("web", "set-uid")]);
    assert!(!claim_owner_matches_set_and_pod(&claim, &s, &in_range));
    assert!(update_claim_owner_refs(&mut claim, &s, &in_range));
    assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
    assert!(!update_claim_owner_refs(&mut claim, &s, &in_range));

    // WhenDeleted=Delete: the set owns every claim.
    let s = with_policy(DELETE, RETAIN);
    let mut claim = claim_with_refs(&[]);
    assert!(!claim_owner_matches_set_and_pod(&claim, &s, &in_range));
    assert!(update_claim_owner_refs(&mut claim, &s, &in_range));
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("apps/v1", "StatefulSet", "set-uid", None)
    );

    // WhenScaled=Delete: a condemned pod owns its claim; an in-range one does not.
    let s = with_policy(RETAIN, DELETE);
    let mut claim = claim_with_refs(&[]);
    assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
    assert!(!claim_owner_matches_set_and_pod(&claim, &s, &condemned));
    assert!(update_claim_owner_refs(&mut claim, &s, &condemned));
    assert!(has_owner_ref(&claim.metadata, &Owner::pod(&condemned)));
    assert!(claim_owner_matches_set_and_pod(&claim, &s, &condemned));

    // Delete/Delete: set while in range, pod once condemned.
    let s = with_policy(DELETE, DELETE);
    let mut claim = claim_with_refs(&[("web", "set-uid")]);
    assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
    assert!(!claim_owner_matches_set_and_pod(&claim, &s, &condemned));
    assert!(update_claim_owner_refs(&mut claim, &s, &condemned));
    assert!(!has_owner_ref(&claim.metadata, &Owner::set(&s)));
    assert!(has_owner_ref(&claim.metadata, &Owner::pod(&condemned)));

    // Unknown values are Retain.
    assert_eq!(
        retention_policy(&with_policy("Sometimes", DELETE)),
        RetentionPolicy {
            delete_when_deleted: false,
            delete_when_scaled: false
        }
    );
}

#[test]
fn stale_owner_refs_name_the_pod_with_another_uid() {
    let claim = claim_with_refs(&[("web-0", "old-uid")]);
    let mut pod = named("web-0");
    assert!(has_stale_owner_ref(&claim.metadata, &Owner::pod(&pod)));
    pod.metadata.uid = Some("old-uid".into());
    assert!(!has_stale_owner_ref(&claim.metadata, &Owner::pod(&pod)));
    assert!(!has_stale_owner_ref(
        &claim.metadata,
        &Owner::pod(&named("web-1"))
    ));
}

#[test]
fn pod_states() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0"},
        "status": {"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    assert!(is_created(&pod) && is_running_and_ready(&pod) && is_healthy(&pod));
    let later = Timestamp::from_second(1_704_067_200 + 30).unwrap();
    assert!(is_running_and_available(&pod, 10, later));
    assert!(!is_running_and_available(&pod, 60, later));
    assert!(!is_created(&named("web-0")));
    let mut terminating = pod.clone();
    terminating.metadata.deletion_timestamp = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c[0].last_transition_time.clone());
    assert!(!is_healthy(&terminating) && is_terminating(&terminating));
}
