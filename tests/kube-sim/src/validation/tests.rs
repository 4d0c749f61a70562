use super::meta::go_owner_reference;
use super::pods::POD_UPDATE_MSG;
use super::*;

#[test]
fn an_owner_reference_prints_as_go_prints_the_struct() {
    let event = json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"});
    assert_eq!(
        go_owner_reference(&event),
        "v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", Name:\"e\", UID:\"u\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}"
    );
    let controller =
        json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u", "controller": true});
    assert!(go_owner_reference(&controller).contains("Controller:(*bool)(0xc"));
}
use serde_json::json;

fn v(group: &str, kind: &str, o: Value) -> Vec<FieldCause> {
    validate(group, "v1", kind, &o, None)
}

fn fields(c: &[FieldCause]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}|{}", c.field, c.message))
        .collect()
}

fn pod_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "nginx:1"}]})
}

fn deployment(sel: Value, labels: Value) -> Value {
    json!({"metadata": {"name": "d"}, "spec": {"selector": sel, "template": {"metadata": {"labels": labels}, "spec": pod_spec()}}})
}

#[test]
fn names_per_kind() {
    let c = validate_name("ConfigMap", "Bad_Name").expect("invalid");
    assert_eq!(c.reason, "FieldValueInvalid");
    assert!(c
        .message
        .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    assert!(validate_name("ConfigMap", "a.b-c").is_none());
    let ns = validate_name("Namespace", "a.b").expect("dots");
    assert_eq!(ns.message, "Invalid value: \"a.b\": must not contain dots");
    let svc = validate_name("Service", "1abc").expect("1035");
    assert!(
        svc.message.contains("a DNS-1035 label must consist of"),
        "{}",
        svc.message
    );
    assert!(svc.message.contains("(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"));
    assert!(validate_name("ClusterRole", "system:controller:x").is_none());
    assert_eq!(
        validate_name("Role", "a/b").map(|c| c.message),
        Some("Invalid value: \"a/b\": may not contain '/'".into())
    );
    assert_eq!(
        validate_name("Role", "..").map(|c| c.message),
        Some("Invalid value: \"..\": may not be '..'".into())
    );
    assert_eq!(
        validate_name("Pod", "").map(|c| c.reason),
        Some("FieldValueRequired")
    );
    let long = "a".repeat(64);
    assert_eq!(
        validate_name("Namespace", &long).map(|c| c.message),
        Some(format!(
            "Invalid value: \"{long}\": must be no more than 63 characters"
        ))
    );
}

#[test]
fn generate_name_prefix() {
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"generateName": "gen-", "name": "gen-abcde"}}),
    );
    assert!(c.is_empty(), "{c:?}");
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"generateName": "Gen-", "name": "Gen-abcde"}}),
    );
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].field, "metadata.generateName");
    assert_eq!(c[1].field, "metadata.name");
}

#[test]
fn message_aggregation() {
    let one = FieldCause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: "spec.selector".into(),
    };
    let two = FieldCause {
        reason: "FieldValueInvalid",
        message: "Invalid value: -1: x".into(),
        field: "spec.replicas".into(),
    };
    assert_eq!(
        invalid_message("apps", "Deployment", "bad", std::slice::from_ref(&one)),
        "Deployment.apps \"bad\" is invalid: spec.selector: Required value"
    );
    assert_eq!(
        invalid_message("", "Pod", "p", &[one.clone(), two.clone(), one.clone()]),
        "Pod \"p\" is invalid: [spec.selector: Required value, spec.replicas: Invalid value: -1: x]"
    );
    assert_eq!(
        invalid_message("", "Pod", "p", &[one.clone(), one]),
        "Pod \"p\" is invalid: spec.selector: Required value"
    );
}

