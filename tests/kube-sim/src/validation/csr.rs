//! CertificateSigningRequest validation, as kube-apiserver v1.29's
//! `pkg/apis/certificates/validation` checks it: on create, the request must parse as a
//! PEM `CERTIFICATE REQUEST` whose signature verifies, usages are required, known and not
//! repeated, the signer name is a qualified name (and not `kubernetes.io/legacy-unknown`
//! through v1), `expirationSeconds` is at least 600; conditions have a type and a status
//! (`True` only for Approved, Denied and Failed), Approved and Denied exclude each other,
//! no type repeats; `status.certificate` holds only well-formed `CERTIFICATE` blocks. On
//! update, per subresource: no Approved, Denied or Failed condition may go; only
//! `/approval` may add or change Approved and Denied; only `/status` may set the
//! certificate, once. Each tolerance for data stored before a rule existed is kept
//! (upstream's `getValidationOptions`).

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::Value;
use x509_parser::prelude::FromDer;

use super::{arr, idx, is_dns1123_label, is_dns1123_subdomain, q, str_of, Errs, FieldCause};

pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Upstream's `allValidUsages`, sorted as its `List()` prints them.
const VALID_USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

const TRUE_ONLY_TYPES: [&str; 3] = ["Approved", "Denied", "Failed"];

/// The tolerances of `getValidationOptions` and the subresource's permissions.
#[derive(Default)]
struct Options {
    allow_setting_approval_conditions: bool,
    allow_setting_certificate: bool,
    allow_both_approved_and_denied: bool,
    allow_legacy_signer_name: bool,
    allow_duplicate_condition_types: bool,
    allow_empty_condition_type: bool,
    allow_arbitrary_certificate: bool,
    allow_unknown_usages: bool,
    allow_duplicate_usages: bool,
}

fn conditions(o: &Value) -> &[Value] {
    arr(o.get("status").and_then(|s| s.get("conditions")))
}

fn condition_type(c: &Value) -> &str {
    str_of(c.get("type"))
}

fn usages(o: &Value) -> Vec<&str> {
    arr(o.get("spec").and_then(|s| s.get("usages")))
        .iter()
        .map(|u| u.as_str().unwrap_or(""))
        .collect()
}

/// `status.certificate` decoded (JSON carries it base64).
fn certificate(o: &Value) -> Vec<u8> {
    let text = str_of(o.get("status").and_then(|s| s.get("certificate")));
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|_| text.as_bytes().to_vec())
}

fn options(new: &Value, old: Option<&Value>) -> Options {
    let Some(old) = old else {
        return Options::default();
    };
    let old_conditions = conditions(old);
    let has = |t: &str| old_conditions.iter().any(|c| condition_type(c) == t);
    let mut seen = BTreeSet::new();
    let duplicate_types = old_conditions
        .iter()
        .any(|c| !seen.insert(condition_type(c)));
    let old_usages = usages(old);
    let mut seen_usages = BTreeSet::new();
    let old_certificate = certificate(old);
    Options {
        allow_both_approved_and_denied: has("Approved") && has("Denied"),
        allow_legacy_signer_name: str_of(old.get("spec").and_then(|s| s.get("signerName")))
            == LEGACY_UNKNOWN_SIGNER,
        allow_duplicate_condition_types: duplicate_types,
        allow_empty_condition_type: old_conditions.iter().any(|c| condition_type(c).is_empty()),
        allow_arbitrary_certificate: certificate(new) == old_certificate
            || validate_certificate(&old_certificate).is_err(),
        allow_unknown_usages: old_usages.iter().any(|u| !VALID_USAGES.contains(u)),
        allow_duplicate_usages: old_usages.iter().any(|u| !seen_usages.insert(*u)),
        ..Options::default()
    }
}

/// Create validation (upstream `ValidateCertificateSigningRequestCreate`, after the
/// generic metadata checks).
pub(super) fn validate_create(e: &mut Errs, o: &Value) {
    validate_csr(e, o, &options(o, None));
}

