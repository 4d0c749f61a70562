//! End-to-end tests of the root-ca-certificate-publisher and clusterrole-aggregation
//! controllers in `rkcm worker` (started by `rkcm launcher`): the test cluster (kube-sim with simulated nodes, or
//! RKCM_TEST_KUBECONFIG's real cluster), the real `rkcm launcher` with its informer-server and worker
//! as separate processes, every check made with kubectl or kube-rs.
//!
//! The publisher puts `kube-root-ca.crt` in every namespace and keeps it as it should be;
//! a pod's `kube-api-access-*` volume mounts it, so pods wait for it (the simulated kubelet
//! reports FailedMount as kubelet does). The aggregation controller fills `admin`, `edit`
//! and `view` from the ClusterRoles labelled to be aggregated into them.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const ROOT_CA: &str = "kube-root-ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The certificates of a PEM bundle, whitespace aside, to compare bundles written apart.
fn certificates(pem: &str) -> Vec<String> {
    pem.split("-----END CERTIFICATE-----")
        .map(|block| block.split_whitespace().collect::<String>())
        .filter(|block| !block.is_empty())
        .collect()
}

/// The ConfigMap as the publisher writes it: `(ca.crt, description)`.
fn published(cm: &ConfigMap) -> (Option<String>, Option<String>) {
    (
        cm.data.as_ref().and_then(|d| d.get("ca.crt")).cloned(),
        cm.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubernetes.io/description"))
            .cloned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_the_root_ca_and_edits_are_undone() {
    let stack =
        LauncherStack::start(&["--controllers", "serviceaccount,root-ca-cert-publisher"]).await;
    let ns = stack.namespace("root-ca").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let wait_published = |what: &'static str, not_uid: Option<String>| {
        let config_maps = config_maps.clone();
        let stack = &stack;
        async move {
            stack
                .wait(what, || {
                    let config_maps = config_maps.clone();
                    let not_uid = not_uid.clone();
                    async move {
                        let Some(cm) = config_maps.get_opt(ROOT_CA).await? else {
                            return Ok(None);
                        };
                        let (ca, description) = published(&cm);
                        let fresh = not_uid.is_none() || cm.metadata.uid != not_uid;
                        let whole = ca.as_deref().is_some_and(|ca| {
                            ca.contains("BEGIN CERTIFICATE") && !ca.contains("forged")
                        });
                        Ok(
                            (fresh && whole && description.as_deref() == Some(DESCRIPTION))
                                .then_some(cm),
                        )
                    }
                })
                .await
        }
    };
    let cm = wait_published("kube-root-ca.crt in a new namespace", None).await;
    if let Some((cluster_ca, _)) = stack.cluster.sim.as_ref().and_then(|sim| sim.ca()) {
        // Without --root-ca-file: the CA the worker's kubeconfig trusts.
        let (ca, _) = published(&cm);
        assert_eq!(
            certificates(&ca.unwrap_or_default()),
            certificates(cluster_ca),
            "ca.crt is the cluster CA"
        );
    }

    // Its data edited and its description dropped: both put back.
    stack
        .kubectl(&[
            "patch",
            "configmap",
            ROOT_CA,
            "-n",
            &ns,
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/data/ca.crt","value":"forged"},{"op":"remove","path":"/metadata/annotations"}]"#,
        ])
        .await;
    let restored = wait_published("the edited kube-root-ca.crt restored", None).await;
    assert_eq!(published(&restored), published(&cm));

    // Deleted: created again.
    stack
        .kubectl(&["delete", "configmap", ROOT_CA, "-n", &ns])
        .await;
    let again = wait_published(
        "the deleted kube-root-ca.crt created again",
        restored.metadata.uid.clone(),
    )
    .await;
    assert_eq!(published(&again), published(&cm));

    // Counted as upstream counts syncs.
    let metrics = stack.metrics().await;
    for family in [
        "root_ca_cert_publisher_sync_total{code=\"200\"}",
        "root_ca_cert_publisher_sync_duration_seconds_count{code=\"200\"}",
    ] {
        assert!(
            has_sample(&metrics, family),
            "{family} in /metrics:\n{metrics}"
        );
    }
    stack.cluster.cleanup().await;
}

/// The pods's FailedMount events from kubelet.
async fn failed_mounts(events: &Api<Event>, pod: &str) -> anyhow::Result<Vec<String>> {
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(pod))
        .filter(|e| e.reason.as_deref() == Some("FailedMount"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet"))
        .filter_map(|e| e.message)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_starts_only_once_its_namespace_has_the_root_ca() {
    let mut stack = LauncherStack::start(&["--controllers", "serviceaccount,nodelifecycle"]).await;
    if stack
        .cluster
        .sim_only("a worker without the publisher")
        .is_none()
    {
        return;
    }
    let ns = stack.namespace("mount-wait").await;
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
    }))
    .unwrap_or_else(|e| stack.fail(e));
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| stack.fail(format!("creating the pod: {e}")));
    let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let messages = stack
        .wait("a FailedMount event for kube-root-ca.crt", || {
            let events = events.clone();
            async move {
                let messages = failed_mounts(&events, "app").await?;
                Ok((!messages.is_empty()).then_some(messages))
            }
        })
        .await;
    let volume = pods
        .get("app")
        .await
        .unwrap_or_else(|e| stack.fail(e))
        .spec
        .and_then(|s| s.volumes)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .find(|name| name.starts_with("kube-api-access-"))
        .unwrap_or_else(|| stack.fail("no kube-api-access volume on the pod"));
    let wanted = format!(
        "MountVolume.SetUp failed for volume \"{volume}\" : configmap \"kube-root-ca.crt\" not found"
    );
    assert!(messages.contains(&wanted), "{wanted:?} in {messages:?}");
    let waiting = pods.get("app").await.unwrap_or_else(|e| stack.fail(e));
    let status = waiting.status.unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let reason = status
        .container_statuses
        .unwrap_or_default()
        .first()
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.clone());
    assert_eq!(reason.as_deref(), Some("ContainerCreating"));

    // The launcher restarted with the publisher: the ConfigMap appears, the pod runs.
    stack
        .restart_with(&[
            "--controllers",
            "serviceaccount,nodelifecycle,root-ca-cert-publisher",
        ])
        .await;
    stack
        .wait("the pod Running once kube-root-ca.crt exists", || {
            let pods = pods.clone();
            async move {
                let pod = pods.get("app").await?;
                let phase = pod.status.and_then(|s| s.phase);
                Ok((phase.as_deref() == Some("Running")).then_some(()))
            }
        })
        .await;
    stack.cluster.cleanup().await;
}

