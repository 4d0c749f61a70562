use super::replicas::round_to_i32;
use super::*;
use crate::meta::ResourceNames;
use k8s_openapi::api::apps::v1::{
    DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some(ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE.into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(surge),
                    max_unavailable: Some(unavailable),
                }),
            }),
            template: template("nginx:1"),
            ..Default::default()
        }),
        status: None,
    }
}

fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

fn rs(name: &str, replicas: i32, created: i64, tmpl: PodTemplateSpec) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Some(Time(ts(created))),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            template: Some(tmpl),
            ..Default::default()
        }),
        status: None,
    }
}

fn with_annotations(mut rs: ReplicaSet, pairs: &[(&str, &str)]) -> ReplicaSet {
    rs.metadata.annotations = Some(labels(pairs));
    rs
}

fn with_status(mut rs: ReplicaSet, actual: i32, ready: i32, available: i32) -> ReplicaSet {
    rs.status = Some(ReplicaSetStatus {
        replicas: actual,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        ..Default::default()
    });
    rs
}

fn names(rss: &[&ReplicaSet]) -> Vec<String> {
    rss.iter().map(|r| r.name_str().to_string()).collect()
}

// -- constants -----------------------------------------------------------

#[test]
fn constants_match_upstream_strings() {
    assert_eq!(REVISION_ANNOTATION, "deployment.kubernetes.io/revision");
    assert_eq!(
        REVISION_HISTORY_ANNOTATION,
        "deployment.kubernetes.io/revision-history"
    );
    assert_eq!(FAILED_RS_CREATE_REASON, "ReplicaSetCreateError");
    assert_eq!(ROLLBACK_DONE, "DeploymentRollback");
    assert_eq!(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "pod-template-hash");
    assert!(skip_copy_annotation(LAST_APPLIED_CONFIG_ANNOTATION));
    assert!(skip_copy_annotation("deprecated.deployment.rollback.to"));
    assert!(!skip_copy_annotation("team"));
    assert_eq!(
        rollback_done_message("web", 3),
        "Rolled back deployment \"web\" to revision 3"
    );
}

// -- intstr and fenceposts -----------------------------------------------

#[test]
fn scaled_value_rounding_and_errors() {
    let f = get_scaled_value_from_int_or_percent;
    assert_eq!(f(&pct("25%"), 10, true), Ok(3));
    assert_eq!(f(&pct("25%"), 10, false), Ok(2));
    assert_eq!(f(&pct("50%"), 3, true), Ok(2));
    assert_eq!(f(&pct("50%"), 3, false), Ok(1));
    assert_eq!(f(&pct("0%"), 100, true), Ok(0));
    assert_eq!(f(&pct("+10%"), 10, true), Ok(1));
    assert_eq!(f(&IntOrString::Int(7), 100, false), Ok(7));
    assert!(f(&pct("5"), 10, true).is_err());
    assert!(f(&pct("abc%"), 10, true).is_err());
    assert!(f(&pct("%"), 10, true).is_err());
    assert!(f(&pct("5 %"), 10, true).is_err());
    assert!(f(&pct("10%%"), 10, true).is_err());
}

#[test]
fn resolve_fenceposts_cases() {
    let r = |s: Option<&str>, u: Option<&str>, d| {
        resolve_fenceposts(s.map(pct).as_ref(), u.map(pct).as_ref(), d)
    };
    assert_eq!(r(Some("25%"), Some("25%"), 10), Ok((3, 2)));
    assert_eq!(r(Some("0%"), Some("0%"), 0), Ok((0, 1)));
    assert_eq!(r(Some("39%"), Some("39%"), 10), Ok((4, 3)));
    assert_eq!(r(None, Some("39%"), 10), Ok((0, 3)));
    assert_eq!(r(Some("39%"), None, 10), Ok((4, 0)));
    assert_eq!(r(None, None, 10), Ok((0, 1)));
    // 1% of 2 rounds down to zero unavailability, surge 0 -> forced to 1.
    assert_eq!(r(Some("0%"), Some("1%"), 2), Ok((0, 1)));
    assert!(r(Some("oops"), Some("39%"), 10).is_err());
    assert!(r(Some("55%"), Some("urg"), 10).is_err());
}

