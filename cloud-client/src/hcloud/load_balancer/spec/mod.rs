//! Annotations + `HCLOUD_LOAD_BALANCERS_*` defaults → one typed, validated [`LbSpec`].
//! Parsing happens before any cloud call, so bad input never leaves a half-built load balancer.
//!
//! Here: the spec's types, identity (name, type, location) and forwarding (protocol, algorithm,
//! PROXY protocol). By concern: [`reader`] (values and where each came from), [`values`] (the
//! protocol, algorithm and placement), [`network`],
//! [`http`] and [`health_check`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::annotations as a;
use crate::capabilities::{
    ServiceRef, TrafficPolicy, Warning, default_load_balancer_name as default_name,
};
use crate::error::CloudError;
use crate::hcloud::config::{AddressFamily, LbDefaults};
use crate::label_selector::LabelSelector;

mod health_check;
mod http;
mod network;
mod reader;
mod values;

use health_check::parse_health_check;
pub use health_check::{HealthCheckSpec, KUBE_PROXY_HEALTHZ_PATH, KUBE_PROXY_HEALTHZ_PORT};
use http::parse_http;
pub use http::{CertificateType, HttpSpec};
use network::parse_network;
use reader::*;
pub use reader::{Provenance, Source};
pub use values::{LbAlgorithm, LbProtocol, Placement};

pub use a::env_var;

/// Why a Hetzner load balancer cannot honour `loadBalancerSourceRanges`, and what a user can do.
pub const SOURCE_RANGES_UNENFORCED: &str = "Hetzner load balancers cannot filter by source \
     address, and Hetzner firewalls do not apply to them, so the Service is reachable from every \
     address. A NetworkPolicy or a firewall on the nodes sees only the load balancer's address; \
     with annotation load-balancer.hetzner.cloud/uses-proxyprotocol the pods learn each client's \
     address, so the application or its proxy (e.g. an ingress controller's allow-list) can \
     refuse it";

impl LbSpec {
    /// The port the health checks ask kube-proxy on, if they do: as if kube-proxy answered, so
    /// the answer does not depend on the probe's own verdict.
    pub fn kube_proxy_health_port(&self) -> Option<u16> {
        let asks_kube_proxy = |s: &LbSpec| {
            let hc = &s.health_check;
            hc.kube_proxy_port.filter(|_| hc.port.is_none())
        };
        asks_kube_proxy(self).or_else(|| self.ports.values().find_map(asks_kube_proxy))
    }

    /// The spec as the load balancer gets it when kube-proxy answered on no node the controller
    /// probed ([`ServiceRef::kube_proxy_unreachable`]): every check on the NodePort.
    pub fn without_kube_proxy_checks(&self) -> LbSpec {
        let mut spec = self.clone();
        spec.health_check.without_kube_proxy();
        for port in spec.ports.values_mut() {
            port.health_check.without_kube_proxy();
        }
        spec
    }
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
    /// Annotation `one-per-network-zone` (or its env default): besides this load balancer, one
    /// more in each other network zone that has eligible nodes (see `load_balancer::per_zone`).
    pub one_per_zone: bool,
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
    /// Which addresses of a dedicated server are targets; `None`: the Service's `ipFamilies`.
    pub robot_target_family: Option<AddressFamily>,
    /// Annotation `target-nodes-with-endpoints` (or its env default): see
    /// [`LbSpec::targets_nodes_with_endpoints`] for when it applies.
    pub target_nodes_with_endpoints: bool,
    pub ipv4_rdns: Option<String>,
    pub ipv6_rdns: Option<String>,
    pub http: HttpSpec,
    pub health_check: HealthCheckSpec,
    pub provenance: Provenance,
    /// Ports with port-scoped annotations (`protocol.443`), each the whole spec as that port
    /// sees it: its own values over the Service-wide ones.
    pub ports: BTreeMap<u16, LbSpec>,
}

