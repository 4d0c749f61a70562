//! Creating and deleting a controller's pods (upstream `RealPodControl`): pods made from
//! the controller's template with its controllerRef, created in slow-start batches, with
//! the events `kubectl describe` shows (SuccessfulCreate, FailedCreate, SuccessfulDelete,
//! FailedDelete).

use std::future::Future;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Resource;
use tracing::debug;

use crate::api_errors::{is_namespace_terminating, is_not_found, message as api_error_text};
use crate::meta::ResourceNames;
use crate::recorder::{Recorder, NORMAL, WARNING};

pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// The controllerRef an owner puts on what it creates.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name_str().to_string(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `name-` as the generateName prefix, or `name` when the dash would make it invalid.
pub fn pods_prefix(owner_name: &str) -> String {
    // generateName prefixes are cut to 58 characters by the server; the dash only
    // matters for readability, and a prefix that is a valid name-with-suffix keeps it.
    let prefix = format!("{owner_name}-");
    if prefix.len() <= 253 {
        prefix
    } else {
        owner_name.to_string()
    }
}

/// A pod as the template describes it, owned by `owner`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner_name: &str,
    controller_ref: Option<OwnerReference>,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
            finalizers: meta.finalizers.clone(),
            generate_name: Some(pods_prefix(owner_name)),
            owner_references: controller_ref.map(|reference| vec![reference]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

#[derive(Clone)]
pub struct PodControl {
    client: kube::Client,
    recorder: Recorder,
}

impl PodControl {
    pub fn new(client: kube::Client, recorder: Recorder) -> Self {
        PodControl { client, recorder }
    }

    /// Creates one pod from `template` for `owner`.
    pub async fn create_pod<K: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &K,
        controller_ref: OwnerReference,
    ) -> Result<Pod, kube::Error> {
        self.create_pod_with_generate_name(namespace, template, owner, controller_ref, None)
            .await
    }

    /// As [`PodControl::create_pod`], with another name prefix than `<owner>-` (an
    /// Indexed Job's `<job>-<index>-`).
    pub async fn create_pod_with_generate_name<K: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &K,
        controller_ref: OwnerReference,
        generate_name: Option<String>,
    ) -> Result<Pod, kube::Error> {
        let owner_name = owner.name_str().to_string();
        let mut pod = pod_from_template(template, &owner_name, Some(controller_ref));
        if generate_name.is_some() {
            pod.metadata.generate_name = generate_name;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let name = created.name_str().to_string();
                debug!(controller = %owner_name, pod = %name, "created pod");
                self.recorder.event(
                    owner,
                    NORMAL,
                    "SuccessfulCreate",
                    format!("Created pod: {name}"),
                );
                Ok(created)
            }
            Err(error) => {
                if !is_namespace_terminating(&error) {
                    self.recorder.event(
                        owner,
                        WARNING,
                        "FailedCreate",
                        format!("Error creating: {}", api_error_text(&error)),
                    );
                }
                Err(error)
            }
        }
    }

    /// Deletes `name`; a pod already gone is reported as NotFound without an event.
    pub async fn delete_pod<K: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
        owner: &K,
    ) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                self.recorder.event(
                    owner,
                    NORMAL,
                    "SuccessfulDelete",
                    format!("Deleted pod: {name}"),
                );
                Ok(())
            }
            Err(error) if is_not_found(&error) => Err(error),
            Err(error) => {
                self.recorder.event(
                    owner,
                    WARNING,
                    "FailedDelete",
                    format!("Error deleting: {}", api_error_text(&error)),
                );
                Err(error)
            }
        }
    }
}

/// The pod writes a controller's decisions make (upstream `PodControlInterface`):
/// [`PodControl`] makes them against the API server; table tests use the in-memory
/// `fake::FakePodControl`, which records them. The concrete type keeps its inherent
/// methods, so callers that hold a [`PodControl`] are unaffected.
pub(crate) trait PodControlInterface: Sync {
    /// Creates one pod from `template` for `owner`, named after `generate_name` (or
    /// `<owner>-`).
    fn create_pod_with_generate_name<K: Resource<DynamicType = ()> + Sync>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &K,
        controller_ref: OwnerReference,
        generate_name: Option<String>,
    ) -> impl Future<Output = Result<Pod, kube::Error>> + Send;

    /// Deletes the pod `name` of `owner`.
    fn delete_pod<K: Resource<DynamicType = ()> + Sync>(
        &self,
        namespace: &str,
        name: &str,
        owner: &K,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Creates one pod from `template` for `owner`, named `<owner>-<random>`.
    fn create_pod<K: Resource<DynamicType = ()> + Sync>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &K,
        controller_ref: OwnerReference,
    ) -> impl Future<Output = Result<Pod, kube::Error>> + Send {
        self.create_pod_with_generate_name(namespace, template, owner, controller_ref, None)
    }
}

impl PodControlInterface for PodControl {
    fn create_pod_with_generate_name<K: Resource<DynamicType = ()> + Sync>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &K,
        controller_ref: OwnerReference,
        generate_name: Option<String>,
    ) -> impl Future<Output = Result<Pod, kube::Error>> + Send {
        PodControl::create_pod_with_generate_name(
            self,
            namespace,
            template,
            owner,
            controller_ref,
            generate_name,
        )
    }

    fn delete_pod<K: Resource<DynamicType = ()> + Sync>(
        &self,
        namespace: &str,
        name: &str,
        owner: &K,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        PodControl::delete_pod(self, namespace, name, owner)
    }
}

