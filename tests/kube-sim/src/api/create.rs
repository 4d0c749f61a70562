//! Creating: metadata, defaults, admission, validation and storage of a new object.
//!
//! The phases of kube-apiserver's generic registry in order: the namespace and name, the
//! server's metadata cleared, decoding and defaulting, field ownership and the strategy's
//! `PrepareForCreate`, admission and validation under the store's lock, the server's
//! identity (uid, creation time, generation), quota, then the store write.

use super::patch::{own_fields, set_managed_fields};
use super::{body_ns_or, meta_mut, now, random_suffix, str_at, timestamp, Sim};
use crate::admission_policy_enforce::Attrs;
use crate::managed_fields::Operation;
use crate::request::User;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::{ResKey, Txn};
use crate::validation::FieldCause;
use crate::{defaults, validation};
use serde_json::{json, Value};
use std::sync::Arc;

/// One create: the resource, where, by whom, and the name the object gets.
struct CreateCtx<'a> {
    def: &'a Arc<ResourceDef>,
    /// The namespace of the URL (`None` for cluster-scoped requests).
    ns: Option<&'a str>,
    user: &'a User,
    /// The object's name, generated from `generateName` when the request had none.
    name: String,
    /// The name as the request gave it (empty when generated).
    requested_name: String,
}

impl CreateCtx<'_> {
    /// Whether the resource is the core group's `kind`.
    fn is_core(&self, kind: &str) -> bool {
        self.def.group.is_empty() && self.def.kind == kind
    }

    /// The namespace the object lives in, empty for a cluster-scoped resource.
    fn namespace(&self) -> &str {
        if self.def.namespaced {
            self.ns.unwrap_or("")
        } else {
            ""
        }
    }

    /// The 422 for `causes`.
    fn invalid(&self, causes: &[FieldCause]) -> ApiError {
        ApiError::invalid(
            Subject::new(&self.def.group, &self.def.kind, &self.name),
            causes,
        )
    }

    /// `Ok` when `causes` is empty, the 422 otherwise.
    fn valid(&self, causes: Vec<FieldCause>) -> ApiResult<()> {
        if causes.is_empty() {
            Ok(())
        } else {
            Err(self.invalid(&causes))
        }
    }
}

/// The body's namespace against the URL's; the object's namespace becomes the URL's (and a
/// cluster-scoped object has none).
fn place_in_namespace(def: &ResourceDef, ns: Option<&str>, obj: &mut Value) -> ApiResult<()> {
    if !def.namespaced {
        meta_mut(obj).remove("namespace");
        return Ok(());
    }
    let ns = ns.unwrap_or("");
    let body_ns = str_at(obj, &["metadata", "namespace"]).unwrap_or("");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    meta_mut(obj).insert("namespace".into(), json!(ns));
    Ok(())
}

/// The object's name (generated from `generateName` when it has none) and the name as
/// requested; a 422 when it has neither.
fn assign_name(def: &ResourceDef, obj: &mut Value) -> ApiResult<(String, String)> {
    let requested = str_at(obj, &["metadata", "name"]).unwrap_or("").to_string();
    let generate = str_at(obj, &["metadata", "generateName"]).unwrap_or("");
    let mut name = requested.clone();
    if name.is_empty() && !generate.is_empty() {
        name = format!("{generate}{}", random_suffix(5));
        meta_mut(obj).insert("name".into(), json!(name));
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            Subject::new(&def.group, &def.kind, ""),
            &[FieldCause {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        ));
    }
    Ok((name, requested))
}

/// The metadata only the server sets goes.
fn clear_system_metadata(obj: &mut Value) {
    let m = meta_mut(obj);
    for k in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "generation",
    ] {
        m.remove(k);
    }
}

