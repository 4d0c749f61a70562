//! Issuing a certificate for a request (upstream `authority/authority.go` and
//! `authority/policies.go`, the "permissive" policy): the request's signature is checked;
//! the certificate gets a random serial below 2^128, the request's subject (the attributes
//! Go's `pkix.Name` keeps, in the order Go writes them) and subjectAltNames, none of its
//! other extensions, the key usages of `spec.usages`, basicConstraints CA:FALSE, and the
//! validity of [`validity`]; it is built and signed by rcgen with the CA's key.
//!
//! rcgen holds one value per subject attribute type; a second value of a type goes under
//! rcgen's custom type with the same OID (so `O=dev, O=team`, two groups, comes out as
//! requested). A request with more values of one type than that is refused with an error
//! rather than issued with a subject it did not ask for; every issued certificate is read
//! back and its subject and issuer compared with what they must be.

use std::time::Duration;

use jiff::Timestamp;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa,
    KeyUsagePurpose, SanType, SerialNumber,
};
use x509_parser::prelude::FromDer;

use super::ca::CertificateAuthority;
use crate::controllers::certificates::csr::{self, ParsedCsr, SUBJECT_ATTRIBUTES};

/// How long before now a certificate starts (clocks drift), and below which lifetime its
/// end is not shortened by that much (5 minutes is about 1% of 8 hours).
pub(crate) const BACKDATE: Duration = Duration::from_secs(5 * 60);
pub(crate) const SHORT: Duration = Duration::from_secs(8 * 3600);

/// A certificate's validity.
#[derive(Debug, PartialEq)]
pub(crate) struct Validity {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Go's `time.Time` `%v` for the whole seconds of a certificate's times.
fn go_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

fn add(t: Timestamp, d: Duration) -> Result<Timestamp, String> {
    let span =
        jiff::SignedDuration::try_from(d).map_err(|e| format!("duration out of range: {e}"))?;
    t.checked_add(span)
        .map_err(|e| format!("time out of range: {e}"))
}

fn sub(t: Timestamp, d: Duration) -> Result<Timestamp, String> {
    let span =
        jiff::SignedDuration::try_from(d).map_err(|e| format!("duration out of range: {e}"))?;
    t.checked_sub(span)
        .map_err(|e| format!("time out of range: {e}"))
}

/// The validity of a certificate signed at `now` for `ttl` by a CA that expires at
/// `signer_not_after`: from `now - 5m`; to `now + ttl` for a short-lived certificate
/// (under 8 h), else `now + ttl - 5m`; never past the CA's own end.
pub(crate) fn validity(
    now: Timestamp,
    ttl: Duration,
    signer_not_after: Timestamp,
) -> Result<Validity, String> {
    let not_before = sub(now, BACKDATE)?;
    let mut not_after = if ttl < SHORT {
        add(now, ttl)?
    } else {
        sub(add(now, ttl)?, BACKDATE)?
    };
    if not_after >= signer_not_after {
        not_after = signer_not_after;
    }
    if not_before >= signer_not_after {
        return Err(format!(
            "the signer has expired: NotAfter={}",
            go_time(signer_not_after)
        ));
    }
    if now >= signer_not_after {
        return Err(format!(
            "refusing to sign a certificate that expired in the past: NotAfter={}",
            go_time(signer_not_after)
        ));
    }
    Ok(Validity {
        not_before,
        not_after,
    })
}

/// The extended key usages, in Go's `x509.ExtKeyUsage` order (the order it sorts them in).
fn extended_usage(usage: &str) -> Option<(u8, ExtendedKeyUsagePurpose)> {
    use ExtendedKeyUsagePurpose::*;
    Some(match usage {
        "any" => (0, Any),
        "server auth" => (1, ServerAuth),
        "client auth" => (2, ClientAuth),
        "code signing" => (3, CodeSigning),
        "email protection" | "s/mime" => (4, EmailProtection),
        "ipsec end system" => (5, Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 5])),
        "ipsec tunnel" => (6, Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 6])),
        "ipsec user" => (7, Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 7])),
        "timestamping" => (8, TimeStamping),
        "ocsp signing" => (9, OcspSigning),
        "microsoft sgc" => (10, Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3])),
        "netscape sgc" => (11, Other(vec![2, 16, 840, 1, 113730, 4, 1])),
        _ => return None,
    })
}

