use super::*;
use serde_json::json;

const NOW: i64 = 1_000_000_000_000;
const MIN: i64 = 60_000;

fn calculator() -> Calculator {
    // Upstream's testing defaults.
    Calculator {
        tolerance: 0.1,
        cpu_initialization_period: Duration::from_secs(120),
        initial_readiness_delay: Duration::from_secs(10),
    }
}

/// How the table describes a pod; upstream's defaults are Running, Ready, start time
/// and readiness transition at Go's zero time.
#[derive(Clone, Copy)]
struct P {
    ready: &'static str,
    phase: &'static str,
    /// Start time relative to now in ms, or `None` for Go's zero time.
    start: Option<i64>,
    deleting: bool,
}

const RUN: P = P {
    ready: "True",
    phase: "Running",
    start: None,
    deleting: false,
};
const UNREADY: P = P {
    ready: "False",
    ..RUN
};
const PENDING: P = P {
    ready: "False",
    phase: "Pending",
    ..RUN
};
const FAILED: P = P {
    phase: "Failed",
    ..RUN
};
const DELETING: P = P {
    deleting: true,
    ..RUN
};
/// Started now: within the CPU initialization period.
const HOT: P = P {
    start: Some(0),
    ..RUN
};
/// Started three minutes ago.
const COOL: P = P {
    start: Some(-3 * MIN),
    ..RUN
};
const HOT_UNREADY: P = P {
    ready: "False",
    ..HOT
};