#[test]
fn max_surge_unavailable_min_available() {
    let d = deployment(10, pct("25%"), pct("25%"));
    assert_eq!(max_surge(&d), 3);
    assert_eq!(max_unavailable(&d), 2);
    assert_eq!(min_available(&d), 8);

    // Unavailability is capped at the replica count.
    let d = deployment(1, IntOrString::Int(0), IntOrString::Int(5));
    assert_eq!(max_unavailable(&d), 1);
    assert_eq!(min_available(&d), 0);

    // Zero replicas -> nothing may be unavailable.
    let d = deployment(0, IntOrString::Int(1), IntOrString::Int(1));
    assert_eq!(max_unavailable(&d), 0);

    // Both zero -> unavailable 1.
    let d = deployment(10, IntOrString::Int(0), IntOrString::Int(0));
    assert_eq!(max_surge(&d), 0);
    assert_eq!(max_unavailable(&d), 1);

    // Recreate: no surge, no unavailability bound, no minimum.
    let mut d = deployment(10, pct("25%"), pct("25%"));
    d.spec.as_mut().unwrap().strategy = Some(DeploymentStrategy {
        type_: Some(RECREATE_DEPLOYMENT_STRATEGY_TYPE.into()),
        rolling_update: None,
    });
    assert_eq!(max_surge(&d), 0);
    assert_eq!(max_unavailable(&d), 0);
    assert_eq!(min_available(&d), 0);

    // Unset strategy gets the API defaults: RollingUpdate, 25%/25%.
    let mut d = deployment(4, pct("0%"), pct("0%"));
    d.spec.as_mut().unwrap().strategy = None;
    assert!(is_rolling_update(&d));
    assert_eq!(max_surge(&d), 1);
    assert_eq!(max_unavailable(&d), 1);
}

// -- proportional scaling -----------------------------------------------

#[test]
fn replica_set_fraction_and_proportion() {
    // Deployment scaled from 10 (+3 surge = 13) to 20 (+5 surge = 25).
    let mut d = deployment(20, pct("25%"), pct("25%"));
    d.status = Some(DeploymentStatus {
        replicas: Some(13),
        ..Default::default()
    });
    let a = with_annotations(
        rs("a", 8, 1, template("x")),
        &[(MAX_REPLICAS_ANNOTATION, "13")],
    );
    let b = with_annotations(
        rs("b", 5, 2, template("y")),
        &[(MAX_REPLICAS_ANNOTATION, "13")],
    );
    // 8*25/13 = 15.38 -> 15 -> +7 ; 5*25/13 = 9.6 -> 10 -> +5
    assert_eq!(get_replica_set_fraction(&a, &d), 7);
    assert_eq!(get_replica_set_fraction(&b, &d), 5);
    assert_eq!(get_proportion(Some(&a), &d, 12, 0), 7);
    // Only 5 left to hand out after the first got 7.
    assert_eq!(get_proportion(Some(&b), &d, 12, 7), 5);
    // Bounded by what remains.
    assert_eq!(get_proportion(Some(&b), &d, 12, 10), 2);
    assert_eq!(get_proportion(Some(&b), &d, 12, 12), 0);
    assert_eq!(get_proportion(None, &d, 12, 0), 0);
    assert_eq!(get_proportion(Some(&a), &d, 0, 0), 0);

    // Without annotation the current status.replicas is the denominator.
    let c = rs("c", 8, 3, template("z"));
    assert_eq!(get_replica_set_fraction(&c, &d), 7);

    // Scale down from 25 to 10 (+3 = 13): negative fractions, bounded below.
    let mut down = deployment(10, pct("25%"), pct("25%"));
    down.status = Some(DeploymentStatus {
        replicas: Some(25),
        ..Default::default()
    });
    let big = with_annotations(
        rs("big", 15, 1, template("x")),
        &[(MAX_REPLICAS_ANNOTATION, "25")],
    );
    // 15*13/25 = 7.8 -> 8 -> -7
    assert_eq!(get_replica_set_fraction(&big, &down), -7);
    assert_eq!(get_proportion(Some(&big), &down, -12, 0), -7);
    assert_eq!(get_proportion(Some(&big), &down, -12, -8), -4);

    // Scaling the deployment to zero removes the whole ReplicaSet.
    let zero = deployment(0, pct("25%"), pct("25%"));
    assert_eq!(get_replica_set_fraction(&big, &zero), -15);

    // Empty ReplicaSets never take part.
    let empty = rs("e", 0, 1, template("x"));
    assert_eq!(get_proportion(Some(&empty), &d, 12, 0), 0);
}

#[test]
fn rounding_is_half_away_from_zero() {
    assert_eq!(round_to_i32(2.5), 3);
    assert_eq!(round_to_i32(2.49), 2);
    assert_eq!(round_to_i32(-2.5), -3);
    assert_eq!(round_to_i32(-2.49), -2);
}

// -- new replica count ---------------------------------------------------

