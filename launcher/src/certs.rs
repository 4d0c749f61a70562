//! `rkcm certs`: a small PKI for the distributed mode. It makes a CA, a serving
//! certificate for the informer-server and one client certificate per worker identity,
//! all signed by that CA, and writes them as PEM files (keys mode 0600, certificates
//! 0644). It also makes the in-memory self-signed serving certificate used when no
//! `--tls-cert-file` is given, as kube-controller-manager does.
//!
//! Keys are ECDSA P-256 (rcgen's default), which rustls and Go's crypto/tls both accept.

use std::collections::HashSet;
use std::fs::{self, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// The CA's common name.
const CA_COMMON_NAME: &str = "rkcm-ca";
/// The informer-server's serving certificate's common name (clients check SANs, not this).
const SERVER_COMMON_NAME: &str = "rkcm-informer-server";
/// The longest validity `--days` accepts (100 years), well inside X.509's date range.
const MAX_DAYS: u32 = 36_500;
/// How far back `notBefore` is set, to tolerate clock skew (client-go does the same).
const BACKDATE: Duration = Duration::from_secs(60 * 60);
/// Validity of the self-signed serving certificate (kube-controller-manager uses a year).
const SELF_SIGNED_DAYS: u32 = 365;
/// File names taken by the CA and the server; client names may not use them.
const RESERVED_NAMES: [&str; 2] = ["ca", "server"];

/// Flags of `rkcm certs`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CertsArgs {
    /// Directory to write ca.crt, ca.key, server.crt, server.key and NAME.crt/NAME.key
    /// for each client into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,

    /// A DNS name or IP address for the informer-server's serving certificate's subject
    /// alternative names. Repeat for several.
    #[arg(
        long = "server-name",
        value_name = "NAME",
        default_values = ["localhost", "127.0.0.1"]
    )]
    pub server_names: Vec<String>,

    /// Make a client certificate with this common name, written as NAME.crt and NAME.key.
    /// Repeat for several.
    #[arg(long = "client-name", value_name = "NAME", default_values = ["rkcm-worker"])]
    pub client_names: Vec<String>,

    /// Days the certificates are valid for.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 365,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DAYS))
    )]
    pub days: u32,

    /// Overwrite files that already exist (without it, an existing file is an error).
    #[arg(long)]
    pub force: bool,
}

/// One file to write: its name in the output directory, its contents and its mode.
struct Output {
    name: String,
    contents: String,
    mode: u32,
}

const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;

