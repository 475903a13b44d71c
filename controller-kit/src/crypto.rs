//! The TLS crypto provider every client of the process uses.

/// Installs aws-lc-rs as the process-wide rustls provider (call first in `main` and in tests).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