#[test]
fn new_rs_new_replicas_cases() {
    let other = rs("old", 5, 1, template("old"));

    // Rolling, cannot scale up: total (5+5) >= 1+1.
    let d = deployment(1, IntOrString::Int(1), IntOrString::Int(1));
    let new = rs("new", 5, 2, template("nginx:1"));
    assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(5));

    // Rolling, scale up but never past spec.replicas: 6 desired, surge 10.
    let d = deployment(6, IntOrString::Int(10), IntOrString::Int(1));
    let new = rs("new", 2, 2, template("nginx:1"));
    assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(6));

    // Rolling, bounded by surge: 10 desired, 25% surge -> max 13 pods;
    // 10 old + 0 new -> new may grow to 3.
    let d = deployment(10, pct("25%"), pct("25%"));
    let old10 = rs("old", 10, 1, template("old"));
    let new = rs("new", 0, 2, template("nginx:1"));
    assert_eq!(new_rs_new_replicas(&d, &[&old10, &new], &new), Ok(3));

    // Recreate jumps straight to spec.replicas.
    let mut d = deployment(3, IntOrString::Int(1), IntOrString::Int(1));
    d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ =
        Some(RECREATE_DEPLOYMENT_STRATEGY_TYPE.into());
    let new = rs("new", 1, 2, template("nginx:1"));
    assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(3));

    // Unknown strategies and invalid surge are errors.
    d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ = Some("Bogus".into());
    assert!(new_rs_new_replicas(&d, &[&new], &new).is_err());
    let d = deployment(3, pct("x"), IntOrString::Int(1));
    assert!(new_rs_new_replicas(&d, &[&new], &new).is_err());
}

#[test]
fn saturation() {
    let d = deployment(3, pct("25%"), pct("25%"));
    let base = with_status(rs("a", 3, 1, template("x")), 3, 3, 3);
    assert!(!is_saturated(&d, None));
    assert!(!is_saturated(&d, Some(&base)), "missing annotation");
    let ok = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "3")]);
    assert!(is_saturated(&d, Some(&ok)));
    let wrong = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "2")]);
    assert!(!is_saturated(&d, Some(&wrong)));
    let junk = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "x")]);
    assert!(!is_saturated(&d, Some(&junk)));
    let unavailable = with_status(ok.clone(), 3, 3, 2);
    assert!(!is_saturated(&d, Some(&unavailable)));
}

#[test]
fn active_or_latest() {
    let new = rs("new", 0, 30, template("n"));
    let old1 = rs("old1", 0, 10, template("o1"));
    let old2 = rs("old2", 0, 20, template("o2"));
    let active_old = rs("old3", 2, 5, template("o3"));
    let active_new = rs("new2", 4, 40, template("n2"));

    assert!(find_active_or_latest(None, &[]).is_none());
    // Nothing active: prefer the new RS, otherwise the newest old one.
    assert_eq!(
        find_active_or_latest(Some(&new), &[&old1, &old2]).map(|r| &r.metadata.name),
        Some(&Some("new".to_string()))
    );
    let latest = find_active_or_latest(None, &[&old1, &old2]).unwrap();
    assert_eq!(latest.name_str(), "old2");
    // Exactly one active.
    let one = find_active_or_latest(Some(&new), &[&old1, &active_old]).unwrap();
    assert_eq!(one.name_str(), "old3");
    // Several active -> proportional scaling needed.
    assert!(find_active_or_latest(Some(&active_new), &[&active_old]).is_none());
}

// -- replica annotations ---------------------------------------------------

#[test]
fn replicas_annotations() {
    let mut r = rs("a", 1, 1, template("x"));
    assert!(replicas_annotations_need_update(&r, 10, 11));
    assert!(set_replicas_annotations(&mut r, 10, 11));
    assert_eq!(get_desired_replicas_annotation(&r), Some(10));
    assert_eq!(get_max_replicas_annotation(&r), Some(11));
    assert!(!replicas_annotations_need_update(&r, 10, 11));
    assert!(!set_replicas_annotations(&mut r, 10, 11));
    assert!(replicas_annotations_need_update(&r, 10, 12));
    assert!(replicas_annotations_need_update(&r, 9, 11));
    assert!(set_replicas_annotations(&mut r, 10, 12));
    assert_eq!(get_max_replicas_annotation(&r), Some(12));

    let junk = with_annotations(
        rs("b", 1, 1, template("x")),
        &[(DESIRED_REPLICAS_ANNOTATION, "ten")],
    );
    assert_eq!(get_desired_replicas_annotation(&junk), None);
    assert_eq!(get_int_from_annotation(&junk, "absent"), None);
}

// -- conditions -------------------------------------------------------------