/// Two containers per pod, each requesting `request` milli-units, as upstream's tests.
fn pod(index: usize, p: P, request: Option<i64>) -> Arc<Pod> {
    let resources = |r: Option<i64>| match r {
        Some(r) => json!({"requests": {"cpu": format!("{r}m")}}),
        None => json!({}),
    };
    let start = match p.start {
        Some(offset) => json!(jiff::Timestamp::from_millisecond(NOW + offset)
            .unwrap()
            .to_string()),
        None => json!("0001-01-01T00:00:00Z"),
    };
    let mut value = json!({
        "metadata": {"name": format!("test-pod-{index}"), "namespace": "ns", "labels": {"name": "test-pod"}},
        "spec": {"containers": [
            {"name": "container1", "resources": resources(request)},
            {"name": "container2", "resources": resources(request)},
        ]},
        "status": {"phase": p.phase, "startTime": start,
            "conditions": [{"type": "Ready", "status": p.ready, "lastTransitionTime": "0001-01-01T00:00:00Z"}]},
    });
    if p.deleting {
        value["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
    }
    Arc::new(serde_json::from_value(value).unwrap())
}

fn samples(levels: &[i64]) -> PodMetrics {
    levels
        .iter()
        .enumerate()
        .map(|(i, &value)| {
            (
                format!("test-pod-{i}"),
                PodMetric {
                    timestamp_ms: ZERO_TIME_MS,
                    window_ms: MIN,
                    value,
                },
            )
        })
        .collect()
}

struct Case {
    name: &'static str,
    current: i32,
    pods: Vec<P>,
    /// Per-container requests in milli-CPU (one per pod; a shorter list leaves the rest
    /// without requests).
    requests: Vec<i64>,
    /// Per-container levels (pod totals are twice these).
    levels: Vec<i64>,
    target: i32,
    expected: Result<(i32, i32, i64), &'static str>,
}

fn run_resource(case: &Case) {
    let pods: Vec<_> = case
        .pods
        .iter()
        .enumerate()
        .map(|(i, &p)| pod(i, p, case.requests.get(i).copied()))
        .collect();
    let levels: Vec<i64> = case.levels.iter().map(|l| l * 2).collect();
    let got = calculator().resource_replicas(
        case.current,
        case.target,
        "cpu",
        "",
        &pods,
        samples(&levels),
        NOW,
    );
    match (&got, &case.expected) {
        (Ok(got), Ok((replicas, utilization, raw))) => {
            assert_eq!(
                (got.replicas, got.utilization, got.raw),
                (*replicas, *utilization, *raw),
                "{}",
                case.name
            )
        }
        (Err(got), Err(expected)) => {
            assert!(got.contains(expected), "{}: {got}", case.name)
        }
        _ => panic!("{}: got {got:?}, expected {:?}", case.name, case.expected),
    }
}

fn n(p: P, count: usize) -> Vec<P> {
    vec![p; count]
}

/// Upstream's `TestReplicaCalc*` resource cases (two containers per pod; requests of
/// 1.0 CPU are 1000m per container; expected raw values are pod totals).
#[test]
fn resource_utilization_table() {
    let cases = vec![
        Case {
            name: "ScaleUp",
            current: 3,
            pods: n(RUN, 3),
            requests: vec![1000; 3],
            levels: vec![300, 500, 700],
            target: 30,
            expected: Ok((5, 50, 1000)),
        },
        Case {
            name: "ScaleUpUnreadyLessScale",
            current: 3,
            pods: vec![UNREADY, RUN, RUN],
            requests: vec![1000; 3],
            levels: vec![300, 500, 700],
            target: 30,
            expected: Ok((4, 60, 1200)),
        },
        Case {
            name: "ScaleUpHotCpuLessScale",
            current: 3,
            pods: vec![HOT, COOL, COOL],
            requests: vec![1000; 3],
            levels: vec![300, 500, 700],
            target: 30,
            expected: Ok((4, 60, 1200)),
        },
        Case {
            name: "ScaleUpUnreadyNoScale",
            current: 3,
            pods: vec![RUN, UNREADY, UNREADY],
            requests: vec![1000; 3],
            levels: vec![400, 500, 700],
            target: 30,
            expected: Ok((3, 40, 800)),
        },
        Case {
            name: "ScaleHotCpuNoScale",
            current: 3,
            pods: vec![COOL, HOT_UNREADY, HOT_UNREADY],
            requests: vec![1000; 3],
            levels: vec![400, 500, 700],
            target: 30,
            expected: Ok((3, 40, 800)),
        },
        Case {
            name: "ScaleUpIgnoresFailedPods",
            current: 2,
            pods: vec![RUN, RUN, FAILED, FAILED],
            requests: vec![1000; 4],
            levels: vec![500, 700],
            target: 30,
            expected: Ok((4, 60, 1200)),
        },
        Case {
            name: "ScaleUpIgnoresDeletionPods",
            current: 2,
            pods: vec![RUN, RUN, DELETING, DELETING],
            requests: vec![1000; 4],
            levels: vec![500, 700, 100, 100],
            target: 30,
            expected: Ok((4, 60, 1200)),
        },
        Case {
            name: "ScaleDown",
            current: 5,
            pods: n(RUN, 5),
            requests: vec![1000; 5],
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((3, 28, 560)),
        },
        Case {
            name: "ScaleDownExcludeUnreadyPods",
            current: 5,
            pods: vec![RUN, RUN, RUN, UNREADY, UNREADY],
            requests: vec![1000; 5],
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((2, 30, 600)),
        },
        Case {
            name: "ScaleDownExcludeUnscheduledPods",
            current: 5,
            pods: vec![RUN, PENDING, PENDING, PENDING, PENDING],
            requests: vec![1000; 5],
            levels: vec![100],
            target: 50,
            expected: Ok((1, 10, 200)),
        },
        Case {
            name: "ScaleDownIgnoreHotCpuPods",
            current: 5,
            pods: vec![COOL, COOL, COOL, HOT, HOT],
            requests: vec![1000; 5],
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((2, 30, 600)),
        },
        Case {
            name: "ScaleDownIgnoresFailedPods",
            current: 5,
            pods: vec![RUN, RUN, RUN, RUN, RUN, FAILED, FAILED],
            requests: vec![1000; 7],
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((3, 28, 560)),
        },
        Case {
            name: "Tolerance",
            current: 3,
            pods: n(RUN, 3),
            requests: vec![900, 1000, 1100],
            levels: vec![1010, 1030, 1020],
            target: 100,
            expected: Ok((3, 102, 2040)),
        },
        Case {
            name: "SuperfluousMetrics",
            current: 4,
            pods: n(RUN, 4),
            requests: vec![1000; 4],
            levels: vec![4000, 9500, 3000, 7000, 3200, 2000],
            target: 100,
            expected: Ok((24, 587, 11750)),
        },
        Case {
            name: "MissingMetrics",
            current: 4,
            pods: n(RUN, 4),
            requests: vec![1000; 4],
            levels: vec![400, 95],
            target: 100,
            expected: Ok((3, 24, 495)),
        },
        Case {
            name: "EmptyCPURequest",
            current: 1,
            pods: n(RUN, 1),
            requests: vec![],
            levels: vec![200],
            target: 100,
            expected: Err("missing request for"),
        },
        Case {
            name: "MissingMetricsNoChangeEq",
            current: 2,
            pods: n(RUN, 2),
            requests: vec![1000; 2],
            levels: vec![1000],
            target: 100,
            expected: Ok((2, 100, 2000)),
        },
        Case {
            name: "MissingMetricsNoChangeGt",
            current: 2,
            pods: n(RUN, 2),
            requests: vec![1000; 2],
            levels: vec![1900],
            target: 100,
            expected: Ok((2, 190, 3800)),
        },
        Case {
            name: "MissingMetricsNoChangeLt",
            current: 2,
            pods: n(RUN, 2),
            requests: vec![1000; 2],
            levels: vec![600],
            target: 100,
            expected: Ok((2, 60, 1200)),
        },
        Case {
            name: "MissingMetricsUnreadyChange",
            current: 3,
            pods: vec![UNREADY, RUN, RUN],
            requests: vec![1000; 3],
            levels: vec![100, 450],
            target: 50,
            expected: Ok((3, 45, 900)),
        },
        Case {
            name: "MissingMetricsHotCpuNoChange",
            current: 3,
            pods: vec![HOT, COOL, COOL],
            requests: vec![1000; 3],
            levels: vec![100, 450],
            target: 50,
            expected: Ok((3, 45, 900)),
        },
        Case {
            name: "MissingMetricsUnreadyScaleUp",
            current: 3,
            pods: vec![UNREADY, RUN, RUN],
            requests: vec![1000; 3],
            levels: vec![100, 2000],
            target: 50,
            expected: Ok((4, 200, 4000)),
        },
        Case {
            name: "MissingMetricsUnreadyScaleDown",
            current: 4,
            pods: vec![UNREADY, RUN, RUN, RUN],
            requests: vec![1000; 4],
            levels: vec![100, 100, 100],
            target: 50,
            expected: Ok((3, 10, 200)),
        },
        Case {
            name: "MissingMetricsScaleDownTargetOver100",
            current: 4,
            pods: vec![UNREADY, RUN, RUN, RUN],
            requests: vec![1000, 1000, 2000, 2000],
            levels: vec![200, 100, 100],
            target: 300,
            expected: Ok((2, 6, 200)),
        },
        Case {
            name: "NoPods",
            current: 0,
            pods: vec![],
            requests: vec![],
            levels: vec![100],
            target: 50,
            expected: Err("no pods returned by selector"),
        },
        Case {
            name: "AllUnready",
            current: 2,
            pods: n(UNREADY, 2),
            requests: vec![1000; 2],
            levels: vec![100, 100],
            target: 50,
            expected: Err("did not receive metrics for targeted pods"),
        },
    ];
    for case in &cases {
        run_resource(case);
    }
}

/// (current, pods, levels, target, expected replicas, expected usage)
type PlainCase = (i32, Vec<P>, Vec<i64>, i64, i32, i64);

#[test]
fn plain_metric_table() {
    let cases: &[PlainCase] = &[
        // TestReplicaCalcScaleUpCM: qps 20/10/30, target 15.
        (3, n(RUN, 3), vec![20000, 10000, 30000], 15000, 4, 20000),
        // TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale: not cpu, so readiness
        // does not matter beyond Pending.
        (
            3,
            vec![COOL, COOL, HOT_UNREADY],
            vec![50000, 10000, 30000],
            15000,
            6,
            30000,
        ),
        // TestReplicaCalcScaleDownCM.
        (
            5,
            n(RUN, 5),
            vec![12000, 12000, 12000, 12000, 12000],
            20000,
            3,
            12000,
        ),
        // TestReplicaCalcToleranceCM.
        (3, n(RUN, 3), vec![20000, 21000, 21000], 20000, 3, 20666),
        // TestPlainMetricReplicaCalcMissingMetricsNoChangeEq.
        (5, n(RUN, 5), vec![20000, 19000, 21000], 20000, 5, 20000),
    ];
    for (i, (current, pods, levels, target, replicas, usage)) in cases.iter().enumerate() {
        let pods: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, &p)| pod(i, p, None))
            .collect();
        let got = calculator()
            .plain_metric_replicas(*current, *target, "", &pods, samples(levels), NOW)
            .unwrap();
        assert_eq!((got.replicas, got.raw), (*replicas, *usage), "case {i}");
    }
}