impl Sim {
    /// The whole create path: metadata, defaults, admission, validation, storage.
    pub fn create_object(
        &self,
        def: &Arc<ResourceDef>,
        ns: Option<&str>,
        mut obj: Value,
        user: &User,
        dry_run: bool,
        fm: Option<&Operation>,
    ) -> ApiResult<Arc<Value>> {
        if !def.has_verb("create") {
            return Err(ApiError::method_not_allowed("create"));
        }
        if let Some(policy) = self.escalation_policy(def, user) {
            let ns = if def.namespaced { ns.unwrap_or("") } else { "" };
            crate::rbac::escalation::confirm(&policy, user, &def.resource, ns, "", &obj, None)?;
        }
        // Compiled before the store's lock is taken: compiling reads the store.
        let param_rbac = crate::admission_policies::authorizes_params(def, user)
            .then(|| self.authorizer.policy(&self.store));
        let policy_admission = self.policy_admission();
        place_in_namespace(def, ns, &mut obj)?;
        let (name, requested_name) = assign_name(def, &mut obj)?;
        let cx = CreateCtx {
            def,
            ns,
            user,
            name,
            requested_name,
        };
        clear_system_metadata(&mut obj);
        let body_version = obj["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit('/').next())
            .unwrap_or(&def.version)
            .to_string();
        self.decode_and_default(&cx, &body_version, &mut obj)?;
        self.prepare_for_create(&cx, &body_version, fm, &mut obj)?;
        let mut t = self.store.lock();
        self.admit_create(&cx, &t, &mut obj)?;
        // The Service storage allocates ahead of the strategy's validation (BeginCreate);
        // what it took goes back if the create fails after.
        let service_txn = if cx.is_core("Service") {
            Some(self.allocate_service_create(&t, &mut obj, &cx.name)?)
        } else {
            None
        };
        cx.valid(self.validate(def, &obj, None))?;
        let param_rbac = param_rbac.as_deref();
        crate::admission_policies::confirm_params(self, &t, param_rbac, user, def, &obj, None)?;
        if let Some(vap) = &policy_admission {
            let mut a = Attrs::new(def, "", "CREATE", &cx.requested_name, cx.namespace(), user);
            a.object = Some(&obj);
            (a.dry_run, a.options) = (dry_run, Attrs::options_of("CreateOptions", dry_run));
            vap.admit(&t, &self.registry, &a)?;
        }
        self.stamp_identity(&cx, &mut obj)?;
        // ResourceQuota admission, after validation.
        if let Some(ns) = ns.filter(|_| def.namespaced) {
            let op = crate::quota::evaluator::Operation::Create;
            crate::quota::admit(&mut t, def, ns, op, &obj, None, dry_run)?;
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut obj).map_err(|c| cx.invalid(&c))?;
        }
        if let Some(txn) = service_txn {
            txn.commit(&mut t, &obj, dry_run);
        }
        if dry_run {
            return Ok(Arc::new(obj));
        }
        let stored = t.put(&def.key(), obj);
        if def.kind == "CustomResourceDefinition" {
            let established = t.put(&def.key(), crate::crd::establish(&stored));
            drop(t);
            crate::crd::register(&self.registry, &established);
        }
        Ok(stored)
    }

    /// Decoding into the Go type and defaulting, in the version the body was written in,
    /// then conversion to the storage version; a Service's IP fields are checked before
    /// the storage fills them in.
    fn decode_and_default(&self, cx: &CreateCtx, version: &str, obj: &mut Value) -> ApiResult<()> {
        let def = cx.def;
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if def.custom.is_none() {
            // Decoding into the Go type loses the zero values `omitempty` drops.
            crate::omitempty::prune_decoded(&def.group, version, &def.kind, obj);
            defaults::apply_defaults(&def.group, version, &def.kind, obj);
            crate::hpa_conversion::to_storage(&def.group, version, &def.kind, obj);
            if cx.is_core("Pod") {
                crate::dra::drop_disabled_pod_fields(self.dra_enabled(), obj, None);
            }
        }
        if cx.is_core("Service") {
            // The service storage checks the IP fields before it fills them in and
            // allocates, ahead of the strategy's validation.
            cx.valid(validation::service_ip_family_errors(obj))?;
        }
        Ok(())
    }

    /// Field ownership, worked out on the object as decoded and defaulted, before the
    /// strategy's `PrepareForCreate` and admission add their own fields.
    fn prepare_for_create(
        &self,
        cx: &CreateCtx,
        version: &str,
        fm: Option<&Operation>,
        obj: &mut Value,
    ) -> ApiResult<()> {
        let def = cx.def;
        let mut snapshot = obj.clone();
        if def.custom.is_none() {
            defaults::after_defaulting(&def.group, &def.kind, obj, true);
            let created = timestamp(now());
            defaults::prepare_for_create(&def.group, version, &def.kind, obj, &created);
            crate::omitempty::prune_stored(&def.group, &def.kind, obj);
        }
        if let Some(op) = fm {
            own_fields(op, None, &mut snapshot)?;
            set_managed_fields(obj, snapshot["metadata"]["managedFields"].take());
        }
        self.mutate_on_create(def, obj, cx.user);
        Ok(())
    }

