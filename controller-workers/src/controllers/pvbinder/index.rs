//! Finding a volume for a claim (upstream `index.go` and `FindMatchingVolume`): volumes are
//! grouped by their access modes written as a set (`RWO,ROX`); the groups holding every
//! mode the claim asks for are searched fewest modes first, so a claim gets the volume
//! closest to what it asked for, and within a group a volume pre-bound to the claim wins
//! at once, else the smallest that fits.
//!
//! Node affinity is not looked at: the scheduler binds claims whose class waits for the
//! first consumer, and checks it there.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::meta::ResourceNames;
use crate::selector::Selector;
use crate::volume_util::{claim_class, volume_class};

use super::helpers::{
    check_access_modes, claim_access_modes, claim_key, is_volume_bound_to_claim, requested_storage,
    volume_access_modes, volume_mode_mismatch, volume_phase, volume_storage, VOLUME_AVAILABLE,
};

/// The access modes in the order and shorthand of `GetAccessModesAsString`.
const MODES: [(&str, &str); 4] = [
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
];

/// `GetAccessModesAsString`: the set of modes as `RWO,ROX,...` (duplicates and unknown
/// modes dropped).
pub(super) fn access_modes_key(modes: &[String]) -> String {
    MODES
        .iter()
        .filter(|(mode, _)| modes.iter().any(|m| m == mode))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// `GetAccessModesFromString`.
fn modes_of_key(key: &str) -> Vec<&'static str> {
    key.split(',')
        .map(str::trim)
        .filter_map(|short| MODES.iter().find(|(_, s)| *s == short).map(|(m, _)| *m))
        .collect()
}

/// `findBestMatchForClaim`: the volume to bind `claim` to, if any. `delay_binding` (the
/// claim's class waits for the first consumer) leaves unbound volumes to the scheduler; a
/// volume pre-bound to the claim is still returned.
pub(super) fn find_best_match_for_claim(
    volumes: &[Arc<PersistentVolume>],
    claim: &PersistentVolumeClaim,
    delay_binding: bool,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let mut groups: BTreeMap<String, Vec<&Arc<PersistentVolume>>> = BTreeMap::new();
    for volume in volumes {
        groups
            .entry(access_modes_key(&volume_access_modes(volume)))
            .or_default()
            .push(volume);
    }
    let requested = claim_access_modes(claim);
    let mut candidates: Vec<(&String, &mut Vec<&Arc<PersistentVolume>>)> = groups
        .iter_mut()
        .filter(|(key, _)| {
            let offered = modes_of_key(key);
            requested
                .iter()
                .all(|mode| offered.contains(&mode.as_str()))
        })
        .collect();
    // Fewest modes first; the key breaks ties so that the order does not depend on a map.
    candidates.sort_by_key(|(key, _)| (modes_of_key(key).len(), (*key).clone()));
    for (_, group) in candidates {
        group.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if let Some(volume) = find_matching_volume(claim, group, delay_binding)? {
            return Ok(Some(volume.clone()));
        }
    }
    Ok(None)
}

/// `FindMatchingVolume` on the controller's path (no node, nothing excluded).
pub(super) fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a Arc<PersistentVolume>],
    delay_binding: bool,
) -> Result<Option<&'a Arc<PersistentVolume>>, String> {
    let requested = requested_storage(claim);
    let requested_class = claim_class(claim);
    let selector = match claim.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(selector) => Some(
            Selector::from_label_selector(Some(selector)).map_err(|error| {
                format!(
                    "error creating internal label selector for claim: {}: {error}",
                    claim_key(claim)
                )
            })?,
        ),
        None => None,
    };
    let mut smallest: Option<&'a Arc<PersistentVolume>> = None;
    for &volume in volumes {
        let claimed = volume
            .spec
            .as_ref()
            .is_some_and(|spec| spec.claim_ref.is_some());
        if claimed && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        let size = volume_storage(volume);
        if size.cmp_value(&requested).is_lt() {
            continue;
        }
        if volume_mode_mismatch(claim, volume) {
            continue;
        }
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if is_volume_bound_to_claim(volume, claim) {
            return Ok(Some(volume));
        }
        if delay_binding {
            continue;
        }
        if volume_phase(volume) != VOLUME_AVAILABLE {
            continue;
        }
        if let Some(selector) = &selector {
            if !selector.matches(volume.metadata.labels.as_ref()) {
                continue;
            }
        }
        if volume_class(volume) != requested_class {
            continue;
        }
        if smallest.is_none_or(|best| volume_storage(best).cmp_value(&size).is_gt()) {
            smallest = Some(volume);
        }
    }
    Ok(smallest)
}

