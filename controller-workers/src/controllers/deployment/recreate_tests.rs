//! Table tests of the Recreate strategy (after upstream's `recreate_test.go`), run
//! against [`FakeReplicaSetControl`]: the old ReplicaSets go to zero first, and the new
//! one is scaled up only once no old pod may still be running.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::control::fake::FakeReplicaSetControl;
use super::recreate::{
    old_pods_running, recreate_old_replica_sets, scale_up_new_replica_set_for_recreate,
};
use super::rolling_tests::{recreate_deployment, rs};
use super::sync::PodMap;

fn pods(phases: &[&str]) -> Vec<Arc<Pod>> {
    phases
        .iter()
        .map(|phase| {
            Arc::new(Pod {
                status: Some(PodStatus {
                    phase: Some(phase.to_string()),
                    ..PodStatus::default()
                }),
                ..Pod::default()
            })
        })
        .collect()
}

#[tokio::test]
async fn recreate_table() {
    struct Case {
        name: &'static str,
        /// (name, spec.replicas, status.replicas) of each old ReplicaSet.
        old: Vec<(&'static str, i32, i32)>,
        /// Pod phases by the name of the ReplicaSet that owns them.
        pods: Vec<(&'static str, Vec<&'static str>)>,
        /// The old ReplicaSets written to zero.
        scaled_to_zero: Vec<&'static str>,
        /// Whether the new ReplicaSet is scaled up in this pass.
        new_scaled_up: bool,
    }
    let cases = [
        Case {
            name: "old replica sets are scaled to zero first",
            old: vec![("foo-1", 3, 3), ("foo-0", 2, 2)],
            pods: vec![("foo-1", vec!["Running"; 3]), ("foo-0", vec!["Running"; 2])],
            scaled_to_zero: vec!["foo-1", "foo-0"],
            new_scaled_up: false,
        },
        Case {
            name: "only the active old replica sets are written",
            old: vec![("foo-1", 3, 3), ("foo-0", 0, 0)],
            pods: vec![("foo-1", vec!["Running"; 3])],
            scaled_to_zero: vec!["foo-1"],
            new_scaled_up: false,
        },
        Case {
            name: "scaled down but pods still running: wait",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-1", vec!["Running"])],
            scaled_to_zero: vec![],
            new_scaled_up: false,
        },
        Case {
            name: "a pending old pod counts as running",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-1", vec!["Pending"])],
            scaled_to_zero: vec![],
            new_scaled_up: false,
        },
        Case {
            name: "a pod in Unknown phase may be running",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-1", vec!["Unknown"])],
            scaled_to_zero: vec![],
            new_scaled_up: false,
        },
        Case {
            name: "status still counts replicas the cache does not show",
            old: vec![("foo-1", 0, 1)],
            pods: vec![],
            scaled_to_zero: vec![],
            new_scaled_up: false,
        },
        Case {
            name: "only terminated old pods: the new replica set is scaled up",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-1", vec!["Failed", "Succeeded"])],
            scaled_to_zero: vec![],
            new_scaled_up: true,
        },
        Case {
            name: "terminated and pending old pods: wait",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-1", vec!["Failed", "Pending"])],
            scaled_to_zero: vec![],
            new_scaled_up: false,
        },
        Case {
            name: "the new replica set's own pods do not hold it back",
            old: vec![("foo-1", 0, 0)],
            pods: vec![("foo-new", vec!["Running"])],
            scaled_to_zero: vec![],
            new_scaled_up: true,
        },
        Case {
            name: "no old replica sets at all",
            old: vec![],
            pods: vec![],
            scaled_to_zero: vec![],
            new_scaled_up: true,
        },
    ];
    for case in cases {
        let d = recreate_deployment(3);
        let new_rs = rs("foo-new", 0, 0, 10);
        let mut old: Vec<_> = case
            .old
            .iter()
            .enumerate()
            .map(|(i, (name, replicas, actual))| {
                let mut rs = rs(name, *replicas, *actual, i as i64);
                if let Some(status) = rs.status.as_mut() {
                    status.replicas = *actual;
                }
                rs
            })
            .collect();
        let pod_map: PodMap = case
            .pods
            .iter()
            .map(|(owner, phases)| (format!("uid-{owner}"), pods(phases)))
            .collect();
        let fake = FakeReplicaSetControl::default();
        let proceed = recreate_old_replica_sets(&fake, &mut old, Some(&new_rs), &pod_map, &d).await;
        let Ok(proceed) = proceed else {
            panic!("{}: {proceed:?}", case.name);
        };
        let zeroed: Vec<(String, i32)> = case
            .scaled_to_zero
            .iter()
            .map(|name| (name.to_string(), 0))
            .collect();
        assert_eq!(fake.scales(), zeroed, "{}", case.name);
        // What was written replaces the old ReplicaSets the pass goes on with.
        for name in &case.scaled_to_zero {
            let rs = old
                .iter()
                .find(|rs| rs.metadata.name.as_deref() == Some(*name));
            assert_eq!(
                rs.and_then(|rs| rs.spec.as_ref()?.replicas),
                Some(0),
                "{}",
                case.name
            );
        }
        assert_eq!(proceed, case.new_scaled_up, "{}", case.name);
        assert_eq!(
            !proceed,
            !case.scaled_to_zero.is_empty() || old_pods_running(Some(&new_rs), &old, &pod_map),
            "{}",
            case.name
        );
        if proceed {
            let scaled = scale_up_new_replica_set_for_recreate(&fake, &new_rs, &d).await;
            assert_eq!(scaled.ok(), Some(true), "{}", case.name);
            assert_eq!(
                fake.scales().last(),
                Some(&("foo-new".to_string(), 3)),
                "{}",
                case.name
            );
            assert_eq!(
                fake.events()
                    .last()
                    .map(|(_, reason, message)| (reason.as_str(), message.as_str())),
                Some((
                    "ScalingReplicaSet",
                    "Scaled up replica set foo-new to 3 from 0"
                )),
                "{}",
                case.name
            );
        }
    }
}

#[tokio::test]
async fn scaling_down_for_recreate_reports_each_replica_set() {
    let d = recreate_deployment(3);
    let mut old = vec![rs("foo-1", 3, 3, 1)];
    let fake = FakeReplicaSetControl::default();
    let proceed = recreate_old_replica_sets(&fake, &mut old, None, &PodMap::new(), &d).await;
    assert_eq!(proceed.ok(), Some(false));
    assert_eq!(
        fake.events(),
        vec![(
            "Normal".to_string(),
            "ScalingReplicaSet".to_string(),
            "Scaled down replica set foo-1 to 0 from 3".to_string()
        )]
    );
    // A new ReplicaSet already at the Deployment's size is not written again.
    let fake = FakeReplicaSetControl::default();
    let at_size = rs("foo-new", 3, 3, 2);
    let scaled = scale_up_new_replica_set_for_recreate(&fake, &at_size, &d).await;
    assert_eq!(scaled.ok(), Some(false));
    assert!(fake.updates().is_empty());
    // A write that fails stops the pass with the error.
    let fake = FakeReplicaSetControl::failing();
    let mut old = vec![rs("foo-1", 3, 3, 1)];
    let proceed = recreate_old_replica_sets(&fake, &mut old, None, &PodMap::new(), &d).await;
    assert!(proceed.is_err());
}
