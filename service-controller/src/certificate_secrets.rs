//! TLS Secrets for load balancers' certificates (`--certificate-secrets`, annotation
//! `load-balancer.hetzner.cloud/http-certificate-secret`): a reflector over the Secrets labelled
//! [`CERTIFICATE_SECRET_LABEL`]`=true` only (the label selector is the server's filter: nothing
//! else is ever sent to, or cached by, the controller), the lookup a Service's provider gets for
//! its own namespace, and the Services to reconcile when one of those Secrets changes.

use cloud_client::{CERTIFICATE_SECRET_LABEL, LoadBalancers, SecretLookup, TlsSecret, TlsSecrets};
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

/// The watch's label selector.
pub fn selector() -> String {
    format!("{CERTIFICATE_SECRET_LABEL}=true")
}

/// The lookup for Services of `namespace`: `None` store = the controller reads no Secrets.
pub fn lookup(store: Option<Store<Secret>>, namespace: &str) -> TlsSecrets {
    let Some(store) = store else {
        return TlsSecrets::default();
    };
    let namespace = namespace.to_owned();
    TlsSecrets::new(move |name| {
        let key = ObjectRef::new(name).within(&namespace);
        match store.get(&key) {
            Some(s) => read(&s),
            None => SecretLookup::Missing,
        }
    })
}

/// A labelled Secret as the provider needs it.
fn read(s: &Secret) -> SecretLookup {
    let name = s.name_any();
    if s.type_.as_deref() != Some("kubernetes.io/tls") {
        return SecretLookup::NotTls(format!(
            "Secret {name} is of type {:?}, not kubernetes.io/tls",
            s.type_.as_deref().unwrap_or("Opaque")
        ));
    }
    let field = |k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.trim().is_empty())
    };
    let (Some(certificate_pem), Some(key)) = (field("tls.crt"), field("tls.key")) else {
        return SecretLookup::NotTls(format!(
            "Secret {name} has no tls.crt or no tls.key (cert-manager fills both once the \
             Certificate is issued)"
        ));
    };
    SecretLookup::Found(TlsSecret {
        uid: s.uid().unwrap_or_default(),
        namespace: s.namespace().unwrap_or_default(),
        name,
        certificate_pem,
        key_pem: cloud_client::Secret::new(key),
    })
}

/// The Secrets `svc` names for its certificates, as its provider reads them.
pub fn named_by(lbs: &dyn LoadBalancers, svc: &Service) -> Vec<String> {
    lbs.certificate_secrets(&crate::service::service_ref(svc))
}

/// A fingerprint of what each Secret `svc` names holds for it (`None`: not there), for the
/// applied-spec hash: its UID, type, `tls.crt` and `tls.key`, so a renewal is a change of the
/// Service and a touch of the Secret's metadata (a label, cert-manager's annotations) is not.
/// Only hashed into the process's memory, never shown.
pub fn fingerprints(
    lbs: &dyn LoadBalancers,
    secrets: &Store<Secret>,
    svc: &Service,
) -> Vec<Option<u64>> {
    use std::hash::{Hash, Hasher};
    let namespace = svc.namespace().unwrap_or_default();
    named_by(lbs, svc)
        .iter()
        .map(|name| {
            let s = secrets.get(&ObjectRef::new(name).within(&namespace))?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&s.metadata.uid, &s.type_).hash(&mut h);
            for k in ["tls.crt", "tls.key"] {
                s.data
                    .as_ref()
                    .and_then(|d| d.get(k))
                    .map(|v| &v.0)
                    .hash(&mut h);
            }
            Some(h.finish())
        })
        .collect()
}

/// The Services of `secret`'s namespace that name it: what its change must reach.
pub fn services_naming(
    lbs: &dyn LoadBalancers,
    services: &Store<Service>,
    secret: &Secret,
) -> Vec<ObjectRef<Service>> {
    let (namespace, name) = (secret.namespace(), secret.name_any());
    services
        .state()
        .iter()
        .filter(|svc| svc.namespace() == namespace && named_by(lbs, svc).contains(&name))
        .map(|svc| ObjectRef::from_obj(svc.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, data: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some("web-tls".into());
        s.metadata.namespace = Some("shop".into());
        s.metadata.uid = Some("uid-1".into());
        s.type_ = Some(type_.into());
        s.data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        );
        s
    }

    #[test]
    fn a_tls_secret_is_read_and_anything_else_says_why_not() {
        let ok = read(&secret(
            "kubernetes.io/tls",
            &[("tls.crt", "CERT"), ("tls.key", "KEY")],
        ));
        let SecretLookup::Found(t) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!((t.namespace.as_str(), t.name.as_str()), ("shop", "web-tls"));
        assert!(!format!("{t:?}").contains("KEY\""), "the key is redacted");
        let opaque = read(&secret("Opaque", &[("tls.crt", "C"), ("tls.key", "K")]));
        assert!(matches!(opaque, SecretLookup::NotTls(w) if w.contains("Opaque")));
        let empty = read(&secret(
            "kubernetes.io/tls",
            &[("tls.crt", "C"), ("tls.key", "")],
        ));
        assert!(matches!(empty, SecretLookup::NotTls(w) if w.contains("tls.key")));
    }
}
