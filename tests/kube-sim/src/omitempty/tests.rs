//! The omitempty rules against the recorded definitions and the served kinds.

use super::*;
use serde_json::json;

#[test]
fn every_served_builtin_kind_with_metadata_has_rules() {
    for (group, version, kind) in [
        ("", "v1", "Pod"),
        ("", "v1", "Service"),
        ("", "v1", "ConfigMap"),
        ("", "v1", "Secret"),
        ("", "v1", "Node"),
        ("", "v1", "Namespace"),
        ("", "v1", "PersistentVolume"),
        ("", "v1", "PersistentVolumeClaim"),
        ("", "v1", "ServiceAccount"),
        ("", "v1", "Endpoints"),
        ("", "v1", "Event"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "ReplicaSet"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "DaemonSet"),
        ("apps", "v1", "ControllerRevision"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("storage.k8s.io", "v1", "StorageClass"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("certificates.k8s.io", "v1", "CertificateSigningRequest"),
        ("events.k8s.io", "v1", "Event"),
    ] {
        assert!(
            root(group, version, kind).is_some(),
            "{group}/{version} {kind}"
        );
    }
    assert!(root("example.com", "v1", "Widget").is_none());
}

#[test]
fn zero_values_go_as_go_drops_them() {
    // (kind, object sent, object kept)
    let cases = [
        (
            ("apps", "v1", "Deployment"),
            json!({"spec": {"replicas": 0, "paused": false, "minReadySeconds": 0,
                "revisionHistoryLimit": null, "selector": {"matchLabels": {}},
                "strategy": {"type": ""},
                "template": {"metadata": {"labels": {"a": ""}, "annotations": {}},
                    "spec": {"containers": [{"name": "c", "image": "i", "args": [],
                        "ports": [{"containerPort": 0, "hostPort": 0, "protocol": "",
                            "name": ""}],
                        "stdin": false, "resources": {}}],
                        "hostNetwork": false, "nodeSelector": {},
                        "terminationGracePeriodSeconds": 0}}}}),
            json!({"spec": {"replicas": 0, "selector": {},
                "strategy": {},
                "template": {"metadata": {"labels": {"a": ""}},
                    "spec": {"containers": [{"name": "c", "image": "i",
                        "ports": [{"containerPort": 0}], "resources": {}}],
                        "terminationGracePeriodSeconds": 0}}}}),
        ),
        (
            ("", "v1", "ConfigMap"),
            json!({"metadata": {"name": "c", "labels": {}, "generateName": "",
                "finalizers": []}, "data": {"k": ""}, "binaryData": {}, "immutable": false}),
            json!({"metadata": {"name": "c"}, "data": {"k": ""}, "immutable": false}),
        ),
        (
            ("", "v1", "Service"),
            json!({"spec": {"ports": [{"port": 80, "nodePort": 0, "name": "",
                "targetPort": 0}], "clusterIP": "", "externalIPs": [],
                "publishNotReadyAddresses": false, "allocateLoadBalancerNodePorts": false}}),
            json!({"spec": {"ports": [{"port": 80, "targetPort": 0}],
                "allocateLoadBalancerNodePorts": false}}),
        ),
        (
            ("batch", "v1", "Job"),
            json!({"spec": {"parallelism": 0, "suspend": false, "completionMode": "",
                "template": {"spec": {"containers": [], "restartPolicy": ""}}}}),
            json!({"spec": {"parallelism": 0, "suspend": false, "completionMode": "",
                "template": {"spec": {"containers": []}}}}),
        ),
        (
            ("coordination.k8s.io", "v1", "Lease"),
            json!({"spec": {"holderIdentity": "", "leaseDurationSeconds": 0,
                "leaseTransitions": 0}}),
            json!({"spec": {"holderIdentity": "", "leaseDurationSeconds": 0,
                "leaseTransitions": 0}}),
        ),
        (
            ("example.com", "v1", "Widget"),
            json!({"spec": {"paused": false, "items": []}}),
            json!({"spec": {"paused": false, "items": []}}),
        ),
    ];
    for ((group, version, kind), mut sent, kept) in cases {
        prune(group, version, kind, &mut sent);
        assert_eq!(sent, kept, "{kind}");
    }
}

#[test]
fn pruning_twice_changes_nothing_more() {
    let mut pod = json!({"metadata": {"name": "p", "labels": {}},
        "spec": {"containers": [{"name": "c", "env": [{"name": "E", "value": ""}]}]}});
    prune("", "v1", "Pod", &mut pod);
    let once = pod.clone();
    prune("", "v1", "Pod", &mut pod);
    assert_eq!(pod, once);
    assert_eq!(
        once,
        json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "env": [{"name": "E"}]}]}})
    );
}

