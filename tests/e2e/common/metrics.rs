//! Reading the Prometheus text the rkcm processes serve.

/// A sample: its metric name, labels and value.
pub(crate) type Sample<'a> = (&'a str, Vec<(String, String)>, f64);

/// A sample line's metric name, labels and value (Prometheus text format).
pub(crate) fn parse_sample(line: &str) -> Option<Sample<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(at);
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    let mut value = String::new();
                    chars.next(); // the opening quote
                    while let Some((_, c)) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some((_, escaped)) = chars.next() {
                                    value.push(match escaped {
                                        'n' => '\n',
                                        other => other,
                                    });
                                }
                            }
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        }
        rest = &inner[end? + 1..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The sum of `name`'s samples carrying all of `labels` (over the launcher's children
/// too: their samples carry an extra label naming the child), `None` when there is none.
pub(crate) fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for (sample, have, value) in text.lines().filter_map(parse_sample) {
        if sample == name
            && labels
                .iter()
                .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
        {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}

/// Whether `text` has a sample matching `selector`, written as a sample without its value
/// (`workqueue_adds_total{name="endpoint"}`, `up`): its labels are a subset of the
/// sample's, so the label the launcher adds to its children's samples does not matter.
pub(crate) fn has_sample(text: &str, selector: &str) -> bool {
    let selector = selector.trim().trim_end_matches('{');
    match parse_sample(&format!("{selector} 0")) {
        Some((name, labels, _)) => {
            let labels: Vec<(&str, &str)> = labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            metric_sum(text, name, &labels).is_some()
        }
        None => false,
    }
}

#[cfg(test)]
mod metric_tests {
    use super::*;

    #[test]
    fn samples_are_matched_on_a_subset_of_their_labels() {
        let text = "# HELP x y\nworkqueue_adds_total{process=\"worker-a\",name=\"endpoint\"} 4\n\
                    workqueue_adds_total{process=\"worker-b\",name=\"endpoint\"} 1\n\
                    workqueue_adds_total{name=\"other\"} 9\nup 1\n";
        assert_eq!(
            metric_sum(text, "workqueue_adds_total", &[("name", "endpoint")]),
            Some(5.0)
        );
        assert_eq!(metric_sum(text, "up", &[]), Some(1.0));
        assert!(has_sample(text, "workqueue_adds_total{name=\"other\"}"));
        assert!(has_sample(text, "up "));
        assert!(!has_sample(text, "down"));
        assert_eq!(
            metric_sum(text, "workqueue_adds_total", &[("name", "x")]),
            None
        );
    }
}
