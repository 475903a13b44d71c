//! Every flag of HCCM's `--help` (v1.35, kept verbatim in `data/hccm-v1.35-help.txt`), with a value
//! as an HCCM manifest would pass it, run against a controller binary: none may exit 2, the ones
//! the binary honours keep their meaning, and each of the others is named in the one startup
//! Warning with the reason it has no effect.

use std::process::Command;

const HELP: &str = include_str!("../../data/hccm-v1.35-help.txt");

/// The Warning's message (see `controller_kit::cli::warn_ignored`).
const WARNING: &str = "upstream flags accepted without effect in this controller";

/// Upstream's deprecated `--node-sync-period`: passed too, though v1.35's help no longer lists it.
const BEYOND_THE_FILE: &str = "node-sync-period";

/// The HCCM flags every binary honours (controller-kit's `CommonArgs`).
pub const HONOURED_BY_EVERY_BINARY: &[&str] = &[
    "cloud-provider",
    "cluster-name",
    "controllers",
    "kube-api-burst",
    "kube-api-qps",
    "kubeconfig",
    "leader-elect",
    "leader-elect-lease-duration",
    "leader-elect-renew-deadline",
    "leader-elect-resource-lock",
    "leader-elect-resource-name",
    "leader-elect-resource-namespace",
    "leader-elect-retry-period",
    "logging-format",
    "master",
    "v",
    "vmodule",
];

/// One flag of the help text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    pub name: String,
    /// The value passed (`None`: a boolean, passed bare).
    pub value: Option<String>,
}

impl Flag {
    fn arg(&self) -> String {
        match &self.value {
            Some(v) => format!("--{}={v}", self.name),
            None => format!("--{}", self.name),
        }
    }
}

/// Every flag of the help text but `--help` and `--version` (which print and exit), each with its
/// documented default, or a well-formed value of its type when it has none. The few whose default
/// means "elsewhere" get values that work here (`--cloud-provider=hcloud`, a `--cluster-cidr`).
pub fn every_flag() -> Vec<Flag> {
    let mut flags = Vec::new();
    for line in HELP.lines() {
        let line = line.trim_start();
        let line = line.strip_prefix("-v, ").unwrap_or(line);
        let Some(rest) = line.strip_prefix("--") else {
            continue;
        };
        let (spec, description) = rest.split_once("  ").unwrap_or((rest, ""));
        let (name, kind) = match spec.trim().split_once(' ') {
            Some((name, kind)) => (name, Some(kind)),
            None => (spec.trim(), None),
        };
        if name == "help" || name == "version" {
            continue;
        }
        let default = description
            .split_once("(default ")
            .and_then(|(_, d)| d.split_once(')'))
            .map(|(d, _)| {
                d.trim_matches(|c| c == '"' || c == '[' || c == ']')
                    .to_string()
            })
            .filter(|d| !d.is_empty());
        let value = match (name, kind) {
            ("cloud-provider", _) => Some("hcloud".to_string()),
            // Its default is on a continuation line.
            ("controllers", _) => Some("*".to_string()),
            ("cluster-cidr", _) => Some("10.244.0.0/16".to_string()),
            ("feature-gates", _) => {
                Some("CloudControllerManagerWatchBasedRoutesReconciliation=true".to_string())
            }
            ("v", _) => Some("2".to_string()),
            ("vmodule", _) => Some("cloud_client=4".to_string()),
            ("master", _) => Some("https://127.0.0.1:6443".to_string()),
            (_, None) => None,
            (_, Some(kind)) => Some(default.unwrap_or_else(|| {
                match kind {
                    "duration" => "10s",
                    "int" | "int32" | "float32" | "quantity" => "0",
                    "ip" => "0.0.0.0",
                    "int32Slice" => "23",
                    "namedCertKey" => "tls.crt,tls.key",
                    _ => "x",
                }
                .to_string()
            })),
        };
        flags.push(Flag {
            name: name.to_string(),
            value,
        });
    }
    flags
}

/// Runs `bin` with every flag (and `--kubeconfig` pointing nowhere, so it stops right after
/// configuration and logging are set up) and checks: exit 1 (the kubeconfig), never 2; no flag
/// refused; the Warning names exactly the flags `bin` does not honour: none of
/// [`HONOURED_BY_EVERY_BINARY`] and `own`, all the others. Returns (honoured, warned) counts.
pub fn assert_every_flag_accepted(bin: &str, own: &[&str]) -> (usize, usize) {
    let honoured: Vec<&str> = HONOURED_BY_EVERY_BINARY
        .iter()
        .chain(own)
        .copied()
        .collect();
    let honoured = honoured.as_slice();
    let flags = every_flag();
    let mut args: Vec<String> = flags
        .iter()
        .filter(|f| f.name != "kubeconfig")
        .map(Flag::arg)
        .collect();
    args.push("--kubeconfig=/nonexistent/kubeconfig".into());
    args.push(format!("--{BEYOND_THE_FILE}=100s"));
    let out = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HCLOUD_TOKEN", super::bad_config::TOKEN)
        // route-controller needs one with --configure-cloud-routes; nothing resolves it before
        // the kubeconfig fails.
        .env("HCLOUD_NETWORK", "k8s")
        .args(&args)
        .output()
        .expect("run the binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1 (no kubeconfig), not a refused flag:\n{stderr}\n{stdout}"
    );
    let warning = stdout
        .lines()
        .find(|l| l.contains(WARNING))
        .unwrap_or_else(|| panic!("no Warning line:\n{stdout}"));
    assert!(warning.contains("WARN"), "{warning}");
    let warned: Vec<&Flag> = flags
        .iter()
        .filter(|f| warning.contains(&format!("--{} (", f.name)))
        .collect();
    for name in honoured {
        assert!(
            flags.iter().any(|f| f.name == *name) || *name == BEYOND_THE_FILE,
            "--{name} is not an HCCM flag"
        );
        assert!(
            !warning.contains(&format!("--{name} (")),
            "--{name} is honoured by {bin} but named in the Warning: {warning}"
        );
    }
    let honoured_in_file = flags
        .iter()
        .filter(|f| honoured.contains(&f.name.as_str()))
        .count();
    let honoured_count = flags.len() - warned.len();
    assert_eq!(
        honoured_count,
        honoured_in_file,
        "flags neither warned about nor listed as honoured by {bin}: {:?}",
        flags
            .iter()
            .filter(|f| !warned.contains(f) && !honoured.contains(&f.name.as_str()))
            .map(|f| &f.name)
            .collect::<Vec<_>>()
    );
    println!(
        "{bin}: {} HCCM flags accepted: {honoured_count} honoured, {} with the startup Warning, 0 refused",
        flags.len(),
        warned.len()
    );
    (honoured_count, warned.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_text_yields_every_flag_with_a_value_of_its_type() {
        let flags = every_flag();
        assert_eq!(flags.len(), 80, "{flags:?}");
        let get = |n: &str| flags.iter().find(|f| f.name == n).unwrap().value.clone();
        assert_eq!(get("kube-api-qps").as_deref(), Some("20"));
        assert_eq!(get("controllers").as_deref(), Some("*"));
        assert_eq!(get("profiling"), None);
        assert_eq!(
            get("cidr-allocator-type").as_deref(),
            Some("RangeAllocator")
        );
        assert_eq!(get("v").as_deref(), Some("2"));
        assert_eq!(get("tls-sni-cert-key").as_deref(), Some("tls.crt,tls.key"));
    }
}
