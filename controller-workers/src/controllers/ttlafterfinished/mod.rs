//! ttl-after-finished-controller: deletes a finished Job once its
//! `ttlSecondsAfterFinished` has passed (upstream `pkg/controller/ttlafterfinished/`).
//!
//! A Job is finished when its Complete or Failed condition is True; the TTL runs from
//! that condition's lastTransitionTime. A Job not expired yet is looked at again when it
//! will be; an expired one is read live and checked again before it is deleted (with
//! foreground propagation and a UID precondition), since its TTL may have been changed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use tracing::{debug, info, warn};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::queue::WorkQueue;
use crate::store::{key_of, split_key, Store};

pub const NAME: &str = "ttl-after-finished-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["batch/v1/jobs"];

struct Controller {
    client: kube::Client,
    jobs: Store<Job>,
    queue: Arc<WorkQueue<String>>,
    deletion_delay: Histogram,
}

fn needs_cleanup(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .is_some()
        && finish_time(job).is_some()
}

/// When the Job finished: its True Complete or Failed condition's transition time.
fn finish_time(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// How long until the Job may be deleted (zero or negative: now), and when it expires.
fn time_left(job: &Job, now: Timestamp) -> Option<(i128, Timestamp)> {
    if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = finish_time(job)?;
    let expires = finished
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(ttl)))
        .ok()?;
    Some((expires.as_nanosecond() - now.as_nanosecond(), expires))
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of ttl-after-finished-controller workers that are allowed to sync concurrently.
    #[arg(long, default_value_t = 5)]
    pub concurrent_ttl_after_finished_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue("ttl_jobs_to_delete");
    let jobs = context.informers.get::<Job>();
    {
        let queue = queue.clone();
        jobs.add_handler(Arc::new(move |change: &Change<Job>| {
            let Some(job) = change.live() else {
                return;
            };
            if job.metadata.deletion_timestamp.is_none() && needs_cleanup(job) {
                queue.add(key_of(&job.metadata));
            }
        }));
    }
    let deletion_delay = Histogram::new(exponential_buckets(0.1, 2.0, 14));
    context.metrics.register(
        "ttl_after_finished_controller_job_deletion_duration_seconds",
        "The time it took to delete the job since it became eligible for deletion",
        deletion_delay.clone(),
    );
    let controller = Arc::new(Controller {
        client,
        jobs: jobs.store().clone(),
        queue: queue.clone(),
        deletion_delay,
    });
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_ttl_after_finished_syncs,
        controller,
        |controller, key| async move { controller.process(&key).await },
    ))
}

impl Controller {
    /// `Some(expiry)` when the Job may go now; otherwise it is queued for later.
    fn expired(&self, key: &str, job: &Job) -> Option<Timestamp> {
        let (left, expires) = time_left(job, Timestamp::now())?;
        if left > 0 {
            let wait = Duration::from_nanos(u64::try_from(left).unwrap_or(u64::MAX));
            debug!(key, ?wait, "job finished; not expired yet");
            self.queue.add_after(key.to_string(), wait);
            return None;
        }
        Some(expires)
    }

    async fn process(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(job) = self.jobs.get_in(namespace, name) else {
            return Ok(());
        };
        if self.expired(key, &job).is_none() {
            return Ok(());
        }
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        // The TTL may have been changed since the cache saw it.
        let Some(fresh) = api.get_opt(name).await? else {
            return Ok(());
        };
        let Some(expired_at) = self.expired(key, &fresh) else {
            return Ok(());
        };
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => {
                info!(job = key, "cleaned up a finished Job after its TTL");
                let late = Timestamp::now().as_nanosecond() - expired_at.as_nanosecond();
                self.deletion_delay.observe(late as f64 / 1e9);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => {
                warn!(job = key, %error, "could not delete an expired Job");
                Err(error.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn job(ttl: Option<i32>, condition: Option<(&str, &str, i64)>) -> Job {
        Job {
            spec: Some(JobSpec {
                ttl_seconds_after_finished: ttl,
                ..Default::default()
            }),
            status: Some(JobStatus {
                conditions: condition.map(|(type_, status, at)| {
                    vec![JobCondition {
                        type_: type_.into(),
                        status: status.into(),
                        last_transition_time: Some(Time(Timestamp::from_second(at).unwrap())),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_finished_jobs_with_a_ttl_expire_and_from_their_finish_time() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert!(time_left(&job(None, Some(("Complete", "True", 900))), now).is_none());
        assert!(time_left(&job(Some(10), None), now).is_none());
        assert!(time_left(&job(Some(10), Some(("Complete", "False", 900))), now).is_none());
        let (left, _) = time_left(&job(Some(10), Some(("Complete", "True", 995))), now).unwrap();
        assert_eq!(left, 5_000_000_000);
        let (left, _) = time_left(&job(Some(0), Some(("Failed", "True", 900))), now).unwrap();
        assert!(left < 0);
    }
}
