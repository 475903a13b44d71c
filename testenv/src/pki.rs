//! A throw-away certificate authority for one control plane. Keys live only in the control plane's
//! directory; nothing is ever committed.
//!
//! [`Pki::generate`] writes what testenv's control plane uses. `cargo xtask cluster` also needs the
//! identities of a real node's components (kubelet, kube-proxy, the scheduler, the
//! controller-manager, the apiserver's client to the kubelets): [`Pki::generate_with`] returns the
//! [`Authority`] as well, which signs more certificates from the same CA.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// Paths of the PEM files a control plane needs.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// Client certificate in `system:masters`: the admin identity tests impersonate from.
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
}

impl Pki {
    /// Generates a CA, a serving certificate for 127.0.0.1/localhost, an admin client certificate and
    /// a service-account signing key pair, written as PEM files into `dir`.
    pub fn generate(dir: &Path) -> Result<Pki> {
        Ok(Self::generate_with(dir, &[])?.0)
    }

    /// [`Pki::generate`] with more names (DNS names or IP addresses) in the serving certificate,
    /// and the CA kept, to sign further certificates.
    pub fn generate_with(dir: &Path, extra_sans: &[String]) -> Result<(Pki, Authority)> {
        let pki = Pki {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
        };

        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "testenv-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        write(&pki.ca_cert, &ca.pem())?;

        let mut sans = [
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ]
        .map(String::from)
        .to_vec();
        sans.extend(extra_sans.iter().cloned());
        let mut serving = CertificateParams::new(sans)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = KeyPair::generate()?;
        write(
            &pki.serving_cert,
            &serving.signed_by(&serving_key, &ca)?.pem(),
        )?;
        write(&pki.serving_key, &serving_key.serialize_pem())?;

        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        admin
            .distinguished_name
            .push(DnType::CommonName, "testenv-admin");
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_key = KeyPair::generate()?;
        write(&pki.admin_cert, &admin.signed_by(&admin_key, &ca)?.pem())?;
        write(&pki.admin_key, &admin_key.serialize_pem())?;

        let sa = KeyPair::generate()?;
        write(&pki.service_account_key, &sa.serialize_pem())?;
        write(&pki.service_account_pub, &sa.public_key_pem())?;
        let authority = Authority {
            issuer: ca,
            dir: dir.to_path_buf(),
        };
        Ok((pki, authority))
    }
}

/// The CA of a [`Pki`], kept in memory to sign more certificates into the same directory.
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// A client certificate `CN=cn, O=orgs…` as `<stem>.crt` and `<stem>.key`; returns both paths.
    pub fn client(&self, stem: &str, cn: &str, orgs: &[&str]) -> Result<(PathBuf, PathBuf)> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let (cert, key) = (
            self.dir.join(format!("{stem}.crt")),
            self.dir.join(format!("{stem}.key")),
        );
        let key_pair = KeyPair::generate()?;
        write(&cert, &params.signed_by(&key_pair, &self.issuer)?.pem())?;
        write(&key, &key_pair.serialize_pem())?;
        Ok((cert, key))
    }
}

fn write(path: &Path, pem: &str) -> Result<()> {
    fs::write(path, pem).map_err(Error::io(format!("writing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_as_pem() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate(dir.path()).unwrap();
        for (path, kind) in [
            (&pki.ca_cert, "CERTIFICATE"),
            (&pki.serving_cert, "CERTIFICATE"),
            (&pki.admin_cert, "CERTIFICATE"),
            (&pki.serving_key, "PRIVATE KEY"),
            (&pki.admin_key, "PRIVATE KEY"),
            (&pki.service_account_key, "PRIVATE KEY"),
            (&pki.service_account_pub, "PUBLIC KEY"),
        ] {
            let text = fs::read_to_string(path).unwrap();
            assert!(
                text.starts_with(&format!("-----BEGIN {kind}-----")),
                "{path:?}: {text}"
            );
        }
    }

    #[test]
    fn the_authority_signs_client_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let (pki, ca) = Pki::generate_with(dir.path(), &["192.0.2.2".into()]).unwrap();
        let (cert, key) = ca
            .client("node", "system:node:vm", &["system:nodes"])
            .unwrap();
        let cert = fs::read_to_string(cert).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        let key = fs::read_to_string(key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(pki.serving_cert.exists());
    }
}
