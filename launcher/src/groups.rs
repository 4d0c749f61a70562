//! Controller groups: which controllers run in which worker process
//! (`--process-groups FILE`).
//!
//! ```yaml
//! groups:
//! - name: default
//!   controllers: ["*", "-garbagecollector"]
//! - name: garbage-collector
//!   controllers: [garbagecollector]
//!   shards: 2            # optional: 2 processes, each a namespace-hash half
//! ```
//!
//! Without a file: a group `default` with every default-enabled controller except
//! garbage-collector, and a group `garbage-collector` with it (when this version has
//! it). A bad file fails at start with the line and the reason: unknown
//! controller, a controller in two groups, zero shards, a duplicate name.

use std::collections::BTreeMap;

use rkcm_controller_workers::registry;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    pub name: String,
    /// The `--controllers` list as written (KCM syntax).
    pub controllers: Vec<String>,
    /// The canonical names it selects.
    pub selected: Vec<&'static str>,
    pub shards: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    groups: Vec<RawGroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    controllers: Vec<String>,
    #[serde(default = "one")]
    shards: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{file}:{line}: {reason}")]
pub(crate) struct GroupsError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

/// The first line (1-based) at or after `from` that mentions `needle`.
fn line_of(text: &str, needle: &str, from: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, line)| line.contains(needle))
        .map(|(i, _)| i + 1)
        .unwrap_or(from.max(1))
}

/// Parses and checks a groups file; `global` is the launcher's `--controllers`, which
/// every group's list is intersected with.
pub(crate) fn parse(
    file: &str,
    text: &str,
    global: &[&'static str],
) -> Result<Vec<Group>, GroupsError> {
    let error = |line: usize, reason: String| GroupsError {
        file: file.to_string(),
        line,
        reason,
    };
    let parsed: File = serde_yaml::from_str(text).map_err(|e| {
        let line = e.location().map(|l| l.line()).unwrap_or(1);
        error(line, e.to_string())
    })?;
    if parsed.groups.is_empty() {
        return Err(error(1, "no groups".into()));
    }
    let mut owner: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut groups = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for raw in parsed.groups {
        let at = line_of(text, &format!("name: {}", raw.name), 1);
        if raw.name.is_empty()
            || !raw
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(error(
                at,
                format!(
                    "group name {:?}: use lowercase letters, digits and '-'",
                    raw.name
                ),
            ));
        }
        if !names.insert(raw.name.clone()) {
            return Err(error(at, format!("group {:?} is defined twice", raw.name)));
        }
        if raw.shards == 0 {
            return Err(error(
                line_of(text, "shards", at),
                format!("group {:?}: shards must be at least 1", raw.name),
            ));
        }
        let selected = registry::select(&raw.controllers).map_err(|e| {
            let needle = match &e {
                registry::SelectionError::Unknown(name) => name.trim_start_matches('-').to_string(),
                registry::SelectionError::Empty => "controllers".into(),
            };
            error(
                line_of(text, &needle, at),
                format!("group {:?}: {e}", raw.name),
            )
        })?;
        let selected: Vec<&'static str> = selected
            .into_iter()
            .filter(|c| global.contains(c))
            .collect();
        if raw.shards > 1 {
            if let Some(refusal) = registry::sharding_refusal(&selected) {
                return Err(error(
                    line_of(text, "shards", at),
                    format!("group {:?}: {refusal}", raw.name),
                ));
            }
        }
        for controller in &selected {
            if let Some(other) = owner.insert(controller, raw.name.clone()) {
                let short = registry::lookup(controller)
                    .and_then(|d| d.alias)
                    .unwrap_or(controller);
                let line = text
                    .lines()
                    .enumerate()
                    .skip(at.saturating_sub(1))
                    .find(|(_, l)| l.contains(controller) || l.contains(short) || l.contains('*'))
                    .map(|(i, _)| i + 1)
                    .unwrap_or(at);
                return Err(error(
                    line,
                    format!(
                        "{controller} is in both group {other:?} and group {:?}",
                        raw.name
                    ),
                ));
            }
        }
        groups.push(Group {
            name: raw.name,
            controllers: raw.controllers,
            selected,
            shards: raw.shards,
        });
    }
    Ok(groups)
}

