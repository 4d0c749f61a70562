use super::*;
use crate::recorded::{load, query_param, reference_dir};
use serde_json::json;

#[test]
fn field_selector_parsing_and_matching() {
    let fs = FieldSelector::parse("status.phase!=Failed,spec.nodeName=").unwrap_or_default();
    assert_eq!(
        fs.field_names(),
        vec!["spec.nodeName".to_string(), "status.phase".to_string()]
    );
    let pod = |node: &str, phase: &str| {
        let (node, phase) = (node.to_string(), phase.to_string());
        move |f: &str| match f {
            "spec.nodeName" => Some(node.clone()),
            "status.phase" => Some(phase.clone()),
            _ => None,
        }
    };
    assert!(fs.matches(&pod("", "Pending")));
    assert!(!fs.matches(&pod("n1", "Pending")));
    assert!(!fs.matches(&pod("", "Failed")));

    let eq = FieldSelector::parse("metadata.name==a\\,b\\=c\\\\d").unwrap_or_default();
    assert!(eq.matches(&|f| (f == "metadata.name").then(|| "a,b=c\\d".to_string())));
    assert_eq!(eq.to_string(), "metadata.name=a\\,b\\=c\\\\d");
    // A missing field reads as "".
    let empty = FieldSelector::parse("spec.x=").unwrap_or_default();
    assert!(empty.matches(&|_| None));
    assert!(FieldSelector::parse("")
        .map(|f| f.is_empty())
        .unwrap_or(false));
    assert!(FieldSelector::parse(",,")
        .map(|f| f.is_empty())
        .unwrap_or(false));
    // The first operator wins: `a!=b=c` is `a != "b=c"`, which needs escaping.
    assert_eq!(
        FieldSelector::parse("a!=b=c"),
        Err("invalid field selector: unescaped character in value: 61".to_string())
    );
    assert_eq!(
        FieldSelector::parse("a"),
        Err("invalid selector: 'a'; can't understand 'a'".to_string())
    );
    assert_eq!(
        FieldSelector::parse("b=1,a"),
        Err("invalid selector: 'b=1,a'; can't understand 'a'".to_string())
    );
    assert_eq!(
        FieldSelector::parse("a=\\x"),
        Err("invalid field selector: invalid escape sequence: \\x".to_string())
    );
    assert_eq!(
        FieldSelector::parse("a=b\\"),
        Err("invalid field selector: invalid escape sequence: \\".to_string())
    );
    // An escaped comma does not split terms.
    let one = FieldSelector::parse("a=x\\,y").unwrap_or_default();
    assert_eq!(one.field_names(), vec!["a".to_string()]);
    // Spaces are not trimmed: the label includes them.
    let spaced = FieldSelector::parse("metadata.name = x").unwrap_or_default();
    assert_eq!(spaced.field_names(), vec!["metadata.name ".to_string()]);
    assert_eq!(
        spaced.check_supported("configmaps"),
        Err("\"metadata.name \" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".to_string())
    );
}

