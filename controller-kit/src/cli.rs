//! A controller's command line: its own clap struct, plus every flag of upstream's
//! cloud-controller-manager and HCCM (`hcloud-cloud-controller-manager --help`, v1.35) that it does
//! not define itself. So an argument list written for HCCM, or for one of the other three binaries,
//! starts any of them: no flag of HCCM's exits 2.
//!
//! A flag a binary defines keeps its meaning there (it is *honoured*). Every other flag of the
//! table is accepted without effect, and the ones actually given are named in one startup Warning
//! that says why each has none here ([`warn_ignored`]).

use std::borrow::Cow;
use std::sync::Mutex;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command, Parser};

/// Whether a flag takes a value or is a Go-style boolean (`--flag`, `--flag=false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// `--flag=value` or `--flag value`; may be repeated (Go's slice flags).
    Value,
    /// `--flag` or `--flag=true|false`.
    Bool,
}

/// Why a flag has no effect in a binary that does not define it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Another controller reads it (named here).
    ReadBy(&'static str),
    /// Nothing here reads it, for this reason.
    NoEffect(&'static str),
    /// A setting of another provider than `--cloud-provider` selects (this provider, by name):
    /// every binary takes every built-in provider's settings, and only the selected one reads
    /// its own.
    SettingOf(&'static str),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::ReadBy(controller) => write!(f, "read by {controller}, not by this controller"),
            Why::NoEffect(reason) => f.write_str(reason),
            Why::SettingOf(provider) => write!(
                f,
                "a setting of --cloud-provider={provider}, not of the provider this process runs"
            ),
        }
    }
}