/// The groups without a file: `default` (all but garbage-collector) and
/// `garbage-collector`, of what `global` selects.
pub(crate) fn defaults(global: &[&'static str]) -> Vec<Group> {
    let gc = "garbage-collector-controller";
    let mut groups = vec![Group {
        name: "default".into(),
        controllers: global
            .iter()
            .filter(|c| **c != gc)
            .map(|c| c.to_string())
            .collect(),
        selected: global.iter().copied().filter(|c| *c != gc).collect(),
        shards: 1,
    }];
    if global.contains(&gc) {
        groups.push(Group {
            name: "garbage-collector".into(),
            controllers: vec![gc.into()],
            selected: vec![gc],
            shards: 1,
        });
    }
    groups.retain(|group| !group.selected.is_empty());
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<&'static str> {
        registry::select(&["*".to_string()]).unwrap()
    }

    #[test]
    fn a_good_file() {
        let text = "groups:\n- name: apps\n  controllers: [deployment, replicaset]\n  shards: 2\n- name: rest\n  controllers: ['*', -deployment, -replicaset]\n";
        let groups = parse("g.yaml", text, &all()).unwrap();
        assert_eq!(
            groups[0].selected,
            ["deployment-controller", "replicaset-controller"]
        );
        assert_eq!(groups[0].shards, 2);
        let rest = &groups[1].selected;
        assert!(
            rest.contains(&"serviceaccount-controller")
                && rest.contains(&"garbage-collector-controller")
        );
        assert!(
            !rest.contains(&"deployment-controller") && !rest.contains(&"replicaset-controller")
        );
    }

    #[test]
    fn errors_name_the_line() {
        let twice = "groups:\n- name: a\n  controllers: [deployment]\n- name: b\n  controllers:\n  - replicaset\n  - deployment\n";
        let e = parse("g.yaml", twice, &all()).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(
            e.reason
                .contains("deployment-controller is in both group \"a\" and group \"b\""),
            "{e}"
        );

        let unknown = "groups:\n- name: a\n  controllers:\n  - frobnicator\n";
        let e = parse("g.yaml", unknown, &all()).unwrap_err();
        assert_eq!(
            (
                e.line,
                e.to_string()
                    .contains("not a kube-controller-manager controller")
            ),
            (4, true),
            "{e}"
        );

        let ttl = "groups:\n- name: nodes\n  controllers: [ttl]\n  shards: 2\n";
        let refused = parse("f.yaml", ttl, &all()).unwrap_err().to_string();
        assert!(
            refused.starts_with("f.yaml:4: group \"nodes\": ttl-controller cannot be sharded"),
            "{refused}"
        );
        let collector = "groups:\n- name: gc\n  controllers: [garbagecollector]\n  shards: 2\n";
        assert!(
            parse("f.yaml", collector, &all()).is_ok(),
            "the collector shards by key"
        );
        let zero = "groups:\n- name: a\n  controllers: [deployment]\n  shards: 0\n";
        let e = parse("g.yaml", zero, &all()).unwrap_err();
        assert_eq!(e.line, 4, "{e}");

        let unknown = "groups:\n- name: gc\n  controllers: [frobnicator]\n";
        let e = parse("g.yaml", unknown, &all()).unwrap_err();
        assert!(
            e.reason
                .contains("is not a kube-controller-manager controller"),
            "{e}"
        );
        assert_eq!(e.line, 3);

        let malformed = "groups:\n- name: a\n  controlers: [x]\n";
        let e = parse("g.yaml", malformed, &all()).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }

    #[test]
    fn defaults_put_the_garbage_collector_apart() {
        let groups = defaults(&all());
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].name, "default");
        assert!(!groups[0].selected.contains(&"garbage-collector-controller"));
        assert_eq!(groups[1].name, "garbage-collector");
        assert_eq!(groups[1].selected, ["garbage-collector-controller"]);
        let without =
            registry::select(&["*".to_string(), "-garbagecollector".to_string()]).unwrap();
        assert_eq!(defaults(&without).len(), 1);
    }
}
