use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use serde_json::json;

use super::state::State;
use super::status::time;
use super::*;
use crate::nodesim::nodes;

const T0: Millis = 1_700_000_000_000;

fn pod(extra: serde_json::Value) -> Pod {
    let mut p = json!({"metadata": {"name": "p", "namespace": "d", "uid": "0123-4567-89ab"},
        "spec": {"nodeName": "sim-node-0", "containers": [{"name": "c", "image": "nginx:1"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}]}});
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).unwrap()
}

fn timing(p: &Pod) -> Timing {
    Timing::of(p, Duration::from_millis(500), Duration::from_secs(10))
}

fn cond<'a>(st: &'a PodStatus, t: &str) -> &'a PodCondition {
    st.conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == t)
        .unwrap()
}

#[test]
fn claims_must_exist_be_bound_and_be_the_pods() {
    let p = pod(json!({}));
    let claim = |extra: serde_json::Value| -> PersistentVolumeClaim {
        let mut c = json!({"metadata": {"name": "c", "namespace": "d", "uid": "cu"},
            "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}});
        json_patch::merge(&mut c, &extra);
        serde_json::from_value(c).unwrap()
    };
    let cases = [
        (None, "error processing PVC d/c: failed to fetch PVC from API server: persistentvolumeclaims \"c\" not found"),
        (Some(json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})), "error processing PVC d/c: PVC is being deleted"),
        (Some(json!({"status": {"phase": "Pending"}})), "error processing PVC d/c: PVC is not bound"),
        (Some(json!({"spec": {"volumeName": null}})), "error processing PVC d/c: PVC has empty pvc.Spec.VolumeName"),
    ];
    for (extra, message) in cases {
        let c = extra.map(claim);
        assert_eq!(
            claim_problem(&p, "c", false, c.as_ref()),
            Err(message.to_string())
        );
    }
    assert_eq!(
        claim_problem(&p, "c", false, Some(&claim(json!({})))),
        Ok("pv".into())
    );
    assert_eq!(
        claim_problem(&p, "c", true, Some(&claim(json!({})))),
        Err("PVC d/c was not created for pod d/p (pod is not owner)".into())
    );
    let owned = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "0123-4567-89ab", "controller": true}]}}));
    assert_eq!(claim_problem(&p, "c", true, Some(&owned)), Ok("pv".into()));

    let volume = |claim_ref: serde_json::Value| -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": {"claimRef": claim_ref}}))
            .unwrap()
    };
    assert_eq!(
        volume_problem(
            &p,
            "c",
            Some("cu"),
            "pv",
            Some(&volume(json!({"uid": "cu"})))
        ),
        None
    );
    assert_eq!(
        volume_problem(&p, "c", Some("cu"), "pv", Some(&volume(json!({"uid": "other"})))).unwrap(),
        "error processing PVC d/c: found PV object pv but its pv.Spec.ClaimRef.UID other does not point to claim.UID cu"
    );
    assert!(volume_problem(&p, "c", Some("cu"), "pv", None)
        .unwrap()
        .ends_with("failed to fetch PV pv from API server: persistentvolumes \"pv\" not found"));
    assert!(volume_problem(
        &p,
        "c",
        Some("cu"),
        "pv",
        Some(&volume(serde_json::Value::Null))
    )
    .unwrap()
    .contains("nil pv.Spec.ClaimRef"));
}

#[test]
fn volumes_need_their_configmaps_and_secrets_unless_optional() {
    let p = pod(json!({"spec": {"volumes": [
        {"name": "cfg", "configMap": {"name": "app"}},
        {"name": "maybe", "configMap": {"name": "extra", "optional": true}},
        {"name": "creds", "secret": {"secretName": "db"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "kube-api-access-x1y2z", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt"}},
            {"secret": {"name": "opt", "optional": true}},
            {"secret": {"name": "tls"}},
            {"downwardAPI": {"items": []}}
        ]}}
    ]}}));
    let needed: Vec<(String, MountKind, String)> = required_mount_sources(&p)
        .into_iter()
        .map(|s| (s.volume, s.kind, s.name))
        .collect();
    let row = |v: &str, k, n: &str| (v.to_string(), k, n.to_string());
    assert_eq!(
        needed,
        vec![
            row("cfg", MountKind::ConfigMap, "app"),
            row("creds", MountKind::Secret, "db"),
            row(
                "kube-api-access-x1y2z",
                MountKind::ConfigMap,
                "kube-root-ca.crt"
            ),
            row("kube-api-access-x1y2z", MountKind::Secret, "tls"),
        ]
    );
    assert!(required_mount_sources(&pod(json!({}))).is_empty());
    assert_eq!(
        MountSource {
            volume: "kube-api-access-x1y2z".into(),
            kind: MountKind::ConfigMap,
            name: "kube-root-ca.crt".into(),
        }
        .not_found_message(),
        "MountVolume.SetUp failed for volume \"kube-api-access-x1y2z\" : configmap \"kube-root-ca.crt\" not found"
    );
}

