//! certificatesigningrequest-cleaner-controller (upstream `cleaner/cleaner.go`): automatic
//! requests and approvals would pile up for ever, so once at start and then an hour after
//! each pass every cached request is checked and deleted when it is done with:
//! approved and issued an hour after its approval; denied or failed an hour after that
//! condition; pending (no condition at all) a day after its creation; approved and issued
//! with a certificate that has expired. A condition without a lastUpdateTime never ages,
//! and an approved request without a certificate (say, for a signer nobody runs) stays.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams};
use tracing::{error, info};

use super::{conditions, is_issued, APPROVED, CLEANER_NAME, DENIED, FAILED};
use crate::api_errors::is_not_found;
use crate::controller::{ControllerContext, Runnable};
use crate::meta::ResourceNames;
use crate::store::Store;

/// How often the requests are checked.
pub const POLLING_INTERVAL: Duration = Duration::from_secs(3600);
const APPROVED_EXPIRATION: Duration = Duration::from_secs(3600);
const DENIED_EXPIRATION: Duration = Duration::from_secs(3600);
const PENDING_EXPIRATION: Duration = Duration::from_secs(24 * 3600);

/// Why a request is to be deleted: upstream's log line and the age it was held to.
#[derive(Debug, PartialEq)]
pub(crate) struct Cleanup {
    pub message: &'static str,
    pub expiration: Option<(&'static str, Duration)>,
}

/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix seconds.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Set and more than `age` before `now`.
fn is_older_than(time: Option<&Time>, age: Duration, now: Timestamp) -> bool {
    let Some(Time(time)) = time else {
        return false;
    };
    // Go's zero time is never old: a missing or zero lastUpdateTime does not age.
    if time.as_second() <= GO_ZERO_TIME {
        return false;
    }
    now.duration_since(*time)
        > jiff::SignedDuration::try_from(age).unwrap_or(jiff::SignedDuration::MAX)
}

/// Whether the first certificate of the request's PEM has expired (false when there is
/// none or it does not parse).
fn is_expired(csr: &CertificateSigningRequest, now: Timestamp) -> bool {
    let Some(certificate) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()) else {
        return false;
    };
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(&certificate.0) else {
        return false;
    };
    let Ok(parsed) = pem.parse_x509() else {
        return false;
    };
    now.as_second() > parsed.validity().not_after.timestamp()
}

/// Whether and why the cleaner deletes this request at `now` (upstream's checks in
/// upstream's order).
pub(crate) fn cleanup(csr: &CertificateSigningRequest, now: Timestamp) -> Option<Cleanup> {
    let conditions = conditions(csr);
    let issued = is_issued(csr);
    let aged = |type_: &str, age: Duration| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && is_older_than(c.last_update_time.as_ref(), age, now))
    };
    if issued && aged(APPROVED, APPROVED_EXPIRATION) {
        return Some(Cleanup {
            message:
                "Cleaning CSR as it is more than approvedExpiration duration old and approved.",
            expiration: Some(("approvedExpiration", APPROVED_EXPIRATION)),
        });
    }
    if aged(DENIED, DENIED_EXPIRATION) {
        return Some(Cleanup {
            message: "Cleaning CSR as it is more than deniedExpiration duration old and denied.",
            expiration: Some(("deniedExpiration", DENIED_EXPIRATION)),
        });
    }
    if aged(FAILED, DENIED_EXPIRATION) {
        return Some(Cleanup {
            message: "Cleaning CSR as it is more than deniedExpiration duration old and failed.",
            expiration: Some(("deniedExpiration", DENIED_EXPIRATION)),
        });
    }
    if conditions.is_empty()
        && is_older_than(
            csr.metadata.creation_timestamp.as_ref(),
            PENDING_EXPIRATION,
            now,
        )
    {
        return Some(Cleanup {
            message:
                "Cleaning CSR as it is more than pendingExpiration duration old and unhandled.",
            expiration: Some(("pendingExpiration", PENDING_EXPIRATION)),
        });
    }
    if issued && conditions.iter().any(|c| c.type_ == APPROVED) && is_expired(csr, now) {
        return Some(Cleanup {
            message: "Cleaning CSR as the associated certificate is expired.",
            expiration: None,
        });
    }
    None
}

struct Cleaner {
    client: kube::Client,
    requests: Store<CertificateSigningRequest>,
}

pub(crate) fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let cleaner = Arc::new(Cleaner {
        client: context.clients.client(CLEANER_NAME)?,
        requests: context
            .informers
            .get::<CertificateSigningRequest>()
            .store()
            .clone(),
    });
    info!(controller = CLEANER_NAME, "Starting CSR cleaner controller");
    Ok(Runnable::periodic(
        CLEANER_NAME,
        POLLING_INTERVAL,
        cleaner,
        |cleaner| async move { cleaner.pass().await },
    ))
}

