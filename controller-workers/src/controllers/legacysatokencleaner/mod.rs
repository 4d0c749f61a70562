//! legacy-serviceaccount-token-cleaner-controller: auto-generated legacy ServiceAccount
//! token Secrets nobody used for `--legacy-service-account-token-clean-up-period` (a year
//! by default) are first labelled invalid, then, a period later, deleted (upstream
//! `pkg/controller/serviceaccount/legacy_serviceaccount_token_cleaner.go`).
//!
//! It has no queue: a pass over the Secret, ServiceAccount and Pod stores runs once they
//! are synced, then 24 h after each pass ends ([`Runnable::periodic`]). A pass first reads
//! the API server's tracking ConfigMap
//! `kube-system/kube-apiserver-legacy-service-account-token-tracking` live: usage is known
//! only from the day after its `since` date, so nothing happens before `since + 1 day +
//! period` (a missing or unparsable ConfigMap skips the pass, logged). Then each Secret is
//! judged by [`decide`] (all dates `YYYY-MM-DD` in UTC):
//! - a candidate is a `kubernetes.io/service-account-token` Secret created before
//!   now − period, not being deleted, whose `kubernetes.io/legacy-token-last-used` label is
//!   absent or older than date(now − period) (an unparsable one is skipped, logged), whose
//!   ServiceAccount (name and UID annotations, from the cache) lists it in `secrets`, and
//!   that no pod of its namespace references ([`pod_secrets`]);
//! - a candidate without a valid `kubernetes.io/legacy-token-invalid-since` label gets one
//!   with today's date (a merge patch carrying the Secret's UID);
//! - a candidate invalid since before date(now − period) is deleted, with its
//!   resourceVersion as precondition (a conflict or a Secret already gone is fine).
//!
//! Errors are logged; the next pass tries again. No events, no metrics, as upstream.

mod pod_secrets;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::jiff::civil::Date;
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use tracing::{error, info};

use crate::api_errors::{is_conflict, is_not_found};
use crate::controller::{ControllerContext, Runnable};
use crate::flags::parse_go_duration;
use crate::meta::ResourceNames;
use crate::store::Store;

pub const NAME: &str = "legacy-serviceaccount-token-cleaner-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// every place a pod names a Secret: image pull secrets, env and envFrom of every container, volumes.
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.imagePullSecrets",
        "spec.initContainers.env.valueFrom",
        "spec.initContainers.envFrom.secretRef",
        "spec.containers.env.valueFrom",
        "spec.containers.envFrom.secretRef",
        "spec.ephemeralContainers.env.valueFrom",
        "spec.ephemeralContainers.envFrom.secretRef",
        "spec.volumes",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/pods", "v1/secrets", "v1/serviceaccounts"];
/// Upstream's fixed `DefaultCleanerSyncInterval`.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(24 * 3600);
pub const TRACKING_CONFIG_MAP: &str = "kube-apiserver-legacy-service-account-token-tracking";
pub const TRACKING_SINCE_KEY: &str = "since";
pub const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
pub const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";
const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
const SERVICE_ACCOUNT_UID_KEY: &str = "kubernetes.io/service-account.uid";

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The period of time since the last usage of an legacy service account token before
    /// it can be deleted.
    #[arg(long, default_value = "8760h0m0s", value_parser = parse_go_duration)]
    pub legacy_service_account_token_clean_up_period: Duration,
}

/// The controller; a zero period is a start error, as upstream's constructor says.
pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let period = options.legacy_service_account_token_clean_up_period;
    if period.is_zero() {
        anyhow::bail!("invalid CleanUpPeriod: 0s (--legacy-service-account-token-clean-up-period must be more than 0)");
    }
    let (client, _recorder) = context.client_and_recorder(NAME)?;
    let controller = Arc::new(Controller {
        client,
        period,
        secrets: context.informers.get::<Secret>().store().clone(),
        accounts: context.informers.get::<ServiceAccount>().store().clone(),
        pods: context.informers.get::<Pod>().store().clone(),
    });
    Ok(Runnable::periodic(
        NAME,
        SYNC_INTERVAL,
        controller,
        |controller| async move { controller.pass(Timestamp::now()).await },
    ))
}

