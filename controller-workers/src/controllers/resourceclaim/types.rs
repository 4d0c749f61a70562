//! The parts of `resource.k8s.io/v1alpha2` (Kubernetes 1.29) the controller reads and
//! writes, and the 1.29 shape of a Pod's claims: k8s-openapi here is 1.33, which has
//! neither the alpha group nor the pod's `spec.resourceClaims[].source`.
//!
//! Every type keeps the fields it does not name in `rest`, so an object written back
//! (an update of a claim's status, of a scheduling context's spec) loses nothing.

use crate::api_types::resource;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The API group and version of the kinds below.
pub(crate) const GROUP: &str = "resource.k8s.io";
pub(crate) const VERSION: &str = "v1alpha2";

/// Objects written with their `apiVersion` and `kind` filled in.
pub(crate) trait TypeMeta: kube::Resource<DynamicType = ()> + Sized {
    fn type_meta(&mut self) -> (&mut String, &mut String);

    fn with_type_meta(mut self) -> Self {
        let api_version = Self::api_version(&()).into_owned();
        let kind = Self::kind(&()).into_owned();
        let (v, k) = self.type_meta();
        *v = api_version;
        *k = kind;
        self
    }
}

impl TypeMeta for ResourceClaim {
    fn type_meta(&mut self) -> (&mut String, &mut String) {
        (&mut self.api_version, &mut self.kind)
    }
}

impl TypeMeta for PodSchedulingContext {
    fn type_meta(&mut self) -> (&mut String, &mut String) {
        (&mut self.api_version, &mut self.kind)
    }
}

/// `resourcev1alpha2.AllocationModeWaitForFirstConsumer`, the default mode.
pub(crate) const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceClaim {
    /// `apiVersion` and `kind`, which the API server requires in a request's body (set
    /// by `TypeMeta::with_type_meta` before a write).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ResourceClaimSpec,
    #[serde(default, skip_serializing_if = "ResourceClaimStatus::is_empty")]
    pub status: ResourceClaimStatus,
}
resource!(
    ResourceClaim,
    Namespace,
    "ResourceClaim",
    GROUP,
    VERSION,
    "resourceclaims"
);

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceClaimSpec {
    /// Empty means the API server's default, `WaitForFirstConsumer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl ResourceClaimSpec {
    pub(crate) fn waits_for_first_consumer(&self) -> bool {
        self.allocation_mode
            .as_deref()
            .is_none_or(|mode| mode.is_empty() || mode == WAIT_FOR_FIRST_CONSUMER)
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ConsumerReference>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deallocation_requested: bool,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl ResourceClaimStatus {
    fn is_empty(&self) -> bool {
        *self == ResourceClaimStatus::default()
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AllocationResult {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shareable: bool,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `ResourceClaimConsumerReference`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsumerReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceClaimTemplate {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ResourceClaimTemplateSpec,
}
resource!(
    ResourceClaimTemplate,
    Namespace,
    "ResourceClaimTemplate",
    GROUP,
    VERSION,
    "resourceclaimtemplates"
);

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceClaimTemplateSpec {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ResourceClaimSpec,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSchedulingContext {
    /// `apiVersion` and `kind`, which the API server requires in a request's body (set
    /// by `TypeMeta::with_type_meta` before a write).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSchedulingContextSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}
resource!(
    PodSchedulingContext,
    Namespace,
    "PodSchedulingContext",
    GROUP,
    VERSION,
    "podschedulingcontexts"
);

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSchedulingContextSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selected_node: String,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The fields of a v1 Pod the controller reads, in 1.29's shape.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClaimPodSpec,
    #[serde(default)]
    pub status: ClaimPodStatus,
}
resource!(ClaimPod, Namespace, "Pod", "", "v1", "pods");

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimPodSpec {
    #[serde(default)]
    pub node_name: String,
    #[serde(default)]
    pub resource_claims: Vec<PodResourceClaim>,
}

/// `v1.PodResourceClaim` of 1.29: a name and where its claim comes from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodResourceClaim {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub source: ClaimSource,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_template_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimPodStatus {
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodResourceClaimStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
}