#[test]
fn supported_fields_per_resource() {
    for f in [
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
        "spec.host",
    ] {
        assert!(supported_field("pods", f), "{}", f);
    }
    assert!(!supported_field("pods", "spec.bogus"));
    assert_eq!(
        unsupported_field_message("pods", "spec.bogus"),
        "field label not supported: spec.bogus"
    );
    assert!(supported_field("nodes", "spec.unschedulable"));
    assert!(supported_field("nodes", "metadata.name"));
    assert!(!supported_field("nodes", "metadata.namespace"));
    assert!(supported_field("namespaces", "status.phase"));
    assert!(!supported_field("namespaces", "metadata.namespace"));
    assert!(supported_field("secrets", "type"));
    assert!(supported_field("replicationcontrollers", "status.replicas"));
    assert!(supported_field("jobs", "status.successful"));
    assert!(supported_field("batch/jobs", "status.successful"));
    assert!(supported_field("jobs.batch", "status.successful"));
    assert_eq!(
        unsupported_field_message("jobs", "status.failed"),
        "field label \"status.failed\" not supported for Job"
    );
    assert!(supported_field(
        "certificatesigningrequests",
        "spec.signerName"
    ));
    assert!(!supported_field(
        "certificatesigningrequests",
        "metadata.namespace"
    ));
    for f in [
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ] {
        assert!(supported_field("events", f), "{}", f);
        assert!(!f.starts_with("involvedObject") || !supported_field("events.events.k8s.io", f));
    }
    assert!(supported_field("events.k8s.io/events", "regarding.name"));
    assert!(supported_field(
        "events.events.k8s.io",
        "reportingController"
    ));
    assert!(!supported_field("events", "regarding.name"));
    // Kinds without a conversion function of their own (apps/v1 registers none, Services
    // got theirs after 1.29, custom resources never do).
    for r in [
        "replicasets",
        "deployments",
        "services",
        "configmaps",
        "persistentvolumes",
        "widgets.example.com",
    ] {
        assert!(
            supported_field(r, "metadata.name") && supported_field(r, "metadata.namespace"),
            "{}",
            r
        );
    }
    assert!(!supported_field("replicasets", "status.replicas"));
    assert_eq!(
        unsupported_field_message("replicasets", "status.replicas"),
        "\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    assert!(!supported_field("services", "spec.clusterIP"));
}

#[test]
fn field_values_per_resource() {
    let pod = json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                 "serviceAccountName": "default", "hostNetwork": true},
        "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                   "nominatedNodeName": "n2"}
    });
    let v = |r: &str, o: &Value, f: &str| field_value(r, o, f);
    let s = |x: &str| Some(x.to_string());
    assert_eq!(v("pods", &pod, "metadata.name"), s("p"));
    assert_eq!(v("pods", &pod, "metadata.namespace"), s("ns"));
    assert_eq!(v("pods", &pod, "spec.nodeName"), s("n1"));
    assert_eq!(v("pods", &pod, "spec.host"), s("n1"));
    assert_eq!(v("pods", &pod, "spec.restartPolicy"), s("Always"));
    assert_eq!(
        v("pods", &pod, "spec.schedulerName"),
        s("default-scheduler")
    );
    assert_eq!(v("pods", &pod, "spec.serviceAccountName"), s("default"));
    assert_eq!(v("pods", &pod, "spec.hostNetwork"), s("true"));
    assert_eq!(v("pods", &pod, "status.phase"), s("Running"));
    assert_eq!(v("pods", &pod, "status.podIP"), s("10.0.0.1"));
    assert_eq!(v("pods", &pod, "status.podIPs"), s(""));
    assert_eq!(v("pods", &pod, "status.nominatedNodeName"), s("n2"));
    assert_eq!(v("pods", &pod, "spec.bogus"), None);
    let bare = json!({"metadata": {"name": "q"}, "status": {"podIP": "10.1.1.1"}});
    assert_eq!(v("pods", &bare, "spec.hostNetwork"), s("false"));
    assert_eq!(v("pods", &bare, "spec.nodeName"), s(""));
    assert_eq!(v("pods", &bare, "status.podIP"), s("10.1.1.1"));

    let node = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
    assert_eq!(v("nodes", &node, "spec.unschedulable"), s("true"));
    assert_eq!(
        v(
            "nodes",
            &json!({"metadata": {"name": "n2"}}),
            "spec.unschedulable"
        ),
        s("false")
    );
    assert_eq!(v("nodes", &node, "metadata.namespace"), None);

    let rc = json!({"metadata": {"name": "rc"}, "status": {"replicas": 3}});
    assert_eq!(v("replicationcontrollers", &rc, "status.replicas"), s("3"));
    assert_eq!(
        v("replicationcontrollers", &json!({}), "status.replicas"),
        s("0")
    );
    assert_eq!(
        v(
            "jobs",
            &json!({"status": {"succeeded": 2}}),
            "status.successful"
        ),
        s("2")
    );
    assert_eq!(
        v("jobs", &json!({"status": {}}), "status.successful"),
        s("0")
    );
    assert_eq!(
        v("secrets", &json!({"type": "Opaque"}), "type"),
        s("Opaque")
    );
    assert_eq!(
        v(
            "namespaces",
            &json!({"status": {"phase": "Active"}}),
            "status.phase"
        ),
        s("Active")
    );
    assert_eq!(
        v(
            "certificatesigningrequests",
            &json!({"spec": {"signerName": "kubernetes.io/kubelet-serving"}}),
            "spec.signerName"
        ),
        s("kubernetes.io/kubelet-serving")
    );

    let event = json!({
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1",
                           "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled", "type": "Normal", "reportingComponent": "kubelet", "source": {}
    });
    assert_eq!(v("events", &event, "involvedObject.kind"), s("Pod"));
    assert_eq!(
        v("events", &event, "involvedObject.fieldPath"),
        s("spec.containers{c}")
    );
    assert_eq!(v("events", &event, "involvedObject.uid"), s("u1"));
    assert_eq!(v("events", &event, "reason"), s("Pulled"));
    assert_eq!(v("events", &event, "source"), s("kubelet"));
    let with_source = json!({"source": {"component": "scheduler"}, "reportingComponent": "x"});
    assert_eq!(v("events", &with_source, "source"), s("scheduler"));
    let new_event = json!({
        "regarding": {"kind": "Pod", "name": "p"}, "reportingController": "kubelet",
        "reason": "Pulled", "type": "Normal"
    });
    assert_eq!(
        v("events.k8s.io/events", &new_event, "regarding.kind"),
        s("Pod")
    );
    assert_eq!(
        v("events.k8s.io/events", &new_event, "reportingController"),
        s("kubelet")
    );
    assert_eq!(
        v("events.k8s.io/events", &new_event, "source"),
        s("kubelet")
    );

    let pv = json!({"metadata": {"name": "pv1"}});
    assert_eq!(v("persistentvolumes", &pv, "metadata.namespace"), s(""));
    assert_eq!(v("configmaps", &pv, "data"), None);
}