struct Controller {
    client: kube::Client,
    period: Duration,
    secrets: Store<Secret>,
    accounts: Store<ServiceAccount>,
    pods: Store<Pod>,
}

/// What a pass does with one Secret.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Not a candidate, or one still within its period.
    Keep,
    /// Its last-used label is not a date: it cannot be judged (logged).
    UnparsableLastUsed,
    /// Label it `invalid-since` this date.
    MarkInvalid(String),
    Delete,
}

/// Upstream's date format; anything else does not parse, as Go's `time.Parse` says.
fn parse_date(text: &str) -> Option<Date> {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| bytes[range].iter().all(u8::is_ascii_digit);
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    if !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text[range].parse::<i16>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    Date::new(year, i8::try_from(month).ok()?, i8::try_from(day).ok()?).ok()
}

/// A time's UTC date as upstream writes it.
fn date_of(time: Timestamp) -> String {
    time.to_zoned(TimeZone::UTC)
        .date()
        .strftime("%Y-%m-%d")
        .to_string()
}

fn minus(time: Timestamp, period: Duration) -> Option<Timestamp> {
    SignedDuration::try_from(period)
        .ok()
        .and_then(|period| time.checked_sub(period).ok())
}

/// Whether usage has been tracked for a whole period: `now` is at least midnight UTC of
/// the day after `since`, plus the period.
fn tracked_long_enough(since: Date, now: Timestamp, period: Duration) -> bool {
    let Some(start) = since
        .tomorrow()
        .ok()
        .and_then(|day| day.to_zoned(TimeZone::UTC).ok())
        .map(|zoned| zoned.timestamp())
    else {
        return false;
    };
    match SignedDuration::try_from(period)
        .ok()
        .and_then(|period| start.checked_add(period).ok())
    {
        Some(from) => now >= from,
        None => false,
    }
}

fn label<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Upstream's judgement of one Secret (see the module documentation). `account` is the
/// ServiceAccount the Secret's annotations name (from the cache), `mounted` whether a pod
/// of its namespace references it; both are asked only when the earlier checks pass.
fn decide(
    secret: &Secret,
    now: Timestamp,
    period: Duration,
    account: impl FnOnce() -> Option<Arc<ServiceAccount>>,
    mounted: impl FnOnce() -> bool,
) -> Decision {
    if secret.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
        return Decision::Keep;
    }
    let Some(oldest_kept) = minus(now, period) else {
        // A period reaching before the calendar's start keeps everything.
        return Decision::Keep;
    };
    let created = secret.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if created.is_some_and(|created| created >= oldest_kept) {
        return Decision::Keep;
    }
    if secret.metadata.deletion_timestamp.is_some() {
        return Decision::Keep;
    }
    let used_on_or_after = date_of(oldest_kept);
    if let Some(last_used) = label(secret, LAST_USED_LABEL) {
        if parse_date(last_used).is_none() {
            return Decision::UnparsableLastUsed;
        }
        if last_used >= used_on_or_after.as_str() {
            return Decision::Keep;
        }
    }
    let name = secret.name_str();
    let Some(account) = account() else {
        return Decision::Keep;
    };
    let referenced = account
        .secrets
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|r| r.name.as_deref() == Some(name));
    if !referenced {
        // Not known to be auto-generated.
        return Decision::Keep;
    }
    if mounted() {
        return Decision::Keep;
    }
    match label(secret, INVALID_SINCE_LABEL).filter(|since| parse_date(since).is_some()) {
        None => Decision::MarkInvalid(date_of(now)),
        Some(since) if since >= used_on_or_after.as_str() => Decision::Keep,
        Some(_) => Decision::Delete,
    }
}

/// The merge patch that labels a Secret invalid (upstream's apply configuration: kind,
/// apiVersion, and the Secret's name, namespace and UID with the label).
fn invalid_since_patch(secret: &Secret, date: &str) -> serde_json::Value {
    let meta = &secret.metadata;
    json!({"kind": "Secret", "apiVersion": "v1", "metadata": {
        "name": meta.name, "namespace": meta.namespace, "uid": meta.uid,
        "labels": {INVALID_SINCE_LABEL: date}}})
}

