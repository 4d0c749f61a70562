//! Creating: metadata, defaults, admission, validation and storage of a new object.

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
        let param_rbac = crate::admission_policies::authorizes_params(def, user)
            .then(|| self.authorizer.policy(&self.store));
        let policy_admission = self.policy_admission();
        let body_ns = str_at(&obj, &["metadata", "namespace"])
            .unwrap_or("")
            .to_string();
        if def.namespaced {
            let ns = ns.unwrap_or("");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        let mut name = str_at(&obj, &["metadata", "name"])
            .unwrap_or("")
            .to_string();
        let generate = str_at(&obj, &["metadata", "generateName"])
            .unwrap_or("")
            .to_string();
        let requested_name = name.clone();
        if name.is_empty() && !generate.is_empty() {
            name = format!("{generate}{}", random_suffix(5));
            meta_mut(&mut obj).insert("name".into(), json!(name));
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
        {
            let m = meta_mut(&mut obj);
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
        let body_version = obj["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit('/').next())
            .unwrap_or(&def.version)
            .to_string();
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if def.custom.is_none() {
            // Decoding into the Go type loses the zero values `omitempty` drops.
            crate::omitempty::prune_decoded(&def.group, &body_version, &def.kind, &mut obj);
            defaults::apply_defaults(&def.group, &body_version, &def.kind, &mut obj);
            crate::hpa_conversion::to_storage(&def.group, &body_version, &def.kind, &mut obj);
            if def.group.is_empty() && def.kind == "Pod" {
                crate::dra::drop_disabled_pod_fields(self.dra_enabled(), &mut obj, None);
            }
        }
        if def.kind == "Service" && def.group.is_empty() {
            // The service storage checks the IP fields before it fills them in and
            // allocates, ahead of the strategy's validation.
            let causes = validation::service_ip_family_errors(&obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, &name),
                    &causes,
                ));
            }
        }
        // Field ownership is worked out on the object as decoded and defaulted, before
        // admission and the strategy add their own fields.
        let mut snapshot = obj.clone();
        if def.custom.is_none() {
            defaults::after_defaulting(&def.group, &def.kind, &mut obj, true);
            defaults::prepare_for_create(
                &def.group,
                &body_version,
                &def.kind,
                &mut obj,
                &timestamp(now()),
            );
            crate::omitempty::prune_stored(&def.group, &def.kind, &mut obj);
        }
        if let Some(op) = fm {
            own_fields(op, None, &mut snapshot)?;
            set_managed_fields(&mut obj, snapshot["metadata"]["managedFields"].take());
        }
        self.mutate_on_create(def, &mut obj, user);
        let mut t = self.store.lock();
        let subject = Subject::new(&def.group, &def.resource, &name);
        if let Some(ns) = ns.filter(|_| def.namespaced) {
            self.admit_namespace(&t, ns, &subject)?;
        }
        if def.kind == "Pod" && def.group.is_empty() {
            self.admit_pod(&t, &mut obj, &subject)?;
        }
        if def.kind == "PersistentVolumeClaim" && def.group.is_empty() {
            crate::storage::default_claim_class(&t, &mut obj);
        }
        if t.get(&def.key(), &body_ns_or(ns, def), &name).is_some() {
            return Err(ApiError::already_exists(subject));
        }
        // The Service storage allocates ahead of the strategy's validation (BeginCreate);
        // what it took goes back if the create fails after.
        let service_txn = if def.kind == "Service" && def.group.is_empty() {
            Some(self.allocate_service_create(&t, &mut obj, &name)?)
        } else {
            None
        };
        let causes = self.validate(def, &obj, None);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                Subject::new(&def.group, &def.kind, &name),
                &causes,
            ));
        }
        let param_rbac = param_rbac.as_deref();
        crate::admission_policies::confirm_params(self, &t, param_rbac, user, def, &obj, None)?;
        if let Some(vap) = &policy_admission {
            let ns = if def.namespaced { ns.unwrap_or("") } else { "" };
            let mut a = Attrs::new(def, "", "CREATE", &requested_name, ns, user);
            a.object = Some(&obj);
            (a.dry_run, a.options) = (dry_run, Attrs::options_of("CreateOptions", dry_run));
            vap.admit(&t, &self.registry, &a)?;
        }
        let uid = uuid::Uuid::new_v4().to_string();
        {
            let m = meta_mut(&mut obj);
            m.insert("uid".into(), json!(uid));
            // The clock fault moves creation times (only them), for tests that age objects.
            let created = now() + self.faults.clock_offset();
            m.insert("creationTimestamp".into(), json!(timestamp(created)));
            if def.tracks_generation() {
                m.insert("generation".into(), json!(1));
            }
        }
        if def.kind == "Job" && def.group == "batch" {
            defaults::job_selector_and_labels(&mut obj, &uid);
            let causes = self.validate(def, &obj, None);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    Subject::new(&def.group, &def.kind, &name),
                    &causes,
                ));
            }
        }
        // ResourceQuota admission, after validation.
        if let Some(ns) = ns.filter(|_| def.namespaced) {
            let op = crate::quota::evaluator::Operation::Create;
            crate::quota::admit(&mut t, def, ns, op, &obj, None, dry_run)?;
        }
        if def.kind == "CustomResourceDefinition" {
            crate::crd::accept(&mut obj)
                .map_err(|c| ApiError::invalid(Subject::new(&def.group, &def.kind, &name), &c))?;
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
