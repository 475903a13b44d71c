//! A throw-away certificate authority for one control plane. Keys live only in the control plane's
//! temporary directory; nothing is ever committed.

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

        let mut serving = CertificateParams::new(
            [
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ]
            .map(String::from)
            .to_vec(),
        )?;
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
        Ok(pki)
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
}