/// Update validation of a PUT or PATCH on the object (`sub` None), `/status` or
/// `/approval`: the CSR rules on top of the generic metadata checks.
pub fn validate_update(new: &Value, old: &Value, sub: Option<&str>) -> Vec<FieldCause> {
    let mut e = Errs::default();
    let mut opts = options(new, Some(old));
    match sub {
        Some("status") => opts.allow_setting_certificate = true,
        Some("approval") => opts.allow_setting_approval_conditions = true,
        _ => {}
    }
    validate_csr(&mut e, new, &opts);
    let of_type = |o: &Value, t: &str| -> Vec<Value> {
        conditions(o)
            .iter()
            .filter(|c| condition_type(c) == t)
            .cloned()
            .collect()
    };
    for t in TRUE_ONLY_TYPES {
        if of_type(new, t).len() < of_type(old, t).len() {
            e.forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {}", q(t)),
            );
        }
    }
    if !opts.allow_setting_approval_conditions {
        for t in ["Approved", "Denied"] {
            let (before, after) = (of_type(old, t), of_type(new, t));
            if after.len() > before.len() {
                e.forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {}", q(t)),
                );
            } else if after.len() == before.len() && after != before {
                e.forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type {}", q(t)),
                );
            }
        }
    }
    let (before, after) = (certificate(old), certificate(new));
    if before != after {
        if !opts.allow_setting_certificate {
            e.forbidden(
                "status.certificate",
                "updates may not set certificate content",
            );
        } else if !before.is_empty() {
            e.forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            );
        }
    }
    e.0
}

fn validate_csr(e: &mut Errs, o: &Value, opts: &Options) {
    let spec = o.get("spec");
    let request_text = str_of(spec.and_then(|s| s.get("request")));
    let request = base64::engine::general_purpose::STANDARD
        .decode(request_text)
        .unwrap_or_default();
    if let Err(why) = check_request(&request) {
        e.invalid("spec.request", &go_bytes(&request), &why);
    }
    let usages = usages(o);
    if usages.is_empty() {
        e.required("spec.usages", "");
    }
    if !opts.allow_unknown_usages {
        for (i, usage) in usages.iter().enumerate() {
            if !VALID_USAGES.contains(usage) {
                e.not_supported(&idx("spec.usages", i), &q(usage), &VALID_USAGES);
            }
        }
    }
    if !opts.allow_duplicate_usages {
        let mut seen = BTreeSet::new();
        for (i, usage) in usages.iter().enumerate() {
            if !seen.insert(*usage) {
                e.duplicate(&idx("spec.usages", i), &q(usage));
            }
        }
    }
    let signer = str_of(spec.and_then(|s| s.get("signerName")));
    if !opts.allow_legacy_signer_name && signer == LEGACY_UNKNOWN_SIGNER {
        e.invalid(
            "spec.signerName",
            &q(signer),
            "the legacy signerName is not allowed via this API version",
        );
    } else {
        validate_signer_name(e, "spec.signerName", signer);
    }
    if let Some(seconds) = spec
        .and_then(|s| s.get("expirationSeconds"))
        .and_then(Value::as_i64)
    {
        if seconds < 600 {
            e.invalid(
                "spec.expirationSeconds",
                &seconds.to_string(),
                "may not specify a duration less than 600 seconds (10 minutes)",
            );
        }
    }
    validate_conditions(e, o, opts);
    if !opts.allow_arbitrary_certificate {
        if let Err(why) = validate_certificate(&certificate(o)) {
            e.invalid("status.certificate", &q("<certificate data>"), &why);
        }
    }
}

