//! validatingadmissionpolicy-status-controller (feature gate `ValidatingAdmissionPolicy`):
//! type-checks every ValidatingAdmissionPolicy of `admissionregistration.k8s.io/v1beta1`
//! against the schemas of the kinds it matches and writes what the checker says into its
//! status (upstream `pkg/controller/validatingadmissionpolicystatus/`).
//!
//! Keys are policy names (queue `validatingadmissionpolicy-status`, retried for ever with
//! the default rate limiter). A policy whose `metadata.generation` is past its
//! `status.observedGeneration` is checked ([`typecheck`]) and gets, by a forced apply of its
//! status with field manager `validatingadmissionpolicy-status`, `status.observedGeneration`
//! and `status.typeChecking.expressionWarnings` (one per expression that does not check
//! against some matched kind: `fieldRef` and cel-go's text). Deleted policies need nothing.

mod schemas;
mod typecheck;

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1beta1::ValidatingAdmissionPolicy;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::store::Store;
use typecheck::{ExpressionWarning, TypeChecker};

pub const NAME: &str = "validatingadmissionpolicy-status-controller";
pub const RESOURCES: &[&str] =
    &["admissionregistration.k8s.io/v1beta1/validatingadmissionpolicies"];
/// Upstream's `ControllerName`: the queue's name and the status apply's field manager.
const CONTROLLER_NAME: &str = "validatingadmissionpolicy-status";

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of ValidatingAdmissionPolicyStatusController workers that are allowed to sync concurrently.
    #[arg(long, default_value_t = 5)]
    pub concurrent_validating_admission_policy_status_syncs: usize,
}

pub(crate) struct Controller {
    client: kube::Client,
    policies: Store<ValidatingAdmissionPolicy>,
    checker: TypeChecker,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(CONTROLLER_NAME);
    let policies = context.informers.get::<ValidatingAdmissionPolicy>();
    {
        let queue = queue.clone();
        policies.add_handler(Arc::new(move |change| {
            // Adds and updates only: a deleted policy has no status to write.
            if let Some(name) = change.live().and_then(|p| p.metadata.name.as_ref()) {
                queue.add(name.clone());
            }
        }));
    }
    let checker = TypeChecker::new(client.clone(), context.informers.client());
    let controller = Arc::new(Controller {
        client,
        policies: policies.store().clone(),
        checker,
    });
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_validating_admission_policy_status_syncs,
        controller,
        |controller, key| async move { controller.reconcile(&key).await },
    ))
}

/// Whether the policy's current generation still needs checking.
fn needs_check(policy: &ValidatingAdmissionPolicy) -> bool {
    let generation = policy.metadata.generation.unwrap_or(0);
    let observed = policy
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    generation > observed
}

/// The apply configuration upstream sends: name, observedGeneration and the warnings (an
/// empty list is left out, so `typeChecking` is `{}`).
fn status_apply(name: &str, generation: i64, warnings: &[ExpressionWarning]) -> Value {
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        type_checking["expressionWarnings"] = warnings
            .iter()
            .map(|w| json!({"fieldRef": w.field_ref, "warning": w.warning}))
            .collect();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1beta1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "typeChecking": type_checking},
    })
}

impl Controller {
    async fn reconcile(&self, name: &str) -> anyhow::Result<()> {
        // Not in the cache: being deleted, nothing to do.
        let Some(policy) = self.policies.get(name) else {
            return Ok(());
        };
        if !needs_check(&policy) {
            return Ok(());
        }
        let warnings = self.checker.check(&policy).await;
        let generation = policy.metadata.generation.unwrap_or(0);
        debug!(
            controller = NAME,
            policy = name,
            generation,
            warnings = warnings.len(),
            "type-checked policy"
        );
        let api: Api<ValidatingAdmissionPolicy> = Api::all(self.client.clone());
        let params = PatchParams::apply(CONTROLLER_NAME).force();
        api.patch_status(
            name,
            &params,
            &Patch::Apply(status_apply(name, generation, &warnings)),
        )
        .await
        .with_context(|| format!("applying the status of ValidatingAdmissionPolicy {name}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
