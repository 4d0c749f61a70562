//! End-to-end tests of `rkcm informer-server`: the real binary as its own process, the
//! test cluster (kube-sim, or RKCM_TEST_KUBECONFIG's), and checks through a gRPC client,
//! the client library, kube-rs, kube-sim's metrics and the real grpcurl.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::store;
use rkcm_conformance::{wait_for, TestCluster};
use rkcm_proto::v1::{EventType, GetRequest, ListRequest, Projection, StatsRequest, WatchRequest};
use serde_json::{json, Value};

async fn configmap(api: &Api<ConfigMap>, name: &str, data: &str) -> ConfigMap {
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": data}})).unwrap();
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create configmap")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_delivers_typed_added_modified_deleted() {
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("typed").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    let first = configmap(&api, "first", "1").await;
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut client = server.client();
    let mut stream = client
        .watch(watch_request(
            gvr("", "v1", "configmaps"),
            &ns,
            "typed-test",
        ))
        .await
        .unwrap()
        .into_inner();
    let initial = until_synced(&mut stream).await.unwrap();
    assert_eq!(
        summary(&initial),
        vec![
            (EventType::Added, "first".into()),
            (EventType::Synced, String::new())
        ]
    );
    let added = &initial[0];
    assert_eq!(added.resource, Some(gvr("", "v1", "configmaps")));
    assert_eq!(added.namespace, ns);
    assert_eq!(Some(&added.uid), first.metadata.uid.as_ref());
    assert_eq!(
        Some(&added.resource_version),
        first.metadata.resource_version.as_ref()
    );
    let object: Value = serde_json::from_str(&added.object).unwrap();
    assert_eq!(object["kind"], "ConfigMap");
    assert_eq!(object["apiVersion"], "v1");
    assert_eq!(object["data"]["k"], "1");
    assert!(
        object["metadata"].get("managedFields").is_none(),
        "managedFields are stripped: {object}"
    );

    let second = configmap(&api, "second", "a").await;
    let event = next_change(&mut stream).await.unwrap();
    assert_eq!(
        (event.r#type(), event.name.as_str()),
        (EventType::Added, "second")
    );
    assert_eq!(Some(&event.uid), second.metadata.uid.as_ref());

    let patched = api
        .patch(
            "second",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "b"}})),
        )
        .await
        .unwrap();
    let event = next_change(&mut stream).await.unwrap();
    assert_eq!(
        (event.r#type(), event.name.as_str()),
        (EventType::Modified, "second")
    );
    assert_eq!(
        Some(&event.resource_version),
        patched.metadata.resource_version.as_ref()
    );
    assert_eq!(
        serde_json::from_str::<Value>(&event.object).unwrap()["data"]["k"],
        "b"
    );

    api.delete("second", &DeleteParams::default())
        .await
        .unwrap();
    let event = next_change(&mut stream).await.unwrap();
    assert_eq!(
        (event.r#type(), event.name.as_str()),
        (EventType::Deleted, "second")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&event.object).unwrap()["data"]["k"],
        "b",
        "the final state"
    );

    // The same cache answers List and Get, and the metadata projection.
    let list = client
        .list(ListRequest {
            resource: Some(gvr("", "v1", "configmaps")),
            namespace: ns.clone(),
            projection: Projection::Metadata as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    let item: Value = serde_json::from_str(&list.items[0]).unwrap();
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert_eq!(item["metadata"]["name"], "first");
    assert!(item.get("data").is_none());
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_watch_receives_only_what_it_missed() {
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("resume").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    configmap(&api, "kept", "1").await;
    configmap(&api, "doomed", "1").await;
    configmap(&api, "changed", "1").await;
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut client = server.client();
    let request = watch_request(gvr("", "v1", "configmaps"), &ns, "resume-test");
    let mut stream = client.watch(request.clone()).await.unwrap().into_inner();
    let initial = until_synced(&mut stream).await.unwrap();
    assert_eq!(initial.len(), 4);
    let resume_from = initial[3].resource_version.clone();
    drop(stream);

    configmap(&api, "new", "1").await;
    api.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    api.patch(
        "changed",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    // The informer-server has seen the last change once a List shows it.
    wait_for(
        "the cache to hold the changes",
        Duration::from_secs(20),
        || {
            let mut client = client.clone();
            let ns = ns.clone();
            async move {
                let list = client
                    .list(ListRequest {
                        resource: Some(gvr("", "v1", "configmaps")),
                        namespace: ns,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                Ok(list
                    .items
                    .iter()
                    .any(|i| i.contains("\"k\":\"2\""))
                    .then_some(()))
            }
        },
    )
    .await
    .unwrap();

    let mut resumed = request.clone();
    resumed.resume_from_resource_version = resume_from;
    let mut stream = client.watch(resumed).await.unwrap().into_inner();
    let missed = until_synced(&mut stream).await.unwrap();
    let mut got = summary(&missed);
    got.sort();
    let mut want = vec![
        (EventType::Added, "new".to_string()),
        (EventType::Modified, "changed".to_string()),
        (EventType::Deleted, "doomed".to_string()),
        (EventType::Synced, String::new()),
    ];
    want.sort();
    assert_eq!(got, want, "only the missed changes, then SYNCED");
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_history_compaction_the_subscriber_gets_reset_and_drops_what_vanished() {
    let cluster = TestCluster::start().await.unwrap();
    let Some(sim) = cluster.sim_only("history compaction") else {
        return;
    };
    let ns = cluster.namespace("reset").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    configmap(&api, "stays", "1").await;
    configmap(&api, "vanishes", "1").await;
    let server = InformerServer::start(&cluster, &[]).await.unwrap();

    // The client library, feeding kube-runtime's own reflector store.
    let (reader, mut writer) = store::<ConfigMap>();
    let events = rkcm_client::informer::watch::<ConfigMap>(
        server.client(),
        watch_request(gvr("", "v1", "configmaps"), &ns, "reset-test"),
    );
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            if let Ok(event) = event {
                // Reported before it is applied, so what the store shows has been reported.
                let _ = seen_tx.send(
                    format!("{event:?}")
                        .split('(')
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
                writer.apply_watcher_event(&event);
            }
        }
    });
    let names = |reader: &kube::runtime::reflector::Store<ConfigMap>| {
        let mut n: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        n.sort();
        n
    };
    wait_for(
        "the initial state in the store",
        Duration::from_secs(30),
        || {
            let n = names(&reader);
            async move { Ok((n == ["stays", "vanishes"]).then_some(())) }
        },
    )
    .await
    .unwrap();
    while seen_rx.try_recv().is_ok() {}

    // While the informer-server cannot re-watch, an object goes and one comes, and the
    // history it would resume from is forgotten.
    sim.faults().pause();
    sim.faults().drop_watches();
    wait_for(
        "the informer-server's configmap watch to close",
        Duration::from_secs(30),
        || async {
            Ok((sim.open_watches("configmaps", "rkcm-informer-server/") == 0).then_some(()))
        },
    )
    .await
    .unwrap();
    sim.delete("v1", "ConfigMap", Some(&ns), "vanishes")
        .unwrap();
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "arrives", "namespace": ns}}))
        .unwrap();
    sim.compact();
    sim.faults().resume();

    wait_for("the store to be replaced", Duration::from_secs(30), || {
        let n = names(&reader);
        async move { Ok((n == ["arrives", "stays"]).then_some(())) }
    })
    .await
    .unwrap();
    let mut kinds = Vec::new();
    while let Ok(kind) = seen_rx.try_recv() {
        kinds.push(kind);
    }
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("Init"),
        "a RESET arrives as Init: {kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "InitDone"), "{kinds:?}");
    let stats = server
        .client()
        .stats(StatsRequest {})
        .await
        .unwrap()
        .into_inner();
    let configmaps = stats
        .resources
        .iter()
        .find(|r| r.resource == Some(gvr("", "v1", "configmaps")))
        .unwrap();
    assert!(configmaps.relists >= 1, "{configmaps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_stays_bounded_while_another_keeps_up() {
    const OBJECTS: usize = 50;
    const UPDATES: usize = 10_000;
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("stall").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    for i in 0..OBJECTS {
        configmap(&api, &format!("cm-{i}"), "0").await;
    }
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut client = server.client();
    let request = watch_request(gvr("", "v1", "configmaps"), &ns, "stalled");
    let mut stalled = client.watch(request.clone()).await.unwrap().into_inner();
    until_synced(&mut stalled).await.unwrap();
    // From here on the stalled subscriber reads nothing.
    let mut fast_request = request.clone();
    fast_request.subscriber = "fast".into();
    let mut fast = client.watch(fast_request).await.unwrap().into_inner();
    until_synced(&mut fast).await.unwrap();
    let fast_task = tokio::spawn(async move {
        let mut latest: BTreeMap<String, String> = BTreeMap::new();
        let mut received = 0usize;
        while let Ok(event) = next_event(&mut fast).await {
            if event.r#type() == EventType::Modified {
                received += 1;
                let object: Value = serde_json::from_str(&event.object).unwrap();
                latest.insert(
                    event.name,
                    object["data"]["k"].as_str().unwrap_or("").to_string(),
                );
                if latest.len() == OBJECTS
                    && latest
                        .values()
                        .all(|v| v == &(UPDATES / OBJECTS).to_string())
                {
                    return Ok((received, latest));
                }
            }
        }
        Err(anyhow::anyhow!(
            "the fast subscriber's stream ended before the final state; had {latest:?}"
        ))
    });

    let max_depth = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let max_depth = max_depth.clone();
        let mut client = client.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(stats) = client.stats(StatsRequest {}).await {
                    for s in stats
                        .into_inner()
                        .subscribers
                        .iter()
                        .filter(|s| s.subscriber == "stalled")
                    {
                        max_depth.fetch_max(s.queue_depth, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // UPDATES writes, round-robin over the objects, 8 at a time.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                for round in 1..=UPDATES / OBJECTS {
                    for i in (w..OBJECTS).step_by(8) {
                        api.patch(
                            &format!("cm-{i}"),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"data": {"k": round.to_string()}})),
                        )
                        .await
                        .expect("patch");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let (received, _) = tokio::time::timeout(Duration::from_secs(120), fast_task)
        .await
        .expect("the fast subscriber reaches the final state")
        .unwrap()
        .unwrap();
    sampler.abort();
    let stats = client.stats(StatsRequest {}).await.unwrap().into_inner();
    let stalled_now = stats
        .subscribers
        .iter()
        .find(|s| s.subscriber == "stalled")
        .expect("still subscribed");
    let max_depth = max_depth
        .load(std::sync::atomic::Ordering::Relaxed)
        .max(stalled_now.queue_depth);
    println!(
        "stalled subscriber: max queue depth {max_depth} for {OBJECTS} objects over {UPDATES} updates \
         ({} coalesced); fast subscriber received {received} MODIFIED",
        stalled_now.events_coalesced
    );
    assert!(
        max_depth <= OBJECTS as u64,
        "queue depth {max_depth} exceeds the {OBJECTS} objects"
    );
    assert!(stalled_now.events_coalesced > 0);
    // The stalled one, once it reads, gets the latest state of every object.
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    while latest.len() < OBJECTS
        || latest
            .values()
            .any(|v| v != &(UPDATES / OBJECTS).to_string())
    {
        let event = next_event(&mut stalled).await.unwrap();
        if event.r#type() == EventType::Modified {
            let object: Value = serde_json::from_str(&event.object).unwrap();
            latest.insert(
                event.name,
                object["data"]["k"].as_str().unwrap_or("").to_string(),
            );
        }
    }
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_subscribers_make_one_watch_on_the_api_server() {
    let cluster = TestCluster::start().await.unwrap();
    let Some(_) = cluster.sim_only("kube_sim_watches") else {
        return;
    };
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut streams = Vec::new();
    for i in 0..5 {
        let mut stream = server
            .client()
            .watch(watch_request(
                gvr("", "v1", "pods"),
                "",
                &format!("sub-{i}"),
            ))
            .await
            .unwrap()
            .into_inner();
        until_synced(&mut stream).await.unwrap();
        streams.push(stream);
    }
    let agent = concat!("rkcm-informer-server/", env!("CARGO_PKG_VERSION"));
    let metrics = wait_for(
        "kube-sim to count the informer-server's watches",
        Duration::from_secs(20),
        || {
            let client = cluster.client.clone();
            async move {
                let text = client
                    .request_text(http::Request::get("/metrics").body(vec![])?)
                    .await?;
                Ok(text
                    .lines()
                    .any(|l| {
                        l.starts_with("kube_sim_watches{resource=\"pods\"") && l.contains(agent)
                    })
                    .then_some(text))
            }
        },
    )
    .await
    .unwrap();
    let pod_watches: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("kube_sim_watches{resource=\"pods\"") && l.contains(agent))
        .collect();
    assert_eq!(pod_watches.len(), 1, "{pod_watches:?}");
    assert!(
        pod_watches[0].ends_with(" 1"),
        "exactly one watch on pods: {pod_watches:?}"
    );
    let ours = server.metrics_text().await.unwrap();
    assert!(
        ours.lines().any(
            |l| l.starts_with("rkcm_informer_watches{resource=\"v1/pods\"}") && l.ends_with(" 5")
        ),
        "{ours}"
    );
    drop(streams);
    // A client that goes away frees its queue at once.
    wait_for(
        "the subscribers to be gone",
        Duration::from_secs(10),
        || {
            let mut client = server.client();
            async move {
                let stats = client.stats(StatsRequest {}).await?.into_inner();
                Ok(stats.subscribers.is_empty().then_some(()))
            }
        },
    )
    .await
    .unwrap();
    let _ = Api::<Pod>::all(cluster.client.clone());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let cluster = TestCluster::start().await.unwrap();
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut client = server.client();
    let status = client
        .watch(watch_request(gvr("", "v1", "podz"), "", "bad"))
        .await
        .expect_err("unknown resource");
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains("podz"), "{}", status.message());

    let mut request = watch_request(gvr("", "v1", "pods"), "", "bad");
    request.label_selector = "app in (web".into();
    let status = client.watch(request).await.expect_err("bad selector");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        // The API server's own parse error (labels.Parse).
        status
            .message()
            .contains("unable to parse requirement: found '', expected: ',' or ')'"),
        "{}",
        status.message()
    );

    let mut request = watch_request(gvr("apps", "v1", "deployments"), "", "bad");
    request.field_selector = "spec.nodeName=n1".into();
    let status = client.watch(request).await.expect_err("unknown field");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("spec.nodeName"),
        "{}",
        status.message()
    );

    // The socket is private.
    let mode = std::fs::metadata(&server.socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    // Plain TCP is refused, saying why.
    let out = tokio::process::Command::new(RKCM)
        .args([
            "informer-server",
            "--listen",
            "tcp://127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(&cluster.kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without mutual TLS"), "{stderr}");

    // A malformed kubeconfig is an error, not a panic.
    let bad = server.dir.path().join("bad-kubeconfig");
    std::fs::write(&bad, "{not yaml").unwrap();
    let out = tokio::process::Command::new(RKCM)
        .args(["informer-server", "--listen"])
        .arg(format!(
            "unix://{}",
            server.dir.path().join("other.sock").display()
        ))
        .arg("--kubeconfig")
        .arg(&bad)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kubeconfig") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_api_server() {
    let cluster = TestCluster::start().await.unwrap();
    let Some(sim) = cluster.sim_only("fault injection") else {
        return;
    };
    let server = InformerServer::start(&cluster, &["--warm", "configmaps"])
        .await
        .unwrap();
    let channel = rkcm_client::informer::channel(&server.address(), None).unwrap();
    let health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status_of = |service: &'static str| {
        let mut health = health.clone();
        async move {
            let response = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: service.into(),
                })
                .await?
                .into_inner();
            anyhow::Ok(response.status())
        }
    };
    use tonic_health::pb::health_check_response::ServingStatus;
    wait_for("configmaps to serve", Duration::from_secs(30), || async {
        Ok((status_of("v1/configmaps").await? == ServingStatus::Serving).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        status_of("rkcm.informer.v1.Informer").await.unwrap(),
        ServingStatus::Serving
    );

    // The API server fails every request: the watch breaks and cannot be reopened.
    sim.faults()
        .fail_next(u32::MAX, kube_sim::faults::Failure::Internal);
    sim.faults().drop_watches();
    wait_for(
        "configmaps to be NOT_SERVING",
        Duration::from_secs(30),
        || async {
            // Breaks again a watch that was still being opened at the first drop (health
            // turns SERVING after the list, before the watch is registered).
            sim.faults().drop_watches();
            Ok((status_of("v1/configmaps").await? == ServingStatus::NotServing).then_some(()))
        },
    )
    .await
    .unwrap();
    assert_eq!(
        status_of("rkcm.informer.v1.Informer").await.unwrap(),
        ServingStatus::Serving,
        "the server stays up"
    );
    sim.faults()
        .fail_next(0, kube_sim::faults::Failure::Internal);
    wait_for(
        "configmaps to serve again",
        Duration::from_secs(60),
        || async {
            Ok((status_of("v1/configmaps").await? == ServingStatus::Serving).then_some(()))
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_lists_describes_and_watches_without_the_proto_file() {
    let grpcurl = grpcurl().unwrap();
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("grpcurl").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    configmap(&api, "hello", "world").await;
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let socket = server.socket.to_string_lossy().into_owned();
    let run = |args: Vec<String>| {
        let grpcurl = grpcurl.clone();
        async move {
            let out = tokio::process::Command::new(&grpcurl)
                .args(&args)
                .output()
                .await
                .expect("run grpcurl");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (ok, listed, err) = run(vec![
        "-plaintext".into(),
        "-unix".into(),
        socket.clone(),
        "list".into(),
    ])
    .await;
    assert!(ok, "grpcurl list: {err}");
    assert!(
        listed.lines().any(|l| l == "rkcm.informer.v1.Informer"),
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l == "grpc.health.v1.Health"),
        "{listed}"
    );

    let (ok, described, err) = run(vec![
        "-plaintext".into(),
        "-unix".into(),
        socket.clone(),
        "describe".into(),
        "rkcm.informer.v1.WatchEvent".into(),
    ])
    .await;
    assert!(ok, "grpcurl describe: {err}");
    assert!(described.contains("string object = 7;"), "{described}");

    let request = json!({"resource": {"version": "v1", "resource": "configmaps"}, "namespace": ns})
        .to_string();
    let (_, watched, err) = run(vec![
        "-plaintext".into(),
        "-unix".into(),
        "-max-time".into(),
        "5".into(),
        "-d".into(),
        request,
        socket.clone(),
        "rkcm.informer.v1.Informer/Watch".into(),
    ])
    .await;
    // -max-time ends the stream with DeadlineExceeded; what was printed is what counts.
    let added = watched
        .find("\"type\": \"ADDED\"")
        .unwrap_or_else(|| panic!("no ADDED event in {watched}; stderr {err}"));
    assert!(watched.contains("\"name\": \"hello\""), "{watched}");
    assert!(watched.contains("\"type\": \"SYNCED\""), "{watched}");
    // The object is JSON text a person can read (a string field, not base64 bytes).
    assert!(
        watched[added..].contains(r#"\"data\":{\"k\":\"world\"}"#),
        "{watched}"
    );
    cluster.cleanup().await;
}

/// Every JSON message grpcurl printed (one pretty-printed object per message).
fn grpcurl_messages(out: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(out)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect()
}

/// One grpcurl call on the server's socket: (stdout, stderr). `max_time` (seconds) ends
/// a Watch with DeadlineExceeded; what was printed before is what counts.
async fn grpcurl_call(
    grpcurl: &std::path::Path,
    server: &InformerServer,
    method: &str,
    request: Value,
    max_time: Option<&str>,
) -> (String, String) {
    let mut args: Vec<String> = vec!["-plaintext".into(), "-unix".into()];
    if let Some(seconds) = max_time {
        args.extend(["-max-time".into(), seconds.into()]);
    }
    args.extend([
        "-d".into(),
        request.to_string(),
        server.socket.to_string_lossy().into_owned(),
        format!("rkcm.informer.v1.Informer/{method}"),
    ]);
    let out = tokio::process::Command::new(grpcurl)
        .args(&args)
        .output()
        .await
        .expect("run grpcurl");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_shows_objects_as_nested_json_when_asked() {
    let grpcurl = grpcurl().unwrap();
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("readable").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    configmap(&api, "hello", "world").await;
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let resource = json!({"version": "v1", "resource": "configmaps"});

    // -max-time ends the stream with DeadlineExceeded; what was printed is what counts.
    let (watched, err) = grpcurl_call(
        &grpcurl,
        &server,
        "Watch",
        json!({"resource": resource, "namespace": ns, "readable": true}),
        Some("5"),
    )
    .await;
    let events = grpcurl_messages(&watched);
    let added = events
        .iter()
        .find(|e| e["type"] == "ADDED" && e["name"] == "hello")
        .unwrap_or_else(|| panic!("no ADDED event for hello in {watched}; stderr {err}"));
    // The object is nested JSON in the output, not an escaped string.
    assert_eq!(added["readableObject"]["data"]["k"], "world", "{watched}");
    assert_eq!(
        added["readableObject"]["metadata"]["name"], "hello",
        "{watched}"
    );
    assert_eq!(added["readableObject"]["kind"], "ConfigMap", "{watched}");
    assert!(added.get("object").is_none(), "{watched}");
    assert!(!watched.contains(r#"\"data\""#), "{watched}");
    assert!(events.iter().any(|e| e["type"] == "SYNCED"), "{watched}");

    // List and Get render the same way on request, and as JSON text without it.
    let (listed, err) = grpcurl_call(
        &grpcurl,
        &server,
        "List",
        json!({"resource": resource, "namespace": ns, "readable": true}),
        None,
    )
    .await;
    let list = grpcurl_messages(&listed);
    let items = list
        .first()
        .and_then(|l| l["readableItems"].as_array())
        .unwrap_or_else(|| panic!("no readableItems in {listed}; stderr {err}"));
    assert!(
        items
            .iter()
            .any(|i| i["metadata"]["name"] == "hello" && i["data"]["k"] == "world"),
        "{listed}"
    );
    assert!(list[0].get("items").is_none(), "{listed}");
    let (got, err) = grpcurl_call(
        &grpcurl,
        &server,
        "Get",
        json!({"resource": resource, "namespace": ns, "name": "hello", "readable": true}),
        None,
    )
    .await;
    let got = grpcurl_messages(&got);
    assert_eq!(
        got.first().map(|g| &g["readableObject"]["data"]["k"]),
        Some(&json!("world")),
        "{got:?}; stderr {err}"
    );
    let (plain, _) = grpcurl_call(
        &grpcurl,
        &server,
        "Get",
        json!({"resource": resource, "namespace": ns, "name": "hello"}),
        None,
    )
    .await;
    let plain = grpcurl_messages(&plain);
    let text = plain
        .first()
        .and_then(|g| g["object"].as_str())
        .unwrap_or_default();
    let object: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{plain:?}"));
    assert_eq!(object["data"]["k"], "world");
    assert!(plain[0].get("readableObject").is_none(), "{plain:?}");
    cluster.cleanup().await;
}

/// `fields` keeps only the named fields (and the type and metadata) in Watch, List and
/// Get; two subscribers of one projection both receive it; selectors still match the
/// whole object; bad paths and fields with METADATA are refused; grpcurl can ask for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projection_keeps_only_the_named_fields() {
    let grpcurl = grpcurl().unwrap();
    let cluster = TestCluster::start().await.unwrap();
    let ns = cluster.namespace("projection").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &ns);
    let made: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "two", "labels": {"app": "web"}},
        "data": {"a": "1", "b": "2"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &made).await.unwrap();
    let server = InformerServer::start(&cluster, &[]).await.unwrap();
    let mut client = server.client();
    let configmaps = gvr("", "v1", "configmaps");
    let fields = vec!["data.a".to_string(), "binaryData".to_string()];
    let projected = |object: &str| {
        let object: Value = serde_json::from_str(object).unwrap();
        assert_eq!(object["kind"], "ConfigMap", "{object}");
        assert_eq!(object["metadata"]["labels"]["app"], "web", "{object}");
        assert!(
            object["metadata"].get("managedFields").is_none(),
            "{object}"
        );
        assert!(object["data"].get("b").is_none(), "{object}");
        object["data"]["a"].as_str().unwrap_or_default().to_string()
    };
    let mut streams = Vec::new();
    for subscriber in ["projected-1", "projected-2"] {
        let request = WatchRequest {
            label_selector: "app=web".into(),
            fields: fields.clone(),
            ..watch_request(configmaps.clone(), &ns, subscriber)
        };
        let mut stream = client.watch(request).await.unwrap().into_inner();
        let initial = until_synced(&mut stream).await.unwrap();
        assert_eq!(summary(&initial)[0], (EventType::Added, "two".into()));
        assert_eq!(projected(&initial[0].object), "1");
        streams.push(stream);
    }
    api.patch(
        "two",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "3", "b": "4"}})),
    )
    .await
    .unwrap();
    for stream in &mut streams {
        let event = next_change(stream).await.unwrap();
        assert_eq!(event.r#type(), EventType::Modified);
        assert_eq!(projected(&event.object), "3");
    }

    let list = client
        .list(ListRequest {
            resource: Some(configmaps.clone()),
            namespace: ns.clone(),
            fields: fields.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    assert_eq!(projected(&list.items[0]), "3");
    let got = client
        .get(GetRequest {
            resource: Some(configmaps.clone()),
            namespace: ns.clone(),
            name: "two".into(),
            fields: fields.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(projected(&got.object), "3");

    for (fields, projection) in [
        (vec!["data..a".to_string()], Projection::Full),
        (fields.clone(), Projection::Metadata),
    ] {
        let refused = client
            .list(ListRequest {
                resource: Some(configmaps.clone()),
                fields,
                projection: projection as i32,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    }

    let (watched, err) = grpcurl_call(
        &grpcurl,
        &server,
        "Watch",
        json!({"resource": {"version": "v1", "resource": "configmaps"}, "namespace": ns,
            "fields": ["data.a"], "readable": true}),
        Some("5"),
    )
    .await;
    let events = grpcurl_messages(&watched);
    let added = events
        .iter()
        .find(|e| e["type"] == "ADDED" && e["name"] == "two")
        .unwrap_or_else(|| panic!("no ADDED event for two in {watched}; stderr {err}"));
    assert_eq!(
        added["readableObject"]["data"],
        json!({"a": "3"}),
        "{watched}"
    );
    cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_serves_only_clients_with_a_certificate_from_the_client_ca() {
    use rkcm_client::informer::{connect, ClientTls};
    let cluster = TestCluster::start().await.unwrap();
    let port = free_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let pki = kube_sim::certs::ClusterPki::generate(addr).unwrap();
    let other = kube_sim::certs::ClusterPki::generate(addr).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let cert = write("tls.crt", &pki.serving_cert_pem);
    let key = write("tls.key", &pki.serving_key_pem);
    let ca = write("ca.crt", &pki.ca_pem);
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = tokio::process::Command::new(RKCM)
        .arg("informer-server")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--listen")
        .arg(format!("tcp://{addr}"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--client-ca")
        .arg(&ca)
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let tls = |pki: &kube_sim::certs::ClusterPki| ClientTls {
        cert: pki.admin_cert_pem.clone().into_bytes(),
        key: pki.admin_key_pem.clone().into_bytes(),
        ca: pki.ca_pem.clone().into_bytes(),
        domain: Some("localhost".into()),
    };
    let trusted = connect(&format!("tcp://{addr}"), Some(tls(&pki))).unwrap();
    let resources = wait_for(
        "the mutual-TLS server to answer",
        Duration::from_secs(30),
        || {
            let mut client = trusted.clone();
            async move {
                Ok(client
                    .list_resources(rkcm_proto::v1::ListResourcesRequest {})
                    .await
                    .ok())
            }
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; log: {}",
            std::fs::read_to_string(dir.path().join("log")).unwrap_or_default()
        )
    });
    assert!(resources
        .into_inner()
        .resources
        .iter()
        .any(|r| r.resource == "pods" && r.kind == "Pod"));

    // A client certificate from another CA is refused.
    let mut stranger_tls = tls(&other);
    stranger_tls.ca = pki.ca_pem.clone().into_bytes();
    let mut stranger = connect(&format!("tcp://{addr}"), Some(stranger_tls)).unwrap();
    assert!(stranger
        .list_resources(rkcm_proto::v1::ListResourcesRequest {})
        .await
        .is_err());
    // No client certificate at all: a plain TLS client cannot even complete a call.
    assert!(connect(&format!("tcp://{addr}"), None).is_err());
    let _ = child.kill().await;
}
