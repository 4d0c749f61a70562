//! Benchmark of `rkcm informer-server` (release build, its own process) against a baseline
//! measured in the same run: the same subscribers watching kube-sim directly.
//!
//! - fan-out: 1, 10 and 50 subscribers on configmaps over the Unix socket, while 2,000
//!   updates flow; events delivered per second until every subscriber holds the final
//!   state, against as many kube-rs watches on kube-sim;
//! - delivery latency (write sent -> event received), p50 and p99, with writes paced at
//!   10,000/s (or as fast as kube-sim accepts them, which is reported);
//! - memory per cached object: the informer-server's RSS growth when it caches 10,000
//!   secrets, against their JSON size.
//!
//! `cargo bench -p rkcm --bench informer_server`

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{EventType, GroupVersionResource, ListRequest, WatchRequest};
use serde_json::json;
use tonic::transport::Channel;

const OBJECTS: usize = 100;
const ROUNDS: usize = 20;

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn configmaps() -> GroupVersionResource {
    GroupVersionResource {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
    }
}

async fn connect(socket: &Path) -> InformerClient<Channel> {
    rkcm_client::informer::connect(&format!("unix://{}", socket.display()), None).expect("client")
}

/// Writes `rounds` rounds of updates to every object, 16 in flight; each value carries the
/// send time.
async fn write_rounds(
    api: &Api<ConfigMap>,
    ns_rounds: std::ops::RangeInclusive<usize>,
    pace: Option<Duration>,
) -> Duration {
    let start = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let rounds: Vec<usize> = ns_rounds.collect();
    let total = (rounds.len() * OBJECTS) as u64;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let api = api.clone();
            let next = next.clone();
            let rounds = rounds.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    if let Some(pace) = pace {
                        let due = start + pace * i as u32;
                        tokio::time::sleep_until(due.into()).await;
                    }
                    let round = rounds[(i as usize) / OBJECTS];
                    let object = (i as usize) % OBJECTS;
                    let patch = json!({"data": {"round": round.to_string(), "sent": now_nanos().to_string()}});
                    let _ = api.patch(&format!("cm-{object}"), &PatchParams::default(), &Patch::Merge(patch)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    start.elapsed()
}

struct Observed {
    events: u64,
    latencies: Vec<u64>,
}

/// Reads events until every object shows `final_round`; returns what it saw.
async fn informer_subscriber(
    mut client: InformerClient<Channel>,
    ns: String,
    final_round: usize,
    ready: tokio::sync::mpsc::Sender<()>,
) -> Observed {
    let request = WatchRequest {
        resource: Some(configmaps()),
        namespace: ns,
        subscriber: "bench".into(),
        ..Default::default()
    };
    let mut stream = client.watch(request).await.expect("watch").into_inner();
    let mut done = std::collections::HashSet::new();
    let mut observed = Observed {
        events: 0,
        latencies: Vec::new(),
    };
    let mut synced = false;
    while let Ok(Some(event)) = stream.message().await {
        match event.r#type() {
            EventType::Synced if !synced => {
                synced = true;
                let _ = ready.send(()).await;
            }
            EventType::Modified => {
                observed.events += 1;
                let object: serde_json::Value =
                    serde_json::from_str(&event.object).unwrap_or_default();
                if let Some(sent) = object["data"]["sent"]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    observed.latencies.push(now_nanos().saturating_sub(sent));
                }
                if object["data"]["round"].as_str() == Some(&final_round.to_string()) {
                    done.insert(event.name);
                    if done.len() == OBJECTS {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    observed
}

async fn direct_subscriber(
    api: Api<ConfigMap>,
    final_round: usize,
    ready: tokio::sync::mpsc::Sender<()>,
) -> Observed {
    let rv = api
        .list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let stream = api
        .watch(&WatchParams::default().timeout(290), &rv)
        .await
        .expect("watch");
    let _ = ready.send(()).await;
    let mut stream = std::pin::pin!(stream);
    let mut done = std::collections::HashSet::new();
    let mut observed = Observed {
        events: 0,
        latencies: Vec::new(),
    };
    while let Some(Ok(event)) = stream.next().await {
        if let WatchEvent::Modified(cm) = event {
            observed.events += 1;
            let data = cm.data.unwrap_or_default();
            if let Some(sent) = data.get("sent").and_then(|s| s.parse::<u64>().ok()) {
                observed.latencies.push(now_nanos().saturating_sub(sent));
            }
            if data.get("round") == Some(&final_round.to_string()) {
                done.insert(cm.metadata.name.unwrap_or_default());
                if done.len() == OBJECTS {
                    break;
                }
            }
        }
    }
    observed
}

/// Starts `n` subscribers of one kind, writes rounds, and returns (elapsed until all hold
/// the final state, events delivered, latencies).
async fn fan_out(
    n: usize,
    via_informer: Option<&Path>,
    api: &Api<ConfigMap>,
    ns: &str,
    rounds: std::ops::RangeInclusive<usize>,
    pace: Option<Duration>,
) -> (Duration, u64, Vec<u64>, Duration) {
    let final_round = *rounds.end();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(n);
    let mut tasks = Vec::new();
    for _ in 0..n {
        let ready = ready_tx.clone();
        tasks.push(match via_informer {
            Some(socket) => tokio::spawn(informer_subscriber(
                connect(socket).await,
                ns.to_string(),
                final_round,
                ready,
            )),
            None => tokio::spawn(direct_subscriber(api.clone(), final_round, ready)),
        });
    }
    for _ in 0..n {
        ready_rx.recv().await;
    }
    let start = Instant::now();
    let write_time = write_rounds(api, rounds, pace).await;
    let mut events = 0;
    let mut latencies = Vec::new();
    for t in tasks {
        if let Ok(o) = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("subscribers finish")
        {
            events += o.events;
            latencies.extend(o.latencies);
        }
    }
    (start.elapsed(), events, latencies, write_time)
}

/// A fresh namespace holding cm-0..cm-OBJECTS at round 0.
async fn namespace_with_configmaps(
    client: &kube::Client,
    ns: &str,
) -> anyhow::Result<Api<ConfigMap>> {
    common::namespace(client, ns, false).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..OBJECTS {
        let cm = json!({"metadata": {"name": format!("cm-{i}")}, "data": {"round": "0"}});
        api.create(&PostParams::default(), &serde_json::from_value(cm)?)
            .await?;
    }
    Ok(api)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1e6
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::without_nodes().await?;
    let (client, kubeconfig) = (cluster.client.clone(), cluster.kubeconfig.clone());
    let mut server = common::InformerServer::start(&kubeconfig, cluster.dir()).await?;
    println!("informer-server benchmark (release; kube-sim in the bench process, informer-server its own process)");
    let round = fan_out_rates(&client, &server.socket).await?;
    delivery_latency(&client, &server.socket, round).await?;
    memory_per_object(&client, &server).await?;
    let _ = server.child.kill().await;
    Ok(())
}

/// Events per second through the informer-server and through direct watches, for 1, 10
/// and 50 subscribers; returns the last round written.
async fn fan_out_rates(client: &kube::Client, socket: &Path) -> anyhow::Result<usize> {
    let mut round = 0;
    println!(
        "fan-out: {OBJECTS} configmaps x {ROUNDS} rounds = {} updates, 16 writes in flight",
        OBJECTS * ROUNDS
    );
    println!(
        "{:>11} | {:>28} | {:>28} | {:>6}",
        "subscribers", "informer-server (UDS)", "baseline: direct watches", "ratio"
    );
    for n in [1usize, 10, 50] {
        let mut results = Vec::new();
        for via in [Some(socket), None] {
            let ns = format!("fan-{n}-{}", if via.is_some() { "rkcm" } else { "direct" });
            let api = namespace_with_configmaps(client, &ns).await?;
            let first = round + 1;
            round += ROUNDS;
            let (elapsed, events, _, _) = fan_out(n, via, &api, &ns, first..=round, None).await;
            results.push((elapsed, events));
        }
        let rate = |(e, n): (Duration, u64)| n as f64 / e.as_secs_f64();
        let cell = |(e, n): (Duration, u64)| {
            format!(
                "{:>9.0} ev/s ({n} in {:.2} s)",
                rate((e, n)),
                e.as_secs_f64()
            )
        };
        println!(
            "{n:>11} | {:>28} | {:>28} | {:>5.2}x",
            cell(results[0]),
            cell(results[1]),
            rate(results[0]) / rate(results[1])
        );
    }

    Ok(round)
}

/// p50 and p99 of write-to-event latency with one subscriber, writes paced at 10,000/s,
/// rounds after `round`.
async fn delivery_latency(
    client: &kube::Client,
    socket: &Path,
    mut round: usize,
) -> anyhow::Result<()> {
    println!("delivery latency (write sent -> event received), one subscriber, writes paced at 10,000/s:");
    for via in [Some(socket), None] {
        let ns = format!("latency-{}", if via.is_some() { "rkcm" } else { "direct" });
        let api = namespace_with_configmaps(client, &ns).await?;
        let first = round + 1;
        round += 100;
        let (_, events, mut latencies, write_time) = fan_out(
            1,
            via,
            &api,
            &ns,
            first..=round,
            Some(Duration::from_micros(100)),
        )
        .await;
        latencies.sort_unstable();
        println!(
            "  {:<26} writes achieved {:>6.0}/s; {events} events; p50 {:.2} ms, p99 {:.2} ms",
            if via.is_some() {
                "informer-server (UDS):"
            } else {
                "baseline, direct watch:"
            },
            (100 * OBJECTS) as f64 / write_time.as_secs_f64(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        );
    }

    Ok(())
}

/// The informer-server's RSS growth per cached secret against the secrets' JSON size.
async fn memory_per_object(
    client: &kube::Client,
    server: &common::InformerServer,
) -> anyhow::Result<()> {
    let pid = server.pid();
    const SECRETS: usize = 10_000;
    let ns = "memory";
    common::namespace(client, ns, false).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let value = "x".repeat(600);
    let created = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let secrets = secrets.clone();
            let created = created.clone();
            let value = value.clone();
            tokio::spawn(async move {
                loop {
                    let i = created.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= SECRETS {
                        break;
                    }
                    let secret = json!({"metadata": {"name": format!("s-{i}"), "labels": {"app": "bench", "index": i.to_string()}},
                        "stringData": {"payload": value}});
                    let _ = secrets.create(&PostParams::default(), &serde_json::from_value(secret).unwrap()).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let before = common::proc_status_bytes(pid, "VmRSS:");
    let mut informer = connect(&server.socket).await;
    // Start caching through a watch that matches nothing, so no response is built.
    let secrets_gvr = GroupVersionResource {
        group: String::new(),
        version: "v1".into(),
        resource: "secrets".into(),
    };
    let mut watch = informer
        .watch(WatchRequest {
            resource: Some(secrets_gvr.clone()),
            label_selector: "app=nothing".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    while let Some(event) = watch.message().await? {
        if event.r#type() == EventType::Synced {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = common::proc_status_bytes(pid, "VmRSS:");
    let list = informer
        .list(ListRequest {
            resource: Some(secrets_gvr),
            namespace: ns.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let json_bytes: usize = list.items.iter().map(String::len).sum();
    drop(list);
    let per_object = after.saturating_sub(before) as f64 / SECRETS as f64;
    let json_per_object = json_bytes as f64 / SECRETS as f64;
    println!(
        "memory: {SECRETS} secrets cached; informer-server RSS +{:.1} MiB = {per_object:.0} B per object; \
         JSON {json_per_object:.0} B per object; ratio {:.2}x",
        after.saturating_sub(before) as f64 / (1 << 20) as f64,
        per_object / json_per_object
    );
    Ok(())
}

fn main() {
    common::main(run());
}
