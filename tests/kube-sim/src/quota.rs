//! kube-apiserver's ResourceQuota admission (`apiserver/pkg/admission/plugin/resourcequota`):
//! a create (or an update of a Service or PersistentVolumeClaim) in a namespace with quotas
//! is measured by the same evaluators the controller uses, then:
//!
//! - refused with 403 `failed quota: NAME: must specify ...` when a quota tracks cpu or
//!   memory and a container does not name it;
//! - refused with 403 `status unknown for quota: NAME, resources: ...` when a quota that
//!   covers the object has no usage yet for a name it tracks (its controller has not
//!   computed it);
//! - refused with 403 `exceeded quota: NAME, requested: ..., used: ..., limited: ...` when
//!   it would take a quota's usage past `status.hard`;
//! - otherwise allowed, and the new usage written to each quota it counts against
//!   (`resourcequotas/status`, as the API server's own client, field manager
//!   `kube-apiserver`) in the same store transaction as the object: the controller later
//!   recomputes it. A dry run is refused the same way and charges nothing.
//!
//! Only quotas whose `status.hard` names something the object uses count: a quota its
//! controller has not seen yet limits nothing, as on a real server. The evaluators, the
//! resource-list arithmetic are the controller's own files
//! (`controller-workers/src/controllers/resourcequota/`), compiled here too, as kube-apiserver
//! and kube-controller-manager share `pkg/quota/v1`; the quantities are the one
//! `rkcm_gocompat::quantity`. Not done: the plugin's admission configuration (`limitedResources`),
//! which kube-sim does not take.

#[path = "../../../controller-workers/src/controllers/resourcequota/evaluator.rs"]
pub mod evaluator;
#[path = "../../../controller-workers/src/controllers/resourcequota/resources.rs"]
pub mod resources;
#[path = "../../../controller-workers/src/controllers/resourcequota/scopes.rs"]
pub mod scopes;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use serde_json::Value;

use self::evaluator::{Evaluator, Object, Operation};
use self::resources::ResourceList;
use crate::managed_fields;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::{ResKey, Txn};

/// A decoded object, owned, for the evaluators to borrow.
enum Typed {
    Pod(Box<Pod>),
    Service(Box<Service>),
    Claim(Box<PersistentVolumeClaim>),
    Other,
}

impl Typed {
    fn decode(evaluator: &Evaluator, object: &Value) -> Option<Typed> {
        let typed = match evaluator.kind {
            evaluator::Kind::Pods => Typed::Pod(serde_json::from_value(object.clone()).ok()?),
            evaluator::Kind::Services => {
                Typed::Service(serde_json::from_value(object.clone()).ok()?)
            }
            evaluator::Kind::PersistentVolumeClaims => {
                Typed::Claim(serde_json::from_value(object.clone()).ok()?)
            }
            evaluator::Kind::ObjectCount(_) => Typed::Other,
        };
        Some(typed)
    }

    fn object(&self) -> Object<'_> {
        match self {
            Typed::Pod(pod) => Object::Pod(pod),
            Typed::Service(service) => Object::Service(service),
            Typed::Claim(claim) => Object::Claim(claim),
            Typed::Other => Object::Other,
        }
    }
}

/// One quota as admission reads it.
struct Quota {
    stored: std::sync::Arc<Value>,
    name: String,
    typed: ResourceQuota,
    hard: ResourceList,
    used: ResourceList,
}

fn quotas_of(t: &Txn, namespace: &str) -> Vec<Quota> {
    t.range(&ResKey::new("", "resourcequotas"), Some(namespace), None)
        .filter_map(|(_, stored)| {
            let typed: ResourceQuota = serde_json::from_value((**stored).clone()).ok()?;
            let status = typed.status.as_ref();
            Some(Quota {
                stored: stored.clone(),
                name: typed.metadata.name.clone().unwrap_or_default(),
                hard: resources::parse(status.and_then(|s| s.hard.as_ref())).0,
                used: resources::parse(status.and_then(|s| s.used.as_ref())).0,
                typed,
            })
        })
        .collect()
}

/// The evaluator of a resource: a built-in one, else an object count (upstream adds one
/// on the fly).
fn evaluator_for(group: &str, resource: &str) -> Evaluator {
    Evaluator::built_in()
        .into_iter()
        .find(|e| e.is(group, resource))
        .unwrap_or_else(|| Evaluator::object_count(group, resource, None))
}

