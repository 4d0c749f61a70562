//! certificatesigningrequest-signing-controller (upstream `signer/signer.go` and KCM's
//! `startCertificateSigningRequestSigningController`): one certificate controller per
//! kubernetes.io signer (`csrsigning-kubelet-serving`, `-kubelet-client`,
//! `-kube-apiserver-client`, `-legacy-unknown`, 5 workers each) issues certificates for the
//! approved requests of its signer from its CA.
//!
//! The CA is `--cluster-signing-{cert,key}-file` for all four, or per signer
//! `--cluster-signing-<signer>-{cert,key}-file` (then a signer without files does not run);
//! with neither the controller does not start. The flags are checked at start as KCM
//! checks them ([`Options::validate`]). A CA that cannot be read keeps its loop from
//! starting (logged) while the others run. A request the signer's rules refuse gets a
//! `Failed` condition (reason `SignerValidationFailure`) through `/status`; an issued one
//! gets its PEM certificate there. Lifetimes: `--cluster-signing-duration`, or the
//! request's `spec.expirationSeconds` when shorter (at least 10 minutes).

mod authority;
mod ca;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use tracing::{debug, error, info};

use super::csr::{self, ParsedCsr};
use super::{
    certificate_controller, has_true_condition, is_approved, FAILED, KUBELET_SERVING_SIGNER,
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER, LEGACY_UNKNOWN_SIGNER,
    SIGNING_NAME,
};
use crate::controller::{ControllerContext, Runnable};
use crate::meta::ResourceNames;

use self::ca::CaProvider;

/// Upstream starts each signer loop with 5 workers.
const WORKERS: usize = 5;
/// The least lifetime a request may ask for (twice the backdate).
const MIN_DURATION: Duration = Duration::from_secs(10 * 60);

/// KCM's CSR signing flags, its names, defaults and help.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Filename containing a PEM-encoded X509 CA certificate used to issue cluster-scoped
    /// certificates.  If specified, no more specific --cluster-signing-* flag may be
    /// specified.
    #[arg(long, value_parser = path)]
    pub cluster_signing_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded RSA or ECDSA private key used to sign
    /// cluster-scoped certificates.  If specified, no more specific --cluster-signing-*
    /// flag may be specified.
    #[arg(long, value_parser = path)]
    pub cluster_signing_key_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded X509 CA certificate used to issue certificates
    /// for the kubernetes.io/kubelet-serving signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kubelet_serving_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates
    /// for the kubernetes.io/kubelet-serving signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kubelet_serving_key_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded X509 CA certificate used to issue certificates
    /// for the kubernetes.io/kube-apiserver-client-kubelet signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kubelet_client_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates
    /// for the kubernetes.io/kube-apiserver-client-kubelet signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kubelet_client_key_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded X509 CA certificate used to issue certificates
    /// for the kubernetes.io/kube-apiserver-client signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kube_apiserver_client_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates
    /// for the kubernetes.io/kube-apiserver-client signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_kube_apiserver_client_key_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded X509 CA certificate used to issue certificates
    /// for the kubernetes.io/legacy-unknown signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_legacy_unknown_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates
    /// for the kubernetes.io/legacy-unknown signer.  If specified,
    /// --cluster-signing-{cert,key}-file must not be set.
    #[arg(long, value_parser = path)]
    pub cluster_signing_legacy_unknown_key_file: Option<PathBuf>,
    /// The max length of duration signed certificates will be given.  Individual CSRs may
    /// request shorter certs by setting spec.expirationSeconds.
    #[arg(long, default_value = "8760h0m0s", value_parser = crate::flags::parse_go_duration)]
    pub cluster_signing_duration: Duration,
}

/// A file flag's value as given: KCM's are strings, and an empty one means unset.
fn path(value: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(value))
}

/// A flag's file, unset when absent or empty (as KCM's string flags are).
fn set(path: &Option<PathBuf>) -> Option<&Path> {
    path.as_deref().filter(|p| !p.as_os_str().is_empty())
}

/// One signer's pair of flags.
struct SignerFiles<'a> {
    signer: &'static str,
    loop_name: &'static str,
    /// The name KCM's option validation prints for the pair (its names, mistakes kept).
    validation_name: &'static str,
    cert: Option<&'a Path>,
    key: Option<&'a Path>,
}