/// Runs `count` calls of `call` in batches of 1, 2, 4, ... (at most `count` in all),
/// stopping after the first batch with a failure: a doomed request (quota, invalid
/// template) fails once rather than `count` times. Returns the successes and the first
/// error.
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial_batch_size: usize,
    call: F,
) -> (usize, Option<E>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = remaining.min(initial_batch_size);
    while batch > 0 {
        let results = futures::future::join_all((0..batch).map(|_| call())).await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => successes += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    (successes, None)
}

/// An in-memory [`PodControlInterface`] for table tests (upstream `FakePodControl`).
#[cfg(test)]
pub(crate) mod fake {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::Resource;

    use super::{pod_from_template, PodControlInterface};
    use crate::meta::ResourceNames;

    /// One recorded pod creation.
    #[derive(Clone, Debug)]
    pub(crate) struct CreatedPod {
        pub(crate) namespace: String,
        pub(crate) owner: String,
        pub(crate) controller_ref: OwnerReference,
        /// The pod as it would have been sent, with a generated name.
        pub(crate) pod: Pod,
    }

    #[derive(Default)]
    struct Calls {
        created: Vec<CreatedPod>,
        deleted: Vec<String>,
        serial: usize,
    }

    /// Records creations and deletions; after `create_limit` creations (when set) or
    /// always (when `fail` is set), creating fails with a Forbidden error, as a quota
    /// would make it.
    #[derive(Default)]
    pub(crate) struct FakePodControl {
        calls: Mutex<Calls>,
        pub(crate) create_limit: Option<usize>,
        pub(crate) fail: bool,
    }

    fn forbidden() -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("pods is forbidden: exceeded quota", "Forbidden")
                .with_code(403)
                .boxed(),
        )
    }

    impl FakePodControl {
        /// A fake whose creations fail after the first `limit`.
        pub(crate) fn with_create_limit(limit: Option<usize>) -> Self {
            FakePodControl {
                create_limit: limit,
                ..FakePodControl::default()
            }
        }

        pub(crate) fn created(&self) -> Vec<CreatedPod> {
            self.lock().created.clone()
        }

        pub(crate) fn deleted(&self) -> Vec<String> {
            self.lock().deleted.clone()
        }

        /// Forgets what was recorded (upstream `Clear`).
        pub(crate) fn clear(&self) {
            let mut calls = self.lock();
            calls.created.clear();
            calls.deleted.clear();
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
            self.calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    impl PodControlInterface for FakePodControl {
        fn create_pod_with_generate_name<K: Resource<DynamicType = ()> + Sync>(
            &self,
            namespace: &str,
            template: &PodTemplateSpec,
            owner: &K,
            controller_ref: OwnerReference,
            generate_name: Option<String>,
        ) -> impl std::future::Future<Output = Result<Pod, kube::Error>> + Send {
            let owner = owner.name_str().to_string();
            let result = {
                let mut calls = self.lock();
                let over_limit = self
                    .create_limit
                    .is_some_and(|limit| calls.created.len() >= limit);
                if self.fail || over_limit {
                    Err(forbidden())
                } else {
                    let mut pod = pod_from_template(template, &owner, Some(controller_ref.clone()));
                    if generate_name.is_some() {
                        pod.metadata.generate_name = generate_name;
                    }
                    calls.serial += 1;
                    pod.metadata.name = Some(format!(
                        "{}{}",
                        pod.metadata.generate_name.clone().unwrap_or_default(),
                        calls.serial
                    ));
                    pod.metadata.namespace = Some(namespace.to_string());
                    calls.created.push(CreatedPod {
                        namespace: namespace.to_string(),
                        owner,
                        controller_ref,
                        pod: pod.clone(),
                    });
                    Ok(pod)
                }
            };
            std::future::ready(result)
        }

        fn delete_pod<K: Resource<DynamicType = ()> + Sync>(
            &self,
            _namespace: &str,
            name: &str,
            _owner: &K,
        ) -> impl std::future::Future<Output = Result<(), kube::Error>> + Send {
            self.lock().deleted.push(name.to_string());
            std::future::ready(Ok(()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn batches_double_and_stop_at_the_first_failing_batch() {
        let calls = Arc::new(AtomicUsize::new(0));
        let (ok, error) = slow_start_batch(10, 1, || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<(), ()>(())
            }
        })
        .await;
        assert_eq!((ok, error), (10, None));
        assert_eq!(calls.load(Ordering::SeqCst), 10, "1 + 2 + 4 + 3");

        let calls = Arc::new(AtomicUsize::new(0));
        let (ok, error) = slow_start_batch(10, 1, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n >= 2 {
                    Err("quota")
                } else {
                    Ok(())
                }
            }
        })
        .await;
        // batch 1 (ok), batch 2 (one ok, one fails): stop
        assert_eq!((ok, error), (2, Some("quota")));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn pods_get_the_template_and_the_controller_ref() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(Default::default()),
        };
        let reference = OwnerReference {
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        };
        let pod = pod_from_template(&template, "web-7d4b9", Some(reference));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-7d4b9-"));
        assert_eq!(pod.metadata.labels, template.metadata.unwrap().labels);
        assert_eq!(pod.metadata.owner_references.unwrap()[0].uid, "u");
    }
}
