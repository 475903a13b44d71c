//! The service-controller's bad-input catalogue ([`CASES`]) and its good-input counterpart
//! ([`ACCEPTED`], [`VALID_SERVICES`]), in one place for the two suites that use them:
//!
//! - `service-controller/tests/bad_input.rs` sends every case to the controller with no admission
//!   policy installed: the controller alone must refuse each one, with a Warning naming the field,
//!   the value and what is accepted, and write nothing;
//! - `chart-tests/tests/admission_policy.rs` sends the same Services to a real apiserver with the
//!   chart's ValidatingAdmissionPolicy: it must refuse the cases marked [`Admission::Refused`] (with
//!   the controller's message) and admit every accepted value and valid Service.
//!
//! Which cases the policy can refuse is not a matter of taste: a case is [`Admission::Refused`]
//! exactly when the controller's annotation parser (`LbSpec::parse`, which looks at nothing but the
//! Service) refuses it; the tests below hold the table to that.

use std::collections::BTreeMap;

pub use cloud_client::values::{BOOL_EXPECTED, DURATION_EXPECTED};

use cloud_client::ServiceRef;
use cloud_client::hcloud::config::LbDefaults;
use cloud_client::hcloud::load_balancer::spec::LbSpec;

/// Common prefix of the annotations; the tables below name them without it.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

/// How many annotations the parser checks on its own, by their declarations.
pub fn checked_annotations() -> usize {
    cloud_client::hcloud::load_balancer::annotations::all()
        .filter(|a| a.kind.is_checked())
        .count()
}

