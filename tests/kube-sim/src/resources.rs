//! The resources kube-sim serves: the built-in ones (recorded from a real kube-apiserver's
//! discovery, `builtin_resources.json`) and the ones custom resource definitions add at run
//! time. Discovery, routing and the OpenAPI documents are all derived from this registry.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use serde_json::Value;

use crate::store::ResKey;

#[derive(Debug, Clone, Deserialize)]
pub struct SubresourceDef {
    pub name: String,
    /// Response kind's group/version when it differs from the parent's (Scale, Eviction, TokenRequest).
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    pub kind: String,
    pub verbs: Vec<String>,
}

/// What a custom resource adds beyond a built-in one.
#[derive(Debug, Clone, Default)]
pub struct CustomInfo {
    pub printer_columns: Value,
    pub scale: Option<ScalePaths>,
    pub status: bool,
}

#[derive(Debug, Clone)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub singular: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    #[serde(rename = "shortNames", default)]
    pub short_names: Vec<String>,
    #[serde(default)]
    pub categories: Vec<String>,
    #[serde(rename = "storageVersionHash", default)]
    pub storage_version_hash: String,
    #[serde(default)]
    pub subresources: Vec<SubresourceDef>,
    #[serde(skip)]
    pub custom: Option<CustomInfo>,
}

impl ResourceDef {
    pub fn key(&self) -> ResKey {
        ResKey::new(&self.group, &self.resource)
    }

    /// `deployments.apps`, or `pods` for the core group: how upstream names a resource.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    pub fn subresource(&self, name: &str) -> Option<&SubresourceDef> {
        self.subresources.iter().find(|s| s.name == name)
    }

    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// Objects that are stored (not create-only reviews or bindings).
    pub fn is_stored(&self) -> bool {
        self.has_verb("get") || self.has_verb("list")
    }

    /// Whether metadata.generation is kept for this kind, as upstream strategies do.
    pub fn tracks_generation(&self) -> bool {
        self.custom.is_some()
            || matches!(
                self.kind.as_str(),
                "Deployment"
                    | "ReplicaSet"
                    | "StatefulSet"
                    | "DaemonSet"
                    | "ReplicationController"
                    | "Job"
                    | "CronJob"
                    | "PodDisruptionBudget"
                    | "EndpointSlice"
                    | "Ingress"
                    | "NetworkPolicy"
                    | "CustomResourceDefinition"
                    | "FlowSchema"
                    | "PriorityLevelConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
                    | "ValidatingWebhookConfiguration"
                    | "MutatingWebhookConfiguration"
            )
    }
}

#[derive(Debug, Clone, Deserialize)]
struct GroupDef {
    name: String,
    versions: Vec<String>,
}

#[derive(Deserialize)]
struct Builtin {
    groups: Vec<GroupDef>,
    resources: Vec<ResourceDef>,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    /// Preferred first.
    pub versions: Vec<String>,
}

#[derive(Default)]
struct State {
    groups: Vec<Group>,
    resources: Vec<Arc<ResourceDef>>,
    /// CRD name -> the resources it registered.
    crds: BTreeMap<String, Vec<Arc<ResourceDef>>>,
}

pub struct Registry {
    state: RwLock<State>,
}

