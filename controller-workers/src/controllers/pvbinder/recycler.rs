//! Recycling a host-path or NFS volume with a pod (upstream `volume.
//! NewPersistentVolumeRecyclerPodTemplate`, the plugins' `Recycle` and
//! `recyclerclient`): the template (the default scrubs `/scrub` and checks it is empty)
//! gets the volume's source as its first volume and an `activeDeadlineSeconds` growing
//! with the volume's size; it runs as `recycler-for-<pv>`, watched together with its
//! Events, which are mirrored onto the volume (`RecyclerPod`), until it succeeds or
//! fails; then it is deleted.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{
    Container, Event, HostPathVolumeSource, NFSVolumeSource, PersistentVolume, Pod, PodSpec,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use tracing::{debug, warn};

use crate::api_errors::{is_already_exists, message};
use crate::meta::ResourceNames;

use super::helpers::volume_storage;
use super::plugins::Plugin;

/// A recycling plugin's settings: its pod template and the deadline rule.
#[derive(Clone, Debug)]
pub(super) struct RecyclerConfig {
    pub template: Pod,
    pub minimum_timeout: i32,
    pub timeout_increment: i32,
}

const GI: i64 = 1 << 30;

/// `NewPersistentVolumeRecyclerPodTemplate`.
pub(super) fn default_recycler_pod_template() -> Pod {
    Pod {
        metadata: ObjectMeta {
            generate_name: Some("pv-recycler-".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            active_deadline_seconds: Some(60),
            restart_policy: Some("Never".into()),
            volumes: Some(vec![Volume {
                name: "vol".into(),
                ..Default::default()
            }]),
            containers: vec![Container {
                name: "pv-recycler".into(),
                image: Some("registry.k8s.io/build-image/debian-base:bookworm-v1.0.3".into()),
                command: Some(vec!["/bin/sh".into()]),
                args: Some(vec![
                    "-c".into(),
                    "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1".into(),
                ]),
                volume_mounts: Some(vec![VolumeMount {
                    name: "vol".into(),
                    mount_path: "/scrub".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// `CalculateTimeoutForVolume`: `increment` seconds per whole Gi of the volume, at least
/// `minimum`.
pub(super) fn timeout_for_volume(minimum: i32, increment: i32, volume: &PersistentVolume) -> i64 {
    let size = volume_storage(volume).value().unwrap_or(i64::MAX);
    let timeout = (size / GI).saturating_mul(i64::from(increment));
    timeout.max(i64::from(minimum))
}

/// The recycler pod for `volume` from `config`: the template with the volume's source in
/// its first volume, the deadline, and the name `recycler-for-<pv>`. A template without a
/// namespace runs in `default`, where the default template runs.
pub(super) fn recycler_pod(
    plugin: Plugin,
    config: &RecyclerConfig,
    volume: &PersistentVolume,
) -> Result<Pod, String> {
    let spec = volume.spec.as_ref();
    let source = match plugin {
        Plugin::HostPath => {
            let path = spec
                .and_then(|s| s.host_path.as_ref())
                .ok_or("spec.PersistentVolume.Spec.HostPath is nil")?;
            Volume {
                host_path: Some(HostPathVolumeSource {
                    path: path.path.clone(),
                    type_: None,
                }),
                ..Default::default()
            }
        }
        Plugin::Nfs => {
            let nfs = spec
                .and_then(|s| s.nfs.as_ref())
                .ok_or("spec.PersistentVolumeSource.NFS is nil")?;
            Volume {
                nfs: Some(NFSVolumeSource {
                    server: nfs.server.clone(),
                    path: nfs.path.clone(),
                    read_only: None,
                }),
                ..Default::default()
            }
        }
        other => return Err(format!("{} does not recycle volumes", other.name())),
    };
    let mut pod = config.template.clone();
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.active_deadline_seconds = Some(timeout_for_volume(
        config.minimum_timeout,
        config.timeout_increment,
        volume,
    ));
    let first = pod_spec
        .volumes
        .as_mut()
        .and_then(|volumes| volumes.first_mut())
        .ok_or("the recycler pod template has no volume")?;
    *first = Volume {
        name: std::mem::take(&mut first.name),
        ..source
    };
    let pv_name = volume.name_str();
    pod.metadata.name = Some(format!("recycler-for-{pv_name}"));
    pod.metadata.generate_name = None;
    if pod.namespace_str().is_empty() {
        pod.metadata.namespace = Some("default".into());
    }
    pod.metadata.resource_version = None;
    pod.metadata.uid = None;
    pod.status = None;
    Ok(pod)
}

/// How long the recycler's watches may last: the pod's deadline and five minutes more, at
/// least the half hour an API server gives a watch that asks for no timeout (the watch
/// ending before the pod does fails the recycling, as upstream).
fn watch_timeout(pod: &Pod) -> u32 {
    let deadline = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.active_deadline_seconds)
        .unwrap_or_default();
    let seconds = deadline.saturating_add(300).max(1800);
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

/// What the recycler's watches report.
enum Seen {
    Pod(Box<WatchEvent<Pod>>),
    Event(Box<WatchEvent<Event>>),
}

/// `RecycleVolumeByWatchingPodUntilCompletion`: runs `pod`, mirroring its Events through
/// `mirror(type, message)`, and deletes it whatever happened. An old recycler pod of that
/// name is deleted and the recycling tried again later.
pub(super) async fn recycle_with_pod(
    client: &kube::Client,
    pod: Pod,
    mirror: impl Fn(&str, &str),
) -> Result<(), String> {
    let name = pod.name_str().to_string();
    let namespace = pod.namespace_str().to_string();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let timeout = watch_timeout(&pod);
    let pod_stream = pods
        .watch(
            &WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(timeout),
            "0",
        )
        .await
        .map_err(|error| format!("cannot start watcher for pod {namespace}/{name}: {error}"))?;
    let event_stream = events
        .watch(
            &WatchParams::default()
                .fields(&format!("involvedObject.name={name}"))
                .timeout(timeout),
            "0",
        )
        .await
        .map_err(|error| format!("cannot start watcher for pod {namespace}/{name}: {error}"))?;
    let mut seen = futures::stream::select(
        pod_stream.map_ok(|e| Seen::Pod(Box::new(e))).boxed(),
        event_stream.map_ok(|e| Seen::Event(Box::new(e))).boxed(),
    );

    if let Err(error) = pods.create(&PostParams::default(), &pod).await {
        if is_already_exists(&error) {
            pods.delete(&name, &DeleteParams::default())
                .await
                .map_err(|delete| {
                    format!(
                        "failed to delete old recycler pod {namespace}/{name}: {}",
                        message(&delete)
                    )
                })?;
            return Err("old recycler pod found, will retry later".into());
        }
        return Err(format!(
            "unexpected error creating recycler pod:  {}",
            message(&error)
        ));
    }

    let outcome = async {
        loop {
            let Some(next) = seen.next().await else {
                return Err(format!(
                    "recycler pod {name:?} watch channel had been closed"
                ));
            };
            let pod_event = match next {
                Err(_) => return Err("recycler pod watcher failed".into()),
                Ok(Seen::Event(event)) => {
                    if let WatchEvent::Added(event) = *event {
                        mirror(
                            event.type_.as_deref().unwrap_or_default(),
                            event.message.as_deref().unwrap_or_default(),
                        );
                    }
                    continue;
                }
                Ok(Seen::Pod(event)) => *event,
            };
            match pod_event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) => {
                    let status = pod.status.unwrap_or_default();
                    debug!(pod = %name, phase = ?status.phase, "recycler pod update");
                    match status.phase.as_deref() {
                        Some("Succeeded") => return Ok(()),
                        Some("Failed") => {
                            return Err(status.message.filter(|m| !m.is_empty()).unwrap_or_else(
                                || "pod failed, pod.Status.Message unknown".into(),
                            ))
                        }
                        _ => {}
                    }
                }
                WatchEvent::Deleted(_) => return Err("recycler pod was deleted".into()),
                WatchEvent::Error(_) => return Err("recycler pod watcher failed".into()),
                WatchEvent::Bookmark(_) => {}
            }
        }
    }
    .await;

    debug!(pod = %name, namespace = %namespace, "deleting recycler pod");
    let deleted = pods.delete(&name, &DeleteParams::default()).await;
    if let Err(error) = &deleted {
        warn!(pod = %name, namespace = %namespace, error = %message(error), "failed to delete recycler pod");
    }
    outcome.map_err(|error| format!("failed to recycle volume: {error}"))?;
    deleted
        .map(|_| ())
        .map_err(|error| format!("failed to delete recycler pod: {}", message(&error)))
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::pv;
    use super::*;
    use serde_json::json;

    fn config(template: Pod) -> RecyclerConfig {
        RecyclerConfig {
            template,
            minimum_timeout: 60,
            timeout_increment: 30,
        }
    }

    #[test]
    fn the_watches_outlast_the_pod() {
        let mut pod = default_recycler_pod_template();
        assert_eq!(watch_timeout(&pod), 1800);
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(3600);
        assert_eq!(watch_timeout(&pod), 3900);
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(i64::MAX);
        assert_eq!(watch_timeout(&pod), u32::MAX);
    }

    #[test]
    fn deadline_grows_with_whole_gi() {
        let cases = [
            ("1Gi", 60),
            ("2Gi", 60),
            ("3Gi", 90),
            ("3.5Gi", 90),
            ("100Mi", 60),
            ("10Gi", 300),
        ];
        for (size, want) in cases {
            assert_eq!(
                timeout_for_volume(60, 30, &pv("v", size, json!({}))),
                want,
                "{size}"
            );
        }
    }

    #[test]
    fn the_pod_gets_the_volume_source_name_and_deadline() {
        let volume = pv(
            "pv1",
            "4Gi",
            json!({"spec": {"hostPath": {"path": "/tmp/r1"}}}),
        );
        let pod = recycler_pod(
            Plugin::HostPath,
            &config(default_recycler_pod_template()),
            &volume,
        )
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("recycler-for-pv1"));
        assert_eq!(pod.metadata.generate_name, None);
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(120));
        let volumes = spec.volumes.unwrap();
        assert_eq!(volumes[0].name, "vol");
        assert_eq!(volumes[0].host_path.as_ref().unwrap().path, "/tmp/r1");
        assert_eq!(spec.containers[0].name, "pv-recycler");

        let nfs = pv(
            "pv2",
            "1Gi",
            json!({"spec": {"hostPath": null, "nfs": {"server": "srv", "path": "/export"}}}),
        );
        let mut template = default_recycler_pod_template();
        template.metadata.namespace = None;
        if let Some(volumes) = template.spec.as_mut().and_then(|s| s.volumes.as_mut()) {
            volumes[0].host_path = Some(HostPathVolumeSource {
                path: "/stale".into(),
                type_: None,
            });
        }
        let pod = recycler_pod(Plugin::Nfs, &config(template), &nfs).unwrap();
        let first = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert!(
            first.host_path.is_none(),
            "the template's source is replaced"
        );
        assert_eq!(first.nfs.as_ref().unwrap().server, "srv");
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        assert!(recycler_pod(
            Plugin::HostPath,
            &config(default_recycler_pod_template()),
            &nfs
        )
        .is_err());
    }
}