fn key_usage(usage: &str) -> Option<KeyUsagePurpose> {
    use KeyUsagePurpose::*;
    Some(match usage {
        "signing" | "digital signature" => DigitalSignature,
        "content commitment" => ContentCommitment,
        "key encipherment" => KeyEncipherment,
        "key agreement" => KeyAgreement,
        "data encipherment" => DataEncipherment,
        "cert sign" => KeyCertSign,
        "crl sign" => CrlSign,
        "encipher only" => EncipherOnly,
        "decipher only" => DecipherOnly,
        _ => return None,
    })
}

/// `spec.usages` as key usages and extended key usages (upstream's `keyUsagesFromStrings`).
pub(crate) fn usages(
    usages: &[String],
) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>), String> {
    let mut keys = Vec::new();
    let mut extended: Vec<(u8, ExtendedKeyUsagePurpose)> = Vec::new();
    let mut unrecognized = Vec::new();
    for usage in usages {
        if let Some(k) = key_usage(usage) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        } else if let Some((rank, e)) = extended_usage(usage) {
            if !extended.iter().any(|(r, _)| *r == rank) {
                extended.push((rank, e));
            }
        } else {
            unrecognized.push(format!("{usage:?}"));
        }
    }
    if !unrecognized.is_empty() {
        return Err(format!(
            "unrecognized usage values: [{}]",
            unrecognized.join(" ")
        ));
    }
    extended.sort_by_key(|(rank, _)| *rank);
    Ok((keys, extended.into_iter().map(|(_, e)| e).collect()))
}

/// A string as Go's `encoding/asn1` writes it: PrintableString when it can, else UTF8.
fn dn_value(value: &str) -> DnValue {
    match rcgen::string::PrintableString::try_from(value) {
        Ok(printable) => DnValue::PrintableString(printable),
        Err(_) => DnValue::Utf8String(value.to_string()),
    }
}

fn standard_type(arc: u64) -> Option<DnType> {
    match arc {
        6 => Some(DnType::CountryName),
        8 => Some(DnType::StateOrProvinceName),
        7 => Some(DnType::LocalityName),
        10 => Some(DnType::OrganizationName),
        11 => Some(DnType::OrganizationalUnitName),
        3 => Some(DnType::CommonName),
        _ => None,
    }
}

/// The subject the certificate gets, or why rcgen cannot write it.
pub(crate) fn subject(csr: &ParsedCsr) -> Result<DistinguishedName, String> {
    let mut name = DistinguishedName::new();
    for (arc, label) in SUBJECT_ATTRIBUTES {
        let custom = DnType::CustomDnType(vec![2, 5, 4, arc]);
        let types: Vec<DnType> = match standard_type(arc) {
            Some(standard) => vec![standard, custom],
            None => vec![custom],
        };
        let values = csr.attribute(arc);
        if values.len() > types.len() {
            return Err(format!(
                "the subject has {} {label} attributes: rkcm issues at most {}",
                values.len(),
                types.len()
            ));
        }
        for (ty, value) in types.into_iter().zip(values) {
            name.push(ty, dn_value(value));
        }
    }
    Ok(name)
}

fn subject_alt_names(csr: &ParsedCsr) -> Result<Vec<SanType>, String> {
    let ia5 = |kind: &str, value: &str| {
        rcgen::string::Ia5String::try_from(value)
            .map_err(|_| format!("x509: {kind} SAN {value:?} is not an IA5String"))
    };
    let mut names = Vec::new();
    for dns in &csr.dns_names {
        names.push(SanType::DnsName(ia5("DNS", dns)?));
    }
    for email in &csr.email_addresses {
        names.push(SanType::Rfc822Name(ia5("email", email)?));
    }
    names.extend(csr.ip_addresses.iter().copied().map(SanType::IpAddress));
    for uri in &csr.uris {
        names.push(SanType::URI(ia5("URI", uri)?));
    }
    Ok(names)
}

