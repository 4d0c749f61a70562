//! Legacy ServiceAccount tokens as KCM writes them (pkg/serviceaccount/legacy.go's
//! `LegacyClaims` through jwt.go's generator): a compact JWS whose protected header is
//! `{"alg":ALG,"kid":KID}` (no `typ`) and whose payload holds exactly six claims in Go's
//! map order (sorted keys): `iss` `kubernetes/serviceaccount`, the namespace, the Secret's
//! name, the ServiceAccount's name and UID, and `sub` `system:serviceaccount:NS:NAME`. No
//! `exp`, `iat`, `nbf` or `aud`: legacy tokens never expire.

use std::collections::BTreeMap;

use base64::Engine as _;

use super::signer::{SignError, Signer};

pub(crate) const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// What a legacy token says about its ServiceAccount and Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegacyClaims<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) service_account_name: &'a str,
    pub(crate) service_account_uid: &'a str,
    pub(crate) secret_name: &'a str,
}

/// The payload's JSON, as Go's encoding/json writes the claims map.
pub(crate) fn payload_json(claims: &LegacyClaims<'_>) -> String {
    let subject = format!(
        "system:serviceaccount:{}:{}",
        claims.namespace, claims.service_account_name
    );
    let map: BTreeMap<&str, &str> = BTreeMap::from([
        ("iss", LEGACY_ISSUER),
        ("kubernetes.io/serviceaccount/namespace", claims.namespace),
        (
            "kubernetes.io/serviceaccount/secret.name",
            claims.secret_name,
        ),
        (
            "kubernetes.io/serviceaccount/service-account.name",
            claims.service_account_name,
        ),
        (
            "kubernetes.io/serviceaccount/service-account.uid",
            claims.service_account_uid,
        ),
        ("sub", subject.as_str()),
    ]);
    go_json_escape(&serde_json::to_string(&map).unwrap_or_default())
}

/// The protected header's JSON (go-jose's sorted header map).
pub(crate) fn header_json(signer: &Signer) -> String {
    let map = BTreeMap::from([("alg", signer.algorithm()), ("kid", signer.key_id())]);
    go_json_escape(&serde_json::to_string(&map).unwrap_or_default())
}

/// A signed legacy token.
pub(crate) fn legacy_token(
    signer: &Signer,
    claims: &LegacyClaims<'_>,
) -> Result<String, SignError> {
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let signing_input = format!(
        "{}.{}",
        encode(header_json(signer).as_bytes()),
        encode(payload_json(claims).as_bytes())
    );
    let signature = signer.sign(signing_input.as_bytes())?;
    Ok(format!("{signing_input}.{}", encode(&signature)))
}

