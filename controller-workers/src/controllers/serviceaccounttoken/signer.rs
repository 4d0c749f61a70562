//! The token signer: `--service-account-private-key-file` read as client-go's
//! `keyutil.PrivateKeyFromFile` reads it, and JWS signatures made as go-jose makes them
//! for KCM (pkg/serviceaccount/jwt.go's `JWTTokenGenerator`).
//!
//! The file's PEM blocks are read in order and the first private key block that parses is
//! the key: `RSA PRIVATE KEY` (PKCS#1), `EC PRIVATE KEY` (SEC1) or `PRIVATE KEY` (PKCS#8,
//! RSA or EC); other blocks (certificates, `EC PARAMETERS`) are skipped. RSA keys sign
//! RS256, EC keys ES256 (P-256) or ES384 (P-384). The key ID (`kid`) is the unpadded
//! base64url SHA-256 of the public key's DER SubjectPublicKeyInfo, as upstream derives it.
//!
//! Differences from upstream, from the crypto library (ring): P-521 keys (ES512) are refused
//! with an error that says so; RSA keys below 2048 bits are refused; an SEC1 EC key must
//! carry its public key (openssl's always do).
//!
//! Nothing here logs or prints key material: errors name the file and what is wrong only.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair};

const TAG_INTEGER: u8 = 0x02;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_NULL: u8 = 0x05;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_CONTEXT_0: u8 = 0xa0;

/// 1.2.840.113549.1.1.1
const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// 1.2.840.10045.3.1.7 (prime256v1)
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// 1.3.132.0.34 (secp384r1)
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
/// 1.3.132.0.35 (secp521r1)
const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum KeyError {
    /// Upstream's words for a file with no usable key.
    #[error("data does not contain a valid RSA or ECDSA private key{0}")]
    NoKey(String),
    #[error("ECDSA P-521 keys (ES512) are not supported by rkcm: its crypto library (ring) has no P-521 signing; use an RSA, P-256 or P-384 key")]
    P521,
    #[error("unknown private key type in the PKCS#8 block, must be RSA or ECDSA")]
    UnknownType,
    #[error("unknown private key curve, must be 256, 384, or 521")]
    UnknownCurve,
}

#[derive(Debug, thiserror::Error)]
#[error("signing the token failed")]
pub(crate) struct SignError;

enum Key {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
}

/// A private key that signs tokens, with its JWS algorithm and key ID.
pub(crate) struct Signer {
    algorithm: &'static str,
    key_id: String,
    key: Key,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.debug_struct("Signer")
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// The first private key of a PEM file (see the module documentation).
    pub(crate) fn from_pem(pem: &[u8]) -> Result<Signer, KeyError> {
        let mut reader = pem;
        let mut refusals = Vec::new();
        loop {
            let item = match rustls_pemfile::read_one(&mut reader) {
                Ok(Some(item)) => item,
                Ok(None) => break,
                // A malformed block ends the reading, as Go's pem.Decode stops there.
                Err(_) => break,
            };
            let parsed = match item {
                rustls_pemfile::Item::Pkcs1Key(key) => Self::rsa_pkcs1(key.secret_pkcs1_der()),
                rustls_pemfile::Item::Sec1Key(key) => Self::sec1(key.secret_sec1_der()),
                rustls_pemfile::Item::Pkcs8Key(key) => Self::pkcs8(key.secret_pkcs8_der()),
                _ => continue,
            };
            match parsed {
                Ok(signer) => return Ok(signer),
                // A key that parses but cannot sign ends the search, as upstream's token
                // generator refuses it.
                Err(Refusal::Unusable(error)) => return Err(error),
                Err(Refusal::Unparsable(why)) => refusals.push(why),
            }
        }
        let detail = if refusals.is_empty() {
            String::new()
        } else {
            format!(" ({})", refusals.join("; "))
        };
        Err(KeyError::NoKey(detail))
    }