fn offset_date_time(t: Timestamp) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second())
        .map_err(|e| format!("time out of range: {e}"))
}

/// A random serial number below 2^128, as DER wants it (no leading zero bytes).
fn serial() -> SerialNumber {
    let bytes: [u8; 16] = rand::random();
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(15);
    SerialNumber::from_slice(&bytes[first..])
}

/// Issues a certificate for `csr` (DER), signed at `now`.
pub(crate) fn sign(
    ca: &CertificateAuthority,
    csr: &ParsedCsr,
    requested_usages: &[String],
    ttl: Duration,
    now: Timestamp,
) -> Result<Vec<u8>, String> {
    csr::check_signature(csr)
        .map_err(|e| format!("unable to verify certificate request signature: {e}"))?;
    let public_key = rcgen::SubjectPublicKeyInfo::from_der(&csr.public_key_info)
        .map_err(|e| format!("unsupported public key in the request: {e}"))?;
    let (key_usages, extended_key_usages) = usages(requested_usages)?;
    let validity = validity(now, ttl, ca.not_after)?;
    let mut params = CertificateParams::default();
    params.serial_number = Some(serial());
    params.distinguished_name = subject(csr)?;
    params.subject_alt_names = subject_alt_names(csr)?;
    params.key_usages = key_usages;
    params.extended_key_usages = extended_key_usages;
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = ca.has_key_id;
    params.not_before = offset_date_time(validity.not_before)?;
    params.not_after = offset_date_time(validity.not_after)?;
    let certificate = params
        .signed_by(&public_key, &ca.issuer)
        .map_err(|e| format!("failed to sign certificate: {e}"))?;
    let der = certificate.der().to_vec();
    check_issued(ca, csr, &der)?;
    Ok(der)
}