/// The resources the ClusterRole's rules name.
fn resources_of(role: &ClusterRole) -> Vec<String> {
    role.rules
        .iter()
        .flatten()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_takes_in_the_rules_of_roles_aggregated_to_it() {
    let stack = LauncherStack::start(&["--controllers", "clusterrole-aggregation"]).await;
    let roles: Api<ClusterRole> = Api::all(stack.cluster.client.clone());
    let suffix = kube_sim::api::random_suffix(5);
    let resource = format!("widgets{suffix}");
    let crd_role = format!("widgets-{suffix}-admin");
    // As a CRD's installer ships it: labelled to be aggregated into admin.
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {crd_role}\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-admin: \"true\"\nrules:\n- apiGroups: [example.com]\n  resources: [{resource}]\n  verbs: [get, list, watch, create, update, patch, delete]\n"
            ),
        )
        .await;
    let has = |wanted: bool| {
        let roles = roles.clone();
        let resource = resource.clone();
        move || {
            let roles = roles.clone();
            let resource = resource.clone();
            async move {
                let admin = roles.get("admin").await?;
                let resources = resources_of(&admin);
                Ok(
                    (!resources.is_empty() && resources.contains(&resource) == wanted)
                        .then_some(admin),
                )
            }
        }
    };
    stack
        .wait("admin's rules with the aggregated role's", has(true))
        .await;
    let yaml = stack
        .kubectl(&["get", "clusterrole", "admin", "-o", "yaml"])
        .await;
    assert!(yaml.contains(&resource), "{resource} in admin:\n{yaml}");
    let managed = stack
        .kubectl(&[
            "get",
            "clusterrole",
            "admin",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ])
        .await;
    assert!(
        managed.contains("clusterrole-aggregation-controller"),
        "the controller's apply in managedFields: {managed}"
    );

    // Someone edits admin's rules: the aggregation is put back.
    roles
        .patch(
            "admin",
            &PatchParams::default(),
            &Patch::Merge(&json!({"rules": [
                {"apiGroups": [""], "resources": ["forged"], "verbs": ["*"]}
            ]})),
        )
        .await
        .unwrap_or_else(|e| stack.fail(format!("editing admin: {e}")));
    let restored = stack.wait("admin's edited rules reverted", has(true)).await;
    assert!(
        !resources_of(&restored).contains(&"forged".to_string()),
        "the edit is gone: {:?}",
        resources_of(&restored)
    );

    // The aggregated role goes: so do its rules.
    roles
        .delete(&crd_role, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| stack.fail(format!("deleting {crd_role}: {e}")));
    let after = stack
        .wait("admin's rules without the deleted role's", has(false))
        .await;
    let kept: BTreeMap<_, _> = resources_of(&after).into_iter().map(|r| (r, ())).collect();
    assert!(kept.contains_key("pods"), "admin keeps the bootstrap rules");
    stack.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_root_ca_file_stops_only_the_publisher() {
    let stack = LauncherStack::start(&[
        "--controllers",
        "serviceaccount,root-ca-cert-publisher",
        "--root-ca-file=/nonexistent/ca.crt",
    ])
    .await;
    // The worker runs its other controllers: the namespace gets its ServiceAccount.
    let ns = stack.namespace("no-ca").await;
    let log = stack.log();
    assert!(
        log.contains("not starting the controller") && log.contains("/nonexistent/ca.crt"),
        "the log says why the publisher is not running:\n{log}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.cluster.client.clone(), &ns);
    if stack.cluster.sim.is_some() {
        let cm = config_maps
            .get_opt(ROOT_CA)
            .await
            .unwrap_or_else(|e| stack.fail(e));
        assert!(cm.is_none(), "nothing published: {cm:?}");
    }
    stack.cluster.cleanup().await;
}
