//! The parts of `networking.k8s.io/v1alpha1` (Kubernetes 1.29) the controller reads:
//! k8s-openapi here is 1.33, which has no v1alpha1 of the group. Both kinds are
//! cluster-scoped; the controller writes them only by patch, so unread fields need no
//! keeping.

use crate::api_types::resource;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

pub(crate) const GROUP: &str = "networking.k8s.io";
pub(crate) const VERSION: &str = "v1alpha1";
pub(crate) const API_VERSION: &str = "networking.k8s.io/v1alpha1";

/// `networkingv1alpha1.LabelManagedBy` and the IP allocator's value of it.
pub(crate) const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
pub(crate) const ALLOCATOR: &str = "ipallocator.k8s.io";
/// `networkingv1alpha1.LabelIPAddressFamily`.
pub(crate) const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct ServiceCIDR {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceCIDRSpec,
    #[serde(default)]
    pub status: BTreeMap<String, Value>,
}
resource!(
    ServiceCIDR,
    Cluster,
    "ServiceCIDR",
    GROUP,
    VERSION,
    "servicecidrs"
);

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct ServiceCIDRSpec {
    #[serde(default)]
    pub cidrs: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct IPAddress {
    #[serde(default)]
    pub metadata: ObjectMeta,
}
resource!(
    IPAddress,
    Cluster,
    "IPAddress",
    GROUP,
    VERSION,
    "ipaddresses"
);
