//! A CSR's `spec.request` read as Go's `x509.ParseCertificateRequest` reads it (upstream
//! `pkg/apis/certificates/helpers.go`): the first PEM block must be a `CERTIFICATE
//! REQUEST`; its subject is taken as `pkix.Name` fills itself (the last CN, every O in
//! order, the attributes Go knows; others ignored), its subjectAltNames as Go collects them
//! (DNS, email, IP, URI), and its public key kept whole for the certificate. The signature
//! is not checked here: the signer checks it before issuing, as upstream's authority does.
//!
//! Also the kubelet request rules (`ValidateKubeletServingCSR`, `ValidateKubeletClientCSR`)
//! with upstream's messages, which the signer reports in a `Failed` condition and the
//! approver uses to recognize kubelet client requests.

use std::collections::BTreeSet;
use std::net::IpAddr;

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// The subject attributes Go's `pkix.Name` keeps, each with its OID's last arc under
/// 2.5.4, in the order `Name.ToRDNSequence` writes them back.
pub(crate) const SUBJECT_ATTRIBUTES: [(u64, &str); 9] = [
    (6, "C"),
    (8, "ST"),
    (7, "L"),
    (9, "street"),
    (17, "postalCode"),
    (10, "O"),
    (11, "OU"),
    (3, "CN"),
    (5, "serialNumber"),
];

/// A parsed certificate request.
#[derive(Debug)]
pub(crate) struct ParsedCsr {
    /// The request's DER, for the signature check.
    pub der: Vec<u8>,
    /// The subject as Go's `pkix.Name` holds it: for each of [`SUBJECT_ATTRIBUTES`] its
    /// values in order (CN and serialNumber: the last one only).
    pub subject: Vec<(u64, Vec<String>)>,
    pub dns_names: Vec<String>,
    pub email_addresses: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub uris: Vec<String>,
    /// The DER SubjectPublicKeyInfo.
    pub public_key_info: Vec<u8>,
}

impl ParsedCsr {
    /// The values of one subject attribute (by its last arc under 2.5.4).
    pub(crate) fn attribute(&self, arc: u64) -> &[String] {
        self.subject
            .iter()
            .find(|(a, _)| *a == arc)
            .map(|(_, values)| values.as_slice())
            .unwrap_or_default()
    }

    /// `Subject.CommonName`: empty when there is none.
    pub(crate) fn common_name(&self) -> &str {
        self.attribute(3).last().map(String::as_str).unwrap_or("")
    }

    /// `Subject.Organization`.
    pub(crate) fn organization(&self) -> &[String] {
        self.attribute(10)
    }
}

/// Parses `spec.request` (PEM). The error is what upstream says (`ParseCSR`), or a
/// description of what Go's parser would refuse.
pub(crate) fn parse(pem: &[u8]) -> Result<ParsedCsr, String> {
    const WRONG_BLOCK: &str = "PEM block type must be CERTIFICATE REQUEST";
    let der = match rustls_pemfile::read_one_from_slice(pem) {
        Ok(Some((rustls_pemfile::Item::Csr(der), _))) => der.as_ref().to_vec(),
        _ => return Err(WRONG_BLOCK.into()),
    };
    parse_der(der)
}

