//! cronjob-controller: creates a CronJob's Jobs on its schedule (upstream
//! `pkg/controller/cronjob/cronjob_controllerv2.go`).
//!
//! Each sync reconciles `status.active` with the CronJob's Jobs (finished ones leave it,
//! SawCompletedJob, lastSuccessfulTime), then, unless suspended, finds the most recent
//! schedule time not yet run (from lastScheduleTime or creation, no further back than
//! startingDeadlineSeconds; more than 100 missed times give the TooManyMissedTimes
//! warning), honours concurrencyPolicy (Allow, Forbid, Replace), and creates the Job
//! `<cronjob>-<minutes since the epoch>` with the annotation
//! `batch.kubernetes.io/cronjob-scheduled-timestamp`; it keeps only
//! successfulJobsHistoryLimit / failedJobsHistoryLimit finished Jobs, and comes back at
//! the next schedule time. Schedules run in `spec.timeZone` (UTC without it) or in a
//! `TZ=`/`CRON_TZ=` prefix of the schedule, which gets the UnsupportedSchedule warning
//! as upstream.

mod schedule;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use self::schedule::Schedule;
use crate::api_errors::is_not_found;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pod_control::controller_ref;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::store::{controller_of, key_of, split_key, Store, CONTROLLER_UID_INDEX};

pub const NAME: &str = "cronjob-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["batch/v1/cronjobs", "batch/v1/jobs"];
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
const MAX_MISSED: usize = 100;

