//! API kinds that the k8s-openapi version the workspace builds with does not carry in the
//! version KCM 1.29 serves (the alpha APIs of the feature-gated controllers): controllers
//! declare small serde structs for them, and [`resource!`] makes such a struct a
//! `kube::Resource` so informers, clients and stores take it like any other kind.

/// Implements `kube::Resource` for a struct with a `metadata: ObjectMeta` field:
/// `resource!(Type, Namespace|Cluster, "Kind", GROUP, VERSION, "plural")`.
macro_rules! resource {
    ($type:ident, Namespace, $kind:literal, $group:expr, $version:expr, $plural:literal) => {
        $crate::api_types::resource!(@impl $type, NamespaceResourceScope, $kind, $group, $version, $plural);
    };
    ($type:ident, Cluster, $kind:literal, $group:expr, $version:expr, $plural:literal) => {
        $crate::api_types::resource!(@impl $type, ClusterResourceScope, $kind, $group, $version, $plural);
    };
    (@impl $type:ident, $scope:ident, $kind:literal, $group:expr, $version:expr, $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = kube::core::$scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($kind)
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($group)
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($version)
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($plural)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) use resource;
