//! The chaos test (issue 31): two launchers on kube-sim with simulated nodes, a mixed
//! workload, and user actions drawn from a seed (scale, set image, deletions with
//! background, foreground and orphan propagation, a Job, a namespace deletion)
//! interleaved with faults (SIGKILL of the informer-server, a worker, the collector or the
//! leading launcher; dropped watches, forced 410s, bursts of 429 and 500, a paused API
//! server); then exact counts once the cluster has converged.
//!
//! It is part of the default test command in its short form: one seed ([`DEFAULT_SEED`]),
//! scale 1, about 40 s. `RKCM_CHAOS_SEED` picks another seed, `RKCM_CHAOS_SCALE`
//! multiplies the workload and the number of steps, `RKCM_CHAOS=0` skips it. Every step is printed with its time since start; a failure says what was
//! expected, what was seen, the seed and the whole step log, and copies the launchers'
//! logs to the temporary directory (`RKCM_CHAOS_KEEP_LOGS=1` copies them on success
//! too). kube-sim only (the faults are kube-sim's).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta};
use kube_sim::faults::Failure;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

/// A seed that passes reliably (checked on every change to this test).
const DEFAULT_SEED: u64 = 2;
const NODES: usize = 3;
const WORKLOAD_NAMESPACES: usize = 4;
/// Deployments per unit of scale, and their initial replicas.
const DEPLOYMENTS: usize = 12;
const REPLICAS: i32 = 3;
/// Deletions stop with this many Deployments left per unit of scale.
const MIN_LIVE: usize = 4;
const IMAGES: [&str; 3] = [
    "registry.k8s.io/pause:3.9",
    "registry.k8s.io/pause:3.10",
    "registry.k8s.io/pause:3.8",
];
/// How long one step (an action retried through injected errors, a failover) may take.
const STEP_WAIT: Duration = Duration::from_secs(60);
const JOB: &str = "batch";
const JOB_COMPLETIONS: i32 = 3;
const STATEFUL_SET: &str = "web";
const STATEFUL_REPLICAS: usize = 3;
const DAEMON_SET: &str = "agent";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    KillInformer,
    KillWorker,
    KillCollector,
    KillLeader,
    DropWatches,
    TooManyRequests,
    InternalErrors,
    Pause,
    Compact,
}

const FAULTS: [Fault; 9] = [
    Fault::KillInformer,
    Fault::KillWorker,
    Fault::KillCollector,
    Fault::KillLeader,
    Fault::DropWatches,
    Fault::TooManyRequests,
    Fault::InternalErrors,
    Fault::Pause,
    Fault::Compact,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Background,
    Foreground,
    Orphan,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Fault(Fault),
    Scale,
    SetImage,
    Delete(Policy),
    CreateJob,
    DeleteNamespace,
}

enum Fate {
    Live,
    /// Deleted with `policy`; `sets` are the UIDs of the ReplicaSets it owned just before.
    Deleted {
        policy: Policy,
        uid: String,
        sets: Vec<String>,
    },
}

/// What the test expects of one Deployment.
struct Workload {
    ns: String,
    name: String,
    replicas: i32,
    image: &'static str,
    fate: Fate,
}

struct Chaos {
    cluster: TestCluster,
    /// A copy of the rkcm binary the launchers run (a rebuild during the run would
    /// otherwise leave them unable to restart a child).
    binary: std::path::PathBuf,
    _binary_dir: tempfile::TempDir,
    _nodes: Option<common::SimNodes>,
    lease: String,
    /// Live launchers: one leads, one stands by.
    launchers: Vec<Launcher>,
    /// Killed leaders, kept for their logs.
    retired: Vec<Launcher>,
    seed: u64,
    scale: usize,
    rng: StdRng,
    start: Instant,
    log: Vec<String>,
    faults: usize,
    actions: usize,
    namespaces: Vec<String>,
    doomed: String,
    doomed_deleted: bool,
    job_created: bool,
    deployments: Vec<Workload>,
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

fn sigkill(pid: u32) {
    // SAFETY: kill(2) on a test-owned process (a launcher's child, found by its runtime
    // directory in /proc).
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn ready(pod: &Pod) -> bool {
    running(pod)
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("?")
}

fn deployment_manifest(ns: &str, name: &str, replicas: i32, image: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": image}]}}}})
}

async fn list<K>(api: Api<K>) -> anyhow::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(&ListParams::default()).await?.items)
}

impl Chaos {
    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn note(&mut self, what: impl std::fmt::Display) {
        let line = format!("{:>7.2}s {what}", self.elapsed());
        println!("{line}");
        self.log.push(line);
    }

    fn sim(&self) -> &kube_sim::KubeSim {
        self.cluster
            .sim
            .as_ref()
            .expect("the chaos test runs on kube-sim only")
    }

    /// Copies the launchers' logs (each with its children's output) out of their
    /// temporary directories: `rkcm-chaos-seedN-launcherI-IDENTITY.log` in the temporary
    /// directory.
    fn save_logs(&self) -> Vec<String> {
        let mut saved = Vec::new();
        for (i, launcher) in self.retired.iter().chain(&self.launchers).enumerate() {
            let path = std::env::temp_dir().join(format!(
                "rkcm-chaos-seed{}-launcher{i}-{}.log",
                self.seed,
                launcher.identity().unwrap_or_default()
            ));
            if std::fs::write(&path, launcher.log()).is_ok() {
                saved.push(path.display().to_string());
            }
        }
        saved
    }

