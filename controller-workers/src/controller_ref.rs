//! Adoption and release (upstream's ControllerRefManager): a controller claims the
//! objects its selector matches, adopting orphans with a controllerRef patch and
//! releasing objects it owns that its selector no longer matches.
//!
//! The rules, as upstream: an object owned by another controller is never touched; an
//! owned object that still matches is kept (even while the owner is being deleted); an
//! owned object that no longer matches is released unless the owner is being deleted; an
//! orphan is adopted only if it matches, is not being deleted, is in the owner's
//! namespace, and a live read of the owner (done once per claim, never from the cache)
//! shows the same UID and no deletionTimestamp. Patches carry the object's UID, so they
//! fail rather than touch a recreated object of the same name.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::OnceCell;
use tracing::debug;

use crate::api_errors::is_not_found;
use crate::meta::ResourceNames;
use crate::selector::Selector;

/// The owners an update of an owned object (a pod, a ReplicaSet, a revision) concerns,
/// as upstream's update handlers route it.
pub struct OwnedUpdate<O> {
    /// The previous controller, when the controllerRef changed.
    pub previous: Option<Arc<O>>,
    /// The current controller, if the object has one the cache knows.
    pub current: Option<Arc<O>>,
    /// For an orphan whose labels or controllerRef changed: every owner whose selector
    /// matches it (candidates to adopt it).
    pub adopters: Vec<Arc<O>>,
}

/// Routes an update from `old` to `new`: `resolve` finds the owner a controllerRef names
/// (same kind and UID), `selecting` lists the owners whose selector matches `new`.
pub fn route_update<O>(
    old: &ObjectMeta,
    new: &ObjectMeta,
    resolve: impl Fn(&OwnerReference) -> Option<Arc<O>>,
    selecting: impl FnOnce() -> Vec<Arc<O>>,
) -> OwnedUpdate<O> {
    let old_ref = crate::store::controller_of(old);
    let new_ref = crate::store::controller_of(new);
    let ref_changed = old_ref != new_ref;
    OwnedUpdate {
        previous: old_ref.filter(|_| ref_changed).and_then(&resolve),
        current: new_ref.and_then(&resolve),
        adopters: if new_ref.is_none() && (ref_changed || old.labels != new.labels) {
            selecting()
        } else {
            Vec::new()
        },
    }
}

/// The strategic merge patch that makes `owner` the controller of the object `uid`.
pub fn adopt_patch(owner: &OwnerReference, uid: &str) -> serde_json::Value {
    json!({
        "metadata": {
            "ownerReferences": [{
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "uid": uid,
        }
    })
}

/// The strategic merge patch that removes the owner `owner_uid` from the object `uid`.
pub fn release_patch(owner_uid: &str, uid: &str) -> serde_json::Value {
    json!({
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
            "uid": uid,
        }
    })
}

pub struct RefManager<'a, O> {
    pub owner: &'a O,
    pub owner_ref: OwnerReference,
    pub selector: &'a Selector,
    /// Reads the owner live from the API server: adoption needs the current truth.
    pub owner_api: Api<O>,
    /// A further test an object must pass to match, beside the selector (upstream's
    /// claim filter: a StatefulSet claims only pods named after it).
    filter: Option<&'a (dyn Fn(&ObjectMeta) -> bool + Send + Sync)>,
    can_adopt: OnceCell<Result<(), String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("can't adopt {object}: {reason}")]
    CannotAdopt { object: String, reason: String },
    #[error("{action} {object}: {error}")]
    Api {
        action: &'static str,
        object: String,
        error: kube::Error,
    },
}