// --- recorded real-server answers -----------------------------------------------------

#[test]
fn reference_bad_field_selector_062() {
    let Some(dir) = reference_dir() else { return };
    let rec = load(&dir, "062-err-bad-field-selector.json");
    let path = rec["request"]["path"].as_str().unwrap_or("");
    let raw = query_param(path, "fieldSelector").unwrap_or_default();
    let fs = FieldSelector::parse(&raw).unwrap_or_default();
    assert_eq!(fs.field_names(), vec!["spec.bogus".to_string()]);
    let body = &rec["response"]["body"];
    assert_eq!(body["code"], 400);
    assert_eq!(
        fs.check_supported("pods").err().as_deref(),
        body["message"].as_str()
    );
}

#[test]
fn reference_field_selector_lists_068_069() {
    let Some(dir) = reference_dir() else { return };
    // 068: metadata.name on configmaps.
    let rec = load(&dir, "068-list-field-selector.json");
    let raw = query_param(
        rec["request"]["path"].as_str().unwrap_or(""),
        "fieldSelector",
    )
    .unwrap_or_default();
    let fs = FieldSelector::parse(&raw).unwrap_or_default();
    assert_eq!(fs.check_supported("configmaps"), Ok(()));
    let items = rec["response"]["body"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 1);
    for item in &items {
        assert!(fs.matches(&|f| field_value("configmaps", item, f)));
    }
    let other = json!({"metadata": {"name": "page1", "namespace": "ref"}});
    assert!(!fs.matches(&|f| field_value("configmaps", &other, f)));

    // 069: unscheduled, not-failed pods across namespaces.
    let rec = load(&dir, "069-list-pods-field-selector.json");
    let raw = query_param(
        rec["request"]["path"].as_str().unwrap_or(""),
        "fieldSelector",
    )
    .unwrap_or_default();
    assert_eq!(raw, "spec.nodeName=,status.phase!=Failed");
    let fs = FieldSelector::parse(&raw).unwrap_or_default();
    assert_eq!(fs.check_supported("pods"), Ok(()));
    let items = rec["response"]["body"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!items.is_empty());
    for item in &items {
        assert!(fs.matches(&|f| field_value("pods", item, f)));
    }
    let mut bound = items[0].clone();
    bound["spec"]["nodeName"] = json!("node-1");
    assert!(!fs.matches(&|f| field_value("pods", &bound, f)));
    let mut failed = items[0].clone();
    failed["status"]["phase"] = json!("Failed");
    assert!(!fs.matches(&|f| field_value("pods", &failed, f)));
}
