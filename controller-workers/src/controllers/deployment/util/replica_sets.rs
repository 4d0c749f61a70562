//! Finding a Deployment's new and old ReplicaSets (by template, ignoring the hash) and counting their replicas.

use super::*;

/// Compares two pod templates the way the API server's semantic equality
/// would, ignoring the `pod-template-hash` label (the Deployment's template
/// never carries it, and its value depends on the hashing scheme).
///
/// Comparison is on the JSON form with absent, `null`, empty lists and empty
/// objects treated alike — Go's semantic equality equates nil and empty
/// slices/maps and zero-valued structs. Known approximations: a nil vs empty
/// pointer-to-struct (e.g. `securityContext: {}` vs absent) compares equal,
/// and quantities are compared textually (`"1000m"` ≠ `"1"`); objects read
/// from the API server carry canonical quantities, so this does not arise in
/// practice.
pub fn equal_ignore_hash(template1: &PodTemplateSpec, template2: &PodTemplateSpec) -> bool {
    fn strip(t: &PodTemplateSpec) -> PodTemplateSpec {
        let mut t = t.clone();
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
        }
        t
    }
    let (t1, t2) = (strip(template1), strip(template2));
    match (serde_json::to_value(&t1), serde_json::to_value(&t2)) {
        (Ok(mut v1), Ok(mut v2)) => {
            prune_empty(&mut v1);
            prune_empty(&mut v2);
            v1 == v2
        }
        // Serialisation only fails on unrepresentable timestamps; fall back to
        // structural equality rather than guessing.
        _ => t1 == t2,
    }
}

/// Removes `null`, empty arrays and empty objects from objects, bottom-up.
/// Array elements are never removed (that would change the list length).
fn prune_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for child in map.values_mut() {
                prune_empty(child);
            }
            map.retain(|_, child| !is_empty_value(child));
        }
        Value::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The ReplicaSet whose template matches the Deployment's, if any.
///
/// Several may match (e.g. after an upgrade changed the hashing); the oldest
/// by creation timestamp (then name) wins so that the choice is stable.
pub fn find_new_replica_set<'a>(
    deployment: &Deployment,
    rs_list: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    let default_template = PodTemplateSpec::default();
    let d_template = deployment
        .spec
        .as_ref()
        .map(|s| &s.template)
        .unwrap_or(&default_template);
    let mut sorted = rs_list.to_vec();
    sort_replica_sets_by_creation_timestamp(&mut sorted);
    sorted
        .into_iter()
        .find(|rs| equal_ignore_hash(rs_template(rs).unwrap_or(&default_template), d_template))
}

/// Splits the Deployment's ReplicaSets, excluding the new one, into
/// `(all_old, old_with_nonzero_replicas)`, both in creation-timestamp order.
///
/// NOTE: upstream returns the pair the other way round (active first).
/// The new ReplicaSet is recognised by UID, or by identity when it has no
/// UID (objects not yet persisted).
pub fn find_old_replica_sets<'a>(
    deployment: &Deployment,
    rs_list: &[&'a ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let new_rs = find_new_replica_set(deployment, rs_list);
    let is_new = |rs: &ReplicaSet| {
        new_rs.is_some_and(|n| {
            std::ptr::eq(n, rs) || (n.metadata.uid.is_some() && n.metadata.uid == rs.metadata.uid)
        })
    };
    let mut sorted = rs_list.to_vec();
    sort_replica_sets_by_creation_timestamp(&mut sorted);
    let all: Vec<&'a ReplicaSet> = sorted.into_iter().filter(|rs| !is_new(rs)).collect();
    let active = all
        .iter()
        .copied()
        .filter(|rs| replica_set_replicas(rs) != 0)
        .collect();
    (all, active)
}

/// Sum of `spec.replicas`.
pub fn get_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    rss.iter().fold(0i32, |acc, rs| {
        acc.wrapping_add(replica_set_replicas(rs.borrow()))
    })
}

/// Sum of `status.replicas` (pods that exist, ready or not).
pub fn get_actual_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.replicas)
}

/// Sum of `status.readyReplicas`.
pub fn get_ready_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.ready_replicas.unwrap_or(0))
}

/// Sum of `status.availableReplicas`.
pub fn get_available_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.available_replicas.unwrap_or(0))
}

fn sum_status<R: Borrow<ReplicaSet>>(rss: &[R], f: impl Fn(&ReplicaSetStatus) -> i32) -> i32 {
    rss.iter().fold(0i32, |acc, rs| {
        acc.wrapping_add(rs_status(rs.borrow()).map(&f).unwrap_or(0))
    })
}

/// ReplicaSets with a non-zero desired size, in input order.
pub fn filter_active_replica_sets<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    filter_replica_sets(rss, |rs| replica_set_replicas(rs) > 0)
}

/// ReplicaSets matching `pred`, in input order.
pub fn filter_replica_sets<'a>(
    rss: &[&'a ReplicaSet],
    pred: impl Fn(&ReplicaSet) -> bool,
) -> Vec<&'a ReplicaSet> {
    rss.iter().copied().filter(|rs| pred(rs)).collect()
}
