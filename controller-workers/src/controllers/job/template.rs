//! The pod a Job creates (upstream's template handling in `manageJob` and
//! `indexed_job_utils.go`): its template with the job-tracking finalizer and, for an
//! Indexed Job, the completion index (annotation, label, `JOB_COMPLETION_INDEX`, hostname
//! and generateName) and, with backoffLimitPerIndex, the index's failure counts carried
//! over from the pod it replaces.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};

use super::backoff::last_failed_pod;
use super::indexes::{self, COMPLETION_INDEX};
use super::pod_failure_policy::match_pod_failure_policy;
use super::TRACKING_FINALIZER;
use crate::meta::ResourceNames;

/// The environment variable an Indexed Job's containers read their index from.
const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The template and generateName of the pod `job` creates for `index` (`None` for a
/// NonIndexed Job); `pods` are the Job's pods, where a replaced index's failures are read.
pub(super) fn new_pod(
    job: &Job,
    pods: &[Arc<Pod>],
    index: Option<i32>,
) -> (PodTemplateSpec, Option<String>) {
    let job_name = job.name_str().to_string();
    let no_spec = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&no_spec);
    let mut template = pod_template(&spec.template, &job_name, index);
    if let (Some(index), Some(_)) = (index, indexes::per_index_limit(spec)) {
        let policy = spec.pod_failure_policy.as_ref();
        let (failures, ignored) = last_failed_pod(pods, index, job)
            .map(|p| {
                let counted = match_pod_failure_policy(policy, p).count_failed;
                (
                    indexes::failure_count(p) + i32::from(counted),
                    indexes::ignored_failure_count(p) + i32::from(!counted),
                )
            })
            .unwrap_or((0, 0));
        let annotations = template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(indexes::FAILURE_COUNT.into(), failures.to_string());
        if ignored > 0 {
            annotations.insert(indexes::IGNORED_FAILURE_COUNT.into(), ignored.to_string());
        }
    }
    let generate_name = index.map(|i| format!("{job_name}-{i}-"));
    (template, generate_name)
}

/// The pod template with the tracking finalizer and, for an Indexed Job, the index
/// annotation and label and the hostname.
fn pod_template(template: &PodTemplateSpec, job_name: &str, index: Option<i32>) -> PodTemplateSpec {
    let mut template = template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    if let Some(index) = index {
        if let Some(spec) = template.spec.as_mut() {
            let containers = spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(spec.containers.iter_mut());
            for container in containers {
                let env = container.env.get_or_insert_with(Vec::new);
                if !env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
                    env.push(EnvVar {
                        name: COMPLETION_INDEX_ENV.into(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            field_ref: Some(ObjectFieldSelector {
                                api_version: None,
                                field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
                            }),
                            ..EnvVarSource::default()
                        }),
                    });
                }
            }
        }
        let meta = template.metadata.get_or_insert_with(Default::default);
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.into(), index.to_string());
        meta.labels
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.into(), index.to_string());
        if let Some(spec) = template.spec.as_mut() {
            spec.hostname = Some(format!("{job_name}-{index}"));
        }
    }
    template
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::fixtures::{self, exit_code_policy, job, pod};
    use k8s_openapi::api::core::v1::Container;

    #[test]
    fn indexed_pods_carry_their_index() {
        let template = PodTemplateSpec {
            spec: Some(Default::default()),
            ..Default::default()
        };
        let pod = pod_template(&template, "work", Some(2));
        let meta = pod.metadata.unwrap();
        assert_eq!(meta.annotations.unwrap()[COMPLETION_INDEX], "2");
        assert_eq!(meta.labels.unwrap()[COMPLETION_INDEX], "2");
        assert_eq!(meta.finalizers.unwrap(), [TRACKING_FINALIZER]);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("work-2"));
    }

    #[test]
    fn a_nonindexed_pod_gets_only_the_finalizer() {
        let mut spec = fixtures::spec(1, Some(1));
        if let Some(pod_spec) = spec.template.spec.as_mut() {
            pod_spec.containers.push(Container::default());
        }
        let (template, generate_name) = new_pod(&job(spec), &[], None);
        assert_eq!(generate_name, None);
        let meta = template.metadata.unwrap();
        assert_eq!(meta.finalizers.unwrap(), [TRACKING_FINALIZER]);
        assert!(meta.annotations.is_none() && meta.labels.is_none());
        let pod_spec = template.spec.unwrap();
        assert!(pod_spec.containers[0].env.is_none());
        assert!(pod_spec.hostname.is_none());
    }

    #[test]
    fn an_indexed_pod_reads_its_index_from_its_label() {
        let mut spec = fixtures::indexed(1, 3);
        if let Some(pod_spec) = spec.template.spec.as_mut() {
            pod_spec.containers.push(Container::default());
        }
        let (template, generate_name) = new_pod(&job(spec), &[], Some(1));
        assert_eq!(generate_name.as_deref(), Some("work-1-"));
        let env = template.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(env[0].name, COMPLETION_INDEX_ENV);
        let field = env[0].value_from.as_ref().unwrap().field_ref.as_ref();
        assert_eq!(
            field.unwrap().field_path,
            format!("metadata.labels['{COMPLETION_INDEX}']")
        );
        let annotations = template.metadata.unwrap().annotations.unwrap();
        assert!(
            !annotations.contains_key(indexes::FAILURE_COUNT),
            "no backoffLimitPerIndex, no failure count"
        );
    }

    /// After upstream's addIndexFailureCountAnnotation cases.
    #[test]
    fn a_replacement_carries_its_index_failures() {
        let mut spec = fixtures::indexed(1, 3);
        spec.backoff_limit_per_index = Some(3);
        spec.pod_failure_policy = Some(exit_code_policy(&[("Ignore", 3)]));
        let job = job(spec);
        let annotations = |pods: &[Arc<Pod>]| {
            let (template, _) = new_pod(&job, pods, Some(0));
            let annotations = template.metadata.unwrap().annotations.unwrap();
            (
                annotations.get(indexes::FAILURE_COUNT).cloned(),
                annotations.get(indexes::IGNORED_FAILURE_COUNT).cloned(),
            )
        };
        let some = |s: &str| Some(s.to_string());
        assert_eq!(annotations(&[]), (some("0"), None), "a first pod");
        let counted = pod("a", "Failed").index("0").failures(1, 0).build();
        assert_eq!(annotations(&[counted]), (some("2"), None));
        let ignored = pod("b", "Failed")
            .index("0")
            .failures(1, 1)
            .exit_code(3)
            .build();
        assert_eq!(annotations(&[ignored]), (some("1"), some("2")));
        let other_index = pod("c", "Failed").index("1").failures(2, 0).build();
        assert_eq!(annotations(&[other_index]), (some("0"), None));
    }
}