#[test]
fn labels_annotations_owners_finalizers() {
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "labels": {"a/b/c": "x", "ok": "bad value"}}}),
    );
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c[0]
        .message
        .starts_with("Invalid value: \"a/b/c\": a qualified name must consist of"));
    assert!(c[1]
        .message
        .starts_with("Invalid value: \"bad value\": a valid label must be an empty string"));
    assert!(c.iter().all(|c| c.field == "metadata.labels"));
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "labels": {"k": "v".repeat(64)}}}),
    );
    assert!(c[0].message.ends_with("must be no more than 63 characters"));
    let big = "x".repeat(256 * 1024);
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "annotations": {"k": big}}}),
    );
    assert_eq!(
        fields(&c),
        vec!["metadata.annotations|Too long: must have at most 262144 bytes"]
    );
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "annotations": {"Example.com/Key": "x"}}}),
    );
    assert!(c.is_empty(), "{c:?}");
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "1", "controller": true},
            {"apiVersion": "", "kind": "", "name": "", "uid": "", "controller": true}]}}),
    );
    let f = fields(&c);
    assert!(
        f.contains(
            &"metadata.ownerReferences.apiVersion|Invalid value: \"\": version must not be empty"
                .to_string()
        ),
        "{f:?}"
    );
    assert!(f.contains(
        &"metadata.ownerReferences.uid|Invalid value: \"\": uid must not be empty".to_string()
    ));
    assert!(f.iter().any(|m| m.contains("Only one reference can have Controller set to true. Found \"true\" in references for Deployment/d and /")));
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "a", "finalizers": ["example.com/x", "kubernetes", "custom"]}}),
    );
    assert_eq!(fields(&c), vec!["metadata.finalizers|Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"]);
}

#[test]
fn deployment_selector_rules() {
    assert!(v(
        "apps",
        "Deployment",
        deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"})
        )
    )
    .is_empty());
    let c = v(
        "apps",
        "Deployment",
        json!({"metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()}}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "spec.selector|Required value",
            "spec.template.metadata.labels|Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        ]
    );
    let c = v(
        "apps",
        "Deployment",
        deployment(json!({}), json!({"app": "web"})),
    );
    assert_eq!(
        fields(&c),
        vec!["spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"]
    );
    let c = v(
        "apps",
        "Deployment",
        deployment(
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}),
            json!({"app": "api", "x": "y"}),
        ),
    );
    assert!(c.is_empty(), "{c:?}");
    let mut d = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web"}),
    );
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let c = v("apps", "Deployment", d);
    assert_eq!(
        fields(&c),
        vec![
            "spec.replicas|Invalid value: -1: must be greater than or equal to 0",
            "spec.template.spec.restartPolicy|Unsupported value: \"Never\": supported values: \"Always\""
        ]
    );
}

#[test]
fn workload_selectors_other_kinds() {
    let rs = deployment(json!({"matchLabels": {"app": "x"}}), json!({"app": "y"}));
    assert_eq!(v("apps", "ReplicaSet", rs.clone()).len(), 1);
    assert_eq!(
        v("apps", "DaemonSet", rs.clone())[0].field,
        "spec.template.metadata.labels"
    );
    let mut ss = rs;
    ss["metadata"]["name"] = json!("db");
    assert_eq!(
        v("apps", "StatefulSet", ss)[0].field,
        "spec.template.metadata.labels"
    );
    let ds = json!({"metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec()}}});
    assert_eq!(fields(&v("apps", "DaemonSet", ds)), vec![
        "spec.template.metadata.labels|Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`"
    ]);
    let rc = json!({"metadata": {"name": "r"}, "spec": {"selector": {"app": "a"}, "template": {"metadata": {"labels": {"app": "b"}}, "spec": pod_spec()}}});
    assert_eq!(
        fields(&v("", "ReplicationController", rc)),
        vec!["spec.template.metadata.labels|Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"]
    );
    let rc = json!({"metadata": {"name": "r"}, "spec": {"template": {"spec": pod_spec()}}});
    assert_eq!(
        fields(&v("", "ReplicationController", rc)),
        vec!["spec.selector|Required value"]
    );
}

#[test]
fn pod_spec_rules() {
    let c = v(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
    );
    assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
    let c = v(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "c", "image": "x", "ports": [{"containerPort": 70000}], "volumeMounts": [{"name": "nope", "mountPath": "/a"}]},
            {"name": "c", "image": ""},
            {"name": "Bad_Name", "image": "x"}]}}),
    );
    let f = fields(&c);
    assert!(f.contains(&"spec.containers[0].ports[0].containerPort|Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()), "{f:?}");
    assert!(f.contains(&"spec.containers[0].volumeMounts[0].name|Not found: \"nope\"".to_string()));
    assert!(f.contains(&"spec.containers[1].image|Required value".to_string()));
    assert!(f.contains(&"spec.containers[1].name|Duplicate value: \"c\"".to_string()));
    assert!(f.iter().any(|m| m.starts_with(
        "spec.containers[2].name|Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
    )));
    assert!(f.contains(&"spec.restartPolicy|Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".to_string()));
    let c = v(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}, {"name": "w"}],
            "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a"}]}]}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "spec.volumes[1].name|Duplicate value: \"v\"",
            "spec.volumes[2]|Required value: must specify a volume type"
        ]
    );
    let tmpl = deployment(json!({"matchLabels": {"a": "b"}}), json!({"a": "b"}));
    let mut t = tmpl.clone();
    t["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    assert_eq!(
        fields(&v("apps", "Deployment", t)),
        vec!["spec.template.spec.containers[0].image|Required value"]
    );
    let c = v("", "Pod", json!({"metadata": {"name": "p"}, "spec": 5}));
    assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
    let c = v(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
    );
    assert_eq!(fields(&c), vec!["spec.containers|Required value"]);
    let c = v(
        "",
        "Pod",
        json!({"metadata": 3, "spec": {"containers": [5, {"name": 1}]}}),
    );
    assert!(!c.is_empty());
}

