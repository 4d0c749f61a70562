use super::*;

pub(crate) fn resource(group: &str, resource: &str, kind: &str) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced: true,
        verbs: ["get", "list", "watch", "patch", "delete"]
            .map(String::from)
            .to_vec(),
    }
}

pub(crate) fn identity(info: &ResourceInfo, meta: &ObjectMeta) -> ObjectRef {
    ObjectRef {
        api_version: api_version(info).into(),
        kind: info.kind.as_str().into(),
        namespace: meta.namespace.as_deref().unwrap_or_default().into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    }
}

pub(crate) struct Harness {
    pub(crate) builder: Arc<GraphBuilder>,
    pub(crate) processor: GraphProcessor,
    pub(crate) delete: Arc<WorkQueue<String>>,
    pub(crate) orphan: Arc<WorkQueue<String>>,
}

impl Harness {
    /// Needs a tokio runtime (the queues run a task).
    pub(crate) fn new() -> Harness {
        // Never dialled: these monitors have no stream.
        let client = client::connect("unix:///nonexistent/informer.sock", None)
            .expect("a unix address is accepted");
        let delete = WorkQueue::new("test_attempt_to_delete", None);
        let orphan = WorkQueue::new("test_attempt_to_orphan", None);
        let (builder, processor) =
            GraphBuilder::new(client, "test".into(), delete.clone(), orphan.clone());
        Harness {
            builder,
            processor,
            delete,
            orphan,
        }
    }

    pub(crate) fn monitor(&self, info: &ResourceInfo) -> MonitorHandle {
        self.builder.add_monitor_by_hand(info)
    }

    pub(crate) fn send(&mut self, change: GraphChange) {
        self.builder
            .changes
            .send(change)
            .expect("the processor is ours");
        self.processor.process_pending();
    }

    /// An object as an event of `info`'s monitor brings it.
    pub(crate) fn upsert(&mut self, info: &ResourceInfo, meta: &ObjectMeta) {
        self.send(GraphChange::Upsert(
            identity(info, meta),
            Box::new(meta.clone()),
        ));
    }

    /// The end of a list that named `objects`.
    pub(crate) fn end_list(&mut self, list: ListId, info: &ResourceInfo, objects: &[&ObjectMeta]) {
        self.send(GraphChange::Snapshot {
            list,
            group: info.group.clone(),
            kind: info.kind.clone(),
            uids: objects
                .iter()
                .map(|m| m.uid.clone().unwrap_or_default())
                .collect(),
            complete: true,
        });
    }

    /// A whole list, as the stream brings it: Init, each object, InitDone.
    pub(crate) fn list(
        &mut self,
        monitor: &MonitorHandle,
        info: &ResourceInfo,
        objects: &[&ObjectMeta],
    ) {
        let list = monitor.begin_list();
        for meta in objects {
            self.upsert(info, meta);
        }
        self.end_list(list, info, objects);
    }

    pub(crate) fn dependents(&self, uid: &str) -> HashSet<String> {
        self.builder
            .graph
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(uid)
            .map(|n| n.dependents.clone())
            .unwrap_or_default()
    }
}

/// Metadata from JSON (timestamps and all, as the API server writes them).
pub(crate) fn meta(value: serde_json::Value) -> ObjectMeta {
    serde_json::from_value(value).expect("test metadata is valid")
}