/// A flag given without effect (its name, without `--`), and why.
pub type Ignored = (Cow<'static, str>, Why);

const NO_HTTPS: Why = Why::NoEffect(
    "no HTTPS endpoint is served: /healthz, /readyz and /metrics are plain HTTP on --admin-address",
);
const NO_AUTHN: Why =
    Why::NoEffect("no HTTPS endpoint is served, so nothing authenticates or authorizes requests");
const NO_WEBHOOKS: Why = Why::NoEffect("no webhooks are served");
const NO_PROFILING: Why = Why::NoEffect("no pprof endpoint: this is not a Go binary");
const NO_MIGRATION: Why = Why::NoEffect(
    "leader migration hands controllers over from kube-controller-manager; each controller here \
     holds its own Lease",
);
const NO_LOG_BUFFER: Why = Why::NoEffect("logs are written unbuffered, one stream");
const ROUTES: Why = Why::ReadBy("route-controller");
const NODES: Why = Why::ReadBy("node-controller");
const SERVICES: Why = Why::ReadBy("service-controller");

/// Every flag of HCCM's `--help` (v1.35) plus upstream's deprecated `--node-sync-period`, with what
/// it takes and why it has no effect where a binary does not define it. `--help`, `--version`,
/// `--v`, `--kubeconfig`, `--master`, `--controllers`, `--cloud-provider`, `--cluster-name`,
/// `--kube-api-qps`/`-burst`, `--vmodule`, `--logging-format`, `--concurrent-node-syncs` and the
/// `--leader-elect*` flags are defined by every binary ([`crate::CommonArgs`]).
pub const UPSTREAM_FLAGS: &[(&str, Takes, Why)] = &[
    (
        "allocate-node-cidrs",
        Takes::Bool,
        Why::NoEffect(
            "Pod CIDRs are allocated by kube-controller-manager; routes follow each Node's spec.podCIDR",
        ),
    ),
    (
        "allow-untagged-cloud",
        Takes::Bool,
        Why::NoEffect("no cluster ID is needed"),
    ),
    ("authentication-kubeconfig", Takes::Value, NO_AUTHN),
    ("authentication-skip-lookup", Takes::Bool, NO_AUTHN),
    (
        "authentication-token-webhook-cache-ttl",
        Takes::Value,
        NO_AUTHN,
    ),
    (
        "authentication-tolerate-lookup-failure",
        Takes::Bool,
        NO_AUTHN,
    ),
    ("authorization-always-allow-paths", Takes::Value, NO_AUTHN),
    ("authorization-kubeconfig", Takes::Value, NO_AUTHN),
    (
        "authorization-webhook-cache-authorized-ttl",
        Takes::Value,
        NO_AUTHN,
    ),
    (
        "authorization-webhook-cache-unauthorized-ttl",
        Takes::Value,
        NO_AUTHN,
    ),
    ("bind-address", Takes::Value, NO_HTTPS),
    ("cert-dir", Takes::Value, NO_HTTPS),
    (
        "cidr-allocator-type",
        Takes::Value,
        Why::NoEffect("Pod CIDRs are allocated by kube-controller-manager"),
    ),
    ("client-ca-file", Takes::Value, NO_AUTHN),
    (
        "cloud-config",
        Takes::Value,
        Why::NoEffect(
            "HCCM reads no cloud config file either: settings come from environment variables",
        ),
    ),
    ("cluster-cidr", Takes::Value, ROUTES),
    ("concurrent-node-status-updates", Takes::Value, NODES),
    ("concurrent-service-syncs", Takes::Value, SERVICES),
    ("configure-cloud-routes", Takes::Bool, ROUTES),
    ("contention-profiling", Takes::Bool, NO_PROFILING),
    (
        "controller-start-interval",
        Takes::Value,
        Why::NoEffect("one controller runs per process"),
    ),
    ("disable-http2-serving", Takes::Bool, NO_HTTPS),
    ("enable-leader-migration", Takes::Bool, NO_MIGRATION),
    (
        "external-cloud-volume-plugin",
        Takes::Value,
        Why::NoEffect("volumes are the CSI driver's"),
    ),
    (
        "feature-gates",
        Takes::Value,
        Why::NoEffect("these gate Go Kubernetes libraries; routes here are watch-based already"),
    ),
    ("http2-max-streams-per-connection", Takes::Value, NO_HTTPS),
    (
        "kube-api-content-type",
        Takes::Value,
        Why::NoEffect("the Kubernetes client speaks JSON only"),
    ),
    ("leader-migration-config", Takes::Value, NO_MIGRATION),
    ("log-flush-frequency", Takes::Value, NO_LOG_BUFFER),
    ("log-text-info-buffer-size", Takes::Value, NO_LOG_BUFFER),
    ("log-text-split-stream", Takes::Bool, NO_LOG_BUFFER),
    (
        "min-resync-period",
        Takes::Value,
        Why::NoEffect("watches are event-driven and the stores never resync"),
    ),
    (
        "node-monitor-period",
        Takes::Value,
        Why::ReadBy("lifecycle-controller"),
    ),
    ("node-status-update-frequency", Takes::Value, NODES),
    ("node-sync-period", Takes::Value, SERVICES),
    ("permit-address-sharing", Takes::Bool, NO_HTTPS),
    ("permit-port-sharing", Takes::Bool, NO_HTTPS),
    ("profiling", Takes::Bool, NO_PROFILING),
    ("requestheader-allowed-names", Takes::Value, NO_AUTHN),
    ("requestheader-client-ca-file", Takes::Value, NO_AUTHN),
    ("requestheader-extra-headers-prefix", Takes::Value, NO_AUTHN),
    ("requestheader-group-headers", Takes::Value, NO_AUTHN),
    ("requestheader-uid-headers", Takes::Value, NO_AUTHN),
    ("requestheader-username-headers", Takes::Value, NO_AUTHN),
    ("route-reconciliation-period", Takes::Value, ROUTES),
    ("secure-port", Takes::Value, NO_HTTPS),
    ("tls-cert-file", Takes::Value, NO_HTTPS),
    ("tls-cipher-suites", Takes::Value, NO_HTTPS),
    ("tls-curve-preferences", Takes::Value, NO_HTTPS),
    ("tls-min-version", Takes::Value, NO_HTTPS),
    ("tls-private-key-file", Takes::Value, NO_HTTPS),
    ("tls-sni-cert-key", Takes::Value, NO_HTTPS),
    (
        "use-service-account-credentials",
        Takes::Bool,
        Why::NoEffect("each controller runs under its own ServiceAccount already"),
    ),
    ("webhook-bind-address", Takes::Value, NO_WEBHOOKS),
    ("webhook-cert-dir", Takes::Value, NO_WEBHOOKS),
    ("webhook-disable-http2-serving", Takes::Bool, NO_WEBHOOKS),
    ("webhook-secure-port", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-cert-file", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-cipher-suites", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-curve-preferences", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-min-version", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-private-key-file", Takes::Value, NO_WEBHOOKS),
    ("webhook-tls-sni-cert-key", Takes::Value, NO_WEBHOOKS),
    ("webhooks", Takes::Value, NO_WEBHOOKS),
];

const HEADING: &str = "Upstream flags accepted without effect in this controller";

/// The upstream flags given on this process's command line without effect here, recorded by
/// [`parse`] for [`warn_ignored`], which runs once logging is set up (parsing comes first).
static IGNORED: Mutex<Vec<Ignored>> = Mutex::new(Vec::new());

/// Parses the process's arguments into `C`, exiting as clap does on an error or `--help`.
pub fn parse<C: Parser>() -> C {
    let (args, ignored) = parse_from(std::env::args_os());
    IGNORED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(ignored);
    args
}

/// [`parse`] over `args` (the first is the program name), returning the upstream flags given
/// that have no effect in `C`.
pub fn parse_from<C: Parser, I, T>(args: I) -> (C, Vec<Ignored>)
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let (cmd, added) = command_and_added::<C>();
    let matches = cmd.get_matches_from(args);
    let ignored = added
        .into_iter()
        .filter(|(name, _)| matches.value_source(name) == Some(ValueSource::CommandLine))
        .map(|(name, why)| (Cow::Borrowed(name), why))
        .collect();
    let parsed = C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    (parsed, ignored)
}

/// Logs, once, the upstream flags [`parse`] accepted without effect, and `more` (those the
/// validation found), each with the reason.
pub fn warn_ignored(more: &[Ignored]) {
    let mut ignored = std::mem::take(&mut *IGNORED.lock().unwrap_or_else(|e| e.into_inner()));
    ignored.extend_from_slice(more);
    if ignored.is_empty() {
        return;
    }
    let flags: Vec<String> = ignored
        .iter()
        .map(|(name, why)| format!("--{name} ({why})"))
        .collect();
    tracing::warn!(
        flags = %flags.join("; "),
        "upstream flags accepted without effect in this controller"
    );
}

/// `C`'s command with the upstream flags it does not define added as ignored ones.
pub fn command<C: Parser>() -> Command {
    command_and_added::<C>().0
}

fn command_and_added<C: Parser>() -> (Command, Vec<(&'static str, Why)>) {
    // As with Go's flags, a flag given twice takes its last value (a chart's defaults followed by
    // an operator's extra args must not stop the pod).
    let mut cmd = C::command().args_override_self(true);
    let mut added = Vec::new();
    for (name, takes, why) in UPSTREAM_FLAGS {
        if cmd.get_arguments().any(|a| a.get_long() == Some(*name)) {
            continue;
        }
        let arg = Arg::new(*name)
            .long(*name)
            .help_heading(HEADING)
            .help(format!(
                "Accepted for HCCM argument lists; no effect: {why}"
            ));
        cmd = cmd.arg(match takes {
            Takes::Value => arg.action(ArgAction::Append).value_name("VALUE"),
            Takes::Bool => arg
                .action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_name("BOOL"),
        });
        added.push((*name, *why));
    }
    (cmd, added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser, Debug)]
    struct Route {
        /// Used by this binary.
        #[arg(long)]
        cluster_cidr: Option<String>,
    }

    #[test]
    fn own_flags_keep_their_meaning_and_the_others_are_accepted_and_reported() {
        let (r, ignored): (Route, _) = parse_from([
            "route",
            "--cluster-cidr=10.244.0.0/16",
            "--allocate-node-cidrs",
            "--route-reconciliation-period",
            "30s",
            "--node-monitor-period=5s",
            "--configure-cloud-routes=false",
            "--tls-sni-cert-key=a.crt,a.key",
            "--tls-sni-cert-key=b.crt,b.key",
        ]);
        assert_eq!(r.cluster_cidr.as_deref(), Some("10.244.0.0/16"));
        let names: Vec<_> = ignored.iter().map(|(n, _)| n.as_ref()).collect();
        assert_eq!(
            names,
            [
                "allocate-node-cidrs",
                "configure-cloud-routes",
                "node-monitor-period",
                "route-reconciliation-period",
                "tls-sni-cert-key"
            ]
        );
        let why = ignored
            .iter()
            .find(|(n, _)| n == "node-monitor-period")
            .unwrap()
            .1;
        assert_eq!(
            why.to_string(),
            "read by lifecycle-controller, not by this controller"
        );
    }

    #[test]
    fn a_bool_flag_does_not_swallow_the_next_argument() {
        let (r, ignored): (Route, _) =
            parse_from(["route", "--profiling", "--cluster-cidr", "10.0.0.0/8"]);
        assert_eq!(r.cluster_cidr.as_deref(), Some("10.0.0.0/8"));
        assert_eq!(ignored.len(), 1);
    }

    #[test]
    fn a_flag_given_twice_takes_the_last_value_as_in_go() {
        let (r, _): (Route, _) = parse_from([
            "route",
            "--cluster-cidr=10.0.0.0/8",
            "--cluster-cidr=10.244.0.0/16",
        ]);
        assert_eq!(r.cluster_cidr.as_deref(), Some("10.244.0.0/16"));
    }

    #[test]
    fn unknown_flags_are_still_refused() {
        let err = command::<Route>()
            .try_get_matches_from(["route", "--no-such-flag"])
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    }

    #[test]
    fn the_help_lists_the_ignored_flags_apart_with_the_reason() {
        let help = command::<Route>().render_long_help().to_string();
        assert!(help.contains(HEADING), "{help}");
        assert!(help.contains("--node-monitor-period"), "{help}");
        assert!(help.contains("no webhooks are served"), "{help}");
    }
}
