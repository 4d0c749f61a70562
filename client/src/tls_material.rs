//! Checks a kubeconfig's client certificate before rkcm's TLS stack (rustls) meets it, so
//! a certificate rustls cannot use stops the process with one line naming the file, the
//! reason and the remedy instead of an opaque handshake error.
//!
//! rustls, through webpki, takes only X.509 v3 certificates; Go's TLS stack (kubectl, KCM)
//! also takes v1 ones, which a plain `openssl x509 -req` without extensions makes.

use base64::Engine as _;
use x509_parser::prelude::{FromDer, X509Certificate, X509Version};

/// Why the client certificate of `config` cannot be used, with the remedy; `None` when it
/// can (or there is none).
pub(crate) fn client_certificate_problem(auth: &kube::config::AuthInfo) -> Option<String> {
    let pem = match (&auth.client_certificate_data, &auth.client_certificate) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?,
        (None, Some(path)) => std::fs::read(path).ok()?,
        (None, None) => return None,
    };
    let der = x509_parser::pem::Pem::iter_from_buffer(&pem)
        .filter_map(Result::ok)
        .find(|block| block.label == "CERTIFICATE")?
        .contents;
    let (_, certificate) = X509Certificate::from_der(&der).ok()?;
    let version = certificate.version();
    if version == X509Version::V3 {
        return None;
    }
    Some(format!(
        "its client certificate ({}) is X.509 v{}, and rkcm's TLS stack (rustls) accepts only \
         v3 certificates; reissue it as v3 with the same subject, e.g. \
         `openssl x509 -req ... -extfile <(printf 'keyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=clientAuth')` \
         or `kubeadm kubeconfig user --client-name=NAME`",
        certificate.subject(),
        version.0 + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_with(pem: &str) -> kube::config::AuthInfo {
        kube::config::AuthInfo {
            client_certificate_data: Some(base64::engine::general_purpose::STANDARD.encode(pem)),
            ..Default::default()
        }
    }

    #[test]
    fn a_v3_certificate_passes_and_none_is_fine() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(client_certificate_problem(&auth_with(&cert.pem())), None);
        assert_eq!(
            client_certificate_problem(&kube::config::AuthInfo::default()),
            None
        );
    }

    #[test]
    fn a_v1_certificate_is_named_with_the_remedy() {
        // A v1 certificate as `openssl req -x509 ... ; openssl x509 -req` without
        // extensions makes it (CN=v1-user), generated once with openssl 3.
        let problem = client_certificate_problem(&auth_with(V1_CERT)).expect("v1 is refused");
        assert!(problem.contains("X.509 v1"), "{problem}");
        assert!(problem.contains("CN=v1-user"), "{problem}");
        assert!(problem.contains("reissue it as v3"), "{problem}");
    }

    const V1_CERT: &str = include_str!("testdata/v1-client.crt");
}
