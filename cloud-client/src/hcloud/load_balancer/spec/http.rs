//! HTTP and HTTPS services: cookies, timeouts, redirects, and the certificates HTTPS needs.

use std::time::Duration;

use super::reader::{Reader, is_dns_name, is_dns1123_subdomain};
use crate::hcloud::load_balancer::annotations as a;

/// Where TLS certificates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CertificateType {
    #[default]
    Uploaded,
    Managed,
}

/// HTTP(S) service settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpSpec {
    pub cookie_name: Option<String>,
    pub cookie_lifetime: Option<Duration>,
    pub timeout_idle: Option<Duration>,
    pub sticky_sessions: Option<bool>,
    pub redirect_http: Option<bool>,
    pub certificate_type: CertificateType,
    /// Uploaded certificates by id or name.
    pub certificates: Vec<String>,
    /// A `kubernetes.io/tls` Secret of the Service's namespace, by name.
    pub certificate_secret: Option<String>,
    pub managed_certificate_name: Option<String>,
    pub managed_certificate_domains: Vec<String>,
    pub managed_certificate_acme_staging: bool,
}

pub(super) fn parse_http(r: &mut Reader<'_>, uid: &str) -> HttpSpec {
    let mut h = HttpSpec {
        cookie_name: r.string(a::HTTP_COOKIE_NAME),
        cookie_lifetime: r.duration(a::HTTP_COOKIE_LIFETIME, Duration::from_secs(1), None),
        timeout_idle: r.duration(
            a::HTTP_TIMEOUT_IDLE,
            Duration::from_secs(30),
            Some(Duration::from_secs(300)),
        ),
        sticky_sessions: r.bool(a::HTTP_STICKY_SESSIONS),
        redirect_http: r.bool(a::HTTP_REDIRECT_HTTP),
        ..Default::default()
    };
    // Exact match like HCCM (`certtyp == "managed"`); an empty value means unset.
    if let Some(t) = r.string(a::CERTIFICATE_TYPE) {
        match t.as_str() {
            "uploaded" => h.certificate_type = CertificateType::Uploaded,
            "managed" => h.certificate_type = CertificateType::Managed,
            _ => r.fail(a::CERTIFICATE_TYPE, &t, "uploaded or managed"),
        }
    }
    h.certificates = r.csv(a::HTTP_CERTIFICATES);
    h.certificate_secret = r.string(a::HTTP_CERTIFICATE_SECRET);
    if let Some(name) = h.certificate_secret.clone() {
        check_certificate_secret(r, &h, &name);
    }
    h.managed_certificate_name = r.string(a::HTTP_MANAGED_CERTIFICATE_NAME);
    h.managed_certificate_domains = r.csv(a::HTTP_MANAGED_CERTIFICATE_DOMAINS);
    // Ordering the certificate is a cloud write: a domain it could never be issued for is refused
    // before it.
    for d in h.managed_certificate_domains.clone() {
        if !is_dns_name(d.strip_prefix("*.").unwrap_or(&d)) || d.ends_with('.') {
            r.fail(
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                &d,
                "comma-separated domain names such as example.com,*.example.com",
            );
        }
    }
    h.managed_certificate_acme_staging = r
        .bool(a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING)
        .unwrap_or(false);
    if h.certificate_type == CertificateType::Managed {
        if h.managed_certificate_domains.is_empty() {
            r.fail(
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                "",
                format!("at least one domain when {}=managed", a::CERTIFICATE_TYPE),
            );
        }
        if h.managed_certificate_name.is_none() {
            h.managed_certificate_name = Some(format!("ccm-managed-certificate-{uid}"));
        }
    }
    h
}

/// A Secret is named in the Service's own namespace only (no `namespace/name`: tenancy), and is
/// the certificate's one source on its port.
fn check_certificate_secret(r: &mut Reader<'_>, h: &HttpSpec, name: &str) {
    if name.contains('/') {
        r.fail(
            a::HTTP_CERTIFICATE_SECRET,
            name,
            "the name of a Secret in the Service's own namespace (a Service cannot use another \
             namespace's Secret)",
        );
    } else if !is_dns1123_subdomain(name) {
        r.fail(
            a::HTTP_CERTIFICATE_SECRET,
            name,
            "a Secret name (lowercase letters, digits, '-' and '.')",
        );
    }
    let other = if !h.certificates.is_empty() {
        Some(a::HTTP_CERTIFICATES)
    } else if h.certificate_type == CertificateType::Managed {
        Some(a::CERTIFICATE_TYPE)
    } else {
        None
    };
    if let Some(other) = other {
        r.fail(
            a::HTTP_CERTIFICATE_SECRET,
            name,
            format!(
                "no {other} on the same port: a port's certificate comes from one source (set one \
                 of them per port, e.g. {}.<port>)",
                a::HTTP_CERTIFICATE_SECRET
            ),
        );
    }
}