/// The ports of a case's Service.
#[derive(Debug, Clone, Copy)]
pub enum Ports {
    /// TCP ports.
    Tcp(&'static [i32]),
    /// One UDP port (Hetzner load balancers forward TCP only).
    Udp(i32),
}

/// Whether the chart's ValidatingAdmissionPolicy refuses a case, or only the controller can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Decided by the Service alone: refused at admission too, with the controller's message.
    Refused,
    /// Needs the cloud or the controller's configuration, so only the controller refuses it; why.
    ControllerOnly(&'static str),
}

/// One bad Service and what its `SyncLoadBalancerFailed` Warning must contain.
#[derive(Debug)]
pub struct Case {
    /// The Service's name.
    pub name: &'static str,
    /// Annotations, without the `load-balancer.hetzner.cloud/` prefix.
    pub ann: &'static [(&'static str, &'static str)],
    pub ports: Ports,
    /// The annotation or field the note names.
    pub field: &'static str,
    /// The offending value, as the note quotes it.
    pub value: &'static str,
    /// Part of the accepted forms the note lists.
    pub hint: &'static str,
    /// Whether the admission policy refuses it too.
    pub admission: Admission,
}

impl Case {
    /// Whether `value` is the value of annotation `field` itself, so messages quote it (`"value"`);
    /// otherwise (`c-https`, `c-managed`) the value is named in the message some other way.
    pub fn quotes_value(&self) -> bool {
        self.ann
            .iter()
            .any(|(k, v)| *k == self.field && *v == self.value)
    }
}

const P80: Ports = Ports::Tcp(&[80]);
const BOOL: &str = BOOL_EXPECTED;
const DURATION: &str = "a duration: whole seconds";
const R: Admission = Admission::Refused;

const TYPES: Admission =
    Admission::ControllerOnly("the types are the project's GET /load_balancer_types");
const LOCATIONS: Admission =
    Admission::ControllerOnly("locations and their network zones are the project's GET /locations");
const CERTIFICATES: Admission =
    Admission::ControllerOnly("whether the certificate exists is the project's GET /certificates");
const SECRETS: Admission = Admission::ControllerOnly(
    "the Secret is read by the controller, with its opt-in access to Secrets",
);
const NETWORK: Admission = Admission::ControllerOnly(
    "valid when the controller runs with HCLOUD_NETWORK, which only it knows",
);
const NO_LB_YET: Admission = Admission::ControllerOnly(
    "refused only while no load balancer exists for the Service (an existing one keeps its services)",
);
const NOT_OURS: Admission = Admission::ControllerOnly(
    "whether a load balancer of that name exists, and who made it, is the project's GET /load_balancers",
);
/// The load balancer the `t-*` cases name: made outside the cluster, no label of ours or HCCM's
/// (the suite creates it first).
pub const NOT_OURS_LB: &str = "made-outside-the-cluster";
const PORT_LIMIT: Admission = Admission::ControllerOnly(
    "the limit is the load balancer type's, which may come from HCLOUD_LOAD_BALANCERS_TYPE or the \
     existing load balancer",
);

macro_rules! case {
    ($name:literal, [$(($k:literal, $v:expr)),*], $field:literal, $value:expr, $hint:expr, $adm:expr) => {
        case!($name, [$(($k, $v)),*], P80, $field, $value, $hint, $adm)
    };
    ($name:literal, [$(($k:literal, $v:expr)),*], $ports:expr, $field:literal, $value:expr, $hint:expr, $adm:expr) => {
        Case { name: $name, ann: &[$(($k, $v)),*], ports: $ports, field: $field, value: $value, hint: $hint, admission: $adm }
    };
}

const LONG_NAME: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
const SIXTEEN: &[i32] = &[
    80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
];

/// The catalogue. The controller of `service-controller/tests/bad_input.rs` has no `HCLOUD_NETWORK`
/// and the env defaults `HCLOUD_LOAD_BALANCERS_LOCATION=fsn1`, `HCLOUD_LOAD_BALANCERS_TYPE=lb11`.
pub const CASES: &[Case] = &[
    // Booleans (Go strconv.ParseBool).
    case!(
        "b-private-ip",
        [("use-private-ip", "maybe")],
        "use-private-ip",
        "maybe",
        BOOL,
        R
    ),
    case!(
        "b-proxy",
        [("uses-proxyprotocol", "yes")],
        "uses-proxyprotocol",
        "yes",
        BOOL,
        R
    ),
    case!(
        "b-ipv6",
        [("ipv6-disabled", "nope")],
        "ipv6-disabled",
        "nope",
        BOOL,
        R
    ),
    case!(
        "b-public",
        [("disable-public-network", "2")],
        "disable-public-network",
        "2",
        BOOL,
        R
    ),
    case!(
        "b-ingress",
        [("disable-private-ingress", "on")],
        "disable-private-ingress",
        "on",
        BOOL,
        R
    ),
    case!(
        "b-sticky",
        [("http-sticky-sessions", "sure")],
        "http-sticky-sessions",
        "sure",
        BOOL,
        R
    ),
    case!(
        "b-redirect",
        [("http-redirect-http", "y")],
        "http-redirect-http",
        "y",
        BOOL,
        R
    ),
    case!(
        "b-staging",
        [("http-managed-certificate-acme-staging", "staging")],
        "http-managed-certificate-acme-staging",
        "staging",
        BOOL,
        R
    ),
    case!(
        "b-validate",
        [("health-check-http-validate-certificate", "tru")],
        "health-check-http-validate-certificate",
        "tru",
        BOOL,
        R
    ),
    case!(
        "b-shared",
        [("name", "team-lb"), ("shared", "yes")],
        "shared",
        "yes",
        BOOL,
        R
    ),
    case!(
        "s-shared-unnamed",
        [("shared", "true")],
        "shared",
        "true",
        "load-balancer.hetzner.cloud/name set as well",
        R
    ),
    case!(
        "b-one-per-zone",
        [("one-per-network-zone", "each")],
        "one-per-network-zone",
        "each",
        BOOL,
        R
    ),
    case!(
        "s-one-per-zone-shared",
        [
            ("name", "team-lb"),
            ("shared", "true"),
            ("one-per-network-zone", "true")
        ],
        "one-per-network-zone",
        "true",
        "false (or unset) when load-balancer.hetzner.cloud/shared is true",
        R
    ),
    case!(
        "b-proxy-per-port",
        [("uses-proxyprotocol.80", "maybe")],
        "uses-proxyprotocol.80",
        "maybe",
        BOOL,
        R
    ),
    case!(
        "d-interval-per-port",
        [("health-check-interval.80", "soon")],
        "health-check-interval.80",
        "soon",
        DURATION,
        R
    ),
    case!(
        "s-per-port-key",
        [("type.80", "lb21")],
        "type.80",
        "lb21",
        "no port suffix: only these can be set for one port",
        R
    ),
    case!(
        "s-per-port-port",
        [("protocol.8443", "http")],
        "protocol.8443",
        "http",
        "a port suffix that is one of the Service",
        R
    ),
    case!(
        "b-kube-proxy",
        [("health-check-kube-proxy", "on")],
        "health-check-kube-proxy",
        "on",
        BOOL,
        R
    ),
    case!(
        "b-endpoint-targets",
        [("target-nodes-with-endpoints", "only")],
        "target-nodes-with-endpoints",
        "only",
        BOOL,
        R
    ),
    // Enums.
    case!(
        "e-robot-family",
        [("robot-target-address-family", "IPv4")],
        "robot-target-address-family",
        "IPv4",
        "ipv4, ipv6 or dualstack",
        R
    ),
    case!(
        "e-algorithm",
        [("algorithm-type", "random")],
        "algorithm-type",
        "random",
        "round_robin or least_connections",
        R
    ),
    case!(
        "e-protocol",
        [("protocol", "udp")],
        "protocol",
        "udp",
        "tcp, http or https",
        R
    ),
    case!(
        "e-hc-protocol",
        [("health-check-protocol", "grpc")],
        "health-check-protocol",
        "grpc",
        "tcp, http or https",
        R
    ),
    case!(
        "e-cert-type",
        [("certificate-type", "selfsigned")],
        "certificate-type",
        "selfsigned",
        "uploaded or managed",
        R
    ),
    case!(
        "e-type",
        [("type", "lb99")],
        "type",
        "lb99",
        "lb11, lb21, lb31",
        TYPES
    ),
    case!(
        "e-location",
        [("location", "mars1")],
        "location",
        "mars1",
        "fsn1, nbg1, hel1, ash, hil, sin",
        LOCATIONS
    ),
    case!(
        "e-zone",
        [("location", ""), ("network-zone", "moon-central")],
        "network-zone",
        "moon-central",
        "eu-central, us-east, us-west, ap-southeast",
        LOCATIONS
    ),
    case!(
        "e-location-zone",
        [("location", "ash"), ("network-zone", "eu-central")],
        "location",
        "ash",
        "a location in network zone eu-central",
        LOCATIONS
    ),
    // Numbers, durations, addresses.
    case!(
        "n-hc-port",
        [("health-check-port", "http")],
        "health-check-port",
        "http",
        "a port number 1-65535",
        R
    ),
    case!(
        "n-hc-port-range",
        [("health-check-port", "70000")],
        "health-check-port",
        "70000",
        "a port number 1-65535",
        R
    ),
    case!(
        "n-retries",
        [("health-check-retries", "-1")],
        "health-check-retries",
        "-1",
        "a non-negative integer",
        R
    ),
    case!(
        "d-interval",
        [("health-check-interval", "soon")],
        "health-check-interval",
        "soon",
        DURATION,
        R
    ),
    case!(
        "d-interval-ms",
        [("health-check-interval", "500ms")],
        "health-check-interval",
        "500ms",
        "of at least 1s",
        R
    ),
    case!(
        "d-timeout",
        [("health-check-timeout", "10x")],
        "health-check-timeout",
        "10x",
        DURATION,
        R
    ),
    case!(
        "d-cookie",
        [("http-cookie-lifetime", "forever")],
        "http-cookie-lifetime",
        "forever",
        DURATION,
        R
    ),
    case!(
        "d-idle",
        [("http-timeout-idle", "10s")],
        "http-timeout-idle",
        "10s",
        "between 30s and 300s",
        R
    ),
    case!(
        "n-status-codes",
        [("http-status-codes", "2xx")],
        "http-status-codes",
        "2xx",
        "3-character codes",
        R
    ),
    case!(
        "n-private-ipv4",
        [("private-ipv4", "10.0.0.300")],
        "private-ipv4",
        "10.0.0.300",
        "an IPv4 address",
        R
    ),
    case!(
        "n-subnet",
        [("private-subnet-ip-range", "10.0.0.0")],
        "private-subnet-ip-range",
        "10.0.0.0",
        "an IPv4 CIDR",
        R
    ),
    case!(
        "n-selector",
        [("node-selector", "role in (a")],
        "node-selector",
        "role in (a",
        "a label selector",
        R
    ),
    case!(
        "n-name",
        [("name", LONG_NAME)],
        "name",
        LONG_NAME,
        "at most 63 characters",
        R
    ),
    // Names the API or the apiserver would refuse only after the load balancer exists.
    case!(
        "h-hostname",
        [("hostname", "Not_A_Host")],
        "hostname",
        "Not_A_Host",
        "a lowercase DNS name",
        R
    ),
    case!(
        "h-rdns4",
        [("ipv4-rdns", "bad rdns!")],
        "ipv4-rdns",
        "bad rdns!",
        "a host name",
        R
    ),
    case!(
        "h-rdns6",
        [("ipv6-rdns", "-v6.example.com")],
        "ipv6-rdns",
        "-v6.example.com",
        "a host name",
        R
    ),
    case!(
        "h-hc-domain",
        [("health-check-http-domain", "exa mple.com")],
        "health-check-http-domain",
        "exa mple.com",
        "a host name",
        R
    ),
    case!(
        "h-hc-path",
        [("health-check-http-path", "healthz")],
        "health-check-http-path",
        "healthz",
        "an absolute HTTP path",
        R
    ),
    // Certificates.
    case!(
        "c-https",
        [("protocol", "https")],
        "http-certificates",
        "https",
        "at least one certificate id or name",
        R
    ),
    case!(
        "c-cert-name",
        [("protocol", "https"), ("http-certificates", "no-such-cert")],
        "http-certificates",
        "no-such-cert",
        "ids or names of existing certificates",
        CERTIFICATES
    ),
    case!(
        "c-cert-id",
        [("protocol", "https"), ("http-certificates", "999999")],
        "http-certificates",
        "999999",
        "ids or names of existing certificates",
        CERTIFICATES
    ),
    case!(
        "c-secret-elsewhere",
        [
            ("protocol", "https"),
            ("http-certificate-secret", "kube-system/web-tls")
        ],
        "http-certificate-secret",
        "kube-system/web-tls",
        "the name of a Secret in the Service",
        R
    ),
    case!(
        "c-secret-and-ids",
        [
            ("protocol", "https"),
            ("http-certificates", "my-cert"),
            ("http-certificate-secret", "web-tls")
        ],
        "http-certificate-secret",
        "web-tls",
        "certificate comes from one source",
        R
    ),
    case!(
        "c-secret-unread",
        [
            ("protocol", "https"),
            ("http-certificate-secret", "web-tls")
        ],
        "http-certificate-secret",
        "web-tls",
        "serviceController.certificateSecrets.enabled=true",
        SECRETS
    ),
    case!(
        "c-managed",
        [("protocol", "https"), ("certificate-type", "managed")],
        "http-managed-certificate-domains",
        "managed",
        "at least one domain",
        R
    ),
    case!(
        "c-domains",
        [
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "bad_domain")
        ],
        "http-managed-certificate-domains",
        "bad_domain",
        "domain names such as example.com",
        R
    ),
    // Private network settings without HCLOUD_NETWORK.
    case!(
        "p-private-ip",
        [("use-private-ip", "true")],
        "use-private-ip",
        "true",
        "HCLOUD_NETWORK",
        NETWORK
    ),
    // Two mistakes at once: both are reported.
    case!(
        "m-two",
        [("protocol", "udp"), ("use-private-ip", "nah")],
        "use-private-ip",
        "nah",
        "tcp, http or https",
        R
    ),
    // A load balancer nobody in the cluster made, named without its owner's consent.
    case!(
        "t-not-ours",
        [("name", NOT_OURS_LB)],
        "name",
        NOT_OURS_LB,
        "cloud-controllers.io/adopt=",
        NOT_OURS
    ),
    case!(
        "t-shared-not-ours",
        [("name", NOT_OURS_LB), ("shared", "true")],
        "name",
        NOT_OURS_LB,
        "cloud-controllers.io/adopt=",
        NOT_OURS
    ),
    // Service specs.
    case!(
        "s-udp",
        [],
        Ports::Udp(53),
        "Service ports",
        "53/UDP",
        "at least one TCP port",
        NO_LB_YET
    ),
    case!(
        "s-six-ports",
        [],
        Ports::Tcp(&[80, 81, 82, 83, 84, 85]),
        "Service ports",
        "6 ports",
        "at most 5 for load balancer type lb11",
        PORT_LIMIT
    ),
    case!(
        "s-sixteen-ports",
        [("type", "lb21")],
        Ports::Tcp(SIXTEEN),
        "Service ports",
        "16 ports",
        "at most 15 for load balancer type lb21",
        PORT_LIMIT
    ),
];

