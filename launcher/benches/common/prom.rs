//! Reading a process's `/metrics` (Prometheus or OpenMetrics text) for the benchmarks:
//! scraping it over plain HTTP, and the difference of counters and histograms between two
//! scrapes.

use std::collections::BTreeMap;

/// One sample: the series name, its labels, its value.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A scrape of `/metrics`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scrape(pub Vec<Sample>);

/// GETs `http://ADDRESS/metrics` and parses it.
pub(crate) async fn scrape(address: &str) -> anyhow::Result<Scrape> {
    let response = super::http_get(address, "/metrics").await;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("{address}/metrics: no HTTP answer"))?;
    anyhow::ensure!(
        head.split_whitespace().nth(1) == Some("200"),
        "{address}/metrics: {}",
        head.lines().next().unwrap_or("")
    );
    Ok(parse(body))
}

/// GETs `http://ADDRESS/PATH`; true for a 200 answer.
pub(crate) async fn ok(address: &str, path: &str) -> bool {
    let response = super::http_get(address, path).await;
    response.split_whitespace().nth(1) == Some("200")
}

/// Parses the text exposition format (chunked transfer framing, if any, is skipped as
/// lines that are not samples).
pub(crate) fn parse(text: &str) -> Scrape {
    let mut samples = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = match line.rsplit_once(' ') {
            Some(split) => split,
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, labels_of(rest.trim_end_matches('}'))),
            None => (series, BTreeMap::new()),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Scrape(samples)
}

fn labels_of(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let Some(end) = after.find('"') else { break };
        labels.insert(
            key.trim_start_matches(',').trim().to_string(),
            after[..end].to_string(),
        );
        rest = &after[end + 1..];
    }
    labels
}

/// A histogram's buckets (upper bound, cumulative count), count and sum.
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub count: f64,
    pub sum: f64,
}

impl Histogram {
    /// This histogram minus an earlier scrape of it.
    pub(crate) fn since(&self, before: &Histogram) -> Histogram {
        let earlier = |le: f64| {
            before
                .buckets
                .iter()
                .find(|(b, _)| *b == le)
                .map(|(_, c)| *c)
                .unwrap_or(0.0)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(le, c)| (*le, c - earlier(*le)))
                .collect(),
            count: self.count - before.count,
            sum: self.sum - before.sum,
        }
    }

    /// The `q` quantile, interpolated inside its bucket as PromQL's `histogram_quantile`.
    pub(crate) fn quantile(&self, q: f64) -> f64 {
        if self.count <= 0.0 {
            return 0.0;
        }
        let rank = q * self.count;
        let mut lower = (0.0, 0.0);
        for (le, cumulative) in &self.buckets {
            if *cumulative >= rank {
                if le.is_infinite() {
                    return lower.0;
                }
                let in_bucket = cumulative - lower.1;
                let fraction = if in_bucket > 0.0 {
                    (rank - lower.1) / in_bucket
                } else {
                    1.0
                };
                return lower.0 + (le - lower.0) * fraction;
            }
            lower = (*le, *cumulative);
        }
        lower.0
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            0.0
        }
    }
}

impl Scrape {
    fn matching<'a>(
        &'a self,
        name: &'a str,
        filter: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |s| {
            s.name == name
                && filter
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// The sum of the samples of `name` whose labels include `filter`.
    pub(crate) fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.matching(name, filter).map(|s| s.value).sum()
    }

    /// The histogram `base` (its `_bucket`, `_count`, `_sum` series) over the series whose
    /// labels include `filter`, summed.
    pub(crate) fn histogram(&self, base: &str, filter: &[(&str, &str)]) -> Histogram {
        let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for sample in self.matching(&format!("{base}_bucket"), filter) {
            let Some(le) = sample.labels.get("le").and_then(|le| parse_le(le)) else {
                continue;
            };
            let slot = buckets.entry(order_key(le)).or_insert((le, 0.0));
            slot.1 += sample.value;
        }
        Histogram {
            buckets: buckets.into_values().collect(),
            count: self.sum(&format!("{base}_count"), filter),
            sum: self.sum(&format!("{base}_sum"), filter),
        }
    }

    /// The values of label `label` among the series of `name`.
    pub(crate) fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        let mut values: Vec<String> = self
            .0
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| s.labels.get(label).cloned())
            .collect();
        values.sort();
        values.dedup();
        values
    }
}

fn parse_le(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        _ => text.parse().ok(),
    }
}

/// A key that sorts non-negative floats (and +Inf) in numeric order.
fn order_key(value: f64) -> u64 {
    value.to_bits()
}