#[test]
fn job_and_cronjob_rules() {
    let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": pod_spec()}}});
    assert_eq!(fields(&v("batch", "Job", job)), vec!["spec.template.spec.restartPolicy|Required value: valid values: \"OnFailure\", \"Never\""]);
    let job = json!({"metadata": {"name": "j"}, "spec": {"parallelism": -1, "completions": -2, "backoffLimit": -3, "completionMode": "Odd",
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(
        fields(&v("batch", "Job", job)),
        vec![
            "spec.parallelism|Invalid value: -1: must be greater than or equal to 0",
            "spec.completions|Invalid value: -2: must be greater than or equal to 0",
            "spec.backoffLimit|Invalid value: -3: must be greater than or equal to 0",
            "spec.completionMode|Unsupported value: \"Odd\": supported values: \"NonIndexed\", \"Indexed\""
        ]
    );
    let job = json!({"metadata": {"name": "j"}, "spec": {"manualSelector": true,
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(fields(&v("batch", "Job", job.clone())), vec![
        "spec.selector|Required value",
        "spec.template.metadata.labels|Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`"
    ]);
    let mut ok = job.clone();
    ok["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
    assert!(v("batch", "Job", ok.clone()).is_empty());
    // Updates: selector and template immutable, completions immutable for NonIndexed.
    let mut upd = ok.clone();
    upd["spec"]["selector"] = json!({"matchLabels": {"a": "c"}});
    upd["spec"]["template"]["metadata"]["labels"] = json!({"a": "c"});
    let c = validate("batch", "v1", "Job", &upd, Some(&ok));
    assert!(fields(&c).contains(&"spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"c\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".to_string()), "{c:?}");
    assert!(c
        .iter()
        .any(|c| c.field == "spec.template" && c.message.ends_with("field is immutable")));
    let mut suspended = ok.clone();
    suspended["spec"]["suspend"] = json!(true);
    let mut upd = suspended.clone();
    upd["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
    assert!(validate("batch", "v1", "Job", &upd, Some(&suspended)).is_empty());
    let mut upd = ok.clone();
    upd["spec"]["completions"] = json!(5);
    assert_eq!(
        fields(&validate("batch", "v1", "Job", &upd, Some(&ok))),
        vec!["spec.completions|Invalid value: 5: field is immutable"]
    );

    let cj = |sched: &str, policy: &str| {
        json!({"metadata": {"name": "cj"}, "spec": {"schedule": sched, "concurrencyPolicy": policy,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "x"}]}}}}}})
    };
    assert!(v("batch", "CronJob", cj("*/5 * * * *", "Forbid")).is_empty());
    assert!(v("batch", "CronJob", cj("0 0 1 jan mon-fri", "")).is_empty());
    assert!(v("batch", "CronJob", cj("@hourly", "Allow")).is_empty());
    assert_eq!(
        fields(&v("batch", "CronJob", cj("* * *", "Sometimes"))),
        vec![
            "spec.schedule|Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]",
            "spec.concurrencyPolicy|Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\""
        ]
    );
    assert_eq!(
        fields(&v("batch", "CronJob", cj("61 * * * *", "Allow"))),
        vec![
            "spec.schedule|Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
        ]
    );
    assert_eq!(
        fields(&v("batch", "CronJob", cj("", "Allow"))),
        vec!["spec.schedule|Required value"]
    );
}

#[test]
fn service_rules() {
    let c = v(
        "",
        "Service",
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "spec.ports[0].name|Required value",
            "spec.ports[1].name|Required value"
        ]
    );
    let c = v(
        "",
        "Service",
        json!({"metadata": {"name": "s"}, "spec": {}}),
    );
    assert_eq!(fields(&c), vec!["spec.ports|Required value"]);
    assert!(v(
        "",
        "Service",
        json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}})
    )
    .is_empty());
    assert!(v("", "Service", json!({"metadata": {"name": "s"}, "spec": {"type": "ExternalName", "externalName": "example.com."}})).is_empty());
    let c = v(
        "",
        "Service",
        json!({"metadata": {"name": "s"}, "spec": {"type": "Weird", "ports": [{"port": 0, "name": "a"}, {"port": 80, "name": "a"}]}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "spec.ports[0].port|Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[1].name|Duplicate value: \"a\"",
            "spec.type|Unsupported value: \"Weird\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        ]
    );
    let old = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"], "ports": [{"port": 80}]}});
    let mut new = old.clone();
    new["spec"]["clusterIP"] = json!("10.96.0.6");
    assert_eq!(
        fields(&validate("", "v1", "Service", &new, Some(&old))),
        vec!["spec.clusterIPs[0]|Invalid value: []string{\"10.96.0.6\"}: may not change once set"]
    );
    assert!(validate("", "v1", "Service", &old, Some(&old)).is_empty());
}

#[test]
fn configmap_secret_rules() {
    let c = v(
        "",
        "ConfigMap",
        json!({"metadata": {"name": "c"}, "data": {"bad key": "x", "ok.key": "y"}}),
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].field, "data[bad key]");
    assert_eq!(
        c[0].message,
        "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    );
    let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}});
    let new = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "2"}});
    assert_eq!(
        fields(&validate("", "v1", "ConfigMap", &new, Some(&old))),
        vec!["data|Forbidden: field is immutable when `immutable` is set"]
    );
    let c = v(
        "",
        "Secret",
        json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"..x": "eA=="}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "data[..x]|Invalid value: \"..x\": must not start with '..'",
            "data[tls.crt]|Required value",
            "data[tls.key]|Required value"
        ]
    );
    let old = json!({"metadata": {"name": "s"}, "type": "Opaque"});
    let new = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth", "data": {"username": "eA=="}});
    assert_eq!(
        fields(&validate("", "v1", "Secret", &new, Some(&old))),
        vec!["type|Invalid value: \"kubernetes.io/basic-auth\": field is immutable"]
    );
}