/// Go's encoding/json escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings, where
/// serde_json writes them as they are (they can only occur inside strings).
fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::signer::test_keys::*;
    use super::*;
    use ring::signature;

    fn claims() -> LegacyClaims<'static> {
        LegacyClaims {
            namespace: "t1",
            service_account_name: "default",
            service_account_uid: "0b7f3c1e-uid",
            secret_name: "tok",
        }
    }

    fn decode(part: &str) -> Vec<u8> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .expect("unpadded base64url")
    }

    #[test]
    fn header_and_payload_are_upstreams_bytes() {
        let signer = Signer::from_pem(TEST_RSA_PKCS1_KEY.as_bytes()).unwrap();
        assert_eq!(
            header_json(&signer),
            format!("{{\"alg\":\"RS256\",\"kid\":\"{TEST_RSA_KID}\"}}")
        );
        assert_eq!(
            payload_json(&claims()),
            "{\"iss\":\"kubernetes/serviceaccount\",\
             \"kubernetes.io/serviceaccount/namespace\":\"t1\",\
             \"kubernetes.io/serviceaccount/secret.name\":\"tok\",\
             \"kubernetes.io/serviceaccount/service-account.name\":\"default\",\
             \"kubernetes.io/serviceaccount/service-account.uid\":\"0b7f3c1e-uid\",\
             \"sub\":\"system:serviceaccount:t1:default\"}"
        );
        assert_eq!(go_json_escape("\"a<b>&c\""), "\"a\\u003cb\\u003e\\u0026c\"");
    }

    /// Checks a token as a relying party would, with nothing but the public key.
    fn verify(token: &str, spki: &[u8], algorithm: &'static dyn signature::VerificationAlgorithm) {
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "compact JWS");
        let header: serde_json::Value = serde_json::from_slice(&decode(parts[0])).unwrap();
        let payload: serde_json::Value = serde_json::from_slice(&decode(parts[1])).unwrap();
        assert_eq!(
            header.as_object().unwrap().len(),
            2,
            "alg and kid only: {header}"
        );
        assert_eq!(
            header["kid"],
            super::super::signer::key_id(spki),
            "kid is the SHA-256 of the SubjectPublicKeyInfo"
        );
        let keys: Vec<&String> = payload.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "iss",
                "kubernetes.io/serviceaccount/namespace",
                "kubernetes.io/serviceaccount/secret.name",
                "kubernetes.io/serviceaccount/service-account.name",
                "kubernetes.io/serviceaccount/service-account.uid",
                "sub"
            ]
        );
        // The public key is the SubjectPublicKeyInfo's BIT STRING (after its unused-bits
        // byte), read here without the signer's own parser: the last element.
        let public = public_key_from_spki(spki);
        let signed = format!("{}.{}", parts[0], parts[1]);
        signature::UnparsedPublicKey::new(algorithm, public)
            .verify(signed.as_bytes(), &decode(parts[2]))
            .expect("the signature verifies with the public key");
        let tampered = format!("{}.{}x", parts[0], parts[1]);
        assert!(signature::UnparsedPublicKey::new(algorithm, public)
            .verify(tampered.as_bytes(), &decode(parts[2]))
            .is_err());
    }

    fn public_key_from_spki(spki: &[u8]) -> &[u8] {
        // SEQUENCE { SEQUENCE {..}, BIT STRING } with long-form lengths at most 2 bytes.
        let skip_header = |der: &[u8]| -> (usize, usize) {
            let first = der[1];
            if first < 0x80 {
                (2, usize::from(first))
            } else {
                let n = usize::from(first & 0x7f);
                let len = der[2..2 + n]
                    .iter()
                    .fold(0usize, |l, b| (l << 8) | usize::from(*b));
                (2 + n, len)
            }
        };
        let (outer, _) = skip_header(spki);
        let inner = &spki[outer..];
        let (h, len) = skip_header(inner);
        let bit_string = &inner[h + len..];
        let (h, _) = skip_header(bit_string);
        &bit_string[h + 1..]
    }

    #[test]
    fn rs256_tokens_verify_with_the_public_key() {
        let signer = Signer::from_pem(TEST_RSA_PKCS8_KEY.as_bytes()).unwrap();
        let token = legacy_token(&signer, &claims()).unwrap();
        verify(
            &token,
            &signer.public_key_der(),
            &signature::RSA_PKCS1_2048_8192_SHA256,
        );
        let header: serde_json::Value =
            serde_json::from_slice(&decode(token.split('.').next().unwrap())).unwrap();
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], TEST_RSA_KID);
    }

    #[test]
    fn es256_and_es384_tokens_verify_with_the_public_key() {
        let p256 = Signer::from_pem(TEST_EC_P256_SEC1_KEY.as_bytes()).unwrap();
        let token = legacy_token(&p256, &claims()).unwrap();
        verify(
            &token,
            &p256.public_key_der(),
            &signature::ECDSA_P256_SHA256_FIXED,
        );
        let p384 = Signer::from_pem(TEST_EC_P384_PKCS8_KEY.as_bytes()).unwrap();
        let token = legacy_token(&p384, &claims()).unwrap();
        verify(
            &token,
            &p384.public_key_der(),
            &signature::ECDSA_P384_SHA384_FIXED,
        );
    }
}