#[test]
fn decoding_keeps_empty_lists_and_maps() {
    let mut cm = json!({"metadata": {"name": "c", "labels": {}, "namespace": ""},
        "data": {}, "immutable": null});
    prune_decoded("", "v1", "ConfigMap", &mut cm);
    assert_eq!(
        cm,
        json!({"metadata": {"name": "c", "labels": {}}, "data": {}})
    );
    prune("", "v1", "ConfigMap", &mut cm);
    assert_eq!(cm, json!({"metadata": {"name": "c"}}));
}

/// A definition, one of its fields, and a zero value of the field.
type MeaningfulZero = (&'static str, &'static str, fn() -> Value);

/// Zeros that mean something (a pointer's or a field without `omitempty`), by definition:
/// each must survive decoding and encoding wherever a served kind holds its definition.
const MEANINGFUL_ZEROS: &[MeaningfulZero] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "deletionGracePeriodSeconds",
        || json!(0),
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        "controller",
        || json!(false),
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        "blockOwnerDeletion",
        || json!(false),
    ),
    ("io.k8s.api.apps.v1.DeploymentSpec", "replicas", || json!(0)),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "revisionHistoryLimit",
        || json!(0),
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "progressDeadlineSeconds",
        || json!(0),
    ),
    ("io.k8s.api.apps.v1.ReplicaSetSpec", "replicas", || json!(0)),
    ("io.k8s.api.apps.v1.StatefulSetSpec", "replicas", || {
        json!(0)
    }),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        "revisionHistoryLimit",
        || json!(0),
    ),
    ("io.k8s.api.apps.v1.StatefulSetOrdinals", "start", || {
        json!(0)
    }),
    (
        "io.k8s.api.apps.v1.DaemonSetSpec",
        "revisionHistoryLimit",
        || json!(0),
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateDeployment",
        "maxUnavailable",
        || json!(0),
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateDeployment",
        "maxSurge",
        || json!(0),
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateDaemonSet",
        "maxSurge",
        || json!(0),
    ),
    (
        "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy",
        "partition",
        || json!(0),
    ),
    ("io.k8s.api.batch.v1.JobSpec", "parallelism", || json!(0)),
    ("io.k8s.api.batch.v1.JobSpec", "completions", || json!(0)),
    ("io.k8s.api.batch.v1.JobSpec", "backoffLimit", || json!(0)),
    ("io.k8s.api.batch.v1.JobSpec", "suspend", || json!(false)),
    (
        "io.k8s.api.batch.v1.JobSpec",
        "ttlSecondsAfterFinished",
        || json!(0),
    ),
    ("io.k8s.api.batch.v1.JobSpec", "manualSelector", || {
        json!(false)
    }),
    ("io.k8s.api.batch.v1.JobStatus", "ready", || json!(0)),
    ("io.k8s.api.batch.v1.JobStatus", "terminating", || json!(0)),
    ("io.k8s.api.batch.v1.CronJobSpec", "suspend", || {
        json!(false)
    }),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        "startingDeadlineSeconds",
        || json!(0),
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        "successfulJobsHistoryLimit",
        || json!(0),
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        "failedJobsHistoryLimit",
        || json!(0),
    ),
    (
        "io.k8s.api.coordination.v1.LeaseSpec",
        "holderIdentity",
        || json!(""),
    ),
    (
        "io.k8s.api.coordination.v1.LeaseSpec",
        "leaseDurationSeconds",
        || json!(0),
    ),
    (
        "io.k8s.api.coordination.v1.LeaseSpec",
        "leaseTransitions",
        || json!(0),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "terminationGracePeriodSeconds",
        || json!(0),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "activeDeadlineSeconds",
        || json!(0),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "automountServiceAccountToken",
        || json!(false),
    ),
    ("io.k8s.api.core.v1.PodSpec", "enableServiceLinks", || {
        json!(false)
    }),
    ("io.k8s.api.core.v1.PodSpec", "priority", || json!(0)),
    ("io.k8s.api.core.v1.PodSecurityContext", "runAsUser", || {
        json!(0)
    }),
    ("io.k8s.api.core.v1.PodSecurityContext", "fsGroup", || {
        json!(0)
    }),
    ("io.k8s.api.core.v1.SecurityContext", "runAsUser", || {
        json!(0)
    }),
    ("io.k8s.api.core.v1.SecurityContext", "privileged", || {
        json!(false)
    }),
    (
        "io.k8s.api.core.v1.SecurityContext",
        "allowPrivilegeEscalation",
        || json!(false),
    ),
    (
        "io.k8s.api.core.v1.SecurityContext",
        "readOnlyRootFilesystem",
        || json!(false),
    ),
    ("io.k8s.api.core.v1.Toleration", "tolerationSeconds", || {
        json!(0)
    }),
    (
        "io.k8s.api.core.v1.Probe",
        "terminationGracePeriodSeconds",
        || json!(0),
    ),
    (
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        "defaultMode",
        || json!(0),
    ),
    ("io.k8s.api.core.v1.SecretVolumeSource", "optional", || {
        json!(false)
    }),
    ("io.k8s.api.core.v1.KeyToPath", "mode", || json!(0)),
    ("io.k8s.api.core.v1.ConfigMap", "immutable", || json!(false)),
    ("io.k8s.api.core.v1.Secret", "immutable", || json!(false)),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "automountServiceAccountToken",
        || json!(false),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "allocateLoadBalancerNodePorts",
        || json!(false),
    ),
    ("io.k8s.api.core.v1.ServicePort", "targetPort", || json!(0)),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        "storageClassName",
        || json!(""),
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerSpec",
        "replicas",
        || json!(0),
    ),
    ("io.k8s.api.core.v1.Event", "reportingComponent", || {
        json!("")
    }),
    (
        "io.k8s.api.discovery.v1.EndpointConditions",
        "ready",
        || json!(false),
    ),
    (
        "io.k8s.api.discovery.v1.EndpointConditions",
        "serving",
        || json!(false),
    ),
    (
        "io.k8s.api.discovery.v1.EndpointConditions",
        "terminating",
        || json!(false),
    ),
    ("io.k8s.api.discovery.v1.EndpointPort", "port", || json!(0)),
    ("io.k8s.api.discovery.v1.EndpointSlice", "ports", || {
        json!([])
    }),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "minAvailable",
        || json!(0),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "maxUnavailable",
        || json!(0),
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec",
        "minReplicas",
        || json!(0),
    ),
    (
        "io.k8s.api.autoscaling.v2.HPAScalingRules",
        "stabilizationWindowSeconds",
        || json!(0),
    ),
    ("io.k8s.api.rbac.v1.ClusterRole", "rules", || json!([])),
    (
        "io.k8s.api.storage.v1.StorageClass",
        "allowVolumeExpansion",
        || json!(false),
    ),
    (
        "io.k8s.api.storage.v1.CSIDriverSpec",
        "attachRequired",
        || json!(false),
    ),
    ("io.k8s.api.storage.v1.VolumeNodeResources", "count", || {
        json!(0)
    }),
];

