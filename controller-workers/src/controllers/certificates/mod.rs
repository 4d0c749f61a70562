//! The CertificateSigningRequest controllers (upstream `pkg/controller/certificates`):
//! [`signer`] (certificatesigningrequest-signing-controller: one loop per kubernetes.io
//! signer, issuing certificates from the cluster CA), [`approver`]
//! (certificatesigningrequest-approving-controller: kubelet client requests approved after
//! a SubjectAccessReview) and [`cleaner`] (certificatesigningrequest-cleaner-controller:
//! old requests deleted every hour).
//!
//! The signing loops and the approver are each a *certificate controller*, the shape
//! upstream's `CertificateController` gives them: every addition, update and deletion of a
//! CSR puts its name on a queue named `certificate` (200 ms doubling to 1000 s per item,
//! 10 qps with a burst of 100 overall, retried for ever); a worker takes the request from
//! the store and, unless it already carries a certificate, hands a copy to the loop's
//! handler. [`csr`] parses the PEM request the way Go's `x509.ParseCertificateRequest`
//! reads it, with the kubelet request rules both the signer and the approver apply.
//!
//! All three use the client `certificate-controller`. No events, no metrics beyond the
//! work queues.

pub mod approver;
pub mod cleaner;
pub(crate) mod csr;
pub mod signer;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::queue::WorkQueue;
use crate::rate_limiter::{Bucket, ItemExponentialFailure, MaxOf};
use crate::store::Store;

pub use signer::Options as SigningOptions;

pub const SIGNING_NAME: &str = "certificatesigningrequest-signing-controller";
pub const APPROVING_NAME: &str = "certificatesigningrequest-approving-controller";
pub const CLEANER_NAME: &str = "certificatesigningrequest-cleaner-controller";
/// The resources their informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["certificates.k8s.io/v1/certificatesigningrequests"];
/// The name of every certificate controller's queue (the `name` label of its metrics).
pub const QUEUE: &str = "certificate";

pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

pub(crate) const APPROVED: &str = "Approved";
pub(crate) const DENIED: &str = "Denied";
pub(crate) const FAILED: &str = "Failed";

/// The conditions of a request, none when it has no status.
pub(crate) fn conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default()
}

/// Whether it has an Approved and a Denied condition (whatever their status, as upstream's
/// `GetCertApprovalCondition` reads them).
pub(crate) fn approval_state(csr: &CertificateSigningRequest) -> (bool, bool) {
    let conditions = conditions(csr);
    (
        conditions.iter().any(|c| c.type_ == APPROVED),
        conditions.iter().any(|c| c.type_ == DENIED),
    )
}

/// Approved and not denied.
pub(crate) fn is_approved(csr: &CertificateSigningRequest) -> bool {
    let (approved, denied) = approval_state(csr);
    approved && !denied
}

/// A condition of this type whose status is `True` or empty.
pub(crate) fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    conditions(csr)
        .iter()
        .any(|c| c.type_ == type_ && (c.status.is_empty() || c.status == "True"))
}

/// Whether the request already holds a certificate.
pub(crate) fn is_issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|status| status.certificate.as_ref())
        .is_some_and(|certificate| !certificate.0.is_empty())
}

/// The queue every certificate controller uses: upstream's own rate limiter, not the
/// default one (a failing request backs off from 200 ms, not 5 ms).
fn certificate_queue(context: &ControllerContext) -> Arc<WorkQueue<String>> {
    WorkQueue::with_rate_limiter(
        QUEUE,
        Box::new(MaxOf::new(vec![
            Box::new(ItemExponentialFailure::new(
                Duration::from_millis(200),
                Duration::from_secs(1000),
            )),
            Box::new(Bucket::new(10.0, 100)),
        ])),
        Some(context.metrics.workqueue.for_queue(QUEUE)),
    )
}