#[test]
fn pvc_pdb_lease_node_namespace() {
    let c = v(
        "",
        "PersistentVolumeClaim",
        json!({"metadata": {"name": "p"}, "spec": {}}),
    );
    assert_eq!(
        fields(&c),
        vec![
            "spec.accessModes|Required value: at least 1 access mode is required",
            "spec.resources[storage]|Required value"
        ]
    );
    let pvc = json!({"metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}});
    let mut grown = pvc.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    assert!(validate("", "v1", "PersistentVolumeClaim", &grown, Some(&pvc)).is_empty());
    let c = validate("", "v1", "PersistentVolumeClaim", &pvc, Some(&grown));
    assert_eq!(
        fields(&c),
        vec![
            "spec.resources.requests.storage|Forbidden: field can not be less than previous value"
        ]
    );
    let mut modes = pvc.clone();
    modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    let c = validate("", "v1", "PersistentVolumeClaim", &modes, Some(&pvc));
    assert!(
        c[0].message
            .starts_with("Forbidden: spec is immutable after creation"),
        "{c:?}"
    );

    let c = v(
        "policy",
        "PodDisruptionBudget",
        json!({"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": "150%"}}),
    );
    assert_eq!(c[0].field, "spec");
    assert!(c[0]
        .message
        .ends_with("minAvailable and maxUnavailable cannot be both set"));
    assert_eq!(
        c[1].message,
        "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
    );
    let c = v(
        "coordination.k8s.io",
        "Lease",
        json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}),
    );
    assert_eq!(
        fields(&c),
        vec!["spec.leaseDurationSeconds|Invalid value: 0: must be greater than 0"]
    );
    let c = v(
        "",
        "Node",
        json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}),
    );
    assert_eq!(
        fields(&c),
        vec!["spec.taints[0].effect|Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""]
    );
    assert_eq!(
        v("", "Namespace", json!({"metadata": {"name": "Bad"}}))[0].field,
        "metadata.name"
    );
}

