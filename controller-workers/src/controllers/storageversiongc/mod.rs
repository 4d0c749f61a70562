//! storageversion-garbage-collector-controller (feature gates `APIServerIdentity` and
//! `StorageVersionAPI`): drops the records of kube-apiservers that are gone from the
//! StorageVersions of `internal.apiserver.k8s.io/v1alpha1` (upstream
//! `pkg/controller/storageversiongc/`).
//!
//! Two queues, one worker each, retried for ever:
//! - `storage_version_garbage_collector_leases`: the name of a deleted kube-apiserver
//!   identity Lease (kube-system, label `apiserver.kubernetes.io/identity=kube-apiserver`).
//!   Unless the Lease is back (a GET finds it), every StorageVersion listing that server has
//!   its record removed; one left with no record is deleted.
//! - `storage_version_garbage_collector_storageversions`: a StorageVersion added or changed
//!   (and at each resync) with a record of a server the Lease cache does not know. The sync
//!   reads the StorageVersion and each server's Lease from the API and drops the records of
//!   servers without an identity Lease (deleting the StorageVersion if none is left).
//!
//! A StorageVersion written back has its common encoding version and its
//! `AllEncodingVersionsEqual` condition recomputed, as the API server's own updater does.

pub(crate) mod types;

use std::sync::Arc;

use anyhow::Context as _;
use futures::FutureExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tracing::debug;

use crate::api_errors;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::store::Store;
use types::{set_common_encoding_version, ServerStorageVersion, StorageVersion};

pub const NAME: &str = "storageversion-garbage-collector-controller";
pub const RESOURCES: &[&str] = &[
    "coordination.k8s.io/v1/leases",
    "internal.apiserver.k8s.io/v1alpha1/storageversions",
];
const LEASE_QUEUE: &str = "storage_version_garbage_collector_leases";
const STORAGE_VERSION_QUEUE: &str = "storage_version_garbage_collector_storageversions";
const NAMESPACE: &str = "kube-system";
/// `controlplane.IdentityLeaseComponentLabelKey` and its kube-apiserver value.
pub(crate) const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
pub(crate) const KUBE_APISERVER: &str = "kube-apiserver";

pub(crate) struct Controller {
    client: kube::Client,
    leases: Store<Lease>,
    lease_queue: Arc<WorkQueue<String>>,
    storage_version_queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Vec<Runnable>> {
    let client = context.clients.client(NAME)?;
    let lease_queue = context.queue(LEASE_QUEUE);
    let storage_version_queue = context.queue(STORAGE_VERSION_QUEUE);
    let leases = context.informers.get::<Lease>();
    let storage_versions = context.informers.get::<StorageVersion>();
    let controller = Arc::new(Controller {
        client,
        leases: leases.store().clone(),
        lease_queue: lease_queue.clone(),
        storage_version_queue: storage_version_queue.clone(),
    });
    leases.handle(&controller, Controller::on_lease);
    storage_versions.handle(&controller, Controller::on_storage_version);
    let lease_worker = {
        let controller = controller.clone();
        Runnable {
            name: NAME,
            queue: lease_queue,
            workers: 1,
            sync: Arc::new(move |name| {
                let controller = controller.clone();
                async move { controller.process_deleted_lease(&name).await }.boxed()
            }),
            max_retries: None,
        }
    };
    let storage_version_worker = Runnable {
        name: NAME,
        queue: storage_version_queue,
        workers: 1,
        sync: Arc::new(move |name| {
            let controller = controller.clone();
            async move { controller.sync_storage_version(&name).await }.boxed()
        }),
        max_retries: None,
    };
    Ok(vec![lease_worker, storage_version_worker])
}

/// Whether a Lease is a kube-apiserver's identity Lease.
fn is_identity_lease(lease: &Lease) -> bool {
    lease
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(IDENTITY_LABEL))
        .is_some_and(|v| v == KUBE_APISERVER)
}

/// The records left once those of the servers `stale` names are dropped, or `None` when
/// there were none of those.
fn without_stale(
    records: &[ServerStorageVersion],
    stale: impl Fn(&ServerStorageVersion) -> bool,
) -> Option<Vec<ServerStorageVersion>> {
    let kept: Vec<ServerStorageVersion> = records.iter().filter(|r| !stale(r)).cloned().collect();
    (kept.len() != records.len()).then_some(kept)
}

impl Controller {
    fn on_lease(&self, change: &Change<Lease>) {
        let Change::Deleted(deleted) = change else {
            return;
        };
        let lease = deleted.object();
        if lease.metadata.namespace.as_deref() == Some(NAMESPACE) && is_identity_lease(lease) {
            if let Some(name) = &lease.metadata.name {
                debug!(controller = NAME, lease = %name, "observed an identity lease deleted");
                self.lease_queue.add(name.clone());
            }
        }
    }

