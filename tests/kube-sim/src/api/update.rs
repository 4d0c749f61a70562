//! Updating: the path shared by PUT, PATCH and the subresources, and finalizer-driven removal.

use super::patch::own_fields;
use super::subresources::{pointer, scale_paths};
use super::{finalizers, meta_mut, now, spec_part, str_at, timestamp, Sim};
use crate::admission_policy_enforce::Attrs;
use crate::managed_fields::Operation;
use crate::request::{ApiRequest, ApiResponse, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::Txn;
use crate::validation::FieldCause;
use crate::{defaults, validation};
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    /// The update path shared by PUT, PATCH and the subresources: `change` turns the current
    /// object into the requested one; this applies the strategy (what each subresource may
    /// change, generation, finalizer rules), validation and optimistic concurrency.
    #[allow(clippy::too_many_arguments)]
    pub fn update_object(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        user: &User,
        req: &ApiRequest,
        fm: Option<&Operation>,
        change: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("update") && sub.is_none() {
            return Err(ApiError::method_not_allowed("update"));
        }
        // Compiled before the store's lock is taken: compiling reads the store.
        let escalation_policy = self.escalation_policy(def, user);
        let param_rbac = (sub.is_none() && crate::admission_policies::authorizes_params(def, user))
            .then(|| self.authorizer.policy(&self.store));
        let policy_admission = self.policy_admission();
        let mut t = self.store.lock();
        let key = def.key();
        let ns_s = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&key, ns_s, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
        let mut next = change(&current)?;
        if !next.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        if def.custom.is_none() {
            // Kept in its storage version from here on, like `current`.
            let written_in = str_at(&next, &["apiVersion"])
                .and_then(|a| a.rsplit('/').next())
                .unwrap_or(&def.version)
                .to_string();
            crate::hpa_conversion::to_storage(&def.group, &written_in, &def.kind, &mut next);
        }
        if let Some(policy) = &escalation_policy {
            crate::rbac::escalation::confirm(
                policy,
                user,
                &def.resource,
                ns_s,
                name,
                &next,
                Some(&current),
            )?;
        }
        let subject = Subject::new(&def.group, &def.resource, name);
        // Optimistic concurrency: a resourceVersion in the request must be the current one.
        if let Some(rv) = str_at(&next, &["metadata", "resourceVersion"]).filter(|s| !s.is_empty())
        {
            if Some(rv) != str_at(&current, &["metadata", "resourceVersion"]) {
                return Err(ApiError::stale(subject));
            }
        }
        let body_name = str_at(&next, &["metadata", "name"])
            .unwrap_or("")
            .to_string();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced {
            let body_ns = str_at(&next, &["metadata", "namespace"]).unwrap_or("");
            if !body_ns.is_empty() && body_ns != ns_s {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        next = match sub {
            // The main resource ignores status; the status subresource changes only status.
            None => {
                if def.has_status() {
                    match current.get("status") {
                        Some(s) => next["status"] = s.clone(),
                        None => {
                            if let Some(m) = next.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                next
            }
            // Built-in status strategies reset the spec (and a few fields per kind) but
            // take the rest of the metadata from the request: the deployment controller
            // records its revision annotation through deployments/status. Custom
            // resources' status updates change only status.
            Some("status") if def.custom.is_none() => {
                let mut n = next;
                match current.get("spec") {
                    Some(spec) => n["spec"] = spec.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("spec");
                        }
                    }
                }
                let preserved: &[&str] = match (def.group.as_str(), def.resource.as_str()) {
                    ("apps", "deployments") => &["labels"],
                    ("", "pods") => &["ownerReferences", "deletionTimestamp"],
                    // ResetObjectMetaForStatus
                    ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
                        &["labels", "annotations", "finalizers", "ownerReferences"]
                    }
                    _ => &[],
                };
                let cm = current["metadata"].as_object().cloned().unwrap_or_default();
                let m = meta_mut(&mut n);
                for key in preserved {
                    match cm.get(*key) {
                        Some(v) => {
                            m.insert((*key).to_string(), v.clone());
                        }
                        None => {
                            m.remove(*key);
                        }
                    }
                }
                n
            }
            Some("status") => {
                let mut n = (*current).clone();
                match next.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                n
            }
            _ => next,
        };
        if sub == Some("status") && def.kind == "PersistentVolume" && def.group.is_empty() {
            crate::storage::stamp_phase_transition(&mut next, &current, &timestamp(now()));
        }
        // System metadata is the server's.
        {
            let cm = current["metadata"].as_object().cloned().unwrap_or_default();
            let m = meta_mut(&mut next);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
                "generateName",
            ] {
                match cm.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.remove("resourceVersion");
            m.remove("selfLink");
        }
        next["apiVersion"] = json!(def.api_version());
        next["kind"] = json!(def.kind);
        if def.custom.is_none() {
            crate::omitempty::prune_decoded(&def.group, &def.version, &def.kind, &mut next);
            defaults::apply_defaults(&def.group, &def.version, &def.kind, &mut next);
            crate::hpa_conversion::keep_storage_version(&def.group, &def.kind, &mut next);
            if def.group.is_empty() && def.kind == "Pod" {
                crate::dra::drop_disabled_pod_fields(self.dra_enabled(), &mut next, Some(&current));
            }
        }
        // Field ownership, on the defaulted object before the strategy's changes.
        match fm {
            Some(op) if op.subresource == "scale" => {
                let (spec_path, _, _) = scale_paths(def);
                if pointer(&current, &spec_path) != pointer(&next, &spec_path) {
                    let path: Vec<&str> = spec_path.split('.').filter(|s| !s.is_empty()).collect();
                    op.run_scale(&mut next, &path);
                }
            }
            Some(op) => {
                // Ownership is worked out on the object as the API server's Go types hold
                // it: the empty maps and lists `omitempty` drops are no fields (a client
                // sending `labels: {}` on every write changes nothing, and its entry's time
                // stays, so the write stays a no-op).
                let mut held = next.clone();
                if def.custom.is_none() {
                    crate::omitempty::prune_stored(&def.group, &def.kind, &mut held);
                }
                own_fields(op, Some(&current), &mut held)?;
                match held["metadata"].get("managedFields") {
                    Some(entries) => next["metadata"]["managedFields"] = entries.clone(),
                    None => {
                        if let Some(m) = next["metadata"].as_object_mut() {
                            m.remove("managedFields");
                        }
                    }
                }
            }
            None => {}
        }
        if def.custom.is_none() {
            defaults::after_defaulting(&def.group, &def.kind, &mut next, false);
            defaults::prepare_for_update(&def.group, &def.version, &def.kind, &mut next, &current);
            if crate::csr::is_csr(&def.group, &def.kind) {
                crate::csr::prepare_for_update(sub, &mut next, &current, &timestamp(now()));
            }
            crate::omitempty::prune_stored(&def.group, &def.kind, &mut next);
        }
        // No new finalizers while deleting.
        if !current["metadata"]["deletionTimestamp"].is_null() {
            let old = finalizers(&current);
            let added: Vec<String> = finalizers(&next)
                .into_iter()
                .filter(|f| !old.contains(f))
                .collect();
            if !added.is_empty() {
                let msg = format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
                );
                let cause = FieldCause {
                    reason: "FieldValueForbidden",
                    message: msg,
                    field: "metadata.finalizers".into(),
                };
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, name),
                    &[cause.clone(), cause],
                ));
            }
        }
        // The Service storage allocates and frees ahead of the strategy's validation
        // (BeginUpdate); what it took goes back if the update fails after.
        let service_txn = if sub.is_none() && def.kind == "Service" && def.group.is_empty() {
            Some(self.allocate_service_update(&t, &mut next, &current, name)?)
        } else {
            None
        };
        let mut causes = self.validate(def, &next, Some(&current));
        if crate::csr::is_csr(&def.group, &def.kind) {
            causes.extend(validation::csr::validate_update(&next, &current, sub));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, name),
                &causes,
            ));
        }
        let param_rbac = param_rbac.as_deref();
        crate::admission_policies::confirm_params(
            self,
            &t,
            param_rbac,
            user,
            def,
            &next,
            Some(&current),
        )?;
        if let Some(vap) = &policy_admission {
            let mut a = Attrs::new(def, sub.unwrap_or(""), "UPDATE", name, ns_s, user);
            (a.object, a.old_object) = (Some(&next), Some(current.as_ref()));
            a.dry_run = req.param("dryRun").is_some();
            let kind = if req.method.as_str() == "PATCH" {
                "PatchOptions"
            } else {
                "UpdateOptions"
            };
            a.options = Attrs::options_of(kind, a.dry_run);
            vap.admit(&t, &self.registry, &a)?;
        }
        if sub.is_none() && def.kind == "PersistentVolumeClaim" && def.group.is_empty() {
            crate::storage::admit_claim_resize(&t, &next, &current, name)?;
        }
        if def.tracks_generation() {
            let changed = if def.kind == "EndpointSlice" && def.group == "discovery.k8s.io" {
                // Semantically: an empty list is no change from a nil one.
                let mut a = (*current).clone();
                let mut b = next.clone();
                for v in [&mut a, &mut b] {
                    if let Some(m) = v.as_object_mut() {
                        m.remove("metadata");
                    }
                }
                !validation::endpoints::semantic_eq(&a, &b)
            } else if def.has_status() {
                spec_part(&current) != spec_part(&next)
            } else {
                let strip = |v: &Value| {
                    let mut v = v.clone();
                    if let Some(m) = v.as_object_mut() {
                        m.remove("metadata");
                    }
                    v
                };
                strip(&current) != strip(&next)
            };
            // A Deployment's annotation change counts too (they are copied to its
            // ReplicaSets), as kube-apiserver's deployment strategy has it; nil and empty
            // maps are equal.
            let annotations = |v: &Value| {
                v["metadata"]["annotations"]
                    .as_object()
                    .filter(|m| !m.is_empty())
                    .cloned()
            };
            let changed = changed
                || (sub.is_none()
                    && def.group == "apps"
                    && def.kind == "Deployment"
                    && annotations(&current) != annotations(&next));
            // An EndpointSlice's label change counts too (the endpointslice strategy): the
            // controllers that own slices tell their own writes by generation.
            let changed = changed
                || (def.group == "discovery.k8s.io"
                    && def.kind == "EndpointSlice"
                    && validation::endpoints::labels_differ(&current, &next));
            if changed {
                let g = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                meta_mut(&mut next).insert("generation".into(), json!(g));
            }
        }
        // A no-op update is not written (no new resourceVersion), as kube-apiserver does.
        let mut probe = next.clone();
        meta_mut(&mut probe).insert(
            "resourceVersion".into(),
            current["metadata"]["resourceVersion"].clone(),
        );
        if probe == *current {
            return Ok(ApiResponse::json(200, self.present(def, &current)));
        }
        if sub.is_none() {
            let op = crate::quota::evaluator::Operation::Update;
            let dry_run = req.param("dryRun").is_some();
            crate::quota::admit(&mut t, def, ns_s, op, &next, Some(&current), dry_run)?;
        }
        if req.param("dryRun").is_some() {
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut next)
                .map_err(|c| ApiError::invalid(Subject::new(&def.group, &def.kind, name), &c))?;
            next = crate::crd::establish(&next);
        }
        // Removed by the update that leaves it without finalizers, once a deletion was asked
        // for and no grace period is running (ShouldDeleteDuringUpdate): a pod whose
        // kubelet has not finished it yet stays until the kubelet's own deletion.
        let pending_grace = current["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0);
        if !current["metadata"]["deletionTimestamp"].is_null()
            && pending_grace == 0
            && self.finalized(def, &next)
        {
            // The answer is the object as this update left it, the moment before it went.
            self.remove_locked(&mut t, def, ns_s, name);
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        if let Some(txn) = service_txn {
            txn.commit(&mut t, &next, false);
        }
        let stored = t.put(&key, next);
        drop(t);
        if def.kind == "CustomResourceDefinition" {
            crate::crd::register(&self.registry, &stored);
        }
        Ok(ApiResponse::json(200, self.present(def, &stored)))
    }

    /// Nothing holds this object any more: no finalizers (and for a namespace, no spec finalizers).
    fn finalized(&self, def: &ResourceDef, obj: &Value) -> bool {
        let spec_fins = def.kind == "Namespace"
            && obj["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        finalizers(obj).is_empty() && !spec_fins
    }

    pub(super) fn remove_locked(
        &self,
        t: &mut Txn,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Arc<Value> {
        let gone = t
            .remove(&def.key(), ns, name)
            .unwrap_or_else(|| Arc::new(Value::Null));
        if def.kind == "Service" && def.group.is_empty() {
            self.release_service(t, &gone);
        }
        if def.kind == "CustomResourceDefinition" {
            let crd_name = name.to_string();
            for r in self.registry.unregister_crd(&crd_name) {
                // Custom resources go with their definition.
                let keys: Vec<(String, String)> = t
                    .range(&r.key(), None, None)
                    .map(|(k, _)| k.clone())
                    .collect();
                for (ns, n) in keys {
                    t.remove(&r.key(), &ns, &n);
                }
                t.drop_resource(&r.key());
            }
        }
        gone
    }
}
