//! The development cluster's PKI and kubeconfig: a self-signed cluster CA (made by rcgen),
//! the API server's serving certificate, and an admin client certificate in group
//! `system:masters`, written into a kubeconfig that kubectl and kube-rs accept.

use std::net::{IpAddr, SocketAddr};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

pub struct ClusterPki {
    pub ca_pem: String,
    ca_key_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
}

impl ClusterPki {
    pub fn generate(addr: SocketAddr) -> Result<Self, rcgen::Error> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name = dn("kubernetes", None);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, &ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ])?;
        let mut ips: Vec<IpAddr> = vec![
            "127.0.0.1".parse().unwrap_or(addr.ip()),
            "::1".parse().unwrap_or(addr.ip()),
        ];
        if !addr.ip().is_unspecified() && !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
        serving
            .subject_alt_names
            .extend(ips.into_iter().map(SanType::IpAddress));
        serving.distinguished_name = dn("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &issuer)?;

        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        admin.distinguished_name = dn("kubernetes-admin", Some("system:masters"));
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &issuer)?;

        Ok(ClusterPki {
            ca_pem: ca_cert.pem(),
            ca_key_pem: ca_key.serialize_pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            admin_cert_pem: admin_cert.pem(),
            admin_key_pem: admin_key.serialize_pem(),
        })
    }

    /// The CA's certificate and key in PEM, for components that sign with the cluster CA
    /// (kube-controller-manager's `--cluster-signing-cert-file` in a kubeadm cluster).
    pub fn ca_key_pem(&self) -> &str {
        &self.ca_key_pem
    }

    /// Issue a client certificate for `user` in `groups`, signed by the cluster CA.
    pub fn client_cert(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), rcgen::Error> {
        let ca_key = KeyPair::from_pem(&self.ca_key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca_pem, ca_key)?;
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(Vec::<String>::new())?;
        let mut d = DistinguishedName::new();
        d.push(DnType::CommonName, user);
        for g in groups {
            d.push(DnType::OrganizationName, *g);
        }
        p.distinguished_name = d;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

fn dn(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::CommonName, cn);
    if let Some(o) = org {
        d.push(DnType::OrganizationName, o);
    }
    d
}

/// A kubeconfig (YAML) for `server`, with the CA and either a client certificate or a token.
pub fn kubeconfig(
    server: &str,
    ca_pem: Option<&str>,
    cert: Option<(&str, &str)>,
    token: Option<&str>,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let mut cluster = format!("    server: {server}\n");
    if let Some(ca) = ca_pem {
        cluster.push_str(&format!("    certificate-authority-data: {}\n", b64(ca)));
    }
    let mut user = String::new();
    if let Some((c, k)) = cert {
        user.push_str(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(c),
            b64(k)
        ));
    }
    if let Some(t) = token {
        user.push_str(&format!("    token: {t}\n"));
    }
    if user.is_empty() {
        user.push_str("    {}\n");
    }
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n{cluster}contexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n    user: kube-sim-admin\ncurrent-context: kube-sim\nusers:\n- name: kube-sim-admin\n  user:\n{user}preferences: {{}}\n"
    )
}
