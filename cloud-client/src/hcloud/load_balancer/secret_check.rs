//! A TLS Secret's certificate and key, checked before anything is uploaded: what Hetzner would
//! refuse (and what it would take but serve wrongly) is found here, with a message that names
//! the Secret and never quotes the key.
//!
//! - the chain: PEM `CERTIFICATE` blocks, the leaf first, each a valid X.509 certificate, at
//!   most [`MAX_CHAIN`] of them and [`MAX_PEM_BYTES`] in all;
//! - the key: one PEM private key (PKCS#8, PKCS#1 or SEC1) of at most [`MAX_KEY_BYTES`], whose
//!   public key is the leaf's;
//! - the leaf is valid now (neither expired nor not yet valid): Hetzner takes either, and a load
//!   balancer would then serve a certificate every client refuses.
//!
//! The content hash (SHA-256 over the chain's DER, never the key) names an upload.

use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::capabilities::TlsSecret;
use crate::secret::Secret;

/// Certificates in a chain, the leaf included: Hetzner's limit for an uploaded certificate since
/// 2026-02-11 (its API changelog), as are the two sizes below.
pub const MAX_CHAIN: usize = 5;
/// Bytes of the chain's PEM.
pub const MAX_PEM_BYTES: usize = 30_000;
/// Bytes of the private key's PEM.
pub const MAX_KEY_BYTES: usize = 5_000;

/// A Secret's certificate, ready to upload.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The chain as PEM, as the Secret has it (what is uploaded).
    pub chain_pem: String,
    pub key_pem: Secret,
    /// Hex SHA-256 over the chain's DER, first 32 digits (a label value).
    pub hash: String,
    /// The leaf's serial, hex (for logs and Events: public).
    pub serial: String,
}

/// Checks `s` as of `now`; `Err(what is wrong)`, in words that quote nothing of the key.
pub fn check(s: &TlsSecret, now: SystemTime) -> Result<Checked, String> {
    if s.certificate_pem.len() > MAX_PEM_BYTES {
        return Err(format!(
            "tls.crt is {} bytes; Hetzner takes at most {MAX_PEM_BYTES}",
            s.certificate_pem.len()
        ));
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(s.certificate_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("tls.crt is not valid PEM ({e})"))?;
    if chain.is_empty() {
        return Err("tls.crt holds no PEM CERTIFICATE block".into());
    }
    if chain.len() > MAX_CHAIN {
        return Err(format!(
            "tls.crt holds a chain of {} certificates; Hetzner takes at most {MAX_CHAIN}",
            chain.len()
        ));
    }
    let mut parsed = Vec::new();
    for (i, der) in chain.iter().enumerate() {
        let (_, c) = X509Certificate::from_der(der.as_ref())
            .map_err(|_| format!("certificate {} of tls.crt is not valid X.509", i + 1))?;
        parsed.push(c);
    }
    let leaf = &parsed[0];
    let now_s = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let (from, until) = (
        leaf.validity().not_before.timestamp(),
        leaf.validity().not_after.timestamp(),
    );
    if now_s < from {
        return Err(format!(
            "the certificate is not valid yet (from {})",
            leaf.validity().not_before
        ));
    }
    if now_s > until {
        return Err(format!(
            "the certificate expired ({})",
            leaf.validity().not_after
        ));
    }
    if s.key_pem.expose().len() > MAX_KEY_BYTES {
        return Err(format!(
            "tls.key is {} bytes; Hetzner takes at most {MAX_KEY_BYTES}",
            s.key_pem.expose().len()
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(s.key_pem.expose().as_bytes())
        .map_err(|_| "tls.key is not a PEM private key (PKCS#8, PKCS#1 or SEC1)".to_owned())?;
    let signer = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key)
        .map_err(|_| "tls.key is not an RSA, ECDSA or Ed25519 key".to_owned())?;
    let matches = signer
        .public_key()
        .is_some_and(|spki| spki.as_ref() == leaf.public_key().raw);
    if !matches {
        return Err("tls.key is not the key of the certificate in tls.crt".into());
    }
    let mut all = Vec::new();
    for der in &chain {
        all.extend_from_slice(der.as_ref());
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &all);
    let hash: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Checked {
        chain_pem: s.certificate_pem.trim().to_owned(),
        key_pem: s.key_pem.clone(),
        hash,
        serial: leaf.raw_serial_as_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_sim::test_certs;
    use std::time::Duration;

    fn secret(cert: &str, key: &str) -> TlsSecret {
        TlsSecret {
            uid: "uid".into(),
            namespace: "shop".into(),
            name: "web-tls".into(),
            certificate_pem: cert.into(),
            key_pem: Secret::new(key),
        }
    }

    fn refused(cert: &str, key: &str) -> String {
        check(&secret(cert, key), SystemTime::now()).expect_err("refused")
    }

    #[test]
    fn a_valid_pair_is_taken_with_a_hash_of_the_chain_only() {
        let (cert, key) = test_certs::self_signed(&["shop.example.com"]);
        let c = check(&secret(&cert, &key), SystemTime::now()).expect("valid");
        assert_eq!(c.hash.len(), 32);
        assert_eq!(Some(c.serial.clone()), test_certs::serial(&cert));
        // The same chain spaced otherwise: the same hash (of the DER, never of the key).
        let again = check(&secret(&format!("\n{cert}\n"), &key), SystemTime::now()).unwrap();
        assert_eq!(again.hash, c.hash);
    }

    #[test]
    fn what_hetzner_or_a_client_would_refuse_is_refused_without_quoting_the_key() {
        let (cert, key) = test_certs::self_signed(&["shop.example.com"]);
        let (other_cert, _) = test_certs::self_signed(&["shop.example.com"]);
        let e = refused(&other_cert, &key);
        assert!(e.contains("not the key of the certificate"), "{e}");
        assert!(refused("not a certificate", &key).contains("no PEM CERTIFICATE"));
        let broken = cert.replace("MI", "!!");
        assert!(
            refused(&broken, &key).contains("tls.crt"),
            "{}",
            refused(&broken, &key)
        );
        let e = refused(
            &cert,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        assert!(e.contains("tls.key") && !e.contains("AAAA"), "{e}");
        let day = Duration::from_secs(86_400).as_millis() as u64;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let (old, old_key) =
            test_certs::self_signed_between(&["a.example"], now - 90 * day, now - day);
        assert!(refused(&old, &old_key).contains("expired"));
        let (early, early_key) =
            test_certs::self_signed_between(&["a.example"], now + day, now + 90 * day);
        assert!(refused(&early, &early_key).contains("not valid yet"));
        let long: String = std::iter::repeat_n(cert.as_str(), MAX_CHAIN + 1).collect();
        assert!(refused(&long, &key).contains("chain of 6"));
        let huge = format!("{cert}{}", " ".repeat(MAX_PEM_BYTES));
        assert!(refused(&huge, &key).contains("bytes"));
        let big_key = key.replace(
            "-----END",
            &format!("{}-----END", "A".repeat(MAX_KEY_BYTES)),
        );
        let e = refused(&cert, &big_key);
        assert!(e.contains("tls.key is") && e.contains("bytes"), "{e}");
    }
}
