//! Rollback through the deprecated `deprecated.deployment.rollback.to` annotation
//! (upstream `rollback.go`; extensions/v1beta1's rollbackTo). Today's `kubectl rollout
//! undo` patches the template itself and needs nothing from the controller; the
//! annotation is still honoured, as KCM does.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::all_of;
use super::util;
use super::Controller;
use crate::meta::ResourceNames;
use crate::recorder::{NORMAL, WARNING};

/// The revision the annotation asks for (0: the previous one).
pub(super) fn rollback_to(d: &Deployment) -> Option<i64> {
    d.metadata
        .annotations
        .as_ref()?
        .get(util::DEPRECATED_ROLLBACK_TO_ANNOTATION)
        .filter(|value| !value.is_empty())?
        .parse()
        .ok()
}

impl Controller {
    pub(super) async fn rollback(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
    ) -> anyhow::Result<()> {
        let (new_rs, old) = self
            .get_all_replica_sets_and_sync_revision(d, rs_list, true)
            .await?;
        let all = all_of(&new_rs, &old);
        let mut revision = rollback_to(d).unwrap_or(0);
        if revision == 0 {
            revision = util::last_revision(&all);
            if revision == 0 {
                self.recorder.event(
                    &*d,
                    WARNING,
                    util::ROLLBACK_REVISION_NOT_FOUND,
                    util::ROLLBACK_LAST_REVISION_NOT_FOUND_MESSAGE,
                );
                return self.clear_rollback_to(d).await;
            }
        }
        for rs in &all {
            if util::revision(&rs.metadata).ok() != Some(revision) {
                continue;
            }
            let template = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.clone())
                .unwrap_or_default();
            let d_template = d
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default();
            let performed = if !util::equal_ignore_hash(&d_template, &template) {
                util::set_from_replica_set_template(d, &template);
                util::set_deployment_annotations_to(d, rs);
                true
            } else {
                let name = d.name_str().to_string();
                self.recorder.event(
                    &*d,
                    WARNING,
                    util::ROLLBACK_TEMPLATE_UNCHANGED,
                    util::rollback_template_unchanged_message(&name),
                );
                false
            };
            let name = d.name_str().to_string();
            self.clear_rollback_to(d).await?;
            if performed {
                self.recorder.event(
                    &*d,
                    NORMAL,
                    util::ROLLBACK_DONE,
                    util::rollback_done_message(&name, revision),
                );
            }
            return Ok(());
        }
        self.recorder.event(
            &*d,
            WARNING,
            util::ROLLBACK_REVISION_NOT_FOUND,
            util::ROLLBACK_REVISION_NOT_FOUND_MESSAGE,
        );
        self.clear_rollback_to(d).await
    }

    async fn clear_rollback_to(&self, d: &mut Deployment) -> anyhow::Result<()> {
        if let Some(annotations) = d.metadata.annotations.as_mut() {
            annotations.remove(util::DEPRECATED_ROLLBACK_TO_ANNOTATION);
        }
        self.update_deployment(d).await
    }
}