/// Values the controller accepts for one annotation, odd forms included (as its parsers in
/// cloud-client read them: `hcloud/values.rs`, `hcloud/label_selector.rs`,
/// `hcloud/load_balancer/spec/`), each tried on its own next to the annotations of `with`.
#[derive(Debug)]
pub struct Accepted {
    /// Without the prefix.
    pub key: &'static str,
    pub values: &'static [&'static str],
    /// Other annotations a value needs (`protocol: https` needs a certificate).
    pub with: &'static [(&'static str, &'static str)],
}

const BOOLS: &[&str] = &[
    "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False", " true ",
];

macro_rules! accepted {
    ($key:literal, $values:expr) => {
        Accepted {
            key: $key,
            values: $values,
            with: &[],
        }
    };
    ($key:literal, $values:expr, $with:expr) => {
        Accepted {
            key: $key,
            values: $values,
            with: $with,
        }
    };
}

/// Accepted values of every annotation the controller knows (the 40 keys of cloud-client's
/// `annotations::all()`).
pub const ACCEPTED: &[Accepted] = &[
    accepted!(
        "name",
        &[
            "my-lb",
            "web-lb-2",
            "keep-ip",
            " padded ",
            "",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ]
    ),
    accepted!("type", &["lb11", "lb21", "lb31", " lb11 ", ""]),
    accepted!(
        "location",
        &["fsn1", "nbg1", "hel1", "ash", "hil", "sin", ""]
    ),
    accepted!(
        "network-zone",
        &["eu-central", "us-east", "us-west", "ap-southeast", ""],
        &[("location", "")]
    ),
    accepted!(
        "robot-target-address-family",
        &["ipv4", "ipv6", "dualstack", " dualstack ", ""]
    ),
    accepted!(
        "algorithm-type",
        &[
            "round_robin",
            "least_connections",
            "Round_Robin",
            "ROUND_ROBIN",
            "Least_Connections",
            "LEAST_CONNECTIONS",
            " round_robin ",
            "",
        ]
    ),
    accepted!(
        "protocol",
        &["tcp", "http", "https", "TCP", "HTTP", "Https", " http ", ""],
        &[("http-certificates", "my-cert")]
    ),
    accepted!("shared", BOOLS, &[("name", "team-lb")]),
    accepted!("uses-proxyprotocol", BOOLS),
    accepted!("ipv6-disabled", BOOLS),
    accepted!("disable-public-network", BOOLS),
    accepted!("disable-private-ingress", BOOLS),
    accepted!("use-private-ip", BOOLS),
    accepted!(
        "private-ipv4",
        &[
            "10.0.0.5",
            "10.0.0.9",
            "0.0.0.0",
            "255.255.255.255",
            " 10.0.0.5 ",
            ""
        ]
    ),
    accepted!(
        "private-subnet-ip-range",
        &[
            "10.0.1.0/24",
            "10.0.0.0/8",
            "10.0.0.0/0",
            "10.0.0.0/32",
            "10.0.0.0/024",
            "10.0.0.0/+24",
            " 10.0.1.0/24 ",
            "",
        ]
    ),
    accepted!(
        "hostname",
        &[
            "lb.example.com",
            "a",
            "a-b.example.com",
            "1.2.3.4.5",
            "01.2.3.4",
            "256.1.1.1",
            " lb.example.com ",
            "",
        ]
    ),
    accepted!(
        "node-selector",
        &[
            "role=edge",
            "role==edge",
            "role!=edge",
            "role",
            "!role",
            "! role",
            "role=",
            "zone in (fsn1, nbg1)",
            "zone notin (a)",
            "zone  in  ( a , b )",
            "k in ()",
            "k in (a,)",
            "gen>2",
            "gen < -1",
            "node.kubernetes.io/pool=a, role in (worker)",
            "cloud-controllers.test/pool=p0",
            "a=b,c!=d,!e,f",
            " role = edge ",
            "",
        ]
    ),
    accepted!(
        "ipv4-rdns",
        &["v4.example.com", "Example.COM.", "a", "10.0.0.1", ""]
    ),
    accepted!("ipv6-rdns", &["v6.example.com", "x-1.example", ""]),
    accepted!("http-cookie-name", &["SESS", "my cookie", ""]),
    accepted!(
        "http-cookie-lifetime",
        &[
            "300",
            "1",
            "+15",
            "015",
            "15s",
            "1m",
            "1m30s",
            "1h",
            "2h45m",
            "1.5m",
            "0.5m",
            "2000ms",
            "1s500ms500ms",
            "60000000us",
            "1000000000ns",
            " 15s ",
            "18446744073709551615",
        ]
    ),
    accepted!(
        "http-timeout-idle",
        &[
            "30", "300", "+60", "30s", "5m", "1m", "0.5m", "1m30s", "300000ms", "4m60s", " 60s ",
        ]
    ),
    accepted!("http-sticky-sessions", BOOLS),
    accepted!("http-redirect-http", BOOLS),
    accepted!("certificate-type", &["uploaded", " uploaded ", ""]),
    accepted!(
        "certificate-type",
        &["managed", " managed "],
        &[("http-managed-certificate-domains", "example.com")]
    ),
    accepted!(
        "http-certificates",
        &["12", "my-cert", "12, my-cert", "a,,b", " x "],
        &[("protocol", "https")]
    ),
    accepted!(
        "http-certificate-secret",
        &["web-tls", " web-tls ", "web.tls-2"],
        &[("protocol", "https")]
    ),
    accepted!(
        "http-managed-certificate-name",
        &["web-cert", "any name", ""]
    ),
    accepted!(
        "http-managed-certificate-domains",
        &[
            "example.com",
            "*.example.com,example.com",
            " a.example.com , b.example.com ",
            "EXAMPLE.com",
            "xn--bcher-kva.example",
            "a,,b",
        ],
        &[("certificate-type", "managed")]
    ),
    accepted!("http-managed-certificate-acme-staging", BOOLS),
    accepted!(
        "health-check-protocol",
        &["tcp", "http", "https", "TCP", "Http", " tcp ", ""]
    ),
    accepted!(
        "health-check-port",
        &[
            "1", "80", "10256", "30080", "65535", "+80", "080", "00", "+0", " 80 ",
        ]
    ),
    accepted!(
        "health-check-interval",
        &["1", "10", "15s", "1m", "1s", "3h", "+5", "1m0s", " 10s "]
    ),
    accepted!("health-check-timeout", &["1", "10", "5s", "1m", "1.0s"]),
    accepted!(
        "health-check-retries",
        &["0", "3", "5", "4294967295", "+3", "007", " 3 "]
    ),
    accepted!(
        "health-check-http-domain",
        &["example.com", "Example.COM.", "a-b.c", "x", "10.0.0.1", ""]
    ),
    accepted!(
        "health-check-http-path",
        &[
            "/",
            "/healthz",
            "/ready",
            "/ready?x=1",
            "/a/b%20c",
            " /healthz ",
            ""
        ]
    ),
    accepted!("health-check-http-validate-certificate", BOOLS),
    accepted!("health-check-kube-proxy", BOOLS),
    accepted!("target-nodes-with-endpoints", BOOLS),
    accepted!("one-per-network-zone", BOOLS),
    accepted!(
        "http-status-codes",
        &["2??", "2??,301", "200, 301", "???", "2??,,3??", ""]
    ),
    // Never read: anything goes.
    accepted!("ipv4", &["1.2.3.4", "not an address!"]),
    accepted!("ipv6", &["::1", "???"]),
    accepted!("id", &["77", "x"]),
];

