//! The replica annotations, maxSurge/maxUnavailable fenceposts and proportional scaling.

use super::*;

/// Deployment size recorded on the ReplicaSet, if present and numeric.
pub fn get_desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    get_int_from_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
}

/// `replicas + maxSurge` recorded on the ReplicaSet, if present and numeric.
pub fn get_max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    get_int_from_annotation(rs, MAX_REPLICAS_ANNOTATION)
}

/// Reads an integer annotation; `None` when absent or not an integer.
/// Values outside i32 wrap, like Go's `int32(...)` conversion.
pub fn get_int_from_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    let raw = annotation(&rs.metadata, key)?;
    parse_go_int(raw).ok().map(|v| v as i32)
}

/// Writes the desired/max replicas annotations; returns whether either changed.
pub fn set_replicas_annotations(
    rs: &mut ReplicaSet,
    desired_replicas: i32,
    max_replicas: i32,
) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut updated = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired_replicas),
        (MAX_REPLICAS_ANNOTATION, max_replicas),
    ] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_string(), value);
            updated = true;
        }
    }
    updated
}

/// Whether [`set_replicas_annotations`] would change anything.
pub fn replicas_annotations_need_update(
    rs: &ReplicaSet,
    desired_replicas: i32,
    max_replicas: i32,
) -> bool {
    let Some(annotations) = rs.metadata.annotations.as_ref() else {
        return true;
    };
    annotations.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired_replicas.to_string())
        || annotations.get(MAX_REPLICAS_ANNOTATION) != Some(&max_replicas.to_string())
}

/// Resolves an int-or-percent against `total`.
///
/// Integers are taken as-is. Strings must be `<int>%`; the percentage of
/// `total` is rounded up or down as requested. Any other string is an error
/// (a bare `"5"` is rejected on purpose, as upstream's "safe" variant does).
pub fn get_scaled_value_from_int_or_percent(
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, String> {
    match value {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_string(),
                );
            };
            let pct = parse_go_int(digits)
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let scaled = pct as f64 * total as f64 / 100.0;
            let rounded = if round_up {
                scaled.ceil()
            } else {
                scaled.floor()
            };
            Ok(rounded as i64 as i32)
        }
    }
}