#[test]
fn condition_lifecycle() {
    let mut status = DeploymentStatus::default();
    assert!(get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).is_none());

    let c1 = new_deployment_condition(
        DEPLOYMENT_PROGRESSING,
        CONDITION_TRUE,
        REPLICA_SET_UPDATED_REASON,
        "m1",
        ts(100),
    );
    assert_eq!(c1.last_update_time, Some(Time(ts(100))));
    assert_eq!(c1.last_transition_time, Some(Time(ts(100))));
    set_deployment_condition(&mut status, c1.clone());
    assert_eq!(
        get_deployment_condition(&status, DEPLOYMENT_PROGRESSING),
        Some(&c1)
    );

    // Same status and reason: nothing changes, not even the message/time.
    let same = new_deployment_condition(
        DEPLOYMENT_PROGRESSING,
        CONDITION_TRUE,
        REPLICA_SET_UPDATED_REASON,
        "m2",
        ts(200),
    );
    set_deployment_condition(&mut status, same);
    assert_eq!(
        get_deployment_condition(&status, DEPLOYMENT_PROGRESSING),
        Some(&c1)
    );

    // Same status, new reason: replaced, transition time kept.
    let reason = new_deployment_condition(
        DEPLOYMENT_PROGRESSING,
        CONDITION_TRUE,
        NEW_RS_AVAILABLE_REASON,
        "m3",
        ts(300),
    );
    set_deployment_condition(&mut status, reason);
    let got = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(got.reason.as_deref(), Some(NEW_RS_AVAILABLE_REASON));
    assert_eq!(got.last_update_time, Some(Time(ts(300))));
    assert_eq!(got.last_transition_time, Some(Time(ts(100))));

    // Status flips: transition time moves.
    let flip = new_deployment_condition(
        DEPLOYMENT_PROGRESSING,
        CONDITION_FALSE,
        TIMED_OUT_REASON,
        "",
        ts(400),
    );
    set_deployment_condition(&mut status, flip);
    let got = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).unwrap();
    assert_eq!(got.last_transition_time, Some(Time(ts(400))));
    assert_eq!(got.message, None);

    // Other types coexist; only one condition per type.
    let avail = new_deployment_condition(
        DEPLOYMENT_AVAILABLE,
        CONDITION_TRUE,
        MINIMUM_REPLICAS_AVAILABLE,
        "",
        ts(500),
    );
    set_deployment_condition(&mut status, avail);
    assert_eq!(status.conditions.as_ref().unwrap().len(), 2);

    remove_deployment_condition(&mut status, DEPLOYMENT_PROGRESSING);
    assert!(get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).is_none());
    assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
    remove_deployment_condition(&mut status, DEPLOYMENT_AVAILABLE);
    assert_eq!(status.conditions, None);
}

#[test]
fn replica_set_condition_promotion() {
    let rc = ReplicaSetCondition {
        type_: REPLICA_SET_REPLICA_FAILURE.into(),
        status: CONDITION_TRUE.into(),
        last_transition_time: Some(Time(ts(42))),
        reason: Some("FailedCreate".into()),
        message: Some("quota".into()),
    };
    let status = ReplicaSetStatus {
        conditions: Some(vec![rc.clone()]),
        ..Default::default()
    };
    assert_eq!(
        get_replica_set_condition(&status, REPLICA_SET_REPLICA_FAILURE),
        Some(&rc)
    );
    let dc = replica_set_to_deployment_condition(&rc);
    assert_eq!(dc.type_, DEPLOYMENT_REPLICA_FAILURE);
    assert_eq!(dc.last_update_time, Some(Time(ts(42))));
    assert_eq!(dc.last_transition_time, Some(Time(ts(42))));
    assert_eq!(dc.message.as_deref(), Some("quota"));
}

// -- revisions ----------------------------------------------------------------

#[test]
fn revision_parsing_and_max_last() {
    let r = |name: &str, rev: Option<&str>| {
        let base = rs(name, 1, 1, template("x"));
        match rev {
            Some(v) => with_annotations(base, &[(REVISION_ANNOTATION, v)]),
            None => base,
        }
    };
    assert_eq!(revision(&r("a", None).metadata), Ok(0));
    assert_eq!(revision(&r("a", Some("7")).metadata), Ok(7));
    assert!(revision(&r("a", Some("x")).metadata).is_err());
    assert!(revision(&r("a", Some("")).metadata).is_err());

    let set = [
        r("a", Some("3")),
        r("b", Some("9")),
        r("c", Some("bad")),
        r("d", Some("5")),
    ];
    assert_eq!(max_revision(&set), 9);
    assert_eq!(last_revision(&set), 5);
    assert_eq!(max_revision::<ReplicaSet>(&[]), 0);
    assert_eq!(last_revision(&[r("a", Some("4"))]), 0);
    assert_eq!(last_revision(&[r("a", Some("4")), r("b", Some("4"))]), 4);
}

#[test]
fn deployment_revision() {
    let mut d = deployment(1, pct("25%"), pct("25%"));
    assert!(set_deployment_revision(&mut d, "3"));
    assert!(!set_deployment_revision(&mut d, "3"));
    assert!(set_deployment_revision(&mut d, "4"));
    assert_eq!(revision(&d.metadata), Ok(4));
}

