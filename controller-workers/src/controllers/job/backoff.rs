//! When a Job may replace its failed pods (upstream `backoff_utils.go` and
//! `getPodCreationInfoForIndependentIndexes`): 10 s doubling per failure up to 10 min,
//! counted from the last failure, for the whole Job or, with backoffLimitPerIndex, for
//! each index on its own.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::counting::Counts;
use super::indexes;
use super::pod_failure_policy::is_pod_failed;

const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// How long to wait before replacing failed pods: 10 s doubling per failure, 10 min cap,
/// from the last failure.
pub(super) fn backoff_left(
    failures: i32,
    last_failure: Option<Timestamp>,
    now: Timestamp,
) -> Option<Duration> {
    if failures <= 0 {
        return None;
    }
    let delay = POD_FAILURE_BACKOFF
        .saturating_mul(1u32 << (failures - 1).min(16) as u32)
        .min(MAX_POD_FAILURE_BACKOFF);
    let last = last_failure?;
    let ready_at = last + SignedDuration::try_from(delay).ok()?;
    let left = ready_at.as_nanosecond() - now.as_nanosecond();
    (left > 0).then(|| Duration::from_nanos(left as u64))
}

/// The failed pod of `index` a replacement follows (upstream's pod "with delayed
/// deletion"): the one with the most failures, the latest to finish.
pub(super) fn last_failed_pod<'a>(pods: &'a [Arc<Pod>], index: i32, job: &Job) -> Option<&'a Pod> {
    pods.iter()
        .filter(|p| indexes::of_pod(p) == Some(index) && is_pod_failed(p, job))
        .max_by_key(|p| (indexes::absolute_failure_count(p), finished_time(p)))
        .map(|p| p.as_ref())
}

/// What a Job's backoff remembers between syncs (upstream `backoffRecord`, kept in the
/// controller's memory only): the failures since the last success and when the latest
/// of them happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BackoffRecord {
    pub(crate) failures_after_last_success: i32,
    pub(crate) last_failure: Option<Timestamp>,
}