fn validate_conditions(e: &mut Errs, o: &Value, opts: &Options) {
    let mut seen = BTreeSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions(o).iter().enumerate() {
        let path = idx("status.conditions", i);
        let t = condition_type(c);
        if !opts.allow_empty_condition_type && t.is_empty() {
            e.required(&format!("{path}.type"), "");
        }
        let status = str_of(c.get("status"));
        let allowed: &[&str] = if TRUE_ONLY_TYPES.contains(&t) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            e.required(&format!("{path}.status"), "");
        } else if !allowed.contains(&status) {
            e.not_supported(&format!("{path}.status"), &q(status), allowed);
        }
        if !opts.allow_both_approved_and_denied {
            let exclusive = "Approved and Denied conditions are mutually exclusive";
            match t {
                "Approved" => {
                    approved = true;
                    if denied {
                        e.invalid(&format!("{path}.type"), &q(t), exclusive);
                    }
                }
                "Denied" => {
                    denied = true;
                    if approved {
                        e.invalid(&format!("{path}.type"), &q(t), exclusive);
                    }
                }
                _ => {}
            }
        }
        if !opts.allow_duplicate_condition_types && !seen.insert(t) {
            e.duplicate(&format!("{path}.type"), &q(t));
        }
    }
}

/// Upstream's `ValidateSignerName`.
fn validate_signer_name(e: &mut Errs, path: &str, name: &str) {
    if name.is_empty() {
        e.required(path, "");
        return;
    }
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() != 2 {
        e.invalid(
            path,
            &q(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        );
        return;
    }
    let (domain, signer_path) = (segments[0], segments[1]);
    if domain.len() > 253 {
        e.too_long(path, 253);
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let errors = is_dns1123_label(label);
        if !errors.is_empty() {
            for why in errors {
                e.invalid(
                    path,
                    &q(domain),
                    &format!("validating label {}: {why}", q(label)),
                );
            }
            break;
        }
    }
    if labels.len() < 2 {
        e.invalid(
            path,
            &q(domain),
            "should be a domain with at least two segments separated by dots",
        );
    }
    for label in signer_path.split('.') {
        let errors = is_dns1123_subdomain(label);
        if !errors.is_empty() {
            for why in errors {
                e.invalid(
                    path,
                    &q(signer_path),
                    &format!("validating label {}: {why}", q(label)),
                );
            }
            break;
        }
    }
    let max = 253 + (253 + 63 + 1) + 1;
    if name.len() > max {
        e.too_long(path, max);
    }
}

/// `[]byte` as Go's `%#v` prints it.
pub(crate) fn go_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
    format!("[]byte{{{}}}", shown.join(", "))
}

/// One PEM block: its label, whether it has headers, its decoded body.
struct PemBlock {
    label: String,
    headers: bool,
    body: Option<Vec<u8>>,
}

/// The PEM blocks of a text as Go's `pem.Decode` finds them one after another (text
/// around and between them ignored).
fn pem_blocks(data: &[u8]) -> Vec<PemBlock> {
    let text = String::from_utf8_lossy(data);
    let mut blocks = Vec::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = after[..label_end].to_string();
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body_start.find(&end_marker) else {
            break;
        };
        let body = &body_start[..end];
        let headers = body.lines().any(|line| line.contains(':'));
        let encoded: String = body
            .lines()
            .filter(|line| !line.contains(':'))
            .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
            .collect();
        blocks.push(PemBlock {
            label,
            headers,
            body: base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok(),
        });
        rest = &body_start[end + end_marker.len()..];
    }
    blocks
}

/// Upstream's `validateCertificate`: empty, or only well-formed `CERTIFICATE` blocks.
fn validate_certificate(data: &[u8]) -> Result<(), String> {
    if data.is_empty() {
        return Ok(());
    }
    let blocks: Vec<PemBlock> = pem_blocks(data)
        .into_iter()
        .filter(|b| b.body.is_some())
        .collect();
    if blocks.is_empty() {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    for block in blocks {
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                q(&block.label)
            ));
        }
        if block.headers {
            return Err("no PEM block headers are permitted".into());
        }
        let body = block.body.unwrap_or_default();
        if body.is_empty() {
            return Err("found CERTIFICATE PEM block containing 0 certificates".into());
        }
        let mut rest: &[u8] = &body;
        while !rest.is_empty() {
            match x509_parser::certificate::X509Certificate::from_der(rest) {
                Ok((remainder, _)) => rest = remainder,
                Err(_) => return Err("x509: malformed certificate".into()),
            }
        }
    }
    Ok(())
}