#[test]
fn revision_history_is_trimmed_to_limit() {
    let d = deployment(1, pct("25%"), pct("25%"));
    let mut r = rs("a", 1, 1, template("x"));
    for i in 10..20 {
        let next = (i + 1).to_string();
        set_new_replica_set_annotations(&d, &mut r, &next, true, 5);
        let ann = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann.get(REVISION_ANNOTATION), Some(&next));
        match i {
            10 => assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION), None),
            11 => assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "11"),
            _ => assert_eq!(
                ann.get(REVISION_HISTORY_ANNOTATION).unwrap(),
                &format!("{},{}", i - 1, i)
            ),
        }
    }

    // A single entry that can never fit leaves the history untouched.
    let mut r = with_annotations(
        rs("b", 1, 1, template("x")),
        &[
            (REVISION_ANNOTATION, "100"),
            (REVISION_HISTORY_ANNOTATION, "1,2"),
        ],
    );
    assert!(set_new_replica_set_annotations(&d, &mut r, "101", true, 2));
    let ann = r.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "101");
    assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "1,2");

    // Plenty of room: appended.
    let mut r = with_annotations(
        rs("c", 1, 1, template("x")),
        &[
            (REVISION_ANNOTATION, "4"),
            (REVISION_HISTORY_ANNOTATION, "1,2"),
        ],
    );
    set_new_replica_set_annotations(&d, &mut r, "5", true, MAX_REV_HISTORY_LENGTH_IN_CHARS);
    assert_eq!(
        r.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(REVISION_HISTORY_ANNOTATION)
            .unwrap(),
        "1,2,4"
    );
}

#[test]
fn new_replica_set_annotations_rules() {
    let mut d = deployment(10, pct("25%"), pct("25%"));
    d.metadata.annotations = Some(labels(&[
        ("team", "a"),
        (REVISION_ANNOTATION, "99"),
        (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
    ]));

    // Brand-new RS: copies user annotations, sets revision and replica annotations.
    let mut r = rs("a", 0, 1, template("x"));
    assert!(set_new_replica_set_annotations(
        &d, &mut r, "3", false, 2000
    ));
    let ann = r.metadata.annotations.clone().unwrap();
    assert_eq!(ann.get("team").unwrap(), "a");
    assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "3");
    assert_eq!(ann.get(DESIRED_REPLICAS_ANNOTATION).unwrap(), "10");
    assert_eq!(ann.get(MAX_REPLICAS_ANNOTATION).unwrap(), "13");
    assert!(!ann.contains_key(LAST_APPLIED_CONFIG_ANNOTATION));
    assert!(!ann.contains_key(REVISION_HISTORY_ANNOTATION));

    // Nothing to do the second time round.
    assert!(!set_new_replica_set_annotations(
        &d, &mut r, "3", true, 2000
    ));
    // Revision is never lowered.
    assert!(!set_new_replica_set_annotations(
        &d, &mut r, "2", true, 2000
    ));
    assert_eq!(revision(&r.metadata), Ok(3));

    // Bad revisions report "unchanged".
    assert!(!set_new_replica_set_annotations(
        &d, &mut r, "x", true, 2000
    ));
    let mut bad = with_annotations(rs("b", 0, 1, template("x")), &[(REVISION_ANNOTATION, "x")]);
    assert!(!set_new_replica_set_annotations(
        &d, &mut bad, "4", true, 2000
    ));

    // An empty revision annotation counts as 0 but is "present": the
    // history records the empty value, as upstream does.
    let mut empty = with_annotations(rs("c", 0, 1, template("x")), &[(REVISION_ANNOTATION, "")]);
    assert!(set_new_replica_set_annotations(
        &d, &mut empty, "4", true, 2000
    ));
    let ann = empty.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "4");
    assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "");
}

#[test]
fn annotation_copy_and_rollback() {
    let mut d = deployment(1, pct("25%"), pct("25%"));
    d.metadata.annotations = Some(labels(&[
        ("team", "a"),
        (REVISION_ANNOTATION, "5"),
        (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
    ]));
    let mut r = with_annotations(
        rs("a", 1, 1, template("x")),
        &[("rs-only", "1"), ("team", "a")],
    );
    assert!(!copy_deployment_annotations_to_replica_set(&d, &mut r));
    d.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("team".into(), "b".into());
    assert!(copy_deployment_annotations_to_replica_set(&d, &mut r));
    let ann = r.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann.get("team").unwrap(), "b");
    assert_eq!(ann.get("rs-only").unwrap(), "1");
    assert!(!ann.contains_key(REVISION_ANNOTATION));

    let skipped = get_skipped_annotations(d.metadata.annotations.as_ref().unwrap());
    assert_eq!(
        skipped,
        labels(&[
            (REVISION_ANNOTATION, "5"),
            (LAST_APPLIED_CONFIG_ANNOTATION, "{}")
        ])
    );

    let target = with_annotations(
        rs("old", 1, 1, template("x")),
        &[
            ("team", "old"),
            (REVISION_ANNOTATION, "2"),
            (DESIRED_REPLICAS_ANNOTATION, "1"),
        ],
    );
    set_deployment_annotations_to(&mut d, &target);
    assert_eq!(
        d.metadata.annotations.unwrap(),
        labels(&[
            ("team", "old"),
            (REVISION_ANNOTATION, "5"),
            (LAST_APPLIED_CONFIG_ANNOTATION, "{}")
        ])
    );
}

