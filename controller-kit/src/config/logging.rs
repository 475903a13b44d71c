//! Log format and level: `--log-format` (upstream's `--logging-format`), and klog's `--v` and
//! `--vmodule` mapped to a tracing filter (`RUST_LOG`, when set, replaces it).

use clap::{Args, ValueEnum};

use super::problems::Problems;

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The logging flags.
#[derive(Args, Debug, Clone, Default)]
pub struct LoggingArgs {
    /// Log format (`--logging-format`, upstream's name, is the same flag).
    #[arg(long, alias = "logging-format", value_enum, default_value_t = LogFormat::Text, env = "LOG_FORMAT")]
    pub log_format: LogFormat,
    /// klog verbosity, mapped to the log level when RUST_LOG is unset: 0-3 info, 4-5 debug, 6 and
    /// more trace.
    #[arg(long = "v", short = 'v')]
    pub verbosity: Option<String>,
    /// klog's per-file verbosity, `pattern=N,...`, mapped to per-module levels when RUST_LOG is
    /// unset: a pattern names a module path (`cloud_client=6`, `service_controller::node_sync=4`);
    /// a trailing `*` is dropped, `-` reads as `_`.
    #[arg(long)]
    pub vmodule: Option<String>,
}

impl LoggingArgs {
    /// The default log filter from `--v` and `--vmodule`.
    pub fn filter(&self, p: &mut Problems) -> String {
        let mut directives = vec![match &self.verbosity {
            Some(v) => klog_level(p.int("--v", v, 0, 100, 0)).to_string(),
            None => "info".to_string(),
        }];
        for entry in self
            .vmodule
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
        {
            if entry.is_empty() {
                continue;
            }
            let parsed = entry.split_once('=').and_then(|(pattern, n)| {
                let module = pattern.trim().trim_end_matches('*').replace('-', "_");
                let level = n.trim().parse::<u64>().ok()?;
                let valid = !module.is_empty()
                    && module
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
                valid.then(|| format!("{module}={}", klog_level(level)))
            });
            match parsed {
                Some(d) => directives.push(d),
                None => p.push(format!(
                    "--vmodule: {entry:?}: expected module=N, e.g. cloud_client=6"
                )),
            }
        }
        directives.join(",")
    }
}

/// klog's `-v` level as a tracing level.
fn klog_level(v: u64) -> &'static str {
    match v {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    }
}
