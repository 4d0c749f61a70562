//! The signing CA of a signer loop, read from its cert and key files and read again when
//! they change on disk (upstream `signer/ca_provider.go` over apiserver's
//! `DynamicCertKeyPairContent`).
//!
//! The files are read before each signing (they are small, and requests rare): new content
//! replaces the CA once it is a certificate and a key that belong together, as the dynamic
//! loader takes new content; content that is not is ignored with a warning and the last
//! good CA goes on signing. A pair whose certificate file holds more than one certificate
//! is refused, as upstream's `setCA` refuses it.
//!
//! The key may be PKCS#1 RSA (`RSA PRIVATE KEY`, kubeadm's), SEC1 EC (`EC PRIVATE KEY`) or
//! PKCS#8 (RSA, ECDSA P-256/P-384, Ed25519), as Go's `keyutil.ParsePrivateKeyPEM` reads
//! them; it signs through `ring`, wrapped as rcgen's [`SigningKey`]. Key material is never
//! logged or put in an error.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{Issuer, PublicKeyData, SignatureAlgorithm, SigningKey};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use tracing::{info, warn};
use x509_parser::prelude::FromDer;

use crate::locks::lock;

/// The name upstream's loader gives the CA content, which its messages print.
const LOADER_NAME: &str = "csr-controller";

/// A CA private key that signs as Go's `x509.CreateCertificate` signs with it: RSA
/// PKCS#1 v1.5 with SHA-256, ECDSA with the curve's hash, Ed25519.
pub(crate) enum CaKey {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair, &'static SignatureAlgorithm),
    Ed25519(Ed25519KeyPair),
}

impl std::fmt::Debug for CaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.write_str(match self {
            CaKey::Rsa(_) => "CaKey(RSA)",
            CaKey::Ecdsa(..) => "CaKey(ECDSA)",
            CaKey::Ed25519(_) => "CaKey(Ed25519)",
        })
    }
}

impl PublicKeyData for CaKey {
    fn der_bytes(&self) -> &[u8] {
        match self {
            CaKey::Rsa(key) => key.public().as_ref(),
            CaKey::Ecdsa(key, _) => key.public_key().as_ref(),
            CaKey::Ed25519(key) => key.public_key().as_ref(),
        }
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        match self {
            CaKey::Rsa(_) => &rcgen::PKCS_RSA_SHA256,
            CaKey::Ecdsa(_, algorithm) => algorithm,
            CaKey::Ed25519(_) => &rcgen::PKCS_ED25519,
        }
    }
}

impl SigningKey for CaKey {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let rng = SystemRandom::new();
        match self {
            CaKey::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .map_err(|_| rcgen::Error::RingUnspecified)?;
                Ok(signature)
            }
            CaKey::Ecdsa(key, _) => key
                .sign(&rng, message)
                .map(|signature| signature.as_ref().to_vec())
                .map_err(|_| rcgen::Error::RingUnspecified),
            CaKey::Ed25519(key) => Ok(key.sign(message).as_ref().to_vec()),
        }
    }
}

/// The first private key of a PEM file, as Go's `ParsePrivateKeyPEM` accepts them.
pub(crate) fn parse_key(pem: &[u8]) -> Result<CaKey, String> {
    use rustls_pemfile::Item;
    let mut rest = pem;
    loop {
        match rustls_pemfile::read_one_from_slice(rest) {
            Ok(Some((item, remainder))) => {
                rest = remainder;
                match item {
                    Item::Pkcs1Key(key) => {
                        return RsaKeyPair::from_der(key.secret_pkcs1_der())
                            .map(CaKey::Rsa)
                            .map_err(|e| format!("invalid RSA private key: {e}"));
                    }
                    Item::Sec1Key(key) => return ec_from_sec1(key.secret_sec1_der()),
                    Item::Pkcs8Key(key) => return from_pkcs8(key.secret_pkcs8_der()),
                    _ => continue,
                }
            }
            Ok(None) => return Err("data does not contain a valid RSA or ECDSA private key".into()),
            Err(_) => return Err("data does not contain valid PEM".into()),
        }
    }
}