/// When a pod finished, as upstream's backoff reads it (`getFinishedTime`): its
/// containers' latest finish once all have finished, else its Ready=False transition,
/// else its deletion time less its grace period, else its creation.
pub(super) fn finished_time(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    let all_finished = containers.and_then(|statuses| {
        statuses
            .iter()
            .map(|c| {
                c.state
                    .as_ref()?
                    .terminated
                    .as_ref()?
                    .finished_at
                    .as_ref()
                    .map(|t| t.0)
            })
            .collect::<Option<Vec<Timestamp>>>()?
            .into_iter()
            .max()
    });
    all_finished
        .or_else(|| {
            status?
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .filter(|c| c.status == "False")?
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
        })
        .or_else(|| {
            let deleted = pod.metadata.deletion_timestamp.as_ref()?.0;
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
            deleted.checked_sub(SignedDuration::from_secs(grace)).ok()
        })
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The record after this sync's newly finished pods (upstream `newBackoffRecord`): new
/// failures add up until a success; with a success among them, only the failures that
/// finished after the latest success count, and the latest failure time is the newest of
/// those.
pub(super) fn next_record(
    old: &BackoffRecord,
    new_succeeded: &[Arc<Pod>],
    new_failed: &[Arc<Pod>],
) -> BackoffRecord {
    let sorted = |pods: &[Arc<Pod>]| {
        let mut times: Vec<Option<Timestamp>> = pods.iter().map(|p| finished_time(p)).collect();
        times.sort();
        times
    };
    let succeeded = sorted(new_succeeded);
    let failed = sorted(new_failed);
    match succeeded.last() {
        None if failed.is_empty() => old.clone(),
        None => BackoffRecord {
            failures_after_last_success: old.failures_after_last_success + failed.len() as i32,
            last_failure: failed.last().copied().flatten(),
        },
        Some(last_success) => {
            let after: Vec<&Option<Timestamp>> = failed
                .iter()
                .rev()
                .take_while(|t| *t > last_success)
                .collect();
            BackoffRecord {
                failures_after_last_success: after.len() as i32,
                last_failure: after.first().copied().copied().flatten(),
            }
        }
    }
}

/// The record after this sync, from the one kept since the last: its new successes and
/// failures (ignored ones too).
pub(super) fn record_for(old: &BackoffRecord, counts: &Counts) -> BackoffRecord {
    let failed: Vec<Arc<Pod>> = counts
        .new_failed
        .iter()
        .chain(&counts.new_ignored)
        .cloned()
        .collect();
    next_record(old, &counts.new_succeeded, &failed)
}

/// The Job-wide backoff left before its failed pods are replaced: from the failures since
/// the last success (the ignored ones too), counted from the latest.
pub(super) fn job_backoff(counts: &Counts, now: Timestamp) -> Option<Duration> {
    backoff_left(
        counts.backoff.failures_after_last_success,
        counts.backoff.last_failure,
        now,
    )
}

/// With backoffLimitPerIndex: of `wanted`, the indexes whose own backoff is over; when
/// none is, also how long until the first one's ends.
pub(super) fn index_backoff(
    wanted: &[i32],
    job: &Job,
    pods: &[Arc<Pod>],
    now: Timestamp,
) -> (Vec<i32>, Option<Duration>) {
    let mut ready = Vec::new();
    let mut soonest: Option<Duration> = None;
    for index in wanted {
        let wait = last_failed_pod(pods, *index, job).and_then(|p| {
            let since = finished_time(p);
            backoff_left(indexes::absolute_failure_count(p) + 1, since, now)
        });
        match wait {
            None => ready.push(*index),
            Some(wait) => soonest = Some(soonest.map_or(wait, |s| s.min(wait))),
        }
    }
    let wait = if ready.is_empty() { soonest } else { None };
    (ready, wait)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::counting::count;
    use crate::controllers::job::fixtures::{self, exit_code_policy, job, pod};
    use std::collections::HashSet;

    #[test]
    fn backoff_doubles_from_10_seconds_to_10_minutes() {
        let now = Timestamp::from_second(10_000).unwrap();
        assert_eq!(backoff_left(0, Some(now), now), None);
        assert_eq!(
            backoff_left(1, Some(now), now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            backoff_left(3, Some(now), now),
            Some(Duration::from_secs(40))
        );
        assert_eq!(
            backoff_left(20, Some(now), now),
            Some(Duration::from_secs(600))
        );
        let later = now + SignedDuration::from_secs(15);
        assert_eq!(
            backoff_left(1, Some(now), later),
            None,
            "10 s after the failure it may go"
        );
    }

    /// Cases after upstream's TestGetRemainingBackoffTime.
    #[test]
    fn backoff_left_table() {
        let at = fixtures::now();
        let secs = |s: i64| at + SignedDuration::from_secs(s);
        let cases: [(&str, i32, Timestamp, Option<u64>); 8] = [
            ("no failures", 0, at, None),
            ("one failure, same instant", 1, at, Some(10)),
            ("one failure, 1 s later", 1, secs(1), Some(9)),
            ("one failure, at the backoff", 1, secs(10), None),
            ("one failure, past the backoff", 1, secs(11), None),
            ("three failures", 3, at, Some(40)),
            ("seven failures, below the cap", 7, at, Some(600)),
            ("nine failures, capped", 9, at, Some(600)),
        ];
        for (name, failures, now, want) in cases {
            let left = backoff_left(failures, Some(at), now);
            assert_eq!(left, want.map(Duration::from_secs), "{name}");
        }
        assert_eq!(backoff_left(2, None, at), None, "no failure time: no wait");
    }

    /// Cases after upstream's TestGetPodCreationInfoForIndependentIndexes.
    #[test]
    fn each_index_backs_off_on_its_own_failures() {
        let now = fixtures::now();
        let ago = |s: i64| now - SignedDuration::from_secs(s);
        let failed = |name: &str, index: &str, failures: i32, at: Timestamp| {
            pod(name, "Failed")
                .index(index)
                .failures(failures, 0)
                .finished_at(at)
                .build()
        };
        struct Case {
            name: &'static str,
            wanted: Vec<i32>,
            pods: Vec<Arc<Pod>>,
            ready: Vec<i32>,
            wait: Option<u64>,
        }
        let cases = [
            Case {
                name: "no failed pods: every index now",
                wanted: vec![1, 3],
                pods: vec![],
                ready: vec![1, 3],
                wait: None,
            },
            Case {
                name: "index 1 failed just now",
                wanted: vec![1, 3],
                pods: vec![failed("a", "1", 0, now)],
                ready: vec![3],
                wait: None,
            },
            Case {
                name: "index 3 failed a backoff ago",
                wanted: vec![1, 3],
                pods: vec![failed("a", "1", 0, now), failed("b", "3", 0, ago(10))],
                ready: vec![3],
                wait: None,
            },
            Case {
                name: "none ready: the soonest wait",
                wanted: vec![1, 2, 3],
                pods: vec![
                    failed("a", "1", 1, now),
                    failed("b", "2", 0, now),
                    failed("c", "3", 2, now),
                ],
                ready: vec![],
                wait: Some(10),
            },
            Case {
                name: "none ready, 1 s already passed",
                wanted: vec![1, 2, 3],
                pods: vec![
                    failed("a", "1", 1, ago(1)),
                    failed("b", "2", 0, ago(1)),
                    failed("c", "3", 2, ago(1)),
                ],
                ready: vec![],
                wait: Some(9),
            },
            Case {
                name: "the replacement follows the index's most failed pod",
                wanted: vec![0],
                pods: vec![failed("a", "0", 0, ago(15)), failed("b", "0", 1, ago(15))],
                ready: vec![],
                wait: Some(5),
            },
        ];
        let job = job(fixtures::indexed(3, 4));
        for case in cases {
            let (ready, wait) = index_backoff(&case.wanted, &job, &case.pods, now);
            assert_eq!(ready, case.ready, "{}", case.name);
            assert_eq!(wait, case.wait.map(Duration::from_secs), "{}", case.name);
        }
    }

    #[test]
    fn ignored_failures_still_back_off_the_job() {
        let now = fixtures::now();
        let mut spec = fixtures::spec(1, Some(1));
        spec.pod_failure_policy = Some(exit_code_policy(&[("Ignore", 3)]));
        let job = job(spec);
        let ignored = pod("a", "Failed").exit_code(3).finished_at(now).build();
        let mut counts = count(&job, vec![ignored], HashSet::new());
        assert_eq!(counts.failed, 0, "not counted against backoffLimit");
        counts.backoff = record_for(&BackoffRecord::default(), &counts);
        assert_eq!(job_backoff(&counts, now), Some(Duration::from_secs(10)));

        let job = fixtures::job(fixtures::spec(1, Some(1)));
        let pods = vec![
            pod("b", "Failed")
                .finished_at(now - SignedDuration::from_secs(30))
                .build(),
            pod("c", "Failed")
                .finished_at(now - SignedDuration::from_secs(5))
                .build(),
        ];
        let mut counts = count(&job, pods, HashSet::new());
        counts.backoff = record_for(&BackoffRecord::default(), &counts);
        assert_eq!(
            job_backoff(&counts, now),
            Some(Duration::from_secs(15)),
            "two failures: 20 s from the latest"
        );
    }

    #[test]
    fn failures_count_from_the_last_success() {
        struct Case {
            name: &'static str,
            old: BackoffRecord,
            succeeded: Vec<Arc<Pod>>,
            failed: Vec<Arc<Pod>>,
            want: BackoffRecord,
        }
        let now = fixtures::now();
        let ago = |s: i64| now - SignedDuration::from_secs(s);
        let failed = |name: &str, at: i64| pod(name, "Failed").finished_at(ago(at)).build();
        let succeeded = |name: &str, at: i64| pod(name, "Succeeded").finished_at(ago(at)).build();
        let record = |failures: i32, at: Option<i64>| BackoffRecord {
            failures_after_last_success: failures,
            last_failure: at.map(ago),
        };
        let cases = vec![
            Case {
                name: "nothing new keeps the record",
                old: record(2, Some(100)),
                succeeded: vec![],
                failed: vec![],
                want: record(2, Some(100)),
            },
            Case {
                name: "new failures add up, the latest time kept",
                old: record(2, Some(100)),
                succeeded: vec![],
                failed: vec![failed("a", 30), failed("b", 10)],
                want: record(4, Some(10)),
            },
            Case {
                name: "a success clears them",
                old: record(2, Some(100)),
                succeeded: vec![succeeded("s", 5)],
                failed: vec![],
                want: record(0, None),
            },
            Case {
                name: "only failures after the latest success count",
                old: record(2, Some(100)),
                succeeded: vec![succeeded("s1", 50), succeeded("s2", 20)],
                failed: vec![failed("a", 40), failed("b", 15), failed("c", 5)],
                want: record(2, Some(5)),
            },
            Case {
                name: "failures before the success count for nothing",
                old: record(2, Some(100)),
                succeeded: vec![succeeded("s", 5)],
                failed: vec![failed("a", 40)],
                want: record(0, None),
            },
        ];
        for case in cases {
            let next = next_record(&case.old, &case.succeeded, &case.failed);
            assert_eq!(next, case.want, "{}", case.name);
        }
    }
}