/// A LoadBalancer Service shape the e2e suites use (HCCM's load balancers among them), with every
/// annotation valid.
#[derive(Debug)]
pub struct Shape {
    pub name: &'static str,
    /// Which suite it comes from.
    pub source: &'static str,
    pub ann: &'static [(&'static str, &'static str)],
    pub ports: &'static [i32],
}

const WEB: &[i32] = &[80, 443];

/// The valid Services of the e2e suites: `service-controller/tests/service_e2e.rs`,
/// `cloud-client/tests/hccm_migration.rs` and `contract/load_balancers.rs`,
/// `chart-tests/tests/migration.rs`, `test-support`'s HCCM switch, the demo's and chaos' pools, and
/// the parser's own "every annotation" test.
pub const VALID_SERVICES: &[Shape] = &[
    Shape {
        name: "plain",
        source: "service_e2e, chart-tests migration",
        ann: &[],
        ports: WEB,
    },
    Shape {
        name: "least-connections",
        source: "service_e2e (annotation patch)",
        ann: &[("algorithm-type", "least_connections")],
        ports: WEB,
    },
    Shape {
        name: "edge",
        source: "service_e2e",
        ann: &[("node-selector", "role=edge")],
        ports: &[80],
    },
    Shape {
        name: "pool",
        source: "demo, chaos",
        ann: &[("node-selector", "cloud-controllers.test/pool=p0")],
        ports: &[80],
    },
    Shape {
        name: "hccm-default",
        source: "hccm_migration",
        ann: &[("type", "lb11"), ("location", "fsn1")],
        ports: WEB,
    },
    Shape {
        name: "hccm-proxy",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("uses-proxyprotocol", "true"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-named",
        source: "hccm_migration",
        ann: &[("type", "lb11"), ("location", "fsn1"), ("name", "web-lb-2")],
        ports: WEB,
    },
    Shape {
        name: "hccm-http",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("protocol", "http"),
            ("health-check-protocol", "http"),
            ("health-check-http-path", "/ready"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-http-checks",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("protocol", "http"),
            ("health-check-http-path", "/healthz"),
            ("health-check-http-domain", "example.com"),
            ("http-status-codes", "2??"),
            ("health-check-port", "30080"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-retries",
        source: "hccm_migration",
        ann: &[("protocol", "http"), ("health-check-retries", "5")],
        ports: WEB,
    },
    Shape {
        name: "hccm-keep-ip",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("name", "keep-ip"),
            ("algorithm-type", "least_connections"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-zone",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "nbg1"),
            ("network-zone", "eu-central"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-case",
        source: "hccm_migration (annotation case as HCCM accepts it)",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("protocol", "HTTP"),
            ("algorithm-type", "Least_Connections"),
            ("health-check-protocol", "TCP"),
            ("health-check-interval", "10s"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-case-upper",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("protocol", "HTTP"),
            ("algorithm-type", "ROUND_ROBIN"),
            ("health-check-protocol", "TCP"),
            ("health-check-interval", "10s"),
        ],
        ports: WEB,
    },
    Shape {
        name: "per-port",
        source: "contract/load_balancers",
        ann: &[
            ("location", "fsn1"),
            ("protocol", "http"),
            ("uses-proxyprotocol.80", "true"),
            ("protocol.443", "https"),
            ("http-certificates.443", "port-cert"),
            ("health-check-protocol.443", "http"),
            ("health-check-http-path.443", "/ready"),
            ("health-check-interval.443", "15s"),
        ],
        ports: WEB,
    },
    Shape {
        name: "shared",
        source: "shared",
        ann: &[("name", "team-lb"), ("shared", "true")],
        ports: WEB,
    },
    Shape {
        name: "hccm-managed",
        source: "hccm_migration",
        ann: &[
            ("type", "lb11"),
            ("location", "fsn1"),
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "example.com"),
            ("http-managed-certificate-name", "web-cert"),
            ("http-redirect-http", "true"),
        ],
        ports: WEB,
    },
    Shape {
        name: "hccm-empty-type",
        source: "hccm_migration (empty annotations mean unset)",
        ann: &[("type", ""), ("location", "fsn1"), ("certificate-type", "")],
        ports: WEB,
    },
    Shape {
        name: "hccm-lb31",
        source: "hccm_migration",
        ann: &[("type", "lb31"), ("location", "fsn1")],
        ports: WEB,
    },
    Shape {
        name: "contract-changes",
        source: "cloud-client contract",
        ann: &[
            ("location", "fsn1"),
            ("algorithm-type", "least_connections"),
            ("uses-proxyprotocol", "true"),
            ("name", "renamed-lb"),
            ("health-check-interval", "7s"),
        ],
        ports: &[80],
    },
    Shape {
        name: "contract-private",
        source: "cloud-client contract",
        ann: &[
            ("location", "fsn1"),
            ("use-private-ip", "true"),
            ("hostname", "lb.example.com"),
        ],
        ports: &[80],
    },
    Shape {
        name: "contract-uploaded",
        source: "cloud-client contract",
        ann: &[
            ("location", "fsn1"),
            ("protocol", "https"),
            ("http-certificates", "my-cert"),
        ],
        ports: &[443],
    },
    Shape {
        name: "contract-adopt",
        source: "cloud-client contract",
        ann: &[("name", "legacy-lb")],
        ports: &[80],
    },
    Shape {
        name: "switch-public",
        source: "test-support hccm_switch",
        ann: &[("location", "fsn1"), ("use-private-ip", "false")],
        ports: &[80],
    },
    Shape {
        name: "private-network",
        source: "service-controller bad_input (ignored without a network)",
        ann: &[
            ("private-ipv4", "10.0.0.5"),
            ("private-subnet-ip-range", "10.0.1.0/24"),
        ],
        ports: &[80],
    },
    Shape {
        name: "every-annotation",
        source: "cloud-client spec/tests.rs every_annotation_parses_good_values",
        ann: &[
            ("name", "my-lb"),
            ("type", "lb21"),
            ("location", "fsn1"),
            ("algorithm-type", "least_connections"),
            ("protocol", "https"),
            ("uses-proxyprotocol", "true"),
            ("ipv6-disabled", "1"),
            ("disable-public-network", "F"),
            ("disable-private-ingress", "TRUE"),
            ("use-private-ip", "t"),
            ("private-ipv4", "10.0.0.9"),
            ("private-subnet-ip-range", "10.0.1.0/24"),
            ("hostname", "lb.example.com"),
            ("node-selector", "role=edge"),
            ("ipv4-rdns", "v4.example.com"),
            ("ipv6-rdns", "v6.example.com"),
            ("http-cookie-name", "SESS"),
            ("http-cookie-lifetime", "300"),
            ("http-timeout-idle", "1m"),
            ("http-sticky-sessions", "true"),
            ("http-redirect-http", "true"),
            ("certificate-type", "uploaded"),
            ("http-certificates", "12, my-cert"),
            ("health-check-protocol", "http"),
            ("health-check-port", "10256"),
            ("health-check-interval", "15s"),
            ("health-check-timeout", "10"),
            ("health-check-retries", "3"),
            ("health-check-http-domain", "example.com"),
            ("health-check-http-path", "/healthz"),
            ("health-check-http-validate-certificate", "false"),
            ("http-status-codes", "2??,301"),
            ("ipv4", "1.2.3.4"),
            ("ipv6", "::1"),
            ("id", "77"),
        ],
        ports: WEB,
    },
    Shape {
        name: "managed-staging",
        source: "cloud-client spec/tests.rs managed_certificates",
        ann: &[
            ("certificate-type", "managed"),
            (
                "http-managed-certificate-domains",
                "a.example.com,b.example.com",
            ),
            ("http-managed-certificate-acme-staging", "true"),
        ],
        ports: WEB,
    },
];

/// `pairs` as Service annotations (prefixed).
pub fn annotations<'a>(
    pairs: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
        .collect()
}

/// What the controller's annotation parser (`LbSpec::parse`, no environment defaults) says about
/// a Service with these annotations (prefixed keys): `None` when it accepts them, else its
/// message. The parser looks at nothing but the Service; what it refuses the admission policy may
/// refuse too, and nothing else.
pub fn parse_error(annotations: &BTreeMap<String, String>) -> Option<String> {
    parse_error_on(annotations, &[80, 443])
}

/// [`parse_error`] for a Service with TCP `ports` (what port-scoped annotations may name).
pub fn parse_error_on(annotations: &BTreeMap<String, String>, ports: &[i32]) -> Option<String> {
    let svc = ServiceRef {
        uid: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into(),
        namespace: "default".into(),
        name: "web".into(),
        annotations: annotations.clone(),
        ports: ports
            .iter()
            .map(|p| cloud_client::ServicePort {
                name: None,
                protocol: cloud_client::PortProtocol::Tcp,
                port: u16::try_from(*p).unwrap_or(0),
                node_port: 30_000,
            })
            .collect(),
        ..Default::default()
    };
    LbSpec::parse(&svc, &LbDefaults::default())
        .err()
        .map(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use cloud_client::hcloud::load_balancer::annotations as a;

    use super::*;

    #[test]
    fn refused_at_admission_is_exactly_what_the_parser_refuses() {
        for c in CASES {
            let ports = match c.ports {
                Ports::Tcp(p) => p,
                Ports::Udp(_) => &[],
            };
            let err = parse_error_on(&annotations(c.ann), ports);
            match c.admission {
                Admission::Refused => {
                    let err = err.unwrap_or_else(|| panic!("{}: the parser accepts it", c.name));
                    assert!(
                        err.contains(&format!("{PREFIX}{}", c.field)) && err.contains(c.value),
                        "{}: {err}",
                        c.name
                    );
                }
                Admission::ControllerOnly(_) => {
                    assert_eq!(err, None, "{}: the parser refuses it", c.name)
                }
            }
        }
    }

    #[test]
    fn every_accepted_value_and_valid_service_parses() {
        for acc in ACCEPTED {
            for v in acc.values {
                let mut pairs: Vec<(&str, &str)> = acc.with.to_vec();
                pairs.push((acc.key, v));
                assert_eq!(parse_error(&annotations(&pairs)), None, "{}={v:?}", acc.key);
            }
        }
        for s in VALID_SERVICES {
            assert_eq!(
                parse_error_on(&annotations(s.ann), s.ports),
                None,
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn accepted_values_cover_every_known_annotation() {
        let covered: BTreeSet<String> = ACCEPTED
            .iter()
            .map(|acc| format!("{PREFIX}{}", acc.key))
            .collect();
        let known: BTreeSet<String> = a::all().map(|a| a.key.to_string()).collect();
        assert_eq!(covered, known);
    }

    /// The catalogue is held to the declarations: a key the parser can refuse has a case that
    /// shows it refused.
    #[test]
    fn every_checked_annotation_has_a_refused_case() {
        let refused: BTreeSet<String> = CASES
            .iter()
            .filter(|c| c.admission == Admission::Refused)
            .map(|c| format!("{PREFIX}{}", c.field))
            .collect();
        for ann in a::all().filter(|a| a.kind.is_checked()) {
            assert!(
                refused.contains(ann.key),
                "{}: no refused case in the catalogue",
                ann.key
            );
        }
    }

    #[test]
    fn case_names_are_unique_and_quoted_values_are_annotation_values() {
        let names: BTreeSet<&str> = CASES.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), CASES.len());
        let quoted: Vec<&str> = CASES
            .iter()
            .filter(|c| c.admission == Admission::Refused && !c.quotes_value())
            .map(|c| c.name)
            .collect();
        assert_eq!(quoted, ["c-https", "c-managed"]);
    }
}
