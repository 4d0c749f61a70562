//! Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm and
//! timings (tools/leaderelection), so rkcm and kube-controller-manager can share the
//! same Lease and never both lead:
//!
//! - a candidate tries every retry period (jittered by up to 1.2x) to create the Lease
//!   or take it over; it may take it over only when the holder has not renewed it for
//!   the lease duration, measured on the candidate's own clock from when it last saw
//!   the record change (clock skew between hosts does not matter);
//! - the leader renews every retry period; if it cannot renew within the renew
//!   deadline it has lost the lease and must stop at once;
//! - taking the Lease over sets acquireTime and increments leaseTransitions; renewing
//!   keeps both; releasing (on SIGTERM) empties holderIdentity so a successor need not
//!   wait out the lease.
//!
//! Writes are optimistic (resourceVersion), so two candidates racing for the Lease
//! produce one winner and one 409.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use rand::Rng;
use tracing::{debug, info, warn};

#[derive(Clone, Debug)]
pub(crate) struct ElectionConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// client-go's checks on the timings.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                    .into(),
            );
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err("--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period".into());
        }
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be greater than zero".into());
        }
        Ok(())
    }
}

/// What the elector last saw of the Lease.
struct Observed {
    holder: String,
    renew_time: Option<MicroTime>,
    at: Instant,
}

pub(crate) struct Elector {
    api: Api<Lease>,
    config: ElectionConfig,
    observed: Option<Observed>,
    /// When we last held the Lease after a write (for the leaderElection health check).
    pub renewed: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// We hold the Lease (acquired or renewed).
    Held,
    /// Someone else holds it, or we lost a race.
    NotHeld,
}

fn jittered(period: Duration) -> Duration {
    // client-go: JitterUntil(period, 1.2): up to 1.2 x period extra.
    period.mul_f64(1.0 + 1.2 * rand::rng().random::<f64>())
}

impl Elector {
    pub(crate) fn new(client: kube::Client, config: ElectionConfig) -> Self {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            renewed: Default::default(),
        }
    }

    /// One try to acquire or renew (client-go's tryAcquireOrRenew).
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = Timestamp::now();
        let duration_seconds = self.config.lease_duration.as_secs().max(1) as i32;
        let existing = self.api.get_opt(&self.config.name).await?;
        let Some(mut lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::NotHeld),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        // A change of holder or renew time restarts our clock on the record.
        let changed = match &self.observed {
            Some(observed) => observed.holder != holder || observed.renew_time != spec.renew_time,
            None => true,
        };
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew_time: spec.renew_time.clone(),
                at: Instant::now(),
            });
        }
        let ours = holder == self.config.identity;
        if !ours && !holder.is_empty() {
            let observed_at = self
                .observed
                .as_ref()
                .map(|o| o.at)
                .unwrap_or_else(Instant::now);
            let held_for = Duration::from_secs(
                spec.lease_duration_seconds
                    .unwrap_or(duration_seconds)
                    .max(0) as u64,
            );
            if observed_at.elapsed() < held_for {
                return Ok(Attempt::NotHeld);
            }
        }
        let mut new_spec = spec.clone();
        if !ours {
            new_spec.acquire_time = Some(MicroTime(now));
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        new_spec.holder_identity = Some(self.config.identity.clone());
        new_spec.lease_duration_seconds = Some(duration_seconds);
        new_spec.renew_time = Some(MicroTime(now));
        lease.spec = Some(new_spec);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::NotHeld),
            Err(error) => Err(error),
        }
    }

    fn observe(&mut self, lease: &Lease) {
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        let spec = lease.spec.clone().unwrap_or_default();
        self.observed = Some(Observed {
            holder: spec.holder_identity.unwrap_or_default(),
            renew_time: spec.renew_time,
            at: Instant::now(),
        });
    }

    /// Tries until the Lease is ours.
    pub(crate) async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => {
                    info!(
                        "successfully acquired lease {}/{}",
                        self.config.namespace, self.config.name
                    );
                    return;
                }
                Ok(Attempt::NotHeld) => {
                    debug!(holder = ?self.observed.as_ref().map(|o| &o.holder), "lease held by another candidate");
                }
                Err(error) => warn!(%error, "error retrieving or updating the lease; retrying"),
            }
            tokio::time::sleep(jittered(self.config.retry_period)).await;
        }
    }

    /// Renews every retry period; returns when the Lease could not be renewed within the
    /// renew deadline (leadership lost).
    pub(crate) async fn hold(&mut self) {
        let mut last_renew = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Held)) => last_renew = Instant::now(),
                Ok(Ok(Attempt::NotHeld)) => {
                    warn!("the lease was taken by another candidate");
                    return;
                }
                Ok(Err(error)) => warn!(%error, "failed to renew the lease"),
                Err(_) => warn!("renewing the lease timed out"),
            }
            if last_renew.elapsed() >= self.config.renew_deadline {
                warn!(
                    "failed to renew lease {}/{}: timed out reaching the renew deadline",
                    self.config.namespace, self.config.name
                );
                return;
            }
        }
    }

    /// Gives the Lease up (SIGTERM), so the next candidate need not wait for it to expire.
    pub(crate) async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = Timestamp::now();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(now));
        spec.acquire_time = Some(MicroTime(now));
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => info!(
                "released lease {}/{}",
                self.config.namespace, self.config.name
            ),
            Err(error) => warn!(%error, "could not release the lease"),
        }
    }
}

/// KCM's identity: `HOSTNAME_UUID`.
pub(crate) fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_are_checked_as_client_go() {
        let mut config = ElectionConfig {
            namespace: "kube-system".into(),
            name: "kube-controller-manager".into(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        assert!(config.validate().is_ok());
        config.renew_deadline = Duration::from_secs(15);
        assert!(config.validate().is_err());
        config.renew_deadline = Duration::from_secs(2);
        assert!(config.validate().is_err());
    }

    #[test]
    fn identity_is_host_underscore_uuid() {
        let id = identity();
        let (_, uuid) = id.rsplit_once('_').unwrap();
        assert_eq!(uuid.len(), 36);
    }
}