#[test]
fn immutable_updates() {
    let old = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web", "v": "1"}),
    );
    let new = deployment(
        json!({"matchLabels": {"app": "web", "v": "1"}}),
        json!({"app": "web", "v": "1"}),
    );
    assert_eq!(
        fields(&validate("apps", "v1", "Deployment", &new, Some(&old))),
        vec!["spec.selector|Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"v\":\"1\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    );
    let mut ss_old = old.clone();
    ss_old["spec"]["serviceName"] = json!("a");
    let mut ss_new = ss_old.clone();
    ss_new["spec"]["replicas"] = json!(3);
    assert!(validate("apps", "v1", "StatefulSet", &ss_new, Some(&ss_old)).is_empty());
    ss_new["spec"]["serviceName"] = json!("b");
    assert_eq!(
        fields(&validate("apps", "v1", "StatefulSet", &ss_new, Some(&ss_old))),
        vec!["spec|Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a"}], "tolerations": [{"key": "k", "operator": "Exists"}]}});
    let mut upd = pod.clone();
    upd["spec"]["containers"][0]["image"] = json!("b");
    upd["spec"]["activeDeadlineSeconds"] = json!(30);
    upd["spec"]["tolerations"] =
        json!([{"key": "k", "operator": "Exists"}, {"key": "z", "operator": "Exists"}]);
    assert!(validate("", "v1", "Pod", &upd, Some(&pod)).is_empty());
    upd["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    let c = validate("", "v1", "Pod", &upd, Some(&pod));
    assert_eq!(c.len(), 1);
    assert!(
        c[0].message
            .starts_with(&format!("Forbidden: {POD_UPDATE_MSG}\n")),
        "{c:?}"
    );
    let mut removed = pod.clone();
    removed["spec"]["tolerations"] = json!([]);
    assert_eq!(
        validate("", "v1", "Pod", &removed, Some(&pod))[0].field,
        "spec.tolerations[0]"
    );
}

#[test]
fn service_ip_fields_are_checked_for_a_single_stack_ipv4_cluster() {
    let errs = |spec: Value| {
        fields(&service_ip_family_errors(
            &serde_json::json!({"metadata": {"name": "s"}, "spec": spec}),
        ))
    };
    let ok: [Value; 5] = [
        serde_json::json!({"ports": [{"port": 80}]}),
        serde_json::json!({"clusterIP": "10.96.0.9", "ipFamilies": ["IPv4"]}),
        serde_json::json!({"clusterIP": "None"}),
        serde_json::json!({"clusterIP": "None", "ipFamilyPolicy": "RequireDualStack"}),
        serde_json::json!({"type": "ExternalName", "ipFamilyPolicy": "Nonsense"}),
    ];
    for spec in ok {
        assert!(errs(spec.clone()).is_empty(), "{spec}");
    }
    assert_eq!(
        errs(serde_json::json!({"clusterIPs": ["10.96.0.9"]})),
        ["spec.clusterIPs|Invalid value: []string{\"10.96.0.9\"}: must be empty when `clusterIP` is not specified"]
    );
    assert_eq!(
        errs(serde_json::json!({"ipFamilies": ["IPv4", "IPv4"], "ipFamilyPolicy": "Dual"})),
        [
            "spec.ipFamilies[1]|Duplicate value: \"IPv4\"",
            "spec.ipFamilyPolicy|Unsupported value: \"Dual\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
        ]
    );
    assert_eq!(
        errs(serde_json::json!({"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9", "10.96.0.10"]})),
        ["spec.clusterIPs|Invalid value: []string{\"10.96.0.9\", \"10.96.0.10\"}: may specify no more than one IP for each IP family"]
    );
    assert_eq!(
        errs(serde_json::json!({"ipFamilies": ["IPv4", "IPv6"]})),
        ["spec.ipFamilyPolicy|Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"]
    );
    assert_eq!(
        errs(serde_json::json!({"clusterIP": "fd00::1"})),
        ["spec.clusterIPs[0]|Invalid value: []string{\"fd00::1\"}: IPv6 is not configured on this cluster"]
    );
    assert_eq!(
        errs(serde_json::json!({"clusterIP": "fd00::1", "ipFamilies": ["IPv4"]})),
        ["spec.clusterIPs[0]|Invalid value: \"fd00::1\": expected an IPv4 value as indicated by `ipFamilies[0]`"]
    );
    assert_eq!(
        errs(
            serde_json::json!({"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6", "IPv4"], "selector": {"a": "b"}})
        ),
        ["spec.ipFamilies[0]|Invalid value: \"IPv6\": not configured on this cluster"]
    );
}
