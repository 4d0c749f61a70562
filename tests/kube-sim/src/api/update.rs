//! Updating: the path shared by PUT, PATCH and the subresources, and finalizer-driven removal.
//!
//! One update runs the phases of kube-apiserver's generic registry in order: read the current
//! object, check the request's preconditions, reset what the addressed (sub)resource may not
//! change, default, record field ownership, the strategy's `PrepareForUpdate`, validation,
//! admission, generation, then no-op detection and the store write (whose watch event the
//! store sends).

use super::patch::own_fields;
use super::service_alloc::ServiceTxn;
use super::subresources::{pointer, scale_paths};
use super::{finalizers, meta_mut, now, spec_part, str_at, timestamp, Sim};
use crate::admission_policy_enforce::{Attrs, PolicyAdmission};
use crate::managed_fields::Operation;
use crate::rbac::Policy;
use crate::request::{ApiRequest, ApiResponse, User};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::Txn;
use crate::validation::FieldCause;
use crate::{defaults, validation};
use serde_json::{json, Value};
use std::sync::Arc;

/// One update: the object addressed, who asks, and the object as stored when it began.
struct UpdateCtx<'a> {
    def: &'a Arc<ResourceDef>,
    /// The namespace, empty for a cluster-scoped resource.
    ns: &'a str,
    name: &'a str,
    sub: Option<&'a str>,
    user: &'a User,
    req: &'a ApiRequest,
    current: Arc<Value>,
}

/// What admission needs compiled before the store's lock is taken: compiling reads the store.
struct UpdateAdmission {
    /// Set when the write is of an RBAC object that escalation rules apply to.
    escalation: Option<Arc<Policy>>,
    /// Set when the write is of an admission policy whose parameters need authorizing.
    param_rbac: Option<Arc<Policy>>,
    policies: Option<PolicyAdmission>,
}

