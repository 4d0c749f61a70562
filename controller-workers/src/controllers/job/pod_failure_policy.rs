//! A Job's podFailurePolicy (upstream `pod_failure_policy.go`): the first rule whose
//! exit-code or pod-condition requirement a failed pod meets decides whether the failure
//! fails the Job (FailJob), is not counted against backoffLimit (Ignore), or counts as
//! usual (Count).

use crate::meta::ResourceNames;
use k8s_openapi::api::batch::v1::{Job, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// What a rule does with a failed pod it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    FailJob,
    Ignore,
    Count,
    /// Fails the pod's index (backoffLimitPerIndex).
    FailIndex,
}

/// The outcome for one failed pod: the message when it fails the Job, whether the
/// failure counts against backoffLimit, and the matching rule's action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    pub fail_job_message: Option<String>,
    pub count_failed: bool,
    pub action: Option<Action>,
}

const NO_MATCH: Outcome = Outcome {
    fail_job_message: None,
    count_failed: true,
    action: None,
};

fn exit_code_matches(code: i32, requirement: &PodFailurePolicyOnExitCodesRequirement) -> bool {
    match requirement.operator.as_str() {
        "In" => requirement.values.contains(&code),
        "NotIn" => !requirement.values.contains(&code),
        _ => false,
    }
}

/// The first terminated container (regular, then init) with a non-zero exit code the
/// requirement matches.
fn matching_container<'a>(
    pod: &'a Pod,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(&'a ContainerStatus, i32)> {
    let status = pod.status.as_ref()?;
    let lists = [
        status.container_statuses.as_deref().unwrap_or_default(),
        status
            .init_container_statuses
            .as_deref()
            .unwrap_or_default(),
    ];
    lists.into_iter().find_map(|list| {
        list.iter().find_map(|container| {
            let code = container.state.as_ref()?.terminated.as_ref()?.exit_code;
            let named = requirement
                .container_name
                .as_deref()
                .is_none_or(|n| n == container.name);
            (named && code != 0 && exit_code_matches(code, requirement))
                .then_some((container, code))
        })
    })
}

/// Matches a failed pod against the policy (`matchPodFailurePolicy`).
pub(super) fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> Outcome {
    let Some(policy) = policy else {
        return NO_MATCH;
    };
    let namespace = pod.namespace_str();
    let name = pod.name_str();
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(requirement) = &rule.on_exit_codes {
            matching_container(pod, requirement).map(|(container, code)| {
                format!(
                    "Container {} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                    container.name, rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|conditions| {
                    conditions.iter().find(|c| {
                        patterns
                            .iter()
                            .any(|p| p.type_ == c.type_ && p.status == c.status)
                    })
                })
                .map(|condition| {
                    format!(
                        "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                        condition.type_, rule.action
                    )
                })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        match rule.action.as_str() {
            "Ignore" => {
                return Outcome {
                    fail_job_message: None,
                    count_failed: false,
                    action: Some(Action::Ignore),
                }
            }
            "Count" => {
                return Outcome {
                    fail_job_message: None,
                    count_failed: true,
                    action: Some(Action::Count),
                }
            }
            "FailJob" => {
                return Outcome {
                    fail_job_message: Some(message),
                    count_failed: true,
                    action: Some(Action::FailJob),
                }
            }
            "FailIndex" => {
                return Outcome {
                    fail_job_message: None,
                    count_failed: true,
                    action: Some(Action::FailIndex),
                }
            }
            _ => continue,
        }
    }
    NO_MATCH
}

/// Only failed pods are replaced, never terminating ones: podReplacementPolicy Failed,
/// or any Job with a podFailurePolicy (`onlyReplaceFailedPods`).
pub(super) fn only_replace_failed_pods(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || spec.is_some_and(|s| s.pod_failure_policy.is_some())
}

/// Is the pod a failure of this Job (`isPodFailed`)? With only-failed replacement a pod
/// counts once it reached phase Failed; otherwise a pod being deleted before it
/// succeeded counts at once.
pub(super) fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = crate::pods::phase(pod);
    if only_replace_failed_pods(job) {
        return phase == "Failed";
    }
    phase == "Failed" || (pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{
        JobSpec, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
    };
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn failed_pod(codes: &[(&str, i32)], conditions: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Failed".into()),
                container_statuses: Some(
                    codes
                        .iter()
                        .map(|(name, code)| ContainerStatus {
                            name: name.to_string(),
                            state: Some(ContainerState {
                                terminated: Some(ContainerStateTerminated {
                                    exit_code: *code,
                                    ..ContainerStateTerminated::default()
                                }),
                                ..ContainerState::default()
                            }),
                            ..ContainerStatus::default()
                        })
                        .collect(),
                ),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| PodCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..PodCondition::default()
                        })
                        .collect(),
                ),
                ..PodStatus::default()
            }),
        }
    }

    fn exit_rule(
        action: &str,
        container: Option<&str>,
        op: &str,
        values: &[i32],
    ) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: container.map(Into::into),
                operator: op.into(),
                values: values.to_vec(),
            }),
            on_pod_conditions: None,
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let policy = PodFailurePolicy {
            rules: vec![
                exit_rule("Ignore", None, "In", &[3]),
                exit_rule("FailJob", Some("main"), "NotIn", &[1, 2]),
                exit_rule("Count", None, "In", &[1]),
            ],
        };
        let ignored = match_pod_failure_policy(Some(&policy), &failed_pod(&[("main", 3)], &[]));
        assert_eq!(
            (ignored.count_failed, ignored.action),
            (false, Some(Action::Ignore))
        );
        let fail = match_pod_failure_policy(Some(&policy), &failed_pod(&[("main", 42)], &[]));
        assert_eq!(
            fail.fail_job_message.as_deref(),
            Some("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1")
        );
        let counted = match_pod_failure_policy(Some(&policy), &failed_pod(&[("main", 1)], &[]));
        assert_eq!(
            (counted.count_failed, counted.action),
            (true, Some(Action::Count))
        );
        let sidecar = match_pod_failure_policy(Some(&policy), &failed_pod(&[("side", 42)], &[]));
        assert_eq!(
            sidecar, NO_MATCH,
            "FailJob names another container; exit 0 never matches"
        );
        assert_eq!(
            match_pod_failure_policy(None, &failed_pod(&[("main", 3)], &[])),
            NO_MATCH
        );
    }

    #[test]
    fn pod_conditions_match_by_type_and_status() {
        let policy = PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "Ignore".into(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".into(),
                    status: "True".into(),
                }]),
            }],
        };
        let disrupted = failed_pod(&[("main", 137)], &[("DisruptionTarget", "True")]);
        assert_eq!(
            match_pod_failure_policy(Some(&policy), &disrupted).action,
            Some(Action::Ignore)
        );
        let not = failed_pod(&[("main", 137)], &[("DisruptionTarget", "False")]);
        assert_eq!(match_pod_failure_policy(Some(&policy), &not), NO_MATCH);
    }

    #[test]
    fn terminating_pods_count_as_failed_only_without_failed_only_replacement() {
        let mut pod = failed_pod(&[], &[]);
        pod.status.as_mut().unwrap().phase = Some("Running".into());
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let mut job = Job {
            spec: Some(JobSpec::default()),
            ..Job::default()
        };
        assert!(is_pod_failed(&pod, &job));
        job.spec.as_mut().unwrap().pod_replacement_policy = Some("Failed".into());
        assert!(!is_pod_failed(&pod, &job));
        assert!(only_replace_failed_pods(&job));
    }
}
