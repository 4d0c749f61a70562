//! Table tests of the RollingUpdate steps (after upstream's `rolling_test.go`), run
//! against [`FakeReplicaSetControl`]: each case is a Deployment and its ReplicaSets,
//! and the writes and events the step must make.

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    RollingUpdateDeployment,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::control::fake::FakeReplicaSetControl;
use super::rolling::{
    cleanup_unhealthy_replicas, reconcile_new_replica_set, reconcile_old_replica_sets,
    scale_down_old_replica_sets_for_rolling_update,
};
use super::util::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, RECREATE_DEPLOYMENT_STRATEGY_TYPE,
    ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE,
};

/// A RollingUpdate Deployment `foo` (upstream's `newDeployment`).
pub(super) fn deployment(replicas: i32, max_surge: i32, max_unavailable: i32) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("foo".into()),
            namespace: Some("default".into()),
            uid: Some("deployment-uid".into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some(ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE.into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(max_surge)),
                    max_unavailable: Some(IntOrString::Int(max_unavailable)),
                }),
            }),
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// A Recreate Deployment `foo`.
pub(super) fn recreate_deployment(replicas: i32) -> Deployment {
    let mut d = deployment(replicas, 0, 0);
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some(RECREATE_DEPLOYMENT_STRATEGY_TYPE.into()),
            rolling_update: None,
        });
    }
    d
}

/// A ReplicaSet `name` of `replicas`, created at second `created`, with `available`
/// of them available (and as many existing).
pub(super) fn rs(name: &str, replicas: i32, available: i32, created: i64) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Timestamp::from_second(created).ok().map(Time),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            ..ReplicaSetSpec::default()
        }),
        status: Some(ReplicaSetStatus {
            replicas,
            available_replicas: Some(available),
            ready_replicas: Some(available),
            ..ReplicaSetStatus::default()
        }),
    }
}

fn scales(list: &[(&str, i32)]) -> Vec<(String, i32)> {
    list.iter()
        .map(|(name, n)| (name.to_string(), *n))
        .collect()
}