#[test]
fn rollback_template_drops_hash_label() {
    let mut d = deployment(1, pct("25%"), pct("25%"));
    let mut t = template("nginx:2");
    t.metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "abc".into());
    set_from_replica_set_template(&mut d, &t);
    assert_eq!(d.spec.as_ref().unwrap().template, template("nginx:2"));
}

// -- labels -------------------------------------------------------------------

#[test]
fn label_cloning() {
    let base = labels(&[("app", "web")]);
    let added = clone_and_add_label(Some(&base), "k", "v");
    assert_eq!(added, labels(&[("app", "web"), ("k", "v")]));
    assert_eq!(base.len(), 1);
    assert_eq!(clone_and_add_label(None, "", "v"), BTreeMap::new());
    assert_eq!(clone_and_remove_label(Some(&added), "k"), base);

    let sel = LabelSelector {
        match_labels: Some(base.clone()),
        ..Default::default()
    };
    let out = clone_selector_and_add_label(&sel, DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h");
    assert_eq!(
        out.match_labels.unwrap(),
        labels(&[("app", "web"), (DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h")])
    );
    let empty = clone_selector_and_add_label(&LabelSelector::default(), "k", "v");
    assert_eq!(empty.match_labels.unwrap(), labels(&[("k", "v")]));
}

// -- template equality and finding ---------------------------------------------

#[test]
fn equal_ignore_hash_cases() {
    let a = template("nginx:1");
    let mut hashed = a.clone();
    hashed
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "xyz".into());
    let mut hashed2 = hashed.clone();
    hashed2
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "other".into());
    assert!(equal_ignore_hash(&a, &hashed));
    assert!(equal_ignore_hash(&hashed, &hashed2));
    assert!(!equal_ignore_hash(&a, &template("nginx:2")));

    // A different non-hash label matters.
    let mut relabelled = a.clone();
    relabelled
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert("tier".into(), "fe".into());
    assert!(!equal_ignore_hash(&a, &relabelled));

    // Only the hash label present on one side vs no labels on the other.
    let bare = PodTemplateSpec::default();
    let only_hash = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h")])),
            ..Default::default()
        }),
        spec: None,
    };
    assert!(equal_ignore_hash(&bare, &only_hash));

    // Nil vs empty collections and zero-valued structs are equivalent.
    let mut nil_vs_empty = a.clone();
    let spec = nil_vs_empty.spec.as_mut().unwrap();
    spec.volumes = Some(vec![]);
    spec.node_selector = Some(BTreeMap::new());
    spec.containers[0].resources = Some(ResourceRequirements::default());
    spec.containers[0].env = Some(vec![]);
    nil_vs_empty.metadata.as_mut().unwrap().annotations = Some(BTreeMap::new());
    assert!(equal_ignore_hash(&a, &nil_vs_empty));

    // Annotations on the template do matter.
    let mut annotated = a.clone();
    annotated.metadata.as_mut().unwrap().annotations = Some(labels(&[("x", "y")]));
    assert!(!equal_ignore_hash(&a, &annotated));
}

#[test]
fn find_new_picks_oldest_match() {
    let d = deployment(3, pct("25%"), pct("25%"));
    let mut matching = template("nginx:1");
    matching
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "h1".into());
    let newer = rs("newer", 1, 200, matching.clone());
    let older = rs("older", 1, 100, matching.clone());
    let same_time_b = rs("b", 1, 50, matching.clone());
    let same_time_a = rs("a", 1, 50, matching.clone());
    let unrelated = rs("unrelated", 1, 10, template("nginx:0"));

    let found = find_new_replica_set(&d, &[&newer, &unrelated, &older]).unwrap();
    assert_eq!(found.name_str(), "older");
    let found = find_new_replica_set(&d, &[&same_time_b, &newer, &same_time_a]).unwrap();
    assert_eq!(found.name_str(), "a");
    assert!(find_new_replica_set(&d, &[&unrelated]).is_none());
    assert!(find_new_replica_set(&d, &[]).is_none());
}

