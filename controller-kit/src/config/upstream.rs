//! Upstream cloud-controller-manager flags every binary reads, beyond leader election and
//! logging: `--controllers` (which of upstream's controllers this binary is),
//! `--concurrent-node-syncs` and `--cluster-name`. The rest of upstream's are accepted without
//! effect by [`crate::cli`].

use clap::Args;

use super::problems::Problems;
use crate::cli::{Ignored, Why};
use crate::info::ControllerInfo;

/// The upstream flags every binary reads.
#[derive(Args, Debug, Clone)]
pub struct UpstreamArgs {
    /// Upstream `--controllers` syntax (`*`, `name`, `-name`, aliases), restricted to this binary's controller.
    #[arg(long, default_value = "*", env = "CONTROLLERS")]
    pub controllers: String,
    /// Nodes processed concurrently (node initialization; lifecycle checks). Default per controller.
    #[arg(long)]
    pub concurrent_node_syncs: Option<String>,
    /// Cluster name (accepted; load balancers are named and labelled as HCCM does, without it).
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,
}

impl Default for UpstreamArgs {
    /// clap's defaults.
    fn default() -> Self {
        Self {
            controllers: "*".into(),
            concurrent_node_syncs: None,
            cluster_name: "kubernetes".into(),
        }
    }
}

impl UpstreamArgs {
    /// `--concurrent-node-syncs` with the controller's default; a controller that does not read
    /// it notes the flag as given without effect.
    pub fn concurrent_node_syncs(
        &self,
        info: &ControllerInfo,
        ignored: &mut Vec<Ignored>,
        p: &mut Problems,
    ) -> u16 {
        match (&self.concurrent_node_syncs, info.node_syncs_default) {
            (Some(v), Some(_)) => p.int("--concurrent-node-syncs", v, 1, 1024, 1) as u16,
            (None, Some(default)) => default,
            (given, None) => {
                if given.is_some() {
                    ignored.push((
                        "concurrent-node-syncs".into(),
                        Why::ReadBy("node-controller and lifecycle-controller"),
                    ));
                }
                1
            }
        }
    }
}

/// Evaluates upstream `--controllers` syntax for one controller.
///
/// `*` enables all default-on controllers (ours is default-on), `name`/`alias` enables, `-name`
/// disables, the first matching entry wins. Names of the other cloud-controllers are accepted
/// (manifests written for the all-in-one CCM list them); anything else is an error.
pub fn controller_enabled(info: &ControllerInfo, spec: &str, problems: &mut Problems) -> bool {
    const KNOWN: &[&str] = &[
        "cloud-node-controller",
        "cloud-node",
        "cloud-node-lifecycle-controller",
        "cloud-node-lifecycle",
        "service-lb-controller",
        "service",
        "node-route-controller",
        "route",
    ];
    let mut decision: Option<bool> = None;
    let mut star = false;
    for raw in spec.split(',') {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            star = true;
            continue;
        }
        let (negated, name) = match entry.strip_prefix('-') {
            Some(n) => (true, n),
            None => (false, entry),
        };
        if !KNOWN.contains(&name) {
            problems.push(format!(
                "--controllers: {name:?} is not in the list of known controllers ({})",
                KNOWN.join(", ")
            ));
            continue;
        }
        if decision.is_none() && (name == info.canonical || name == info.alias) {
            decision = Some(!negated);
        }
    }
    decision.unwrap_or(star)
}
