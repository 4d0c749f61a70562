//! A Job's status conditions (upstream `ensureJobConditionStatus`, `IsJobFinished`): reading
//! them, and setting one so that its transition and probe times move as the real
//! controller moves them.

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub(super) fn condition_true(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Complete or Failed: a finished Job creates and counts no more pods.
pub(super) fn finished(job: &Job) -> bool {
    condition_true(job, "Complete") || condition_true(job, "Failed")
}

/// The reason and message of a true FailureTarget condition (set by a FailJob rule before
/// the pods' finalizers go).
pub(super) fn failure_target(status: &JobStatus) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "FailureTarget" && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Sets condition `type_` to `value`; false when it already had that value and reason.
/// The transition time moves only when the value changes.
pub(super) fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status == value && existing.reason.as_deref().unwrap_or("") == reason {
            return false;
        }
        if existing.status != value {
            existing.last_transition_time = Some(Time(now));
        }
        existing.status = value.into();
        existing.reason = (!reason.is_empty()).then(|| reason.into());
        existing.message = (!message.is_empty()).then(|| message.into());
        existing.last_probe_time = Some(Time(now));
        return true;
    }
    conditions.push(JobCondition {
        type_: type_.into(),
        status: value.into(),
        reason: (!reason.is_empty()).then(|| reason.into()),
        message: (!message.is_empty()).then(|| message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;

    fn condition(type_: &str, value: &str, reason: &str, at: Timestamp) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: value.into(),
            reason: (!reason.is_empty()).then(|| reason.into()),
            message: Some("before".into()),
            last_probe_time: Some(Time(at)),
            last_transition_time: Some(Time(at)),
        }
    }

    /// Cases after upstream's TestEnsureJobConditions.
    #[test]
    fn setting_a_condition() {
        let before = Timestamp::from_second(1_000).unwrap();
        let now = before + SignedDuration::from_secs(60);
        struct Case {
            name: &'static str,
            existing: Vec<JobCondition>,
            set: (&'static str, &'static str, &'static str),
            changed: bool,
            /// The condition afterwards: value, reason, transition time, probe time.
            after: (&'static str, Option<&'static str>, Timestamp, Timestamp),
            count: usize,
        }
        let cases = [
            Case {
                name: "a new condition is appended",
                existing: vec![],
                set: ("Suspended", "True", "JobSuspended"),
                changed: true,
                after: ("True", Some("JobSuspended"), now, now),
                count: 1,
            },
            Case {
                name: "a new False condition is appended too",
                existing: vec![condition("Complete", "True", "", before)],
                set: ("Suspended", "False", "JobResumed"),
                changed: true,
                after: ("False", Some("JobResumed"), now, now),
                count: 2,
            },
            Case {
                name: "same value and reason: untouched",
                existing: vec![condition("Suspended", "True", "JobSuspended", before)],
                set: ("Suspended", "True", "JobSuspended"),
                changed: false,
                after: ("True", Some("JobSuspended"), before, before),
                count: 1,
            },
            Case {
                name: "same value, another reason: probed, no transition",
                existing: vec![condition("Suspended", "True", "JobSuspended", before)],
                set: ("Suspended", "True", "Other"),
                changed: true,
                after: ("True", Some("Other"), before, now),
                count: 1,
            },
            Case {
                name: "value flips: transition and probe move",
                existing: vec![condition("Suspended", "True", "JobSuspended", before)],
                set: ("Suspended", "False", "JobResumed"),
                changed: true,
                after: ("False", Some("JobResumed"), now, now),
                count: 1,
            },
            Case {
                name: "an empty reason is left out",
                existing: vec![],
                set: ("Complete", "True", ""),
                changed: true,
                after: ("True", None, now, now),
                count: 1,
            },
        ];
        for case in cases {
            let mut status = JobStatus {
                conditions: Some(case.existing),
                ..JobStatus::default()
            };
            let (type_, value, reason) = case.set;
            let changed = set_condition(&mut status, type_, value, reason, "", now);
            assert_eq!(changed, case.changed, "{}", case.name);
            let conditions = status.conditions.unwrap();
            assert_eq!(conditions.len(), case.count, "{}", case.name);
            let c = conditions.iter().find(|c| c.type_ == type_).unwrap();
            let seen = (
                c.status.as_str(),
                c.reason.as_deref(),
                c.last_transition_time.as_ref().unwrap().0,
                c.last_probe_time.as_ref().unwrap().0,
            );
            assert_eq!(seen, case.after, "{}", case.name);
        }
    }

    #[test]
    fn finished_is_complete_or_failed_true() {
        let at = Timestamp::from_second(1_000).unwrap();
        let job = |conditions: Vec<JobCondition>| Job {
            status: Some(JobStatus {
                conditions: Some(conditions),
                ..JobStatus::default()
            }),
            ..Job::default()
        };
        assert!(finished(&job(vec![condition("Complete", "True", "", at)])));
        assert!(finished(&job(vec![condition("Failed", "True", "x", at)])));
        assert!(!finished(&job(vec![condition("Failed", "False", "x", at)])));
        assert!(!finished(&job(vec![condition(
            "FailureTarget",
            "True",
            "x",
            at
        )])));
        assert!(!finished(&Job::default()));
    }
}