fn parse_der(der: Vec<u8>) -> Result<ParsedCsr, String> {
    let (rest, request) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    if !rest.is_empty() {
        return Err("x509: trailing data after X.509 certificate request".into());
    }
    let info = &request.certification_request_info;
    let mut subject: Vec<(u64, Vec<String>)> = SUBJECT_ATTRIBUTES
        .iter()
        .map(|(arc, _)| (*arc, Vec::new()))
        .collect();
    for rdn in info.subject.iter() {
        for attribute in rdn.iter() {
            let Ok(value) = attribute.as_str() else {
                // Go skips values that are not strings.
                continue;
            };
            let oid = attribute.attr_type().to_id_string();
            let Some(arc) = oid
                .strip_prefix("2.5.4.")
                .and_then(|arc| arc.parse::<u64>().ok())
            else {
                continue;
            };
            if let Some((_, values)) = subject.iter_mut().find(|(a, _)| *a == arc) {
                if arc == 3 || arc == 5 {
                    values.clear();
                }
                values.push(value.to_string());
            }
        }
    }
    let mut parsed = ParsedCsr {
        der: Vec::new(),
        subject,
        dns_names: Vec::new(),
        email_addresses: Vec::new(),
        ip_addresses: Vec::new(),
        uris: Vec::new(),
        public_key_info: info.subject_pki.raw.to_vec(),
    };
    for extension in request.requested_extensions().into_iter().flatten() {
        match extension {
            ParsedExtension::SubjectAlternativeName(names) => {
                for name in &names.general_names {
                    match name {
                        GeneralName::DNSName(dns) => parsed.dns_names.push(dns.to_string()),
                        GeneralName::RFC822Name(email) => {
                            parsed.email_addresses.push(email.to_string())
                        }
                        GeneralName::URI(uri) => parsed.uris.push(uri.to_string()),
                        GeneralName::IPAddress(bytes) => {
                            parsed.ip_addresses.push(ip_of(bytes).ok_or_else(|| {
                                format!("x509: cannot parse IP address of length {}", bytes.len())
                            })?)
                        }
                        GeneralName::Invalid(_, _) => {
                            return Err("x509: SAN is malformed".into());
                        }
                        _ => {}
                    }
                }
            }
            ParsedExtension::ParseError { error } => {
                return Err(format!("x509: malformed extension: {error}"));
            }
            _ => {}
        }
    }
    parsed.der = der;
    Ok(parsed)
}

fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

/// Checks the request's signature with its own public key (Go's `CheckSignature`).
pub(crate) fn check_signature(csr: &ParsedCsr) -> Result<(), String> {
    let (_, request) = X509CertificationRequest::from_der(&csr.der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    request.verify_signature().map_err(|e| {
        if matches!(
            e,
            x509_parser::error::X509Error::SignatureUnsupportedAlgorithm
        ) {
            return "x509: cannot verify signature: algorithm unimplemented".to_string();
        }
        // Go's words for a signature that does not verify, by key type.
        let key = request
            .certification_request_info
            .subject_pki
            .algorithm
            .algorithm
            .to_id_string();
        match key.as_str() {
            "1.2.840.10045.2.1" => "x509: ECDSA verification failure",
            "1.3.101.112" => "x509: Ed25519 verification failure",
            "1.2.840.113549.1.1.1" => "crypto/rsa: verification error",
            _ => "x509: signature verification failure",
        }
        .to_string()
    })
}

/// `spec.usages` as a set (upstream's `usagesToSet`).
pub(crate) fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

const SYSTEM_NODES: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";
const ORGANIZATION_NOT_SYSTEM_NODES: &str = "subject organization is not system:nodes";
const COMMON_NAME_NOT_SYSTEM_NODE: &str = "subject common name does not begin with system:node:";

/// Usages as a sorted Go `[]string` prints.
fn go_list(usages: &[&str]) -> String {
    let mut sorted = usages.to_vec();
    sorted.sort_unstable();
    format!("[{}]", sorted.join(" "))
}

fn usages_match(usages: &BTreeSet<&str>, with_rsa: &[&str], without_rsa: &[&str]) -> bool {
    fn same(usages: &BTreeSet<&str>, list: &[&str]) -> bool {
        usages.len() == list.len() && list.iter().all(|u| usages.contains(u))
    }
    same(usages, with_rsa) || same(usages, without_rsa)
}

const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];
const SERVING_USAGES_NO_RSA: [&str; 2] = ["digital signature", "server auth"];
const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
const CLIENT_USAGES_NO_RSA: [&str; 2] = ["digital signature", "client auth"];

