//! Health checks.

use super::declaration::{Annotation, Kind, Origin, Section, declare};

declare! {
    section: "Health check";

    HEALTH_CHECK_PROTOCOL = "health-check-protocol" {
        kind: Kind::Protocol,
        per_port: true,
        values: "`tcp`, `http`, `https` (any case)",
        default: "the `protocol` of the Service",
        does: "Check protocol.",
        hccm: "",
    }

    HEALTH_CHECK_PORT = "health-check-port" {
        kind: Kind::OwnRule,
        per_port: true,
        values: "1–65535",
        default: "the port's nodePort",
        does: "Port the check connects to.",
        hccm: "",
    }

    HEALTH_CHECK_INTERVAL = "health-check-interval" {
        kind: Kind::Duration { min: 1, max: None },
        per_port: true,
        env: Some("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL"),
        values: "duration",
        default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL` (ignored when 0); else left as is",
        does: "Time between checks.",
        hccm: "HCCM documents an integer; both forms accepted.",
    }

    HEALTH_CHECK_TIMEOUT = "health-check-timeout" {
        kind: Kind::Duration { min: 1, max: None },
        per_port: true,
        env: Some("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT"),
        values: "duration",
        default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT` (ignored when 0); else left as is",
        does: "Timeout of one check.",
        hccm: "As above.",
    }

    HEALTH_CHECK_RETRIES = "health-check-retries" {
        kind: Kind::OwnRule,
        per_port: true,
        env: Some("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES"),
        values: "non-negative integer",
        default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES` (ignored when 0); else left as is",
        does: "Failed checks before a target counts as unhealthy.",
        hccm: "",
    }

    HEALTH_CHECK_HTTP_DOMAIN = "health-check-http-domain" {
        kind: Kind::HostName,
        per_port: true,
        values: "host name",
        default: "left as is",
        does: "Domain (`Host` header) of the HTTP check.",
        hccm: "",
    }

    HEALTH_CHECK_HTTP_PATH = "health-check-http-path" {
        kind: Kind::OwnRule,
        per_port: true,
        values: "absolute path without spaces, e.g. `/healthz`",
        default: "left as is (API default `/`)",
        does: "Path of the HTTP check.",
        hccm: "",
    }

    HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE = "health-check-http-validate-certificate" {
        kind: Kind::Bool,
        per_port: true,
        values: "boolean",
        default: "left as is",
        does: "Validate the TLS certificate of an `https` check (`tls`).",
        hccm: "",
    }

    /// Health-check expected status codes (the key has no `health-check-` prefix in HCCM).
    HTTP_STATUS_CODES = "http-status-codes" {
        kind: Kind::OwnRule,
        per_port: true,
        values: "comma-separated 3-character codes, `?` as wildcard, e.g. `2??,301`",
        default: "left as is",
        does: "Status codes the HTTP check accepts.",
        hccm: "HCCM's key has no `health-check-` prefix; kept as is.",
    }

    /// Ours: health-check where kube-proxy says whether the node can serve (env
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY`): `GET /healthz` on the Service's
    /// `healthCheckNodePort` for `externalTrafficPolicy: Local`, on kube-proxy's port 10256 otherwise.
    HEALTH_CHECK_KUBE_PROXY = "health-check-kube-proxy" {
        kind: Kind::Bool,
        per_port: true,
        env: Some("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY"),
        origin: Origin::Ours,
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY` (chart: `hcloud.loadBalancers.healthCheck.kubeProxy`); else `false`",
        does: "Ours. Health-checks where kube-proxy says whether the node can serve: HTTP `GET /healthz` on the Service's `healthCheckNodePort` for `externalTrafficPolicy: Local`, on kube-proxy's own port 10256 for `Cluster`. See below.",
        hccm: "Not in HCCM, which always checks TCP on the nodePort.",
    }
}
