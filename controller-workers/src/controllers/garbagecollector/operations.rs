//! The garbage collector's API calls, kept at the edge (upstream `operations.go` and
//! `patch.go`): live metadata reads, deletes with a UID precondition and a propagation
//! policy, and JSON merge patches of ownerReferences and finalizers carrying the
//! resourceVersion read (so they fail rather than overwrite a concurrent change). JSON
//! merge patches work on every kind, custom resources included.

use std::collections::HashMap;
use std::sync::RwLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::core::{ApiResource, PartialObjectMeta};
use rkcm_proto::v1::ResourceInfo;
use serde_json::json;

use super::graph::ObjectRef;

/// Resources by (group, kind), from the informer-server's discovery (preferred versions).
#[derive(Default)]
pub struct Kinds {
    by_kind: RwLock<HashMap<(String, String), ResourceInfo>>,
}

pub use crate::store::group_of;

impl Kinds {
    pub fn replace(&self, resources: &[ResourceInfo]) {
        let mut map = HashMap::new();
        for resource in resources {
            if resource.resource.contains('/') {
                continue;
            }
            map.entry((resource.group.clone(), resource.kind.clone()))
                .or_insert_with(|| resource.clone());
        }
        *self.by_kind.write().unwrap_or_else(|p| p.into_inner()) = map;
    }

    pub fn lookup(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        self.by_kind
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(group_of(api_version).to_string(), kind.to_string()))
            .cloned()
    }
}

pub fn api_resource(info: &ResourceInfo) -> ApiResource {
    ApiResource {
        group: info.group.clone(),
        version: info.version.clone(),
        api_version: if info.group.is_empty() {
            info.version.clone()
        } else {
            format!("{}/{}", info.group, info.version)
        },
        kind: info.kind.clone(),
        plural: info.resource.clone(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("no resource of the API server serves {0} (is its CRD gone?)")]
    UnknownKind(String),
    #[error("API request")]
    Api(#[from] kube::Error),
    #[error("{0} changed its ownerReferences since it was read; deciding again")]
    OwnersChanged(String),
}

pub struct Operations {
    pub client: kube::Client,
    pub kinds: Kinds,
}

impl Operations {
    fn api(&self, object: &ObjectRef) -> Result<(Api<DynamicObject>, ResourceInfo), OpError> {
        let info = self
            .kinds
            .lookup(&object.api_version, &object.kind)
            .ok_or_else(|| {
                OpError::UnknownKind(format!("{}, Kind={}", object.api_version, object.kind))
            })?;
        let resource = api_resource(&info);
        let api = if info.namespaced {
            Api::namespaced_with(self.client.clone(), &object.namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        Ok((api, info))
    }

    /// The object's live metadata; `None` when it is gone or another object (another
    /// UID) has its name now.
    pub async fn get(&self, object: &ObjectRef) -> Result<Option<ObjectMeta>, OpError> {
        let (api, _) = self.api(object)?;
        let found: Option<PartialObjectMeta<DynamicObject>> =
            api.get_metadata_opt(&object.name).await?;
        Ok(found.map(|meta| meta.metadata).filter(|meta| {
            object.uid.is_empty() || meta.uid.as_deref() == Some(object.uid.as_str())
        }))
    }

    /// Deletes the object if it is still the one the decision was made on: same UID,
    /// and, with `read`, the resourceVersion it was read at. A write since then that left
    /// its ownerReferences as they were does not matter (the delete is made again on the
    /// UID alone); one that changed them does ([`OpError::OwnersChanged`]: decide again).
    pub async fn delete(
        &self,
        object: &ObjectRef,
        policy: PropagationPolicy,
        read: Option<(&str, &[OwnerReference])>,
    ) -> Result<(), OpError> {
        let (api, _) = self.api(object)?;
        let params = |resource_version: Option<&str>| DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(object.uid.clone()),
                resource_version: resource_version.map(str::to_string),
            }),
            propagation_policy: Some(policy.clone()),
            ..Default::default()
        };
        let at = read.map(|(version, _)| version).filter(|v| !v.is_empty());
        match api.delete(&object.name, &params(at)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        let Some((_, owners)) = read.filter(|_| at.is_some()) else {
            // Only the UID was a precondition: another incarnation has the name.
            return Ok(());
        };
        let Some(live) = self.get(object).await? else {
            return Ok(());
        };
        if live.owner_references.as_deref().unwrap_or_default() != owners {
            return Err(OpError::OwnersChanged(object.to_string()));
        }
        match api.delete(&object.name, &params(None)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Sets the object's ownerReferences to `references`, if it is still at
    /// `resource_version`; returns the object as written (`None` when it is gone).
    pub async fn set_owner_references(
        &self,
        object: &ObjectRef,
        references: &[OwnerReference],
        resource_version: &str,
    ) -> Result<Option<ObjectMeta>, OpError> {
        self.patch_list(
            object,
            "ownerReferences",
            json!(references),
            resource_version,
        )
        .await
    }

    /// Removes `finalizer` from the live object (read, then patched at that version).
    pub async fn remove_finalizer(
        &self,
        object: &ObjectRef,
        finalizer: &str,
    ) -> Result<(), OpError> {
        let Some(meta) = self.get(object).await? else {
            return Ok(());
        };
        let finalizers = meta.finalizers.unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let remaining: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
        let version = meta.resource_version.unwrap_or_default();
        self.patch_list(object, "finalizers", json!(remaining), &version)
            .await
            .map(|_| ())
    }

    /// A JSON merge patch of one metadata list (null when empty), with the
    /// resourceVersion and UID as preconditions; a vanished object is no error (`None`).
    async fn patch_list(
        &self,
        object: &ObjectRef,
        field: &str,
        list: serde_json::Value,
        resource_version: &str,
    ) -> Result<Option<ObjectMeta>, OpError> {
        let (api, _) = self.api(object)?;
        let empty = list.as_array().is_none_or(|items| items.is_empty());
        let patch = json!({"metadata": {
            field: if empty { serde_json::Value::Null } else { list },
            "resourceVersion": resource_version,
            "uid": object.uid,
        }});
        match api
            .patch_metadata(&object.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => Ok(Some(written.metadata)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}