#[test]
fn find_old_splits_all_and_active() {
    let d = deployment(3, pct("25%"), pct("25%"));
    let new = rs("new", 3, 300, template("nginx:1"));
    let dup_new = rs("dup-new", 1, 400, template("nginx:1"));
    let old_active = rs("old-active", 2, 200, template("nginx:0"));
    let old_empty = rs("old-empty", 0, 100, template("nginx:-1"));

    let (all, active) = find_old_replica_sets(&d, &[&new, &old_active, &dup_new, &old_empty]);
    assert_eq!(names(&all), ["old-empty", "old-active", "dup-new"]);
    assert_eq!(names(&active), ["old-active", "dup-new"]);

    let (all, active) = find_old_replica_sets(&d, &[&old_active]);
    assert_eq!(names(&all), ["old-active"]);
    assert_eq!(names(&active), ["old-active"]);

    // Without UIDs the new RS is recognised by identity.
    let mut new_no_uid = new.clone();
    new_no_uid.metadata.uid = None;
    let mut old_no_uid = old_active.clone();
    old_no_uid.metadata.uid = None;
    let (all, _) = find_old_replica_sets(&d, &[&new_no_uid, &old_no_uid]);
    assert_eq!(names(&all), ["old-active"]);
}

#[test]
fn counts_and_filters() {
    let a = with_status(rs("a", 3, 1, template("x")), 4, 2, 1);
    let b = with_status(rs("b", 0, 2, template("y")), 1, 1, 1);
    let c = rs("c", 2, 3, template("z"));
    let all = [&a, &b, &c];
    assert_eq!(get_replica_count_for_replica_sets(&all), 5);
    assert_eq!(get_actual_replica_count_for_replica_sets(&all), 5);
    assert_eq!(get_ready_replica_count_for_replica_sets(&all), 3);
    assert_eq!(get_available_replica_count_for_replica_sets(&all), 2);
    assert_eq!(names(&filter_active_replica_sets(&all)), ["a", "c"]);
    assert_eq!(
        names(&filter_replica_sets(&all, |r| replica_set_replicas(r) == 0)),
        ["b"]
    );
    // Owned values work too.
    assert_eq!(
        get_replica_count_for_replica_sets(&[a.clone(), c.clone()]),
        5
    );
}

// -- status predicates ------------------------------------------------------------

#[test]
fn completeness_and_progress() {
    let mut d = deployment(3, pct("25%"), pct("25%"));
    d.metadata.generation = Some(2);
    let status = |replicas, updated, available, ready, observed| DeploymentStatus {
        replicas: Some(replicas),
        updated_replicas: Some(updated),
        available_replicas: Some(available),
        ready_replicas: Some(ready),
        observed_generation: Some(observed),
        ..Default::default()
    };
    assert!(deployment_complete(&d, &status(3, 3, 3, 3, 2)));
    assert!(!deployment_complete(&d, &status(3, 3, 3, 3, 1)));
    assert!(!deployment_complete(&d, &status(4, 3, 3, 3, 2)));
    assert!(!deployment_complete(&d, &status(3, 2, 3, 3, 2)));
    assert!(!deployment_complete(&d, &status(3, 3, 2, 3, 2)));

    d.status = Some(status(5, 2, 2, 2, 2));
    assert!(!deployment_progressing(&d, &status(5, 2, 2, 2, 2)));
    assert!(
        deployment_progressing(&d, &status(5, 3, 2, 2, 2)),
        "more updated"
    );
    assert!(
        deployment_progressing(&d, &status(4, 2, 2, 2, 2)),
        "fewer old"
    );
    assert!(
        deployment_progressing(&d, &status(5, 2, 2, 3, 2)),
        "more ready"
    );
    assert!(
        deployment_progressing(&d, &status(5, 2, 3, 2, 2)),
        "more available"
    );
    assert!(
        !deployment_progressing(&d, &status(6, 2, 1, 1, 2)),
        "regress"
    );
}

#[test]
fn timed_out() {
    let mk = |pds: Option<i32>, reason: &str, from: i64| {
        let mut d = deployment(1, pct("25%"), pct("25%"));
        d.spec.as_mut().unwrap().progress_deadline_seconds = pds;
        let status = DeploymentStatus {
            conditions: Some(vec![new_deployment_condition(
                DEPLOYMENT_PROGRESSING,
                CONDITION_TRUE,
                reason,
                "",
                ts(from),
            )]),
            ..Default::default()
        };
        (d, status)
    };
    let now = ts(80);
    let (d, s) = mk(None, "", 69);
    assert!(!deployment_timed_out(&d, &s, now), "no deadline");
    let (d, s) = mk(Some(i32::MAX), "", 69);
    assert!(!deployment_timed_out(&d, &s, now), "infinite deadline");
    let (d, s) = mk(Some(10), "", 69);
    assert!(deployment_timed_out(&d, &s, now), "11s > 10s");
    let (d, s) = mk(Some(10), "", 71);
    assert!(!deployment_timed_out(&d, &s, now), "9s < 10s");
    let (d, s) = mk(Some(10), "", 70);
    assert!(!deployment_timed_out(&d, &s, now), "exactly at deadline");
    let (d, s) = mk(Some(10), NEW_RS_AVAILABLE_REASON, 0);
    assert!(
        !deployment_timed_out(&d, &s, now),
        "previous rollout complete"
    );
    let (d, s) = mk(Some(10), TIMED_OUT_REASON, 79);
    assert!(deployment_timed_out(&d, &s, now), "already timed out");
    let (d, _) = mk(Some(10), "", 0);
    assert!(
        !deployment_timed_out(&d, &DeploymentStatus::default(), now),
        "no condition"
    );
}

