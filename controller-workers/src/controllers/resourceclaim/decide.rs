//! The controller's decisions, as plain functions of the objects (upstream's
//! `resourceclaim` helper package and the controller's own predicates).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::types::{
    ClaimPod, ConsumerReference, PodResourceClaim, ResourceClaim, ResourceClaimTemplate, TypeMeta,
};
use crate::meta::ResourceNames;

/// `resource.kubernetes.io/pod-claim-name`: which of its pod's claims a generated claim is.
pub(crate) const POD_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// Where the name of a pod's claim comes from (`resourceclaim.Name`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ClaimName {
    /// The claim is named; `check_owner`: it was generated for the pod, which must own it.
    Named { name: String, check_owner: bool },
    /// The pod's status records that no claim is needed (`resourceClaimName` unset).
    NotNeeded,
    /// Generated from a template, but not recorded in the pod's status yet.
    NotCreatedYet(String),
    /// Neither a claim nor a template is named.
    Unsupported(String),
}

pub(crate) fn claim_name(pod: &ClaimPod, claim: &PodResourceClaim) -> ClaimName {
    let (namespace, name) = namespace_name(&pod.metadata);
    if let Some(name) = &claim.source.resource_claim_name {
        return ClaimName::Named {
            name: name.clone(),
            check_owner: false,
        };
    }
    if claim.source.resource_claim_template_name.is_some() {
        return match pod
            .status
            .resource_claim_statuses
            .iter()
            .find(|status| status.name == claim.name)
        {
            Some(status) => match &status.resource_claim_name {
                Some(name) => ClaimName::Named {
                    name: name.clone(),
                    check_owner: true,
                },
                None => ClaimName::NotNeeded,
            },
            None => ClaimName::NotCreatedYet(format!(
                "pod \"{namespace}/{name}\": ResourceClaim not created yet"
            )),
        };
    }
    ClaimName::Unsupported(format!(
        "pod \"{namespace}/{name}\", spec.resourceClaim {:?}: none of the supported fields are set",
        claim.name
    ))
}

fn namespace_name(meta: &ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// `resourceclaim.IsForPod`: the claim is in the pod's namespace and the pod controls it.
pub(crate) fn is_for_pod(pod: &ClaimPod, claim: &ResourceClaim) -> Result<(), String> {
    let (pod_namespace, pod_name) = namespace_name(&pod.metadata);
    let (claim_namespace, claim_name) = namespace_name(&claim.metadata);
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.uid == pod_uid);
    if claim_namespace != pod_namespace || !controlled {
        return Err(format!(
            "ResourceClaim {claim_namespace}/{claim_name} was not created for pod {pod_namespace}/{pod_name} (pod is not owner)"
        ));
    }
    Ok(())
}

pub(crate) fn is_reserved_for_pod(pod: &ClaimPod, claim: &ResourceClaim) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    claim.status.reserved_for.iter().any(|r| r.uid == uid)
}

/// `resourceclaim.CanBeReserved`, for an allocated claim.
pub(crate) fn can_be_reserved(claim: &ResourceClaim) -> bool {
    claim
        .status
        .allocation
        .as_ref()
        .is_some_and(|allocation| allocation.shareable)
        || claim.status.reserved_for.is_empty()
}

fn is_terminal_phase(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

/// `podNeedsClaims`: false (with the reason) when the pod's claims are no longer needed.
pub(crate) fn pod_needs_claims(pod: &ClaimPod, deleted: bool) -> (bool, &'static str) {
    if deleted {
        return (false, "pod got removed");
    }
    if is_terminal_phase(&pod.status.phase) {
        return (false, "pod has terminated");
    }
    if pod.metadata.deletion_timestamp.is_some() && pod.spec.node_name.is_empty() {
        return (false, "pod got deleted before scheduling");
    }
    (true, "pod might run")
}

/// `isPodDone`: the pod will not use its claims any more.
pub(crate) fn is_pod_done(pod: &ClaimPod) -> bool {
    is_terminal_phase(&pod.status.phase)
        || pod.metadata.deletion_timestamp.is_some() && pod.spec.node_name.is_empty()
}

/// What the controller must do for one claim of a scheduled pod, given the claim (and,
/// for an unallocated delayed claim, the node its scheduling context selects).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScheduledClaim {
    Nothing,
    /// Create or update the pod's PodSchedulingContext so it selects the pod's node.
    EnsureSchedulingContext,
    /// Add the pod to the claim's `status.reservedFor`.
    Reserve,
}

