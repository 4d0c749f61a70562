//! certificatesigningrequest-approving-controller (upstream `approver/sarapprove.go`): a
//! certificate controller (`csrapproving`, 5 workers) that approves kubelet client
//! requests whose requester may ask for them, and nothing else.
//!
//! A pending request (no Approved or Denied condition) for
//! `kubernetes.io/kube-apiserver-client-kubelet` that passes the kubelet client rules is
//! recognized as a *self* node client request when its requester is the node it names
//! (`spec.username` is the subject's CN), then as a node client request. For each way it
//! is recognized, in that order, a SubjectAccessReview asks whether the requester (user,
//! UID, groups and extra of the request's spec) may `create`
//! `certificates.k8s.io/certificatesigningrequests/selfnodeclient` (then `nodeclient`);
//! the first allowed one approves it through `/approval` (reason `AutoApproved`). A
//! request recognized but not allowed is retried with the queue's backoff; it stays
//! pending.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use kube::api::{Api, PostParams};
use tracing::debug;

use super::csr::{self, ParsedCsr};
use super::{
    approval_state, certificate_controller, is_issued, APPROVED, APPROVING_NAME,
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
};
use crate::controller::{ControllerContext, Ignorable, Runnable};
use crate::meta::ResourceNames;

/// Upstream starts it with 5 workers.
const WORKERS: usize = 5;

/// One way a request may be recognized, the permission it then needs and the message of
/// its approval.
#[derive(Debug)]
pub(crate) struct Recognizer {
    recognize: fn(&CertificateSigningRequest, &ParsedCsr) -> bool,
    pub subresource: &'static str,
    pub message: &'static str,
}

pub(crate) const RECOGNIZERS: [Recognizer; 2] = [
    Recognizer {
        recognize: is_self_node_client,
        subresource: "selfnodeclient",
        message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
    },
    Recognizer {
        recognize: is_node_client,
        subresource: "nodeclient",
        message: "Auto approving kubelet client certificate after SubjectAccessReview.",
    },
];

fn is_node_client(csr: &CertificateSigningRequest, parsed: &ParsedCsr) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET_SIGNER
        && csr::validate_kubelet_client(
            parsed,
            &csr::usage_set(csr.spec.usages.as_deref().unwrap_or_default()),
        )
        .is_ok()
}

fn is_self_node_client(csr: &CertificateSigningRequest, parsed: &ParsedCsr) -> bool {
    csr.spec.username.as_deref().unwrap_or("") == parsed.common_name()
        && is_node_client(csr, parsed)
}

/// The ways this request is recognized, in the order they are tried.
pub(crate) fn recognized(
    csr: &CertificateSigningRequest,
    parsed: &ParsedCsr,
) -> Vec<&'static Recognizer> {
    RECOGNIZERS
        .iter()
        .filter(|recognizer| (recognizer.recognize)(csr, parsed))
        .collect()
}

/// The review asking whether the requester may create this subresource.
pub(crate) fn access_review(
    csr: &CertificateSigningRequest,
    subresource: &str,
) -> SubjectAccessReview {
    let spec = &csr.spec;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: spec.username.clone(),
            uid: spec.uid.clone(),
            groups: spec.groups.clone(),
            extra: spec
                .extra
                .clone()
                .map(|extra| extra.into_iter().collect::<BTreeMap<_, _>>()),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                subresource: Some(subresource.into()),
                verb: Some("create".into()),
                version: Some("*".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The request with its approval appended (no timestamps: the API server sets them).
pub(crate) fn approved(
    mut csr: CertificateSigningRequest,
    message: &str,
) -> CertificateSigningRequest {
    csr.status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: APPROVED.into(),
            status: "True".into(),
            reason: Some("AutoApproved".into()),
            message: Some(message.into()),
            ..Default::default()
        });
    csr
}

struct Approver {
    client: kube::Client,
}

pub(crate) fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let approver = Arc::new(Approver {
        client: context.clients.client(APPROVING_NAME)?,
    });
    Ok(certificate_controller(
        context,
        APPROVING_NAME,
        "csrapproving",
        WORKERS,
        move |csr| {
            let approver = approver.clone();
            async move { approver.handle(csr).await }
        },
    ))
}

impl Approver {
    async fn handle(&self, csr: CertificateSigningRequest) -> anyhow::Result<()> {
        if is_issued(&csr) {
            return Ok(());
        }
        let (is_approved, is_denied) = approval_state(&csr);
        if is_approved || is_denied {
            return Ok(());
        }
        let name = csr.name_str().to_string();
        let parsed = csr::parse(&csr.spec.request.0)
            .map_err(|e| anyhow::anyhow!("unable to parse csr {name:?}: {e}"))?;
        let mut tried = Vec::new();
        for recognizer in recognized(&csr, &parsed) {
            tried.push(recognizer.subresource);
            if self.authorize(&csr, recognizer.subresource).await? {
                let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
                api.replace_subresource(
                    "approval",
                    &name,
                    &PostParams::default(),
                    &approved(csr, recognizer.message),
                )
                .await
                .context("error updating approval for csr")?;
                debug!(controller = APPROVING_NAME, csr = %name, permission = recognizer.subresource, "approved the request");
                return Ok(());
            }
        }
        if !tried.is_empty() {
            return Err(Ignorable(format!(
                "recognized csr {name:?} as [{}] but subject access review was not approved",
                tried.join(" ")
            ))
            .into());
        }
        Ok(())
    }