#[test]
fn object_and_external_targets() {
    let c = calculator();
    // TestReplicaCalcScaleUpCMObject: 20000 against 15000 with 3 ready pods.
    assert_eq!(
        c.usage_ratio_replicas(3, 20000.0 / 15000.0, || Ok(3)),
        Ok(4)
    );
    // TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods: 2 of 3 ready.
    assert_eq!(c.usage_ratio_replicas(3, 50.0 / 10.0, || Ok(1)), Ok(5));
    // Within tolerance: the ready count is not even asked.
    assert_eq!(c.usage_ratio_replicas(3, 1.05, || Err("x".into())), Ok(3));
    assert_eq!(c.usage_ratio_replicas(0, 2.5, || Err("x".into())), Ok(3));
    assert!(c
        .usage_ratio_replicas(3, 2.0, || Err("boom".into()))
        .unwrap_err()
        .starts_with("unable to calculate ready pods"));
    // TestReplicaCalcScaleUpCMPerPodObject: 20000 over 3 replicas, target 5000 each.
    assert_eq!(c.per_pod_replicas(3, 20000, 5000), (4, 6667));
    // TestReplicaCalcTolerancePerPodCMObject: 20166 over 4, target 5000.
    assert_eq!(c.per_pod_replicas(4, 20166, 5000), (4, 5042));
    // TestReplicaCalcScaleDownPerPodCMExternal: 8600 over 5, target 3000.
    assert_eq!(c.per_pod_replicas(5, 8600, 2867), (3, 1720));
}

