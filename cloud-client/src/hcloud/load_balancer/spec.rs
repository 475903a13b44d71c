//! Annotations + `HCLOUD_LOAD_BALANCERS_*` defaults → one typed, validated [`LbSpec`].
//! Parsing happens before any cloud call, so bad input never leaves a half-built load balancer.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use super::annotations as a;
use super::ownership::fingerprint;
use crate::error::CloudError;
use crate::hcloud::config::LbDefaults;
use crate::label_selector::LabelSelector;
use crate::provider::{ServiceRef, TrafficPolicy, Warning};
use crate::values::{BOOL_EXPECTED, DURATION_EXPECTED, parse_bool, parse_duration};

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

    /// Case-insensitive: HCCM lowercases `protocol` and `health-check-protocol` before checking
    /// them (`validateServiceProtocol`), so `HTTP` works there and must work here.
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Some(LbProtocol::Tcp),
            "http" => Some(LbProtocol::Http),
            "https" => Some(LbProtocol::Https),
            _ => None,
        }
    }
}

/// How the load balancer spreads connections over its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbAlgorithm {
    RoundRobin,
    LeastConnections,
}

impl LbAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            LbAlgorithm::RoundRobin => "round_robin",
            LbAlgorithm::LeastConnections => "least_connections",
        }
    }

    /// Case-insensitive like HCCM's `validateAlgorithmType`, which lowercases first, so
    /// `Round_Robin` is accepted.
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "round_robin" => Some(LbAlgorithm::RoundRobin),
            "least_connections" => Some(LbAlgorithm::LeastConnections),
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

/// Health-check settings. `custom` is HCCM's `addHealthCheck` (hcops `extractHealthCheck`): true
/// when the protocol, port, interval, timeout or retries annotation is set, or a non-zero
/// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_{INTERVAL,TIMEOUT,RETRIES}` default applies. Only then is
/// the whole block sent; otherwise the check is "TCP on the NodePort" and interval, timeout and
/// retries stay whatever the load balancer has. The HTTP fields (domain, path, validate-certificate,
/// status codes) never switch it on by themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthCheckSpec {
    pub custom: bool,
    pub protocol: Option<LbProtocol>,
    pub port: Option<u16>,
    pub interval: Option<Duration>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub http_domain: Option<String>,
    /// `None` = leave the path as it is (the API's default `/` for a new check).
    pub http_path: Option<String>,
    pub http_validate_certificate: Option<bool>,
    pub http_status_codes: Vec<String>,
    /// With `health-check-kube-proxy`: the port kube-proxy answers `GET /healthz` on for this
    /// Service, the check's default port (the annotations above still win, field by field).
    pub kube_proxy_port: Option<u16>,
}

/// kube-proxy's health server (`--healthz-bind-address`, default `0.0.0.0:10256`): 200 while
/// kube-proxy runs and its node is not being deleted (KEP-3836), the check for
/// `externalTrafficPolicy: Cluster`.
pub const KUBE_PROXY_HEALTHZ_PORT: u16 = 10256;
/// Where kube-proxy answers on both its health server and a Service's `healthCheckNodePort`.
pub const KUBE_PROXY_HEALTHZ_PATH: &str = "/healthz";

/// Where a new load balancer is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Location(String),
    NetworkZone(String),
}

/// Where one value of an [`LbSpec`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Service annotation (an empty one counts only where it clears an env default).
    Annotation,
    /// Its `HCLOUD_LOAD_BALANCERS_*` default. A plain on/off variable counts only when on, since
    /// off is also the built-in default.
    Env,
    /// Neither: the built-in default, or no value at all.
    Default,
}

/// The [`Source`] of each value, by annotation key (every value has one). Recorded while parsing,
/// so later stages can say where a value came from without reading annotations again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Provenance(BTreeMap<&'static str, Source>);

impl Provenance {
    pub fn of(&self, key: &str) -> Source {
        self.0.get(key).copied().unwrap_or(Source::Default)
    }
}

/// The `HCLOUD_LOAD_BALANCERS_*` variable that sets the default of annotation `key`, if any.
pub fn env_var(key: &str) -> Option<&'static str> {
    Some(match key {
        a::TYPE => "HCLOUD_LOAD_BALANCERS_TYPE",
        a::LOCATION => "HCLOUD_LOAD_BALANCERS_LOCATION",
        a::NETWORK_ZONE => "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
        a::ALGORITHM_TYPE => "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
        a::USES_PROXYPROTOCOL => "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
        a::IPV6_DISABLED => "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
        a::DISABLE_PUBLIC_NETWORK => "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
        a::DISABLE_PRIVATE_INGRESS => "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
        a::USE_PRIVATE_IP => "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
        a::PRIVATE_SUBNET_IP_RANGE => "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
        a::HEALTH_CHECK_INTERVAL => "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL",
        a::HEALTH_CHECK_TIMEOUT => "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT",
        a::HEALTH_CHECK_RETRIES => "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
        a::HEALTH_CHECK_KUBE_PROXY => "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY",
        _ => return None,
    })
}

