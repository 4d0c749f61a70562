//! Detached JWS signatures (RFC 7515, appendix F) with HS256, as cluster-bootstrap's
//! `token/jws` makes them for the `jws-kubeconfig-<id>` keys of `kube-public/cluster-info`:
//! a compact JWS whose payload part is left out, so `kubeadm join` can check the kubeconfig
//! it downloaded against a token it already knows.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;

/// `B64U(header) + ".." + B64U(HMAC-SHA256(secret, B64U(header) + "." + B64U(content)))`,
/// the header being `{"alg":"HS256","kid":"<token id>"}` (its keys in that order, as the
/// JSON encoder upstream uses writes a map).
///
/// Any secret is a valid HMAC key, the empty one included, so this cannot fail. Token ids
/// that reach it are `[a-z0-9]{6}` (see [`super::secrets`]), which JSON writes as they
/// are.
pub(super) fn compute_detached_signature(content: &str, token_id: &str, secret: &[u8]) -> String {
    let header = serde_json::json!({"alg": "HS256", "kid": token_id}).to_string();
    let protected = URL_SAFE_NO_PAD.encode(header);
    let payload = URL_SAFE_NO_PAD.encode(content);
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let tag = hmac::sign(&key, format!("{protected}.{payload}").as_bytes());
    format!("{protected}..{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cluster-bootstrap's own vectors (token/jws/jws_test.go, bootstrapsigner_test.go).
    #[test]
    fn upstreams_test_vectors() {
        const CONTENT: &str = "Hello from the other side. I must have called a thousand times.";
        const SECRET: &[u8] = b"my voice is my passcode";
        let cases: [(&str, &str, &[u8], &str); 4] = [
            (
                CONTENT,
                "joshua",
                SECRET,
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
            ),
            (
                "",
                "joshua",
                SECRET,
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
            ),
            (
                CONTENT,
                "joshua",
                b"",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8",
            ),
            (
                "payload",
                "abc123",
                b"tokenSecret",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiYzEyMyJ9..QSxpUG7Q542CirTI2ECPSZjvBOJURUW5a7XqFpNI958",
            ),
        ];
        for (content, id, secret, expected) in cases {
            assert_eq!(
                compute_detached_signature(content, id, secret),
                expected,
                "content {content:?}, id {id}"
            );
        }
    }

    #[test]
    fn the_header_names_the_algorithm_then_the_token() {
        let signature = compute_detached_signature("x", "abcdef", b"s");
        let header = signature.split("..").next().unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(header).unwrap(),
            br#"{"alg":"HS256","kid":"abcdef"}"#
        );
    }
}