#[test]
fn deadline_and_history_limit_flags() {
    let mut d = deployment(1, pct("25%"), pct("25%"));
    assert!(!has_progress_deadline(&d));
    assert!(!has_revision_history_limit(&d));
    let spec = d.spec.as_mut().unwrap();
    spec.progress_deadline_seconds = Some(600);
    spec.revision_history_limit = Some(0);
    assert!(has_progress_deadline(&d));
    assert!(has_revision_history_limit(&d));
    let spec = d.spec.as_mut().unwrap();
    spec.progress_deadline_seconds = Some(i32::MAX);
    spec.revision_history_limit = Some(i32::MAX);
    assert!(!has_progress_deadline(&d));
    assert!(!has_revision_history_limit(&d));
}

// -- hashing --------------------------------------------------------------------------

#[test]
fn fnv_reference_vectors() {
    assert_eq!(fnv1a32(&[b""]), 0x811c_9dc5);
    assert_eq!(fnv1a32(&[b"a"]), 0xe40c_292c);
    assert_eq!(fnv1a32(&[b"foobar"]), 0xbf9c_f968);
    assert_eq!(fnv1a32(&[b"foo", b"bar"]), 0xbf9c_f968);
}

#[test]
fn safe_encoding_matches_alphabet_mapping() {
    // '0' is code 48 -> 48 % 27 = 21 -> '4'; '6' is 54 -> 0 -> 'b'.
    assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
    assert_eq!(safe_encode_string(""), "");
}

#[test]
fn compute_hash_properties() {
    let t = template("nginx:1");
    let h = compute_hash(&t, None);
    assert_eq!(h, compute_hash(&t.clone(), None), "stable");
    assert!(
        !h.is_empty() && h.len() <= 10,
        "decimal u32 has at most 10 digits"
    );
    assert_ne!(h, compute_hash(&template("nginx:2"), None));
    let c0 = compute_hash(&t, Some(0));
    let c1 = compute_hash(&t, Some(1));
    assert_ne!(h, c0);
    assert_ne!(c0, c1);
    assert_eq!(c1, compute_hash(&t, Some(1)));
    for s in [&h, &c0, &c1, &compute_hash(&t, Some(-1))] {
        assert!(s.bytes().all(|b| SAFE_ALPHANUMS.contains(&b)), "{s}");
    }
    // The hash is a pure function of the serialised template.
    let body = serde_json::to_vec(&t).unwrap();
    assert_eq!(h, safe_encode_string(&fnv1a32(&[&body]).to_string()));
    let trailer = [1u8, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        c1,
        safe_encode_string(&fnv1a32(&[&body, &trailer]).to_string())
    );
}

// -- ordering ---------------------------------------------------------------------------

#[test]
fn orderings() {
    let a = rs("a", 3, 100, template("x"));
    let b = rs("b", 3, 100, template("x"));
    let c = rs("c", 5, 50, template("x"));
    let d = rs("d", 3, 10, template("x"));
    let mut no_ts = rs("z", 1, 0, template("x"));
    no_ts.metadata.creation_timestamp = None;

    let mut v = vec![&c, &b, &a, &d, &no_ts];
    sort_replica_sets_by_creation_timestamp(&mut v);
    assert_eq!(names(&v), ["z", "d", "c", "a", "b"]);

    sort_replica_sets_by_size_older(&mut v);
    assert_eq!(names(&v), ["c", "d", "a", "b", "z"]);

    sort_replica_sets_by_size_newer(&mut v);
    assert_eq!(names(&v), ["c", "b", "a", "d", "z"]);

    let r = |name: &str, rev: &str, created| {
        with_annotations(
            rs(name, 1, created, template("x")),
            &[(REVISION_ANNOTATION, rev)],
        )
    };
    let mut owned = vec![
        r("r10", "10", 1),
        r("r2", "2", 5),
        r("r2b", "2", 3),
        r("bad", "x", 9),
        r("r1", "1", 7),
    ];
    sort_replica_sets_by_revision(&mut owned);
    let got: Vec<&str> = owned.iter().map(|r| r.name_str()).collect();
    assert_eq!(got, ["bad", "r1", "r2b", "r2", "r10"]);
}