/// A certificate controller: `handler` gets a copy of each queued request that still has
/// no certificate. `name` is the registry's name of the controller it belongs to (its
/// client and credentials); `loop_name` is upstream's name of this loop, for the logs.
pub(crate) fn certificate_controller<H, Fut>(
    context: &ControllerContext,
    name: &'static str,
    loop_name: &'static str,
    workers: usize,
    handler: H,
) -> Runnable
where
    H: Fn(CertificateSigningRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let queue = certificate_queue(context);
    let informer = context.informers.get::<CertificateSigningRequest>();
    {
        let queue = queue.clone();
        informer.add_handler(Arc::new(
            move |change: &Change<CertificateSigningRequest>| {
                if let Some(name) = &change.latest().metadata.name {
                    queue.add(name.clone());
                }
            },
        ));
    }
    let controller = Arc::new(CertificateController {
        loop_name,
        requests: informer.store().clone(),
        handler,
    });
    Runnable::new(
        name,
        queue,
        workers,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    )
}

struct CertificateController<H> {
    loop_name: &'static str,
    requests: Store<CertificateSigningRequest>,
    handler: H,
}

impl<H, Fut> CertificateController<H>
where
    H: Fn(CertificateSigningRequest) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    async fn sync(&self, name: &str) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let result = match self.requests.get(name) {
            None => {
                debug!(
                    controller = self.loop_name,
                    csr = name,
                    "csr has been deleted"
                );
                Ok(())
            }
            Some(csr) if is_issued(&csr) => Ok(()),
            Some(csr) => (self.handler)((*csr).clone()).await,
        };
        debug!(controller = self.loop_name, csr = name, elapsed = ?started.elapsed(), "finished syncing certificate request");
        result
    }
}

/// Builds the approving controller.
pub fn build_approving(context: &ControllerContext) -> anyhow::Result<Runnable> {
    approver::build(context)
}

/// Builds the cleaner.
pub fn build_cleaner(context: &ControllerContext) -> anyhow::Result<Runnable> {
    cleaner::build(context)
}

/// Builds the signing loops (none when no CA is configured).
pub fn build_signing(
    context: &ControllerContext,
    options: &SigningOptions,
) -> anyhow::Result<Vec<Runnable>> {
    signer::build(context, options)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Requests for the controllers' tests.

    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestCondition,
        CertificateSigningRequestSpec, CertificateSigningRequestStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::ByteString;

    pub(crate) fn request(
        signer: &str,
        pem: &[u8],
        usages: &[&str],
        conditions: &[(&str, Option<jiff::Timestamp>)],
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some("csr-1".into()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                signer_name: signer.into(),
                request: ByteString(pem.to_vec()),
                usages: Some(usages.iter().map(|u| u.to_string()).collect()),
                ..Default::default()
            },
            status: Some(CertificateSigningRequestStatus {
                certificate: None,
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(type_, updated)| CertificateSigningRequestCondition {
                            type_: type_.to_string(),
                            status: "True".into(),
                            last_update_time: updated.map(Time),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::request;
    use super::*;

    #[test]
    fn approval_reads_condition_types_as_upstream() {
        let csr = |conditions: &[(&str, Option<jiff::Timestamp>)]| {
            request(KUBELET_SERVING_SIGNER, b"", &[], conditions)
        };
        assert!(!is_approved(&csr(&[])));
        assert!(is_approved(&csr(&[(APPROVED, None)])));
        assert!(!is_approved(&csr(&[(APPROVED, None), (DENIED, None)])));
        assert_eq!(approval_state(&csr(&[(DENIED, None)])), (false, true));
        assert!(has_true_condition(&csr(&[(FAILED, None)]), FAILED));
        let mut failed_false = csr(&[(FAILED, None)]);
        if let Some(c) = failed_false
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            c[0].status = "False".into();
        }
        assert!(!has_true_condition(&failed_false, FAILED));
        let mut empty_status = csr(&[(FAILED, None)]);
        if let Some(c) = empty_status
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            c[0].status = String::new();
        }
        assert!(
            has_true_condition(&empty_status, FAILED),
            "empty counts as true"
        );
        assert!(!is_issued(&csr(&[])));
    }
}
