//! The TLS provider of every process that talks to a test control plane.

/// Installs aws-lc-rs as the process's rustls provider (the only one compiled in). Idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