#[test]
fn containers_start_no_earlier_than_their_volumes_were_mounted() {
    let p = pod(json!({}));
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        mounted_at: Some(T0 + 5_000),
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut rt, T0 + 4_000, &t), Some(T0 + 5_000));
    assert_eq!(rt.started, None);
    advance(&p, &mut rt, T0 + 5_000, &t);
    assert_eq!(rt.started, Some(T0 + 5_000));
}

#[test]
fn a_bare_pod_goes_pending_then_running_and_ready() {
    let p = pod(json!({}));
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        ip: Some(Ipv4Addr::new(10, 244, 0, 2)),
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut rt, T0, &t), Some(T0 + 500));
    let st = build_status(&p, &rt, "172.16.0.1", T0, &t);
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert_eq!(st.pod_ip, None, "no IP before the sandbox runs");
    assert_eq!(st.host_ip.as_deref(), Some("172.16.0.1"));
    assert_eq!(
        cond(&st, "Ready").reason.as_deref(),
        Some("ContainersNotReady")
    );
    let waiting = st.container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .waiting
        .clone()
        .unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));

    assert_eq!(advance(&p, &mut rt, T0 + 600, &t), None);
    let st = build_status(&p, &rt, "172.16.0.1", T0 + 600, &t);
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.pod_ip.as_deref(), Some("10.244.0.2"));
    for c in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(cond(&st, c).status, "True", "{c}");
    }
    assert_eq!(
        cond(&st, "PodScheduled").last_transition_time,
        p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].last_transition_time,
        "conditions node-sim does not own are kept"
    );
    let cs = &st.container_statuses.as_ref().unwrap()[0];
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert!(cs.state.as_ref().unwrap().running.is_some());
    assert_eq!(st.start_time, Some(time(T0)));
    assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));

    // Same input, same output: nothing to write on the next look.
    let mut p2 = p.clone();
    p2.status = Some(st.clone());
    assert_eq!(build_status(&p2, &rt, "172.16.0.1", T0 + 5_000, &t), st);
}

#[test]
fn readiness_waits_for_the_probe_initial_delay() {
    let p = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"initialDelaySeconds": 5, "exec": {"command": ["true"]}}}]}}),
    );
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut rt, T0 + 1_000, &t), Some(T0 + 5_500));
    let st = build_status(&p, &rt, "h", T0 + 1_000, &t);
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(cond(&st, "Ready").status, "False");
    assert_eq!(
        cond(&st, "ContainersReady").message.as_deref(),
        Some("containers with unready status: [c]")
    );
    assert_eq!(advance(&p, &mut rt, T0 + 5_500, &t), None);
    assert_eq!(
        cond(&build_status(&p, &rt, "h", T0 + 5_500, &t), "Ready").status,
        "True"
    );
}

