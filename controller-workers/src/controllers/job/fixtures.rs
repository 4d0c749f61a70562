//! Jobs and pods for the job controller's table tests.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{
    Job, JobCondition, JobSpec, JobStatus, PodFailurePolicy,
    PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodSpec,
    PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::indexes;
use super::TRACKING_FINALIZER;

/// A fixed instant the tests measure from.
pub(super) fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

pub(super) fn spec(parallelism: i32, completions: Option<i32>) -> JobSpec {
    JobSpec {
        parallelism: Some(parallelism),
        completions,
        backoff_limit: Some(6),
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec::default()),
        },
        ..JobSpec::default()
    }
}

pub(super) fn indexed(parallelism: i32, completions: i32) -> JobSpec {
    JobSpec {
        completion_mode: Some("Indexed".into()),
        ..spec(parallelism, Some(completions))
    }
}

pub(super) fn job(spec: JobSpec) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some("work".into()),
            namespace: Some("ns".into()),
            uid: Some("job-uid".into()),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

pub(super) fn set_status(job: &mut Job, status: JobStatus) {
    job.status = Some(status);
}

pub(super) fn condition(type_: &str, value: &str) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: value.into(),
        ..JobCondition::default()
    }
}

/// A podFailurePolicy with one `In [code]` exit-code rule per (action, code).
pub(super) fn exit_code_policy(rules: &[(&str, i32)]) -> PodFailurePolicy {
    PodFailurePolicy {
        rules: rules
            .iter()
            .map(|(action, code)| PodFailurePolicyRule {
                action: action.to_string(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: None,
                    operator: "In".into(),
                    values: vec![*code],
                }),
                on_pod_conditions: None,
            })
            .collect(),
    }
}

/// A pod of the Job, its UID its name, holding the tracking finalizer.
pub(super) fn pod(name: &str, phase: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(name.into()),
            finalizers: Some(vec![TRACKING_FINALIZER.into()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }),
    })
}

pub(super) struct PodBuilder(Pod);

impl PodBuilder {
    fn status(&mut self) -> &mut PodStatus {
        self.0.status.get_or_insert_with(PodStatus::default)
    }

    fn annotate(mut self, key: &str, value: String) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value);
        self
    }

    pub(super) fn index(self, index: &str) -> Self {
        self.annotate(indexes::COMPLETION_INDEX, index.into())
    }

    /// The index's counted and ignored failures before this pod.
    pub(super) fn failures(self, counted: i32, ignored: i32) -> Self {
        self.annotate(indexes::FAILURE_COUNT, counted.to_string())
            .annotate(indexes::IGNORED_FAILURE_COUNT, ignored.to_string())
    }

    pub(super) fn no_finalizer(mut self) -> Self {
        self.0.metadata.finalizers = None;
        self
    }

    pub(super) fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(now()));
        self
    }

    pub(super) fn ready(mut self) -> Self {
        self.status()
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            });
        self
    }

    pub(super) fn on_node(mut self) -> Self {
        self.0.spec.get_or_insert_with(PodSpec::default).node_name = Some("node".into());
        self
    }

    fn terminated(mut self, exit_code: i32, finished_at: Option<Timestamp>) -> Self {
        self.status()
            .container_statuses
            .get_or_insert_with(Vec::new)
            .push(ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code,
                        finished_at: finished_at.map(Time),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            });
        self
    }

    pub(super) fn exit_code(self, code: i32) -> Self {
        self.terminated(code, None)
    }

    /// Its container finished at `at` (exit code 1, unless [`PodBuilder::exit_code`] set
    /// one).
    pub(super) fn finished_at(mut self, at: Timestamp) -> Self {
        let terminated = self
            .status()
            .container_statuses
            .iter_mut()
            .flatten()
            .find_map(|c| c.state.as_mut()?.terminated.as_mut());
        match terminated {
            Some(terminated) => {
                terminated.finished_at = Some(Time(at));
                self
            }
            None => self.terminated(1, Some(at)),
        }
    }

    /// A running container restarted `count` times.
    pub(super) fn restarts(mut self, count: i32) -> Self {
        self.status()
            .container_statuses
            .get_or_insert_with(Vec::new)
            .push(ContainerStatus {
                name: "main".into(),
                restart_count: count,
                ..ContainerStatus::default()
            });
        self
    }

    pub(super) fn build(self) -> Arc<Pod> {
        Arc::new(self.0)
    }
}