    pub(crate) fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    pub(crate) fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The key's public half, DER SubjectPublicKeyInfo (Go's `MarshalPKIXPublicKey`).
    pub(crate) fn public_key_der(&self) -> Vec<u8> {
        match &self.key {
            Key::Rsa(pair) => rsa_spki(pair.public_key().as_ref()),
            Key::Ecdsa(pair) => {
                let curve = if self.algorithm == "ES384" {
                    OID_P384
                } else {
                    OID_P256
                };
                ec_spki(curve, pair.public_key().as_ref())
            }
        }
    }

    /// The JWS signature of `message` (PKCS#1 v1.5 SHA-256 for RSA; `r || s` for ECDSA).
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        match &self.key {
            Key::Rsa(pair) => {
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    message,
                    &mut signature,
                )
                .map_err(|_| SignError)?;
                Ok(signature)
            }
            Key::Ecdsa(pair) => pair
                .sign(&self.rng, message)
                .map(|signature| signature.as_ref().to_vec())
                .map_err(|_| SignError),
        }
    }

    fn new(algorithm: &'static str, key: Key) -> Signer {
        let mut signer = Signer {
            algorithm,
            key_id: String::new(),
            key,
            rng: SystemRandom::new(),
        };
        signer.key_id = key_id(&signer.public_key_der());
        signer
    }

    fn rsa_pkcs1(der: &[u8]) -> Result<Signer, Refusal> {
        RsaKeyPair::from_der(der)
            .map(|pair| Signer::new("RS256", Key::Rsa(pair)))
            .map_err(|e| Refusal::Unparsable(format!("RSA key refused: {e}")))
    }

    fn pkcs8(der: &[u8]) -> Result<Signer, Refusal> {
        let unparsable = || Refusal::Unparsable("PKCS#8 block does not parse".into());
        let (algorithm, parameters) = pkcs8_algorithm(der).ok_or_else(unparsable)?;
        if algorithm == OID_RSA_ENCRYPTION {
            return RsaKeyPair::from_pkcs8(der)
                .map(|pair| Signer::new("RS256", Key::Rsa(pair)))
                .map_err(|e| Refusal::Unparsable(format!("RSA key refused: {e}")));
        }
        if algorithm != OID_EC_PUBLIC_KEY {
            return Err(Refusal::Unusable(KeyError::UnknownType));
        }
        Self::ecdsa(parameters.ok_or_else(unparsable)?, der)
    }

    fn sec1(der: &[u8]) -> Result<Signer, Refusal> {
        let curve = sec1_curve(der).ok_or_else(|| {
            Refusal::Unparsable("EC block does not parse or names no curve".into())
        })?;
        // ring reads EC keys from PKCS#8 only: wrap the SEC1 structure in one.
        let algorithm = [tlv(TAG_OID, OID_EC_PUBLIC_KEY), tlv(TAG_OID, curve)].concat();
        let pkcs8 = tlv(
            TAG_SEQUENCE,
            &[
                tlv(TAG_INTEGER, &[0]),
                tlv(TAG_SEQUENCE, &algorithm),
                tlv(TAG_OCTET_STRING, der),
            ]
            .concat(),
        );
        Self::ecdsa(curve, &pkcs8)
    }

    fn ecdsa(curve: &[u8], pkcs8: &[u8]) -> Result<Signer, Refusal> {
        let (algorithm, ring_algorithm) = match curve {
            OID_P256 => ("ES256", &signature::ECDSA_P256_SHA256_FIXED_SIGNING),
            OID_P384 => ("ES384", &signature::ECDSA_P384_SHA384_FIXED_SIGNING),
            OID_P521 => return Err(Refusal::Unusable(KeyError::P521)),
            _ => return Err(Refusal::Unusable(KeyError::UnknownCurve)),
        };
        EcdsaKeyPair::from_pkcs8(ring_algorithm, pkcs8, &SystemRandom::new())
            .map(|pair| Signer::new(algorithm, Key::Ecdsa(pair)))
            .map_err(|e| Refusal::Unparsable(format!("EC key refused: {e}")))
    }
}

/// Why a key block gave no signer.
enum Refusal {
    /// It does not parse: the next block is tried.
    Unparsable(String),
    /// It parses but cannot sign tokens.
    Unusable(KeyError),
}

/// `base64url(SHA-256(SubjectPublicKeyInfo))`, unpadded.
pub(crate) fn key_id(spki_der: &[u8]) -> String {
    use base64::Engine as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki_der);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