fn from_pkcs8(der: &[u8]) -> Result<CaKey, String> {
    let rng = SystemRandom::new();
    if let Ok(key) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
        return Ok(CaKey::Ed25519(key));
    }
    for (curve, algorithm) in [
        (
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &rcgen::PKCS_ECDSA_P256_SHA256,
        ),
        (
            &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
            &rcgen::PKCS_ECDSA_P384_SHA384,
        ),
    ] {
        if let Ok(key) = EcdsaKeyPair::from_pkcs8(curve, der, &rng) {
            return Ok(CaKey::Ecdsa(key, algorithm));
        }
    }
    RsaKeyPair::from_pkcs8(der).map(CaKey::Rsa).map_err(|_| {
        "unsupported PKCS#8 private key (RSA, ECDSA P-256/P-384 and Ed25519 are)".into()
    })
}

/// A SEC1 `ECPrivateKey`: the scalar, the curve and the public point it carries.
fn ec_from_sec1(der: &[u8]) -> Result<CaKey, String> {
    use x509_parser::der_parser::asn1_rs::{Any, BitString, Class, OctetString, Oid, Sequence};
    let invalid = || "invalid EC private key".to_string();
    let (_, sequence) = Sequence::from_der(der).map_err(|_| invalid())?;
    let mut content: &[u8] = &sequence.content;
    let mut fields = Vec::new();
    while !content.is_empty() {
        let (rest, any) = Any::from_der(content).map_err(|_| invalid())?;
        fields.push(any);
        content = rest;
    }
    let private = fields
        .get(1)
        .and_then(|any| OctetString::try_from(any.clone()).ok())
        .ok_or_else(invalid)?;
    let tagged = |number: u32| {
        fields
            .iter()
            .find(|any| any.header.class() == Class::ContextSpecific && any.tag().0 == number)
            .and_then(|any| Any::from_der(any.data).ok().map(|(_, inner)| inner))
    };
    let curve = tagged(0)
        .and_then(|any| Oid::try_from(any).ok())
        .map(|oid| oid.to_id_string())
        .ok_or_else(|| "EC private key without its curve".to_string())?;
    let public = tagged(1)
        .and_then(|any| BitString::try_from(any).ok())
        .map(|bits| bits.data.to_vec())
        .ok_or_else(|| "EC private key without its public key".to_string())?;
    let (curve, algorithm) = match curve.as_str() {
        "1.2.840.10045.3.1.7" => (
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &rcgen::PKCS_ECDSA_P256_SHA256,
        ),
        "1.3.132.0.34" => (
            &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
            &rcgen::PKCS_ECDSA_P384_SHA384,
        ),
        other => {
            return Err(format!(
                "unsupported EC curve {other} (P-256 and P-384 are)"
            ))
        }
    };
    EcdsaKeyPair::from_private_key_and_public_key(
        curve,
        private.as_cow(),
        &public,
        &SystemRandom::new(),
    )
    .map(|key| CaKey::Ecdsa(key, algorithm))
    .map_err(|e| format!("invalid EC private key: {e}"))
}

/// A CA ready to sign.
pub(crate) struct CertificateAuthority {
    raw_cert: Vec<u8>,
    raw_key: Vec<u8>,
    pub issuer: Issuer<'static, CaKey>,
    /// The CA certificate's DER (its subject must be the issued certificates' issuer).
    pub der: Vec<u8>,
    /// Its NotAfter.
    pub not_after: jiff::Timestamp,
    /// Whether it has a subjectKeyIdentifier (Go then gives issued certificates an
    /// authorityKeyIdentifier).
    pub has_key_id: bool,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// Why a pair of files is not a CA: `Pair` when the loader itself would refuse the
/// content (unreadable, unparsable, a key that is not the certificate's), `Ca` when the
/// loader takes it but the CA provider does not.
#[derive(Debug, PartialEq)]
pub(crate) enum LoadError {
    Pair(String),
    Ca(String),
}

impl LoadError {
    pub(crate) fn message(&self) -> &str {
        match self {
            LoadError::Pair(message) | LoadError::Ca(message) => message,
        }
    }
}

/// Go's `os.ReadFile` error text.
fn read_error(path: &Path, error: &std::io::Error) -> String {
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_string(),
        _ => error.to_string(),
    };
    format!("open {}: {why}", path.display())
}