/// Every definition reachable from the served kind `root`, through the rules.
fn reachable(root: &str, seen: &mut Vec<String>) {
    if seen.iter().any(|s| s == root) {
        return;
    }
    seen.push(root.to_string());
    for rule in rules().get(root).into_iter().flatten() {
        if let Holds::Objects(held) | Holds::MapOf(held) = &rule.holds {
            reachable(held, seen);
        }
    }
}

#[test]
fn meaningful_zeros_survive_in_every_served_kind() {
    let defs = rkcm_openapi::builtin();
    let mut met = vec![false; MEANINGFUL_ZEROS.len()];
    let mut kinds = 0;
    for (group, version, kind, name) in defs.gvks() {
        if !served(defs, name) {
            continue;
        }
        kinds += 1;
        assert_eq!(
            root(group, version, kind),
            Some(name),
            "{group}/{version} {kind}"
        );
        let mut seen = Vec::new();
        reachable(name, &mut seen);
        for (i, (definition, field, zero)) in MEANINGFUL_ZEROS.iter().enumerate() {
            if !seen.iter().any(|s| s == definition) {
                continue;
            }
            met[i] = true;
            for stage in [Stage::Decode, Stage::Encode] {
                let mut obj = json!({ *field: zero() });
                prune_type(definition, &mut obj, stage);
                assert_eq!(
                    obj,
                    json!({ *field: zero() }),
                    "{kind}: {definition}.{field}"
                );
            }
        }
    }
    assert!(kinds > 40, "{kinds} served kinds");
    for (i, (definition, field, _)) in MEANINGFUL_ZEROS.iter().enumerate() {
        assert!(met[i], "no served kind holds {definition}.{field}");
    }
}