struct Controller {
    client: kube::Client,
    recorder: Recorder,
    cronjobs: Store<CronJob>,
    jobs: Store<Job>,
    queue: Arc<WorkQueue<String>>,
    /// `cronjob_controller_job_creation_skew_duration_seconds`: from the scheduled time
    /// to the Job's creation.
    creation_skew: Histogram,
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of cron job objects that are allowed to sync concurrently. Larger number = more
    /// responsive jobs, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_cron_job_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("cronjob");
    let cronjobs = context.informers.get::<CronJob>();
    let jobs = context.informers.get::<Job>();
    cronjobs.enqueue_live(&queue);
    {
        let queue = queue.clone();
        let store = cronjobs.store().clone();
        jobs.add_handler(Arc::new(move |change: &Change<Job>| {
            let job = change.latest();
            let namespace = job.namespace_str();
            if let Some(cronjob) =
                controller_of(&job.metadata).and_then(|r| store.referenced(namespace, r))
            {
                queue.add(key_of(&cronjob.metadata));
            }
        }));
    }
    let creation_skew = Histogram::new(exponential_buckets(1.0, 2.0, 10));
    context.metrics.register(
            "cronjob_controller_job_creation_skew_duration_seconds",
            "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
            creation_skew.clone(),
        );
    let controller = Arc::new(Controller {
        creation_skew,
        client,
        recorder,
        cronjobs: cronjobs.store().clone(),
        jobs: jobs.store().clone(),
        queue: queue.clone(),
    });
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_cron_job_syncs,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

fn finished(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The most recent schedule time in (earliest, now], and how many were missed.
fn most_recent(
    schedule: &Schedule,
    zone: &TimeZone,
    earliest: Timestamp,
    now: Timestamp,
) -> (Option<Timestamp>, usize) {
    let mut last = None;
    let mut missed = 0;
    let mut t = earliest;
    while let Some(next) = schedule.next(t, zone) {
        if next > now {
            break;
        }
        missed += 1;
        last = Some(next);
        t = next;
        if missed > 1000 {
            break;
        }
    }
    (last, missed)
}

impl Controller {
    /// Upstream `sync` and `syncCronJob`: reconcile the active list with the Jobs, start
    /// the most recent missed run when one is due, clean up finished Jobs beyond the
    /// history limits, write the status, and requeue for the next scheduled time.
    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(cached) = self.cronjobs.get_in(namespace, name) else {
            return Ok(());
        };
        let cronjob = cached.as_ref().clone();
        let now = Timestamp::now();
        let spec = cronjob.spec.clone().unwrap_or_default();
        let mut status: CronJobStatus = cronjob.status.clone().unwrap_or_default();
        let uid = cronjob.metadata.uid.clone().unwrap_or_default();
        let owned: Vec<Arc<Job>> = self
            .jobs
            .by_index(CONTROLLER_UID_INDEX, &uid)
            .into_iter()
            .filter(|j| j.metadata.namespace.as_deref() == Some(namespace))
            .collect();
        let job_api: Api<Job> = Api::namespaced(self.client.clone(), namespace);

        self.reconcile_active(&cronjob, &owned, &mut status).await?;
        let mut requeue = None;
        if cronjob.metadata.deletion_timestamp.is_none() && !spec.suspend.unwrap_or(false) {
            if let Some((zone, schedule)) = self.parse_schedule(&cronjob, &spec) {
                requeue = self
                    .run_schedule(
                        &cronjob,
                        &spec,
                        &zone,
                        &schedule,
                        &mut status,
                        &job_api,
                        now,
                    )
                    .await?;
            }
        }
        self.cleanup(&cronjob, &owned, &status, &job_api).await?;
        if cronjob.status.as_ref() != Some(&status) {
            let api: Api<CronJob> = Api::namespaced(self.client.clone(), namespace);
            let mut updated = cronjob.clone();
            updated.status = Some(status);
            api.replace_status(name, &PostParams::default(), &updated)
                .await
                .with_context(|| format!("updating the status of CronJob {key}"))?;
        }
        if let Some(wait) = requeue {
            self.queue.add_after(key.to_string(), wait);
        }
        Ok(())
    }

    /// The active list checked against the Jobs the CronJob owns (upstream's first part
    /// of `syncCronJob`): finished Jobs leave it (and move lastSuccessfulTime), running
    /// Jobs the live CronJob lists join it, others are reported, and listed Jobs that
    /// are gone leave it.
    async fn reconcile_active(
        &self,
        cronjob: &CronJob,
        owned: &[Arc<Job>],
        status: &mut CronJobStatus,
    ) -> anyhow::Result<()> {
        let mut active = status.active.clone().unwrap_or_default();
        let mut live_cronjob: Option<CronJob> = None;
        for job in owned {
            let listed = active.iter().any(|r| r.uid == job.metadata.uid);
            if finished(job) == Some("Complete") {
                // A completed Job counts for lastSuccessfulTime, listed or not.
                let done = job.status.as_ref().and_then(|s| s.completion_time.clone());
                if done.as_ref().map(|t| t.0) > status.last_successful_time.as_ref().map(|t| t.0) {
                    status.last_successful_time = done;
                }
            }
            match finished(job) {
                Some(kind) if listed => {
                    active.retain(|r| r.uid != job.metadata.uid);
                    self.recorder.event(
                        cronjob,
                        NORMAL,
                        "SawCompletedJob",
                        format!("Saw completed job: {}, status: {kind}", job.name_str()),
                    );
                }
                None if !listed => {
                    // Our cache may be behind: is it in the live CronJob's list?
                    if live_cronjob.is_none() {
                        live_cronjob = Some(
                            Api::<CronJob>::namespaced(
                                self.client.clone(),
                                cronjob.namespace_str(),
                            )
                            .get(cronjob.name_str())
                            .await?,
                        );
                    }
                    let live_active = live_cronjob
                        .as_ref()
                        .and_then(|c| c.status.as_ref())
                        .and_then(|s| s.active.as_ref());
                    if let Some(reference) = live_active
                        .into_iter()
                        .flatten()
                        .find(|r| r.uid == job.metadata.uid)
                    {
                        active.push(reference.clone());
                    } else {
                        // Made by someone else (`kubectl create job --from=cronjob/...`)
                        // or forgotten: reported, not adopted into the active list.
                        self.recorder.event(
                            cronjob,
                            WARNING,
                            "UnexpectedJob",
                            format!(
                                "Saw a job that the controller did not create or forgot: {}",
                                job.name_str()
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        active.retain(|r| {
            let present = owned.iter().any(|j| j.metadata.uid == r.uid);
            if !present {
                self.recorder.event(
                    cronjob,
                    NORMAL,
                    "MissingJob",
                    format!(
                        "Active job went missing: {}",
                        r.name.as_deref().unwrap_or_default()
                    ),
                );
            }
            present
        });
        status.active = (!active.is_empty()).then_some(active);
        Ok(())
    }

    /// The schedule and its time zone, each failure reported as upstream's
    /// `UnsupportedSchedule`, `UnparseableSchedule` and `UnknownTimeZone` events.
    fn parse_schedule(
        &self,
        cronjob: &CronJob,
        spec: &k8s_openapi::api::batch::v1::CronJobSpec,
    ) -> Option<(TimeZone, Schedule)> {
        if spec.schedule.contains("TZ") {
            self.recorder.event(
                cronjob,
                WARNING,
                "UnsupportedSchedule",
                format!("CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", spec.schedule),
            );
        }
        let unparseable = |error: String| {
            self.recorder.event(
                cronjob,
                WARNING,
                "UnparseableSchedule",
                format!("unparseable schedule: {:?} : {error}", spec.schedule),
            );
        };
        // A zone named in the schedule wins (the API server refuses both at once).
        let (prefix_zone, schedule_text) = match schedule::split_time_zone(&spec.schedule) {
            Ok((zone, text)) => (zone, Some(text)),
            Err(error) => {
                unparseable(error);
                (None, None)
            }
        };
        let zone = match (prefix_zone, spec.time_zone.as_deref()) {
            (Some(name), _) => match TimeZone::get(name) {
                Ok(zone) => Some(zone),
                Err(error) => {
                    unparseable(format!("provided bad location {name}: {error}"));
                    None
                }
            },
            (None, Some(name)) => match TimeZone::get(name) {
                Ok(zone) => Some(zone),
                Err(error) => {
                    self.recorder.event(
                        cronjob,
                        WARNING,
                        "UnknownTimeZone",
                        format!("invalid timeZone: {name:?}: {error}"),
                    );
                    None
                }
            },
            (None, None) => Some(TimeZone::UTC),
        };
        let schedule = schedule_text.and_then(|text| match Schedule::parse(text) {
            Ok(schedule) => Some(schedule),
            Err(error) => {
                unparseable(error);
                None
            }
        });
        zone.zip(schedule)
    }

    /// Starts the most recent missed run when there is one within the starting deadline,
    /// and says when the next scheduled time comes.
    #[allow(clippy::too_many_arguments)]
    async fn run_schedule(
        &self,
        cronjob: &CronJob,
        spec: &k8s_openapi::api::batch::v1::CronJobSpec,
        zone: &TimeZone,
        schedule: &Schedule,
        status: &mut CronJobStatus,
        job_api: &Api<Job>,
        now: Timestamp,
    ) -> anyhow::Result<Option<Duration>> {
        let mut earliest = status
            .last_schedule_time
            .as_ref()
            .or(cronjob.metadata.creation_timestamp.as_ref())
            .map(|t| t.0)
            .unwrap_or(now);
        if let Some(deadline) = spec.starting_deadline_seconds {
            let floor = now - k8s_openapi::jiff::SignedDuration::from_secs(deadline);
            earliest = earliest.max(floor);
        }
        let (scheduled, missed) = most_recent(schedule, zone, earliest, now);
        if missed > MAX_MISSED {
            self.recorder.event(cronjob, WARNING, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew");
        }
        if let Some(at) = scheduled {
            self.start(cronjob, spec, at, zone, status, job_api).await?;
        }
        Ok(schedule.next(now, zone).map(|next| {
            let wait = next.as_nanosecond() - now.as_nanosecond();
            Duration::from_nanos(wait.max(0) as u64) + Duration::from_millis(100)
        }))
    }

    async fn start(
        &self,
        cronjob: &CronJob,
        spec: &k8s_openapi::api::batch::v1::CronJobSpec,
        at: Timestamp,
        zone: &TimeZone,
        status: &mut CronJobStatus,
        job_api: &Api<Job>,
    ) -> anyhow::Result<()> {
        let cron_name = cronjob.name_str().to_string();
        let job_name = format!("{cron_name}-{}", at.as_second() / 60);
        let active = status.active.clone().unwrap_or_default();
        if active
            .iter()
            .any(|r| r.name.as_deref() == Some(job_name.as_str()))
        {
            return Ok(());
        }
        if let Some(deadline) = spec.starting_deadline_seconds {
            if at + k8s_openapi::jiff::SignedDuration::from_secs(deadline) < Timestamp::now() {
                self.recorder.event(
                    cronjob,
                    WARNING,
                    "MissSchedule",
                    format!(
                        "Missed scheduled time to start a job: {}",
                        at.to_zoned(zone.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z")
                    ),
                );
                return Ok(());
            }
        }
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if !active.is_empty() => {
                self.recorder.event(cronjob, NORMAL, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid");
                return Ok(());
            }
            Some("Replace") => {
                for reference in &active {
                    let name = reference.name.clone().unwrap_or_default();
                    self.delete_job(cronjob, job_api, &name).await?;
                }
                status.active = None;
            }
            _ => {}
        }
        let template = spec.job_template.clone();
        let template_meta = template.metadata.unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert(
            SCHEDULED_TIMESTAMP.into(),
            at.to_zoned(zone.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string(),
        );
        let job = Job {
            metadata: ObjectMeta {
                name: Some(job_name.clone()),
                namespace: cronjob.metadata.namespace.clone(),
                labels: template_meta.labels,
                annotations: Some(annotations),
                owner_references: Some(vec![controller_ref(cronjob)]),
                ..Default::default()
            },
            spec: Some(template.spec.unwrap_or_default()),
            status: None,
        };
        let (created, existed) = match job_api.create(&PostParams::default(), &job).await {
            Ok(created) => (created, false),
            Err(kube::Error::Api(status_error)) if status_error.code == 409 => {
                // Made by an earlier sync whose status update did not land.
                match job_api.get_opt(&job_name).await? {
                    Some(existing) => (existing, true),
                    None => return Ok(()),
                }
            }
            Err(error) => {
                self.recorder.event(
                    cronjob,
                    WARNING,
                    "FailedCreate",
                    format!("Error creating job: {}", crate::api_errors::message(&error)),
                );
                return Err(error.into());
            }
        };
        if !existed {
            if let Some(created_at) = &created.metadata.creation_timestamp {
                let skew = created_at.0.as_millisecond() - at.as_millisecond();
                self.creation_skew.observe(skew as f64 / 1000.0);
            }
            self.recorder.event(
                cronjob,
                NORMAL,
                "SuccessfulCreate",
                format!("Created job {job_name}"),
            );
        }
        let mut active = status.active.clone().unwrap_or_default();
        if !active.iter().any(|r| r.uid == created.metadata.uid) {
            active.push(reference(&created));
        }
        status.active = Some(active);
        status.last_schedule_time = Some(Time(at));
        Ok(())
    }

    /// Deletes one of the CronJob's Jobs (background), with upstream's event.
    async fn delete_job(
        &self,
        cronjob: &CronJob,
        job_api: &Api<Job>,
        name: &str,
    ) -> anyhow::Result<()> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match job_api.delete(name, &params).await {
            Ok(_) => {
                self.recorder.event(
                    cronjob,
                    NORMAL,
                    "SuccessfulDelete",
                    format!("Deleted job {name}"),
                );
                Ok(())
            }
            Err(error) if is_not_found(&error) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Keeps at most the history limits of finished Jobs, oldest deleted first.
    async fn cleanup(
        &self,
        cronjob: &CronJob,
        owned: &[Arc<Job>],
        status: &CronJobStatus,
        job_api: &Api<Job>,
    ) -> anyhow::Result<()> {
        let spec = cronjob.spec.clone().unwrap_or_default();
        let active: Vec<_> = status.active.clone().unwrap_or_default();
        for (kind, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let mut done: Vec<&Arc<Job>> = owned
                .iter()
                .filter(|j| finished(j) == Some(kind))
                .filter(|j| !active.iter().any(|r| r.uid == j.metadata.uid))
                .filter(|j| j.metadata.deletion_timestamp.is_none())
                .collect();
            if done.len() <= limit.max(0) as usize {
                continue;
            }
            done.sort_by_key(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.clone())
                    .map(|t| t.0)
            });
            let extra = done.len() - limit.max(0) as usize;
            for job in done.into_iter().take(extra) {
                let name = job.name_str().to_string();
                self.delete_job(cronjob, job_api, &name).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recent_missed_time_and_the_count() {
        let every_minute = Schedule::parse("* * * * *").unwrap();
        let earliest: Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:03:10Z".parse().unwrap();
        let (last, missed) = most_recent(&every_minute, &TimeZone::UTC, earliest, now);
        assert_eq!(last, Some("2026-01-01T00:03:00Z".parse().unwrap()));
        assert_eq!(missed, 3);
        let (none, zero) = most_recent(&every_minute, &TimeZone::UTC, now, now);
        assert_eq!((none, zero), (None, 0));
    }
}