impl Options {
    fn specific(&self) -> [SignerFiles<'_>; 4] {
        [
            SignerFiles {
                signer: KUBELET_SERVING_SIGNER,
                loop_name: "csrsigning-kubelet-serving",
                validation_name: "cluster-signing-kubelet-serving",
                cert: set(&self.cluster_signing_kubelet_serving_cert_file),
                key: set(&self.cluster_signing_kubelet_serving_key_file),
            },
            SignerFiles {
                signer: KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                loop_name: "csrsigning-kubelet-client",
                validation_name: "cluster-signing-kube-apiserver-client",
                cert: set(&self.cluster_signing_kubelet_client_cert_file),
                key: set(&self.cluster_signing_kubelet_client_key_file),
            },
            SignerFiles {
                signer: KUBE_APISERVER_CLIENT_SIGNER,
                loop_name: "csrsigning-kube-apiserver-client",
                validation_name: "cluster-signing-kube-apiserver",
                cert: set(&self.cluster_signing_kube_apiserver_client_cert_file),
                key: set(&self.cluster_signing_kube_apiserver_client_key_file),
            },
            SignerFiles {
                signer: LEGACY_UNKNOWN_SIGNER,
                loop_name: "csrsigning-legacy-unknown",
                validation_name: "cluster-signing-legacy-unknown",
                cert: set(&self.cluster_signing_legacy_unknown_cert_file),
                key: set(&self.cluster_signing_legacy_unknown_key_file),
            },
        ]
    }

    fn any_specific_files_set(&self) -> bool {
        self.specific()
            .iter()
            .any(|files| files.cert.is_some() || files.key.is_some())
    }

    /// KCM's option validation of these flags (whichever controllers run), its errors
    /// joined as KCM's aggregate prints them.
    pub fn validate(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        for files in self.specific() {
            let problem = match (files.cert, files.key) {
                (None, Some(_)) => Some("cannot specify key without cert"),
                (Some(_), None) => Some("cannot specify cert without key"),
                _ => None,
            };
            if let Some(problem) = problem {
                errors.push(format!("{:?}: {problem}", files.validation_name));
            }
        }
        let single = set(&self.cluster_signing_cert_file).is_some()
            || set(&self.cluster_signing_key_file).is_some();
        if single && self.any_specific_files_set() {
            errors.push("cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time".into());
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }

    /// The files each signer loop uses: its own when any signer has its own, else the
    /// cluster pair.
    fn files_of(&self) -> Vec<SignerFiles<'_>> {
        let specific = self.any_specific_files_set();
        self.specific()
            .into_iter()
            .map(|files| {
                if specific {
                    files
                } else {
                    SignerFiles {
                        cert: set(&self.cluster_signing_cert_file),
                        key: set(&self.cluster_signing_key_file),
                        ..files
                    }
                }
            })
            .collect()
    }
}

/// The signing loops KCM's start-up rules give these flags.
pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    let missing_single = set(&options.cluster_signing_cert_file).is_none()
        || set(&options.cluster_signing_key_file).is_none();
    let any_specific = options.any_specific_files_set();
    if missing_single && !any_specific {
        info!(
            controller = SIGNING_NAME,
            "Skipping CSR signer controller because no csr cert/key was specified"
        );
        return Ok(Vec::new());
    }
    if !missing_single && any_specific {
        anyhow::bail!("cannot specify default and per controller certs at the same time");
    }
    let client = context.clients.client(SIGNING_NAME)?;
    let mut runnables = Vec::new();
    for files in options.files_of() {
        let (cert, key) = match (files.cert, files.key) {
            (None, None) => {
                info!(
                    controller = files.signer,
                    "Skipping CSR signer controller because specific files were specified for other signers and not this one"
                );
                continue;
            }
            (cert, key) => (cert.unwrap_or(Path::new("")), key.unwrap_or(Path::new(""))),
        };
        let provider = if cert.as_os_str().is_empty() || key.as_os_str().is_empty() {
            Err(format!(
                "error reading CA cert file {:?}: missing filename for serving cert",
                cert.display().to_string()
            ))
        } else {
            CaProvider::new(cert, key)
        };
        let ca = match provider {
            Ok(ca) => ca,
            Err(why) => {
                error!(
                    controller = SIGNING_NAME,
                    "failed to start {} certificate controller: {why}", files.signer
                );
                continue;
            }
        };
        let signer = Arc::new(Signer {
            signer_name: files.signer,
            client: client.clone(),
            ca,
            cert_ttl: options.cluster_signing_duration,
        });
        info!(controller = SIGNING_NAME, signer = files.signer, cert_file = %cert.display(), "starting certificate controller");
        runnables.push(certificate_controller(
            context,
            SIGNING_NAME,
            files.loop_name,
            WORKERS,
            move |csr| {
                let signer = signer.clone();
                async move { signer.handle(csr).await }
            },
        ));
    }
    Ok(runnables)
}

