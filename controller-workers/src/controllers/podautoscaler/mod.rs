//! horizontal-pod-autoscaler-controller: sets the replicas of an HPA's target from the
//! metrics of its pods (upstream `pkg/controller/podautoscaler/`).
//!
//! Keys are `autoscaling/v2` HPAs (queue `horizontalpodautoscaler`,
//! `--concurrent-horizontal-pod-autoscaler-syncs` workers). Every key comes back one
//! `--horizontal-pod-autoscaler-sync-period` after each sync, and an event puts it there
//! too (upstream's fixed-interval rate limiter): the first sync comes one period after an
//! HPA appears. A sync ([`reconcile`]) reads the target's scale live, computes a proposal
//! per metric ([`replica_calculator`], samples from [`operations`]), normalizes it
//! ([`behavior`]), rescales, and writes the status when it changed. The pod informer only
//! serves the calculation (readiness, requests) and the ambiguity check: two HPAs whose
//! targets' selectors pick the same pod are refused.

mod behavior;
mod metric_sources;
mod metrics;
mod monitor;
mod operations;
mod reconcile;
mod replica_calculator;
mod selectors;
mod status;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use tracing::warn;

use crate::controller::{ControllerContext, Runnable};
use crate::flags::parse_go_duration;
use crate::informer::Change;
use crate::locks::lock;
use crate::queue::WorkQueue;
use crate::rate_limiter::RateLimiter;
use crate::recorder::Recorder;
use crate::selector::Selector;
use crate::store::{key_of, Store};

use self::behavior::History;
use self::monitor::Monitor;
use self::operations::Operations;
use self::replica_calculator::Calculator;
use self::selectors::HpaSelectors;

pub const NAME: &str = "horizontal-pod-autoscaler-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// container requests (sidecars included); `status` (phase, readiness, start time).
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.containers.resources",
        "spec.initContainers.resources",
        "spec.initContainers.restartPolicy",
        "status",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["autoscaling/v2/horizontalpodautoscalers", "v1/pods"];
const QUEUE: &str = "horizontalpodautoscaler";
/// The event source and client name (upstream's recorder component).
const COMPONENT: &str = "horizontal-pod-autoscaler";

/// The controller's flags (KCM's `HPAControllerOptions`: names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of horizontal pod autoscaler objects that are allowed to sync
    /// concurrently. Larger number = more responsive horizontal pod autoscaler objects
    /// processing, but more CPU (and network) load.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub concurrent_horizontal_pod_autoscaler_syncs: i32,
    /// The period for syncing the number of pods in horizontal pod autoscaler.
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_sync_period: Duration,
    /// The period since last upscale, before another upscale can be performed in
    /// horizontal pod autoscaler (deprecated: this flag is currently no-op and will be
    /// deleted).
    #[arg(long, default_value = "3m", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_upscale_delay: Duration,
    /// The period for which autoscaler will look backwards and not scale down below any
    /// recommendation it made during that period.
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_downscale_stabilization: Duration,
    /// The period since last downscale, before another downscale can be performed in
    /// horizontal pod autoscaler (deprecated: this flag is currently no-op and will be
    /// deleted).
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_downscale_delay: Duration,
    /// The minimum change (from 1.0) in the desired-to-actual metrics ratio for the
    /// horizontal pod autoscaler to consider scaling.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub horizontal_pod_autoscaler_tolerance: f64,
    /// The period after pod start when CPU samples might be skipped.
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_cpu_initialization_period: Duration,
    /// The period after pod start during which readiness changes will be treated as
    /// initial readiness.
    #[arg(long, default_value = "30s", value_parser = parse_go_duration)]
    pub horizontal_pod_autoscaler_initial_readiness_delay: Duration,
}

impl Options {
    /// Refuses values the controller cannot run with (KCM would spin on a zero period
    /// or start no worker).
    pub fn validate(&self) -> Result<(), String> {
        if self.horizontal_pod_autoscaler_sync_period.is_zero() {
            return Err("--horizontal-pod-autoscaler-sync-period must be greater than 0".into());
        }
        if !self.horizontal_pod_autoscaler_tolerance.is_finite()
            || self.horizontal_pod_autoscaler_tolerance < 0.0
        {
            return Err(format!(
                "--horizontal-pod-autoscaler-tolerance must be a non-negative number, got {}",
                self.horizontal_pod_autoscaler_tolerance
            ));
        }
        Ok(())
    }

    /// pflag's notice for the deprecated no-op flags, when given another value than
    /// their default.
    fn warn_deprecated(&self) {
        const NOTICE: &str = "This flag is currently no-op and will be deleted.";
        if self.horizontal_pod_autoscaler_upscale_delay != Duration::from_secs(180) {
            warn!("Flag --horizontal-pod-autoscaler-upscale-delay has been deprecated, {NOTICE}");
        }
        if self.horizontal_pod_autoscaler_downscale_delay != Duration::from_secs(300) {
            warn!("Flag --horizontal-pod-autoscaler-downscale-delay has been deprecated, {NOTICE}");
        }
    }
}

/// Upstream's `FixedItemIntervalRateLimiter`: every requeue waits the sync period.
struct FixedInterval(Duration);