impl Controller {
    /// One pass at `now` (see the module documentation).
    async fn pass(&self, now: Timestamp) {
        let since = match self.tracked_since().await {
            Ok(since) => since,
            Err(error) => {
                error!(controller = NAME, error = %crate::controller::describe(&error), "Getting lastest possible tracked_since time");
                return;
            }
        };
        if !tracked_long_enough(since, now, self.period) {
            return;
        }
        let mut mounted_by_namespace: HashMap<String, HashSet<String>> = HashMap::new();
        for secret in self.secrets.list() {
            let namespace = secret.namespace_str();
            let name = secret.name_str();
            let decision = decide(
                &secret,
                now,
                self.period,
                || self.account_of(&secret),
                || {
                    mounted_by_namespace
                        .entry(namespace.to_string())
                        .or_insert_with(|| {
                            pod_secrets::referenced_secrets(&self.pods.list_namespace(namespace))
                        })
                        .contains(name)
                },
            );
            match decision {
                Decision::Keep => {}
                Decision::UnparsableLastUsed => {
                    error!(controller = NAME, secret = %format!("{namespace}/{name}"), "Parsing lastUsed time: the {LAST_USED_LABEL} label is not a YYYY-MM-DD date");
                }
                Decision::MarkInvalid(date) => self.mark_invalid(&secret, &date).await,
                Decision::Delete => self.delete(&secret).await,
            }
        }
    }

    /// The tracking ConfigMap's `since`, read live.
    async fn tracked_since(&self) -> anyhow::Result<Date> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let map = api.get(TRACKING_CONFIG_MAP).await.map_err(|error| {
            anyhow::Error::new(error).context(format!(
                "getting configmap kube-system/{TRACKING_CONFIG_MAP}"
            ))
        })?;
        let since = map
            .data
            .as_ref()
            .and_then(|d| d.get(TRACKING_SINCE_KEY))
            .ok_or_else(|| anyhow::anyhow!("configMap does not have since label"))?;
        parse_date(since).ok_or_else(|| {
            anyhow::anyhow!("error parsing trackedSince time: {since:?} is not a YYYY-MM-DD date")
        })
    }

    /// The cached ServiceAccount the Secret's annotations name (and its UID, if given).
    fn account_of(&self, secret: &Secret) -> Option<Arc<ServiceAccount>> {
        let name = annotation(secret, SERVICE_ACCOUNT_NAME_KEY).filter(|n| !n.is_empty())?;
        let uid = annotation(secret, SERVICE_ACCOUNT_UID_KEY).unwrap_or("");
        let namespace = secret.namespace_str();
        self.accounts
            .get_in(namespace, name)
            .filter(|account| uid.is_empty() || account.metadata.uid.as_deref() == Some(uid))
    }

    async fn mark_invalid(&self, secret: &Secret, date: &str) {
        let namespace = secret.namespace_str();
        let name = secret.name_str();
        info!(controller = NAME, secret = %format!("{namespace}/{name}"), invalid_since = date, "Mark the auto-generated service account token as invalid");
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let patch = invalid_since_patch(secret, date);
        if let Err(error) = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            error!(controller = NAME, secret = %format!("{namespace}/{name}"), error = %crate::api_errors::message(&error), "Failed to label legacy service account token secret with invalid since date");
        }
    }

    async fn delete(&self, secret: &Secret) {
        let meta = &secret.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or("");
        let name = meta.name.as_deref().unwrap_or("");
        info!(controller = NAME, secret = %format!("{namespace}/{name}"),
            last_used = label(secret, LAST_USED_LABEL).unwrap_or(""),
            invalid_since = label(secret, INVALID_SINCE_LABEL).unwrap_or(""),
            "Delete auto-generated service account token");
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: meta.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &params).await {
            Ok(_) => {}
            Err(error) if is_conflict(&error) || is_not_found(&error) => {}
            Err(error) => {
                error!(controller = NAME, secret = %format!("{namespace}/{name}"), error = %crate::api_errors::message(&error), "Deleting legacy service account token");
            }
        }
    }
}

#[cfg(test)]
mod tests;