/// Admits a write of `object` (`old`: the stored object, for an update) in `namespace`,
/// charging the quotas it counts against unless it is a dry run (see the module
/// documentation). Called with the store locked, after validation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn admit(
    t: &mut Txn,
    def: &ResourceDef,
    namespace: &str,
    operation: Operation,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> ApiResult<()> {
    if namespace.is_empty()
        || !def.namespaced
        || evaluator::IGNORED.contains(&(def.group.as_str(), def.resource.as_str()))
    {
        return Ok(());
    }
    let evaluator = evaluator_for(&def.group, &def.resource);
    if !evaluator.handles(operation) {
        return Ok(());
    }
    let mut quotas = quotas_of(t, namespace);
    if quotas.is_empty() {
        return Ok(());
    }
    let Some(typed) = Typed::decode(&evaluator, object) else {
        // Validation passed it, so it decodes; an object that does not is not measured.
        return Ok(());
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let forbidden =
        |why: String| ApiError::forbidden(Subject::new(&def.group, &def.resource, name), &why);
    let item = typed.object();
    let now = k8s_openapi::jiff::Timestamp::now();

    // The quotas that cover the object, each with the usage it must have.
    let mut covering = Vec::new();
    for (index, quota) in quotas.iter().enumerate() {
        let hard_names = resources::names(&quota.hard);
        if evaluator.matching_resources(&hard_names).is_empty() {
            continue;
        }
        let in_scope = evaluator
            .matches_scopes(&scopes::of_quota(&quota.typed), &item)
            .map_err(|e| ApiError::new(500, "", e))?;
        if !in_scope {
            continue;
        }
        let restricted = evaluator.matching_resources(&hard_names);
        evaluator
            .constraints(&restricted, &item)
            .map_err(|e| forbidden(format!("failed quota: {}: {e}", quota.name)))?;
        if restricted.iter().any(|name| !quota.used.contains_key(name)) {
            return Err(forbidden(format!(
                "status unknown for quota: {}, resources: {}",
                quota.name,
                resources::pretty_print_names(&restricted)
            )));
        }
        covering.push(index);
    }

    let mut delta = evaluator.usage(&item, now);
    let negative = resources::negative(&delta);
    if !negative.is_empty() {
        return Err(forbidden(format!(
            "quota usage is negative for resource(s): {}",
            resources::pretty_print_names(&negative)
        )));
    }
    if operation == Operation::Update {
        // Charged the difference with the stored object (never below zero).
        if let Some(old) = old.filter(|o| o["metadata"]["resourceVersion"].is_string()) {
            if let Some(previous) = Typed::decode(&evaluator, old) {
                let previous = evaluator.usage(&previous.object(), now);
                delta = resources::subtract_non_negative(&delta, &previous);
            }
        }
    }
    let delta = resources::remove_zeros(&delta);
    if delta.is_empty() || covering.is_empty() {
        return Ok(());
    }

    let mut charged = Vec::new();
    for index in covering {
        let quota = &mut quotas[index];
        let requested = resources::mask(&delta, &resources::names(&quota.hard));
        let new_usage = resources::add(&quota.used, &requested);
        let compared = resources::mask(&new_usage, &resources::names(&requested));
        let (fits, exceeded) = resources::less_than_or_equal(&compared, &quota.hard);
        if !fits {
            return Err(forbidden(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                quota.name,
                resources::pretty_print(&resources::mask(&requested, &exceeded)),
                resources::pretty_print(&resources::mask(&quota.used, &exceeded)),
                resources::pretty_print(&resources::mask(&quota.hard, &exceeded)),
            )));
        }
        if !resources::equals(&new_usage, &quota.used) {
            quota.used = new_usage;
            charged.push(index);
        }
    }
    if dry_run {
        return Ok(());
    }
    for index in charged {
        charge(t, &quotas[index])?;
    }
    Ok(())
}

/// Writes a quota's new usage as kube-apiserver's own `resourcequotas/status` update.
fn charge(t: &mut Txn, quota: &Quota) -> ApiResult<()> {
    let old = &*quota.stored;
    let mut updated = old.clone();
    updated["status"]["used"] = serde_json::to_value(resources::to_api(&quota.used))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    if let Some(metadata) = updated["metadata"].as_object_mut() {
        metadata.remove("resourceVersion");
    }
    let operation = managed_fields::Operation {
        manager: "kube-apiserver".into(),
        subresource: "status".into(),
        api_version: "v1".into(),
        group: String::new(),
        kind: "ResourceQuota".into(),
        has_status: true,
        now: crate::api::timestamp(crate::api::now()),
        apply: None,
    };
    operation
        .run(Some(old), &mut updated)
        .map_err(|c| ApiError::internal(c.message()))?;
    t.put(&ResKey::new("", "resourcequotas"), updated);
    Ok(())
}
