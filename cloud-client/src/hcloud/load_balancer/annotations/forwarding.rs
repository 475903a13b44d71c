//! The services (listen ports) of the load balancer.

use super::declaration::{Annotation, Kind, Section, declare};

declare! {
    section: "Forwarding (services of the load balancer)";

    /// `tcp` | `http` | `https` (any case), for all ports.
    PROTOCOL = "protocol" {
        kind: Kind::Protocol,
        per_port: true,
        values: "`tcp`, `http`, `https` (any case)",
        default: "`tcp`",
        does: "Protocol of every port's service. `https` needs a certificate (see below), checked before the create.",
        hccm: "Case-insensitive, as HCCM.",
    }

    USES_PROXYPROTOCOL = "uses-proxyprotocol" {
        kind: Kind::Bool,
        per_port: true,
        env: Some("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL"),
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`; else left as the services have it (new: off)",
        does: "PROXY protocol towards the nodes. The Service's ingress `ipMode` is `Proxy` when it is on, else `VIP`.",
        hccm: "As HCCM, which leaves the field out of its requests when unset.",
    }

    HTTP_COOKIE_NAME = "http-cookie-name" {
        kind: Kind::Text,
        per_port: true,
        values: "string",
        default: "left as is (API default on a new service)",
        does: "Sticky-session cookie name. `http`/`https` only.",
        hccm: "",
    }

    HTTP_COOKIE_LIFETIME = "http-cookie-lifetime" {
        kind: Kind::Duration { min: 1, max: None },
        per_port: true,
        values: "duration",
        default: "left as is",
        does: "Sticky-session cookie lifetime (sent in seconds). `http`/`https` only.",
        hccm: "HCCM documents an integer; both forms accepted.",
    }

    HTTP_TIMEOUT_IDLE = "http-timeout-idle" {
        kind: Kind::Duration { min: 30, max: Some(300) },
        per_port: true,
        values: "duration, 30 s to 300 s",
        default: "left as is",
        does: "Idle timeout of HTTP connections (`http.timeout_idle`). `http`/`https` only.",
        hccm: "",
    }

    HTTP_STICKY_SESSIONS = "http-sticky-sessions" {
        kind: Kind::Bool,
        per_port: true,
        values: "boolean",
        default: "left as is",
        does: "Sticky sessions. `http`/`https` only.",
        hccm: "",
    }

    HTTP_REDIRECT_HTTP = "http-redirect-http" {
        kind: Kind::Bool,
        per_port: true,
        values: "boolean",
        default: "left as is",
        does: "Redirect HTTP to HTTPS. Only sent for `https`.",
        hccm: "",
    }
}
