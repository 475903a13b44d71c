//! A controller's command line: its own clap struct, plus every flag of upstream's
//! cloud-controller-manager and HCCM that it does not define itself, accepted and ignored. Each
//! controller owns the flags it uses; an argument list written for HCCM (or for one of the other
//! three binaries) still starts it.

use clap::{Arg, ArgAction, Command, Parser};

/// Whether a flag takes a value or is a Go-style boolean (`--flag`, `--flag=false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Value,
    Bool,
}

/// Upstream and HCCM flags that some binary uses and the others accept without effect, or that none
/// uses. Defined by a binary's own clap struct, a flag keeps its meaning there.
const UPSTREAM_FLAGS: &[(&str, Takes)] = &[
    ("allocate-node-cidrs", Takes::Bool),
    ("allow-untagged-cloud", Takes::Bool),
    ("bind-address", Takes::Value),
    ("cloud-config", Takes::Value),
    ("cluster-cidr", Takes::Value),
    ("concurrent-node-status-updates", Takes::Value),
    ("concurrent-service-syncs", Takes::Value),
    ("configure-cloud-routes", Takes::Bool),
    ("feature-gates", Takes::Value),
    ("node-monitor-period", Takes::Value),
    ("node-status-update-frequency", Takes::Value),
    ("route-reconciliation-period", Takes::Value),
    ("secure-port", Takes::Value),
    ("use-service-account-credentials", Takes::Bool),
    ("webhook-secure-port", Takes::Value),
];

const HEADING: &str = "Upstream flags accepted without effect in this controller";

/// Parses the process's arguments into `C`, exiting as clap does on an error or `--help`.
pub fn parse<C: Parser>() -> C {
    parse_from(std::env::args_os())
}

/// [`parse`] over `args` (the first is the program name).
pub fn parse_from<C: Parser, I, T>(args: I) -> C
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command::<C>().get_matches_from(args);
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// `C`'s command with the upstream flags it does not define added as ignored ones.
pub fn command<C: Parser>() -> Command {
    let mut cmd = C::command();
    for (name, takes) in UPSTREAM_FLAGS {
        if cmd.get_arguments().any(|a| a.get_long() == Some(*name)) {
            continue;
        }
        let arg = Arg::new(*name)
            .long(*name)
            .help_heading(HEADING)
            .help("Accepted for upstream/HCCM argument lists; no effect here");
        cmd = cmd.arg(match takes {
            Takes::Value => arg.action(ArgAction::Set).value_name("VALUE"),
            Takes::Bool => arg
                .action(ArgAction::Set)
                .num_args(0..=1)
                .default_missing_value("true")
                .value_name("BOOL"),
        });
    }
    cmd
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
    fn own_flags_keep_their_meaning_and_the_others_are_accepted() {
        let r: Route = parse_from([
            "route",
            "--cluster-cidr=10.244.0.0/16",
            "--allocate-node-cidrs",
            "--route-reconciliation-period",
            "30s",
            "--node-monitor-period=5s",
            "--configure-cloud-routes=false",
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
    fn the_help_lists_the_ignored_flags_apart() {
        let help = command::<Route>().render_long_help().to_string();
        assert!(help.contains(HEADING), "{help}");
        assert!(help.contains("--node-monitor-period"), "{help}");
    }
}
