//! TLS certificates of `https` services.

use super::declaration::{Annotation, Kind, Origin, Section, declare};

declare! {
    section: "TLS certificates (`protocol: https` only)";

    CERTIFICATE_TYPE = "certificate-type" {
        kind: Kind::OwnRule,
        values: "`uploaded`, `managed` (exactly, lowercase)",
        default: "`uploaded`",
        does: "Where the certificate comes from: existing certificates, or a Let's Encrypt certificate Hetzner issues.",
        hccm: "Compared exactly, as HCCM; `Managed` is refused rather than guessed.",
    }

    HTTP_CERTIFICATES = "http-certificates" {
        kind: Kind::Text,
        per_port: true,
        values: "comma-separated certificate ids or names",
        default: "none; required for `https` with `uploaded`",
        does: "The certificates of every https service. Names are looked up (`GET /certificates?name=`); an id not in use yet is checked to exist. An unknown one is refused before any write.",
        hccm: "",
    }

    /// Ours: a `kubernetes.io/tls` Secret of the Service's namespace (cert-manager's), uploaded
    /// and kept current as the Secret changes.
    HTTP_CERTIFICATE_SECRET = "http-certificate-secret" {
        kind: Kind::OwnRule,
        per_port: true,
        origin: Origin::Ours,
        values: "the name of a `kubernetes.io/tls` Secret in the Service's namespace, labelled `cloud-controllers.io/load-balancer-certificate=true`",
        default: "none",
        does: "Ours. The https service's certificate comes from this Secret (e.g. one cert-manager issues and renews): uploaded once per content (labels `cloud-controllers.io/secret-uid` and `cloud-controllers.io/certificate-sha256`, the hash of the certificate chain, never of the key), switched on every port that uses it when the Secret changes, the old one deleted once no load balancer uses it; deleted too when the Service goes or stops naming the Secret and nothing else uses it (the uploads of a Secret deleted before that stay). Needs `serviceController.certificateSecrets.enabled` (the Secrets' read access). Exclusive with `http-certificates` and `certificate-type: managed` on a port; a Secret of another namespace (`ns/name`) is refused.",
        hccm: "Not in HCCM, which serves only certificates uploaded or ordered beforehand.",
    }

    HTTP_MANAGED_CERTIFICATE_NAME = "http-managed-certificate-name" {
        kind: Kind::Text,
        values: "string",
        default: "`ccm-managed-certificate-<Service UID>`",
        does: "Name of the managed certificate ordered for this Service.",
        hccm: "The certificate is found again by its `hcloud-ccm/service-uid` label, not its name, as HCCM: renaming does not order a second one. A name taken by a certificate without our label is refused. Managed certificates are never deleted, as in HCCM.",
    }

    HTTP_MANAGED_CERTIFICATE_DOMAINS = "http-managed-certificate-domains" {
        kind: Kind::OwnRule,
        values: "comma-separated domain names, `*.` wildcards allowed",
        default: "none; required with `managed`",
        does: "Domains of the managed certificate.",
        hccm: "",
    }

    HTTP_MANAGED_CERTIFICATE_ACME_STAGING = "http-managed-certificate-acme-staging" {
        kind: Kind::Bool,
        values: "boolean",
        default: "`false`",
        does: "Labels the managed certificate `HC-Use-Staging-CA=true` (Hetzner's staging CA, for testing).",
        hccm: "",
    }
}
