use super::test_support::*;
use super::*;
use serde_json::json;

fn deployment(uid: &str, orphaning: bool) -> ObjectMeta {
    let mut value = json!({"name": uid, "namespace": "ns", "uid": uid});
    if orphaning {
        value["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        value["finalizers"] = json!(["orphan"]);
    }
    meta(value)
}

fn replica_set(uid: &str, owner: &str) -> ObjectMeta {
    meta(json!({"name": uid, "namespace": "ns", "uid": uid,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner,
            "uid": owner, "controller": true, "blockOwnerDeletion": true}]}))
}

#[tokio::test]
async fn synced_only_once_every_monitor_has_its_list_in_the_graph() {
    let mut h = Harness::new();
    assert!(!h.builder.is_synced(), "nothing is known without monitors");
    assert!(h.builder.hold_orphan("early"));
    let deployments = resource("apps", "deployments", "Deployment");
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    assert!(!h.builder.is_synced());

    let d = deployment("d", false);
    h.list(&d_monitor, &deployments, &[&d]);
    assert!(!h.builder.is_synced(), "replicasets have not listed yet");
    // The list is under way: its objects are in, its end is not.
    let list = rs_monitor.begin_list();
    let rs = replica_set("rs", "d");
    h.upsert(&sets, &rs);
    assert!(!h.builder.is_synced());
    assert!(h.builder.hold_orphan("early"));
    assert_eq!(h.orphan.len(), 0, "held, not queued");
    h.end_list(list, &sets, &[&rs]);
    assert!(h.builder.is_synced());
    assert_eq!(h.orphan.len(), 1, "the held key is queued again");
    assert!(!h.builder.hold_orphan("now"));
    assert_eq!(h.builder.unsynced(), Vec::<String>::new());
}

#[tokio::test]
async fn a_relist_keeps_every_dependent_until_it_ends_and_unsyncs_meanwhile() {
    let mut h = Harness::new();
    let deployments = resource("apps", "deployments", "Deployment");
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let d = deployment("d", false);
    let (rs1, rs2) = (replica_set("rs1", "d"), replica_set("rs2", "d"));
    h.list(&d_monitor, &deployments, &[&d]);
    let first = rs_monitor.begin_list();
    h.upsert(&sets, &rs1);
    h.upsert(&sets, &rs2);
    h.end_list(first, &sets, &[&rs1, &rs2]);
    assert!(h.builder.is_synced());

    // A RESET: the stream lists again; rs2 was deleted meanwhile.
    let second = rs_monitor.begin_list();
    assert!(!h.builder.is_synced(), "a relisting monitor is not synced");
    assert_eq!(h.builder.unsynced(), ["replicasets.apps"]);
    h.upsert(&sets, &rs1);
    assert_eq!(
        h.dependents("d"),
        HashSet::from(["rs1".to_string(), "rs2".to_string()]),
        "nothing is dropped before the list ends"
    );
    // A snapshot of an earlier list does not end this one.
    h.end_list(first, &sets, &[&rs1, &rs2]);
    assert!(!h.builder.is_synced());
    h.end_list(second, &sets, &[&rs1]);
    assert!(h.builder.is_synced());
    assert_eq!(h.dependents("d"), HashSet::from(["rs1".to_string()]));
}

#[tokio::test]
async fn an_interrupted_list_drops_nothing() {
    let mut h = Harness::new();
    let deployments = resource("apps", "deployments", "Deployment");
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let d = deployment("d", false);
    let rs = replica_set("rs", "d");
    h.list(&d_monitor, &deployments, &[&d]);
    h.list(&rs_monitor, &sets, &[&rs]);
    let list = rs_monitor.begin_list();
    h.send(GraphChange::Snapshot {
        list,
        group: "apps".into(),
        kind: "ReplicaSet".into(),
        uids: HashSet::new(),
        complete: false,
    });
    assert_eq!(h.dependents("d"), HashSet::from(["rs".to_string()]));
}

#[tokio::test]
async fn a_monitor_added_later_holds_orphaning_and_the_deletes_of_its_kind() {
    let mut h = Harness::new();
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let rs_monitor = h.monitor(&sets);
    h.list(&rs_monitor, &sets, &[]);
    assert!(h.builder.is_synced());
    let rs = identity(&sets, &replica_set("rs", "d"));

    let widgets = resource("example.com", "widgets", "Widget");
    let w_monitor = h.monitor(&widgets);
    let widget = identity(
        &widgets,
        &meta(json!({"name": "w", "namespace": "ns", "uid": "w"})),
    );
    assert!(!h.builder.is_synced());
    assert!(
        h.builder.hold_orphan("owner"),
        "a dependent may be a Widget"
    );
    assert!(h.builder.hold_delete("w", &widget, false));
    assert!(
        !h.builder.hold_delete("rs", &rs, false),
        "other kinds are collected meanwhile"
    );
    assert!(
        h.builder.hold_delete("rs", &rs, true),
        "but no foreground deletion finishes"
    );
    h.list(&w_monitor, &widgets, &[]);
    assert!(h.builder.is_synced());
    assert_eq!(h.orphan.len(), 1);
    assert_eq!(h.delete.len(), 2);
}

#[tokio::test]
async fn nothing_is_collected_before_every_monitor_has_synced_once() {
    let h = Harness::new();
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let rs = identity(&sets, &replica_set("rs", "d"));
    assert!(
        h.builder.hold_delete("rs", &rs, false),
        "not even kinds nobody monitors"
    );
    let _rs_monitor = h.monitor(&sets);
    assert!(h.builder.hold_delete("rs", &rs, false));
}

#[test]
fn a_dependent_that_turns_up_queues_its_orphaning_owner_again() {
    let deployments = resource("apps", "deployments", "Deployment");
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let mut graph = Graph::default();
    let (mut to_delete, mut to_orphan) = (Vec::new(), Vec::new());
    let d = deployment("d", true);
    apply(
        &mut graph,
        GraphChange::Upsert(identity(&deployments, &d), Box::new(d.clone())),
        &mut to_delete,
        &mut to_orphan,
    );
    assert_eq!(to_orphan, ["d"]);
    to_orphan.clear();
    let rs = replica_set("rs", "d");
    apply(
        &mut graph,
        GraphChange::Upsert(identity(&sets, &rs), Box::new(rs.clone())),
        &mut to_delete,
        &mut to_orphan,
    );
    assert_eq!(to_orphan, ["d"]);
}
