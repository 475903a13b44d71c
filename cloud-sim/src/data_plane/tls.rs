//! TLS termination for `https` services, as Hetzner's load balancers do it: the client's TLS
//! ends at the listener, the target gets the decrypted bytes (plain HTTP).
//!
//! - The server certificate is chosen at every handshake from the world as it is then: the
//!   service's `http.certificates`, the first whose domain names cover the client's SNI, else
//!   the first. So a changed list (`update_service`) applies to the next handshake; connections
//!   already established keep their session, and the listener (address, port) stays.
//! - Parsed keys are cached per certificate id and fingerprint (ids are never reused; a managed
//!   certificate's renewal changes its fingerprint), so a handshake does not parse PEM.
//! - No session resumption: every connection makes a full handshake, so it sees the service's
//!   certificate of that moment.
//! - No ALPN: targets get HTTP/1.1, whatever the client would have preferred.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::ServerConfig;
use rustls::crypto::aws_lc_rs;
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use super::host::HostRef;
use crate::certs;

/// The acceptor of one listener (load balancer `lb`, `listen_port`).
pub(super) fn acceptor(app: HostRef, lb: u64, listen_port: u16) -> Option<TlsAcceptor> {
    let resolver = ServiceCertificates {
        app,
        lb,
        listen_port,
        cache: Mutex::default(),
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| tracing::error!(error = %e, "cloud-sim data plane: no TLS configuration"))
        .ok()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // No resumption: a resumed session skips the resolver and keeps the certificate it was
    // made with, so a client would go on seeing a certificate the service no longer has.
    config.session_storage = Arc::new(NoServerSessionStorage {});
    Some(TlsAcceptor::from(Arc::new(config)))
}

struct ServiceCertificates {
    app: HostRef,
    lb: u64,
    listen_port: u16,
    /// Certificate id → (fingerprint, key).
    cache: Mutex<HashMap<u64, (String, Arc<CertifiedKey>)>>,
}

impl std::fmt::Debug for ServiceCertificates {
    // By hand: the host is a trait object without `Debug`, and the keys are not for logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCertificates")
            .field("lb", &self.lb)
            .field("listen_port", &self.listen_port)
            .finish_non_exhaustive()
    }
}

/// What a handshake needs of one certificate, copied out of the world's lock.
struct Candidate {
    id: u64,
    domain_names: Vec<String>,
    fingerprint: String,
    pem: String,
    key: String,
}

impl ServiceCertificates {
    fn candidates(&self) -> Vec<Candidate> {
        let st = self.app.state();
        let Some(svc) = st.load_balancers.get(&self.lb).and_then(|lb| {
            lb.services
                .iter()
                .find(|s| s.listen_port == self.listen_port)
        }) else {
            return Vec::new();
        };
        let ids = svc.http.as_ref().map_or(&[][..], |h| &h.certificates[..]);
        ids.iter()
            .filter_map(|id| {
                let c = st.certificates.get(id)?;
                Some(Candidate {
                    id: *id,
                    domain_names: c.domain_names.clone(),
                    fingerprint: c.fingerprint.clone().unwrap_or_default(),
                    pem: c.certificate.clone()?,
                    key: c.private_key.as_ref()?.expose().to_owned(),
                })
            })
            .collect()
    }

    fn key_for(&self, c: &Candidate) -> Option<Arc<CertifiedKey>> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((fp, key)) = cache.get(&c.id)
            && *fp == c.fingerprint
        {
            return Some(key.clone());
        }
        match certs::certified_key(&c.pem, &c.key) {
            Ok(key) => {
                cache.insert(c.id, (c.fingerprint.clone(), key.clone()));
                Some(key)
            }
            Err(e) => {
                tracing::warn!(certificate = c.id, error = %e,
                    "cloud-sim data plane: certificate unusable for TLS");
                None
            }
        }
    }
}

impl ResolvesServerCert for ServiceCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let candidates = self.candidates();
        let by_sni = hello.server_name().and_then(|sni| {
            candidates
                .iter()
                .find(|c| certs::covers(&c.domain_names, sni))
        });
        self.key_for(by_sni.or(candidates.first())?)
    }
}
