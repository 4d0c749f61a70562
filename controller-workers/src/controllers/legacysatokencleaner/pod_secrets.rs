//! The Secrets a pod references, as upstream's `VisitPodSecretNames`
//! (pkg/api/v1/pod/util.go) finds them: image pull secrets; every container's (init,
//! regular and ephemeral) `envFrom` Secret and `env` secret key references; and the
//! volumes' Secret references (secret, projected secret sources, and the secret refs of
//! azureFile, cephfs, cinder, flexVolume, rbd, scaleIO, iscsi, storageos and csi). Empty
//! names are skipped. References through other objects (a PVC's PV) are not followed.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec, Volume};

/// The names of the Secrets the pods reference.
pub(super) fn referenced_secrets(pods: &[Arc<Pod>]) -> HashSet<String> {
    let mut names = HashSet::new();
    for pod in pods {
        if let Some(spec) = &pod.spec {
            visit_pod(spec, &mut |name: &str| {
                if !name.is_empty() {
                    names.insert(name.to_string());
                }
            });
        }
    }
    names
}

fn visit_pod(spec: &PodSpec, visit: &mut dyn FnMut(&str)) {
    for reference in spec.image_pull_secrets.iter().flatten() {
        visit(&reference.name);
    }
    for container in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        visit_container(container, visit);
    }
    for container in spec.ephemeral_containers.iter().flatten() {
        visit_ephemeral(container, visit);
    }
    for volume in spec.volumes.iter().flatten() {
        visit_volume(volume, visit);
    }
}

fn visit_env(
    env_from: Option<&Vec<k8s_openapi::api::core::v1::EnvFromSource>>,
    env: Option<&Vec<k8s_openapi::api::core::v1::EnvVar>>,
    visit: &mut dyn FnMut(&str),
) {
    for source in env_from.into_iter().flatten() {
        if let Some(secret) = &source.secret_ref {
            visit(&secret.name);
        }
    }
    for var in env.into_iter().flatten() {
        if let Some(key) = var
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
        {
            visit(&key.name);
        }
    }
}

fn visit_container(container: &Container, visit: &mut dyn FnMut(&str)) {
    visit_env(container.env_from.as_ref(), container.env.as_ref(), visit);
}

fn visit_ephemeral(container: &EphemeralContainer, visit: &mut dyn FnMut(&str)) {
    visit_env(container.env_from.as_ref(), container.env.as_ref(), visit);
}

/// A volume has one source; upstream looks at the first it finds in this order.
fn visit_volume(volume: &Volume, visit: &mut dyn FnMut(&str)) {
    if let Some(azure) = &volume.azure_file {
        if !azure.secret_name.is_empty() {
            visit(&azure.secret_name);
        }
    } else if let Some(cephfs) = &volume.cephfs {
        if let Some(r) = &cephfs.secret_ref {
            visit(&r.name);
        }
    } else if let Some(cinder) = &volume.cinder {
        if let Some(r) = &cinder.secret_ref {
            visit(&r.name);
        }
    } else if let Some(flex) = &volume.flex_volume {
        if let Some(r) = &flex.secret_ref {
            visit(&r.name);
        }
    } else if let Some(projected) = &volume.projected {
        for source in projected.sources.iter().flatten() {
            if let Some(secret) = &source.secret {
                visit(&secret.name);
            }
        }
    } else if let Some(rbd) = &volume.rbd {
        if let Some(r) = &rbd.secret_ref {
            visit(&r.name);
        }
    } else if let Some(secret) = &volume.secret {
        visit(secret.secret_name.as_deref().unwrap_or(""));
    } else if let Some(scale_io) = &volume.scale_io {
        visit(&scale_io.secret_ref.name);
    } else if let Some(iscsi) = &volume.iscsi {
        if let Some(r) = &iscsi.secret_ref {
            visit(&r.name);
        }
    } else if let Some(storage_os) = &volume.storageos {
        if let Some(r) = &storage_os.secret_ref {
            visit(&r.name);
        }
    } else if let Some(csi) = &volume.csi {
        if let Some(r) = &csi.node_publish_secret_ref {
            visit(&r.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_of_reference_counts() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
            "imagePullSecrets": [{"name": "pull"}, {"name": ""}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
            "containers": [{"name": "c",
                "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "env-key", "key": "k"}}},
                        {"name": "F", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}],
            "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "ephemeral"}}]}],
            "volumes": [
                {"name": "a", "secret": {"secretName": "volume"}},
                {"name": "b", "projected": {"sources": [{"secret": {"name": "projected"}},
                                                         {"configMap": {"name": "cm"}}]}},
                {"name": "c", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "d", "azureFile": {"secretName": "azure", "shareName": "s"}},
                {"name": "e", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": "rbd"}}},
                {"name": "f", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "scaleio"}}},
                {"name": "g", "configMap": {"name": "cm"}}
            ]}}))
        .unwrap();
        let mut names: Vec<String> = referenced_secrets(&[Arc::new(pod)]).into_iter().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "azure",
                "csi",
                "env-key",
                "ephemeral",
                "init-env",
                "projected",
                "pull",
                "rbd",
                "scaleio",
                "volume"
            ]
        );
    }
}