/// Parses a cert/key pair as upstream's loader and CA provider do, with their messages.
pub(crate) fn parse_ca(
    cert_file: &Path,
    raw_cert: Vec<u8>,
    raw_key: Vec<u8>,
) -> Result<CertificateAuthority, LoadError> {
    let pair = |why: &str| {
        LoadError::Pair(format!(
            "error reading CA cert file {:?}: invalid serving cert keypair: {why}",
            cert_file.display().to_string()
        ))
    };
    let mut certificates = Vec::new();
    for item in rustls_pemfile::certs(&mut raw_cert.as_slice()) {
        match item {
            Ok(der) => certificates.push(der.as_ref().to_vec()),
            Err(_) => {
                return Err(pair(
                    "tls: failed to find any PEM data in certificate input",
                ))
            }
        }
    }
    let Some(first) = certificates.first() else {
        return Err(pair(
            "tls: failed to find any PEM data in certificate input",
        ));
    };
    let key = parse_key(&raw_key)
        .map_err(|why| pair(&format!("tls: failed to parse private key: {why}")))?;
    let (_, certificate) = x509_parser::certificate::X509Certificate::from_der(first)
        .map_err(|e| pair(&format!("x509: malformed certificate: {e}")))?;
    if certificate.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
        return Err(pair("tls: private key does not match public key"));
    }
    if certificates.len() != 1 {
        return Err(LoadError::Ca(format!(
            "error reading CA cert file {LOADER_NAME:?}: expected 1 certificate, found {}",
            certificates.len()
        )));
    }
    let not_after = jiff::Timestamp::from_second(certificate.validity().not_after.timestamp())
        .map_err(|e| {
            LoadError::Ca(format!(
                "error reading CA cert file {LOADER_NAME:?}: its NotAfter is out of range: {e}"
            ))
        })?;
    let has_key_id = certificate.extensions().iter().any(|extension| {
        matches!(
            extension.parsed_extension(),
            x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(_)
        )
    });
    let der = first.clone();
    let issuer = Issuer::from_ca_cert_der(&der.as_slice().into(), key).map_err(|e| {
        LoadError::Ca(format!(
            "error reading CA cert file {LOADER_NAME:?}: rkcm cannot issue certificates with this CA's subject: {e}"
        ))
    })?;
    Ok(CertificateAuthority {
        raw_cert,
        raw_key,
        issuer,
        der,
        not_after,
        has_key_id,
    })
}

/// The files of a signer loop and the CA they last held.
pub(crate) struct CaProvider {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: Mutex<Arc<CertificateAuthority>>,
    /// The content last refused, so a bad file is warned about once, not at every request.
    refused: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
}

impl CaProvider {
    /// Reads the CA at start; the error is upstream's message for the loop not starting.
    pub(crate) fn new(cert_file: &Path, key_file: &Path) -> Result<CaProvider, String> {
        let (cert, key) = read_pair(cert_file, key_file).map_err(|why| {
            format!(
                "error reading CA cert file {:?}: {why}",
                cert_file.display().to_string()
            )
        })?;
        let ca = parse_ca(cert_file, cert, key).map_err(|e| e.message().to_string())?;
        Ok(CaProvider {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            current: Mutex::new(Arc::new(ca)),
            refused: Mutex::new(None),
        })
    }

    /// The CA to sign with now: the files' content if it changed and is a good CA.
    pub(crate) fn current(&self) -> Result<Arc<CertificateAuthority>, String> {
        let current = lock(&self.current).clone();
        let (cert, key) = match read_pair(&self.cert_file, &self.key_file) {
            Ok(pair) => pair,
            Err(why) => {
                // The loader keeps what it had when the files cannot be read.
                warn!(cert_file = %self.cert_file.display(), error = %why, "cannot read the CA files; signing with the CA read before");
                return Ok(current);
            }
        };
        if cert == current.raw_cert && key == current.raw_key {
            return Ok(current);
        }
        let seen_before = lock(&self.refused)
            .as_ref()
            .is_some_and(|(c, k)| *c == cert && *k == key);
        match parse_ca(&self.cert_file, cert.clone(), key.clone()) {
            Ok(ca) => {
                let ca = Arc::new(ca);
                *lock(&self.current) = ca.clone();
                *lock(&self.refused) = None;
                info!(cert_file = %self.cert_file.display(), not_after = %ca.not_after, "the CA files changed: signing with the new CA");
                Ok(ca)
            }
            Err(LoadError::Pair(why)) => {
                if !seen_before {
                    warn!(cert_file = %self.cert_file.display(), error = %why, "the CA files changed to content that is not a CA; signing with the CA read before");
                    *lock(&self.refused) = Some((cert, key));
                }
                Ok(current)
            }
            Err(LoadError::Ca(why)) => Err(why),
        }
    }
}

