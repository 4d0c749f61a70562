//! Completion indexes of Indexed Jobs: the `completedIndexes` text (`"1,3-5,7"`) and the
//! index a pod carries (`batch.kubernetes.io/job-completion-index`).

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

pub(super) const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// How often an index failed before this pod (backoffLimitPerIndex).
pub(super) const FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// How many of an index's failures a podFailurePolicy rule ignored before this pod.
pub(super) const IGNORED_FAILURE_COUNT: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";

pub(super) fn is_indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some("Indexed")
}

/// The completion mode as the metrics label it: `Indexed` or `NonIndexed`.
pub(super) fn completion_mode(job: &Job) -> &'static str {
    match job.spec.as_ref() {
        Some(spec) if is_indexed(spec) => "Indexed",
        _ => "NonIndexed",
    }
}

/// backoffLimitPerIndex, which only an Indexed Job has.
pub(super) fn per_index_limit(spec: &JobSpec) -> Option<i32> {
    spec.backoff_limit_per_index.filter(|_| is_indexed(spec))
}

pub(super) fn parse(text: &str, completions: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        if let (Ok(first), Ok(last)) = (first, last) {
            out.extend((first..=last).filter(|i| *i >= 0 && *i < completions));
        }
    }
    out
}

pub(super) fn format(indexes: &BTreeSet<i32>) -> String {
    let mut parts = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        // Two in a row are written as a pair, longer runs as a range (as upstream).
        parts.push(if start == end {
            start.to_string()
        } else if end == start + 1 {
            format!("{start},{end}")
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// The completion index a pod's annotation gives (upstream `getCompletionIndex`): `None`,
/// "no index", when it is missing, not a number or negative.
pub(super) fn of_pod(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
        .filter(|index: &i32| *index >= 0)
}

fn count_annotation(pod: &Pod, key: &str) -> i32 {
    pod.annotations()
        .get(key)
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|v| *v >= 0)
        .unwrap_or(0)
}

/// The index's counted failures before this pod.
pub(super) fn failure_count(pod: &Pod) -> i32 {
    count_annotation(pod, FAILURE_COUNT)
}

pub(super) fn ignored_failure_count(pod: &Pod) -> i32 {
    count_annotation(pod, IGNORED_FAILURE_COUNT)
}

/// Every failure of the index before this pod, ignored or not (drives its backoff).
pub(super) fn absolute_failure_count(pod: &Pod) -> i32 {
    failure_count(pod) + ignored_failure_count(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_index_is_a_non_negative_number() {
        use crate::controllers::job::fixtures::pod;
        let cases = [
            ("3", Some(3)),
            ("0", Some(0)),
            ("+2", Some(2)),
            ("-1", None),
            ("-7", None),
            ("x", None),
            ("", None),
            ("99999999999", None),
        ];
        for (annotation, want) in cases {
            let pod = pod("p", "Running").index(annotation).build();
            assert_eq!(of_pod(&pod), want, "{annotation:?}");
        }
        assert_eq!(of_pod(&pod("p", "Running").build()), None, "no annotation");
    }

    #[test]
    fn ranges_round_trip() {
        let set = parse("0,2-4,7", 8);
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 2, 3, 4, 7]);
        assert_eq!(format(&set), "0,2-4,7");
        assert_eq!(
            parse("5-9", 7).len(),
            2,
            "indexes beyond completions are dropped"
        );
        assert_eq!(format(&BTreeSet::new()), "");
        assert_eq!(
            format(&parse("1-2,4-6", 8)),
            "1,2,4-6",
            "a pair is not a range"
        );
    }
}
