//! The `kubernetes.io/tls` Secrets a Service may name for its load balancer's certificate
//! (`load-balancer.hetzner.cloud/http-certificate-secret`), as the controller sees them: only
//! the Service's own namespace, and only Secrets labelled [`CERTIFICATE_SECRET_LABEL`], the
//! ones its opt-in read access covers. The provider never reads Kubernetes itself.

use std::sync::Arc;

use crate::secret::Secret;

/// The label a Secret carries to be read at all (cert-manager sets it from a Certificate's
/// `spec.secretTemplate.labels`): service-controller watches only these.
pub const CERTIFICATE_SECRET_LABEL: &str = "cloud-controllers.io/load-balancer-certificate";

/// A TLS Secret's certificate and key. The key's `Debug` is redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSecret {
    /// `metadata.uid`: whose uploads are whose, across namespaces and clusters.
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `tls.crt`: the leaf first, then its chain.
    pub certificate_pem: String,
    /// `tls.key`.
    pub key_pem: Secret,
}

/// What the controller knows of a Secret a Service names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretLookup {
    Found(TlsSecret),
    /// No labelled Secret of that name in the namespace (none, or one without the label).
    Missing,
    /// Labelled, but not `kubernetes.io/tls` with `tls.crt` and `tls.key`: what is wrong.
    NotTls(String),
    /// The controller does not read Secrets (`--certificate-secrets` is off).
    Disabled,
}

type Lookup = dyn Fn(&str) -> SecretLookup + Send + Sync;

/// Looks up a Secret of the Service's namespace by name. Default: the controller reads none.
#[derive(Clone, Default)]
pub struct TlsSecrets(Option<Arc<Lookup>>);

impl TlsSecrets {
    pub fn new(lookup: impl Fn(&str) -> SecretLookup + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(lookup)))
    }

    pub fn get(&self, name: &str) -> SecretLookup {
        match &self.0 {
            Some(f) => f(name),
            None => SecretLookup::Disabled,
        }
    }
}

impl std::fmt::Debug for TlsSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsSecrets")
    }
}

/// A lookup is not part of a Service's identity.
impl PartialEq for TlsSecrets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TlsSecrets {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_never_shows_in_debug() {
        let s = TlsSecret {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "web-tls".into(),
            certificate_pem: "-----BEGIN CERTIFICATE-----".into(),
            key_pem: Secret::new("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
        };
        let shown = format!("{:?}", SecretLookup::Found(s));
        assert!(!shown.contains("MIIEvQIBADANBgkq"), "{shown}");
        assert_eq!(TlsSecrets::default().get("x"), SecretLookup::Disabled);
    }
}