impl Registry {
    pub fn builtin() -> Self {
        // The data file is part of this crate; a parse failure is a build defect caught by tests.
        let b: Builtin = serde_json::from_str(include_str!("builtin_resources.json"))
            .expect("builtin_resources.json is valid");
        let mut groups = vec![Group {
            name: String::new(),
            versions: vec!["v1".into()],
        }];
        groups.extend(b.groups.into_iter().map(|g| Group {
            name: g.name,
            versions: g.versions,
        }));
        Registry {
            state: RwLock::new(State {
                groups,
                resources: b.resources.into_iter().map(Arc::new).collect(),
                crds: BTreeMap::new(),
            }),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.resource == resource)
            .cloned()
    }

    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind && r.is_stored())
            .cloned()
    }

    pub fn group_version_exists(&self, group: &str, version: &str) -> bool {
        self.read()
            .groups
            .iter()
            .any(|g| g.name == group && g.versions.iter().any(|v| v == version))
    }

    pub fn groups(&self) -> Vec<Group> {
        self.read().groups.clone()
    }

    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.read()
            .resources
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.read().resources.clone()
    }

    /// Serve a group an aggregated API server would (an APIService's group): appended
    /// after the built-in groups, as kube-apiserver lists aggregated groups last.
    pub fn add_aggregated(&self, group: &str, versions: Vec<String>, defs: Vec<ResourceDef>) {
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        if st.groups.iter().any(|g| g.name == group) {
            return;
        }
        st.resources.extend(defs.into_iter().map(Arc::new));
        st.groups.push(Group {
            name: group.to_string(),
            versions,
        });
    }

    /// Serve a built-in group version kube-apiserver enables only on request
    /// (`--runtime-config`): added as the group's last (least preferred) version, or as a
    /// new group after the built-in ones.
    pub fn add_builtin_version(&self, group: &str, version: &str, defs: Vec<ResourceDef>) {
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        if st
            .resources
            .iter()
            .any(|r| r.group == group && r.version == version)
        {
            return;
        }
        st.resources.extend(defs.into_iter().map(Arc::new));
        match st.groups.iter_mut().find(|g| g.name == group) {
            Some(g) => g.versions.push(version.to_string()),
            None => st.groups.push(Group {
                name: group.to_string(),
                versions: vec![version.to_string()],
            }),
        }
    }

    /// Serve (or re-serve, on update) the resources a CRD defines.
    pub fn register_crd(&self, crd_name: &str, defs: Vec<ResourceDef>, versions: Vec<String>) {
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        remove_crd(&mut st, crd_name);
        let Some(first) = defs.first() else { return };
        let group = first.group.clone();
        let defs: Vec<Arc<ResourceDef>> = defs.into_iter().map(Arc::new).collect();
        st.resources.extend(defs.iter().cloned());
        match st.groups.iter_mut().find(|g| g.name == group) {
            Some(g) => {
                for v in versions {
                    if !g.versions.contains(&v) {
                        g.versions.push(v);
                    }
                }
            }
            None => st.groups.push(Group {
                name: group,
                versions,
            }),
        }
        st.crds.insert(crd_name.to_string(), defs);
    }

    pub fn unregister_crd(&self, crd_name: &str) -> Vec<Arc<ResourceDef>> {
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        remove_crd(&mut st, crd_name)
    }
}

fn remove_crd(st: &mut State, crd_name: &str) -> Vec<Arc<ResourceDef>> {
    let Some(old) = st.crds.remove(crd_name) else {
        return Vec::new();
    };
    st.resources
        .retain(|r| !old.iter().any(|o| Arc::ptr_eq(o, r)));
    let group = old[0].group.clone();
    let still: Vec<String> = st
        .resources
        .iter()
        .filter(|r| r.group == group)
        .map(|r| r.version.clone())
        .collect();
    if let Some(g) = st.groups.iter_mut().find(|g| g.name == group) {
        g.versions.retain(|v| still.contains(v));
    }
    st.groups.retain(|g| !g.versions.is_empty());
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_registry_has_the_resources_kcm_uses() {
        let r = Registry::builtin();
        for (g, v, res) in [
            ("", "v1", "pods"),
            ("", "v1", "nodes"),
            ("apps", "v1", "deployments"),
            ("batch", "v1", "cronjobs"),
            ("coordination.k8s.io", "v1", "leases"),
            ("discovery.k8s.io", "v1", "endpointslices"),
            ("policy", "v1", "poddisruptionbudgets"),
            ("certificates.k8s.io", "v1", "certificatesigningrequests"),
            ("autoscaling", "v2", "horizontalpodautoscalers"),
            ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        ] {
            assert!(r.lookup(g, v, res).is_some(), "{g}/{v}/{res}");
        }
        let pods = r.lookup("", "v1", "pods").unwrap();
        assert!(pods.namespaced && pods.subresource("binding").is_some());
        assert!(r.lookup("", "v1", "componentstatuses").is_none());
    }
}