impl<'a, O> RefManager<'a, O>
where
    O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    pub fn new(
        owner: &'a O,
        owner_ref: OwnerReference,
        selector: &'a Selector,
        owner_api: Api<O>,
    ) -> Self {
        RefManager {
            owner,
            owner_ref,
            selector,
            owner_api,
            filter: None,
            can_adopt: OnceCell::new(),
        }
    }

    /// Objects must also pass `filter` to match: those that fail it are neither adopted
    /// nor kept (an owned one is released), as if the selector did not match them.
    pub fn with_filter(mut self, filter: &'a (dyn Fn(&ObjectMeta) -> bool + Send + Sync)) -> Self {
        self.filter = Some(filter);
        self
    }

    async fn can_adopt(&self) -> Result<(), String> {
        self.can_adopt
            .get_or_init(|| async {
                let name = self.owner.name_str().to_string();
                match self.owner_api.get(&name).await {
                    Ok(fresh) if fresh.meta().uid != self.owner.meta().uid => Err(format!(
                        "original {} {}/{} is gone: got uid {}, wanted {}",
                        O::kind(&()),
                        self.owner.namespace_str(),
                        name,
                        fresh.meta().uid.clone().unwrap_or_default(),
                        self.owner.meta().uid.clone().unwrap_or_default()
                    )),
                    Ok(fresh) if fresh.meta().deletion_timestamp.is_some() => Err(format!(
                        "{}/{} has just been deleted",
                        self.owner.namespace_str(),
                        name
                    )),
                    Ok(_) => Ok(()),
                    Err(error) => Err(format!("can't recheck DeletionTimestamp: {error}")),
                }
            })
            .await
            .clone()
    }

    /// Claims `objects` (the candidates: everything in the owner's namespace, or what an
    /// index returned), patching through `api`; returns the ones the owner controls now.
    /// Errors of single objects are collected; the claimed list is still returned so the
    /// caller can act on what it has, then requeue.
    pub async fn claim<K>(
        &self,
        objects: Vec<Arc<K>>,
        api: &Api<K>,
    ) -> (Vec<Arc<K>>, Vec<ClaimError>)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let mut claimed = Vec::new();
        let mut errors = Vec::new();
        let owner_uid = self.owner.meta().uid.clone().unwrap_or_default();
        let owner_deleting = self.owner.meta().deletion_timestamp.is_some();
        for object in objects {
            let meta: &ObjectMeta = object.meta();
            let name = meta.name.clone().unwrap_or_default();
            let uid = meta.uid.clone().unwrap_or_default();
            let matches = self.selector.matches(meta.labels.as_ref())
                && self.filter.is_none_or(|filter| filter(meta));
            match crate::store::controller_uid(meta) {
                Some(controller) if controller != owner_uid => {}
                Some(_) if matches => claimed.push(object),
                Some(_) => {
                    if owner_deleting {
                        continue;
                    }
                    debug!(owner = %self.owner_ref.name, object = %name, "releasing: selector no longer matches");
                    match api
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Strategic(release_patch(&owner_uid, &uid)),
                        )
                        .await
                    {
                        Ok(_) => {}
                        Err(error) if is_not_found(&error) => {}
                        // Invalid: no owner reference left, or a recreated object.
                        Err(kube::Error::Api(status)) if status.code == 422 => {}
                        Err(error) => errors.push(ClaimError::Api {
                            action: "releasing",
                            object: name,
                            error,
                        }),
                    }
                }
                None => {
                    if owner_deleting || !matches || meta.deletion_timestamp.is_some() {
                        continue;
                    }
                    let owner_namespace = self.owner.namespace_str().to_string();
                    if !owner_namespace.is_empty()
                        && meta.namespace.as_deref().unwrap_or_default() != owner_namespace
                    {
                        continue;
                    }
                    if let Err(reason) = self.can_adopt().await {
                        errors.push(ClaimError::CannotAdopt {
                            object: format!(
                                "{} {}/{} ({uid})",
                                K::kind(&()),
                                owner_namespace,
                                name
                            ),
                            reason,
                        });
                        continue;
                    }
                    debug!(owner = %self.owner_ref.name, object = %name, "adopting");
                    match api
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Strategic(adopt_patch(&self.owner_ref, &uid)),
                        )
                        .await
                    {
                        Ok(adopted) => claimed.push(Arc::new(adopted)),
                        Err(error) if is_not_found(&error) => {}
                        Err(error) => errors.push(ClaimError::Api {
                            action: "adopting",
                            object: name,
                            error,
                        }),
                    }
                }
            }
        }
        (claimed, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_shapes_match_upstream() {
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        assert_eq!(
            adopt_patch(&owner, "pod-uid").to_string(),
            r#"{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"pod-uid"}}"#
        );
        assert_eq!(
            release_patch("rs-uid", "pod-uid").to_string(),
            r#"{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"rs-uid"}],"uid":"pod-uid"}}"#
        );
    }

    #[test]
    fn updates_go_to_the_old_and_new_controller_or_to_the_adopters() {
        let meta = |owner: Option<&str>, label: &str| ObjectMeta {
            labels: Some([("app".to_string(), label.to_string())].into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        };
        let resolve = |r: &OwnerReference| (r.uid != "gone").then(|| Arc::new(r.uid.clone()));
        let adopters = || vec![Arc::new("adopter".to_string())];
        let names = |route: OwnedUpdate<String>| {
            (
                route.previous.map(|o| (*o).clone()),
                route.current.map(|o| (*o).clone()),
                route.adopters.len(),
            )
        };
        // Owned, unchanged owner: only the owner.
        let r = route_update(
            &meta(Some("a"), "x"),
            &meta(Some("a"), "y"),
            resolve,
            adopters,
        );
        assert_eq!(names(r), (None, Some("a".into()), 0));
        // Moved from a to b: both.
        let r = route_update(
            &meta(Some("a"), "x"),
            &meta(Some("b"), "x"),
            resolve,
            adopters,
        );
        assert_eq!(names(r), (Some("a".into()), Some("b".into()), 0));
        // Released, and labels changed on an orphan: the old owner and the adopters.
        let r = route_update(&meta(Some("a"), "x"), &meta(None, "x"), resolve, adopters);
        assert_eq!(names(r), (Some("a".into()), None, 1));
        let r = route_update(&meta(None, "x"), &meta(None, "y"), resolve, adopters);
        assert_eq!(names(r), (None, None, 1));
        // An orphan that changed nothing the selectors see: nobody.
        let r = route_update(&meta(None, "x"), &meta(None, "x"), resolve, adopters);
        assert_eq!(names(r), (None, None, 0));
        // An owner the cache does not know: nobody, and no adoption.
        let r = route_update(
            &meta(None, "x"),
            &meta(Some("gone"), "x"),
            resolve,
            adopters,
        );
        assert_eq!(names(r), (None, None, 0));
    }
}
