//! Every `load-balancer.hetzner.cloud/*` Service annotation of HCCM v1.35, plus the ones we add
//! in its style (marked "Ours"); what each accepts and does is in `annotation_reference.rs`, from
//! which docs/annotations.md is rendered.

/// Common prefix of all annotations.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

macro_rules! annotations {
    ($($(#[$m:meta])* $ident:ident = $suffix:literal;)*) => {
        $( $(#[$m])* pub const $ident: &str = concat!("load-balancer.hetzner.cloud/", $suffix); )*
        /// All known keys (including the read-only ones we never write).
        pub const ALL: &[&str] = &[$($ident),*];
    };
}

annotations! {
    /// LB name; default `a` + UID without dashes, truncated to 32.
    NAME = "name";
    /// LB type, e.g. `lb11` (env `HCLOUD_LOAD_BALANCERS_TYPE`).
    TYPE = "type";
    /// Create-only; wins over network-zone when both are set (HCCM), with a warning.
    LOCATION = "location";
    /// Create-only; ignored (with a warning) when a location is set too.
    NETWORK_ZONE = "network-zone";
    /// `round_robin` | `least_connections`, any case.
    ALGORITHM_TYPE = "algorithm-type";
    /// `tcp` | `http` | `https` (any case), for all ports.
    PROTOCOL = "protocol";
    USES_PROXYPROTOCOL = "uses-proxyprotocol";
    IPV6_DISABLED = "ipv6-disabled";
    DISABLE_PUBLIC_NETWORK = "disable-public-network";
    DISABLE_PRIVATE_INGRESS = "disable-private-ingress";
    USE_PRIVATE_IP = "use-private-ip";
    PRIVATE_IPV4 = "private-ipv4";
    PRIVATE_SUBNET_IP_RANGE = "private-subnet-ip-range";
    HOSTNAME = "hostname";
    NODE_SELECTOR = "node-selector";
    IPV4_RDNS = "ipv4-rdns";
    IPV6_RDNS = "ipv6-rdns";
    HTTP_COOKIE_NAME = "http-cookie-name";
    HTTP_COOKIE_LIFETIME = "http-cookie-lifetime";
    HTTP_TIMEOUT_IDLE = "http-timeout-idle";
    HTTP_STICKY_SESSIONS = "http-sticky-sessions";
    HTTP_REDIRECT_HTTP = "http-redirect-http";
    CERTIFICATE_TYPE = "certificate-type";
    HTTP_CERTIFICATES = "http-certificates";
    HTTP_MANAGED_CERTIFICATE_NAME = "http-managed-certificate-name";
    HTTP_MANAGED_CERTIFICATE_DOMAINS = "http-managed-certificate-domains";
    HTTP_MANAGED_CERTIFICATE_ACME_STAGING = "http-managed-certificate-acme-staging";
    HEALTH_CHECK_PROTOCOL = "health-check-protocol";
    HEALTH_CHECK_PORT = "health-check-port";
    HEALTH_CHECK_INTERVAL = "health-check-interval";
    HEALTH_CHECK_TIMEOUT = "health-check-timeout";
    HEALTH_CHECK_RETRIES = "health-check-retries";
    HEALTH_CHECK_HTTP_DOMAIN = "health-check-http-domain";
    HEALTH_CHECK_HTTP_PATH = "health-check-http-path";
    HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE = "health-check-http-validate-certificate";
    /// Health-check expected status codes (the key has no `health-check-` prefix in HCCM).
    HTTP_STATUS_CODES = "http-status-codes";
    /// Ours: health-check where kube-proxy says whether the node can serve (env
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY`): `GET /healthz` on the Service's
    /// `healthCheckNodePort` for `externalTrafficPolicy: Local`, on kube-proxy's port 10256 otherwise.
    HEALTH_CHECK_KUBE_PROXY = "health-check-kube-proxy";
    /// Ours (syself's fork's key): `ipv4` | `ipv6` | `dualstack`, which addresses of a dedicated
    /// server are targets (env `HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY`; default: the
    /// Service's `ipFamilies`).
    ROBOT_TARGET_ADDRESS_FAMILY = "robot-target-address-family";
    /// Ours: with `externalTrafficPolicy: Local`, the targets are only the nodes running a
    /// serving endpoint of the Service (from its EndpointSlices), not every eligible node (env
    /// `HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS`).
    TARGET_NODES_WITH_ENDPOINTS = "target-nodes-with-endpoints";
    /// Ours: `true` shares the load balancer named by the `name` annotation with every other
    /// Service that shares it by the same name; each Service owns its own listen ports on it.
    SHARED = "shared";
    /// Ours: `true` gives the Service one load balancer per network zone that has eligible nodes,
    /// each targeting its own zone's nodes (env `HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE`).
    ONE_PER_NETWORK_ZONE = "one-per-network-zone";
    /// Read-only in HCCM, never written or read.
    IPV4 = "ipv4";
    /// Read-only in HCCM, never written or read.
    IPV6 = "ipv6";
    /// Reserved by HCCM, never written or read.
    ID = "id";
}

/// What may be set for one port by suffixing the annotation with `.<port>` (the Service port,
/// which is the listen port): `protocol.443: https`. The Service-wide annotation is the default
/// of every port that has no port-scoped one.
pub const PER_PORT: &[&str] = &[
    PROTOCOL,
    USES_PROXYPROTOCOL,
    HTTP_CERTIFICATES,
    HTTP_REDIRECT_HTTP,
    HTTP_STICKY_SESSIONS,
    HTTP_COOKIE_NAME,
    HTTP_COOKIE_LIFETIME,
    HTTP_TIMEOUT_IDLE,
    HEALTH_CHECK_PROTOCOL,
    HEALTH_CHECK_PORT,
    HEALTH_CHECK_INTERVAL,
    HEALTH_CHECK_TIMEOUT,
    HEALTH_CHECK_RETRIES,
    HEALTH_CHECK_HTTP_DOMAIN,
    HEALTH_CHECK_HTTP_PATH,
    HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
    HTTP_STATUS_CODES,
    HEALTH_CHECK_KUBE_PROXY,
];

/// `key.port`, the port-scoped form of a [`PER_PORT`] annotation.
pub fn for_port(key: &str, port: u16) -> String {
    format!("{key}.{port}")
}

/// A port-scoped key split into its annotation and port: `("…/protocol", 443)`. Any key of ours
/// that ends in `.<digits>` is meant as one, known or not.
pub fn split_port(key: &str) -> Option<(&str, &str)> {
    let (base, port) = key.strip_prefix(PREFIX).and(key.rsplit_once('.'))?;
    (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && base.len() > PREFIX.len())
        .then_some((base, port))
}

/// Whether the Service says `shared: "true"` (for a delete, which reads no other annotation).
pub fn is_shared(svc: &crate::capabilities::ServiceRef) -> bool {
    svc.annotations
        .get(SHARED)
        .and_then(|v| crate::values::parse_bool(v.trim()))
        .unwrap_or(false)
}
