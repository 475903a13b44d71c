//! Real certificates for tests (of this crate and others): since the simulator checks uploads
//! as Hetzner does (a parsable chain, a matching key), a stub PEM no longer passes.
//!
//! ```
//! let (cert, key) = cloud_sim::test_certs::self_signed(&["example.com"]);
//! assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
//! assert!(key.contains("PRIVATE KEY"));
//! let serial = cloud_sim::test_certs::serial(&cert).unwrap();
//! assert!(!serial.is_empty());
//! ```

use std::time::{Duration, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::clock::now_ms;

/// A self-signed certificate for `domains` (its SANs; the first is also the common name),
/// valid from an hour ago for 90 days, and its private key (ECDSA P-256): `(cert_pem, key_pem)`.
/// Each call makes a new key and a random serial.
pub fn self_signed(domains: &[&str]) -> (String, String) {
    let now = now_ms();
    self_signed_between(
        domains,
        now.saturating_sub(3_600_000),
        now + crate::state::NINETY_DAYS_MS,
    )
}

/// Like [`self_signed`], valid from `not_before_ms` to `not_after_ms` (unix milliseconds): an
/// expired or a not yet valid certificate.
pub fn self_signed_between(
    domains: &[&str],
    not_before_ms: u64,
    not_after_ms: u64,
) -> (String, String) {
    let names: Vec<String> = domains.iter().map(|d| (*d).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("valid domain names");
    if let Some(first) = domains.first() {
        params.distinguished_name.push(DnType::CommonName, *first);
    }
    let at = |ms: u64| rcgen::date_time_ymd(1970, 1, 1) + Duration::from_millis(ms);
    params.not_before = at(not_before_ms);
    params.not_after = at(not_after_ms);
    params.serial_number = Some(random_serial());
    let key = KeyPair::generate().expect("a new key");
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    (cert.pem(), key.serialize_pem())
}

/// A CA certificate named `common_name` (basic constraints CA; key usages certificate and CRL
/// signing, digital signature), valid like [`self_signed`], and its key (ECDSA P-256):
/// `(cert_pem, key_pem)`, e.g. the Secret of a cert-manager CA Issuer.
pub fn ca(common_name: &str) -> (String, String) {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = now_ms();
    let at = |ms: u64| rcgen::date_time_ymd(1970, 1, 1) + Duration::from_millis(ms);
    params.not_before = at(now.saturating_sub(3_600_000));
    params.not_after = at(now + crate::state::NINETY_DAYS_MS);
    params.serial_number = Some(random_serial());
    let key = KeyPair::generate().expect("a new key");
    let cert = params
        .self_signed(&key)
        .expect("a self-signed CA certificate");
    (cert.pem(), key.serialize_pem())
}

/// The leaf's serial number as colon-separated lower-case hex; `None` if `cert_pem` holds no
/// readable certificate. What a TLS client compares with the certificate it was served.
pub fn serial(cert_pem: &str) -> Option<String> {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).ok()?;
    serial_of_der(&der)
}

/// The serial of a DER certificate (as a TLS client's `peer_certificates()` gives them).
pub fn serial_of_der(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    Some(cert.raw_serial_as_string())
}

/// 16 random bytes, positive (a serial is a positive INTEGER) and without a leading zero byte.
fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    // Falls back to the clock: a serial only needs to differ between a test's certificates.
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        let nanos = UNIX_EPOCH.elapsed().map(|d| d.as_nanos()).unwrap_or(0);
        bytes = nanos.to_be_bytes();
    }
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}