#[tokio::test]
async fn reconcile_new_replica_set_table() {
    struct Case {
        replicas: i32,
        max_surge: i32,
        old: i32,
        new: i32,
        /// The size the new ReplicaSet is written with; `None`: no write.
        expected: Option<i32>,
    }
    let cases = [
        // No surge: the old pods fill the Deployment, nothing to add.
        Case {
            replicas: 10,
            max_surge: 0,
            old: 10,
            new: 0,
            expected: None,
        },
        Case {
            replicas: 10,
            max_surge: 2,
            old: 10,
            new: 0,
            expected: Some(2),
        },
        Case {
            replicas: 10,
            max_surge: 2,
            old: 5,
            new: 0,
            expected: Some(7),
        },
        // Surge used up.
        Case {
            replicas: 10,
            max_surge: 2,
            old: 10,
            new: 2,
            expected: None,
        },
        // Larger than the Deployment: straight down to its size.
        Case {
            replicas: 10,
            max_surge: 2,
            old: 2,
            new: 11,
            expected: Some(10),
        },
        // At the Deployment's size already.
        Case {
            replicas: 3,
            max_surge: 1,
            old: 0,
            new: 3,
            expected: None,
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let new_rs = rs("foo-new", case.new, 0, 2);
        let old_rs = rs("foo-old", case.old, case.old, 1);
        let all = vec![new_rs.clone(), old_rs];
        let d = deployment(case.replicas, case.max_surge, 0);
        let fake = FakeReplicaSetControl::default();
        let scaled = reconcile_new_replica_set(&fake, &all, &new_rs, &d).await;
        assert!(scaled.is_ok(), "case {i}: {scaled:?}");
        assert_eq!(scaled.ok(), Some(case.expected.is_some()), "case {i}");
        let want: Vec<(String, i32)> = case
            .expected
            .map(|n| ("foo-new".to_string(), n))
            .into_iter()
            .collect();
        assert_eq!(fake.scales(), want, "case {i}");
        if let Some(expected) = case.expected {
            // The write carries the Deployment's size and ceiling; the event names
            // the direction and both sizes.
            let written = &fake.updates()[0];
            let annotations = written.annotations().clone();
            assert_eq!(
                annotations.get(DESIRED_REPLICAS_ANNOTATION),
                Some(&case.replicas.to_string()),
                "case {i}"
            );
            assert_eq!(
                annotations.get(MAX_REPLICAS_ANNOTATION),
                Some(&(case.replicas + case.max_surge).to_string()),
                "case {i}"
            );
            let direction = if expected > case.new { "up" } else { "down" };
            assert_eq!(
                fake.events(),
                vec![(
                    "Normal".to_string(),
                    "ScalingReplicaSet".to_string(),
                    format!(
                        "Scaled {direction} replica set foo-new to {expected} from {}",
                        case.new
                    )
                )],
                "case {i}"
            );
        } else {
            assert!(fake.events().is_empty(), "case {i}");
        }
    }
}

#[tokio::test]
async fn reconcile_old_replica_sets_table() {
    struct Case {
        replicas: i32,
        max_unavailable: i32,
        old: i32,
        new: i32,
        ready_old: i32,
        ready_new: i32,
        /// The writes of the old ReplicaSet, in order (unhealthy cleanup first).
        writes: Vec<i32>,
    }
    let cases = [
        // maxUnavailable 0 with maxSurge 0 resolves to one unavailable pod.
        Case {
            replicas: 10,
            max_unavailable: 0,
            old: 10,
            new: 0,
            ready_old: 10,
            ready_new: 0,
            writes: vec![9],
        },
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 10,
            new: 0,
            ready_old: 10,
            ready_new: 0,
            writes: vec![8],
        },
        // The two unhealthy old pods are the ones removed.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 10,
            new: 0,
            ready_old: 8,
            ready_new: 0,
            writes: vec![8],
        },
        // One unhealthy pod cleaned up, then one ready pod scaled down.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 10,
            new: 0,
            ready_old: 9,
            ready_new: 0,
            writes: vec![9, 8],
        },
        // The new ReplicaSet's unavailable pods use the whole budget.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 8,
            new: 2,
            ready_old: 8,
            ready_new: 0,
            writes: vec![],
        },
        // New pods available: the old ones may go further.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 8,
            new: 2,
            ready_old: 8,
            ready_new: 2,
            writes: vec![6],
        },
        // Nothing left in the old ReplicaSets.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: 0,
            new: 10,
            ready_old: 0,
            ready_new: 10,
            writes: vec![],
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let new_rs = rs("foo-new", case.new, case.ready_new, 2);
        let old_rs = rs("foo-old", case.old, case.ready_old, 1);
        let all = vec![old_rs.clone(), new_rs.clone()];
        let d = deployment(case.replicas, 0, case.max_unavailable);
        let fake = FakeReplicaSetControl::default();
        let scaled = reconcile_old_replica_sets(&fake, &all, vec![old_rs], &new_rs, &d).await;
        assert_eq!(scaled.ok(), Some(!case.writes.is_empty()), "case {i}");
        let want: Vec<(String, i32)> = case
            .writes
            .iter()
            .map(|n| ("foo-old".to_string(), *n))
            .collect();
        assert_eq!(fake.scales(), want, "case {i}");
    }
}

#[tokio::test]
async fn failed_writes_of_old_replica_sets_are_left_to_the_next_sync() {
    // Upstream swallows them: nothing scaled, no error, the next sync retries.
    let new_rs = rs("foo-new", 0, 0, 2);
    let old_rs = rs("foo-old", 10, 10, 1);
    let all = vec![old_rs.clone(), new_rs.clone()];
    let d = deployment(10, 0, 2);
    let fake = FakeReplicaSetControl::failing();
    let scaled = reconcile_old_replica_sets(&fake, &all, vec![old_rs], &new_rs, &d).await;
    assert_eq!(scaled.ok(), Some(false));
    assert!(fake.events().is_empty());
    // The new ReplicaSet's write error is the sync's error.
    let scaled = reconcile_new_replica_set(&fake, &all, &new_rs, &deployment(10, 2, 0)).await;
    let error = scaled.err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(
        error.starts_with("scaling ReplicaSet default/foo-new to 2: "),
        "{error}"
    );
}

