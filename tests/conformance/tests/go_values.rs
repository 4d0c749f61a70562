//! What the API server's answers show of its Go structs, pinned against kube-apiserver
//! v1.29's validation code and JSON encoding:
//! - the field path each validation error names (`spec.containers[1].name`, `data[key]`,
//!   `spec.template.labels` without `metadata`, `metadata.ownerReferences.uid` without an
//!   index) and the order of the causes;
//! - bad values printed as Go's `%#v` prints the internal struct (`v1.LabelSelector{...}`,
//!   `intstr.IntOrString{...}`, nested pointers as an address, which these tests mask since a
//!   real server prints wherever the value lived);
//! - the zero values an object loses on the way through the server's Go types (`omitempty`
//!   on non-pointer fields) and the ones it keeps (pointers, fields without `omitempty`).

use http_body_util::BodyExt;
use regex::Regex;
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};

/// The apiVersion and kind of the objects of a collection these tests write.
fn type_of(collection: &str) -> (&'static str, &'static str) {
    let resource = collection.rsplit('/').next().unwrap_or_default();
    match resource {
        "configmaps" => ("v1", "ConfigMap"),
        "secrets" => ("v1", "Secret"),
        "pods" => ("v1", "Pod"),
        "services" => ("v1", "Service"),
        "namespaces" => ("v1", "Namespace"),
        "persistentvolumeclaims" => ("v1", "PersistentVolumeClaim"),
        "persistentvolumes" => ("v1", "PersistentVolume"),
        "deployments" => ("apps/v1", "Deployment"),
        "statefulsets" => ("apps/v1", "StatefulSet"),
        "jobs" => ("batch/v1", "Job"),
        "cronjobs" => ("batch/v1", "CronJob"),
        "poddisruptionbudgets" => ("policy/v1", "PodDisruptionBudget"),
        "leases" => ("coordination.k8s.io/v1", "Lease"),
        other => panic!("no type for {other}"),
    }
}

