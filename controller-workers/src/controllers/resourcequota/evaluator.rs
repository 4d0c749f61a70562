//! What each kind of object is charged (upstream's `pkg/quota/v1/evaluator/core` and the
//! generic object-count evaluator of `apiserver/pkg/quota/v1/generic`):
//!
//! - pods: `pods`, `count/pods`, `cpu`/`requests.cpu`, `memory`/`requests.memory`,
//!   `ephemeral-storage`/`requests.ephemeral-storage`, `limits.*` of the three,
//!   `hugepages-*` and `requests.hugepages-*`, and `requests.<extended resource>`; from the
//!   pod's effective requests and limits (the larger of the containers' sum and the init
//!   containers' peak, sidecars counted in both, plus overhead). `count/pods` counts every
//!   stored pod, the rest only pods that still run: not Succeeded or Failed, and not past
//!   `deletionTimestamp` plus their grace period;
//! - services: `services`, `count/services`, `services.loadbalancers`, and
//!   `services.nodeports` (the ports of a NodePort or LoadBalancer Service, only those with
//!   a node port when a LoadBalancer does not allocate them);
//! - PersistentVolumeClaims: `persistentvolumeclaims`, `count/persistentvolumeclaims`,
//!   `requests.storage` (rounded up to whole bytes), and the same per storage class
//!   (`<class>.storageclass.storage.k8s.io/requests.storage`);
//! - anything else: `count/<resource>.<group>` (`count/<resource>` for the core group),
//!   plus the legacy names `configmaps`, `secrets`, `replicationcontrollers` and
//!   `resourcequotas` of four core kinds.
//!
//! Only the pod evaluator knows scopes ([`super::scopes`]): under a scoped quota the others
//! count nothing. Shared by the controller and the development cluster's quota admission
//! (which compiles this file too).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, Pod, ScopedResourceSelectorRequirement, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::resources::{self, ResourceList};
use super::scopes;
use rkcm_gocompat::quantity::{Format, Quantity};
use rkcm_gocompat::validation::is_qualified_name;

/// Resources quota never counts (upstream's `DefaultIgnoredResources`): virtual ones that
/// are not stored, and events.
pub const IGNORED: &[(&str, &str)] = &[
    ("", "bindings"),
    ("", "componentstatuses"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("", "events"),
    ("events.k8s.io", "events"),
];

const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The pod resources quota tracks by name.
const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
/// ... and by prefix.
const POD_RESOURCE_PREFIXES: &[&str] = &["hugepages-", "requests.hugepages-"];
/// Quota names a pod must request explicitly in every container when a quota tracks them
/// (a mistake upstream keeps for compatibility, and so do we).
const MUST_SPECIFY: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];
const SERVICE_RESOURCES: &[&str] = &[
    "count/services",
    "services",
    "services.nodeports",
    "services.loadbalancers",
];
const PVC_RESOURCES: &[&str] = &["persistentvolumeclaims", "requests.storage"];

/// The write an admission evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Pods,
    Services,
    PersistentVolumeClaims,
    /// Counts objects under these names.
    ObjectCount(Vec<String>),
}

/// The evaluator of one group/resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluator {
    pub group: String,
    pub resource: String,
    pub kind: Kind,
}

/// `count/<resource>[.<group>]`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

impl Evaluator {
    fn core(resource: &str, kind: Kind) -> Evaluator {
        Evaluator {
            group: String::new(),
            resource: resource.to_string(),
            kind,
        }
    }

    /// Counts objects of a resource (`count/...`, and a legacy alias if given).
    pub fn object_count(group: &str, resource: &str, alias: Option<&str>) -> Evaluator {
        let mut names = vec![object_count_name(group, resource)];
        names.extend(alias.map(str::to_string));
        Evaluator {
            group: group.to_string(),
            resource: resource.to_string(),
            kind: Kind::ObjectCount(names),
        }
    }

    /// The evaluators that exist before discovery (upstream's `core.NewEvaluators`).
    pub fn built_in() -> Vec<Evaluator> {
        vec![
            Evaluator::core("pods", Kind::Pods),
            Evaluator::core("services", Kind::Services),
            Evaluator::core("persistentvolumeclaims", Kind::PersistentVolumeClaims),
            Evaluator::object_count("", "configmaps", Some("configmaps")),
            Evaluator::object_count("", "resourcequotas", Some("resourcequotas")),
            Evaluator::object_count("", "replicationcontrollers", Some("replicationcontrollers")),
            Evaluator::object_count("", "secrets", Some("secrets")),
        ]
    }

    pub fn is(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }

