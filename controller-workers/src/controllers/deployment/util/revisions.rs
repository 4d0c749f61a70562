//! Revision numbers and the annotations a Deployment and its ReplicaSets carry.

use super::*;
use kube::ResourceExt;

/// Revision number recorded on an object. A missing annotation means
/// revision 0 (not yet assigned); an unparsable one is an error.
pub fn revision(meta: &ObjectMeta) -> Result<i64, String> {
    match annotation(meta, REVISION_ANNOTATION) {
        None => Ok(0),
        Some(v) => parse_go_int(v),
    }
}

/// Highest revision among the ReplicaSets; unparsable revisions are ignored
/// so that one corrupted annotation cannot block reconciliation.
pub fn max_revision<R: Borrow<ReplicaSet>>(all_rss: &[R]) -> i64 {
    all_rss
        .iter()
        .filter_map(|rs| revision(&rs.borrow().metadata).ok())
        .fold(0, i64::max)
}

/// Second-highest revision among the ReplicaSets, i.e. the revision a
/// "rollback to previous" targets. Unparsable revisions are ignored.
///
/// Duplicated maxima count twice (so `[3, 3]` yields 3), as upstream.
pub fn last_revision<R: Borrow<ReplicaSet>>(all_rss: &[R]) -> i64 {
    let (mut max, mut second) = (0i64, 0i64);
    for v in all_rss
        .iter()
        .filter_map(|rs| revision(&rs.borrow().metadata).ok())
    {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// Records `revision` on the Deployment; returns whether it changed.
pub fn set_deployment_revision(deployment: &mut Deployment, revision: &str) -> bool {
    let annotations = deployment
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    if annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION_ANNOTATION.to_string(), revision.to_string());
    true
}

/// Brings the new ReplicaSet's annotations in line with its Deployment and
/// returns whether anything changed.
///
/// * Copies the Deployment's own annotations (except the skipped ones).
/// * Raises the revision to `new_revision`, but never lowers it: old
///   ReplicaSets may have been deleted since `new_revision` was computed.
/// * When an existing revision is replaced (a rollback re-activated this
///   ReplicaSet), the replaced revision is appended to the revision-history
///   annotation, dropping the oldest entries to stay within
///   `rev_history_limit_in_chars`; if even that cannot make it fit, the
///   history is left untouched.
/// * For a ReplicaSet that does not exist yet (`exists == false`) the
///   desired/max replicas annotations are set.
///
/// Returns `false` (after the copy step already happened) when either
/// revision is not an integer, matching upstream.
pub fn set_new_replica_set_annotations(
    deployment: &Deployment,
    new_rs: &mut ReplicaSet,
    new_revision: &str,
    exists: bool,
    rev_history_limit_in_chars: usize,
) -> bool {
    let mut changed = copy_deployment_annotations_to_replica_set(deployment, new_rs);
    {
        let annotations = new_rs
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
        let old_rev_str = old_revision.as_deref().unwrap_or("");
        let old_rev = match parse_go_int(old_rev_str) {
            Ok(v) => v,
            Err(_) if old_rev_str.is_empty() => 0,
            Err(_) => return false,
        };
        let Ok(new_rev) = parse_go_int(new_revision) else {
            return false;
        };
        if old_rev < new_rev {
            annotations.insert(REVISION_ANNOTATION.to_string(), new_revision.to_string());
            changed = true;
        }
        if old_revision.is_some() && old_rev < new_rev {
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let old_revisions: Vec<&str> = history.split(',').collect();
            if old_revisions[0].is_empty() {
                annotations.insert(
                    REVISION_HISTORY_ANNOTATION.to_string(),
                    old_rev_str.to_string(),
                );
            } else {
                let limit = rev_history_limit_in_chars as i64;
                let mut total_len = (history.len() + old_rev_str.len() + 1) as i64;
                let mut start = 0usize;
                while total_len > limit && start < old_revisions.len() {
                    total_len -= old_revisions[start].len() as i64 + 1;
                    start += 1;
                }
                if total_len <= limit {
                    let mut kept = old_revisions[start..].to_vec();
                    kept.push(old_rev_str);
                    annotations.insert(REVISION_HISTORY_ANNOTATION.to_string(), kept.join(","));
                }
            }
        }
    }
    if !exists {
        let replicas = deployment_replicas(deployment);
        if set_replicas_annotations(
            new_rs,
            replicas,
            replicas.wrapping_add(max_surge(deployment)),
        ) {
            changed = true;
        }
    }
    changed
}

/// Whether an annotation key must never be copied between a Deployment and
/// its ReplicaSets.
pub fn skip_copy_annotation(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

/// Copies the Deployment's user annotations onto the ReplicaSet (overwriting
/// differing values) and reports whether the ReplicaSet changed. Annotations
/// only present on the ReplicaSet are kept. The revision annotations are
/// skipped on purpose: the ReplicaSet's revision is authoritative and the
/// Deployment's copy may be stale.
pub fn copy_deployment_annotations_to_replica_set(
    deployment: &Deployment,
    rs: &mut ReplicaSet,
) -> bool {
    let rs_annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in deployment.annotations().iter() {
        if skip_copy_annotation(k) || rs_annotations.get(k) == Some(v) {
            continue;
        }
        rs_annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// On rollback, replaces the Deployment's user annotations with those of the
/// ReplicaSet being rolled back to, keeping the Deployment's own skipped
/// (controller/kubectl managed) annotations.
pub fn set_deployment_annotations_to(deployment: &mut Deployment, rollback_to_rs: &ReplicaSet) {
    let mut annotations = get_skipped_annotations(
        deployment
            .metadata
            .annotations
            .as_ref()
            .unwrap_or(&BTreeMap::new()),
    );
    for (k, v) in rollback_to_rs.annotations().iter() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    deployment.metadata.annotations = Some(annotations);
}

/// The subset of `annotations` whose keys are in the skip list.
pub fn get_skipped_annotations(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(k, _)| skip_copy_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// On rollback, installs a ReplicaSet's template into the Deployment, minus
/// the pod-template-hash label the controller added to it.
pub fn set_from_replica_set_template(deployment: &mut Deployment, template: &PodTemplateSpec) {
    let mut template = template.clone();
    if let Some(meta) = template.metadata.as_mut() {
        let labels =
            clone_and_remove_label(meta.labels.as_ref(), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
        meta.labels = (!labels.is_empty()).then_some(labels);
    }
    deployment
        .spec
        .get_or_insert_with(Default::default)
        .template = template;
}