/// What a signer's rules say of a request it may sign (upstream's `isRequestForSignerFn`,
/// for requests of its own signer).
fn validate(signer: &str, csr: &ParsedCsr, usages: &[String]) -> Result<(), String> {
    match signer {
        KUBELET_SERVING_SIGNER => csr::validate_kubelet_serving(csr, &csr::usage_set(usages)),
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER => {
            csr::validate_kubelet_client(csr, &csr::usage_set(usages))
        }
        KUBE_APISERVER_CLIENT_SIGNER => valid_api_server_client_usages(usages),
        // No rule for the legacy signer, for compatibility.
        _ => Ok(()),
    }
}

/// A kube-apiserver client certificate: client auth, optionally digital signature and key
/// encipherment, nothing else.
fn valid_api_server_client_usages(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for usage in usages {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok(())
}

/// The lifetime of a certificate: the maximum, or the request's shorter one, at least
/// ten minutes.
fn duration(cert_ttl: Duration, expiration_seconds: Option<i32>) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return cert_ttl;
    };
    let requested = i64::from(seconds);
    if requested > 0 && Duration::from_secs(requested.unsigned_abs()) > cert_ttl {
        cert_ttl
    } else if requested < MIN_DURATION.as_secs() as i64 {
        MIN_DURATION
    } else {
        Duration::from_secs(requested.unsigned_abs())
    }
}

struct Signer {
    signer_name: &'static str,
    client: kube::Client,
    ca: CaProvider,
    cert_ttl: Duration,
}

impl Signer {
    async fn handle(&self, mut csr: CertificateSigningRequest) -> anyhow::Result<()> {
        if !is_approved(&csr) || has_true_condition(&csr, FAILED) {
            return Ok(());
        }
        if csr.spec.signer_name != self.signer_name {
            return Ok(());
        }
        let name = csr.name_str().to_string();
        let parsed = csr::parse(&csr.spec.request.0)
            .map_err(|e| anyhow::anyhow!("unable to parse csr {name:?}: {e}"))?;
        let usages = csr.spec.usages.clone().unwrap_or_default();
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        if let Err(message) = validate(self.signer_name, &parsed, &usages) {
            let status = csr
                .status
                .get_or_insert_with(CertificateSigningRequestStatus::default);
            status.conditions.get_or_insert_with(Vec::new).push(
                CertificateSigningRequestCondition {
                    type_: FAILED.into(),
                    status: "True".into(),
                    reason: Some("SignerValidationFailure".into()),
                    message: Some(message.clone()),
                    last_update_time: Some(Time(jiff::Timestamp::now())),
                    ..Default::default()
                },
            );
            api.replace_status(&name, &PostParams::default(), &csr)
                .await
                .context("error adding failure condition for csr")?;
            info!(controller = SIGNING_NAME, csr = %name, signer = self.signer_name, reason = %message, "the signer refused the request");
            return Ok(());
        }
        let ttl = duration(self.cert_ttl, csr.spec.expiration_seconds);
        let der = self
            .ca
            .current()
            .and_then(|ca| authority::sign(&ca, &parsed, &usages, ttl, jiff::Timestamp::now()))
            .map_err(|e| anyhow::anyhow!("error auto signing csr: {e}"))?;
        let pem = pem_certificate(&der);
        csr.status
            .get_or_insert_with(CertificateSigningRequestStatus::default)
            .certificate = Some(ByteString(pem.into_bytes()));
        api.replace_status(&name, &PostParams::default(), &csr)
            .await
            .context("error updating signature for csr")?;
        debug!(controller = SIGNING_NAME, csr = %name, signer = self.signer_name, "issued a certificate");
        Ok(())
    }
}