    /// The names of `input` this evaluator measures (`MatchingResources`).
    pub fn matching_resources(&self, input: &[String]) -> Vec<String> {
        let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        match &self.kind {
            Kind::Pods => {
                let mut result = resources::intersection(input, &owned(POD_RESOURCES));
                for name in input {
                    if POD_RESOURCE_PREFIXES.iter().any(|p| name.starts_with(p)) {
                        result.push(name.clone());
                    }
                    if is_extended_resource_name_for_quota(name) {
                        result.push(name.clone());
                    }
                }
                result
            }
            Kind::Services => resources::intersection(input, &owned(SERVICE_RESOURCES)),
            Kind::PersistentVolumeClaims => {
                let count = object_count_name("", "persistentvolumeclaims");
                input
                    .iter()
                    .filter(|name| {
                        **name == count
                            || PVC_RESOURCES.contains(&name.as_str())
                            || PVC_RESOURCES.iter().any(|resource| {
                                name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{resource}"))
                            })
                    })
                    .cloned()
                    .collect()
            }
            Kind::ObjectCount(names) => resources::intersection(input, names),
        }
    }

    /// Whether an admission of this operation concerns this evaluator (`Handles`): pods
    /// and counted objects on create (in-place pod resize is off in 1.29), Services and
    /// PersistentVolumeClaims on create and update.
    pub fn handles(&self, operation: Operation) -> bool {
        match self.kind {
            Kind::Pods | Kind::ObjectCount(_) => operation == Operation::Create,
            Kind::Services | Kind::PersistentVolumeClaims => true,
        }
    }

    /// Whether an object falls under a scope requirement: only pods can.
    pub fn matches_scope(
        &self,
        requirement: &ScopedResourceSelectorRequirement,
        object: &Object<'_>,
    ) -> Result<bool, String> {
        match (&self.kind, object) {
            (Kind::Pods, Object::Pod(pod)) => scopes::pod_matches(requirement, pod),
            _ => Ok(false),
        }
    }

    /// Whether the object falls under every requirement (upstream's `Matches` without
    /// the resource check).
    pub fn matches_scopes(
        &self,
        requirements: &[ScopedResourceSelectorRequirement],
        object: &Object<'_>,
    ) -> Result<bool, String> {
        let mut all = true;
        for requirement in requirements {
            all &= self.matches_scope(requirement, object)?;
        }
        Ok(all)
    }

    /// What the object is charged (`Usage`).
    pub fn usage(&self, object: &Object<'_>, now: Timestamp) -> ResourceList {
        match (&self.kind, object) {
            (Kind::Pods, Object::Pod(pod)) => pod_usage(pod, now),
            (Kind::Services, Object::Service(service)) => service_usage(service),
            (Kind::PersistentVolumeClaims, Object::Claim(claim)) => claim_usage(claim),
            (Kind::ObjectCount(names), _) => names
                .iter()
                .map(|name| (name.clone(), Quantity::from_int(1, Format::DecimalSI)))
                .collect(),
            // An object of another kind than the evaluator's: nothing to charge.
            _ => ResourceList::new(),
        }
    }

    /// Whether the object satisfies what the quota's tracked names demand of it
    /// (`Constraints`): only pods must name cpu and memory in each container.
    pub fn constraints(&self, required: &[String], object: &Object<'_>) -> Result<(), String> {
        match (&self.kind, object) {
            (Kind::Pods, Object::Pod(pod)) => pod_constraints(required, pod),
            _ => Ok(()),
        }
    }
}

/// An object an evaluator reads.
pub enum Object<'a> {
    Pod(&'a Pod),
    Service(&'a Service),
    Claim(&'a PersistentVolumeClaim),
    /// Anything counted only.
    Other,
}

/// The usage of the objects that fall under the quota's scopes, for `names` (upstream's
/// `CalculateUsageStats`): every name starts at zero. A scope requirement that is not a
/// valid selector stops the count there, as upstream stops it (without an error).
pub fn usage_stats<'a>(
    evaluator: &Evaluator,
    names: &[String],
    requirements: &[ScopedResourceSelectorRequirement],
    objects: impl IntoIterator<Item = Object<'a>>,
    now: Timestamp,
) -> ResourceList {
    let mut used: ResourceList = names
        .iter()
        .map(|name| (name.clone(), Quantity::zero(Format::DecimalSI)))
        .collect();
    for object in objects {
        match evaluator.matches_scopes(requirements, &object) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => return used,
        }
        for (name, value) in evaluator.usage(&object, now) {
            if let Some(sum) = used.get_mut(&name) {
                sum.add(&value);
            }
        }
    }
    used
}