impl Cleaner {
    async fn pass(&self) {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let now = Timestamp::now();
        for csr in self.requests.list() {
            let Some(cleanup) = cleanup(&csr, now) else {
                continue;
            };
            let name = csr.name_str().to_string();
            match cleanup.expiration {
                Some((what, age)) => {
                    info!(controller = CLEANER_NAME, csr = %name, expiration = what, age = ?age, "{}", cleanup.message)
                }
                None => info!(controller = CLEANER_NAME, csr = %name, "{}", cleanup.message),
            }
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    error!(controller = CLEANER_NAME, csr = %name, error = %format!("unable to delete CSR {name:?}: {e}"), "Error while attempting to clean CSR")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::certificates::testing::request;
    use k8s_openapi::ByteString;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// A certificate valid until `not_after`.
    fn certificate(not_after: Timestamp) -> ByteString {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before =
            time::OffsetDateTime::from_unix_timestamp(not_after.as_second() - 7200).unwrap();
        params.not_after =
            time::OffsetDateTime::from_unix_timestamp(not_after.as_second()).unwrap();
        let cert = params
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap();
        ByteString(cert.pem().into_bytes())
    }

    #[test]
    fn requests_are_deleted_at_upstreams_ages() {
        let now = ts("2024-06-01T12:00:00Z");
        let min = |m: i64| now.checked_sub(jiff::SignedDuration::from_mins(m)).unwrap();
        let future = ts("2025-01-01T00:00:00Z");
        let past = min(1);
        type Case = (
            &'static str,
            Vec<(&'static str, Option<Timestamp>)>,
            Option<Timestamp>,
            Option<Timestamp>,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            // (what, conditions, certificate NotAfter, created, expected message)
            (
                "approved+issued, 61m",
                vec![(APPROVED, Some(min(61)))],
                Some(future),
                Some(min(90)),
                Some("approvedExpiration"),
            ),
            (
                "approved+issued, 59m",
                vec![(APPROVED, Some(min(59)))],
                Some(future),
                Some(min(90)),
                None,
            ),
            (
                "approved+issued, no lastUpdateTime",
                vec![(APPROVED, None)],
                Some(future),
                Some(min(9000)),
                None,
            ),
            (
                "approved+issued, zero lastUpdateTime",
                vec![(APPROVED, Some(ts("0001-01-01T00:00:00Z")))],
                Some(future),
                Some(min(9000)),
                None,
            ),
            (
                "approved unsigned, old",
                vec![(APPROVED, Some(min(600)))],
                None,
                Some(min(9000)),
                None,
            ),
            (
                "denied, 61m",
                vec![(DENIED, Some(min(61)))],
                None,
                Some(min(90)),
                Some("deniedExpiration duration old and denied"),
            ),
            (
                "denied, 10m",
                vec![(DENIED, Some(min(10)))],
                None,
                Some(min(9000)),
                None,
            ),
            (
                "failed, 61m",
                vec![(FAILED, Some(min(61)))],
                None,
                Some(min(90)),
                Some("deniedExpiration duration old and failed"),
            ),
            (
                "pending, 25h",
                vec![],
                None,
                Some(min(25 * 60)),
                Some("pendingExpiration"),
            ),
            ("pending, 23h", vec![], None, Some(min(23 * 60)), None),
            (
                "approved+issued, expired",
                vec![(APPROVED, Some(min(5)))],
                Some(past),
                Some(min(90)),
                Some("certificate is expired"),
            ),
            (
                "issued without approval, expired",
                vec![(DENIED, Some(min(5)))],
                Some(past),
                Some(min(90)),
                None,
            ),
        ];
        for (what, conditions, not_after, created, want) in cases {
            let mut csr = request("example.com/x", b"", &[], &conditions);
            csr.metadata.creation_timestamp = created.map(Time);
            if let Some(not_after) = not_after {
                csr.status.as_mut().unwrap().certificate = Some(certificate(not_after));
            }
            let got = cleanup(&csr, now).map(|c| c.message);
            match want {
                None => assert_eq!(got, None, "{what}"),
                Some(part) => assert!(
                    got.is_some_and(|m| m.contains(part)),
                    "{what}: expected a cleanup with {part:?}, got {got:?}"
                ),
            }
        }
    }

    #[test]
    fn an_unparsable_certificate_never_expires() {
        let now = ts("2024-06-01T12:00:00Z");
        let mut csr = request("example.com/x", b"", &[], &[(APPROVED, Some(now))]);
        csr.status.as_mut().unwrap().certificate = Some(ByteString(b"garbage".to_vec()));
        assert_eq!(cleanup(&csr, now), None);
    }
}
