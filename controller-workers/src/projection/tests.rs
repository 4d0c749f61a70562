use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use rkcm_informer_server::projection::FieldPaths;
use serde_json::Value;

use super::*;
use crate::registry::CONTROLLERS;

fn strings(paths: &[&str]) -> Vec<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

#[test]
fn required_fields_along_each_path_are_added() {
    let cases: &[(&[&str], &[&str])] = &[
        // PodSpec requires containers, a Container its name; PodStatus nothing.
        (
            &["spec.nodeName", "status.phase"],
            &["spec.containers.name", "spec.nodeName", "status.phase"],
        ),
        // Each condition keeps its type and status.
        (
            &["status.conditions.lastTransitionTime"],
            &[
                "status.conditions.lastTransitionTime",
                "status.conditions.status",
                "status.conditions.type",
            ],
        ),
        // A container port requires containerPort; volumes require a name.
        (
            &[
                "spec.containers.ports.name",
                "spec.volumes.persistentVolumeClaim",
            ],
            &[
                "spec.containers.name",
                "spec.containers.ports.containerPort",
                "spec.containers.ports.name",
                "spec.volumes.name",
                "spec.volumes.persistentVolumeClaim",
            ],
        ),
        // A subtree kept whole needs nothing more inside it.
        (&["spec"], &["spec"]),
        (&["status"], &["status"]),
        // Tolerations require nothing; the list's parent does.
        (
            &["spec.tolerations"],
            &["spec.containers.name", "spec.tolerations"],
        ),
    ];
    for (declared, expected) in cases {
        assert_eq!(
            with_required(rkcm_openapi::all(), "", "v1", "Pod", &strings(declared)).unwrap(),
            strings(expected),
            "{declared:?}"
        );
    }
    // Nested required objects: a ReplicaSet's spec requires a selector (nothing required
    // inside it, so kept whole).
    assert_eq!(
        with_required(
            rkcm_openapi::all(),
            "apps",
            "v1",
            "ReplicaSet",
            &strings(&["status.replicas"])
        )
        .unwrap(),
        strings(&["status.replicas"])
    );
    assert_eq!(
        with_required(
            rkcm_openapi::all(),
            "apps",
            "v1",
            "ReplicaSet",
            &strings(&["spec.replicas"])
        )
        .unwrap(),
        strings(&["spec.replicas", "spec.selector"])
    );
    // A kind without a definition is streamed whole.
    assert_eq!(
        with_required(
            rkcm_openapi::all(),
            "example.com",
            "v1",
            "Widget",
            &strings(&["spec"])
        ),
        None
    );
}

