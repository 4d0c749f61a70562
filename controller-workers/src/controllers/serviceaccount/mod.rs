//! serviceaccount-controller: every active namespace has a `default` ServiceAccount; it
//! is created when a namespace appears and recreated when deleted (upstream
//! `pkg/controller/serviceaccount/serviceaccounts_controller.go`). Pods cannot be created
//! in a namespace before it exists (ServiceAccount admission).

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::api_errors::is_namespace_terminating;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::store::Store;

pub const NAME: &str = "serviceaccount-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/namespaces", "v1/serviceaccounts"];
/// The accounts ensured in every namespace (KCM: just `default`).
pub const SERVICE_ACCOUNTS: &[&str] = &["default"];

struct Controller {
    client: kube::Client,
    namespaces: Store<Namespace>,
    service_accounts: Store<ServiceAccount>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let (client, _recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("serviceaccount");
    let namespaces = context.informers.get::<Namespace>();
    let service_accounts = context.informers.get::<ServiceAccount>();
    {
        let queue = queue.clone();
        service_accounts.add_handler(Arc::new(move |change: &Change<ServiceAccount>| {
            if let Change::Deleted(deleted) = change {
                if let Some(namespace) = deleted.object().metadata.namespace.clone() {
                    queue.add(namespace);
                }
            }
        }));
    }
    {
        let queue = queue.clone();
        namespaces.add_handler(Arc::new(move |change: &Change<Namespace>| match change {
            Change::Added(namespace) | Change::Updated { new: namespace, .. } => {
                if let Some(name) = namespace.metadata.name.clone() {
                    queue.add(name);
                }
            }
            Change::Deleted(_) => {}
        }));
    }
    let controller = Arc::new(Controller {
        client,
        namespaces: namespaces.store().clone(),
        service_accounts: service_accounts.store().clone(),
    });
    // KCM runs this controller with one worker.
    Ok(Runnable::new(
        NAME,
        queue,
        1,
        controller,
        |controller, key| async move { controller.sync_namespace(&key).await },
    ))
}

impl Controller {
    async fn sync_namespace(&self, name: &str) -> anyhow::Result<()> {
        let Some(namespace) = self.namespaces.get(name) else {
            return Ok(());
        };
        let phase = namespace
            .status
            .as_ref()
            .and_then(|status| status.phase.as_deref());
        if phase != Some("Active") {
            return Ok(());
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), name);
        let mut failures = Vec::new();
        for account in SERVICE_ACCOUNTS {
            if self.service_accounts.get_in(name, account).is_some() {
                continue;
            }
            let wanted = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(account.to_string()),
                    namespace: Some(name.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match api.create(&PostParams::default(), &wanted).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) if is_namespace_terminating(&error) => {}
                Err(error) => failures.push(
                    anyhow::Error::new(error)
                        .context(format!("creating ServiceAccount {name}/{account}")),
                ),
            }
        }
        match failures.pop() {
            Some(error) => Err(error).context(format!("namespace {name}")),
            None => Ok(()),
        }
    }
}
