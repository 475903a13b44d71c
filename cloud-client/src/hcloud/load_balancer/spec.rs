//! Annotations + `HCLOUD_LOAD_BALANCERS_*` defaults → one typed, validated [`LbSpec`].
//! Parsing happens before any cloud call, so bad input never leaves a half-built load balancer.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::annotations as a;
use crate::error::CloudError;
use crate::hcloud::config::LbDefaults;
use crate::hcloud::label_selector::LabelSelector;
use crate::hcloud::values::{BOOL_EXPECTED, DURATION_EXPECTED, parse_bool, parse_duration};
use crate::provider::ServiceRef;

/// Load-balancer service protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LbProtocol {
    #[default]
    Tcp,
    Http,
    Https,
}

impl LbProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            LbProtocol::Tcp => "tcp",
            LbProtocol::Http => "http",
            LbProtocol::Https => "https",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(LbProtocol::Tcp),
            "http" => Some(LbProtocol::Http),
            "https" => Some(LbProtocol::Https),
            _ => None,
        }
    }
}

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
    pub managed_certificate_name: Option<String>,
    pub managed_certificate_domains: Vec<String>,
    pub managed_certificate_acme_staging: bool,
}

/// Health-check settings; `custom` is true when any health-check annotation is set (HCCM then sends
/// the whole block instead of "TCP on the NodePort").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthCheckSpec {
    pub custom: bool,
    pub protocol: Option<LbProtocol>,
    pub port: Option<u16>,
    pub interval: Option<Duration>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub http_domain: Option<String>,
    pub http_path: Option<String>,
    pub http_validate_certificate: Option<bool>,
    pub http_status_codes: Vec<String>,
}

/// Everything the annotations and env defaults say about one Service's load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbSpec {
    pub name: String,
    /// `None` = neither annotation nor env set: `lb11` is used and a warning emitted.
    pub lb_type: Option<String>,
    pub location: Option<String>,
    pub network_zone: Option<String>,
    pub algorithm: Option<String>,
    pub protocol: LbProtocol,
    pub proxy_protocol: bool,
    pub ipv6_disabled: bool,
    pub disable_public_network: Option<bool>,
    pub disable_private_ingress: bool,
    pub use_private_ip: bool,
    pub private_ipv4: Option<Ipv4Addr>,
    pub private_subnet_ip_range: Option<String>,
    pub hostname: Option<String>,
    pub node_selector: Option<LabelSelector>,
    pub ipv4_rdns: Option<String>,
    pub ipv6_rdns: Option<String>,
    pub http: HttpSpec,
    pub health_check: HealthCheckSpec,
}

/// Upstream `DefaultLoadBalancerName`: `a` + UID without dashes, at most 32 characters.
pub fn default_name(uid: &str) -> String {
    let mut n = String::from("a");
    n.extend(uid.chars().filter(|c| *c != '-'));
    n.truncate(32);
    n
}

struct Reader<'a> {
    ann: &'a BTreeMap<String, String>,
    errors: Vec<CloudError>,
}