fn read_pair(cert_file: &Path, key_file: &Path) -> Result<(Vec<u8>, Vec<u8>), String> {
    let cert = std::fs::read(cert_file).map_err(|e| read_error(cert_file, &e))?;
    let key = std::fs::read(key_file).map_err(|e| read_error(key_file, &e))?;
    Ok((cert, key))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const RSA_CERT: &str = include_str!("../testdata/rsa-ca.crt");
    pub(crate) const RSA_KEY: &str = include_str!("../testdata/rsa-ca.key");
    pub(crate) const EC_CERT: &str = include_str!("../testdata/ec-ca.crt");
    pub(crate) const EC_KEY: &str = include_str!("../testdata/ec-ca.key");

    /// A P-256 CA made by rcgen (PKCS#8 key), as kube-sim's.
    pub(crate) fn rcgen_ca() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kubernetes");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn parse(cert: &str, key: &str) -> Result<CertificateAuthority, LoadError> {
        parse_ca(
            Path::new("/pki/ca.crt"),
            cert.as_bytes().to_vec(),
            key.as_bytes().to_vec(),
        )
    }

    #[test]
    fn the_three_key_formats_are_read() {
        assert!(matches!(
            parse(RSA_CERT, RSA_KEY).unwrap().issuer.key(),
            CaKey::Rsa(_)
        ));
        assert!(matches!(
            parse(EC_CERT, EC_KEY).unwrap().issuer.key(),
            CaKey::Ecdsa(..)
        ));
        let (cert, key) = rcgen_ca();
        let ca = parse(&cert, &key).unwrap();
        assert!(matches!(ca.issuer.key(), CaKey::Ecdsa(..)));
        assert!(!format!("{:?}", ca.issuer.key()).contains("PRIVATE"));
    }

    #[test]
    fn bad_pairs_are_refused_with_upstreams_messages() {
        assert_eq!(
            parse(RSA_CERT, EC_KEY).unwrap_err(),
            LoadError::Pair(
                "error reading CA cert file \"/pki/ca.crt\": invalid serving cert keypair: tls: private key does not match public key".into()
            )
        );
        assert!(matches!(parse("", RSA_KEY), Err(LoadError::Pair(_))));
        assert!(matches!(parse(RSA_CERT, "junk"), Err(LoadError::Pair(_))));
        assert_eq!(
            parse(&format!("{RSA_CERT}{EC_CERT}"), RSA_KEY).unwrap_err(),
            LoadError::Ca(
                "error reading CA cert file \"csr-controller\": expected 1 certificate, found 2"
                    .into()
            )
        );
    }

    #[test]
    fn missing_files_say_what_is_missing() {
        let error = CaProvider::new(
            Path::new("/nonexistent/ca.crt"),
            Path::new("/nonexistent/ca.key"),
        )
        .err()
        .unwrap();
        assert_eq!(
            error,
            "error reading CA cert file \"/nonexistent/ca.crt\": open /nonexistent/ca.crt: no such file or directory"
        );
    }

    #[test]
    fn changed_files_are_read_again_and_bad_content_keeps_the_last_ca() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("ca.crt");
        let key = dir.path().join("ca.key");
        std::fs::write(&cert, RSA_CERT).unwrap();
        std::fs::write(&key, RSA_KEY).unwrap();
        let provider = CaProvider::new(&cert, &key).unwrap();
        assert!(matches!(
            provider.current().unwrap().issuer.key(),
            CaKey::Rsa(_)
        ));
        std::fs::write(&cert, EC_CERT).unwrap();
        std::fs::write(&key, EC_KEY).unwrap();
        assert!(matches!(
            provider.current().unwrap().issuer.key(),
            CaKey::Ecdsa(..)
        ));
        // Half-written rotation (new cert, old key): the loader keeps the last pair.
        std::fs::write(&cert, RSA_CERT).unwrap();
        assert!(matches!(
            provider.current().unwrap().issuer.key(),
            CaKey::Ecdsa(..)
        ));
        std::fs::remove_file(&cert).unwrap();
        assert!(matches!(
            provider.current().unwrap().issuer.key(),
            CaKey::Ecdsa(..)
        ));
        // A pair the loader takes but the provider refuses is an error for the request.
        std::fs::write(&cert, format!("{EC_CERT}{RSA_CERT}")).unwrap();
        assert!(provider
            .current()
            .unwrap_err()
            .contains("expected 1 certificate, found 2"));
    }
}