#[tokio::test]
async fn cleanup_unhealthy_replicas_table() {
    struct Case {
        old: i32,
        ready: i32,
        max_cleanup: i32,
        cleaned: i32,
    }
    let cases = [
        Case {
            old: 10,
            ready: 8,
            max_cleanup: 1,
            cleaned: 1,
        },
        Case {
            old: 10,
            ready: 8,
            max_cleanup: 3,
            cleaned: 2,
        },
        Case {
            old: 10,
            ready: 8,
            max_cleanup: 0,
            cleaned: 0,
        },
        Case {
            old: 10,
            ready: 10,
            max_cleanup: 3,
            cleaned: 0,
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let old_rs = rs("foo-v2", case.old, case.ready, 1);
        let d = deployment(10, 2, 2);
        let fake = FakeReplicaSetControl::default();
        let result = cleanup_unhealthy_replicas(&fake, vec![old_rs], &d, case.max_cleanup).await;
        let Ok((old, cleaned)) = result else {
            panic!("case {i}: {result:?}");
        };
        assert_eq!(cleaned, case.cleaned, "case {i}");
        // The returned list holds what was written.
        let size = old[0].spec.as_ref().and_then(|s| s.replicas);
        assert_eq!(size, Some(case.old - case.cleaned), "case {i}");
        assert_eq!(
            fake.updates().len(),
            usize::from(case.cleaned > 0),
            "case {i}"
        );
    }

    // Across several old ReplicaSets, the oldest is cleaned first.
    let older = rs("foo-v1", 3, 1, 1);
    let newer = rs("foo-v2", 3, 1, 2);
    let fake = FakeReplicaSetControl::default();
    let result =
        cleanup_unhealthy_replicas(&fake, vec![newer, older], &deployment(10, 2, 2), 3).await;
    assert_eq!(result.ok().map(|(_, n)| n), Some(3));
    assert_eq!(fake.scales(), scales(&[("foo-v1", 1), ("foo-v2", 2)]));
}

#[tokio::test]
async fn scale_down_old_replica_sets_for_rolling_update_table() {
    struct Case {
        replicas: i32,
        max_unavailable: i32,
        /// (name, replicas, available, created) of each old ReplicaSet.
        old: Vec<(&'static str, i32, i32, i64)>,
        scaled: i32,
        writes: Vec<(&'static str, i32)>,
    }
    let cases = [
        Case {
            replicas: 10,
            max_unavailable: 0,
            old: vec![("foo-v2", 10, 10, 1)],
            scaled: 1,
            writes: vec![("foo-v2", 9)],
        },
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: vec![("foo-v2", 10, 10, 1)],
            scaled: 2,
            writes: vec![("foo-v2", 8)],
        },
        // Only the minimum is available: nothing may go.
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: vec![("foo-v2", 10, 8, 1)],
            scaled: 0,
            writes: vec![],
        },
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: vec![("foo-v2", 0, 10, 1)],
            scaled: 0,
            writes: vec![],
        },
        Case {
            replicas: 10,
            max_unavailable: 2,
            old: vec![("foo-v2", 10, 1, 1)],
            scaled: 0,
            writes: vec![],
        },
        // Oldest first, then the next, up to the budget.
        Case {
            replicas: 8,
            max_unavailable: 4,
            old: vec![("foo-b", 5, 5, 2), ("foo-a", 3, 3, 1)],
            scaled: 4,
            writes: vec![("foo-a", 0), ("foo-b", 4)],
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let old: Vec<ReplicaSet> = case
            .old
            .iter()
            .map(|(name, replicas, available, created)| rs(name, *replicas, *available, *created))
            .collect();
        let d = deployment(case.replicas, 0, case.max_unavailable);
        let fake = FakeReplicaSetControl::default();
        let scaled =
            scale_down_old_replica_sets_for_rolling_update(&fake, &old, old.clone(), &d).await;
        assert_eq!(scaled.ok(), Some(case.scaled), "case {i}");
        assert_eq!(fake.scales(), scales(&case.writes), "case {i}");
    }
}
