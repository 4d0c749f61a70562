//! `internal.apiserver.k8s.io/v1alpha1` StorageVersion (Kubernetes 1.29), which k8s-openapi
//! 1.33 does not have. Fields the controller does not name are kept in `rest`, so a status
//! written back loses nothing.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) const API_VERSION: &str = "internal.apiserver.k8s.io/v1alpha1";
const ALL_ENCODING_VERSIONS_EQUAL: &str = "AllEncodingVersionsEqual";

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub(crate) struct StorageVersion {
    #[serde(rename = "apiVersion", default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default = "empty_spec")]
    pub spec: Value,
    #[serde(default)]
    pub status: StorageVersionStatus,
}

fn api_version() -> String {
    API_VERSION.into()
}

fn empty_spec() -> Value {
    Value::Object(Default::default())
}

fn kind() -> String {
    "StorageVersion".into()
}

impl kube::Resource for StorageVersion {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("StorageVersion")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("internal.apiserver.k8s.io")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1alpha1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("storageversions")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StorageVersionStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_versions: Vec<ServerStorageVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_encoding_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StorageVersionCondition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerStorageVersion {
    #[serde(rename = "apiServerID", default)]
    pub api_server_id: String,
    #[serde(default)]
    pub encoding_version: String,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StorageVersionCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default)]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `storageversion.SetCommonEncodingVersion`: the encoding version all servers agree on
/// (none when they differ or there is no server), and the `AllEncodingVersionsEqual`
/// condition saying so; its transition time moves when its status does, or when the
/// common version changes.
pub(crate) fn set_common_encoding_version(
    status: &mut StorageVersionStatus,
    generation: i64,
    now: &str,
) {
    let old = status.common_encoding_version.take();
    if let Some(first) = status.storage_versions.first() {
        let first = first.encoding_version.clone();
        if status
            .storage_versions
            .iter()
            .all(|s| s.encoding_version == first)
        {
            status.common_encoding_version = Some(first);
        }
    }
    let set = status.common_encoding_version.is_some();
    let condition = StorageVersionCondition {
        type_: ALL_ENCODING_VERSIONS_EQUAL.into(),
        status: if set { "True" } else { "False" }.into(),
        observed_generation: Some(generation),
        last_transition_time: Some(now.into()),
        reason: if set {
            "CommonEncodingVersionSet"
        } else {
            "CommonEncodingVersionUnset"
        }
        .into(),
        message: if set {
            "Common encoding version set"
        } else {
            "Common encoding version unset"
        }
        .into(),
    };
    let forced = matches!((&old, &status.common_encoding_version), (Some(a), Some(b)) if a != b);
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == ALL_ENCODING_VERSIONS_EQUAL)
    {
        None => status.conditions.push(condition),
        Some(existing) => {
            if existing.status != condition.status || forced {
                existing.last_transition_time = condition.last_transition_time;
            }
            existing.status = condition.status;
            existing.reason = condition.reason;
            existing.message = condition.message;
            existing.observed_generation = condition.observed_generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: Value) -> StorageVersionStatus {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_common_version_and_its_condition_follow_the_servers() {
        let mut agreed = status(json!({"storageVersions": [
            {"apiServerID": "a", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"]},
            {"apiServerID": "b", "encodingVersion": "apps/v1"}]}));
        set_common_encoding_version(&mut agreed, 3, "T1");
        assert_eq!(agreed.common_encoding_version.as_deref(), Some("apps/v1"));
        assert_eq!(agreed.conditions[0].status, "True");
        assert_eq!(agreed.conditions[0].reason, "CommonEncodingVersionSet");
        assert_eq!(agreed.conditions[0].observed_generation, Some(3));
        // Unknown fields of a record are kept.
        assert_eq!(
            agreed.storage_versions[0].rest["decodableVersions"],
            json!(["apps/v1"])
        );

        // Same status again: the transition time stays.
        set_common_encoding_version(&mut agreed, 4, "T2");
        assert_eq!(
            agreed.conditions[0].last_transition_time.as_deref(),
            Some("T1")
        );

        // The servers disagree: unset, and the time moves.
        agreed.storage_versions[1].encoding_version = "apps/v2".into();
        set_common_encoding_version(&mut agreed, 4, "T3");
        assert_eq!(agreed.common_encoding_version, None);
        assert_eq!(agreed.conditions[0].status, "False");
        assert_eq!(
            agreed.conditions[0].message,
            "Common encoding version unset"
        );
        assert_eq!(
            agreed.conditions[0].last_transition_time.as_deref(),
            Some("T3")
        );
        assert_eq!(agreed.conditions.len(), 1);
    }

    #[test]
    fn a_changed_common_version_forces_a_transition() {
        let mut s = status(json!({"commonEncodingVersion": "v1",
            "storageVersions": [{"apiServerID": "a", "encodingVersion": "v2"}],
            "conditions": [{"type": ALL_ENCODING_VERSIONS_EQUAL, "status": "True", "reason": "CommonEncodingVersionSet", "lastTransitionTime": "T0"}]}));
        set_common_encoding_version(&mut s, 1, "T1");
        assert_eq!(s.common_encoding_version.as_deref(), Some("v2"));
        assert_eq!(s.conditions[0].last_transition_time.as_deref(), Some("T1"));
    }
}