    /// Queues a StorageVersion added or changed that lists a server whose identity Lease
    /// the cache does not hold.
    fn on_storage_version(&self, change: &Change<StorageVersion>) {
        let Some(storage_version) = change.live() else {
            return;
        };
        let unknown = storage_version
            .status
            .storage_versions
            .iter()
            .any(|record| {
                !self
                    .leases
                    .get_in(NAMESPACE, &record.api_server_id)
                    .is_some_and(|lease| is_identity_lease(&lease))
            });
        if unknown {
            if let Some(name) = &storage_version.metadata.name {
                debug!(controller = NAME, storage_version = %name, "observed a storage version with an invalid apiserver entry");
                self.storage_version_queue.add(name.clone());
            }
        }
    }

    async fn process_deleted_lease(&self, name: &str) -> anyhow::Result<()> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NAMESPACE);
        match leases.get(name).await {
            Ok(_) => return Ok(()),
            Err(e) if api_errors::is_not_found(&e) => {}
            Err(e) => return Err(e).with_context(|| format!("getting lease {name}")),
        }
        let api: Api<StorageVersion> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .context("listing storage versions")?;
        let mut errors = Vec::new();
        for mut storage_version in list.items {
            let Some(kept) = without_stale(&storage_version.status.storage_versions, |r| {
                r.api_server_id == name
            }) else {
                continue;
            };
            if let Err(e) = self.update_or_delete(&mut storage_version, kept).await {
                errors.push(format!("{e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("lease {name} failed with: [{}]", errors.join(", "))
        }
    }

    async fn sync_storage_version(&self, name: &str) -> anyhow::Result<()> {
        let api: Api<StorageVersion> = Api::all(self.client.clone());
        let mut storage_version = match api.get(name).await {
            Ok(sv) => sv,
            Err(e) if api_errors::is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("getting storage version {name}")),
        };
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NAMESPACE);
        let mut invalid = std::collections::BTreeSet::new();
        for record in &storage_version.status.storage_versions {
            // Any failure to read the Lease counts as no identity, as upstream has it.
            let valid = match leases.get(&record.api_server_id).await {
                Ok(lease) => is_identity_lease(&lease),
                Err(_) => false,
            };
            if !valid {
                invalid.insert(record.api_server_id.clone());
            }
        }
        let Some(kept) = without_stale(&storage_version.status.storage_versions, |r| {
            invalid.contains(&r.api_server_id)
        }) else {
            return Ok(());
        };
        self.update_or_delete(&mut storage_version, kept).await
    }

    /// `updateOrDeleteStorageVersion`.
    async fn update_or_delete(
        &self,
        storage_version: &mut StorageVersion,
        kept: Vec<ServerStorageVersion>,
    ) -> anyhow::Result<()> {
        let name = storage_version.name_str().to_string();
        let api: Api<StorageVersion> = Api::all(self.client.clone());
        if kept.is_empty() {
            return match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) => Err(e).with_context(|| format!("deleting storage version {name}")),
            };
        }
        storage_version.status.storage_versions = kept;
        let generation = storage_version.metadata.generation.unwrap_or(0);
        set_common_encoding_version(
            &mut storage_version.status,
            generation,
            &k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string(),
        );
        api.replace_status(&name, &PostParams::default(), &*storage_version)
            .await
            .with_context(|| format!("updating the status of storage version {name}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(namespace: &str, labels: serde_json::Value) -> Lease {
        serde_json::from_value(
            json!({"metadata": {"name": "apiserver-a", "namespace": namespace, "labels": labels}}),
        )
        .unwrap()
    }

    #[test]
    fn identity_leases_are_the_kube_apiservers() {
        assert!(is_identity_lease(&lease(
            "kube-system",
            json!({IDENTITY_LABEL: KUBE_APISERVER})
        )));
        assert!(!is_identity_lease(&lease(
            "kube-system",
            json!({IDENTITY_LABEL: "other"})
        )));
        assert!(!is_identity_lease(&lease("kube-system", json!({}))));
    }

    #[test]
    fn stale_records_are_dropped_and_reported() {
        let record = |id: &str| ServerStorageVersion {
            api_server_id: id.into(),
            ..Default::default()
        };
        let records = vec![record("a"), record("b")];
        assert_eq!(without_stale(&records, |r| r.api_server_id == "c"), None);
        assert_eq!(
            without_stale(&records, |r| r.api_server_id == "a"),
            Some(vec![record("b")])
        );
        assert_eq!(without_stale(&records, |_| true), Some(vec![]));
    }
}