impl RateLimiter<String> for FixedInterval {
    fn when(&self, _: &String) -> Duration {
        self.0
    }
    fn forget(&self, _: &String) {}
    fn num_requeues(&self, _: &String) -> u32 {
        1
    }
}

pub(crate) struct Controller {
    operations: Operations,
    recorder: Recorder,
    hpas: Store<HorizontalPodAutoscaler>,
    pods: Store<Pod>,
    queue: Arc<WorkQueue<String>>,
    calculator: Calculator,
    downscale_window: Duration,
    monitor: Monitor,
    /// Recommendations and scale events per HPA key.
    histories: Mutex<HashMap<String, History>>,
    /// The selector of each HPA's target, for the ambiguity check.
    selectors: Mutex<HpaSelectors>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    options.validate().map_err(anyhow::Error::msg)?;
    options.warn_deprecated();
    let (client, recorder) = context.client_and_recorder(COMPONENT)?;
    let period = options.horizontal_pod_autoscaler_sync_period;
    let queue = WorkQueue::with_rate_limiter(
        QUEUE,
        Box::new(FixedInterval(period)),
        Some(context.metrics.workqueue.for_queue(QUEUE)),
    );
    let hpas = context.informers.get::<HorizontalPodAutoscaler>();
    let pods = context.informers.get::<Pod>();
    let controller = Arc::new(Controller {
        operations: Operations::new(client),
        recorder,
        hpas: hpas.store().clone(),
        pods: pods.store().clone(),
        queue: queue.clone(),
        calculator: Calculator {
            tolerance: options.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period: options.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay: options.horizontal_pod_autoscaler_initial_readiness_delay,
        },
        downscale_window: options.horizontal_pod_autoscaler_downscale_stabilization,
        monitor: Monitor::register(&context.metrics),
        histories: Mutex::new(HashMap::new()),
        selectors: Mutex::new(HpaSelectors::default()),
    });
    hpas.handle(&controller, Controller::on_hpa);
    let workers = usize::try_from(options.concurrent_horizontal_pod_autoscaler_syncs)
        .unwrap_or(0)
        .max(1);
    Ok(Runnable::new(
        NAME,
        queue,
        workers,
        controller,
        |controller, key| async move {
            controller.sync(&key).await;
            Ok(())
        },
    ))
}

impl Controller {
    fn on_hpa(&self, change: &Change<HorizontalPodAutoscaler>) {
        match change {
            Change::Added(hpa) | Change::Updated { new: hpa, .. } => {
                let key = key_of(&hpa.metadata);
                self.queue.add_rate_limited(key.clone());
                lock(&self.selectors).known(&key);
            }
            Change::Deleted(hpa) => {
                let key = key_of(&hpa.object().metadata);
                self.queue.forget(&key);
                lock(&self.selectors).forget(&key);
            }
        }
    }

    /// One key: reconcile, then come back one period later unless the HPA is gone.
    async fn sync(&self, key: &str) {
        let Some(hpa) = self.hpas.get(key) else {
            lock(&self.histories).remove(key);
            return;
        };
        if let Err(error) = self.reconcile(&hpa, key).await {
            warn!(controller = NAME, key, error = %crate::controller::describe(&error), "reconciling the HPA");
        }
        self.queue.add_rate_limited(key.to_string());
    }

    /// The HPAs of the namespace whose targets pick some of `pods`, `key` among them.
    fn hpas_selecting(
        &self,
        key: &str,
        selector: &Selector,
        pods: &[Arc<Pod>],
    ) -> BTreeSet<String> {
        lock(&self.selectors).selecting(
            key,
            selector,
            pods.iter().map(|p| p.metadata.labels.as_ref()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        options: Options,
    }

    #[test]
    fn flags_have_kcms_defaults() {
        let options = Command::parse_from(["x"]).options;
        assert_eq!(options.concurrent_horizontal_pod_autoscaler_syncs, 5);
        assert_eq!(
            options.horizontal_pod_autoscaler_sync_period,
            Duration::from_secs(15)
        );
        assert_eq!(options.horizontal_pod_autoscaler_tolerance, 0.1);
        assert_eq!(
            options.horizontal_pod_autoscaler_downscale_stabilization,
            Duration::from_secs(300)
        );
        assert_eq!(
            options.horizontal_pod_autoscaler_cpu_initialization_period,
            Duration::from_secs(300)
        );
        assert_eq!(
            options.horizontal_pod_autoscaler_initial_readiness_delay,
            Duration::from_secs(30)
        );
        assert!(options.validate().is_ok());
        let zero = Command::parse_from(["x", "--horizontal-pod-autoscaler-sync-period=0"]).options;
        assert!(zero.validate().is_err());
        let negative =
            Command::parse_from(["x", "--horizontal-pod-autoscaler-tolerance=-1"]).options;
        assert!(negative.validate().is_err());
        // The deprecated flags are accepted.
        let old = Command::parse_from([
            "x",
            "--horizontal-pod-autoscaler-upscale-delay=1m",
            "--horizontal-pod-autoscaler-downscale-delay=2m",
        ])
        .options;
        assert!(old.validate().is_ok());
    }
}