/// Everything the annotations and env defaults say about one Service's load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbSpec {
    pub name: String,
    /// The `name` annotation set `name`. Only then is an existing load balancer renamed: HCCM's
    /// `changeHCLBInfo` renames on the annotation alone, so an adopted LB keeps its own name.
    pub name_annotated: bool,
    /// Annotation `shared`: the load balancer named `name` is shared with other Services.
    pub shared: bool,
    /// What a shared load balancer's members must agree on about targets (node selector and
    /// private IPs), as a fingerprint.
    pub target_selection: String,
    /// `None` = neither annotation nor env set: `lb11` is used and a warning emitted.
    pub lb_type: Option<String>,
    /// Create-only; each from its annotation (an empty one clears the env default) or env. Both may
    /// be set: [`LbSpec::placement`] decides.
    pub location: Option<String>,
    pub network_zone: Option<String>,
    pub algorithm: Option<LbAlgorithm>,
    pub protocol: LbProtocol,
    /// `None` = neither annotation nor env: existing services keep theirs and new ones get the
    /// API default (off), as HCCM leaves `proxyprotocol` out of its requests then.
    pub proxy_protocol: Option<bool>,
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
    pub provenance: Provenance,
    /// Ports with port-scoped annotations (`protocol.443`), each the whole spec as that port
    /// sees it: its own values over the Service-wide ones.
    pub ports: BTreeMap<u16, LbSpec>,
}

/// Upstream `DefaultLoadBalancerName`: `a` + UID without dashes, at most 32 characters.
pub fn default_name(uid: &str) -> String {
    let mut n = String::from("a");
    n.extend(uid.chars().filter(|c| *c != '-'));
    n.truncate(32);
    n
}

/// The load balancer's name: the `name` annotation, else [`default_name`]. Unlike
/// [`LbSpec::parse`] it cannot fail, since the controller asks for the name of Services whose
/// other annotations are invalid too.
pub fn name(svc: &ServiceRef) -> String {
    trimmed(svc.annotations.get(a::NAME).map(String::as_str))
        .unwrap_or_else(|| default_name(&svc.uid))
}

fn trimmed(v: Option<&str>) -> Option<String> {
    v.map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

struct Reader<'a> {
    ann: &'a BTreeMap<String, String>,
    errors: Vec<CloudError>,
    provenance: Provenance,
    /// Reading the spec of this port: its port-scoped annotations come first.
    port: Option<u16>,
}

impl<'a> Reader<'a> {
    /// The port-scoped key that sets `key` for the port being read, if there is one.
    fn scoped(&self, key: &str) -> Option<String> {
        let port = self.port.filter(|_| a::PER_PORT.contains(&key))?;
        let k = a::for_port(key, port);
        self.ann.contains_key(&k).then_some(k)
    }