impl UpdateCtx<'_> {
    /// Whether the resource is the core group's `kind`.
    fn is_core(&self, kind: &str) -> bool {
        self.def.group.is_empty() && self.def.kind == kind
    }

    fn built_in(&self) -> bool {
        self.def.custom.is_none()
    }

    fn dry_run(&self) -> bool {
        self.req.param("dryRun").is_some()
    }

    /// The 422 for `causes`.
    fn invalid(&self, causes: &[FieldCause]) -> ApiError {
        ApiError::invalid(
            Subject::new(&self.def.group, &self.def.kind, self.name),
            causes,
        )
    }

    /// The requested object, kept in its storage version from here on like `current`.
    fn requested(&self, change: impl FnOnce(&Value) -> ApiResult<Value>) -> ApiResult<Value> {
        let mut next = change(&self.current)?;
        if !next.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        if self.built_in() {
            let def = self.def;
            let written_in = str_at(&next, &["apiVersion"])
                .and_then(|a| a.rsplit('/').next())
                .unwrap_or(&def.version)
                .to_string();
            crate::hpa_conversion::to_storage(&def.group, &written_in, &def.kind, &mut next);
        }
        Ok(next)
    }

    /// Optimistic concurrency (a resourceVersion in the request must be the current one),
    /// and the body's name and namespace against the URL's.
    fn check_preconditions(&self, next: &Value) -> ApiResult<()> {
        let (def, name) = (self.def, self.name);
        if let Some(rv) = str_at(next, &["metadata", "resourceVersion"]).filter(|s| !s.is_empty()) {
            if Some(rv) != str_at(&self.current, &["metadata", "resourceVersion"]) {
                return Err(ApiError::stale(Subject::new(
                    &def.group,
                    &def.resource,
                    name,
                )));
            }
        }
        let body_name = str_at(next, &["metadata", "name"]).unwrap_or("");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced {
            let body_ns = str_at(next, &["metadata", "namespace"]).unwrap_or("");
            if !body_ns.is_empty() && body_ns != self.ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        Ok(())
    }

    /// What the addressed (sub)resource may change: the main resource ignores status; the
    /// status subresource changes only status (and, for built-in kinds, metadata).
    fn reset_for_subresource(&self, next: Value) -> Value {
        let current = &self.current;
        let mut next = match self.sub {
            None => {
                let mut n = next;
                if self.def.has_status() {
                    copy_or_remove(&mut n, current, "status");
                }
                n
            }
            // Built-in status strategies reset the spec (and a few fields per kind) but
            // take the rest of the metadata from the request: the deployment controller
            // records its revision annotation through deployments/status. Custom
            // resources' status updates change only status.
            Some("status") if self.built_in() => {
                let mut n = next;
                copy_or_remove(&mut n, current, "spec");
                let preserved: &[&str] = match (self.def.group.as_str(), self.def.resource.as_str())
                {
                    ("apps", "deployments") => &["labels"],
                    ("", "pods") => &["ownerReferences", "deletionTimestamp"],
                    // ResetObjectMetaForStatus
                    ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
                        &["labels", "annotations", "finalizers", "ownerReferences"]
                    }
                    _ => &[],
                };
                keep_current_metadata(&mut n, current, preserved);
                n
            }
            Some("status") => {
                let mut n = (**current).clone();
                copy_or_remove(&mut n, &next, "status");
                n
            }
            _ => next,
        };
        if self.sub == Some("status") && self.is_core("PersistentVolume") {
            crate::storage::stamp_phase_transition(&mut next, current, &timestamp(now()));
        }
        next
    }

    /// System metadata is the server's; the type is the resource's.
    fn keep_system_metadata(&self, next: &mut Value) {
        keep_current_metadata(
            next,
            &self.current,
            &[
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
                "generateName",
            ],
        );
        let m = meta_mut(next);
        m.remove("resourceVersion");
        m.remove("selfLink");
        next["apiVersion"] = json!(self.def.api_version());
        next["kind"] = json!(self.def.kind);
    }

    /// Field ownership, on the defaulted object before the strategy's changes.
    fn track_ownership(&self, fm: Option<&Operation>, next: &mut Value) -> ApiResult<()> {
        let def = self.def;
        match fm {
            Some(op) if op.subresource == "scale" => {
                let (spec_path, _, _) = scale_paths(def);
                if pointer(&self.current, &spec_path) != pointer(next, &spec_path) {
                    let path: Vec<&str> = spec_path.split('.').filter(|s| !s.is_empty()).collect();
                    op.run_scale(next, &path);
                }
            }
            Some(op) => {
                // Ownership is worked out on the object as the API server's Go types hold
                // it: the empty maps and lists `omitempty` drops are no fields (a client
                // sending `labels: {}` on every write changes nothing, and its entry's time
                // stays, so the write stays a no-op).
                let mut held = next.clone();
                if self.built_in() {
                    crate::omitempty::prune_stored(&def.group, &def.kind, &mut held);
                }
                own_fields(op, Some(&self.current), &mut held)?;
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
        Ok(())
    }

    /// The strategy's `PrepareForUpdate` of built-in kinds.
    fn prepare_for_update(&self, next: &mut Value) {
        if !self.built_in() {
            return;
        }
        let (def, current) = (self.def, &self.current);
        defaults::after_defaulting(&def.group, &def.kind, next, false);
        defaults::prepare_for_update(&def.group, &def.version, &def.kind, next, current);
        if crate::csr::is_csr(&def.group, &def.kind) {
            crate::csr::prepare_for_update(self.sub, next, current, &timestamp(now()));
        }
        crate::omitempty::prune_stored(&def.group, &def.kind, next);
    }

    /// No new finalizers while deleting.
    fn check_no_new_finalizers(&self, next: &Value) -> ApiResult<()> {
        if self.current["metadata"]["deletionTimestamp"].is_null() {
            return Ok(());
        }
        let old = finalizers(&self.current);
        let added: Vec<String> = finalizers(next)
            .into_iter()
            .filter(|f| !old.contains(f))
            .collect();
        if added.is_empty() {
            return Ok(());
        }
        let msg = format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            added.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
        );
        let cause = FieldCause {
            reason: "FieldValueForbidden",
            message: msg,
            field: "metadata.finalizers".into(),
        };
        Err(self.invalid(&[cause.clone(), cause]))
    }

    /// Whether the update changes what the generation counts.
    fn generation_changed(&self, next: &Value) -> bool {
        let (def, current) = (self.def, &*self.current);
        let changed = if def.kind == "EndpointSlice" && def.group == "discovery.k8s.io" {
            // Semantically: an empty list is no change from a nil one.
            !validation::endpoints::semantic_eq(&without_metadata(current), &without_metadata(next))
        } else if def.has_status() {
            spec_part(current) != spec_part(next)
        } else {
            without_metadata(current) != without_metadata(next)
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
            || (self.sub.is_none()
                && def.group == "apps"
                && def.kind == "Deployment"
                && annotations(current) != annotations(next));
        // An EndpointSlice's label change counts too (the endpointslice strategy): the
        // controllers that own slices tell their own writes by generation.
        changed
            || (def.group == "discovery.k8s.io"
                && def.kind == "EndpointSlice"
                && validation::endpoints::labels_differ(current, next))
    }
}

/// `to[key]` becomes `from[key]`, or goes when `from` has none.
fn copy_or_remove(to: &mut Value, from: &Value, key: &str) {
    match from.get(key) {
        Some(v) => to[key] = v.clone(),
        None => {
            if let Some(m) = to.as_object_mut() {
                m.remove(key);
            }
        }
    }
}

/// The metadata fields `keys` of `next` become those of `current` (or go when it has none).
fn keep_current_metadata(next: &mut Value, current: &Value, keys: &[&str]) {
    let cm = current["metadata"].as_object().cloned().unwrap_or_default();
    let m = meta_mut(next);
    for key in keys {
        match cm.get(*key) {
            Some(v) => {
                m.insert((*key).to_string(), v.clone());
            }
            None => {
                m.remove(*key);
            }
        }
    }
}

/// The object without its metadata.
fn without_metadata(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
    }
    v
}

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
        let admission = self.update_admission(def, sub, user);
        let t = self.store.lock();
        let ns = if def.namespaced { ns.unwrap_or("") } else { "" };
        let current = t
            .get(&def.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))?;
        let cx = UpdateCtx {
            def,
            ns,
            name,
            sub,
            user,
            req,
            current,
        };
        let mut next = cx.requested(change)?;
        if let Some(policy) = &admission.escalation {
            let current = Some(cx.current.as_ref());
            crate::rbac::escalation::confirm(
                policy,
                user,
                &def.resource,
                ns,
                name,
                &next,
                current,
            )?;
        }
        cx.check_preconditions(&next)?;
        next = cx.reset_for_subresource(next);
        cx.keep_system_metadata(&mut next);
        self.default_update(&cx, &mut next);
        cx.track_ownership(fm, &mut next)?;
        cx.prepare_for_update(&mut next);
        cx.check_no_new_finalizers(&next)?;
        // The Service storage allocates and frees ahead of the strategy's validation
        // (BeginUpdate); what it took goes back if the update fails after.
        let service_txn = if sub.is_none() && cx.is_core("Service") {
            Some(self.allocate_service_update(&t, &mut next, &cx.current, name)?)
        } else {
            None
        };
        self.validate_update(&cx, &next)?;
        self.admit_update(&cx, &t, &admission, &next)?;
        if def.tracks_generation() && cx.generation_changed(&next) {
            let g = cx.current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut next).insert("generation".into(), json!(g));
        }
        self.write_update(t, &cx, next, service_txn)
    }

    /// Admission state compiled before the store's lock is taken.
    fn update_admission(
        &self,
        def: &ResourceDef,
        sub: Option<&str>,
        user: &User,
    ) -> UpdateAdmission {
        UpdateAdmission {
            escalation: self.escalation_policy(def, user),
            param_rbac: (sub.is_none() && crate::admission_policies::authorizes_params(def, user))
                .then(|| self.authorizer.policy(&self.store)),
            policies: self.policy_admission(),
        }
    }

    /// Decoding and defaulting of the requested object, as the API server's Go types do.
    fn default_update(&self, cx: &UpdateCtx, next: &mut Value) {
        if !cx.built_in() {
            return;
        }
        let def = cx.def;
        crate::omitempty::prune_decoded(&def.group, &def.version, &def.kind, next);
        defaults::apply_defaults(&def.group, &def.version, &def.kind, next);
        crate::hpa_conversion::keep_storage_version(&def.group, &def.kind, next);
        if cx.is_core("Pod") {
            crate::dra::drop_disabled_pod_fields(self.dra_enabled(), next, Some(&cx.current));
        }
    }

    /// The strategy's `ValidateUpdate`.
    fn validate_update(&self, cx: &UpdateCtx, next: &Value) -> ApiResult<()> {
        let def = cx.def;
        let mut causes = self.validate(def, next, Some(&cx.current));
        if crate::csr::is_csr(&def.group, &def.kind) {
            causes.extend(validation::csr::validate_update(next, &cx.current, cx.sub));
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(cx.invalid(&causes))
        }
    }

    /// Validating admission: policy parameters, ValidatingAdmissionPolicy, and the claim
    /// resize plugin.
    fn admit_update(
        &self,
        cx: &UpdateCtx,
        t: &Txn,
        admission: &UpdateAdmission,
        next: &Value,
    ) -> ApiResult<()> {
        let (def, current) = (cx.def, Some(cx.current.as_ref()));
        let param_rbac = admission.param_rbac.as_deref();
        crate::admission_policies::confirm_params(
            self, t, param_rbac, cx.user, def, next, current,
        )?;
        if let Some(vap) = &admission.policies {
            let mut a = Attrs::new(def, cx.sub.unwrap_or(""), "UPDATE", cx.name, cx.ns, cx.user);
            (a.object, a.old_object) = (Some(next), current);
            a.dry_run = cx.dry_run();
            let kind = if cx.req.method.as_str() == "PATCH" {
                "PatchOptions"
            } else {
                "UpdateOptions"
            };
            a.options = Attrs::options_of(kind, a.dry_run);
            vap.admit(t, &self.registry, &a)?;
        }
        if cx.sub.is_none() && cx.is_core("PersistentVolumeClaim") {
            crate::storage::admit_claim_resize(t, next, &cx.current, cx.name)?;
        }
        Ok(())
    }

    /// The end of an update: nothing written for a no-op, quota, dry run, then removal
    /// (the update that finalizes a deleted object) or the store write.
    fn write_update(
        &self,
        mut t: Txn,
        cx: &UpdateCtx,
        mut next: Value,
        service_txn: Option<ServiceTxn<'_>>,
    ) -> ApiResult<ApiResponse> {
        let (def, current) = (cx.def, &cx.current);
        // A no-op update is not written (no new resourceVersion), as kube-apiserver does.
        let mut probe = next.clone();
        meta_mut(&mut probe).insert(
            "resourceVersion".into(),
            current["metadata"]["resourceVersion"].clone(),
        );
        if probe == **current {
            return Ok(ApiResponse::json(200, self.present(def, current)));
        }
        if cx.sub.is_none() {
            let op = crate::quota::evaluator::Operation::Update;
            crate::quota::admit(&mut t, def, cx.ns, op, &next, Some(current), cx.dry_run())?;
        }
        if cx.dry_run() {
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut next).map_err(|c| cx.invalid(&c))?;
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
            self.remove_locked(&mut t, def, cx.ns, cx.name);
            return Ok(ApiResponse::json(200, self.present(def, &probe)));
        }
        if let Some(txn) = service_txn {
            txn.commit(&mut t, &next, false);
        }
        let stored = t.put(&def.key(), next);
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