pub(crate) fn scheduled_claim_work(pod: &ClaimPod, claim: &ResourceClaim) -> ScheduledClaim {
    if claim.spec.waits_for_first_consumer() && claim.status.allocation.is_none() {
        return ScheduledClaim::EnsureSchedulingContext;
    }
    if claim.status.allocation.is_some()
        && !is_reserved_for_pod(pod, claim)
        && can_be_reserved(claim)
    {
        return ScheduledClaim::Reserve;
    }
    ScheduledClaim::Nothing
}

/// The pod that controls a claim generated for it (`owningPod`): name and UID.
pub(crate) fn owning_pod(claim: &ResourceClaim) -> Option<(&str, &str)> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| is_pod_controller(owner))
        .map(|owner| (owner.name.as_str(), owner.uid.as_str()))
}

pub(crate) fn is_pod_controller(owner: &OwnerReference) -> bool {
    owner.controller == Some(true) && owner.api_version == "v1" && owner.kind == "Pod"
}

/// The `generateName` of a pod's claim: `<pod>-<claim>-`, both parts shortened in
/// proportion when that is longer than 57 bytes (room for five random characters).
pub(crate) fn generate_name(pod_name: &str, claim_name: &str) -> String {
    const MAX_BASE_LEN: usize = 57;
    let generate_name = format!("{pod_name}-{claim_name}-");
    let length = generate_name.len();
    if length <= MAX_BASE_LEN {
        return generate_name;
    }
    let cut = |text: &str| {
        let mut end = text.len() * MAX_BASE_LEN / length;
        // Names are DNS labels (ASCII); stay on a character boundary whatever they hold.
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    };
    format!("{}-{}", cut(pod_name), cut(claim_name))
}

/// The claim a pod gets from a template: the template's labels, annotations (plus the
/// pod-claim annotation) and spec, controlled by the pod.
pub(crate) fn claim_from_template(
    pod: &ClaimPod,
    pod_claim: &str,
    template: &ResourceClaimTemplate,
) -> ResourceClaim {
    let pod_name = pod.name_str().to_string();
    let mut annotations = template
        .spec
        .metadata
        .annotations
        .clone()
        .unwrap_or_default();
    annotations.insert(POD_CLAIM_ANNOTATION.into(), pod_claim.into());
    ResourceClaim {
        api_version: String::new(),
        kind: String::new(),
        metadata: ObjectMeta {
            generate_name: Some(generate_name(&pod_name, pod_claim)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            annotations: Some(annotations),
            labels: template.spec.metadata.labels.clone(),
            ..Default::default()
        },
        spec: template.spec.spec.clone(),
        status: Default::default(),
    }
    .with_type_meta()
}

/// Among the claims a pod controls, the one made for `pod_claim` (`findPodResourceClaim`):
/// annotated with its name, or, unannotated, named `<pod>-<claim>` as 1.27 named them.
pub(crate) fn find_generated<'a>(
    pod: &ClaimPod,
    pod_claim: &str,
    owned: impl IntoIterator<Item = &'a ResourceClaim>,
) -> Option<&'a ResourceClaim> {
    let deterministic = format!("{}-{pod_claim}", pod.name_str());
    owned.into_iter().find(|claim| {
        match claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_CLAIM_ANNOTATION))
        {
            Some(annotated) => annotated == pod_claim,
            None => claim.metadata.name.as_deref() == Some(deterministic.as_str()),
        }
    })
}

/// Whether a `reservedFor` entry for a pod is still valid, given what is known of the pod
/// of that name (`None`: it does not exist).
pub(crate) fn keep_reservation(
    entry: &ConsumerReference,
    recently_deleted: bool,
    pod: Option<&ClaimPod>,
) -> bool {
    if recently_deleted {
        return false;
    }
    match pod {
        None => false,
        Some(pod) if pod.metadata.uid.as_deref().unwrap_or_default() != entry.uid => false,
        Some(pod) => !is_pod_done(pod),
    }
}

/// A `reservedFor` entry this controller understands: a core-group pod.
pub(crate) fn is_pod_reservation(entry: &ConsumerReference) -> bool {
    entry.api_group.is_empty() && entry.resource == "pods"
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