/// `checkVolumeSatisfyClaim`: why the volume a claim names cannot serve it, if it cannot.
pub(super) fn check_volume_satisfy_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), String> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Err(format!(
            "the volume is marked for deletion {:?}",
            volume.name_str()
        ));
    }
    // Whole units, rounded up, as Go's Value().
    let volume_size = volume_storage(volume);
    let requested = requested_storage(claim);
    let smaller = match (volume_size.value(), requested.value()) {
        (Some(offered), Some(wanted)) => offered < wanted,
        _ => volume_size.cmp_value(&requested).is_lt(),
    };
    if smaller {
        return Err("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".into());
    }
    if volume_mode_mismatch(claim, volume) {
        return Err("incompatible volumeMode".into());
    }
    if !check_access_modes(claim, volume) {
        return Err("incompatible accessMode".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::{claim_ref, pv, pvc};
    use super::*;
    use serde_json::json;

    fn modes(list: &[&str]) -> serde_json::Value {
        json!({"spec": {"accessModes": list}})
    }

    #[test]
    fn access_mode_keys() {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            access_modes_key(&list(&["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"])),
            "RWO,RWX"
        );
        assert_eq!(access_modes_key(&list(&["Bogus"])), "");
        assert_eq!(
            modes_of_key("RWO,ROX,RWOP"),
            vec!["ReadWriteOnce", "ReadOnlyMany", "ReadWriteOncePod"]
        );
    }

    /// (what, volumes, claim, delay binding, the volume expected)
    type Case = (
        &'static str,
        Vec<PersistentVolume>,
        PersistentVolumeClaim,
        bool,
        Option<&'static str>,
    );

    #[test]
    fn matching_table() {
        let deleting = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
        let cases: Vec<Case> = vec![
            (
                "smallest that fits wins",
                vec![
                    pv("a", "10Gi", json!({})),
                    pv("b", "2Gi", json!({})),
                    pv("c", "500Mi", json!({})),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                Some("b"),
            ),
            (
                "too small: none",
                vec![pv("a", "500Mi", json!({}))],
                pvc("c1", "1Gi", json!({})),
                false,
                None,
            ),
            (
                "the exact access-mode set before a wider one, even if larger",
                vec![
                    pv(
                        "wide",
                        "1Gi",
                        modes(&["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"]),
                    ),
                    pv("rwo", "5Gi", json!({})),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                Some("rwo"),
            ),
            (
                "a wider set when no narrower one fits",
                vec![
                    pv(
                        "wide",
                        "1Gi",
                        modes(&["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"]),
                    ),
                    pv("rwo", "500Mi", json!({})),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                Some("wide"),
            ),
            (
                "RWX only from a set holding it",
                vec![
                    pv("rwo", "1Gi", json!({})),
                    pv("rox", "1Gi", modes(&["ReadWriteOnce", "ReadOnlyMany"])),
                ],
                pvc("c1", "1Gi", modes(&["ReadWriteMany"])),
                false,
                None,
            ),
            (
                "volumeMode must match (unset is Filesystem)",
                vec![
                    pv("block", "1Gi", json!({"spec": {"volumeMode": "Block"}})),
                    pv("fs", "5Gi", json!({"spec": {"volumeMode": null}})),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                Some("fs"),
            ),
            (
                "selector",
                vec![
                    pv(
                        "a",
                        "1Gi",
                        json!({"metadata": {"labels": {"tier": "gold"}}}),
                    ),
                    pv("b", "1Gi", json!({})),
                ],
                pvc(
                    "c1",
                    "1Gi",
                    json!({"spec": {"selector": {"matchLabels": {"tier": "gold"}}}}),
                ),
                false,
                Some("a"),
            ),
            (
                "selector matching nothing",
                vec![pv("b", "1Gi", json!({}))],
                pvc(
                    "c1",
                    "1Gi",
                    json!({"spec": {"selector": {"matchLabels": {"tier": "gold"}}}}),
                ),
                false,
                None,
            ),
            (
                "class must match, beta annotation first",
                vec![
                    pv("fast", "1Gi", json!({"spec": {"storageClassName": "fast"}})),
                    pv(
                        "beta",
                        "2Gi",
                        json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}}, "spec": {"storageClassName": "fast"}}),
                    ),
                ],
                pvc("c1", "1Gi", json!({"spec": {"storageClassName": "gold"}})),
                false,
                Some("beta"),
            ),
            (
                "class \"\" does not take a classed volume",
                vec![pv(
                    "fast",
                    "1Gi",
                    json!({"spec": {"storageClassName": "fast"}}),
                )],
                pvc("c1", "1Gi", json!({})),
                false,
                None,
            ),
            (
                "pre-bound to the claim wins over a smaller one, even not Available",
                vec![pv("small", "1Gi", json!({})), {
                    let mut overlay = claim_ref("c1", "");
                    overlay["status"] = json!({"phase": "Bound"});
                    pv("mine", "10Gi", overlay)
                }],
                pvc("c1", "1Gi", json!({})),
                false,
                Some("mine"),
            ),
            (
                "pre-bound to another claim or uid: skipped",
                vec![
                    pv("other", "1Gi", claim_ref("c2", "")),
                    pv("olduid", "1Gi", claim_ref("c1", "old")),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                None,
            ),
            (
                "delay binding skips unbound volumes",
                vec![pv("a", "1Gi", json!({}))],
                pvc("c1", "1Gi", json!({})),
                true,
                None,
            ),
            (
                "delay binding still takes a pre-bound one",
                vec![
                    pv("a", "1Gi", json!({})),
                    pv("mine", "1Gi", claim_ref("c1", "uid-c1")),
                ],
                pvc("c1", "1Gi", json!({})),
                true,
                Some("mine"),
            ),
            (
                "a volume being deleted is skipped, even pre-bound",
                vec![pv("a", "1Gi", deleting.clone()), {
                    let mut overlay = claim_ref("c1", "");
                    overlay["metadata"] = deleting["metadata"].clone();
                    pv("mine", "1Gi", overlay)
                }],
                pvc("c1", "1Gi", json!({})),
                false,
                None,
            ),
            (
                "only Available volumes",
                vec![
                    pv("released", "1Gi", json!({"status": {"phase": "Released"}})),
                    pv("pending", "1Gi", json!({"status": {"phase": "Pending"}})),
                ],
                pvc("c1", "1Gi", json!({})),
                false,
                None,
            ),
        ];
        for (what, volumes, claim, delay, want) in cases {
            let volumes: Vec<Arc<PersistentVolume>> = volumes.into_iter().map(Arc::new).collect();
            let found = find_best_match_for_claim(&volumes, &claim, delay).unwrap();
            assert_eq!(
                found.as_ref().and_then(|v| v.metadata.name.as_deref()),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn a_bad_selector_is_an_error() {
        let claim = pvc(
            "c1",
            "1Gi",
            json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}}),
        );
        let volumes = vec![Arc::new(pv("a", "1Gi", json!({})))];
        let error = find_best_match_for_claim(&volumes, &claim, false).unwrap_err();
        assert!(
            error.starts_with("error creating internal label selector for claim: ns/c1: "),
            "{error}"
        );
    }

    #[test]
    fn why_a_requested_volume_does_not_fit() {
        let claim = pvc("c", "2Gi", json!({}));
        let cases = [
            (pv("v", "1Gi", json!({})), Err("requested PV is too small")),
            (
                pv("v", "2Gi", json!({"spec": {"storageClassName": "x"}})),
                Err("storageClassName does not match"),
            ),
            (
                pv("v", "2Gi", json!({"spec": {"volumeMode": "Block"}})),
                Err("incompatible volumeMode"),
            ),
            (
                pv("v", "2Gi", modes(&["ReadOnlyMany"])),
                Err("incompatible accessMode"),
            ),
            (
                pv(
                    "v",
                    "2Gi",
                    json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
                ),
                Err("the volume is marked for deletion \"v\""),
            ),
            (pv("v", "3Gi", json!({})), Ok(())),
        ];
        for (volume, want) in cases {
            assert_eq!(
                check_volume_satisfy_claim(&volume, &claim),
                want.map_err(str::to_string)
            );
        }
    }
}
