//! Watches as clients use them: kube-rs's `watcher` sees every change, survives a forced
//! 410 Gone by relisting, and selector-filtered watches see objects enter and leave.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_watcher_survives_a_forced_410_by_relisting() {
    let c = TestCluster::start().await.unwrap();
    let Some(sim) = c.sim_only("forcing watch history compaction") else {
        return;
    };
    let ns = c.namespace("w410").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream_api = api.clone();
    let task = tokio::spawn(async move {
        let mut s = watcher(stream_api, watcher::Config::default()).boxed();
        while let Some(ev) = s.next().await {
            let summary = match ev {
                Ok(watcher::Event::InitDone) => "init-done".to_string(),
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                    format!("apply:{}", o.metadata.name.unwrap_or_default())
                }
                Ok(watcher::Event::Delete(o)) => {
                    format!("delete:{}", o.metadata.name.unwrap_or_default())
                }
                Ok(watcher::Event::Init) => "init".to_string(),
                Err(e) => format!("error:{e}"),
            };
            if tx.send(summary).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    async fn next_is(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
        seen: &mut Vec<String>,
        what: &str,
    ) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let ev = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}; saw {seen:?}"))
                .expect("watcher ended");
            seen.push(ev.clone());
            if ev == what {
                return;
            }
        }
    }
    next_is(&mut rx, &mut seen, "apply:before").await;
    next_is(&mut rx, &mut seen, "init-done").await;
    api.create(&PostParams::default(), &cm("live", json!({})))
        .await
        .unwrap();
    next_is(&mut rx, &mut seen, "apply:live").await;

    // Lose the history and every open watch: the watcher's resume gets 410 and must relist.
    // Hold the watcher's re-watch (serving paused), write past its resourceVersion and
    // compact, so that the re-watch gets 410 Gone.
    sim.faults().pause();
    sim.faults().drop_watches();
    // The drop is asynchronous: until the watch is really closed it would still deliver.
    wait_for(
        "the configmap watch to close",
        Duration::from_secs(20),
        || async { Ok((sim.open_watches("configmaps", "") == 0).then_some(())) },
    )
    .await
    .unwrap();
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during", "namespace": ns}})).unwrap();
    sim.compact();
    sim.faults().resume();
    next_is(&mut rx, &mut seen, "init").await;
    next_is(&mut rx, &mut seen, "apply:during").await;
    next_is(&mut rx, &mut seen, "init-done").await;
    api.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    next_is(&mut rx, &mut seen, "apply:after").await;
    api.delete("after", &Default::default()).await.unwrap();
    next_is(&mut rx, &mut seen, "delete:after").await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_watch_from_a_resource_version_and_selector_transitions() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("wsel").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let first = api
        .create(&PostParams::default(), &cm("a", json!({"team": "x"})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let wp = WatchParams::default().labels("team=x").timeout(30);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("b", json!({"team": "y"})))
        .await
        .unwrap();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "z"}}})),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("watch event")
            .expect("stream open")
            .unwrap();
        match ev {
            WatchEvent::Added(o) => got.push(format!("ADDED {}", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => got.push(format!("MODIFIED {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => got.push(format!("DELETED {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        got,
        vec!["ADDED b", "DELETED a"],
        "entering the selector is ADDED, leaving it DELETED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_resource_version_gets_410_expired() {
    let c = TestCluster::start().await.unwrap();
    let Some(sim) = c.sim_only("forcing watch history compaction") else {
        return;
    };
    let ns = c.namespace("wold").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let o = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    sim.compact();
    let mut s = api
        .watch(
            &WatchParams::default(),
            &o.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Error(e) = ev else {
        panic!("expected an ERROR event, got {ev:?}")
    };
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}
