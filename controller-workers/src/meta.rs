//! Borrowed views of an object's name and namespace, which `kube::ResourceExt` only
//! hands out as owned `String`s (`name_any`, `namespace`). Everything else about an
//! object's metadata (labels, annotations, owner references, finalizers) goes through
//! `kube::ResourceExt` itself.

use kube::Resource;

/// `metadata.name` and `metadata.namespace` as `&str`, empty when unset (Go's zero
/// value, which is what upstream's `GetName()`/`GetNamespace()` return).
pub(crate) trait ResourceNames {
    /// The object's name, or `""`.
    fn name_str(&self) -> &str;
    /// The object's namespace, or `""` for a cluster-scoped object.
    fn namespace_str(&self) -> &str;
}

impl<K: Resource> ResourceNames for K {
    fn name_str(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    fn namespace_str(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    use super::ResourceNames;

    #[test]
    fn unset_names_are_empty() {
        let pod = Pod::default();
        assert_eq!((pod.name_str(), pod.namespace_str()), ("", ""));
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-0".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!((pod.name_str(), pod.namespace_str()), ("web-0", "default"));
    }
}