/// Sends `method path` with a JSON body and returns the status code and the JSON answer; a
/// POST's body gets the collection's apiVersion and kind.
async fn send(c: &TestCluster, method: http::Method, path: &str, body: &Value) -> (u16, Value) {
    let mut body = body.clone();
    if method == http::Method::POST {
        let (api_version, kind) = type_of(path);
        body["apiVersion"] = json!(api_version);
        body["kind"] = json!(kind);
    }
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = c.client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Pointer addresses differ between runs and servers: all read as one.
fn mask(s: &str) -> String {
    Regex::new("0xc[0-9a-f]{6,}")
        .unwrap()
        .replace_all(s, "0xc000000000")
        .into_owned()
}

/// The 422 answer expected for `kind "name"` with these causes (field, reason, message).
fn invalid(qualified_kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> Value {
    let parts: Vec<String> = causes
        .iter()
        .map(|(field, _, msg)| format!("{field}: {msg}"))
        .collect();
    let aggregate = if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    };
    json!({
        "message": format!("{qualified_kind} \"{name}\" is invalid: {aggregate}"),
        "causes": causes.iter().map(|(field, reason, message)| json!({
            "reason": reason, "message": message, "field": field,
        })).collect::<Vec<_>>(),
    })
}

/// The parts of a Status compared: its message and causes (addresses masked).
fn seen(code: u16, status: &Value) -> Value {
    assert_eq!(code, 422, "{status}");
    let mut causes = status["details"]["causes"].clone();
    for c in causes.as_array_mut().into_iter().flatten() {
        if let Some(m) = c.get("message").and_then(Value::as_str).map(mask) {
            c["message"] = json!(m);
        }
    }
    json!({
        "message": mask(status["message"].as_str().unwrap_or_default()),
        "causes": causes,
    })
}

const LABEL_VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_RULE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_errors_name_the_paths_upstream_names() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("paths").await.unwrap();
    let core = format!("/api/v1/namespaces/{ns}");
    let apps = format!("/apis/apps/v1/namespaces/{ns}");
    let cases: Vec<(String, Value, Value)> = vec![
        (
            format!("{core}/configmaps"),
            json!({"metadata": {"name": "cm", "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": ""}]},
                "data": {"bad key": "x"}}),
            invalid("ConfigMap", "cm", &[
                ("metadata.ownerReferences.uid", "FieldValueInvalid", "Invalid value: \"\": uid must not be empty"),
                ("data[bad key]", "FieldValueInvalid", &format!("Invalid value: \"bad key\": {CONFIG_KEY_RULE}")),
            ]),
        ),
        (
            format!("{core}/secrets"),
            json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {}}),
            invalid("Secret", "tls", &[
                ("data[tls.crt]", "FieldValueRequired", "Required value"),
                ("data[tls.key]", "FieldValueRequired", "Required value"),
            ]),
        ),
        (
            format!("{core}/pods"),
            json!({"metadata": {"name": "pod"}, "spec": {"containers": [
                {"name": "a", "image": "i", "ports": [{"containerPort": 0}], "env": [{"name": ""}]},
                {"name": "a", "image": "i"}]}}),
            invalid("Pod", "pod", &[
                ("spec.containers[0].ports[0].containerPort", "FieldValueRequired", "Required value"),
                ("spec.containers[0].env[0].name", "FieldValueRequired", "Required value"),
                ("spec.containers[1].name", "FieldValueDuplicate", "Duplicate value: \"a\""),
            ]),
        ),
        (
            format!("{apps}/deployments"),
            json!({"metadata": {"name": "web"}, "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}},
                "template": {"metadata": {"labels": {"app": "web", "tier": "-x-"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            invalid("Deployment.apps", "web", &[
                ("spec.template.labels", "FieldValueInvalid", &format!("Invalid value: \"-x-\": {LABEL_VALUE_RULE}")),
                ("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid", "Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"),
            ]),
        ),
        (
            format!("{core}/persistentvolumeclaims"),
            json!({"metadata": {"name": "claim"}, "spec": {
                "accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "resources": {}}}),
            invalid("PersistentVolumeClaim", "claim", &[
                ("spec.accessModes", "FieldValueForbidden", "Forbidden: may not use ReadWriteOncePod with other access modes"),
                ("spec.resources[storage]", "FieldValueRequired", "Required value"),
            ]),
        ),
        (
            format!("/apis/batch/v1/namespaces/{ns}/cronjobs"),
            json!({"metadata": {"name": "cron"}, "spec": {"schedule": "* * * * *",
                "timeZone": "Local",
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i"}]}}}}}}),
            invalid("CronJob.batch", "cron", &[
                ("spec.timeZone", "FieldValueInvalid", "Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
            ]),
        ),
    ];
    for (path, body, expected) in cases {
        let (code, status) = send(&c, http::Method::POST, &path, &body).await;
        assert_eq!(seen(code, &status), expected, "POST {path}");
    }
    // Standard finalizers need no domain in a namespace's spec either.
    let (code, answer) = send(
        &c,
        http::Method::POST,
        "/api/v1/namespaces",
        &json!({"metadata": {"generateName": "fin-"}, "spec": {"finalizers": ["kubernetes", "orphan"]}}),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    if let Some(name) = answer["metadata"]["name"].as_str() {
        let _ = send(
            &c,
            http::Method::DELETE,
            &format!("/api/v1/namespaces/{name}"),
            &json!({}),
        )
        .await;
    }
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_print_as_go_prints_the_internal_structs() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("govalues").await.unwrap();
    let core = format!("/api/v1/namespaces/{ns}");
    let apps = format!("/apis/apps/v1/namespaces/{ns}");
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let cases: Vec<(String, Value, Value)> = vec![
        (
            format!("{core}/pods"),
            json!({"metadata": {"name": "tol"}, "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "tolerations": [{"key": "k", "operator": "Exists", "value": "v",
                    "effect": "NoExecute", "tolerationSeconds": 5}]}}),
            invalid("Pod", "tol", &[
                ("spec.tolerations[0].operator", "FieldValueInvalid", "Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"NoExecute\", TolerationSeconds:(*int64)(0xc000000000)}: value must be empty when `operator` is 'Exists'"),
            ]),
        ),
        (
            format!("{apps}/deployments"),
            json!({"metadata": {"name": "empty"}, "spec": {"selector": {},
                "strategy": {"type": "Bogus"}, "template": template}}),
            invalid("Deployment.apps", "empty", &[
                ("spec.selector", "FieldValueInvalid", "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"),
                ("spec.strategy", "FieldValueNotSupported", "Unsupported value: apps.DeploymentStrategy{Type:\"Bogus\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\""),
            ]),
        ),
        (
            format!("{apps}/statefulsets"),
            json!({"metadata": {"name": "sts"}, "spec": {
                "selector": {"matchLabels": {"app": "web"}}, "serviceName": "sts",
                "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}},
                "template": template}}),
            invalid("StatefulSet.apps", "sts", &[
                ("spec.updateStrategy.rollingUpdate", "FieldValueInvalid", "Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"),
            ]),
        ),
        (
            format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
            json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1,
                "maxUnavailable": "120%", "selector": {"matchLabels": {"app": "web"}}}}),
            invalid("PodDisruptionBudget.policy", "pdb", &[
                ("spec", "FieldValueInvalid", "Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000000000), Selector:(*v1.LabelSelector)(0xc000000000), MaxUnavailable:(*intstr.IntOrString)(0xc000000000), UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: minAvailable and maxUnavailable cannot be both set"),
                ("spec.maxUnavailable", "FieldValueInvalid", "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"120%\"}: must not be greater than 100%"),
            ]),
        ),
        (
            // A resource list prints its quantities' unexported fields; the defaulting
            // rounds 1500u up to milli-units (2m) and forgets its text.
            "/api/v1/persistentvolumes".to_string(),
            json!({"metadata": {"name": "rkcm-govalues-pv"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"},
                "capacity": {"storage": "1Gi", "cpu": "1500u"}}}),
            invalid("PersistentVolume", "rkcm-govalues-pv", &[
                ("spec.capacity", "FieldValueNotSupported", "Unsupported value: core.ResourceList{\"cpu\":resource.Quantity{i:resource.int64Amount{value:2, scale:-3}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:\"\", Format:\"DecimalSI\"}, \"storage\":resource.Quantity{i:resource.int64Amount{value:1073741824, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:\"1Gi\", Format:\"BinarySI\"}}: supported values: \"storage\""),
            ]),
        ),
    ];
    for (path, body, expected) in cases {
        let (code, status) = send(&c, http::Method::POST, &path, &body).await;
        assert_eq!(seen(code, &status), expected, "POST {path}");
    }

    // An update that changes a Deployment's selector prints the new one.
    let deployment = json!({"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": template}});
    let (code, created) = send(
        &c,
        http::Method::POST,
        &format!("{apps}/deployments"),
        &deployment,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
    changed["spec"]["template"]["metadata"]["labels"]["v"] = json!("2");
    let (code, status) = send(
        &c,
        http::Method::PUT,
        &format!("{apps}/deployments/web"),
        &changed,
    )
    .await;
    assert_eq!(
        seen(code, &status),
        invalid("Deployment.apps", "web", &[
            ("spec.selector", "FieldValueInvalid", "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"),
        ])
    );

    job_template_and_failure_policy_print_as_internal_structs(&c, &ns).await;
    c.cleanup().await;
}

/// `labels` (a JSON object) as `%#v` prints a `map[string]string`: keys sorted.
fn go_labels(labels: &Value) -> String {
    let mut pairs: Vec<(String, String)> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    pairs.sort();
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// A Job's template and pod failure policy are immutable: the errors print the new values as
/// `%#v` prints the internal `core.PodTemplateSpec` and `batch.PodFailurePolicy`, every
/// field in the internal declaration order, quantities with their unexported fields.
async fn job_template_and_failure_policy_print_as_internal_structs(c: &TestCluster, ns: &str) {
    let job = json!({"metadata": {"name": "job"}, "spec": {
        "podFailurePolicy": {"rules": [{"action": "FailJob",
            "onExitCodes": {"operator": "In", "values": [42]}}]},
        "template": {"spec": {"restartPolicy": "Never",
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i", "command": ["sh", "-c", "true"],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"},
                    "requests": {"cpu": "1"}}}]}}}});
    let jobs = format!("/apis/batch/v1/namespaces/{ns}/jobs");
    let (code, created) = send(c, http::Method::POST, &jobs, &job).await;
    assert_eq!(code, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("j");
    changed["spec"]["podFailurePolicy"]["rules"][0]["action"] = json!("Ignore");
    let (code, status) = send(c, http::Method::PUT, &format!("{jobs}/job"), &changed).await;
    let labels = go_labels(&created["spec"]["template"]["metadata"]["labels"]);
    let meta = format!(
        "v1.ObjectMeta{{Name:\"\", GenerateName:\"\", Namespace:\"\", SelfLink:\"\", UID:\"\", \
         ResourceVersion:\"\", Generation:0, CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), \
         DeletionTimestamp:<nil>, DeletionGracePeriodSeconds:(*int64)(nil), Labels:{labels}, \
         Annotations:map[string]string(nil), OwnerReferences:[]v1.OwnerReference(nil), Finalizers:[]string(nil), \
         ManagedFields:[]v1.ManagedFieldsEntry(nil)}}"
    );
    let quantity = |value: i64, scale: i32, s: &str, format: &str| {
        format!(
            "resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, \
             d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{s:?}, Format:{format:?}}}"
        )
    };
    let limits = format!(
        "core.ResourceList{{\"cpu\":{}, \"memory\":{}}}",
        quantity(500, -3, "500m", "DecimalSI"),
        // 128 is a multiple of 8: Go does not keep the text of 128Mi.
        quantity(134217728, 0, "", "BinarySI"),
    );
    let requests = format!(
        "core.ResourceList{{\"cpu\":{}}}",
        quantity(1, 0, "1", "DecimalSI")
    );
    let container = format!(
        "core.Container{{Name:\"c\", Image:\"j\", Command:[]string{{\"sh\", \"-c\", \"true\"}}, Args:[]string(nil), \
         WorkingDir:\"\", Ports:[]core.ContainerPort(nil), EnvFrom:[]core.EnvFromSource(nil), Env:[]core.EnvVar(nil), \
         Resources:core.ResourceRequirements{{Limits:{limits}, Requests:{requests}, Claims:[]core.ResourceClaim(nil)}}, \
         ResizePolicy:[]core.ContainerResizePolicy(nil), RestartPolicy:(*core.ContainerRestartPolicy)(nil), \
         VolumeMounts:[]core.VolumeMount(nil), VolumeDevices:[]core.VolumeDevice(nil), LivenessProbe:(*core.Probe)(nil), \
         ReadinessProbe:(*core.Probe)(nil), StartupProbe:(*core.Probe)(nil), Lifecycle:(*core.Lifecycle)(nil), \
         TerminationMessagePath:\"/dev/termination-log\", TerminationMessagePolicy:\"File\", ImagePullPolicy:\"Always\", \
         SecurityContext:(*core.SecurityContext)(nil), Stdin:false, StdinOnce:false, TTY:false}}"
    );
    let sources = [
        "HostPath:(*core.HostPathVolumeSource)(nil)",
        "EmptyDir:(*core.EmptyDirVolumeSource)(0xc000000000)",
        "GCEPersistentDisk:(*core.GCEPersistentDiskVolumeSource)(nil)",
        "AWSElasticBlockStore:(*core.AWSElasticBlockStoreVolumeSource)(nil)",
        "GitRepo:(*core.GitRepoVolumeSource)(nil)",
        "Secret:(*core.SecretVolumeSource)(nil)",
        "NFS:(*core.NFSVolumeSource)(nil)",
        "ISCSI:(*core.ISCSIVolumeSource)(nil)",
        "Glusterfs:(*core.GlusterfsVolumeSource)(nil)",
        "PersistentVolumeClaim:(*core.PersistentVolumeClaimVolumeSource)(nil)",
        "RBD:(*core.RBDVolumeSource)(nil)",
        "Quobyte:(*core.QuobyteVolumeSource)(nil)",
        "FlexVolume:(*core.FlexVolumeSource)(nil)",
        "Cinder:(*core.CinderVolumeSource)(nil)",
        "CephFS:(*core.CephFSVolumeSource)(nil)",
        "Flocker:(*core.FlockerVolumeSource)(nil)",
        "DownwardAPI:(*core.DownwardAPIVolumeSource)(nil)",
        "FC:(*core.FCVolumeSource)(nil)",
        "AzureFile:(*core.AzureFileVolumeSource)(nil)",
        "ConfigMap:(*core.ConfigMapVolumeSource)(nil)",
        "VsphereVolume:(*core.VsphereVirtualDiskVolumeSource)(nil)",
        "AzureDisk:(*core.AzureDiskVolumeSource)(nil)",
        "PhotonPersistentDisk:(*core.PhotonPersistentDiskVolumeSource)(nil)",
        "Projected:(*core.ProjectedVolumeSource)(nil)",
        "PortworxVolume:(*core.PortworxVolumeSource)(nil)",
        "ScaleIO:(*core.ScaleIOVolumeSource)(nil)",
        "StorageOS:(*core.StorageOSVolumeSource)(nil)",
        "CSI:(*core.CSIVolumeSource)(nil)",
        "Ephemeral:(*core.EphemeralVolumeSource)(nil)",
    ]
    .join(", ");
    let spec = format!(
        "core.PodSpec{{Volumes:[]core.Volume{{core.Volume{{Name:\"scratch\", VolumeSource:core.VolumeSource{{{sources}}}}}}}, \
         InitContainers:[]core.Container(nil), Containers:[]core.Container{{{container}}}, \
         EphemeralContainers:[]core.EphemeralContainer(nil), RestartPolicy:\"Never\", \
         TerminationGracePeriodSeconds:(*int64)(0xc000000000), ActiveDeadlineSeconds:(*int64)(nil), \
         DNSPolicy:\"ClusterFirst\", NodeSelector:map[string]string(nil), ServiceAccountName:\"\", \
         AutomountServiceAccountToken:(*bool)(nil), NodeName:\"\", SecurityContext:(*core.PodSecurityContext)(0xc000000000), \
         ImagePullSecrets:[]core.LocalObjectReference(nil), Hostname:\"\", Subdomain:\"\", SetHostnameAsFQDN:(*bool)(nil), \
         Affinity:(*core.Affinity)(nil), SchedulerName:\"default-scheduler\", Tolerations:[]core.Toleration(nil), \
         HostAliases:[]core.HostAlias(nil), PriorityClassName:\"\", Priority:(*int32)(nil), \
         PreemptionPolicy:(*core.PreemptionPolicy)(nil), DNSConfig:(*core.PodDNSConfig)(nil), \
         ReadinessGates:[]core.PodReadinessGate(nil), RuntimeClassName:(*string)(nil), Overhead:core.ResourceList(nil), \
         EnableServiceLinks:(*bool)(nil), TopologySpreadConstraints:[]core.TopologySpreadConstraint(nil), \
         OS:(*core.PodOS)(nil), SchedulingGates:[]core.PodSchedulingGate(nil), ResourceClaims:[]core.PodResourceClaim(nil)}}"
    );
    let template = format!("core.PodTemplateSpec{{ObjectMeta:{meta}, Spec:{spec}}}");
    let policy = "batch.PodFailurePolicy{Rules:[]batch.PodFailurePolicyRule{batch.PodFailurePolicyRule{\
        Action:\"Ignore\", OnExitCodes:(*batch.PodFailurePolicyOnExitCodesRequirement)(0xc000000000), \
        OnPodConditions:[]batch.PodFailurePolicyOnPodConditionsPattern(nil)}}}";
    assert_eq!(
        seen(code, &status),
        invalid(
            "Job.batch",
            "job",
            &[
                (
                    "spec.template",
                    "FieldValueInvalid",
                    &format!("Invalid value: {template}: field is immutable")
                ),
                (
                    "spec.podFailurePolicy",
                    "FieldValueInvalid",
                    &format!("Invalid value: {policy}: field is immutable")
                ),
            ]
        )
    );
}

/// Reads `path` back as JSON.
async fn get(c: &TestCluster, path: &str) -> Value {
    let req = http::Request::builder()
        .uri(path)
        .header("accept", "application/json")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = c.client.send(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// A collection, an object sent with explicit zero values, the values that must come back
/// (as JSON pointers below the object) and the paths that must be gone.
type ZeroCase = (String, Value, Vec<(&'static str, Value)>, Vec<&'static str>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_values_are_dropped_exactly_where_go_drops_them() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("omitempty").await.unwrap();
    let cases: Vec<ZeroCase> = vec![
        (
            format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            json!({"metadata": {"name": "zeros", "labels": {}},
                "spec": {"replicas": 0, "paused": false, "minReadySeconds": 0,
                    "revisionHistoryLimit": 0,
                    "selector": {"matchLabels": {"app": "z"}, "matchExpressions": []},
                    "template": {"metadata": {"labels": {"app": "z"}},
                        "spec": {"hostNetwork": false, "nodeName": "", "nodeSelector": {},
                            "enableServiceLinks": false,
                            "containers": [{"name": "c", "image": "i", "args": [],
                                "stdin": false, "workingDir": "",
                                "ports": [{"containerPort": 80, "hostPort": 0, "name": ""}]}]}}}}),
            vec![
                ("/spec/replicas", json!(0)),
                ("/spec/revisionHistoryLimit", json!(0)),
                ("/spec/template/spec/enableServiceLinks", json!(false)),
                (
                    "/spec/template/spec/containers/0/ports/0/containerPort",
                    json!(80),
                ),
            ],
            vec![
                "/metadata/labels",
                "/spec/paused",
                "/spec/minReadySeconds",
                "/spec/selector/matchExpressions",
                "/spec/template/spec/hostNetwork",
                "/spec/template/spec/nodeName",
                "/spec/template/spec/nodeSelector",
                "/spec/template/spec/containers/0/args",
                "/spec/template/spec/containers/0/stdin",
                "/spec/template/spec/containers/0/workingDir",
                "/spec/template/spec/containers/0/ports/0/hostPort",
                "/spec/template/spec/containers/0/ports/0/name",
            ],
        ),
        (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": "zeros", "finalizers": [], "annotations": {}},
                "data": {"empty": ""}, "binaryData": {}, "immutable": false}),
            vec![("/data/empty", json!("")), ("/immutable", json!(false))],
            vec![
                "/metadata/finalizers",
                "/metadata/annotations",
                "/binaryData",
            ],
        ),
        (
            format!("/apis/batch/v1/namespaces/{ns}/jobs"),
            json!({"metadata": {"name": "zeros"}, "spec": {"suspend": true,
                "backoffLimit": 0, "activeDeadlineSeconds": 30,
                "template": {"spec": {"restartPolicy": "Never", "hostPID": false,
                    "containers": [{"name": "c", "image": "i", "tty": false}]}}}}),
            vec![
                ("/spec/suspend", json!(true)),
                ("/spec/backoffLimit", json!(0)),
            ],
            vec![
                "/spec/template/spec/hostPID",
                "/spec/template/spec/containers/0/tty",
            ],
        ),
        (
            format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
            json!({"metadata": {"name": "zeros"}, "spec": {"holderIdentity": "",
                "leaseTransitions": 0}}),
            vec![
                ("/spec/holderIdentity", json!("")),
                ("/spec/leaseTransitions", json!(0)),
            ],
            vec![],
        ),
        (
            format!("/api/v1/namespaces/{ns}/services"),
            json!({"metadata": {"name": "zeros"}, "spec": {"selector": {},
                "externalIPs": [], "publishNotReadyAddresses": false,
                "loadBalancerSourceRanges": [],
                "ports": [{"port": 80, "name": "", "nodePort": 0}]}}),
            vec![("/spec/ports/0/port", json!(80))],
            vec![
                "/spec/selector",
                "/spec/externalIPs",
                "/spec/publishNotReadyAddresses",
                "/spec/loadBalancerSourceRanges",
                "/spec/ports/0/name",
                "/spec/ports/0/nodePort",
            ],
        ),
    ];
    for (collection, body, kept, dropped) in cases {
        let (code, created) = send(&c, http::Method::POST, &collection, &body).await;
        assert_eq!(code, 201, "POST {collection}: {created}");
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let stored = get(&c, &format!("{collection}/{name}")).await;
        for answer in [&created, &stored] {
            for (path, value) in &kept {
                assert_eq!(
                    answer.pointer(path),
                    Some(value),
                    "{collection} {path}: {answer}"
                );
            }
            for path in &dropped {
                assert_eq!(answer.pointer(path), None, "{collection} {path}: {answer}");
            }
        }
    }
    c.cleanup().await;
}

/// A rewrite that only repeats zero values `omitempty` drops (a client sending
/// `labels: {}` every time, as rkcm's endpoints controller does) changes nothing: the
/// server keeps the object, its resourceVersion and its managed fields' time, even a second
/// later (kubernetes/kubernetes#127417 depends on such no-op writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewriting_dropped_zero_values_is_a_no_op() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("noop").await.unwrap();
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = json!({"metadata": {"name": "same", "labels": {}, "annotations": {"a": "1"}},
                      "data": {"k": "v"}});
    let (code, created) = send(&c, http::Method::POST, &collection, &body).await;
    assert_eq!(code, 201, "{created}");
    let version = created["metadata"]["resourceVersion"].clone();
    let time = created["metadata"]["managedFields"][0]["time"].clone();
    // Into the next second, so a time written again would differ.
    let unix_second = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default()
    };
    let created_at = unix_second();
    rkcm_conformance::wait_for(
        "the clock to pass the creation's second",
        std::time::Duration::from_secs(5),
        || async { Ok((unix_second() > created_at).then_some(())) },
    )
    .await
    .unwrap();
    let mut again = body.clone();
    again["apiVersion"] = json!("v1");
    again["kind"] = json!("ConfigMap");
    again["metadata"]["resourceVersion"] = version.clone();
    let (code, updated) = send(&c, http::Method::PUT, &format!("{collection}/same"), &again).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["metadata"]["resourceVersion"], version, "{updated}");
    assert_eq!(
        updated["metadata"]["managedFields"][0]["time"], time,
        "{updated}"
    );
    assert!(updated["metadata"].get("labels").is_none(), "{updated}");
}

/// go-cmp's text with its indentation and alignment (spaces, tabs, and the non-breaking
/// spaces go-cmp mixes in on purpose) reduced to single spaces.
fn normalised(s: &str) -> String {
    s.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Updates of a pod's or a claim's fixed fields are refused with go-cmp's diff of the old and
/// the new internal spec: the changed field as a `-` and a `+` line inside the structs and
/// lists that hold it, two unchanged records of context on each side, the rest folded into
/// `... // N identical fields`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_spec_updates_print_go_cmp_diffs() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("cmpdiff").await.unwrap();
    let core = format!("/api/v1/namespaces/{ns}");

    // No service account token volume, so the unchanged neighbours are the same everywhere.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"automountServiceAccountToken": false,
        "containers": [{"name": "c", "image": "i"}]}});
    let (code, created) = send(&c, http::Method::POST, &format!("{core}/pods"), &pod).await;
    assert_eq!(code, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["containers"][0]["workingDir"] = json!("/w");
    let (code, status) = send(&c, http::Method::PUT, &format!("{core}/pods/p"), &changed).await;
    assert_eq!(code, 422, "{status}");
    let cause = &status["details"]["causes"][0];
    assert_eq!(cause["field"], "spec", "{status}");
    let want = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)
  core.PodSpec{
  	Volumes:        nil,
  	InitContainers: nil,
  	Containers: []core.Container{
  		{
  			... // 2 identical fields
  			Command:    nil,
  			Args:       nil,
- 			WorkingDir: \"\",
+ 			WorkingDir: \"/w\",
  			Ports:      nil,
  			EnvFrom:    nil,
  			... // 17 identical fields
  		},
  	},
  	EphemeralContainers: nil,
  	RestartPolicy:       \"Always\",
  	... // 28 identical fields
  }
";
    assert_eq!(
        normalised(cause["message"].as_str().unwrap_or_default()),
        normalised(want)
    );

    // A claim's storage class is fixed once set.
    let claim = json!({"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}});
    let claims = format!("{core}/persistentvolumeclaims");
    let (code, created) = send(&c, http::Method::POST, &claims, &claim).await;
    assert_eq!(code, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["storageClassName"] = json!("fast");
    let (code, status) = send(&c, http::Method::PUT, &format!("{claims}/claim"), &changed).await;
    assert_eq!(code, 422, "{status}");
    let want = "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims
  core.PersistentVolumeClaimSpec{
  	... // 2 identical fields
  	Resources:        {Requests: {s\"storage\": {i: {...}, s: \"1Gi\", Format: \"BinarySI\"}}},
  	VolumeName:       \"\",
- 	StorageClassName: &\"standard\",
+ 	StorageClassName: &\"fast\",
  	VolumeMode:       &\"Filesystem\",
  	DataSource:       nil,
  	... // 2 identical fields
  }
";
    let cause = &status["details"]["causes"][0];
    assert_eq!(
        normalised(cause["message"].as_str().unwrap_or_default()),
        normalised(want)
    );
    c.cleanup().await;
}