/// A name that quota tracks as an extended resource request (`requests.<domain>/<name>`
/// outside `kubernetes.io`).
fn is_extended_resource_name_for_quota(name: &str) -> bool {
    !is_native_resource(name) && name.starts_with("requests.")
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// An extended resource a container may request (`example.com/gpu`), whose quota name
/// `requests.example.com/gpu` is a qualified name.
fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}")).is_empty()
}

fn parse_list(list: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    // Entries that are not quantities cannot have been stored by an API server; charge
    // nothing for them.
    resources::parse(list).0
}

/// `list += other`, each new entry copied (upstream's `addResourceList`).
fn add_resource_list(list: &mut ResourceList, other: &ResourceList) {
    resources::add_into(list, other);
}

/// `list = max(list, other)` name by name (upstream's `maxResourceList`).
fn max_resource_list(list: &mut ResourceList, other: &ResourceList) {
    for (name, value) in other {
        match list.get(name) {
            Some(existing) if value.cmp_value(existing).is_le() => {}
            _ => {
                list.insert(name.clone(), value.clone());
            }
        }
    }
}

fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The pod's effective requests (upstream's `PodRequests`) or limits (`PodLimits`).
fn pod_amounts(pod: &Pod, limits: bool) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceList::new();
    };
    let amounts = |container: &Container| {
        parse_list(container.resources.as_ref().and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        }))
    };
    let mut total = ResourceList::new();
    for container in &spec.containers {
        add_resource_list(&mut total, &amounts(container));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for container in spec.init_containers.iter().flatten() {
        let own = amounts(container);
        let running = if is_sidecar(container) {
            add_resource_list(&mut total, &own);
            add_resource_list(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut running = ResourceList::new();
            add_resource_list(&mut running, &own);
            add_resource_list(&mut running, &sidecars);
            running
        };
        max_resource_list(&mut init_peak, &running);
    }
    max_resource_list(&mut total, &init_peak);
    let overhead = parse_list(spec.overhead.as_ref());
    if limits {
        // Overhead only raises limits that are set.
        for (name, value) in &overhead {
            if let Some(limit) = total.get_mut(name).filter(|limit| !limit.is_zero()) {
                limit.add(value);
            }
        }
    } else {
        add_resource_list(&mut total, &overhead);
    }
    total
}

/// Whether the pod still counts against compute quota (upstream's `QuotaV1Pod`): it has
/// not finished, and is not past its deletion time plus its grace period (a pod stuck
/// terminating on a lost node must not block its replacement).
pub fn pod_is_chargeable(pod: &Pod, now: Timestamp) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    if let (Some(deletion), Some(grace)) = (
        pod.metadata.deletion_timestamp.as_ref(),
        pod.metadata.deletion_grace_period_seconds,
    ) {
        let deadline = deletion.0.checked_add(SignedDuration::from_secs(grace));
        if deadline.is_ok_and(|deadline| now > deadline) {
            return false;
        }
    }
    true
}

/// What a pod is charged (upstream's `PodUsageFunc`).
pub fn pod_usage(pod: &Pod, now: Timestamp) -> ResourceList {
    let mut usage = ResourceList::new();
    usage.insert(
        object_count_name("", "pods"),
        Quantity::from_int(1, Format::DecimalSI),
    );
    if !pod_is_chargeable(pod, now) {
        return usage;
    }
    resources::add(&usage, &pod_compute_usage(pod))
}

/// What a running pod is charged besides its count: `pods` and the quota names of its
/// effective requests and limits (it depends on the pod's spec only).
pub fn pod_compute_usage(pod: &Pod) -> ResourceList {
    compute_usage(&pod_amounts(pod, false), &pod_amounts(pod, true))
}

/// The quota names of a set of requests and limits (upstream's
/// `podComputeUsageHelper`).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::new();
    let one = Quantity::parse("1").unwrap_or_else(|_| Quantity::from_int(1, Format::DecimalSI));
    usage.insert("pods".into(), one);
    for (resource, names) in [
        ("cpu", ["cpu", "requests.cpu"]),
        ("memory", ["memory", "requests.memory"]),
        (
            "ephemeral-storage",
            ["ephemeral-storage", "requests.ephemeral-storage"],
        ),
    ] {
        if let Some(request) = requests.get(resource) {
            for name in names {
                usage.insert(name.into(), request.clone());
            }
        }
        if let Some(limit) = limits.get(resource) {
            usage.insert(format!("limits.{resource}"), limit.clone());
        }
    }
    for (resource, request) in requests {
        if resource.starts_with("hugepages-") {
            usage.insert(resource.clone(), request.clone());
            usage.insert(format!("requests.{resource}"), request.clone());
        }
        if is_extended_resource_name(resource) {
            usage.insert(format!("requests.{resource}"), request.clone());
        }
    }
    usage
}