#[test]
fn the_union_is_whole_when_one_reader_reads_whole() {
    const PODS_AND_NODES: &[&str] = &["v1/pods", "v1/nodes"];
    const PODS: &[&str] = &["v1/pods"];
    let a: FieldList = &[("v1/pods", &["spec.nodeName"]), ("v1/nodes", &["spec"])];
    let b: FieldList = &[("v1/pods", &["status.phase", "spec.nodeName"])];
    let whole: FieldList = &[];
    let set = |paths: &[&'static str]| Some(paths.iter().copied().collect::<BTreeSet<_>>());

    let union_ab = union([(PODS_AND_NODES, a), (PODS, b)]);
    assert_eq!(
        union_ab,
        BTreeMap::from([
            ("v1/nodes", set(&["spec"])),
            ("v1/pods", set(&["spec.nodeName", "status.phase"])),
        ])
    );
    // b reads nodes too, undeclared: whole, whichever order.
    for readers in [
        [(PODS_AND_NODES, a), (PODS_AND_NODES, b)],
        [(PODS_AND_NODES, b), (PODS_AND_NODES, a)],
    ] {
        let union = union(readers);
        assert_eq!(union["v1/nodes"], None);
        assert_eq!(union["v1/pods"], set(&["spec.nodeName", "status.phase"]));
    }
    let union = union([(PODS, a), (PODS, whole)]);
    assert_eq!(union["v1/pods"], None);
}

/// A pod with most of what a running pod carries.
fn sample_pod() -> Value {
    serde_json::from_str(
        r#"{
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u-0", "controller": true}],
            "finalizers": ["batch.kubernetes.io/job-tracking"]
        },
        "spec": {
            "nodeName": "node-1", "hostname": "web-0", "subdomain": "web",
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30, "activeDeadlineSeconds": 60,
            "priority": 0, "priorityClassName": "low", "preemptionPolicy": "PreemptLowerPriority",
            "serviceAccountName": "default", "hostNetwork": false, "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "overhead": {"cpu": "10m"},
            "readinessGates": [{"conditionType": "example.com/ready"}],
            "resourceClaims": [{"name": "gpu", "source": {"resourceClaimTemplateName": "gpu"}}],
            "schedulingGates": [{"name": "wait"}],
            "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}},
                "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "s2"}}]}],
            "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m"}, "claims": [{"name": "gpu"}]},
                "env": [{"name": "B", "value": "1"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "readinessProbe": {"httpGet": {"port": 80}}}],
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}, {"secret": {"name": "s3"}}]}},
                {"name": "cfg", "secret": {"secretName": "s4"}},
                {"name": "csi", "csi": {"driver": "csi.example.com", "volumeAttributes": {"a": "b"}}}
            ]
        },
        "status": {
            "phase": "Running", "reason": "Evicted", "message": "m", "qosClass": "Burstable",
            "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}],
            "startTime": "2024-01-01T00:00:00Z", "nominatedNodeName": "node-2",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:05Z"},
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
            ],
            "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "", "ready": true, "restartCount": 1, "started": true, "state": {"running": {"startedAt": "2024-01-01T00:00:01Z"}}}],
            "containerStatuses": [{"name": "web", "image": "nginx", "imageID": "", "ready": true, "restartCount": 2,
                "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                "lastState": {"terminated": {"exitCode": 137}}}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-0-gpu"}]
        }
    }"#,
    )
    .expect("the sample pod is JSON")
}

/// Decodes an object as its typed kind.
type Decode = fn(Value) -> Result<(), serde_json::Error>;

/// A full example object of each resource a controller declares fields of.
fn sample(resource: &str) -> (Value, Decode) {
    match resource {
        "v1/pods" => (sample_pod(), |v| serde_json::from_value::<Pod>(v).map(drop)),
        other => panic!("no sample object of {other}: add one to decode its projection"),
    }
}

/// Every controller's declared paths parse as the informer-server parses them, and a full
/// example object projected on them (with the fields its decode requires) still decodes.
#[test]
fn every_declared_projection_parses_and_decodes() {
    let mut checked = 0;
    for descriptor in CONTROLLERS {
        let implementation = &descriptor.implementation;
        for (resource, paths) in implementation.fields {
            assert!(
                implementation.resources.contains(resource),
                "{}: fields of {resource}, which it does not read",
                descriptor.name
            );
            let (object, decode) = sample(resource);
            let gvk = (
                object["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                object["kind"].as_str().unwrap_or_default().to_string(),
            );
            let (group, version) = gvk.0.rsplit_once('/').unwrap_or(("", &gvk.0));
            let requested =
                with_required(rkcm_openapi::all(), group, version, &gvk.1, &strings(paths))
                    .expect("a recorded definition");
            let parsed = FieldPaths::parse(&requested)
                .unwrap_or_else(|e| panic!("{}: {resource}: {e}", descriptor.name))
                .expect("some paths");
            let mut projected = object.clone();
            parsed.apply(&mut projected);
            assert_ne!(
                projected, object,
                "{}: {resource} is projected",
                descriptor.name
            );
            if let Err(error) = decode(projected.clone()) {
                panic!(
                    "{}: {resource} projected on {requested:?} does not decode: {error}\n{projected:#}",
                    descriptor.name
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// The default group (every default controller) streams projected pods: no controller
/// that reads pods reads them whole.
#[test]
fn the_default_group_streams_projected_pods() {
    let selected = crate::registry::select(&["*".to_string()]).expect("a selection");
    let projections = crate::registry::projections(&selected);
    let pods = projections.get("v1/pods").expect("pods are projected");
    let requested =
        with_required(rkcm_openapi::all(), "", "v1", "Pod", pods).expect("Pod is defined");
    assert!(requested.contains(&"status".to_string()), "{requested:?}");
    assert!(
        !requested
            .iter()
            .any(|p| p == "spec" || p == "spec.containers"),
        "{requested:?}"
    );
}