fn rsa_spki(rsa_public_key: &[u8]) -> Vec<u8> {
    let algorithm = [tlv(TAG_OID, OID_RSA_ENCRYPTION), tlv(TAG_NULL, &[])].concat();
    spki(&algorithm, rsa_public_key)
}

fn ec_spki(curve: &[u8], point: &[u8]) -> Vec<u8> {
    let algorithm = [tlv(TAG_OID, OID_EC_PUBLIC_KEY), tlv(TAG_OID, curve)].concat();
    spki(&algorithm, point)
}

fn spki(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
    let bits = [&[0u8][..], key].concat();
    tlv(
        TAG_SEQUENCE,
        &[tlv(TAG_SEQUENCE, algorithm), tlv(TAG_BIT_STRING, &bits)].concat(),
    )
}

/// One DER element (definite length).
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

/// Reads one DER element: (tag, content, rest).
fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, tail) = rest.split_at(count);
        rest = tail;
        bytes
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b))
    };
    if rest.len() < len {
        return None;
    }
    let (content, rest) = rest.split_at(len);
    Some((tag, content, rest))
}

fn expect(tag: u8, input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (found, content, rest) = read_tlv(input)?;
    (found == tag).then_some((content, rest))
}

/// A PKCS#8 PrivateKeyInfo's algorithm OID and, when it is one, its parameter OID.
fn pkcs8_algorithm(der: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (info, _) = expect(TAG_SEQUENCE, der)?;
    let (_version, rest) = expect(TAG_INTEGER, info)?;
    let (algorithm, _) = expect(TAG_SEQUENCE, rest)?;
    let (oid, parameters) = expect(TAG_OID, algorithm)?;
    let parameter = expect(TAG_OID, parameters).map(|(oid, _)| oid);
    Some((oid, parameter))
}

/// The named curve of an SEC1 ECPrivateKey (its `[0]` parameters).
fn sec1_curve(der: &[u8]) -> Option<&[u8]> {
    let (key, _) = expect(TAG_SEQUENCE, der)?;
    let (_version, rest) = expect(TAG_INTEGER, key)?;
    let (_private, rest) = expect(TAG_OCTET_STRING, rest)?;
    let (parameters, _) = expect(TAG_CONTEXT_0, rest)?;
    expect(TAG_OID, parameters).map(|(oid, _)| oid)
}

#[cfg(test)]
pub(crate) mod test_keys {
    //! Keys made once with openssl when these tests were written, for tests only: they
    //! sign nothing anywhere else. The expected key IDs were computed with
    //! `openssl pkey -in KEY -pubout -outform DER | openssl dgst -sha256 -binary |
    //! basenc --base64url | tr -d =`.

    pub(crate) const TEST_RSA_PKCS1_KEY: &str = include_str!("testdata/test-rsa-pkcs1.pem");
    pub(crate) const TEST_RSA_PKCS8_KEY: &str = include_str!("testdata/test-rsa-pkcs8.pem");
    pub(crate) const TEST_RSA_KID: &str = "svGz8PlD5yAnugO6VYJYTC6zyPSov1np13lR1EV5T44";
    pub(crate) const TEST_EC_P256_SEC1_KEY: &str = include_str!("testdata/test-ec-p256-sec1.pem");
    pub(crate) const TEST_EC_P256_KID: &str = "4DELxsqy2zPqOealTPxlHSUCIVmQ8NahSES5YCEOmX4";
    pub(crate) const TEST_EC_P384_SEC1_KEY: &str = include_str!("testdata/test-ec-p384-sec1.pem");
    pub(crate) const TEST_EC_P384_PKCS8_KEY: &str = include_str!("testdata/test-ec-p384-pkcs8.pem");
    pub(crate) const TEST_EC_P384_KID: &str = "8n-CUOVmgc1dIFvVGBm_GUtb4y6M2UwCP4oTTNK7JnE";
    pub(crate) const TEST_EC_P521_SEC1_KEY: &str = include_str!("testdata/test-ec-p521-sec1.pem");
}

#[cfg(test)]
mod tests {
    use super::test_keys::*;
    use super::*;

