//! Completion indexes of Indexed Jobs: the `completedIndexes` text (`"1,3-5,7"`) and the
//! index a pod carries (`batch.kubernetes.io/job-completion-index`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

pub fn parse(text: &str, completions: i32) -> BTreeSet<i32> {
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

pub fn format(indexes: &BTreeSet<i32>) -> String {
    let mut parts = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

pub fn of_pod(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