/// Generate the CA, the server certificate and the client certificates and write them
/// into `args.out_dir`. Returns the paths written, in order: ca.crt, ca.key, server.crt,
/// server.key, then NAME.crt and NAME.key per client.
///
/// Nothing is written unless every certificate was made and (without `--force`) none of
/// the files exists.
pub(crate) fn run(args: &CertsArgs) -> Result<Vec<PathBuf>> {
    if args.days == 0 || args.days > MAX_DAYS {
        bail!("--days must be between 1 and {MAX_DAYS}, not {}", args.days);
    }
    let server_names = check_server_names(&args.server_names)?;
    check_client_names(&args.client_names)?;

    let mut outputs = Vec::new();
    let validity = Validity::starting_now(args.days)?;

    let ca_key = KeyPair::generate().context("generating the CA's key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())
        .context("building the CA certificate's parameters")?;
    ca.distinguished_name = common_name(CA_COMMON_NAME);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity.apply(&mut ca);
    let ca_cert = ca
        .self_signed(&ca_key)
        .context("signing the CA certificate")?;
    outputs.push(Output {
        name: "ca.crt".into(),
        contents: ca_cert.pem(),
        mode: CERT_MODE,
    });
    outputs.push(Output {
        name: "ca.key".into(),
        contents: ca_key.serialize_pem(),
        mode: KEY_MODE,
    });
    let issuer = Issuer::new(ca, &ca_key);

    let server_key = KeyPair::generate().context("generating the server's key")?;
    let mut server = CertificateParams::new(server_names.clone()).with_context(|| {
        format!(
            "building the server certificate for names {}",
            server_names.join(", ")
        )
    })?;
    server.distinguished_name = common_name(SERVER_COMMON_NAME);
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.use_authority_key_identifier_extension = true;
    validity.apply(&mut server);
    let server_cert = server
        .signed_by(&server_key, &issuer)
        .context("signing the server certificate")?;
    outputs.push(Output {
        name: "server.crt".into(),
        contents: server_cert.pem(),
        mode: CERT_MODE,
    });
    outputs.push(Output {
        name: "server.key".into(),
        contents: server_key.serialize_pem(),
        mode: KEY_MODE,
    });

    for name in &args.client_names {
        let key =
            KeyPair::generate().with_context(|| format!("generating the key for client {name}"))?;
        let mut client = CertificateParams::new(Vec::<String>::new())
            .with_context(|| format!("building the certificate for client {name}"))?;
        client.distinguished_name = common_name(name);
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client.use_authority_key_identifier_extension = true;
        validity.apply(&mut client);
        let cert = client
            .signed_by(&key, &issuer)
            .with_context(|| format!("signing the certificate for client {name}"))?;
        outputs.push(Output {
            name: format!("{name}.crt"),
            contents: cert.pem(),
            mode: CERT_MODE,
        });
        outputs.push(Output {
            name: format!("{name}.key"),
            contents: key.serialize_pem(),
            mode: KEY_MODE,
        });
    }

    fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating directory {}", args.out_dir.display()))?;
    if !args.force {
        for output in &outputs {
            let path = args.out_dir.join(&output.name);
            if fs::symlink_metadata(&path).is_ok() {
                bail!(
                    "{} already exists; pass --force to overwrite it",
                    path.display()
                );
            }
        }
    }
    let mut written = Vec::with_capacity(outputs.len());
    for output in &outputs {
        let path = args.out_dir.join(&output.name);
        write_file(&path, &output.contents, output.mode, args.force)?;
        written.push(path);
    }
    Ok(written)
}

/// A self-signed serving certificate for `names` (DNS names or IP addresses; `localhost`
/// and `127.0.0.1` when empty), valid for a year. Returns (certificate PEM, key PEM).
/// This is what kube-controller-manager makes in memory when no `--tls-cert-file` is given.
pub(crate) fn self_signed_serving(names: &[String]) -> Result<(String, String)> {
    let names = if names.is_empty() {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        check_server_names(names)?
    };
    let validity = Validity::starting_now(SELF_SIGNED_DAYS)?;
    let key = KeyPair::generate().context("generating the serving key")?;
    let mut params = CertificateParams::new(names.clone()).with_context(|| {
        format!(
            "building the self-signed serving certificate for names {}",
            names.join(", ")
        )
    })?;
    // "host@unix-seconds", as kube-controller-manager names its self-signed certificate.
    let now = validity.since_epoch.as_secs();
    params.distinguished_name = common_name(&format!("{}@{now}", names[0]));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity.apply(&mut params);
    let cert = params
        .self_signed(&key)
        .context("signing the self-signed serving certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

/// A validity window: from an hour ago to `days` from now.
#[derive(Clone, Copy)]
struct Validity {
    since_epoch: Duration,
    days: u32,
}

impl Validity {
    fn starting_now(days: u32) -> Result<Self> {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .context("the system clock is before 1970")?;
        Ok(Validity { since_epoch, days })
    }

    /// Sets `not_before`/`not_after`. rcgen's dates are `time::OffsetDateTime`; building
    /// them from the epoch plus a `std::time::Duration` avoids a direct `time` dependency.
    fn apply(self, params: &mut CertificateParams) {
        let now = date_time_ymd(1970, 1, 1) + self.since_epoch;
        params.not_before = now - BACKDATE;
        params.not_after = now + Duration::from_secs(u64::from(self.days) * 24 * 60 * 60);
    }
}

/// Checks the server names and drops repeats (keeping the first).
fn check_server_names(names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        bail!("give at least one --server-name");
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for name in names {
        if name.is_empty()
            || !name.is_ascii()
            || name
                .chars()
                .any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
        {
            bail!(
                "server name {name:?} is not a DNS name or an IP address \
                 (no spaces or non-ASCII characters)"
            );
        }
        if seen.insert(name.as_str()) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// Client names are common names and file names: they must be non-empty, made of
/// letters, digits and `-._:@`, not start with `.`, not be `ca` or `server`, and not repeat.
fn check_client_names(names: &[String]) -> Result<()> {
    let mut seen = HashSet::new();
    for name in names {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._:@".contains(c);
        if name.is_empty() || name.starts_with('.') || !name.chars().all(allowed) {
            bail!(
                "client name {name:?} is not usable as a file name: use letters, digits and \
                 `-._:@`, not starting with `.`"
            );
        }
        if RESERVED_NAMES.contains(&name.as_str()) {
            bail!("client name {name:?} would overwrite the {name}.crt/{name}.key written for the CA or server; pick another name");
        }
        if !seen.insert(name.as_str()) {
            bail!("client name {name:?} is given twice");
        }
    }
    Ok(())
}

/// Writes `contents` to `path` with `mode`, creating it with that mode so a key is never
/// readable by others, even briefly. With `force`, an existing file is removed first (so
/// its old mode does not carry over).
fn write_file(path: &Path, contents: &str, mode: u32, force: bool) -> Result<()> {
    if force {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("removing the existing {}", path.display()))
            }
        }
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|error| {
            if error.kind() == ErrorKind::AlreadyExists {
                anyhow::anyhow!(
                    "{} already exists; pass --force to overwrite it",
                    path.display()
                )
            } else {
                anyhow::Error::new(error).context(format!("creating {}", path.display()))
            }
        })?;
    // The umask may have narrowed the mode; set it exactly.
    file.set_permissions(Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {} to {mode:o}", path.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use clap::Parser;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        certs: CertsArgs,
    }

    fn parse(argv: &[&str]) -> CertsArgs {
        Cli::try_parse_from(std::iter::once("certs").chain(argv.iter().copied()))
            .expect("flags parse")
            .certs
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn read(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"))
    }

    fn cert_der(pem: &str) -> CertificateDer<'static> {
        let mut certs = rustls_pemfile::certs(&mut pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("PEM certificates");
        assert_eq!(certs.len(), 1);
        certs.remove(0)
    }

    fn key_der(pem: &str) -> PrivateKeyDer<'static> {
        rustls_pemfile::private_key(&mut pem.as_bytes())
            .expect("PEM key")
            .expect("a key")
    }

    fn roots(ca_pem: &str) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        roots.add(cert_der(ca_pem)).expect("CA is a usable root");
        Arc::new(roots)
    }

    fn verify_server(ca_pem: &str, cert_pem: &str, name: &str) -> Result<(), rustls::Error> {
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots(ca_pem), provider())
                .build()
                .expect("server verifier");
        let name = ServerName::try_from(name.to_string()).expect("server name");
        verifier
            .verify_server_cert(&cert_der(cert_pem), &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    fn verify_client(ca_pem: &str, cert_pem: &str) -> Result<(), rustls::Error> {
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca_pem), provider())
                .build()
                .expect("client verifier");
        verifier
            .verify_client_cert(&cert_der(cert_pem), &[], UnixTime::now())
            .map(|_| ())
    }

    /// Facts read back from a PEM certificate with x509-parser.
    #[derive(Debug)]
    struct Parsed {
        subject_cn: String,
        subject: Vec<u8>,
        issuer: Vec<u8>,
        is_ca: bool,
        cert_sign: bool,
        crl_sign: bool,
        server_auth: bool,
        client_auth: bool,
        dns_names: Vec<String>,
        ips: Vec<std::net::IpAddr>,
        not_before: i64,
        not_after: i64,
    }

    fn parsed(pem: &str) -> Parsed {
        use x509_parser::extensions::GeneralName;
        let der = cert_der(pem);
        let (_, x) = x509_parser::parse_x509_certificate(&der).expect("X.509");
        let ku = x.key_usage().expect("key usage").map(|e| *e.value);
        let (server_auth, client_auth) = x
            .extended_key_usage()
            .expect("EKU")
            .map_or((false, false), |e| {
                (e.value.server_auth, e.value.client_auth)
            });
        let mut dns_names = Vec::new();
        let mut ips = Vec::new();
        if let Some(san) = x.subject_alternative_name().expect("SAN") {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(n) => dns_names.push(n.to_string()),
                    GeneralName::IPAddress(b) => ips.push(match b.len() {
                        4 => std::net::IpAddr::from(<[u8; 4]>::try_from(*b).expect("v4")),
                        _ => std::net::IpAddr::from(<[u8; 16]>::try_from(*b).expect("v6")),
                    }),
                    other => panic!("unexpected SAN {other:?}"),
                }
            }
        }
        let parsed = Parsed {
            subject_cn: x
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .expect("CN")
                .to_string(),
            subject: x.subject().as_raw().to_vec(),
            issuer: x.issuer().as_raw().to_vec(),
            is_ca: x.is_ca(),
            cert_sign: ku.is_some_and(|k| k.key_cert_sign()),
            crl_sign: ku.is_some_and(|k| k.crl_sign()),
            server_auth,
            client_auth,
            dns_names,
            ips,
            not_before: x.validity().not_before.timestamp(),
            not_after: x.validity().not_after.timestamp(),
        };
        parsed
    }

    fn unix_now() -> i64 {
        i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock")
                .as_secs(),
        )
        .expect("i64")
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("metadata").permissions().mode() & 0o777
    }

    #[test]
    fn defaults_and_flags() {
        let args = parse(&["--out-dir", "x"]);
        assert_eq!(args.out_dir, PathBuf::from("x"));
        assert_eq!(args.server_names, ["localhost", "127.0.0.1"]);
        assert_eq!(args.client_names, ["rkcm-worker"]);
        assert_eq!(args.days, 365);
        assert!(!args.force);

        let args = parse(&[
            "--out-dir",
            "y",
            "--server-name",
            "a.example",
            "--server-name",
            "10.0.0.1",
            "--client-name",
            "w1",
            "--client-name",
            "w2",
            "--days",
            "30",
            "--force",
        ]);
        assert_eq!(args.server_names, ["a.example", "10.0.0.1"]);
        assert_eq!(args.client_names, ["w1", "w2"]);
        assert_eq!(args.days, 30);
        assert!(args.force);

        assert!(
            Cli::try_parse_from(["certs"]).is_err(),
            "--out-dir is required"
        );
        assert!(Cli::try_parse_from(["certs", "--out-dir", "x", "--days", "0"]).is_err());
    }

    #[test]
    fn writes_files_with_modes_and_a_chain_that_verifies() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("certs");
        let args = parse(&[
            "--out-dir",
            dir.to_str().expect("utf-8 path"),
            "--server-name",
            "rkcm-informer.rkcm-system.svc",
            "--server-name",
            "127.0.0.1",
            "--client-name",
            "rkcm-worker",
            "--client-name",
            "system:kube-controller-manager",
        ]);
        let written = run(&args).expect("run");
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().and_then(|n| n.to_str()).expect("name"))
            .collect();
        assert_eq!(
            names,
            [
                "ca.crt",
                "ca.key",
                "server.crt",
                "server.key",
                "rkcm-worker.crt",
                "rkcm-worker.key",
                "system:kube-controller-manager.crt",
                "system:kube-controller-manager.key",
            ]
        );
        for path in &written {
            assert_eq!(path.parent(), Some(dir.as_path()));
            let want = if path.extension().is_some_and(|e| e == "key") {
                0o600
            } else {
                0o644
            };
            assert_eq!(mode(path), want, "mode of {}", path.display());
        }

        let ca = read(&dir, "ca.crt");
        let server = read(&dir, "server.crt");
        let worker = read(&dir, "rkcm-worker.crt");

        // The fields, read back.
        let now = unix_now();
        let ca_x = parsed(&ca);
        assert_eq!(ca_x.subject_cn, CA_COMMON_NAME);
        assert!(ca_x.is_ca && ca_x.cert_sign && ca_x.crl_sign, "{ca_x:?}");
        assert_eq!(ca_x.issuer, ca_x.subject, "CA is self-signed");
        let server_x = parsed(&server);
        assert!(!server_x.is_ca && server_x.server_auth && !server_x.client_auth);
        assert_eq!(server_x.issuer, ca_x.subject);
        assert_eq!(server_x.dns_names, ["rkcm-informer.rkcm-system.svc"]);
        assert_eq!(server_x.ips, [std::net::IpAddr::from([127, 0, 0, 1])]);
        let worker_x = parsed(&worker);
        assert_eq!(worker_x.subject_cn, "rkcm-worker");
        assert!(!worker_x.is_ca && worker_x.client_auth && !worker_x.server_auth);
        assert_eq!(worker_x.issuer, ca_x.subject);
        for x in [&ca_x, &server_x, &worker_x] {
            assert!(
                x.not_before <= now - 3500 && x.not_before >= now - 3700,
                "{x:?}"
            );
            let days = (x.not_after - now) as f64 / 86_400.0;
            assert!((days - 365.0).abs() < 0.01, "{x:?}");
        }

        // The server certificate chains to the CA for each of its names, not others,
        // and is not a client certificate.
        verify_server(&ca, &server, "rkcm-informer.rkcm-system.svc").expect("DNS name");
        verify_server(&ca, &server, "127.0.0.1").expect("IP address");
        assert!(verify_server(&ca, &server, "other.example").is_err());
        assert!(
            verify_client(&ca, &server).is_err(),
            "server cert lacks clientAuth"
        );

        // Each client certificate chains to the CA as a client (CN = the name), and not
        // as a server.
        verify_client(&ca, &worker).expect("worker client cert");
        verify_client(&ca, &read(&dir, "system:kube-controller-manager.crt")).expect("2nd");
        assert!(verify_server(&ca, &worker, "localhost").is_err());

        // A certificate from another CA does not verify.
        let other = tmp.path().join("other");
        run(&parse(&["--out-dir", other.to_str().expect("utf-8")])).expect("other run");
        assert!(verify_server(&read(&other, "ca.crt"), &server, "127.0.0.1").is_err());

        // And the files work for mutual TLS between rustls endpoints.
        handshake(
            &ca,
            &server,
            &read(&dir, "server.key"),
            &worker,
            &read(&dir, "rkcm-worker.key"),
            "rkcm-informer.rkcm-system.svc",
        );
    }

    /// A full in-memory mTLS handshake: the server requires a client certificate from `ca`.
    fn handshake(
        ca: &str,
        server_cert: &str,
        server_key: &str,
        client_cert: &str,
        client_key: &str,
        name: &str,
    ) {
        let client_verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca), provider())
                .build()
                .expect("client verifier");
        let server_config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(vec![cert_der(server_cert)], key_der(server_key))
            .expect("server cert and key match");
        let client_config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots(ca))
            .with_client_auth_cert(vec![cert_der(client_cert)], key_der(client_key))
            .expect("client cert and key match");
        let mut server = ServerConnection::new(Arc::new(server_config)).expect("server");
        let mut client = ClientConnection::new(
            Arc::new(client_config),
            ServerName::try_from(name.to_string()).expect("name"),
        )
        .expect("client");
        for _ in 0..10 {
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).expect("client write");
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).expect("server read");
                server
                    .process_new_packets()
                    .expect("server accepts the client");
            }
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).expect("server write");
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).expect("client read");
                client
                    .process_new_packets()
                    .expect("client accepts the server");
            }
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        assert!(server.peer_certificates().is_some_and(|c| c.len() == 1));
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_str().expect("utf-8").to_string();
        fs::write(tmp.path().join("server.key"), "precious").expect("write");
        let error = run(&parse(&["--out-dir", &dir])).expect_err("must refuse");
        let message = format!("{error:#}");
        assert!(message.contains("server.key"), "{message}");
        assert!(message.contains("--force"), "{message}");
        // Nothing was written, and the existing file is untouched.
        assert!(!tmp.path().join("ca.crt").exists());
        assert_eq!(
            fs::read_to_string(tmp.path().join("server.key")).expect("read"),
            "precious"
        );

        // With --force it is replaced, with the key's mode even if the old file's was wider.
        fs::set_permissions(tmp.path().join("server.key"), Permissions::from_mode(0o666))
            .expect("chmod");
        run(&parse(&["--out-dir", &dir, "--force"])).expect("force");
        let key = read(tmp.path(), "server.key");
        assert!(key.contains("PRIVATE KEY"), "{key}");
        assert_eq!(mode(&tmp.path().join("server.key")), 0o600);

        // A second run without --force names the first file that exists.
        let message = format!(
            "{:#}",
            run(&parse(&["--out-dir", &dir])).expect_err("refuse")
        );
        assert!(message.contains("ca.crt"), "{message}");
    }

    #[test]
    fn rejects_bad_names() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_str().expect("utf-8").to_string();
        for bad in ["ca", "server", "../x", "a/b", "", ".hidden"] {
            let error = run(&parse(&["--out-dir", &dir, "--client-name", bad]))
                .expect_err("bad client name");
            assert!(
                format!("{error:#}").contains("client name"),
                "{bad}: {error:#}"
            );
        }
        let error = run(&parse(&[
            "--out-dir",
            &dir,
            "--client-name",
            "w",
            "--client-name",
            "w",
        ]))
        .expect_err("duplicate");
        assert!(format!("{error:#}").contains("twice"), "{error:#}");
        assert!(run(&parse(&["--out-dir", &dir, "--server-name", "a b"])).is_err());
        assert_eq!(fs::read_dir(tmp.path()).expect("read_dir").count(), 0);
    }

    #[test]
    fn self_signed_serving_verifies_against_itself() {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let (cert, key) = self_signed_serving(&names).expect("self-signed");
        assert!(key.contains("PRIVATE KEY"));
        let x = parsed(&cert);
        assert!(!x.is_ca && x.server_auth && !x.client_auth, "{x:?}");
        assert_eq!(x.issuer, x.subject);
        assert!(x.subject_cn.starts_with("localhost@"), "{x:?}");
        assert_eq!(x.dns_names, ["localhost"]);
        assert_eq!(x.ips, [std::net::IpAddr::from([127, 0, 0, 1])]);
        verify_server(&cert, &cert, "localhost").expect("trusting itself, localhost");
        verify_server(&cert, &cert, "127.0.0.1").expect("trusting itself, 127.0.0.1");
        assert!(verify_server(&cert, &cert, "example.com").is_err());
        // It loads into a rustls server.
        ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert_der(&cert)], key_der(&key))
            .expect("cert and key match");

        let (cert, _) = self_signed_serving(&[]).expect("defaults");
        verify_server(&cert, &cert, "localhost").expect("default names");
    }
}