#[test]
fn the_ready_annotation_makes_running_containers_unready_and_back() {
    let p = pod(json!({"metadata": {"annotations": {READY: "false"}},
        "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}}));
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut rt, T0 + 600, &t), None);
    let st = build_status(&p, &rt, "h", T0 + 600, &t);
    assert_eq!(st.phase.as_deref(), Some("Running"));
    for c in ["Ready", "ContainersReady"] {
        let c = cond(&st, c);
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(
            c.message.as_deref(),
            Some("containers with unready status: [a b]")
        );
    }
    let cs = st.container_statuses.as_ref().unwrap();
    assert!(cs.iter().all(|c| !c.ready && c.started == Some(true)));
    assert_eq!(cond(&st, "PodReadyToStartContainers").status, "True");

    // Annotated "true" (or not at all) the same containers are ready again, and the
    // conditions move with a new transition time.
    for value in [Some("true"), None] {
        let mut again = p.clone();
        again.status = Some(st.clone());
        let ann = again
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match value {
            Some(v) => {
                ann.insert(READY.into(), v.into());
            }
            None => {
                ann.remove(READY);
            }
        }
        let ready = build_status(&again, &rt, "h", T0 + 9_000, &t);
        let c = cond(&ready, "Ready");
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", None));
        assert_eq!(c.last_transition_time, Some(time(T0 + 9_000)));
        assert_eq!(cond(&ready, "ContainersReady").status, "True");
    }

    // The annotation does not hurry a readiness probe's initial delay either way.
    let probed = pod(json!({"metadata": {"annotations": {READY: "true"}},
        "spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"initialDelaySeconds": 5, "exec": {"command": ["true"]}}}]}}));
    let st = build_status(&probed, &rt, "h", T0 + 1_000, &t);
    assert_eq!(cond(&st, "Ready").status, "False");
}

#[test]
fn a_terminating_pod_stays_ready_while_its_containers_run() {
    let p = pod(
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:50Z", "deletionGracePeriodSeconds": 30}}),
    );
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        started: Some(T0 + 500),
        first_started: Some(T0 + 500),
        ..Default::default()
    };
    // Deleted at T0 with 30 s of grace (deletionTimestamp T0 + 30 s): the containers
    // run until then, and kubelet keeps them ready meanwhile.
    assert_eq!(advance(&p, &mut rt, T0 + 25_000, &t), Some(T0 + 30_000));
    let st = build_status(&p, &rt, "h", T0 + 25_000, &t);
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(cond(&st, "Ready").status, "True");
    assert!(st.container_statuses.as_ref().unwrap()[0].ready);
}

#[test]
fn exits_follow_the_restart_policy() {
    let ann = |code: &str, policy: &str| {
        pod(
            json!({"metadata": {"annotations": {EXIT_AFTER: "2s", EXIT_CODE: code}}, "spec": {"restartPolicy": policy}}),
        )
    };
    for (code, policy, phase) in [
        ("0", "Never", "Succeeded"),
        ("1", "Never", "Failed"),
        ("0", "OnFailure", "Succeeded"),
    ] {
        let p = ann(code, policy);
        let t = timing(&p);
        let mut rt = PodRuntime {
            admitted: T0,
            ..Default::default()
        };
        assert_eq!(advance(&p, &mut rt, T0 + 600, &t), Some(T0 + 2_500));
        assert_eq!(advance(&p, &mut rt, T0 + 2_600, &t), None);
        let st = build_status(&p, &rt, "h", T0 + 2_600, &t);
        assert_eq!(st.phase.as_deref(), Some(phase), "{code} {policy}");
        let term = st.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(term.exit_code.to_string(), code);
        assert_eq!(
            term.reason.as_deref(),
            Some(if code == "0" { "Completed" } else { "Error" })
        );
        let ready = st
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.reason.as_deref(), Some("PodCompleted"));
    }
    // OnFailure with a failure restarts after a back-off, and the pod stays Running.
    let p = ann("3", "OnFailure");
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        ..Default::default()
    };
    assert_eq!(
        advance(&p, &mut rt, T0 + 2_600, &t),
        Some(T0 + 2_500 + 10_000)
    );
    let st = build_status(&p, &rt, "h", T0 + 2_600, &t);
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let cs = &st.container_statuses.as_ref().unwrap()[0];
    assert_eq!(cs.restart_count, 1);
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        cs.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );
    advance(&p, &mut rt, T0 + 12_600, &t);
    assert_eq!(rt.started, Some(T0 + 12_500));
    assert_eq!(crash_backoff(10_000, 2), 20_000);
    assert_eq!(crash_backoff(10_000, 40), 300_000);
}

#[test]
fn a_deleted_pod_runs_out_its_grace_period_then_goes() {
    let p = pod(
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:30Z", "deletionGracePeriodSeconds": 10}}),
    );
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        started: Some(T0 + 500),
        first_started: Some(T0 + 500),
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut rt, T0 + 1_000, &t), Some(T0 + 10_000));
    assert!(rt.terminal.is_none());
    advance(&p, &mut rt, T0 + 10_000, &t);
    assert_eq!(rt.terminal.map(|e| e.code), Some(137));
    assert_eq!(
        build_status(&p, &rt, "h", T0 + 10_000, &t).phase.as_deref(),
        Some("Failed")
    );
    // Never started: stopped at once.
    let mut fresh = PodRuntime {
        admitted: T0,
        ..Default::default()
    };
    assert_eq!(advance(&p, &mut fresh, T0 + 100, &t), None);
    assert!(fresh.terminal.is_some());
}