/// The load balancer's name: the `name` annotation, else [`default_name`]. Unlike
/// [`LbSpec::parse`] it cannot fail, since the controller asks for the name of Services whose
/// other annotations are invalid too.
pub fn name(svc: &ServiceRef) -> String {
    trimmed(svc.annotations.get(a::NAME).map(String::as_str))
        .unwrap_or_else(|| default_name(&svc.uid))
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
        let network = parse_network(&mut r, defaults);
        s.use_private_ip = network.use_private_ip;
        s.private_ipv4 = network.private_ipv4;
        s.private_subnet_ip_range = network.private_subnet_ip_range;
        s.node_selector = network.node_selector;
        s.robot_target_family = network.robot_target_family;
        s.target_nodes_with_endpoints = network.target_nodes_with_endpoints;
        s.target_selection = network.target_selection;
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
        if !a::is_per_port(base) {
            let settable: Vec<&str> = a::per_port()
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
    // The env default does not apply to a shared load balancer, which is one load balancer;
    // the annotation asking for both is refused.
    let per_zone = r.bool(a::ONE_PER_NETWORK_ZONE);
    if s.shared && per_zone == Some(true) {
        let raw = r
            .raw(a::ONE_PER_NETWORK_ZONE)
            .unwrap_or_default()
            .to_string();
        r.fail(
            a::ONE_PER_NETWORK_ZONE,
            &raw,
            format!(
                "false (or unset) when {} is true: a shared load balancer is one load balancer",
                a::SHARED
            ),
        );
    }
    let env = defaults.one_per_network_zone && !s.shared;
    s.one_per_zone = r.or_env_flag(a::ONE_PER_NETWORK_ZONE, per_zone, env) && !s.shared;
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

/// The spec, or every problem found: the first as the error, the others appended to its
/// message, in the order of the annotation table (as the admission policy lists them).
fn into_result(s: LbSpec, mut errors: Vec<CloudError>) -> Result<LbSpec, CloudError> {
    errors.sort_by_key(|e| match e {
        CloudError::InvalidInput { field, .. } => {
            a::position(field.strip_prefix("annotation ").unwrap_or(field))
        }
        _ => usize::MAX,
    });
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

#[cfg(test)]
mod tests;

/// An https service needs a certificate; caught here rather than by the API after the load
/// balancer already exists.
fn check_https_certificates(r: &mut Reader<'_>, s: &LbSpec) {
    if s.protocol == LbProtocol::Https
        && s.http.certificate_type == CertificateType::Uploaded
        && s.http.certificates.is_empty()
        && s.http.certificate_secret.is_none()
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

impl LbSpec {
    /// Whether the targets are only the nodes with a serving endpoint of the Service: asked for,
    /// with `externalTrafficPolicy: Local` (with `Cluster` every node forwards, so every node is a
    /// good target), and on a load balancer of its own (a shared one has one target set for
    /// Services whose endpoints run on different nodes).
    pub fn targets_nodes_with_endpoints(&self, svc: &ServiceRef) -> bool {
        self.target_nodes_with_endpoints
            && !self.shared
            && matches!(svc.traffic_policy, TrafficPolicy::Local { .. })
    }

    /// The Warning for a Service whose own annotation asks for endpoint targets where they cannot
    /// apply (an env default that does not apply is not worth a Warning on every Service).
    pub fn endpoint_targets_ignored(&self, svc: &ServiceRef) -> Option<Warning> {
        let asked = self.target_nodes_with_endpoints
            && self.source(a::TARGET_NODES_WITH_ENDPOINTS) == Source::Annotation;
        if !asked || self.targets_nodes_with_endpoints(svc) {
            return None;
        }
        let why = if self.shared {
            format!(
                "the load balancer is shared ({}): it has one target set for every Service on it",
                a::SHARED
            )
        } else {
            "the Service's externalTrafficPolicy is Cluster, where every node forwards to the \
             endpoints; set it to Local to target only the nodes that run them"
                .to_owned()
        };
        Some(Warning::new(
            ENDPOINT_TARGETS_IGNORED,
            format!(
                "annotation {} is ignored and every eligible node is a target: {why}",
                a::TARGET_NODES_WITH_ENDPOINTS
            ),
        ))
    }
}

/// Reason of the Warning for `target-nodes-with-endpoints` where it cannot apply.
pub const ENDPOINT_TARGETS_IGNORED: &str = "EndpointTargetsIgnored";