/// Upstream's `ValidateKubeletServingCSR`, its checks in its order.
pub(crate) fn validate_kubelet_serving(
    csr: &ParsedCsr,
    usages: &BTreeSet<&str>,
) -> Result<(), String> {
    if csr.organization() != [SYSTEM_NODES] {
        return Err(ORGANIZATION_NOT_SYSTEM_NODES.into());
    }
    if csr.dns_names.is_empty() && csr.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !csr.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !csr.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !usages_match(usages, &SERVING_USAGES, &SERVING_USAGES_NO_RSA) {
        return Err(format!("usages did not match {}", go_list(&SERVING_USAGES)));
    }
    if !csr.common_name().starts_with(NODE_PREFIX) {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.into());
    }
    Ok(())
}

/// Upstream's `ValidateKubeletClientCSR`, its checks in its order.
pub(crate) fn validate_kubelet_client(
    csr: &ParsedCsr,
    usages: &BTreeSet<&str>,
) -> Result<(), String> {
    if csr.organization() != [SYSTEM_NODES] {
        return Err(ORGANIZATION_NOT_SYSTEM_NODES.into());
    }
    if !csr.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !csr.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !csr.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !csr.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !csr.common_name().starts_with(NODE_PREFIX) {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.into());
    }
    if !usages_match(usages, &CLIENT_USAGES, &CLIENT_USAGES_NO_RSA) {
        return Err(format!("usages did not match {}", go_list(&CLIENT_USAGES)));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A PEM request made with rcgen for `subject` (type, value pairs in order) and SANs.
    pub(crate) fn request_pem(
        subject: &[(rcgen::DnType, &str)],
        sans: &[rcgen::SanType],
    ) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        request_pem_with(&key, subject, sans)
    }

    pub(crate) fn request_pem_with(
        key: &rcgen::KeyPair,
        subject: &[(rcgen::DnType, &str)],
        sans: &[rcgen::SanType],
    ) -> String {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        params.subject_alt_names = sans.to_vec();
        params.serialize_request(key).unwrap().pem().unwrap()
    }

    fn node(cn: &str, orgs: &[&str], sans: &[rcgen::SanType]) -> ParsedCsr {
        let mut subject = vec![(rcgen::DnType::CommonName, cn)];
        for (i, org) in orgs.iter().enumerate() {
            // rcgen keeps one value per type: a second O goes under the custom type.
            let ty = if i == 0 {
                rcgen::DnType::OrganizationName
            } else {
                rcgen::DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            subject.push((ty, org));
        }
        parse(request_pem(&subject, sans).as_bytes()).unwrap()
    }

    fn set<'a>(usages: &[&'a str]) -> BTreeSet<&'a str> {
        usages.iter().copied().collect()
    }

    #[test]
    fn the_pem_block_must_be_a_request() {
        assert_eq!(
            parse(b"not a csr").unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
        let cert = rcgen::CertificateParams::new(vec!["x".to_string()])
            .unwrap()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        assert_eq!(
            parse(cert.as_bytes()).unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
        let garbage =
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert!(parse(garbage.as_bytes())
            .unwrap_err()
            .starts_with("x509: malformed certificate request"));
    }

    #[test]
    fn subject_and_sans_are_read_as_go_reads_them() {
        let openssl = include_str!("testdata/alice.csr");
        let parsed = parse(openssl.as_bytes()).unwrap();
        assert_eq!(parsed.common_name(), "alice");
        assert_eq!(parsed.organization(), ["dev", "team"]);
        assert!(check_signature(&parsed).is_ok(), "a P-384 request verifies");
        let serving = parse(include_bytes!("testdata/node-serving.csr")).unwrap();
        assert_eq!(serving.common_name(), "system:node:n1");
        assert_eq!(serving.dns_names, ["n1.example"]);
        assert_eq!(
            serving.ip_addresses,
            ["10.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert!(check_signature(&serving).is_ok(), "an RSA request verifies");
        // Two CNs: the last one wins.
        let two = parse(
            request_pem(
                &[
                    (rcgen::DnType::CommonName, "first"),
                    (rcgen::DnType::CustomDnType(vec![2, 5, 4, 3]), "second"),
                ],
                &[],
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(two.common_name(), "second");
    }

    #[test]
    fn a_tampered_request_fails_its_signature_check() {
        let mut parsed = parse(include_bytes!("testdata/alice.csr")).unwrap();
        // Flip a bit inside the subject ("alice" -> "alicg"): still parses, no longer signed.
        let at = parsed
            .der
            .windows(5)
            .position(|w| w == b"alice")
            .expect("the CN is in the DER");
        parsed.der[at + 4] ^= 0x02;
        assert_eq!(
            check_signature(&parsed).unwrap_err(),
            "x509: ECDSA verification failure"
        );
    }

    #[test]
    fn kubelet_client_rules_in_upstream_order() {
        let ok = node("system:node:n1", &["system:nodes"], &[]);
        let client = set(&["digital signature", "client auth"]);
        assert_eq!(validate_kubelet_client(&ok, &client), Ok(()));
        assert_eq!(
            validate_kubelet_client(
                &ok,
                &set(&["digital signature", "key encipherment", "client auth"])
            ),
            Ok(())
        );
        let cases: Vec<(ParsedCsr, BTreeSet<&str>, &str)> = vec![
            (
                node("system:node:n1", &["system:nodes", "x"], &[]),
                client.clone(),
                "subject organization is not system:nodes",
            ),
            (
                node("system:node:n1", &[], &[]),
                client.clone(),
                "subject organization is not system:nodes",
            ),
            (
                node(
                    "system:node:n1",
                    &["system:nodes"],
                    &[rcgen::SanType::DnsName("n1".try_into().unwrap())],
                ),
                client.clone(),
                "DNS subjectAltNames are not allowed",
            ),
            (
                node(
                    "system:node:n1",
                    &["system:nodes"],
                    &[rcgen::SanType::IpAddress("10.0.0.1".parse().unwrap())],
                ),
                client.clone(),
                "IP subjectAltNames are not allowed",
            ),
            (
                node(
                    "system:node:n1",
                    &["system:nodes"],
                    &[rcgen::SanType::Rfc822Name("a@b.c".try_into().unwrap())],
                ),
                client.clone(),
                "Email subjectAltNames are not allowed",
            ),
            (
                node("alice", &["system:nodes"], &[]),
                client.clone(),
                "subject common name does not begin with system:node:",
            ),
            (
                node("system:node:n1", &["system:nodes"], &[]),
                set(&["client auth"]),
                "usages did not match [client auth digital signature key encipherment]",
            ),
        ];
        for (csr, usages, message) in cases {
            assert_eq!(
                validate_kubelet_client(&csr, &usages),
                Err(message.to_string())
            );
        }
    }

    #[test]
    fn kubelet_serving_rules_in_upstream_order() {
        let dns = [rcgen::SanType::DnsName("n1".try_into().unwrap())];
        let serving = set(&["digital signature", "server auth"]);
        let ok = node("system:node:n1", &["system:nodes"], &dns);
        assert_eq!(validate_kubelet_serving(&ok, &serving), Ok(()));
        assert_eq!(
            validate_kubelet_serving(&node("system:node:n1", &["system:nodes"], &[]), &serving),
            Err("DNS or IP subjectAltName is required".into())
        );
        assert_eq!(
            validate_kubelet_serving(&ok, &set(&["digital signature", "client auth"])),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        // Usages are checked before the common name.
        assert_eq!(
            validate_kubelet_serving(&node("n1", &["system:nodes"], &dns), &set(&["server auth"])),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        assert_eq!(
            validate_kubelet_serving(&node("n1", &["system:nodes"], &dns), &serving),
            Err("subject common name does not begin with system:node:".into())
        );
        let uri = [
            dns[0].clone(),
            rcgen::SanType::URI("spiffe://x/y".try_into().unwrap()),
        ];
        assert_eq!(
            validate_kubelet_serving(&node("system:node:n1", &["system:nodes"], &uri), &serving),
            Err("URI subjectAltNames are not allowed".into())
        );
    }
}