impl<'a> Reader<'a> {
    fn raw(&self, key: &str) -> Option<&'a str> {
        self.ann.get(key).map(String::as_str)
    }

    fn string(&self, key: &str) -> Option<String> {
        self.raw(key)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    }

    fn fail(&mut self, key: &str, value: &str, expected: impl Into<String>) {
        self.errors.push(CloudError::invalid_input(
            format!("annotation {key}"),
            value,
            expected,
        ));
    }

    fn bool(&mut self, key: &str) -> Option<bool> {
        let v = self.raw(key)?;
        let r = parse_bool(v.trim());
        if r.is_none() {
            self.fail(key, v, BOOL_EXPECTED);
        }
        r
    }

    fn duration(&mut self, key: &str, min: Duration, max: Option<Duration>) -> Option<Duration> {
        let v = self.raw(key)?;
        match parse_duration(v) {
            Some(d) if d >= min && max.is_none_or(|m| d <= m) && d.subsec_nanos() == 0 => Some(d),
            _ => {
                let range = match max {
                    Some(m) => format!(
                        " between {}s and {}s, whole seconds",
                        min.as_secs(),
                        m.as_secs()
                    ),
                    None => format!(" of at least {}s, whole seconds", min.as_secs()),
                };
                self.fail(key, v, format!("{DURATION_EXPECTED}{range}"));
                None
            }
        }
    }

    fn int<T: std::str::FromStr>(&mut self, key: &str, expected: &str) -> Option<T> {
        let v = self.raw(key)?;
        let r = v.trim().parse::<T>().ok();
        if r.is_none() {
            self.fail(key, v, expected);
        }
        r
    }

    fn csv(&self, key: &str) -> Vec<String> {
        self.raw(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl LbSpec {
    /// Parses all annotations of `svc` over `defaults`. Every invalid annotation is reported (the first
    /// as the error, the rest appended to its message) naming the key, the value and what is accepted.
    pub fn parse(svc: &ServiceRef, defaults: &LbDefaults) -> Result<Self, CloudError> {
        let mut r = Reader {
            ann: &svc.annotations,
            errors: Vec::new(),
        };
        let mut s = LbSpec {
            name: r.string(a::NAME).unwrap_or_else(|| default_name(&svc.uid)),
            ..Default::default()
        };
        if s.name.len() > 63 {
            let n = s.name.clone();
            r.fail(a::NAME, &n, "a name of at most 63 characters");
        }

        s.lb_type = r.string(a::TYPE).or_else(|| defaults.lb_type.clone());

        // An explicitly empty annotation resets the env default (HCCM semantics).
        let loc_ann = r.raw(a::LOCATION).map(str::trim);
        let zone_ann = r.raw(a::NETWORK_ZONE).map(str::trim);
        match (loc_ann, zone_ann) {
            (Some(l), Some(z)) if !l.is_empty() && !z.is_empty() => r.fail(
                a::LOCATION,
                l,
                format!("only one of {} and {}", a::LOCATION, a::NETWORK_ZONE),
            ),
            (Some(l), _) if !l.is_empty() => s.location = Some(l.to_string()),
            (_, Some(z)) if !z.is_empty() => s.network_zone = Some(z.to_string()),
            (Some(_), _) | (_, Some(_)) => {}
            (None, None) => {
                s.location = defaults.location.clone();
                s.network_zone = defaults.network_zone.clone();
            }
        }

        s.algorithm = r
            .string(a::ALGORITHM_TYPE)
            .or_else(|| defaults.algorithm.clone());
        if let Some(alg) = s.algorithm.clone()
            && alg != "round_robin"
            && alg != "least_connections"
        {
            r.fail(a::ALGORITHM_TYPE, &alg, "round_robin or least_connections");
            s.algorithm = None;
        }

        if let Some(p) = r.raw(a::PROTOCOL) {
            match LbProtocol::parse(p.trim()) {
                Some(p) => s.protocol = p,
                None => r.fail(a::PROTOCOL, p, "tcp, http or https"),
            }
        }

        s.proxy_protocol = r
            .bool(a::USES_PROXYPROTOCOL)
            .or(defaults.uses_proxyprotocol)
            .unwrap_or(false);
        s.ipv6_disabled = r.bool(a::IPV6_DISABLED).unwrap_or(defaults.disable_ipv6);
        s.disable_public_network = r
            .bool(a::DISABLE_PUBLIC_NETWORK)
            .or(defaults.disable_public_network);
        s.disable_private_ingress = r
            .bool(a::DISABLE_PRIVATE_INGRESS)
            .unwrap_or(defaults.disable_private_ingress);
        s.use_private_ip = r.bool(a::USE_PRIVATE_IP).unwrap_or(defaults.use_private_ip);

        if let Some(ip) = r.string(a::PRIVATE_IPV4) {
            match ip.parse::<Ipv4Addr>() {
                Ok(v) => s.private_ipv4 = Some(v),
                Err(_) => r.fail(a::PRIVATE_IPV4, &ip, "an IPv4 address"),
            }
        }
        s.private_subnet_ip_range = r
            .string(a::PRIVATE_SUBNET_IP_RANGE)
            .or_else(|| defaults.private_subnet_ip_range.clone());
        if let Some(c) = s.private_subnet_ip_range.clone()
            && !is_ipv4_cidr(&c)
        {
            r.fail(
                a::PRIVATE_SUBNET_IP_RANGE,
                &c,
                "an IPv4 CIDR such as 10.0.1.0/24",
            );
            s.private_subnet_ip_range = None;
        }
        s.hostname = r.string(a::HOSTNAME);
        if let Some(sel) = r.string(a::NODE_SELECTOR) {
            match LabelSelector::parse(&format!("annotation {}", a::NODE_SELECTOR), &sel) {
                Ok(x) => s.node_selector = Some(x),
                Err(e) => r.errors.push(e),
            }
        }
        s.ipv4_rdns = r.string(a::IPV4_RDNS);
        s.ipv6_rdns = r.string(a::IPV6_RDNS);

        // --- http ---
        let h = &mut s.http;
        h.cookie_name = r.string(a::HTTP_COOKIE_NAME);
        h.cookie_lifetime = r.duration(a::HTTP_COOKIE_LIFETIME, Duration::from_secs(1), None);
        h.timeout_idle = r.duration(
            a::HTTP_TIMEOUT_IDLE,
            Duration::from_secs(30),
            Some(Duration::from_secs(300)),
        );
        h.sticky_sessions = r.bool(a::HTTP_STICKY_SESSIONS);
        h.redirect_http = r.bool(a::HTTP_REDIRECT_HTTP);
        if let Some(t) = r.raw(a::CERTIFICATE_TYPE) {
            match t.trim() {
                "uploaded" => h.certificate_type = CertificateType::Uploaded,
                "managed" => h.certificate_type = CertificateType::Managed,
                _ => r.fail(a::CERTIFICATE_TYPE, t, "uploaded or managed"),
            }
        }
        h.certificates = r.csv(a::HTTP_CERTIFICATES);
        h.managed_certificate_name = r.string(a::HTTP_MANAGED_CERTIFICATE_NAME);
        h.managed_certificate_domains = r.csv(a::HTTP_MANAGED_CERTIFICATE_DOMAINS);
        h.managed_certificate_acme_staging = r
            .bool(a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING)
            .unwrap_or(false);
        if h.certificate_type == CertificateType::Managed
            && h.managed_certificate_domains.is_empty()
        {
            r.fail(
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                "",
                format!("at least one domain when {}=managed", a::CERTIFICATE_TYPE),
            );
        }
        if h.certificate_type == CertificateType::Managed && h.managed_certificate_name.is_none() {
            h.managed_certificate_name = Some(format!("ccm-managed-certificate-{}", svc.uid));
        }

        // --- health check ---
        let hc_keys = [
            a::HEALTH_CHECK_PROTOCOL,
            a::HEALTH_CHECK_PORT,
            a::HEALTH_CHECK_INTERVAL,
            a::HEALTH_CHECK_TIMEOUT,
            a::HEALTH_CHECK_RETRIES,
            a::HEALTH_CHECK_HTTP_DOMAIN,
            a::HEALTH_CHECK_HTTP_PATH,
            a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
            a::HTTP_STATUS_CODES,
        ];
        let mut hc = HealthCheckSpec {
            custom: hc_keys.iter().any(|k| svc.annotations.contains_key(*k)),
            ..Default::default()
        };
        if let Some(p) = r.raw(a::HEALTH_CHECK_PROTOCOL) {
            match LbProtocol::parse(p.trim()) {
                Some(p) => hc.protocol = Some(p),
                None => r.fail(a::HEALTH_CHECK_PROTOCOL, p, "tcp, http or https"),
            }
        }
        hc.port = r
            .int::<u16>(a::HEALTH_CHECK_PORT, "a port number 1-65535")
            .filter(|p| *p > 0);
        if r.raw(a::HEALTH_CHECK_PORT).is_some_and(|p| p.trim() == "0") {
            r.fail(a::HEALTH_CHECK_PORT, "0", "a port number 1-65535");
        }
        hc.interval = r
            .duration(a::HEALTH_CHECK_INTERVAL, Duration::from_secs(1), None)
            .or(defaults.health_check_interval);
        hc.timeout = r
            .duration(a::HEALTH_CHECK_TIMEOUT, Duration::from_secs(1), None)
            .or(defaults.health_check_timeout);
        hc.retries = r
            .int::<u32>(a::HEALTH_CHECK_RETRIES, "a non-negative integer")
            .or(defaults.health_check_retries);
        hc.http_domain = r.string(a::HEALTH_CHECK_HTTP_DOMAIN);
        hc.http_path = r.string(a::HEALTH_CHECK_HTTP_PATH);
        hc.http_validate_certificate = r.bool(a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE);
        hc.http_status_codes = r.csv(a::HTTP_STATUS_CODES);
        for code in hc.http_status_codes.clone() {
            if code.len() != 3 || !code.chars().all(|c| c.is_ascii_digit() || c == '?') {
                r.fail(
                    a::HTTP_STATUS_CODES,
                    &code,
                    "comma-separated 3-character codes with ? wildcards, e.g. 2??,301",
                );
            }
        }
        s.health_check = hc;

        let mut errors = r.errors.into_iter();
        match errors.next() {
            None => Ok(s),
            Some(CloudError::InvalidInput {
                field,
                value,
                mut expected,
            }) => {
                for e in errors {
                    expected.push_str(&format!("; also: {e}"));
                }
                Err(CloudError::InvalidInput {
                    field,
                    value,
                    expected,
                })
            }
            Some(e) => Err(e),
        }
    }
}

fn is_ipv4_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, len)| {
        ip.parse::<Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(pairs: &[(&str, &str)]) -> ServiceRef {
        ServiceRef {
            uid: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into(),
            namespace: "default".into(),
            name: "web".into(),
            annotations: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ports: vec![],
        }
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<LbSpec, CloudError> {
        LbSpec::parse(&svc(pairs), &LbDefaults::default())
    }

    fn bad(key: &str, value: &str) -> String {
        let e = parse(&[(key, value)]).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, CloudError::InvalidInput { .. }), "{msg}");
        assert!(msg.contains(key), "{msg} should name {key}");
        assert!(msg.contains(value), "{msg} should name {value}");
        msg
    }

    #[test]
    fn default_name_is_upstreams() {
        assert_eq!(
            default_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
            "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
        );
        assert_eq!(
            default_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").len(),
            32
        );
        assert_eq!(parse(&[]).unwrap().name, "a0f1e2d3c4b5a69788796a5b4c3d2e1f");
    }

    #[test]
    fn every_annotation_parses_good_values() {
        let s = parse(&[
            (a::NAME, "my-lb"),
            (a::TYPE, "lb21"),
            (a::LOCATION, "fsn1"),
            (a::ALGORITHM_TYPE, "least_connections"),
            (a::PROTOCOL, "https"),
            (a::USES_PROXYPROTOCOL, "true"),
            (a::IPV6_DISABLED, "1"),
            (a::DISABLE_PUBLIC_NETWORK, "F"),
            (a::DISABLE_PRIVATE_INGRESS, "TRUE"),
            (a::USE_PRIVATE_IP, "t"),
            (a::PRIVATE_IPV4, "10.0.0.9"),
            (a::PRIVATE_SUBNET_IP_RANGE, "10.0.1.0/24"),
            (a::HOSTNAME, "lb.example.com"),
            (a::NODE_SELECTOR, "role=edge"),
            (a::IPV4_RDNS, "v4.example.com"),
            (a::IPV6_RDNS, "v6.example.com"),
            (a::HTTP_COOKIE_NAME, "SESS"),
            (a::HTTP_COOKIE_LIFETIME, "300"),
            (a::HTTP_TIMEOUT_IDLE, "1m"),
            (a::HTTP_STICKY_SESSIONS, "true"),
            (a::HTTP_REDIRECT_HTTP, "true"),
            (a::CERTIFICATE_TYPE, "uploaded"),
            (a::HTTP_CERTIFICATES, "12, my-cert"),
            (a::HEALTH_CHECK_PROTOCOL, "http"),
            (a::HEALTH_CHECK_PORT, "10256"),
            (a::HEALTH_CHECK_INTERVAL, "15s"),
            (a::HEALTH_CHECK_TIMEOUT, "10"),
            (a::HEALTH_CHECK_RETRIES, "3"),
            (a::HEALTH_CHECK_HTTP_DOMAIN, "example.com"),
            (a::HEALTH_CHECK_HTTP_PATH, "/healthz"),
            (a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "false"),
            (a::HTTP_STATUS_CODES, "2??,301"),
            (a::IPV4, "1.2.3.4"),
            (a::IPV6, "::1"),
            (a::ID, "77"),
        ])
        .unwrap();
        assert_eq!(s.name, "my-lb");
        assert_eq!(s.lb_type.as_deref(), Some("lb21"));
        assert_eq!(s.location.as_deref(), Some("fsn1"));
        assert_eq!(s.algorithm.as_deref(), Some("least_connections"));
        assert_eq!(s.protocol, LbProtocol::Https);
        assert!(
            s.proxy_protocol && s.ipv6_disabled && s.disable_private_ingress && s.use_private_ip
        );
        assert_eq!(s.disable_public_network, Some(false));
        assert_eq!(s.private_ipv4, Some(Ipv4Addr::new(10, 0, 0, 9)));
        assert_eq!(s.private_subnet_ip_range.as_deref(), Some("10.0.1.0/24"));
        assert_eq!(s.hostname.as_deref(), Some("lb.example.com"));
        assert!(s.node_selector.is_some());
        assert_eq!(s.ipv4_rdns.as_deref(), Some("v4.example.com"));
        assert_eq!(s.ipv6_rdns.as_deref(), Some("v6.example.com"));
        assert_eq!(s.http.cookie_name.as_deref(), Some("SESS"));
        assert_eq!(s.http.cookie_lifetime, Some(Duration::from_secs(300)));
        assert_eq!(s.http.timeout_idle, Some(Duration::from_secs(60)));
        assert_eq!(s.http.sticky_sessions, Some(true));
        assert_eq!(s.http.redirect_http, Some(true));
        assert_eq!(s.http.certificates, ["12", "my-cert"]);
        let hc = &s.health_check;
        assert!(hc.custom);
        assert_eq!(hc.protocol, Some(LbProtocol::Http));
        assert_eq!(hc.port, Some(10256));
        assert_eq!(hc.interval, Some(Duration::from_secs(15)));
        assert_eq!(hc.timeout, Some(Duration::from_secs(10)));
        assert_eq!(hc.retries, Some(3));
        assert_eq!(hc.http_domain.as_deref(), Some("example.com"));
        assert_eq!(hc.http_path.as_deref(), Some("/healthz"));
        assert_eq!(hc.http_validate_certificate, Some(false));
        assert_eq!(hc.http_status_codes, ["2??", "301"]);
    }

    #[test]
    fn managed_certificates() {
        let s = parse(&[
            (a::CERTIFICATE_TYPE, "managed"),
            (
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                "a.example.com,b.example.com",
            ),
            (a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING, "true"),
        ])
        .unwrap();
        assert_eq!(s.http.certificate_type, CertificateType::Managed);
        assert_eq!(s.http.managed_certificate_domains.len(), 2);
        assert!(s.http.managed_certificate_acme_staging);
        assert_eq!(
            s.http.managed_certificate_name.as_deref(),
            Some("ccm-managed-certificate-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
        );
        let named = parse(&[
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "a.example.com"),
            (a::HTTP_MANAGED_CERTIFICATE_NAME, "mine"),
        ])
        .unwrap();
        assert_eq!(named.http.managed_certificate_name.as_deref(), Some("mine"));
        let e = parse(&[(a::CERTIFICATE_TYPE, "managed")]).unwrap_err();
        assert!(e.to_string().contains(a::HTTP_MANAGED_CERTIFICATE_DOMAINS));
    }

    #[test]
    fn every_annotation_rejects_bad_values() {
        for key in [
            a::USES_PROXYPROTOCOL,
            a::IPV6_DISABLED,
            a::DISABLE_PUBLIC_NETWORK,
            a::DISABLE_PRIVATE_INGRESS,
            a::USE_PRIVATE_IP,
            a::HTTP_STICKY_SESSIONS,
            a::HTTP_REDIRECT_HTTP,
            a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING,
            a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
        ] {
            assert!(
                bad(key, "maybe").contains("ParseBool") || bad(key, "maybe").contains("boolean")
            );
        }
        bad(a::ALGORITHM_TYPE, "random");
        bad(a::PROTOCOL, "udp");
        bad(a::HEALTH_CHECK_PROTOCOL, "grpc");
        bad(a::CERTIFICATE_TYPE, "selfsigned");
        bad(a::PRIVATE_IPV4, "10.0.0.300");
        bad(a::PRIVATE_SUBNET_IP_RANGE, "10.0.0.0");
        bad(a::NODE_SELECTOR, "zone in (a");
        bad(a::HEALTH_CHECK_PORT, "http");
        bad(a::HEALTH_CHECK_PORT, "70000");
        bad(a::HEALTH_CHECK_PORT, "0");
        bad(a::HEALTH_CHECK_RETRIES, "-1");
        bad(a::HEALTH_CHECK_INTERVAL, "soon");
        bad(a::HEALTH_CHECK_INTERVAL, "500ms");
        bad(a::HEALTH_CHECK_TIMEOUT, "10x");
        bad(a::HTTP_COOKIE_LIFETIME, "forever");
        bad(a::HTTP_TIMEOUT_IDLE, "10s");
        bad(a::HTTP_TIMEOUT_IDLE, "301");
        bad(a::HTTP_STATUS_CODES, "2xx");
        bad(a::NAME, &"x".repeat(64));
        let both = parse(&[(a::LOCATION, "fsn1"), (a::NETWORK_ZONE, "eu-central")]).unwrap_err();
        assert!(both.to_string().contains(a::NETWORK_ZONE));
    }

    #[test]
    fn all_errors_are_reported_together() {
        let e = parse(&[(a::PROTOCOL, "udp"), (a::USE_PRIVATE_IP, "nah")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("udp") && e.contains("nah"), "{e}");
    }

    #[test]
    fn env_defaults_apply_and_annotations_override() {
        let d = LbDefaults {
            location: Some("nbg1".into()),
            lb_type: Some("lb31".into()),
            use_private_ip: true,
            uses_proxyprotocol: Some(true),
            health_check_interval: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        let s = LbSpec::parse(&svc(&[]), &d).unwrap();
        assert_eq!(s.location.as_deref(), Some("nbg1"));
        assert_eq!(s.lb_type.as_deref(), Some("lb31"));
        assert!(s.use_private_ip && s.proxy_protocol);
        assert_eq!(s.health_check.interval, Some(Duration::from_secs(5)));
        assert!(!s.health_check.custom);
        let s = LbSpec::parse(
            &svc(&[
                (a::USE_PRIVATE_IP, "false"),
                (a::NETWORK_ZONE, "eu-central"),
            ]),
            &d,
        )
        .unwrap();
        assert!(!s.use_private_ip);
        assert_eq!(
            (s.location, s.network_zone.as_deref()),
            (None, Some("eu-central"))
        );
        // An empty location annotation resets the env default.
        let s = LbSpec::parse(&svc(&[(a::LOCATION, "")]), &d).unwrap();
        assert_eq!(s.location, None);
    }

    #[test]
    fn known_annotation_list_is_complete() {
        assert_eq!(a::ALL.len(), 39);
        assert!(a::ALL.iter().all(|k| k.starts_with(a::PREFIX)));
    }
}