/// Resolves `maxSurge` and `maxUnavailable` together for `desired` replicas.
///
/// Surge rounds up and unavailability rounds down, so small percentages
/// still allow progress by surging. Missing values count as 0. If both end up
/// 0 the rollout could never make progress, so unavailability becomes 1
/// (surging might be blocked by quota, removing a pod never is).
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), String> {
    let zero = IntOrString::Int(0);
    let surge = get_scaled_value_from_int_or_percent(max_surge.unwrap_or(&zero), desired, true)?;
    let mut unavailable =
        get_scaled_value_from_int_or_percent(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// Maximum number of pods above `spec.replicas` a rolling update may run
/// (0 for non-rolling strategies). Invalid values resolve to 0; validation
/// keeps them out in practice.
pub fn max_surge(deployment: &Deployment) -> i32 {
    if !is_rolling_update(deployment) {
        return 0;
    }
    let (surge, unavailable) = rolling_update_params(deployment);
    resolve_fenceposts(
        Some(&surge),
        Some(&unavailable),
        deployment_replicas(deployment),
    )
    .map(|(s, _)| s)
    .unwrap_or(0)
}

/// Maximum number of pods that may be unavailable during a rolling update,
/// capped at `spec.replicas` (0 for non-rolling strategies or 0 replicas).
pub fn max_unavailable(deployment: &Deployment) -> i32 {
    let replicas = deployment_replicas(deployment);
    if !is_rolling_update(deployment) || replicas == 0 {
        return 0;
    }
    let (surge, unavailable) = rolling_update_params(deployment);
    let unavailable = resolve_fenceposts(Some(&surge), Some(&unavailable), replicas)
        .map(|(_, u)| u)
        .unwrap_or(0);
    unavailable.min(replicas)
}

/// Minimum number of available pods the Deployment must keep (0 for
/// non-rolling strategies, where downtime is accepted).
pub fn min_available(deployment: &Deployment) -> i32 {
    if !is_rolling_update(deployment) {
        return 0;
    }
    deployment_replicas(deployment) - max_unavailable(deployment)
}

/// How many replicas `rs` should gain (positive) or lose (negative) in a
/// proportional scaling step, bounded so that the running total never
/// overshoots `deployment_replicas_to_add`.
pub fn get_proportion(
    rs: Option<&ReplicaSet>,
    deployment: &Deployment,
    deployment_replicas_to_add: i32,
    deployment_replicas_added: i32,
) -> i32 {
    let Some(rs) = rs else {
        return 0;
    };
    if replica_set_replicas(rs) == 0
        || deployment_replicas_to_add == 0
        || deployment_replicas_to_add == deployment_replicas_added
    {
        return 0;
    }
    let fraction = get_replica_set_fraction(rs, deployment);
    let allowed = deployment_replicas_to_add - deployment_replicas_added;
    if deployment_replicas_to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// Change in size that keeps `rs` at the same share of the Deployment after
/// a resize: `rs.replicas * (new replicas + surge) / max-replicas annotation`
/// (the annotation records the size the share was computed against; the
/// current `status.replicas` is the fallback). Scaling to zero removes the
/// whole ReplicaSet.
pub fn get_replica_set_fraction(rs: &ReplicaSet, deployment: &Deployment) -> i32 {
    let rs_replicas = replica_set_replicas(rs);
    let d_replicas = deployment_replicas(deployment);
    if d_replicas == 0 {
        return rs_replicas.wrapping_neg();
    }
    let deployment_size = d_replicas.wrapping_add(max_surge(deployment));
    let annotated = get_max_replicas_annotation(rs).unwrap_or_else(|| {
        deployment
            .status
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(0)
    });
    let new_size = f64::from(rs_replicas.wrapping_mul(deployment_size)) / f64::from(annotated);
    round_to_i32(new_size).wrapping_sub(rs_replicas)
}

/// Half-away-from-zero rounding by offset-and-truncate, as upstream does.
pub(super) fn round_to_i32(a: f64) -> i32 {
    if a < 0.0 {
        (a - 0.5) as i32
    } else {
        (a + 0.5) as i32
    }
}

/// Size the new ReplicaSet should have next.
///
/// Rolling update: grow towards `spec.replicas` but keep the total across
/// all ReplicaSets (which must include `new_rs`) within
/// `replicas + maxSurge`. Recreate: jump straight to `spec.replicas` (old
/// pods are already gone by then).
pub fn new_rs_new_replicas<R: Borrow<ReplicaSet>>(
    deployment: &Deployment,
    all_rss: &[R],
    new_rs: &ReplicaSet,
) -> Result<i32, String> {
    let d_replicas = deployment_replicas(deployment);
    let new_rs_replicas = replica_set_replicas(new_rs);
    match strategy_type(deployment) {
        ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE => {
            let (surge, _) = rolling_update_params(deployment);
            let surge = get_scaled_value_from_int_or_percent(&surge, d_replicas, true)?;
            let current = get_replica_count_for_replica_sets(all_rss);
            let max_total = d_replicas.wrapping_add(surge);
            if current >= max_total {
                return Ok(new_rs_replicas);
            }
            let scale_up = (max_total - current).min(d_replicas.wrapping_sub(new_rs_replicas));
            Ok(new_rs_replicas.wrapping_add(scale_up))
        }
        RECREATE_DEPLOYMENT_STRATEGY_TYPE => Ok(d_replicas),
        other => Err(format!("deployment type {other} isn't supported")),
    }
}

/// Whether the new ReplicaSet fully owns the Deployment: its size, its
/// desired-replicas annotation and its available pods all equal
/// `spec.replicas`. The annotation check guards against treating a
/// ReplicaSet as saturated in the middle of a Deployment resize.
pub fn is_saturated(deployment: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else {
        return false;
    };
    let Some(desired) =
        annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION).and_then(|v| parse_go_int(v).ok())
    else {
        return false;
    };
    let d_replicas = deployment_replicas(deployment);
    let available = rs_status(rs)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    replica_set_replicas(rs) == d_replicas
        && desired as i32 == d_replicas
        && available == d_replicas
}

/// When at most one ReplicaSet is active (non-zero size), returns it — or,
/// if none is active, the new ReplicaSet, else the newest old one — so a
/// resize can be applied to it alone. Returns `None` when several are active
/// (proportional scaling is needed) or when there are no ReplicaSets.
///
/// Unlike upstream, `old_rss` is not reordered in place.
pub fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSet>,
    old_rss: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    if new_rs.is_none() && old_rss.is_empty() {
        return None;
    }
    let mut sorted_old: Vec<&'a ReplicaSet> = old_rss.to_vec();
    sorted_old.sort_by(|a, b| cmp_by_creation_timestamp(b, a));
    let candidates: Vec<&'a ReplicaSet> = sorted_old.iter().copied().chain(new_rs).collect();
    let active = filter_active_replica_sets(&candidates);
    match active.len() {
        0 => new_rs.or_else(|| sorted_old.first().copied()),
        1 => Some(active[0]),
        _ => None,
    }
}