    fn raw(&self, key: &str) -> Option<&'a str> {
        let key = self.scoped(key).unwrap_or_else(|| key.to_string());
        self.ann.get(&key).map(String::as_str)
    }

    fn record(&mut self, key: &'static str, source: Source) {
        self.provenance.0.insert(key, source);
    }

    /// `value` as read from annotation `key`, recorded as its source when there is one.
    fn seen<T>(&mut self, key: &'static str, value: Option<T>) -> Option<T> {
        if value.is_some() {
            self.record(key, Source::Annotation);
        }
        value
    }

    /// The annotation's value, else the env default (recorded as such).
    fn or_env<T>(&mut self, key: &'static str, value: Option<T>, env: Option<T>) -> Option<T> {
        if value.is_some() {
            return value;
        }
        if env.is_some() {
            self.record(key, Source::Env);
        }
        env
    }

    /// For on/off env variables, whose "off" is indistinguishable from unset.
    fn or_env_flag(&mut self, key: &'static str, value: Option<bool>, env: bool) -> bool {
        self.or_env(key, value, env.then_some(true))
            .unwrap_or(false)
    }

    /// The trimmed value; an empty annotation counts as unset.
    fn string(&mut self, key: &'static str) -> Option<String> {
        let v = trimmed(self.raw(key));
        self.seen(key, v)
    }

    fn fail(&mut self, key: &str, value: &str, expected: impl Into<String>) {
        let shown = self.scoped(key).unwrap_or_else(|| key.to_string());
        self.errors.push(CloudError::invalid_input(
            format!("annotation {shown}"),
            value,
            expected,
        ));
    }

    fn bool(&mut self, key: &'static str) -> Option<bool> {
        let v = self.raw(key)?;
        let r = parse_bool(v.trim());
        if r.is_none() {
            self.fail(key, v, BOOL_EXPECTED);
        }
        self.seen(key, r)
    }

    fn duration(
        &mut self,
        key: &'static str,
        min: Duration,
        max: Option<Duration>,
    ) -> Option<Duration> {
        let v = self.raw(key)?;
        match parse_duration(v) {
            Some(d) if d >= min && max.is_none_or(|m| d <= m) && d.subsec_nanos() == 0 => {
                self.seen(key, Some(d))
            }
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

    fn int<T: std::str::FromStr>(&mut self, key: &'static str, expected: &str) -> Option<T> {
        let v = self.raw(key)?;
        let r = v.trim().parse::<T>().ok();
        if r.is_none() {
            self.fail(key, v, expected);
        }
        self.seen(key, r)
    }

    fn protocol(&mut self, key: &'static str) -> Option<LbProtocol> {
        let v = self.string(key)?;
        let p = LbProtocol::parse(&v);
        if p.is_none() {
            self.fail(key, &v, "tcp, http or https (any case)");
        }
        p
    }

    /// A host name (reverse DNS, health-check domain): the API refuses anything else, and only
    /// after the load balancer exists.
    fn host_name(&mut self, key: &'static str) -> Option<String> {
        let v = self.string(key)?;
        if is_dns_name(&v) {
            Some(v)
        } else {
            self.fail(key, &v, HOST_NAME_EXPECTED);
            None
        }
    }

    fn csv(&mut self, key: &'static str) -> Vec<String> {
        let v: Vec<String> = self
            .raw(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !v.is_empty() {
            self.record(key, Source::Annotation);
        }
        v
    }

    /// Annotation (even an empty one, which means "none") over env default.
    fn string_or_default(&mut self, key: &'static str, default: &Option<String>) -> Option<String> {
        match self.raw(key) {
            Some(v) => {
                self.record(key, Source::Annotation);
                trimmed(Some(v))
            }
            None => self.or_env(key, None, default.clone()),
        }
    }
}

/// Env health-check defaults count only when non-zero (HCCM: `cfg.HealthCheckInterval != 0`).
fn nonzero_duration(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero())
}

impl LbSpec {
    /// Parses all annotations of `svc` over `defaults`. Every invalid annotation is reported (the first
    /// as the error, the rest appended to its message) naming the key, the value and what is accepted.
    pub fn parse(svc: &ServiceRef, defaults: &LbDefaults) -> Result<Self, CloudError> {
        let mut spec = Self::parse_for(svc, defaults, None)?;
        for port in scoped_ports(svc)? {
            spec.ports
                .insert(port, Self::parse_for(svc, defaults, Some(port))?);
        }
        Ok(spec)
    }

    /// The spec of `port` (its port-scoped annotations over the Service-wide ones), or of the
    /// whole Service.
    pub fn for_port(&self, port: u16) -> &LbSpec {
        self.ports.get(&port).unwrap_or(self)
    }

    fn parse_for(
        svc: &ServiceRef,
        defaults: &LbDefaults,
        port: Option<u16>,
    ) -> Result<Self, CloudError> {
        let mut r = Reader {
            ann: &svc.annotations,
            errors: Vec::new(),
            provenance: Provenance::default(),
            port,
        };
        let mut s = LbSpec::default();
        parse_identity(&mut r, &mut s, &svc.uid, defaults);
        parse_forwarding(&mut r, &mut s, defaults);
        parse_network(&mut r, &mut s, defaults);
        s.http = parse_http(&mut r, &svc.uid);
        s.health_check = parse_health_check(&mut r, defaults, svc);
        check_https_certificates(&mut r, &s);
        s.provenance = r.provenance;
        into_result(s, r.errors)
    }

    /// Where the value of annotation `key` came from.
    pub fn source(&self, key: &str) -> Source {
        self.provenance.of(key)
    }

    /// What a message about the value of annotation `key` names: the annotation if it set the
    /// value, else the env variable that sets its default (the one to change then).
    pub fn set_by(&self, key: &str) -> String {
        match (self.source(key), env_var(key)) {
            (Source::Annotation, _) | (_, None) => format!("annotation {key}"),
            (_, Some(env)) => env.to_string(),
        }
    }

    /// Whether the type was set (by annotation or env). Only then is it enforced on an existing
    /// load balancer: HCCM does not downgrade when the annotation is removed.
    pub fn type_explicit(&self) -> bool {
        self.source(a::TYPE) != Source::Default
    }

    /// Where a new load balancer goes, plus a warning when a network zone is ignored: HCCM's
    /// `Create` keeps the location and drops the zone when both are set (annotations or env).
    pub fn placement(&self) -> Result<(Placement, Option<Warning>), CloudError> {
        match (&self.location, &self.network_zone) {
            (Some(l), Some(z)) => Ok((
                Placement::Location(l.clone()),
                Some(Warning::new(
                    "NetworkZoneIgnored",
                    format!(
                        "both location {l:?} and network zone {z:?} are set; the load balancer is \
                         created in location {l} and {} is ignored (set {} to \"\" to use the zone)",
                        a::NETWORK_ZONE,
                        a::LOCATION
                    ),
                )),
            )),
            (Some(l), None) => Ok((Placement::Location(l.clone()), None)),
            (None, Some(z)) => Ok((Placement::NetworkZone(z.clone()), None)),
            (None, None) => Err(CloudError::invalid_input(
                format!("annotation {} / {}", a::LOCATION, a::NETWORK_ZONE),
                "",
                "a location (e.g. fsn1) or a network zone (e.g. eu-central), by annotation or \
                 HCLOUD_LOAD_BALANCERS_LOCATION / HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
            )),
        }
    }

    /// Private-IP targets are reached over the controller's network (`HCLOUD_NETWORK`); without
    /// one they cannot be served.
    pub fn check_network(&self, has_network: bool) -> Result<(), CloudError> {
        if self.use_private_ip && !has_network {
            return Err(CloudError::invalid_input(
                self.set_by(a::USE_PRIVATE_IP),
                "true",
                "false unless the controller runs with HCLOUD_NETWORK set",
            ));
        }
        Ok(())
    }

    /// Without a network there is nothing to take a private IP from. HCCM ignores these
    /// annotations silently, and Services it served with them must keep working after a switch,
    /// so they are ignored here too, but not silently. Env defaults are not the Service's doing
    /// and are not warned about.
    pub fn ignored_without_network(&self) -> Vec<Warning> {
        let ip = self.private_ipv4.map(|ip| ip.to_string());
        let range = self
            .private_subnet_ip_range
            .clone()
            .filter(|_| self.source(a::PRIVATE_SUBNET_IP_RANGE) == Source::Annotation);
        [(a::PRIVATE_IPV4, ip), (a::PRIVATE_SUBNET_IP_RANGE, range)]
            .into_iter()
            .filter_map(|(key, v)| {
                let v = v?;
                Some(Warning::new(
                    "PrivateNetworkIgnored",
                    format!(
                        "annotation {key}={v:?} is ignored: the controller runs without \
                         HCLOUD_NETWORK, so the load balancer has no private network"
                    ),
                ))
            })
            .collect()
    }
}

/// The ports that have port-scoped annotations. One for a key that cannot be set per port, or
/// for a port the Service does not have, is refused (it would silently do nothing).
fn scoped_ports(svc: &ServiceRef) -> Result<BTreeSet<u16>, CloudError> {
    let mut ports = BTreeSet::new();
    for key in svc.annotations.keys() {
        let Some((base, port)) = a::split_port(key) else {
            continue;
        };
        if !a::PER_PORT.contains(&base) {
            let settable: Vec<&str> = a::PER_PORT
                .iter()
                .map(|k| k.trim_start_matches(a::PREFIX))
                .collect();
            return Err(CloudError::invalid_input(
                format!("annotation {key}"),
                &svc.annotations[key],
                format!(
                    "no port suffix: only these can be set for one port: {}",
                    settable.join(", ")
                ),
            ));
        }
        match port.parse::<u16>() {
            Ok(p) if svc.ports.iter().any(|sp| sp.port == p) => {
                ports.insert(p);
            }
            _ => {
                let have: Vec<String> = svc.ports.iter().map(|p| p.port.to_string()).collect();
                return Err(CloudError::invalid_input(
                    format!("annotation {key}"),
                    &svc.annotations[key],
                    format!(
                        "a port suffix that is one of the Service's ports ({})",
                        have.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(ports)
}

/// Name, type, placement and algorithm.
fn parse_identity(r: &mut Reader<'_>, s: &mut LbSpec, uid: &str, defaults: &LbDefaults) {
    let name = r.string(a::NAME);
    s.name_annotated = name.is_some();
    s.name = name.unwrap_or_else(|| default_name(uid));
    if s.name.len() > 63 {
        let n = s.name.clone();
        r.fail(a::NAME, &n, "a name of at most 63 characters");
    }
    s.shared = r.bool(a::SHARED).unwrap_or(false);
    if s.shared && !s.name_annotated {
        let raw = r.raw(a::SHARED).unwrap_or_default();
        r.fail(
            a::SHARED,
            raw,
            format!(
                "{} set as well: a shared load balancer is the one with that name",
                a::NAME
            ),
        );
    }
    let lb_type = r.string(a::TYPE);
    s.lb_type = r.or_env(a::TYPE, lb_type, defaults.lb_type.clone());
    s.location = r.string_or_default(a::LOCATION, &defaults.location);
    s.network_zone = r.string_or_default(a::NETWORK_ZONE, &defaults.network_zone);

    let algorithm = r.string(a::ALGORITHM_TYPE);
    if let Some(v) = r.or_env(a::ALGORITHM_TYPE, algorithm, defaults.algorithm.clone()) {
        s.algorithm = LbAlgorithm::parse(&v);
        if s.algorithm.is_none() {
            let raw = r
                .raw(a::ALGORITHM_TYPE)
                .map_or_else(|| v.to_ascii_lowercase(), str::to_string);
            r.fail(
                a::ALGORITHM_TYPE,
                &raw,
                "round_robin or least_connections (any case)",
            );
        }
    }
}

/// Protocol, PROXY protocol and the status-related switches.
fn parse_forwarding(r: &mut Reader<'_>, s: &mut LbSpec, defaults: &LbDefaults) {
    s.protocol = r.protocol(a::PROTOCOL).unwrap_or_default();
    let proxy = r.bool(a::USES_PROXYPROTOCOL);
    s.proxy_protocol = r.or_env(a::USES_PROXYPROTOCOL, proxy, defaults.uses_proxyprotocol);
    let ipv6 = r.bool(a::IPV6_DISABLED);
    s.ipv6_disabled = r.or_env_flag(a::IPV6_DISABLED, ipv6, defaults.disable_ipv6);
    let public = r.bool(a::DISABLE_PUBLIC_NETWORK);
    s.disable_public_network = r.or_env(
        a::DISABLE_PUBLIC_NETWORK,
        public,
        defaults.disable_public_network,
    );
    let private = r.bool(a::DISABLE_PRIVATE_INGRESS);
    s.disable_private_ingress = r.or_env_flag(
        a::DISABLE_PRIVATE_INGRESS,
        private,
        defaults.disable_private_ingress,
    );
    // The apiserver only takes a lowercase DNS-1123 subdomain as `ingress[].hostname`; anything
    // else would be found out by the status write, after the load balancer was created.
    s.hostname = r.string(a::HOSTNAME);
    if let Some(h) = s.hostname.clone()
        && !is_dns1123_subdomain(&h)
    {
        r.fail(
            a::HOSTNAME,
            &h,
            "a lowercase DNS name such as lb.example.com (letters, digits, '-' and '.'; not an IP \
             address)",
        );
        s.hostname = None;
    }
    s.ipv4_rdns = r.host_name(a::IPV4_RDNS);
    s.ipv6_rdns = r.host_name(a::IPV6_RDNS);
}

/// Private network, target selection.
fn parse_network(r: &mut Reader<'_>, s: &mut LbSpec, defaults: &LbDefaults) {
    let private_ip = r.bool(a::USE_PRIVATE_IP);
    s.use_private_ip = r.or_env_flag(a::USE_PRIVATE_IP, private_ip, defaults.use_private_ip);
    if let Some(ip) = r.string(a::PRIVATE_IPV4) {
        match ip.parse::<Ipv4Addr>() {
            Ok(v) => s.private_ipv4 = Some(v),
            Err(_) => r.fail(a::PRIVATE_IPV4, &ip, "an IPv4 address"),
        }
    }
    let range = r.string(a::PRIVATE_SUBNET_IP_RANGE);
    s.private_subnet_ip_range = r.or_env(
        a::PRIVATE_SUBNET_IP_RANGE,
        range,
        defaults.private_subnet_ip_range.clone(),
    );
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
    let selector = r.string(a::NODE_SELECTOR);
    if let Some(sel) = &selector {
        match LabelSelector::parse(&format!("annotation {}", a::NODE_SELECTOR), sel) {
            Ok(x) => s.node_selector = Some(x),
            Err(e) => r.errors.push(e),
        }
    }
    s.target_selection = target_selection(selector.as_deref(), s.use_private_ip);
}

/// The fingerprint of a target selection: the selector's requirements in order, so that
/// `a=1,b=2` and `b=2, a=1` agree, and whether targets are reached by private IP.
fn target_selection(selector: Option<&str>, use_private_ip: bool) -> String {
    let mut parts: Vec<&str> = selector
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    parts.sort_unstable();
    fingerprint(&format!("{}|private={use_private_ip}", parts.join(",")))
}

fn parse_http(r: &mut Reader<'_>, uid: &str) -> HttpSpec {
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

fn parse_health_check(
    r: &mut Reader<'_>,
    defaults: &LbDefaults,
    svc: &ServiceRef,
) -> HealthCheckSpec {
    let mut hc = HealthCheckSpec {
        protocol: r.protocol(a::HEALTH_CHECK_PROTOCOL),
        ..Default::default()
    };
    let kube_proxy = r.bool(a::HEALTH_CHECK_KUBE_PROXY);
    // Unreachable everywhere: the NodePort check, as without the option (the controller says so).
    if r.or_env_flag(
        a::HEALTH_CHECK_KUBE_PROXY,
        kube_proxy,
        defaults.health_check_kube_proxy,
    ) && !svc.kube_proxy_unreachable
    {
        hc.kube_proxy_port = match svc.traffic_policy {
            TrafficPolicy::Cluster => Some(KUBE_PROXY_HEALTHZ_PORT),
            // Not allocated yet: the NodePort check until it is (the Service changes then).
            TrafficPolicy::Local {
                health_check_node_port,
            } => health_check_node_port.filter(|p| *p > 0),
        };
    }
    hc.port = r
        .int::<u16>(a::HEALTH_CHECK_PORT, "a port number 1-65535")
        .filter(|p| *p > 0);
    if r.raw(a::HEALTH_CHECK_PORT).is_some_and(|p| p.trim() == "0") {
        r.fail(a::HEALTH_CHECK_PORT, "0", "a port number 1-65535");
    }
    let interval = r.duration(a::HEALTH_CHECK_INTERVAL, Duration::from_secs(1), None);
    hc.interval = r.or_env(
        a::HEALTH_CHECK_INTERVAL,
        interval,
        nonzero_duration(defaults.health_check_interval),
    );
    let timeout = r.duration(a::HEALTH_CHECK_TIMEOUT, Duration::from_secs(1), None);
    hc.timeout = r.or_env(
        a::HEALTH_CHECK_TIMEOUT,
        timeout,
        nonzero_duration(defaults.health_check_timeout),
    );
    let retries = r.int::<u32>(a::HEALTH_CHECK_RETRIES, "a non-negative integer");
    hc.retries = r.or_env(
        a::HEALTH_CHECK_RETRIES,
        retries,
        defaults.health_check_retries.filter(|n| *n != 0),
    );
    hc.custom = hc.protocol.is_some()
        || hc.kube_proxy_port.is_some()
        || hc.port.is_some()
        || hc.interval.is_some()
        || hc.timeout.is_some()
        || hc.retries.is_some();
    hc.http_domain = r.host_name(a::HEALTH_CHECK_HTTP_DOMAIN);
    hc.http_path = r.string(a::HEALTH_CHECK_HTTP_PATH);
    if let Some(p) = hc.http_path.clone()
        && (!p.starts_with('/') || p.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        r.fail(
            a::HEALTH_CHECK_HTTP_PATH,
            &p,
            "an absolute HTTP path without spaces, such as /healthz",
        );
        hc.http_path = None;
    }
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
    hc
}

/// An https service needs a certificate; caught here rather than by the API after the load
/// balancer already exists.
fn check_https_certificates(r: &mut Reader<'_>, s: &LbSpec) {
    if s.protocol == LbProtocol::Https
        && s.http.certificate_type == CertificateType::Uploaded
        && s.http.certificates.is_empty()
    {
        // https set for one port asks for that port's certificates (or the Service's).
        let (protocol, certificates) = match (r.port, r.scoped(a::PROTOCOL)) {
            (Some(port), Some(protocol)) => (protocol, a::for_port(a::HTTP_CERTIFICATES, port)),
            _ => (a::PROTOCOL.to_string(), a::HTTP_CERTIFICATES.to_string()),
        };
        r.errors.push(CloudError::invalid_input(
            format!("annotation {certificates}"),
            "",
            format!(
                "at least one certificate id or name when {protocol}=https (or {}=managed with {})",
                a::CERTIFICATE_TYPE,
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS
            ),
        ));
    }
}

/// The first error, with the others appended to its message.
fn into_result(s: LbSpec, errors: Vec<CloudError>) -> Result<LbSpec, CloudError> {
    let mut errors = errors.into_iter();
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

/// What [`is_dns_name`] accepts.
const HOST_NAME_EXPECTED: &str =
    "a host name such as lb.example.com (letters, digits, '-' and '.', labels of at most 63)";

/// RFC 1123 host name: dot-separated labels of ASCII letters, digits and `-` (not first or last),
/// 1-63 characters each, at most 253 in all; one trailing dot is allowed.
fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Kubernetes' DNS-1123 subdomain (lowercase, no trailing dot), and not an IP address: what the
/// apiserver accepts as a load balancer ingress hostname.
fn is_dns1123_subdomain(s: &str) -> bool {
    is_dns_name(s)
        && !s.ends_with('.')
        && !s.bytes().any(|b| b.is_ascii_uppercase())
        && s.parse::<std::net::IpAddr>().is_err()
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
            ..Default::default()
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
            (a::HEALTH_CHECK_KUBE_PROXY, "true"),
            (a::HTTP_STATUS_CODES, "2??,301"),
            (a::IPV4, "1.2.3.4"),
            (a::IPV6, "::1"),
            (a::ID, "77"),
        ])
        .unwrap();
        assert_eq!(s.name, "my-lb");
        assert_eq!(s.lb_type.as_deref(), Some("lb21"));
        assert_eq!(s.location.as_deref(), Some("fsn1"));
        assert_eq!(
            s.algorithm.map(LbAlgorithm::as_str),
            Some("least_connections")
        );
        assert_eq!(s.protocol, LbProtocol::Https);
        assert!(s.name_annotated);
        assert_eq!(s.proxy_protocol, Some(true));
        assert!(s.ipv6_disabled && s.disable_private_ingress && s.use_private_ip);
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
        bad(a::HOSTNAME, "Not_A_Host");
        bad(a::HOSTNAME, "10.0.0.1");
        bad(a::IPV4_RDNS, "bad rdns!");
        bad(a::IPV6_RDNS, "-lead.example.com");
        bad(a::HEALTH_CHECK_HTTP_DOMAIN, "exa mple.com");
        bad(a::HEALTH_CHECK_HTTP_PATH, "healthz");
        bad(a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "bad_domain");
    }

    #[test]
    fn host_names() {
        for ok in ["example.com", "a-b.c", "x", "Example.COM.", "*.example.com"] {
            assert!(is_dns_name(ok.strip_prefix("*.").unwrap_or(ok)), "{ok}");
        }
        for bad in ["", "a..b", "-a.b", "a-.b", "a_b", "a b", &"x".repeat(64)] {
            assert!(!is_dns_name(bad), "{bad}");
        }
        assert!(is_dns1123_subdomain("lb.example.com"));
        assert!(!is_dns1123_subdomain("LB.example.com"));
        assert!(!is_dns1123_subdomain("1.2.3.4"));
        // Wildcards are fine for managed certificates.
        assert!(
            parse(&[
                (a::CERTIFICATE_TYPE, "managed"),
                (
                    a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                    "*.example.com,example.com"
                ),
            ])
            .is_ok()
        );
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
        assert!(s.use_private_ip);
        assert_eq!(s.proxy_protocol, Some(true));
        assert_eq!(s.health_check.interval, Some(Duration::from_secs(5)));
        // An env health-check default switches the custom block on, as in HCCM.
        assert!(s.health_check.custom);
        let s = LbSpec::parse(&svc(&[(a::USE_PRIVATE_IP, "false")]), &d).unwrap();
        assert!(!s.use_private_ip);
        // An empty location annotation resets the env default.
        let s = LbSpec::parse(&svc(&[(a::LOCATION, "")]), &d).unwrap();
        assert_eq!(s.location, None);
    }

    #[test]
    fn location_wins_over_network_zone_with_a_warning() {
        // HCCM's Create keeps the location and drops the zone; this used to be an error here.
        let s = parse(&[(a::LOCATION, "fsn1"), (a::NETWORK_ZONE, "eu-central")]).unwrap();
        let (p, w) = s.placement().unwrap();
        assert_eq!(p, Placement::Location("fsn1".into()));
        let w = w.unwrap();
        assert_eq!(w.reason, "NetworkZoneIgnored");
        assert!(w.message.contains("eu-central"), "{}", w.message);
        // Also across sources: env location, zone annotation (an empty location annotation is
        // how HCCM users pick the zone then).
        let env = LbDefaults {
            location: Some("nbg1".into()),
            ..Default::default()
        };
        let zone = LbSpec::parse(&svc(&[(a::NETWORK_ZONE, "eu-central")]), &env).unwrap();
        assert_eq!(
            zone.placement().unwrap().0,
            Placement::Location("nbg1".into())
        );
        let cleared = LbSpec::parse(
            &svc(&[(a::NETWORK_ZONE, "eu-central"), (a::LOCATION, "")]),
            &env,
        )
        .unwrap();
        assert_eq!(
            cleared.placement().unwrap(),
            (Placement::NetworkZone("eu-central".into()), None)
        );
        let nowhere = parse(&[]).unwrap().placement().unwrap_err().to_string();
        assert!(nowhere.contains(a::LOCATION) && nowhere.contains(a::NETWORK_ZONE));
    }

    #[test]
    fn protocols_and_algorithm_accept_any_case() {
        let s = parse(&[
            (a::PROTOCOL, "HTTP"),
            (a::HEALTH_CHECK_PROTOCOL, "Tcp"),
            (a::ALGORITHM_TYPE, "Round_Robin"),
        ])
        .unwrap();
        assert_eq!(s.protocol, LbProtocol::Http);
        assert_eq!(s.health_check.protocol, Some(LbProtocol::Tcp));
        assert_eq!(s.algorithm.map(LbAlgorithm::as_str), Some("round_robin"));
        // HCCM compares certificate-type exactly; a capitalised one is refused, not guessed.
        bad(a::CERTIFICATE_TYPE, "Managed");
    }

    #[test]
    fn empty_annotations_mean_unset() {
        let env = LbDefaults {
            lb_type: Some("lb21".into()),
            algorithm: Some("least_connections".into()),
            ..Default::default()
        };
        let keys = [
            a::NAME,
            a::TYPE,
            a::ALGORITHM_TYPE,
            a::PROTOCOL,
            a::HOSTNAME,
            a::NODE_SELECTOR,
            a::PRIVATE_IPV4,
            a::IPV4_RDNS,
            a::CERTIFICATE_TYPE,
            a::HEALTH_CHECK_PROTOCOL,
            a::HEALTH_CHECK_HTTP_PATH,
            a::HTTP_COOKIE_NAME,
        ];
        let empty: Vec<(&str, &str)> = keys.iter().map(|k| (*k, " ")).collect();
        let s = LbSpec::parse(&svc(&empty), &env).unwrap();
        let unset = LbSpec::parse(&svc(&[]), &env).unwrap();
        assert_eq!(s, unset);
        assert_eq!(s.lb_type.as_deref(), Some("lb21"));
        assert!(!s.name_annotated);
        assert_eq!(parse(&[(a::TYPE, "")]).unwrap().lb_type, None);
    }

    #[test]
    fn https_needs_a_certificate() {
        let e = parse(&[(a::PROTOCOL, "https")]).unwrap_err().to_string();
        assert!(
            e.contains(a::HTTP_CERTIFICATES) && e.contains("https"),
            "{e}"
        );
        assert!(parse(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "7")]).is_ok());
        assert!(
            parse(&[
                (a::PROTOCOL, "https"),
                (a::CERTIFICATE_TYPE, "managed"),
                (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "example.com"),
            ])
            .is_ok()
        );
    }

    #[test]
    fn provenance_says_where_each_value_came_from() {
        let env = LbDefaults {
            lb_type: Some("lb21".into()),
            location: Some("nbg1".into()),
            use_private_ip: true,
            ..Default::default()
        };
        let s = LbSpec::parse(
            &svc(&[(a::LOCATION, "fsn1"), (a::USE_PRIVATE_IP, "false")]),
            &env,
        )
        .unwrap();
        assert_eq!(s.source(a::LOCATION), Source::Annotation);
        assert_eq!(s.source(a::USE_PRIVATE_IP), Source::Annotation);
        assert_eq!(s.source(a::TYPE), Source::Env);
        assert_eq!(s.source(a::NETWORK_ZONE), Source::Default);
        assert_eq!(s.set_by(a::LOCATION), format!("annotation {}", a::LOCATION));
        assert_eq!(s.set_by(a::TYPE), "HCLOUD_LOAD_BALANCERS_TYPE");
        // A built-in default is named by the variable that would change it.
        assert_eq!(
            s.set_by(a::NETWORK_ZONE),
            "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE"
        );
        assert!(s.type_explicit());
        assert!(!parse(&[]).unwrap().type_explicit());
        assert!(parse(&[(a::TYPE, "lb11")]).unwrap().type_explicit());
    }

    #[test]
    fn known_annotation_list_is_complete() {
        assert_eq!(a::ALL.len(), 41);
        assert!(a::ALL.iter().all(|k| k.starts_with(a::PREFIX)));
    }

    fn with_ports(pairs: &[(&str, &str)], ports: &[u16]) -> Result<LbSpec, CloudError> {
        let mut s = svc(pairs);
        s.ports = ports
            .iter()
            .map(|p| crate::provider::ServicePort {
                name: None,
                protocol: crate::provider::PortProtocol::Tcp,
                port: *p,
                node_port: 30_000 + p % 1000,
            })
            .collect();
        LbSpec::parse(&s, &LbDefaults::default())
    }

    #[test]
    fn a_port_scoped_annotation_wins_for_its_port_only() {
        let https = a::for_port(a::PROTOCOL, 443);
        let certs = a::for_port(a::HTTP_CERTIFICATES, 443);
        let proxy = a::for_port(a::USES_PROXYPROTOCOL, 80);
        let s = with_ports(
            &[
                (a::PROTOCOL, "http"),
                (&https, "https"),
                (&certs, "web-cert"),
                (a::USES_PROXYPROTOCOL, "false"),
                (&proxy, "true"),
            ],
            &[80, 443, 8080],
        )
        .unwrap();
        assert_eq!(s.protocol, LbProtocol::Http);
        assert_eq!(s.for_port(8080).protocol, LbProtocol::Http);
        assert_eq!(s.for_port(443).protocol, LbProtocol::Https);
        assert_eq!(s.for_port(443).http.certificates, ["web-cert"]);
        assert_eq!(s.for_port(443).proxy_protocol, Some(false));
        assert_eq!(s.for_port(80).proxy_protocol, Some(true));
        assert_eq!(s.for_port(80).protocol, LbProtocol::Http);
        assert_eq!(s.ports.keys().copied().collect::<Vec<_>>(), [80, 443]);
    }

    #[test]
    fn port_scoped_mistakes_name_the_scoped_annotation() {
        let bad = a::for_port(a::HEALTH_CHECK_INTERVAL, 443);
        let e = with_ports(&[(&bad, "soon")], &[443])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("invalid value \"soon\" for annotation {bad}:")),
            "{e}"
        );
        // https on one port needs certificates for that port.
        let https = a::for_port(a::PROTOCOL, 443);
        let e = with_ports(&[(&https, "https")], &[80, 443])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("annotation {}.443", a::HTTP_CERTIFICATES)),
            "{e}"
        );
        // A port the Service does not have, or a key that is per load balancer.
        let e = with_ports(&[(&a::for_port(a::PROTOCOL, 8443), "http")], &[80])
            .unwrap_err()
            .to_string();
        assert!(e.contains("one of the Service's ports (80)"), "{e}");
        let e = with_ports(&[(&a::for_port(a::TYPE, 80), "lb21")], &[80])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("only these can be set for one port: protocol,"),
            "{e}"
        );
    }
}