    /// Mutating admission under the store's lock (namespace lifecycle, service accounts,
    /// the default storage class), then the name's uniqueness.
    fn admit_create(&self, cx: &CreateCtx, t: &Txn, obj: &mut Value) -> ApiResult<()> {
        let def = cx.def;
        let subject = Subject::new(&def.group, &def.resource, &cx.name);
        if let Some(ns) = cx.ns.filter(|_| def.namespaced) {
            self.admit_namespace(t, ns, &subject)?;
        }
        if cx.is_core("Pod") {
            self.admit_pod(t, obj, &subject)?;
        }
        if cx.is_core("PersistentVolumeClaim") {
            crate::storage::default_claim_class(t, obj);
        }
        if t.get(&def.key(), &body_ns_or(cx.ns, def), &cx.name)
            .is_some()
        {
            return Err(ApiError::already_exists(subject));
        }
        Ok(())
    }

    /// The server's identity of the object: its uid, creation time and first generation
    /// (and a Job's selector, from the uid, validated again).
    fn stamp_identity(&self, cx: &CreateCtx, obj: &mut Value) -> ApiResult<()> {
        let def = cx.def;
        let uid = uuid::Uuid::new_v4().to_string();
        let m = meta_mut(obj);
        m.insert("uid".into(), json!(uid));
        // The clock fault moves creation times (only them), for tests that age objects.
        let created = now() + self.faults.clock_offset();
        m.insert("creationTimestamp".into(), json!(timestamp(created)));
        if def.tracks_generation() {
            m.insert("generation".into(), json!(1));
        }
        if def.kind == "Job" && def.group == "batch" {
            defaults::job_selector_and_labels(obj, &uid);
            cx.valid(self.validate(def, obj, None))?;
        }
        Ok(())
    }

    /// The CSR strategy records who asked.
    fn mutate_on_create(&self, def: &ResourceDef, obj: &mut Value, user: &User) {
        if crate::csr::is_csr(&def.group, &def.kind) {
            crate::csr::prepare_for_create(obj, user);
        }
    }

    /// NamespaceLifecycle admission: the namespace exists and is not terminating.
    fn admit_namespace(&self, t: &Txn, ns: &str, subject: &Subject) -> ApiResult<()> {
        let nsdef = ResKey::new("", "namespaces");
        match t.get(&nsdef, "", ns) {
            None => Err(ApiError::not_found(Subject::new("", "namespaces", ns))),
            Some(n)
                if !n["metadata"]["deletionTimestamp"].is_null()
                    || n["status"]["phase"] == "Terminating" =>
            {
                let mut e = ApiError::forbidden(
                    subject.clone(),
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                );
                if let Some(d) = e.details.as_deref_mut() {
                    d["causes"] = json!([{"reason": "NamespaceTerminating",
                                          "message": format!("namespace {ns} is being terminated"),
                                          "field": "metadata.namespace"}]);
                }
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }

    /// ServiceAccount admission: the pod's service account must exist; mount its token.
    fn admit_pod(&self, t: &Txn, pod: &mut Value, subject: &Subject) -> ApiResult<()> {
        let ns = str_at(pod, &["metadata", "namespace"])
            .unwrap_or("")
            .to_string();
        let sa = str_at(pod, &["spec", "serviceAccountName"])
            .filter(|s| !s.is_empty())
            .or_else(|| str_at(pod, &["spec", "serviceAccount"]).filter(|s| !s.is_empty()))
            .unwrap_or("default")
            .to_string();
        let is_mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
        if !is_mirror
            && t.get(&ResKey::new("", "serviceaccounts"), &ns, &sa)
                .is_none()
        {
            return Err(ApiError::forbidden(
                subject.clone(),
                &format!(
                    "error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"
                ),
            ));
        }
        if !is_mirror {
            if !pod["spec"].is_object() {
                pod["spec"] = json!({});
            }
            pod["spec"]["serviceAccountName"] = json!(sa);
            defaults::admit_pod_service_account(pod, &random_suffix(5));
        }
        Ok(())
    }

    pub(super) fn validate(
        &self,
        def: &ResourceDef,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<FieldCause> {
        if def.custom.is_some() {
            let name = str_at(obj, &["metadata", "name"]).unwrap_or("");
            return validation::validate_name(&def.kind, name)
                .into_iter()
                .collect();
        }
        validation::validate(&def.group, &def.version, &def.kind, obj, old)
    }
}