#[test]
fn init_containers_complete_before_the_containers_start() {
    let p = pod(
        json!({"spec": {"initContainers": [{"name": "init", "image": "busybox"}, {"name": "side", "image": "envoy", "restartPolicy": "Always"}]}}),
    );
    let t = timing(&p);
    let mut rt = PodRuntime {
        admitted: T0,
        ..Default::default()
    };
    advance(&p, &mut rt, T0, &t);
    let st = build_status(&p, &rt, "h", T0, &t);
    assert_eq!(cond(&st, "Initialized").status, "False");
    assert_eq!(
        cond(&st, "Initialized").message.as_deref(),
        Some("containers with incomplete status: [init side]")
    );
    advance(&p, &mut rt, T0 + 600, &t);
    let st = build_status(&p, &rt, "h", T0 + 600, &t);
    assert_eq!(cond(&st, "Initialized").status, "True");
    let init = st.init_container_statuses.unwrap();
    assert_eq!(
        init[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    assert!(
        init[1].state.as_ref().unwrap().running.is_some(),
        "a sidecar keeps running"
    );
}

#[test]
fn bad_annotations_are_ignored_and_runtime_is_adopted_after_a_restart() {
    let p = pod(
        json!({"metadata": {"annotations": {EXIT_AFTER: "soon", EXIT_CODE: "x", START_DELAY: "2s"}}}),
    );
    let t = timing(&p);
    assert_eq!((t.exit_after, t.exit_code, t.start_delay), (None, 0, 2_000));
    let running = pod(
        json!({"status": {"phase": "Running", "startTime": "2023-11-14T22:13:20Z", "podIP": "10.244.0.9",
        "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 2,
            "state": {"running": {"startedAt": "2023-11-14T22:13:21Z"}}}]}}),
    );
    let rt = adopt(&running, T0 + 60_000);
    assert_eq!(rt.admitted, T0);
    assert_eq!(rt.started, Some(T0 + 1_000));
    assert_eq!(rt.restarts, 2);
    assert_eq!(rt.ip, Some(Ipv4Addr::new(10, 244, 0, 9)));
}

#[test]
fn qos_classes() {
    assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
    let g = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
    );
    assert_eq!(qos_class(&g), "Guaranteed");
    let b = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    assert_eq!(qos_class(&b), "Burstable");
}

#[test]
fn addresses_come_from_the_node_pod_cidr_and_are_reused() {
    let mut st = State::default();
    let net = nodes::PodNetwork::parse(&nodes::pod_cidr(1)).unwrap();
    let a = st.allocate(net, "n1").unwrap();
    let b = st.allocate(net, "n1").unwrap();
    assert_eq!(
        (a, b),
        (Ipv4Addr::new(10, 244, 1, 2), Ipv4Addr::new(10, 244, 1, 3))
    );
    st.release("n1", a);
    assert_eq!(st.allocate(net, "n1"), Some(a));
    for _ in 0..251 {
        st.allocate(net, "n1");
    }
    assert_eq!(
        st.allocate(net, "n1"),
        None,
        "a full /24 gives no more addresses"
    );
}

#[test]
fn addresses_stay_inside_a_small_pod_cidr() {
    let mut st = State::default();
    let net = nodes::PodNetwork::parse("10.244.7.128/29").unwrap();
    let got: Vec<Ipv4Addr> = std::iter::from_fn(|| st.allocate(net, "n")).collect();
    assert_eq!(
        got,
        (130..=134)
            .map(|h| Ipv4Addr::new(10, 244, 7, h))
            .collect::<Vec<_>>()
    );
    assert_eq!(nodes::PodNetwork::parse("fd00::/64"), None);
    let wide = nodes::PodNetwork::parse("10.244.0.0/16").unwrap();
    assert_eq!(st.allocate(wide, "w"), Some(Ipv4Addr::new(10, 244, 0, 2)));
}