    /// Fails the test: what went wrong, the seed, the step log, and the launchers' logs
    /// (copied out of their temporary directories, the current leader's tail inline).
    fn fail(&self, what: impl std::fmt::Display) -> ! {
        let saved = self.save_logs();
        let tail = self
            .launchers
            .iter()
            .find(|l| !l.children("worker").is_empty())
            .map(|l| {
                let log = l.log();
                let lines: Vec<&str> = log.lines().collect();
                lines[lines.len().saturating_sub(60)..].join("\n")
            })
            .unwrap_or_default();
        panic!(
            "chaos seed {} (RKCM_CHAOS_SEED={} RKCM_CHAOS_SCALE={}), {:.1}s: {what}\n\
             steps:\n{}\nlauncher logs: {}\nleader's log (tail):\n{tail}",
            self.seed,
            self.seed,
            self.scale,
            self.elapsed(),
            self.log.join("\n"),
            saved.join(" ")
        )
    }

    async fn holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.cluster.client.clone(), "kube-system");
        leases
            .get_opt(&self.lease)
            .await
            .ok()??
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    }

    /// The index of the live launcher that holds the Lease, waiting for one.
    async fn leader(&self) -> usize {
        let identities: Vec<Option<String>> =
            self.launchers.iter().map(Launcher::identity).collect();
        let found = wait_for("a live launcher to hold the Lease", STEP_WAIT, || async {
            let holder = self.holder().await;
            Ok(holder.and_then(|h| identities.iter().position(|id| id.as_deref() == Some(&h))))
        })
        .await;
        found.unwrap_or_else(|e| self.fail(format!("{e:#}")))
    }

    /// kubectl, retried through injected errors.
    async fn kubectl(&self, args: &[&str]) {
        let done = wait_for(
            &format!("kubectl {}", args.join(" ")),
            STEP_WAIT,
            || async { Ok(self.cluster.kubectl_ok(args).await.map(|_| ()).ok()) },
        )
        .await;
        done.unwrap_or_else(|e| self.fail(format!("{e:#}")));
    }

    async fn setup(&mut self) {
        let leader = self.leader().await;
        let holder = self.launchers[leader].identity().unwrap_or_default();
        self.note(format!("launcher {holder} leads, the other stands by"));
        for i in 0..WORKLOAD_NAMESPACES {
            let ns = self
                .cluster
                .namespace(&format!("chaos{i}"))
                .await
                .unwrap_or_else(|e| self.fail(format!("creating a namespace: {e:#}")));
            self.namespaces.push(ns);
        }
        self.doomed = self
            .cluster
            .namespace("chaos-doomed")
            .await
            .unwrap_or_else(|e| self.fail(format!("creating a namespace: {e:#}")));
        let mut items = Vec::new();
        for i in 0..DEPLOYMENTS * self.scale {
            let ns = self.namespaces[i % WORKLOAD_NAMESPACES].clone();
            let name = format!("d{i:03}");
            items.push(deployment_manifest(&ns, &name, REPLICAS, IMAGES[0]));
            self.deployments.push(Workload {
                ns,
                name,
                replicas: REPLICAS,
                image: IMAGES[0],
                fate: Fate::Live,
            });
        }
        let (sts_ns, ds_ns, doomed) = (
            &self.namespaces[1 % WORKLOAD_NAMESPACES],
            &self.namespaces[2 % WORKLOAD_NAMESPACES],
            &self.doomed,
        );
        items.push(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": STATEFUL_SET, "namespace": sts_ns},
            "spec": {"replicas": STATEFUL_REPLICAS, "serviceName": STATEFUL_SET,
                "selector": {"matchLabels": {"app": STATEFUL_SET}},
                "template": {"metadata": {"labels": {"app": STATEFUL_SET}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "c", "image": IMAGES[0]}]}}}}));
        items.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": DAEMON_SET, "namespace": ds_ns},
            "spec": {"selector": {"matchLabels": {"app": DAEMON_SET}},
                "template": {"metadata": {"labels": {"app": DAEMON_SET}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "c", "image": IMAGES[0]}]}}}}));
        items.push(deployment_manifest(doomed, "inner", 2, IMAGES[0]));
        for i in 0..5 {
            items.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm{i}"), "namespace": doomed}, "data": {"k": "v"}}));
        }
        items.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": doomed}, "stringData": {"k": "v"}}));
        let manifests: Vec<String> = items.iter().map(|m| m.to_string()).collect();
        if let Err(e) = self
            .cluster
            .kubectl_stdin(&["create", "-f", "-"], &manifests.join("\n"))
            .await
        {
            self.fail(format!("creating the workloads: {e:#}"));
        }
        self.note(format!(
            "created {} Deployments x {REPLICAS} over {WORKLOAD_NAMESPACES} namespaces, \
             StatefulSet {STATEFUL_SET} ({STATEFUL_REPLICAS}), DaemonSet {DAEMON_SET}, \
             namespace {} with content",
            self.deployments.len(),
            self.doomed
        ));
        self.converge("the initial workloads", Duration::from_secs(120), 1)
            .await;
    }

    /// The steps of a run: every fault kind and every kind of action at least `scale`
    /// times, some more faults at random, shuffled by the seed; an orphan deletion right
    /// after each SIGKILL of the collector or the leader.
    fn schedule(&mut self) -> Vec<Step> {
        let scale = self.scale;
        let mut steps = Vec::new();
        for _ in 0..scale {
            steps.extend(FAULTS.iter().map(|f| Step::Fault(*f)));
        }
        let others: Vec<Fault> = FAULTS
            .iter()
            .copied()
            .filter(|f| *f != Fault::KillLeader)
            .collect();
        for _ in 0..4 * scale {
            let fault = *others.choose(&mut self.rng).expect("faults");
            steps.push(Step::Fault(fault));
        }
        for _ in 0..2 * scale {
            steps.extend([
                Step::Delete(Policy::Background),
                Step::Delete(Policy::Foreground),
            ]);
        }
        for _ in 0..scale {
            steps.push(Step::Delete(Policy::Orphan));
        }
        for _ in 0..6 * scale {
            steps.extend([Step::Scale, Step::SetImage]);
        }
        steps.shuffle(&mut self.rng);
        // More orphan deletions right behind the collector's restarts (killed alone or
        // with the leading launcher): the window in which issue 31 lost ReplicaSets.
        let kills: Vec<usize> = (0..steps.len())
            .filter(|i| {
                matches!(
                    steps[*i],
                    Step::Fault(Fault::KillCollector | Fault::KillLeader)
                )
            })
            .collect();
        for kill in kills.into_iter().rev() {
            steps.insert(kill + 1, Step::Delete(Policy::Orphan));
        }
        // The Job and the namespace deletion somewhere in the first half, so the faults
        // after them hit them.
        let half = steps.len() / 2;
        let at = self.rng.random_range(0..=half);
        steps.insert(at, Step::CreateJob);
        let at = self.rng.random_range(0..=half);
        steps.insert(at, Step::DeleteNamespace);
        steps
    }

    fn live(&mut self) -> usize {
        let live: Vec<usize> = (0..self.deployments.len())
            .filter(|i| matches!(self.deployments[*i].fate, Fate::Live))
            .collect();
        *live.choose(&mut self.rng).expect("a live Deployment")
    }

    async fn step(&mut self, step: Step) {
        match step {
            Step::Fault(fault) => self.fault(fault).await,
            Step::Scale => {
                self.actions += 1;
                let i = self.live();
                let current = self.deployments[i].replicas;
                let replicas = loop {
                    let r = self.rng.random_range(1..=5);
                    if r != current {
                        break r;
                    }
                };
                let w = &self.deployments[i];
                let (ns, name) = (w.ns.clone(), w.name.clone());
                self.kubectl(&[
                    "scale",
                    &format!("deployment/{name}"),
                    &format!("--replicas={replicas}"),
                    "-n",
                    &ns,
                ])
                .await;
                self.deployments[i].replicas = replicas;
                self.note(format!("scale {ns}/{name} {current} -> {replicas}"));
            }
            Step::SetImage => {
                self.actions += 1;
                let i = self.live();
                let current = self.deployments[i].image;
                let others: Vec<&'static str> =
                    IMAGES.iter().copied().filter(|i| *i != current).collect();
                let image = *others.choose(&mut self.rng).expect("images");
                let w = &self.deployments[i];
                let (ns, name) = (w.ns.clone(), w.name.clone());
                self.kubectl(&[
                    "set",
                    "image",
                    &format!("deployment/{name}"),
                    &format!("c={image}"),
                    "-n",
                    &ns,
                ])
                .await;
                self.deployments[i].image = image;
                self.note(format!("set image {ns}/{name} {current} -> {image}"));
            }
            Step::Delete(policy) => {
                let live = self
                    .deployments
                    .iter()
                    .filter(|w| matches!(w.fate, Fate::Live))
                    .count();
                if live <= MIN_LIVE * self.scale {
                    self.note(format!(
                        "delete propagationPolicy={policy:?}: skipped, {live} Deployments left"
                    ));
                    return;
                }
                self.actions += 1;
                let i = self.live();
                self.delete(i, policy).await;
            }
            Step::CreateJob => {
                self.actions += 1;
                let ns = self.namespaces[0].clone();
                let job = json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": JOB, "namespace": ns},
                    "spec": {"completions": JOB_COMPLETIONS, "parallelism": 2,
                        "template": {"metadata": {"annotations": {"sim.rkcm.io/exit-after": "300ms"}},
                            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                "containers": [{"name": "c", "image": IMAGES[0]}]}}}});
                let created = wait_for("the Job to be created", STEP_WAIT, || async {
                    match self
                        .cluster
                        .kubectl_stdin(&["apply", "-f", "-"], &job.to_string())
                        .await
                    {
                        Ok(_) => Ok(Some(())),
                        Err(_) => Ok(None),
                    }
                })
                .await;
                created.unwrap_or_else(|e| self.fail(format!("{e:#}")));
                self.job_created = true;
                self.note(format!(
                    "create Job {ns}/{JOB} (completions {JOB_COMPLETIONS}, parallelism 2)"
                ));
            }
            Step::DeleteNamespace => {
                self.actions += 1;
                let namespaces: Api<Namespace> = Api::all(self.cluster.client.clone());
                let doomed = self.doomed.clone();
                let deleted = wait_for("the namespace deletion", STEP_WAIT, || async {
                    match namespaces.delete(&doomed, &DeleteParams::default()).await {
                        Ok(_) => Ok(Some(())),
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Some(())),
                        Err(e) => Err(e.into()),
                    }
                })
                .await;
                deleted.unwrap_or_else(|e| self.fail(format!("{e:#}")));
                self.doomed_deleted = true;
                self.note(format!("delete namespace {doomed}"));
            }
        }
    }

    async fn delete(&mut self, i: usize, policy: Policy) {
        let (ns, name) = (
            self.deployments[i].ns.clone(),
            self.deployments[i].name.clone(),
        );
        let deployments: Api<Deployment> = Api::namespaced(self.cluster.client.clone(), &ns);
        let sets: Api<ReplicaSet> = Api::namespaced(self.cluster.client.clone(), &ns);
        let selector = format!("app={name}");
        let found = wait_for(
            &format!("{ns}/{name} and its ReplicaSets"),
            STEP_WAIT,
            || async {
                let uid = deployments
                    .get(&name)
                    .await?
                    .metadata
                    .uid
                    .unwrap_or_default();
                let owned: Vec<String> = sets
                    .list(&ListParams::default().labels(&selector))
                    .await?
                    .items
                    .into_iter()
                    .filter(|rs| controller_uid(&rs.metadata) == Some(uid.as_str()))
                    .filter_map(|rs| rs.metadata.uid)
                    .collect();
                Ok(Some((uid, owned)))
            },
        )
        .await;
        let (uid, owned) = found.unwrap_or_else(|e| self.fail(format!("{e:#}")));
        let params = match policy {
            Policy::Background => DeleteParams::background(),
            Policy::Foreground => DeleteParams::foreground(),
            Policy::Orphan => DeleteParams::orphan(),
        };
        let deleted = wait_for(&format!("deleting {ns}/{name}"), STEP_WAIT, || async {
            match deployments.delete(&name, &params).await {
                Ok(_) => Ok(Some(())),
                // An earlier attempt went through before its answer was lost.
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Some(())),
                Err(e) => Err(e.into()),
            }
        })
        .await;
        deleted.unwrap_or_else(|e| self.fail(format!("{e:#}")));
        self.note(format!(
            "delete {ns}/{name} propagationPolicy={policy:?} (it owned {} ReplicaSet(s))",
            owned.len()
        ));
        self.deployments[i].fate = Fate::Deleted {
            policy,
            uid,
            sets: owned,
        };
    }

    /// SIGKILL the leader's child whose command line contains `needle`.
    async fn kill_child(&mut self, needle: &str, what: &str) {
        let leader = self.leader().await;
        let pids = self.launchers[leader].children(needle);
        match pids.first() {
            Some(pid) => {
                sigkill(*pid);
                self.note(format!("fault: SIGKILL the leader's {what} (pid {pid})"));
            }
            None => self.note(format!(
                "fault: SIGKILL the leader's {what}: none running (restarting), skipped"
            )),
        }
    }

    async fn fault(&mut self, fault: Fault) {
        self.faults += 1;
        match fault {
            Fault::KillInformer => self.kill_child("informer-server", "informer-server").await,
            Fault::KillWorker => {
                self.kill_child("worker --group default", "worker-default")
                    .await
            }
            Fault::KillCollector => {
                self.kill_child("--group garbage-collector", "worker-garbage-collector")
                    .await
            }
            Fault::KillLeader => self.kill_leader().await,
            Fault::DropWatches => {
                self.sim().faults().drop_watches();
                self.note("fault: drop every watch");
            }
            Fault::TooManyRequests | Fault::InternalErrors => {
                let n = self.rng.random_range(5..=30);
                let (failure, code) = if fault == Fault::TooManyRequests {
                    (Failure::TooManyRequests, 429)
                } else {
                    (Failure::Internal, 500)
                };
                self.sim().faults().fail_next(n, failure);
                self.note(format!("fault: the next {n} requests fail with {code}"));
            }
            Fault::Pause => {
                let pause = Duration::from_millis(self.rng.random_range(500..=2500));
                self.sim().faults().pause();
                self.note(format!("fault: pause the API server for {pause:?}"));
                tokio::time::sleep(pause).await;
                self.sim().faults().resume();
                self.note("         resume the API server");
            }
            Fault::Compact => {
                self.sim().compact();
                self.sim().faults().drop_watches();
                self.note("fault: compact the history and drop every watch (410 on re-watch)");
            }
        }
    }

    /// SIGKILL the leading launcher (its children die with it); the standby must take
    /// the Lease; a fresh standby is started.
    async fn kill_leader(&mut self) {
        let leader = self.leader().await;
        let mut old = self.launchers.remove(leader);
        let old_id = old.identity().unwrap_or_default();
        if let Err(e) = old.child.start_kill() {
            self.fail(format!("killing the leading launcher: {e}"));
        }
        let _ = old.child.wait().await;
        self.retired.push(old);
        self.note(format!("fault: SIGKILL the leading launcher {old_id}"));
        let killed = Instant::now();
        let standby = self.launchers[0].identity().unwrap_or_default();
        let took = wait_for("the standby to take the Lease", STEP_WAIT, || async {
            Ok((self.holder().await.as_deref() == Some(standby.as_str())).then_some(()))
        })
        .await;
        took.unwrap_or_else(|e| self.fail(format!("{e:#}")));
        self.note(format!(
            "         standby {standby} holds the Lease {:.1}s later",
            killed.elapsed().as_secs_f64()
        ));
        let args = Launcher::args(&self.cluster, &self.lease, &[]);
        match Launcher::start_binary(&self.binary, args).await {
            Ok(fresh) => {
                let id = fresh.identity().unwrap_or_default();
                self.launchers.push(fresh);
                self.note(format!("         fresh standby {id} started"));
            }
            Err(e) => self.fail(format!("starting a fresh standby: {e:#}")),
        }
    }

    /// Everything that is not as expected yet (empty once converged). `final_state` adds
    /// the checks of what the steps did (the Job, the namespace deletion).
    async fn problems(&self) -> anyhow::Result<Vec<String>> {
        let client = &self.cluster.client;
        let pods = list(Api::<Pod>::all(client.clone())).await?;
        let sets = list(Api::<ReplicaSet>::all(client.clone())).await?;
        let deployments = list(Api::<Deployment>::all(client.clone())).await?;
        let stateful_sets = list(Api::<StatefulSet>::all(client.clone())).await?;
        let daemon_sets = list(Api::<DaemonSet>::all(client.clone())).await?;
        let jobs = list(Api::<Job>::all(client.clone())).await?;
        let revisions = list(Api::<ControllerRevision>::all(client.clone())).await?;
        let nodes = list(Api::<Node>::all(client.clone())).await?;
        let mut problems = Vec::new();

        // No pod without a controller; no object whose owner is gone.
        let owners: BTreeSet<&str> = deployments
            .iter()
            .map(|o| &o.metadata)
            .chain(sets.iter().map(|o| &o.metadata))
            .chain(stateful_sets.iter().map(|o| &o.metadata))
            .chain(daemon_sets.iter().map(|o| &o.metadata))
            .chain(jobs.iter().map(|o| &o.metadata))
            .filter_map(|m| m.uid.as_deref())
            .collect();
        for pod in &pods {
            if controller_uid(&pod.metadata).is_none() {
                problems.push(format!(
                    "pod {} has no controller owner: {:?}",
                    key(&pod.metadata),
                    pod.metadata.owner_references
                ));
            }
        }
        let dependents = pods
            .iter()
            .map(|o| ("pod", &o.metadata))
            .chain(sets.iter().map(|o| ("ReplicaSet", &o.metadata)))
            .chain(
                revisions
                    .iter()
                    .map(|o| ("ControllerRevision", &o.metadata)),
            );
        for (kind, meta) in dependents {
            for owner in meta.owner_references.iter().flatten() {
                if !owners.contains(owner.uid.as_str()) {
                    problems.push(format!(
                        "{kind} {} is dangling: its owner {} {} ({}) is gone",
                        key(meta),
                        owner.kind,
                        owner.name,
                        owner.uid
                    ));
                }
            }
        }

        for w in &self.deployments {
            let id = format!("{}/{}", w.ns, w.name);
            let in_ns = |m: &ObjectMeta| {
                m.namespace.as_deref() == Some(w.ns.as_str())
                    && label(m, "app") == Some(w.name.as_str())
            };
            let mine_sets: Vec<&ReplicaSet> =
                sets.iter().filter(|rs| in_ns(&rs.metadata)).collect();
            let mine_pods: Vec<&Pod> = pods.iter().filter(|p| in_ns(&p.metadata)).collect();
            let deployment = deployments.iter().find(|d| {
                d.metadata.namespace.as_deref() == Some(w.ns.as_str())
                    && d.metadata.name.as_deref() == Some(w.name.as_str())
            });
            let mut hashes = BTreeMap::new();
            for rs in &mine_sets {
                let hash = label(&rs.metadata, "pod-template-hash").unwrap_or_default();
                if let Some(other) = hashes.insert(hash, key(&rs.metadata)) {
                    problems.push(format!(
                        "{id}: ReplicaSets {other} and {} share pod-template-hash {hash}",
                        key(&rs.metadata)
                    ));
                }
            }
            let pods_of = |rs: &ReplicaSet| -> Vec<&Pod> {
                let uid = rs.metadata.uid.as_deref();
                mine_pods
                    .iter()
                    .copied()
                    .filter(|p| controller_uid(&p.metadata) == uid)
                    .collect()
            };
            match &w.fate {
                Fate::Live => {
                    let Some(d) = deployment else {
                        problems.push(format!("{id}: expected to exist, it is gone"));
                        continue;
                    };
                    let status = d.status.clone().unwrap_or_default();
                    let spec_replicas = d.spec.as_ref().and_then(|s| s.replicas);
                    if spec_replicas != Some(w.replicas) {
                        problems.push(format!(
                            "{id}: spec.replicas {spec_replicas:?}, the test set {}",
                            w.replicas
                        ));
                    }
                    let seen = (
                        status.observed_generation,
                        status.replicas,
                        status.updated_replicas,
                        status.available_replicas,
                    );
                    let expected = (
                        d.metadata.generation,
                        Some(w.replicas),
                        Some(w.replicas),
                        Some(w.replicas),
                    );
                    if seen != expected {
                        problems.push(format!(
                            "{id}: status (observedGeneration, replicas, updated, available) \
                             {seen:?}, expected {expected:?}"
                        ));
                    }
                    let active: Vec<&&ReplicaSet> = mine_sets
                        .iter()
                        .filter(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) > 0)
                        .collect();
                    let [active] = active.as_slice() else {
                        problems.push(format!(
                            "{id}: expected exactly 1 ReplicaSet with replicas > 0, seen {:?}",
                            active
                                .iter()
                                .map(|rs| key(&rs.metadata))
                                .collect::<Vec<_>>()
                        ));
                        continue;
                    };
                    let image = active
                        .spec
                        .as_ref()
                        .and_then(|s| s.template.as_ref())
                        .and_then(|t| t.spec.as_ref())
                        .and_then(|s| s.containers.first())
                        .and_then(|c| c.image.as_deref());
                    if image != Some(w.image) {
                        problems.push(format!(
                            "{id}: the active ReplicaSet {} runs {image:?}, expected {}",
                            key(&active.metadata),
                            w.image
                        ));
                    }
                    if active
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .all(|o| Some(o.uid.as_str()) != d.metadata.uid.as_deref())
                    {
                        problems.push(format!(
                            "{id}: the active ReplicaSet {} is not owned by it",
                            key(&active.metadata)
                        ));
                    }
                    let owned = pods_of(active);
                    let good = owned.iter().filter(|p| running(p)).count();
                    if good != w.replicas as usize || mine_pods.len() != w.replicas as usize {
                        problems.push(format!(
                            "{id}: expected exactly {} Running pods, all of {}; seen {} pods: {:?}",
                            w.replicas,
                            key(&active.metadata),
                            mine_pods.len(),
                            mine_pods
                                .iter()
                                .map(|p| format!(
                                    "{} {}{} owner {:?}",
                                    key(&p.metadata),
                                    phase(p),
                                    if p.metadata.deletion_timestamp.is_some() {
                                        " (terminating)"
                                    } else {
                                        ""
                                    },
                                    controller_uid(&p.metadata)
                                ))
                                .collect::<Vec<_>>()
                        ));
                    }
                }
                Fate::Deleted {
                    policy: Policy::Orphan,
                    uid,
                    sets: before,
                } => {
                    if deployment.is_some() {
                        problems.push(format!("{id}: deleted with Orphan, still there"));
                    }
                    for before in before {
                        if !mine_sets
                            .iter()
                            .any(|rs| rs.metadata.uid.as_deref() == Some(before.as_str()))
                        {
                            problems.push(format!(
                                "{id}: deleted with Orphan, its ReplicaSet {before} must stay \
                                 and is gone; left: {:?}",
                                mine_sets
                                    .iter()
                                    .map(|rs| key(&rs.metadata))
                                    .collect::<Vec<_>>()
                            ));
                        }
                    }
                    let mut wanted = 0;
                    for rs in &mine_sets {
                        if rs
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| &o.uid == uid)
                        {
                            problems.push(format!(
                                "{id}: deleted with Orphan, its ReplicaSet {} still names it",
                                key(&rs.metadata)
                            ));
                        }
                        let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
                        wanted += replicas as usize;
                        let good = pods_of(rs).iter().filter(|p| running(p)).count();
                        if good != replicas as usize {
                            problems.push(format!(
                                "{id}: orphaned ReplicaSet {} wants {replicas} Running pods, has {good}",
                                key(&rs.metadata)
                            ));
                        }
                    }
                    if mine_pods.len() != wanted {
                        problems.push(format!(
                            "{id}: orphaned ReplicaSets want {wanted} pods in all, seen {}",
                            mine_pods.len()
                        ));
                    }
                }
                Fate::Deleted { policy, .. } => {
                    if deployment.is_some() || !mine_sets.is_empty() || !mine_pods.is_empty() {
                        problems.push(format!(
                            "{id}: deleted with {policy:?}: expected it, its ReplicaSets and \
                             pods gone; seen Deployment {}, ReplicaSets {:?}, {} pods",
                            deployment.is_some(),
                            mine_sets
                                .iter()
                                .map(|rs| key(&rs.metadata))
                                .collect::<Vec<_>>(),
                            mine_pods.len()
                        ));
                    }
                }
            }
        }

        // The StatefulSet: exactly web-0..2, Ready, its own.
        let sts_ns = &self.namespaces[1 % WORKLOAD_NAMESPACES];
        match stateful_sets.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(sts_ns.as_str())
                && s.metadata.name.as_deref() == Some(STATEFUL_SET)
        }) {
            None => problems.push(format!("StatefulSet {sts_ns}/{STATEFUL_SET} is gone")),
            Some(sts) => {
                let mut seen: Vec<String> = pods
                    .iter()
                    .filter(|p| controller_uid(&p.metadata) == sts.metadata.uid.as_deref())
                    .map(|p| {
                        format!(
                            "{}{}",
                            p.metadata.name.as_deref().unwrap_or_default(),
                            if ready(p) { "" } else { " (not ready)" }
                        )
                    })
                    .collect();
                seen.sort();
                let expected: Vec<String> = (0..STATEFUL_REPLICAS)
                    .map(|i| format!("{STATEFUL_SET}-{i}"))
                    .collect();
                let ready_replicas = sts.status.as_ref().and_then(|s| s.ready_replicas);
                if seen != expected || ready_replicas != Some(STATEFUL_REPLICAS as i32) {
                    problems.push(format!(
                        "StatefulSet {sts_ns}/{STATEFUL_SET}: expected Ready pods {expected:?} \
                         and readyReplicas {STATEFUL_REPLICAS}; seen {seen:?}, readyReplicas {ready_replicas:?}"
                    ));
                }
            }
        }

        // The DaemonSet: one Running pod per node.
        let ds_ns = &self.namespaces[2 % WORKLOAD_NAMESPACES];
        match daemon_sets.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(ds_ns.as_str())
                && s.metadata.name.as_deref() == Some(DAEMON_SET)
        }) {
            None => problems.push(format!("DaemonSet {ds_ns}/{DAEMON_SET} is gone")),
            Some(ds) => {
                let mut per_node: BTreeMap<String, Vec<String>> = nodes
                    .iter()
                    .filter_map(|n| n.metadata.name.clone())
                    .map(|n| (n, Vec::new()))
                    .collect();
                for pod in pods
                    .iter()
                    .filter(|p| controller_uid(&p.metadata) == ds.metadata.uid.as_deref())
                {
                    let node = pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_else(|| "(unscheduled)".into());
                    per_node.entry(node).or_default().push(format!(
                        "{} {}",
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        if running(pod) { "Running" } else { phase(pod) }
                    ));
                }
                let exact = per_node.len() == NODES
                    && per_node
                        .values()
                        .all(|pods| matches!(pods.as_slice(), [p] if p.ends_with(" Running")));
                if !exact {
                    problems.push(format!(
                        "DaemonSet {ds_ns}/{DAEMON_SET}: expected one Running pod on each of \
                         {NODES} nodes; seen {per_node:?}"
                    ));
                }
            }
        }

        if self.job_created {
            let ns = &self.namespaces[0];
            match jobs.iter().find(|j| {
                j.metadata.namespace.as_deref() == Some(ns.as_str())
                    && j.metadata.name.as_deref() == Some(JOB)
            }) {
                None => problems.push(format!("Job {ns}/{JOB} is gone")),
                Some(job) => {
                    let status = job.status.clone().unwrap_or_default();
                    let complete = status
                        .conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Complete" && c.status == "True");
                    let mut phases: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut seen = Vec::new();
                    for pod in pods
                        .iter()
                        .filter(|p| controller_uid(&p.metadata) == job.metadata.uid.as_deref())
                    {
                        *phases.entry(phase(pod)).or_default() += 1;
                        seen.push(format!(
                            "{} {} created {:?}",
                            pod.metadata.name.as_deref().unwrap_or_default(),
                            phase(pod),
                            pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
                        ));
                    }
                    let expected_phases = BTreeMap::from([("Succeeded", JOB_COMPLETIONS as usize)]);
                    if !complete
                        || status.succeeded != Some(JOB_COMPLETIONS)
                        || phases != expected_phases
                    {
                        problems.push(format!(
                            "Job {ns}/{JOB}: expected Complete with succeeded {JOB_COMPLETIONS} \
                             and pods {expected_phases:?}; seen Complete {complete}, succeeded \
                             {:?}, failed {:?}, pods {phases:?}: {seen:?}",
                            status.succeeded, status.failed
                        ));
                    }
                }
            }
        }

        if self.doomed_deleted {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            if let Some(ns) = namespaces.get_opt(&self.doomed).await? {
                problems.push(format!(
                    "namespace {} was deleted and is still there ({:?}, {:?})",
                    self.doomed,
                    ns.status.and_then(|s| s.phase),
                    ns.spec.and_then(|s| s.finalizers)
                ));
            }
        }

        // One leader with its three children, one standby with its warm informer-server.
        let holder = self.holder().await;
        let mut leaders = 0;
        for launcher in &self.launchers {
            let id = launcher.identity().unwrap_or_default();
            let counts = (
                launcher.children("informer-server").len(),
                launcher.children("worker --group default").len(),
                launcher.children("--group garbage-collector").len(),
            );
            let leads = holder.as_deref() == Some(id.as_str());
            leaders += usize::from(leads);
            let expected = if leads { (1, 1, 1) } else { (1, 0, 0) };
            if counts != expected {
                problems.push(format!(
                    "launcher {id} (leading: {leads}): children (informer-server, worker-default, \
                     worker-garbage-collector) {counts:?}, expected {expected:?}"
                ));
            }
        }
        if leaders != 1 {
            problems.push(format!(
                "expected one live launcher to hold the Lease, it is held by {holder:?}"
            ));
        }
        Ok(problems)
    }

    /// Waits until [`Chaos::problems`] is empty on `stable` polls in a row, two seconds
    /// apart (so a late extra pod or deletion shows); fails with what is still wrong.
    async fn converge(&mut self, what: &str, timeout: Duration, stable: usize) -> f64 {
        let began = Instant::now();
        let mut clean = 0;
        let mut reported = 0;
        let mut last = Vec::new();
        loop {
            match self.problems().await {
                Ok(problems) if problems.is_empty() => {
                    clean += 1;
                    if clean >= stable {
                        let took = began.elapsed().as_secs_f64();
                        self.note(format!("converged: {what} ({took:.1}s)"));
                        return took;
                    }
                }
                Ok(problems) => {
                    clean = 0;
                    // What convergence waits for, now and then (seen with --nocapture).
                    if began.elapsed().as_secs() / 10 != reported {
                        reported = began.elapsed().as_secs() / 10;
                        println!(
                            "{:>7.2}s waiting for {what}: {} problem(s), first: {}",
                            self.elapsed(),
                            problems.len(),
                            problems[0]
                        );
                    }
                    last = problems;
                }
                Err(e) => {
                    clean = 0;
                    last = vec![format!("listing the cluster failed: {e:#}")];
                }
            }
            if began.elapsed() > timeout {
                self.fail(format!(
                    "{what}: not converged within {timeout:?}; still wrong:\n  {}",
                    last.join("\n  ")
                ));
            }
            tokio::time::sleep(Duration::from_secs(if clean > 0 { 2 } else { 1 })).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_converges_to_exact_counts() {
    if std::env::var("RKCM_CHAOS").is_ok_and(|value| value == "0") {
        println!("skipped: RKCM_CHAOS=0");
        return;
    }
    let cluster = TestCluster::start().await.unwrap();
    if cluster
        .sim_only("the chaos test (kube-sim's fault injection)")
        .is_none()
    {
        return;
    }
    let seed = env_number("RKCM_CHAOS_SEED", DEFAULT_SEED);
    let scale = env_number("RKCM_CHAOS_SCALE", 1).max(1) as usize;
    let start = Instant::now();
    let nodes = simulated_nodes(&cluster, NODES).await;
    let lease = format!("rkcm-chaos-{}", kube_sim::api::random_suffix(6));
    let binary_dir = tempfile::tempdir().unwrap();
    let binary = binary_dir.path().join("rkcm");
    std::fs::copy(RKCM, &binary).unwrap_or_else(|e| panic!("copying {RKCM}: {e}"));
    let mut launchers = Vec::new();
    for _ in 0..2 {
        launchers.push(
            Launcher::start_binary(&binary, Launcher::args(&cluster, &lease, &[]))
                .await
                .unwrap_or_else(|e| panic!("starting a launcher: {e:#}")),
        );
    }
    let mut chaos = Chaos {
        cluster,
        binary,
        _binary_dir: binary_dir,
        _nodes: nodes,
        lease,
        launchers,
        retired: Vec::new(),
        seed,
        scale,
        rng: StdRng::seed_from_u64(seed),
        start,
        log: Vec::new(),
        faults: 0,
        actions: 0,
        namespaces: Vec::new(),
        doomed: String::new(),
        doomed_deleted: false,
        job_created: false,
        deployments: Vec::new(),
    };
    chaos.note(format!("chaos seed {seed} scale {scale}"));
    chaos.setup().await;

    let steps = chaos.schedule();
    chaos.note(format!("{} steps", steps.len()));
    for step in steps {
        chaos.step(step).await;
        let pace = Duration::from_millis(chaos.rng.random_range(100..=700));
        tokio::time::sleep(pace).await;
    }
    let chaos_end = chaos.elapsed();
    let wait = Duration::from_secs(120 + 60 * (scale as u64 - 1));
    let converged = chaos.converge("after the chaos", wait, 2).await;

    let mut panics = Vec::new();
    for launcher in chaos.retired.iter().chain(&chaos.launchers) {
        panics.extend(
            launcher
                .log()
                .lines()
                .filter(|l| l.contains("panicked at"))
                .map(str::to_string),
        );
    }
    if !panics.is_empty() {
        chaos.fail(format!(
            "expected no panic in any child, seen:\n{}",
            panics.join("\n")
        ));
    }
    if std::env::var_os("RKCM_CHAOS_KEEP_LOGS").is_some() {
        println!("launcher logs: {}", chaos.save_logs().join(" "));
    }
    let orphaned = chaos
        .deployments
        .iter()
        .filter(|w| {
            matches!(
                w.fate,
                Fate::Deleted {
                    policy: Policy::Orphan,
                    ..
                }
            )
        })
        .count();
    println!(
        "chaos summary: seed {seed} scale {scale}: {} faults, {} actions ({} Deployments, \
         {orphaned} orphaned), chaos {chaos_end:.1}s, converged {converged:.1}s later, \
         {:.1}s in all: passed",
        chaos.faults,
        chaos.actions,
        chaos.deployments.len(),
        chaos.elapsed()
    );
}
