//! Certificates as the Hetzner API checks and renders them: an upload is refused for what the
//! real API refuses (docs/hetzner-api.md, "Certificates"), its dates, domain names and
//! fingerprint are read from the X.509 leaf, and a managed certificate's issuance produces a
//! real certificate and key, so an https service serves either kind in the data plane.
//!
//! Hetzner's limits (changelog, 2026-02-11): a private key of at most 5 000 bytes, a chain of
//! at most 5 certificates and 30 000 bytes. Expired or not yet valid certificates are accepted:
//! the API documents no refusal ("you have to monitor its expiration date"), it renders the
//! dates.

use std::sync::Arc;

use rustls::crypto::aws_lc_rs;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{Error as TlsError, InconsistentKeys};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::clock::now_ms;
use crate::error::ApiError;
use crate::state::{ActionFailure, Certificate, NINETY_DAYS_MS, PrivateKeyPem};

/// Hetzner's limits on uploads (changelog, 2026-02-11).
pub const MAX_PRIVATE_KEY_BYTES: usize = 5_000;
pub const MAX_CHAIN_CERTIFICATES: usize = 5;
pub const MAX_CHAIN_BYTES: usize = 30_000;

/// What the API renders of a certificate, read from its leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafFacts {
    pub not_valid_before_ms: u64,
    pub not_valid_after_ms: u64,
    /// The SANs' DNS names; the subject's common name when there are none.
    pub domain_names: Vec<String>,
    /// SHA-256 of the leaf's DER, as colon-separated lower-case hex (the API's shape).
    pub fingerprint: String,
}

/// Checks an upload as Hetzner does and reads what the API renders of it.
pub fn check_upload(cert_pem: &str, key_pem: &str) -> Result<LeafFacts, ApiError> {
    let bad_cert = |m: &str| ApiError::invalid_input("certificate", m);
    let bad_key = |m: &str| ApiError::invalid_input("private_key", m);
    if key_pem.len() > MAX_PRIVATE_KEY_BYTES {
        return Err(bad_key(&format!(
            "private key is larger than {MAX_PRIVATE_KEY_BYTES} bytes"
        )));
    }
    if cert_pem.len() > MAX_CHAIN_BYTES {
        return Err(bad_cert(&format!(
            "certificate chain is larger than {MAX_CHAIN_BYTES} bytes"
        )));
    }
    let chain = parse_chain(cert_pem).map_err(|m| bad_cert(&m))?;
    if chain.len() > MAX_CHAIN_CERTIFICATES {
        return Err(bad_cert(&format!(
            "certificate chain has more than {MAX_CHAIN_CERTIFICATES} certificates"
        )));
    }
    let facts = leaf_facts(&chain[0]).map_err(|m| bad_cert(&m))?;
    match certified_key_from(chain, key_pem) {
        Ok(_) => Ok(facts),
        Err(KeyProblem::Unreadable(m)) => Err(bad_key(&m)),
        Err(KeyProblem::Mismatch) => Err(bad_key(
            "private key does not match the certificate's public key",
        )),
    }
}

/// The certificate and key as rustls serves them; `Err` names what is wrong (for the data
/// plane's log: what is in the state passed `check_upload` or was issued here).
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, String> {
    let chain = parse_chain(cert_pem)?;
    certified_key_from(chain, key_pem)
        .map(Arc::new)
        .map_err(|e| match e {
            KeyProblem::Unreadable(m) => m,
            KeyProblem::Mismatch => "the key does not match the certificate".to_owned(),
        })
}

enum KeyProblem {
    Unreadable(String),
    Mismatch,
}