#[test]
fn cpu_readiness_grouping() {
    let now = NOW;
    let pod_with = |start_offset: i64, ready: &str, transition_offset: i64| -> Arc<Pod> {
        let ts = |o: i64| {
            jiff::Timestamp::from_millisecond(now + o)
                .unwrap()
                .to_string()
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "bentham"},
                "status": {"phase": "Running", "startTime": ts(start_offset),
                    "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": ts(transition_offset)}]},
            }))
            .unwrap(),
        )
    };
    let metric = |timestamp_offset: i64, window: i64| -> PodMetrics {
        [(
            "bentham".to_string(),
            PodMetric {
                timestamp_ms: now + timestamp_offset,
                window_ms: window,
                value: 1,
            },
        )]
        .into()
    };
    let group = |pod: Arc<Pod>, metrics: PodMetrics, resource: &str| {
        group_pods(
            &[pod],
            &metrics,
            resource,
            Duration::from_secs(300),
            Duration::from_secs(30),
            now,
        )
    };
    // Upstream TestGroupPods: ready within the initialization period, the sample
    // taken after readiness plus its window.
    let g = group(pod_with(-60_000, "True", -30_000), metric(0, 30_000), "cpu");
    assert_eq!(g.ready, 1);
    // The sample's window reaches back before readiness: unready.
    let g = group(pod_with(-60_000, "True", -30_000), metric(0, 60_000), "cpu");
    assert_eq!(g.unready.len(), 1);
    // After the initialization period, a pod that went unready later counts.
    let g = group(
        pod_with(-10 * MIN, "False", -3 * MIN),
        metric(0, MIN),
        "cpu",
    );
    assert_eq!(g.ready, 1);
    // Never ready within the initial delay: unready.
    let g = group(
        pod_with(-10 * MIN, "False", -9 * MIN - 54_000),
        metric(0, MIN),
        "cpu",
    );
    assert_eq!(g.unready.len(), 1);
    // Readiness does not matter for other resources.
    let g = group(
        pod_with(-60_000, "False", -30_000),
        metric(0, 60_000),
        "memory",
    );
    assert_eq!(g.ready, 1);
    // No sample: missing.
    let g = group(pod_with(-60_000, "True", -30_000), PodMetrics::new(), "cpu");
    assert_eq!(g.missing.len(), 1);
}

#[test]
fn requests_count_sidecars_and_one_container() {
    let pod: Arc<Pod> = Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                                   {"name": "init"}],
            },
        }))
        .unwrap(),
    );
    let pods = [pod];
    assert_eq!(pod_requests(&pods, "", "cpu").unwrap()["p"], 1150);
    assert_eq!(pod_requests(&pods, "b", "cpu").unwrap()["p"], 1000);
    assert_eq!(
        pod_requests(&pods, "", "memory").unwrap_err(),
        "missing request for memory in container a of Pod p"
    );
}