/// A DER certificate as a PEM `CERTIFICATE` block (64-column base64, as Go writes it).
fn pem_certificate(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        options: Options,
    }

    fn options(args: &[&str]) -> Options {
        Command::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .unwrap()
            .options
    }

    #[test]
    fn flags_are_validated_as_kcm_validates_them() {
        assert_eq!(options(&[]).validate(), Ok(()));
        assert_eq!(
            options(&[]).cluster_signing_duration,
            Duration::from_secs(8760 * 3600)
        );
        assert_eq!(
            options(&[
                "--cluster-signing-cert-file=a",
                "--cluster-signing-key-file=b"
            ])
            .validate(),
            Ok(())
        );
        assert_eq!(
            options(&["--cluster-signing-cert-file=a"]).validate(),
            Ok(()),
            "a cluster cert without its key only skips the controller"
        );
        assert_eq!(
            options(&["--cluster-signing-kubelet-serving-cert-file=a"]).validate(),
            Err(r#""cluster-signing-kubelet-serving": cannot specify cert without key"#.into())
        );
        assert_eq!(
            options(&["--cluster-signing-kubelet-client-key-file=a"]).validate(),
            Err(
                r#""cluster-signing-kube-apiserver-client": cannot specify key without cert"#
                    .into()
            )
        );
        assert_eq!(
            options(&[
                "--cluster-signing-cert-file=a",
                "--cluster-signing-key-file=b",
                "--cluster-signing-kubelet-serving-cert-file=c",
                "--cluster-signing-kubelet-serving-key-file=d",
            ])
            .validate(),
            Err("cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time".into())
        );
        assert_eq!(
            options(&[
                "--cluster-signing-key-file=b",
                "--cluster-signing-legacy-unknown-cert-file=c",
            ])
            .validate(),
            Err(r#"["cluster-signing-legacy-unknown": cannot specify cert without key, cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time]"#.into())
        );
        assert_eq!(
            options(&["--cluster-signing-cert-file="]).validate(),
            Ok(()),
            "an empty flag is unset"
        );
    }

    #[test]
    fn each_signer_uses_its_own_files_or_the_cluster_pair() {
        let cluster = options(&[
            "--cluster-signing-cert-file=ca.crt",
            "--cluster-signing-key-file=ca.key",
        ]);
        let files = cluster.files_of();
        assert_eq!(files.len(), 4);
        assert!(files
            .iter()
            .all(|f| f.cert == Some(Path::new("ca.crt")) && f.key == Some(Path::new("ca.key"))));
        let specific = options(&[
            "--cluster-signing-kubelet-client-cert-file=k.crt",
            "--cluster-signing-kubelet-client-key-file=k.key",
        ]);
        let files = specific.files_of();
        let with_files: Vec<&str> = files
            .iter()
            .filter(|f| f.cert.is_some())
            .map(|f| f.signer)
            .collect();
        assert_eq!(with_files, [KUBE_APISERVER_CLIENT_KUBELET_SIGNER]);
    }

    #[test]
    fn lifetimes_honour_expiration_seconds_within_bounds() {
        let year = Duration::from_secs(8760 * 3600);
        let cases: &[(Duration, Option<i32>, u64)] = &[
            (year, None, 8760 * 3600),
            (year, Some(3600), 3600),
            (year, Some(600), 600),
            (year, Some(599), 600),
            (year, Some(-5), 600),
            (year, Some(i32::MAX), 8760 * 3600),
            (Duration::from_secs(7200), Some(3600), 3600),
            (Duration::from_secs(7200), Some(9000), 7200),
            // A maximum below the floor still caps a longer request first.
            (Duration::from_secs(300), Some(3600), 300),
            (Duration::from_secs(300), Some(60), 600),
        ];
        for (ttl, requested, want) in cases {
            assert_eq!(
                duration(*ttl, *requested),
                Duration::from_secs(*want),
                "max {ttl:?}, asked {requested:?}"
            );
        }
    }

    #[test]
    fn kube_apiserver_client_usages() {
        let strings = |u: &[&str]| u.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            valid_api_server_client_usages(&strings(&["client auth", "digital signature"])),
            Ok(())
        );
        assert_eq!(
            valid_api_server_client_usages(&strings(&["server auth"])),
            Err("invalid usage for client certificate: server auth".into())
        );
        assert_eq!(
            valid_api_server_client_usages(&strings(&["digital signature"])),
            Err("missing required usage for client certificate: client auth".into())
        );
        assert_eq!(
            valid_api_server_client_usages(&[]),
            Err("missing required usage for client certificate: client auth".into())
        );
    }

    #[test]
    fn the_signer_rules_apply_to_their_own_signer_only() {
        let pem = include_str!("../testdata/alice.csr");
        let parsed = csr::parse(pem.as_bytes()).unwrap();
        let usages = vec!["client auth".to_string()];
        assert_eq!(
            validate(KUBE_APISERVER_CLIENT_SIGNER, &parsed, &usages),
            Ok(())
        );
        assert_eq!(
            validate(KUBE_APISERVER_CLIENT_KUBELET_SIGNER, &parsed, &usages),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            validate(LEGACY_UNKNOWN_SIGNER, &parsed, &["anything".into()]),
            Ok(())
        );
    }

    #[test]
    fn certificates_are_written_as_go_writes_pem() {
        let pem = pem_certificate(&[0u8; 100]);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines.last(), Some(&"-----END CERTIFICATE-----"));
        let mut reader = pem.as_bytes();
        let parsed: Vec<_> = rustls_pemfile::certs(&mut reader).collect();
        assert_eq!(parsed.len(), 1);
    }
}