/// Every container (and init container) names each tracked cpu and memory quota name,
/// else `must specify limits.cpu for: a,b; requests.memory for: b` (upstream's pod
/// `Constraints`).
pub fn pod_constraints(required: &[String], pod: &Pod) -> Result<(), String> {
    let required: Vec<&str> = MUST_SPECIFY
        .iter()
        .copied()
        .filter(|name| required.iter().any(|r| r == name))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    for container in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let resources = container.resources.as_ref();
        let usage = compute_usage(
            &parse_list(resources.and_then(|r| r.requests.as_ref())),
            &parse_list(resources.and_then(|r| r.limits.as_ref())),
        );
        for name in &required {
            if !usage.contains_key(*name) {
                missing.entry(name).or_default().insert(&container.name);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(name, containers)| {
            format!(
                "{name} for: {}",
                containers.iter().copied().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// A Service's type as quota tells them apart (upstream's `GetQuotaServiceType`):
/// NodePort, LoadBalancer, or neither.
pub fn service_quota_type(service: &Service) -> &str {
    let kind = service
        .spec
        .as_ref()
        .and_then(|spec| spec.type_.as_deref())
        .unwrap_or_default();
    if matches!(kind, "NodePort" | "LoadBalancer") {
        kind
    } else {
        ""
    }
}

/// What a Service is charged.
pub fn service_usage(service: &Service) -> ResourceList {
    let spec = service.spec.as_ref();
    let ports = spec.and_then(|spec| spec.ports.as_ref());
    let port_count = ports.map_or(0, Vec::len);
    let count =
        |n: usize| Quantity::from_int(i64::try_from(n).unwrap_or(i64::MAX), Format::DecimalSI);
    let mut usage = ResourceList::new();
    usage.insert(object_count_name("", "services"), count(1));
    usage.insert("services".into(), count(1));
    usage.insert(
        "services.loadbalancers".into(),
        Quantity::zero(Format::DecimalSI),
    );
    usage.insert(
        "services.nodeports".into(),
        Quantity::zero(Format::DecimalSI),
    );
    match service_quota_type(service) {
        "NodePort" => {
            usage.insert("services.nodeports".into(), count(port_count));
        }
        "LoadBalancer" => {
            let allocates = spec
                .and_then(|spec| spec.allocate_load_balancer_node_ports)
                .unwrap_or(true);
            let node_ports = if allocates {
                port_count
            } else {
                ports
                    .into_iter()
                    .flatten()
                    .filter(|port| port.node_port.is_some_and(|p| p != 0))
                    .count()
            };
            usage.insert("services.nodeports".into(), count(node_ports));
            usage.insert("services.loadbalancers".into(), count(1));
        }
        _ => {}
    }
    usage
}

/// The claim's storage class: the beta annotation first, then `spec.storageClassName`.
fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class;
    }
    claim
        .spec
        .as_ref()
        .and_then(|spec| spec.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// What a PersistentVolumeClaim is charged. Storage is its request, rounded up to whole
/// bytes; `status.allocatedResources` counts only with RecoverVolumeExpansionFailure,
/// alpha and off in 1.29.
pub fn claim_usage(claim: &PersistentVolumeClaim) -> ResourceList {
    let one = || Quantity::from_int(1, Format::DecimalSI);
    let mut usage = ResourceList::new();
    usage.insert("persistentvolumeclaims".into(), one());
    usage.insert(object_count_name("", "persistentvolumeclaims"), one());
    let class = claim_class(claim);
    if !class.is_empty() {
        usage.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            one(),
        );
    }
    let request = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.resources.as_ref())
        .and_then(|resources| resources.requests.as_ref())
        .and_then(|requests| requests.get("storage"))
        .and_then(|storage| Quantity::from_api(&storage.0).ok());
    if let Some(request) = request {
        let (rounded, exact) = request.round_up_to_units();
        let storage = if exact { request } else { rounded };
        if !class.is_empty() {
            usage.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage.clone(),
            );
        }
        usage.insert("requests.storage".into(), storage);
    }
    usage
}

/// Whether a pod update can lower a quota's usage (upstream's update filter): it stopped
/// being chargeable.
pub fn pod_update_matters(old: &Pod, new: &Pod, now: Timestamp) -> bool {
    pod_is_chargeable(old, now) && !pod_is_chargeable(new, now)
}

/// Whether a Service update changes its quota type.
pub fn service_update_matters(old: &Service, new: &Service) -> bool {
    service_quota_type(old) != service_quota_type(new)
}

#[cfg(test)]
#[path = "evaluator_tests.rs"]
mod tests;