/// Upstream's `validateCSR`: a PEM `CERTIFICATE REQUEST` whose signature verifies, with
/// Go's messages where it can say them.
pub(crate) fn check_request(pem: &[u8]) -> Result<(), String> {
    const WRONG_BLOCK: &str = "PEM block type must be CERTIFICATE REQUEST";
    let Some(block) = pem_blocks(pem).into_iter().find(|b| b.body.is_some()) else {
        return Err(WRONG_BLOCK.into());
    };
    if block.label != "CERTIFICATE REQUEST" {
        return Err(WRONG_BLOCK.into());
    }
    let der = block.body.unwrap_or_default();
    let (rest, request) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&der)
            .map_err(|_| "x509: malformed certificate request".to_string())?;
    if !rest.is_empty() {
        return Err("x509: trailing data after X.509 certificate request".into());
    }
    request.verify_signature().map_err(|_| {
        let algorithm = request
            .certification_request_info
            .subject_pki
            .algorithm
            .algorithm
            .to_id_string();
        match algorithm.as_str() {
            "1.2.840.10045.2.1" => "x509: ECDSA verification failure",
            "1.3.101.112" => "x509: Ed25519 verification failure",
            "1.2.840.113549.1.1.1" => "crypto/rsa: verification error",
            _ => "x509: cannot verify signature: algorithm unimplemented",
        }
        .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request_b64(key: &rcgen::KeyPair) -> String {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let pem = params.serialize_request(key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "c"}, "spec": spec, "status": status})
    }

    fn good_spec() -> Value {
        json!({
            "request": request_b64(&rcgen::KeyPair::generate().unwrap()),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
        })
    }

    fn create(o: &Value) -> Vec<(String, String)> {
        let mut e = Errs::default();
        validate_create(&mut e, o);
        e.0.into_iter().map(|c| (c.field, c.message)).collect()
    }

    #[test]
    fn a_good_request_passes() {
        assert_eq!(create(&csr(good_spec(), json!({}))), vec![]);
    }

    #[test]
    fn create_rules_with_upstreams_messages() {
        let mut spec = good_spec();
        spec["usages"] = json!(["client auth", "frob", "client auth"]);
        spec["signerName"] = json!(LEGACY_UNKNOWN_SIGNER);
        spec["expirationSeconds"] = json!(599);
        let errors = create(&csr(spec, json!({})));
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.usages[1]",
                "spec.usages[2]",
                "spec.signerName",
                "spec.expirationSeconds"
            ]
        );
        assert!(errors[0].1.starts_with(
            "Unsupported value: \"frob\": supported values: \"any\", \"cert sign\", \"client auth\""
        ));
        assert_eq!(errors[1].1, "Duplicate value: \"client auth\"");
        assert_eq!(
            errors[2].1,
            "Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"
        );
        assert_eq!(
            errors[3].1,
            "Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"
        );
        let mut spec = good_spec();
        spec["usages"] = json!([]);
        spec["signerName"] = json!("");
        let errors = create(&csr(spec, json!({})));
        assert_eq!(
            errors,
            vec![
                ("spec.usages".into(), "Required value".into()),
                ("spec.signerName".into(), "Required value".into()),
            ]
        );
        let mut spec = good_spec();
        spec["signerName"] = json!("example/x");
        assert_eq!(
            create(&csr(spec, json!({}))),
            vec![(
                "spec.signerName".into(),
                "Invalid value: \"example\": should be a domain with at least two segments separated by dots".into()
            )]
        );
    }

    #[test]
    fn the_request_must_be_a_signed_csr() {
        let mut spec = good_spec();
        spec["request"] = json!(base64::engine::general_purpose::STANDARD.encode("not a csr"));
        let errors = create(&csr(spec, json!({})));
        assert_eq!(
            errors,
            vec![(
                "spec.request".into(),
                "Invalid value: []byte{0x6e, 0x6f, 0x74, 0x20, 0x61, 0x20, 0x63, 0x73, 0x72}: PEM block type must be CERTIFICATE REQUEST".into()
            )]
        );
        // A request whose subject was changed after signing.
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(request_b64(&key))
                .unwrap(),
        )
        .unwrap();
        let block = pem_blocks(pem.as_bytes()).remove(0);
        let mut der = block.body.unwrap();
        let at = der.windows(5).position(|w| w == b"alice").unwrap();
        der[at] = b'b';
        let forged = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            base64::engine::general_purpose::STANDARD.encode(&der)
        );
        assert_eq!(
            check_request(forged.as_bytes()),
            Err("x509: ECDSA verification failure".into())
        );
    }

    #[test]
    fn conditions_are_checked() {
        let status = json!({"conditions": [
            {"type": "Approved", "status": "False"},
            {"type": "Denied", "status": "True"},
            {"type": "", "status": ""},
            {"type": "Custom", "status": "Maybe"},
            {"type": "Custom", "status": "True"},
        ]});
        let errors = create(&csr(good_spec(), status));
        assert_eq!(
            errors,
            vec![
                ("status.conditions[0].status".into(), "Unsupported value: \"False\": supported values: \"True\"".into()),
                ("status.conditions[1].type".into(), "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive".into()),
                ("status.conditions[2].type".into(), "Required value".into()),
                ("status.conditions[2].status".into(), "Required value".into()),
                ("status.conditions[3].status".into(), "Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"".into()),
                ("status.conditions[4].type".into(), "Duplicate value: \"Custom\"".into()),
            ]
        );
    }

    fn with_certificate(o: &Value, pem: &str) -> Value {
        let mut o = o.clone();
        o["status"]["certificate"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
        o
    }

    #[test]
    fn subresources_change_only_what_they_own() {
        let old = csr(good_spec(), json!({}));
        let approved =
            json!({"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]});
        let with_approval = csr(good_spec(), approved.clone());
        // /status cannot approve, /approval can; the main resource neither.
        let forbidden_add = vec![FieldCause {
            reason: "FieldValueForbidden",
            message: "Forbidden: updates may not add a condition of type \"Approved\"".into(),
            field: "status.conditions".into(),
        }];
        let mut new = old.clone();
        new["status"] = approved.clone();
        assert_eq!(validate_update(&new, &old, Some("status")), forbidden_add);
        assert_eq!(validate_update(&new, &old, None), forbidden_add);
        assert_eq!(validate_update(&new, &old, Some("approval")), vec![]);
        // Nothing may remove it.
        let errors = validate_update(&old, &with_approval, Some("approval"));
        assert_eq!(
            errors[0].message,
            "Forbidden: updates may not remove a condition of type \"Approved\""
        );
        // The certificate: /status sets it once; nothing else sets it.
        let (cert, _) = {
            let key = rcgen::KeyPair::generate().unwrap();
            let c = rcgen::CertificateParams::new(vec!["x".to_string()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
            (c.pem(), key)
        };
        let issued = with_certificate(&with_approval, &cert);
        assert_eq!(
            validate_update(&issued, &with_approval, Some("status")),
            vec![]
        );
        assert_eq!(
            validate_update(&issued, &with_approval, Some("approval"))[0].message,
            "Forbidden: updates may not set certificate content"
        );
        let other = rcgen::CertificateParams::new(vec!["y".to_string()])
            .unwrap()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        assert_eq!(
            validate_update(
                &with_certificate(&with_approval, &other),
                &issued,
                Some("status")
            )[0]
            .message,
            "Forbidden: updates may not modify existing certificate content"
        );
        let bad = validate_update(
            &with_certificate(&with_approval, "junk"),
            &with_approval,
            Some("status"),
        );
        assert_eq!(bad[0].field, "status.certificate");
        assert_eq!(bad[0].message, "Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block");
        let key_block = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert_eq!(
            validate_update(&with_certificate(&with_approval, key_block), &with_approval, Some("status"))[0].message,
            "Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\""
        );
    }

    #[test]
    fn stored_legacy_data_is_tolerated() {
        let mut spec = good_spec();
        spec["signerName"] = json!(LEGACY_UNKNOWN_SIGNER);
        spec["usages"] = json!(["client auth", "client auth", "weird"]);
        let old = csr(spec, json!({}));
        assert_eq!(validate_update(&old, &old, None), vec![]);
    }
}