#[test]
fn the_hand_tables_name_optional_fields_of_served_definitions() {
    let defs = rkcm_openapi::builtin();
    for (table, label) in [(POINTERS, "pointer"), (NOT_OMITEMPTY, "not omitempty")] {
        for (definition, fields) in table {
            assert!(
                rules().contains_key(*definition),
                "{label}: {definition} is not served"
            );
            let schema = defs.get(definition).cloned().unwrap_or_default();
            for field in *fields {
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{label}: {definition}.{field}"
                );
                let required = schema["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|f| f == field));
                assert!(!required, "{label}: {definition}.{field} is required");
            }
        }
    }
}

#[test]
fn structs_are_values_with_a_default_and_pointers_without() {
    let rule = |definition: &str, field: &str| {
        rules()[definition]
            .iter()
            .find(|r| r.name == field)
            .map(|r| (r.drop, r.holds.clone()))
    };
    let spec = "io.k8s.api.apps.v1.DeploymentSpec";
    let strategy = Holds::Objects("io.k8s.api.apps.v1.DeploymentStrategy".into());
    assert_eq!(rule(spec, "strategy"), Some((Drop::Keep, strategy)));
    let rolling = Holds::Objects("io.k8s.api.apps.v1.RollingUpdateDeployment".into());
    assert_eq!(
        rule("io.k8s.api.apps.v1.DeploymentStrategy", "rollingUpdate"),
        Some((Drop::Null, rolling))
    );
    assert_eq!(rule(spec, "paused"), Some((Drop::Zero, Holds::Nothing)));
    assert_eq!(rule(spec, "replicas"), Some((Drop::Null, Holds::Nothing)));
    let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    // A value metav1.Time is kept (Go encodes its zero as null); a pointer loses null.
    assert_eq!(rule(meta, "creationTimestamp"), None);
    assert_eq!(
        rule(meta, "deletionTimestamp"),
        Some((Drop::Null, Holds::Nothing))
    );
    assert_eq!(rule(meta, "labels"), Some((Drop::Zero, Holds::Nothing)));
}