    fn verify(signer: &Signer, message: &[u8], signature: &[u8]) -> bool {
        let spki = signer.public_key_der();
        // The key inside the SubjectPublicKeyInfo's BIT STRING.
        let (outer, _) = expect(TAG_SEQUENCE, &spki).unwrap();
        let (_, rest) = expect(TAG_SEQUENCE, outer).unwrap();
        let (bits, _) = expect(TAG_BIT_STRING, rest).unwrap();
        let public = &bits[1..];
        let algorithm: &dyn signature::VerificationAlgorithm = match signer.algorithm() {
            "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
            "ES256" => &signature::ECDSA_P256_SHA256_FIXED,
            "ES384" => &signature::ECDSA_P384_SHA384_FIXED,
            other => panic!("unexpected algorithm {other}"),
        };
        signature::UnparsedPublicKey::new(algorithm, public)
            .verify(message, signature)
            .is_ok()
    }

    #[test]
    fn rsa_keys_sign_rs256_with_upstreams_key_id() {
        for pem in [TEST_RSA_PKCS1_KEY, TEST_RSA_PKCS8_KEY] {
            let signer = Signer::from_pem(pem.as_bytes()).expect("an RSA key");
            assert_eq!(signer.algorithm(), "RS256");
            assert_eq!(signer.key_id(), TEST_RSA_KID);
            let signature = signer.sign(b"header.payload").unwrap();
            assert_eq!(signature.len(), 256);
            assert!(verify(&signer, b"header.payload", &signature));
            assert!(!verify(&signer, b"header.payload2", &signature));
        }
    }

    #[test]
    fn ec_keys_sign_es256_and_es384_with_upstreams_key_id() {
        let p256 = Signer::from_pem(TEST_EC_P256_SEC1_KEY.as_bytes()).expect("a P-256 key");
        assert_eq!(
            (p256.algorithm(), p256.key_id()),
            ("ES256", TEST_EC_P256_KID)
        );
        let signature = p256.sign(b"m").unwrap();
        assert_eq!(signature.len(), 64, "r || s, as JWS wants it");
        assert!(verify(&p256, b"m", &signature));
        for pem in [TEST_EC_P384_SEC1_KEY, TEST_EC_P384_PKCS8_KEY] {
            let p384 = Signer::from_pem(pem.as_bytes()).expect("a P-384 key");
            assert_eq!(
                (p384.algorithm(), p384.key_id()),
                ("ES384", TEST_EC_P384_KID)
            );
            let signature = p384.sign(b"m").unwrap();
            assert_eq!(signature.len(), 96);
            assert!(verify(&p384, b"m", &signature));
        }
    }

    #[test]
    fn unusable_files_say_why_without_key_material() {
        assert_eq!(
            Signer::from_pem(TEST_EC_P521_SEC1_KEY.as_bytes()).unwrap_err(),
            KeyError::P521
        );
        let certificate_only =
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ2yLG4Lr\n-----END CERTIFICATE-----\n";
        assert_eq!(
            Signer::from_pem(certificate_only.as_bytes()).unwrap_err(),
            KeyError::NoKey(String::new())
        );
        assert_eq!(
            Signer::from_pem(b"not a pem file").unwrap_err().to_string(),
            "data does not contain a valid RSA or ECDSA private key"
        );
        let broken =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----\n";
        let error = Signer::from_pem(broken.as_bytes()).unwrap_err().to_string();
        assert!(
            error.starts_with("data does not contain a valid RSA or ECDSA private key ("),
            "{error}"
        );
        // Leading non-key blocks are skipped; the key after them is used.
        let with_parameters = format!(
            "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{TEST_EC_P256_SEC1_KEY}"
        );
        let signer = Signer::from_pem(with_parameters.as_bytes()).unwrap();
        assert_eq!(signer.key_id(), TEST_EC_P256_KID);
        assert!(!format!("{signer:?}").contains("PRIVATE"));
    }

    #[test]
    fn der_lengths_round_trip() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; len];
            let encoded = tlv(TAG_OCTET_STRING, &content);
            let (tag, read, rest) = read_tlv(&encoded).unwrap();
            assert_eq!((tag, read.len(), rest.len()), (TAG_OCTET_STRING, len, 0));
        }
        assert!(read_tlv(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none());
        assert!(read_tlv(&[0x30, 0x05, 1]).is_none());
    }
}