    async fn authorize(
        &self,
        csr: &CertificateSigningRequest,
        subresource: &str,
    ) -> anyhow::Result<bool> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = reviews
            .create(&PostParams::default(), &access_review(csr, subresource))
            .await
            .context("creating a SubjectAccessReview")?;
        Ok(review.status.is_some_and(|status| status.allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::certificates::csr::tests::request_pem;
    use crate::controllers::certificates::testing::request;
    use crate::controllers::certificates::{KUBELET_SERVING_SIGNER, KUBE_APISERVER_CLIENT_SIGNER};

    fn node_request(
        cn: &str,
        signer: &str,
        usages: &[&str],
        username: &str,
    ) -> (CertificateSigningRequest, ParsedCsr) {
        let pem = request_pem(
            &[
                (rcgen::DnType::CommonName, cn),
                (rcgen::DnType::OrganizationName, "system:nodes"),
            ],
            &[],
        );
        let mut csr = request(signer, pem.as_bytes(), usages, &[]);
        csr.spec.username = Some(username.into());
        let parsed = csr::parse(pem.as_bytes()).unwrap();
        (csr, parsed)
    }

    fn subresources(csr: &CertificateSigningRequest, parsed: &ParsedCsr) -> Vec<&'static str> {
        recognized(csr, parsed)
            .iter()
            .map(|r| r.subresource)
            .collect()
    }

    #[test]
    fn only_kubelet_client_requests_are_recognized() {
        let usages = ["digital signature", "client auth"];
        let (csr, parsed) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &usages,
            "system:node:n1",
        );
        assert_eq!(
            subresources(&csr, &parsed),
            ["selfnodeclient", "nodeclient"]
        );
        let (csr, parsed) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &usages,
            "kubernetes-admin",
        );
        assert_eq!(subresources(&csr, &parsed), ["nodeclient"]);
        let (csr, parsed) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &["client auth"],
            "system:node:n1",
        );
        assert!(subresources(&csr, &parsed).is_empty(), "wrong usages");
        let (csr, parsed) = node_request(
            "system:node:n1",
            KUBELET_SERVING_SIGNER,
            &["digital signature", "server auth"],
            "system:node:n1",
        );
        assert!(
            subresources(&csr, &parsed).is_empty(),
            "serving requests are never approved"
        );
        let (csr, parsed) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_SIGNER,
            &usages,
            "system:node:n1",
        );
        assert!(subresources(&csr, &parsed).is_empty());
        let (csr, parsed) = node_request(
            "alice",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &usages,
            "alice",
        );
        assert!(subresources(&csr, &parsed).is_empty(), "not a node");
    }

    #[test]
    fn the_review_carries_the_requester_and_the_permission() {
        let (mut csr, _) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &[],
            "system:node:n1",
        );
        csr.spec.uid = Some("u-1".into());
        csr.spec.groups = Some(vec!["system:nodes".into(), "system:authenticated".into()]);
        csr.spec.extra = Some(BTreeMap::from([(
            "scopes".to_string(),
            vec!["a".to_string()],
        )]));
        let review = serde_json::to_value(access_review(&csr, "selfnodeclient")).unwrap();
        assert_eq!(
            review["spec"],
            serde_json::json!({
                "user": "system:node:n1",
                "uid": "u-1",
                "groups": ["system:nodes", "system:authenticated"],
                "extra": {"scopes": ["a"]},
                "resourceAttributes": {
                    "group": "certificates.k8s.io",
                    "resource": "certificatesigningrequests",
                    "subresource": "selfnodeclient",
                    "verb": "create",
                    "version": "*",
                }
            })
        );
    }

    #[test]
    fn the_approval_is_appended_without_timestamps() {
        let (csr, _) = node_request(
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            &[],
            "x",
        );
        let approved = approved(csr, RECOGNIZERS[1].message);
        let condition = &approved.status.unwrap().conditions.unwrap()[0];
        assert_eq!(condition.type_, "Approved");
        assert_eq!(condition.status, "True");
        assert_eq!(condition.reason.as_deref(), Some("AutoApproved"));
        assert_eq!(
            condition.message.as_deref(),
            Some("Auto approving kubelet client certificate after SubjectAccessReview.")
        );
        assert!(condition.last_update_time.is_none());
    }
}