fn certified_key_from(
    chain: Vec<CertificateDer<'static>>,
    key_pem: &str,
) -> Result<CertifiedKey, KeyProblem> {
    let unreadable = || {
        KeyProblem::Unreadable(
            "private key must be a PEM encoded RSA, EC or Ed25519 private key".to_owned(),
        )
    };
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|_| unreadable())?;
    let signing = aws_lc_rs::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|_| unreadable())?;
    let ck = CertifiedKey::new(chain, signing);
    match ck.keys_match() {
        // `Unknown`: the key type cannot tell its public key; rustls serves it all the same.
        Ok(()) | Err(TlsError::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(ck),
        Err(_) => Err(KeyProblem::Mismatch),
    }
}

/// The `CERTIFICATE` blocks of `pem`, leaf first; at least one, each a parsable X.509
/// certificate.
fn parse_chain(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let invalid = || "certificate must be a PEM encoded X.509 certificate chain".to_owned();
    let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid())?;
    if chain.is_empty() {
        return Err(invalid());
    }
    for der in &chain {
        match X509Certificate::from_der(der) {
            Ok(([], _)) => {}
            _ => return Err(invalid()),
        }
    }
    Ok(chain)
}

fn leaf_facts(der: &[u8]) -> Result<LeafFacts, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| e.to_string())?;
    let ms = |t: x509_parser::time::ASN1Time| u64::try_from(t.timestamp()).unwrap_or(0) * 1000;
    let mut domain_names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some((*d).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if domain_names.is_empty() {
        domain_names = cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
            .collect();
    }
    Ok(LeafFacts {
        not_valid_before_ms: ms(cert.validity().not_before),
        not_valid_after_ms: ms(cert.validity().not_after),
        domain_names,
        fingerprint: fingerprint(der),
    })
}

/// SHA-256 of `der` as colon-separated lower-case hex.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ::aws_lc_rs::digest::digest(&::aws_lc_rs::digest::SHA256, der);
    digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Whether a certificate for `domain_names` serves `sni` (exact, or a `*.` wildcard for one
/// label), as a TLS client would accept it.
pub fn covers(domain_names: &[String], sni: &str) -> bool {
    let sni = sni.to_ascii_lowercase();
    domain_names.iter().any(|d| {
        let d = d.to_ascii_lowercase();
        match d.strip_prefix("*.") {
            Some(parent) => sni
                .split_once('.')
                .is_some_and(|(label, rest)| !label.is_empty() && rest == parent),
            None => d == sni,
        }
    })
}

impl Certificate {
    /// Applied when the issuance action ends: a real certificate for the domain names, valid
    /// from now for 90 days (self-signed: the simulator is no CA).
    pub fn finish_issuance(&mut self, failure: Option<ActionFailure>) {
        match failure {
            None => {
                let now = now_ms();
                let domains: Vec<&str> = self.domain_names.iter().map(String::as_str).collect();
                let (pem, key) =
                    crate::test_certs::self_signed_between(&domains, now, now + NINETY_DAYS_MS);
                let der = CertificateDer::from_pem_slice(pem.as_bytes()).ok();
                self.fingerprint = der.map(|d| fingerprint(&d));
                self.certificate = Some(pem);
                self.private_key = Some(PrivateKeyPem::new(key));
                self.not_valid_before_ms = Some(now);
                self.not_valid_after_ms = Some(now + NINETY_DAYS_MS);
                self.issuance = Some("completed".to_owned());
                self.error = None;
            }
            Some(f) => {
                self.issuance = Some("failed".to_owned());
                self.error = Some((f.code, f.message));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_redacted_in_debug() {
        let k = PrivateKeyPem::new("-----BEGIN PRIVATE KEY-----\nsecret\n");
        assert_eq!(format!("{k:?}"), "PrivateKeyPem(<redacted>)");
    }

    #[test]
    fn wildcards_cover_one_label() {
        let d = vec!["*.example.com".to_owned(), "example.org".to_owned()];
        assert!(covers(&d, "www.example.com"));
        assert!(covers(&d, "EXAMPLE.org"));
        assert!(!covers(&d, "example.com"));
        assert!(!covers(&d, "a.b.example.com"));
    }
}