/// The issued certificate names the CA as its issuer and the request's subject, exactly.
fn check_issued(ca: &CertificateAuthority, csr: &ParsedCsr, der: &[u8]) -> Result<(), String> {
    let (_, issued) = x509_parser::certificate::X509Certificate::from_der(der)
        .map_err(|e| format!("failed to sign certificate: the result does not parse: {e}"))?;
    let (_, ca_cert) = x509_parser::certificate::X509Certificate::from_der(&ca.der)
        .map_err(|e| format!("failed to sign certificate: the CA does not parse: {e}"))?;
    if issued.issuer().as_raw() != ca_cert.subject().as_raw() {
        return Err(
            "failed to sign certificate: rkcm cannot write this CA's subject as the issuer".into(),
        );
    }
    let written: Vec<(String, String)> = issued
        .subject()
        .iter_attributes()
        .map(|a| {
            (
                a.attr_type().to_id_string(),
                a.as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let wanted: Vec<(String, String)> = SUBJECT_ATTRIBUTES
        .iter()
        .flat_map(|(arc, _)| {
            csr.attribute(*arc)
                .iter()
                .map(move |v| (format!("2.5.4.{arc}"), v.clone()))
        })
        .collect();
    if written != wanted {
        return Err("failed to sign certificate: rkcm cannot write the requested subject".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ca::{parse_ca, tests as ca_tests};
    use super::*;
    use crate::controllers::certificates::csr::tests::request_pem;
    use std::path::Path;
    use x509_parser::extensions::ParsedExtension;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const H: u64 = 3600;

    #[test]
    fn validity_backdates_and_caps_as_upstream() {
        let now = ts("2024-01-01T00:00:00Z");
        let far = ts("2100-01-01T00:00:00Z");
        // (ttl in seconds, the CA's end, (notBefore, notAfter) or the refusal)
        type Case<'a> = (u64, Timestamp, Result<(&'a str, &'a str), &'a str>);
        let cases: &[Case] = &[
            // Short-lived: the end is not backdated.
            (H, far, Ok(("2023-12-31T23:55:00Z", "2024-01-01T01:00:00Z"))),
            (2 * H, far, Ok(("2023-12-31T23:55:00Z", "2024-01-01T02:00:00Z"))),
            (8 * H - 1, far, Ok(("2023-12-31T23:55:00Z", "2024-01-01T07:59:59Z"))),
            // From 8 h on, it is.
            (8 * H, far, Ok(("2023-12-31T23:55:00Z", "2024-01-01T07:55:00Z"))),
            (8760 * H, far, Ok(("2023-12-31T23:55:00Z", "2024-12-30T23:55:00Z"))),
            // Never past the CA.
            (8760 * H, ts("2024-02-01T00:00:00Z"), Ok(("2023-12-31T23:55:00Z", "2024-02-01T00:00:00Z"))),
            (H, ts("2024-01-01T01:00:00Z"), Ok(("2023-12-31T23:55:00Z", "2024-01-01T01:00:00Z"))),
            // A CA that ends between the backdated start and now.
            (H, ts("2023-12-31T23:58:00Z"), Err("refusing to sign a certificate that expired in the past: NotAfter=2023-12-31 23:58:00 +0000 UTC")),
            (H, ts("2023-12-31T23:50:00Z"), Err("the signer has expired: NotAfter=2023-12-31 23:50:00 +0000 UTC")),
        ];
        for (ttl, ca_end, want) in cases {
            let got = validity(now, Duration::from_secs(*ttl), *ca_end);
            let want = want
                .map(|(b, a)| Validity {
                    not_before: ts(b),
                    not_after: ts(a),
                })
                .map_err(str::to_string);
            assert_eq!(got, want, "ttl {ttl}s, CA until {ca_end}");
        }
    }

    #[test]
    fn usages_map_to_key_usages_in_gos_order() {
        let strings = |u: &[&str]| u.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (keys, extended) = usages(&strings(&[
            "client auth",
            "digital signature",
            "server auth",
            "signing",
            "any",
            "s/mime",
            "email protection",
        ]))
        .unwrap();
        assert_eq!(keys, [KeyUsagePurpose::DigitalSignature]);
        assert_eq!(
            extended,
            [
                ExtendedKeyUsagePurpose::Any,
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
                ExtendedKeyUsagePurpose::EmailProtection,
            ]
        );
        assert_eq!(
            usages(&strings(&["client auth", "frob", "x y"])).unwrap_err(),
            r#"unrecognized usage values: ["frob" "x y"]"#
        );
    }

    fn sign_with(
        cert: &str,
        key: &str,
        pem: &str,
        usages: &[&str],
        ttl: Duration,
    ) -> Result<Vec<u8>, String> {
        let ca = parse_ca(
            Path::new("ca.crt"),
            cert.as_bytes().to_vec(),
            key.as_bytes().to_vec(),
        )
        .unwrap();
        let csr = csr::parse(pem.as_bytes()).unwrap();
        let usages: Vec<String> = usages.iter().map(|s| s.to_string()).collect();
        sign(&ca, &csr, &usages, ttl, Timestamp::now())
    }

    #[test]
    fn an_issued_certificate_has_the_requested_subject_and_the_policy() {
        for (cert, key) in [
            (
                ca_tests::RSA_CERT.to_string(),
                ca_tests::RSA_KEY.to_string(),
            ),
            (ca_tests::EC_CERT.to_string(), ca_tests::EC_KEY.to_string()),
            ca_tests::rcgen_ca(),
        ] {
            let der = sign_with(
                &cert,
                &key,
                include_str!("../testdata/node-serving.csr"),
                &["digital signature", "key encipherment", "server auth"],
                Duration::from_secs(3600),
            )
            .unwrap();
            let (_, issued) = x509_parser::parse_x509_certificate(&der).unwrap();
            let (_, ca) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
            let ca = ca.parse_x509().unwrap();
            assert_eq!(issued.issuer().as_raw(), ca.subject().as_raw());
            assert!(issued.verify_signature(Some(ca.public_key())).is_ok());
            assert_eq!(
                issued.subject().to_string(),
                "O=system:nodes, CN=system:node:n1"
            );
            let validity = issued.validity();
            assert_eq!(
                validity.not_after.timestamp() - validity.not_before.timestamp(),
                3900
            );
            let serial = issued.raw_serial();
            assert!(
                serial.len() <= 17 && (serial.len() < 17 || serial[0] == 0),
                "below 2^128"
            );
            let mut saw = Vec::new();
            for extension in issued.extensions() {
                match extension.parsed_extension() {
                    ParsedExtension::BasicConstraints(bc) => {
                        assert!(!bc.ca);
                        assert!(extension.critical);
                        saw.push("bc");
                    }
                    ParsedExtension::KeyUsage(ku) => {
                        assert!(ku.digital_signature() && ku.key_encipherment());
                        assert!(!ku.key_cert_sign());
                        saw.push("ku");
                    }
                    ParsedExtension::ExtendedKeyUsage(eku) => {
                        assert!(eku.server_auth && !eku.client_auth);
                        saw.push("eku");
                    }
                    ParsedExtension::SubjectAlternativeName(san) => {
                        assert_eq!(san.general_names.len(), 2);
                        saw.push("san");
                    }
                    _ => {}
                }
            }
            saw.sort_unstable();
            assert_eq!(saw, ["bc", "eku", "ku", "san"]);
        }
    }

    #[test]
    fn the_requests_own_extensions_are_dropped_and_two_groups_kept() {
        let (cert, key) = ca_tests::rcgen_ca();
        // The openssl request carries O=dev and O=team.
        let der = sign_with(
            &cert,
            &key,
            include_str!("../testdata/alice.csr"),
            &["client auth"],
            Duration::from_secs(7200),
        )
        .unwrap();
        let (_, issued) = x509_parser::parse_x509_certificate(&der).unwrap();
        let groups: Vec<&str> = issued
            .subject()
            .iter_organization()
            .map(|o| o.as_str().unwrap())
            .collect();
        assert_eq!(groups, ["dev", "team"]);
        // A request asking for CA:TRUE and cert sign gets neither.
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sneaky");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let pem = params
            .serialize_request(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem()
            .unwrap();
        let der = sign_with(
            &cert,
            &key,
            &pem,
            &["client auth"],
            Duration::from_secs(7200),
        )
        .unwrap();
        let (_, issued) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert!(!issued.is_ca());
        assert!(issued.key_usage().unwrap().is_none());
    }

    #[test]
    fn requests_that_cannot_be_issued_say_why() {
        let (cert, key) = ca_tests::rcgen_ca();
        let three = request_pem(
            &[
                (rcgen::DnType::CommonName, "x"),
                (rcgen::DnType::OrganizationName, "a"),
                (rcgen::DnType::CustomDnType(vec![2, 5, 4, 10]), "b"),
            ],
            &[],
        );
        assert!(sign_with(
            &cert,
            &key,
            &three,
            &["client auth"],
            Duration::from_secs(3600)
        )
        .is_ok());
        let mut tampered = csr::parse(include_bytes!("../testdata/alice.csr")).unwrap();
        let at = tampered.der.windows(5).position(|w| w == b"alice").unwrap();
        tampered.der[at] ^= 0x02;
        let ca = parse_ca(Path::new("ca.crt"), cert.into_bytes(), key.into_bytes()).unwrap();
        assert_eq!(
            sign(
                &ca,
                &tampered,
                &[],
                Duration::from_secs(3600),
                Timestamp::now()
            )
            .unwrap_err(),
            "unable to verify certificate request signature: x509: ECDSA verification failure"
        );
    }
}
