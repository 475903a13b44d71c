//! Every problem of a configuration, reported at once: one bad value never hides the others.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use cloud_client::values::{BOOL_EXPECTED, parse_bool, parse_go_duration};

/// Every problem found in the configuration, reported at once.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// One line per problem.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid configuration ({} problem(s)):",
            self.problems.len()
        )?;
        for p in &self.problems {
            writeln!(f, "  - {p}")?;
        }
        Ok(())
    }
}

/// Collects configuration problems; controller crates use it for their own flags too.
#[derive(Debug, Default)]
pub struct Problems(pub(super) Vec<String>);

impl Problems {
    /// Records a problem.
    pub fn push(&mut self, problem: impl Into<String>) {
        self.0.push(problem.into());
    }
    /// Parses a Go duration (`500ms`, `15s`, `5m`, `1h30m`); records a problem and returns `fallback` on error.
    pub fn duration(&mut self, flag: &str, value: &str, fallback: Duration) -> Duration {
        match parse_go_duration(value) {
            Ok(d) => d,
            Err(e) => {
                self.push(format!("{flag}={value:?}: {e}"));
                fallback
            }
        }
    }
    /// Parses a positive duration.
    pub fn positive_duration(&mut self, flag: &str, value: &str, fallback: Duration) -> Duration {
        let d = self.duration(flag, value, fallback);
        if d.is_zero() {
            self.push(format!("{flag}={value:?}: must be greater than zero"));
            return fallback;
        }
        d
    }
    /// Parses an integer in `min..=max`.
    pub fn int(&mut self, flag: &str, value: &str, min: u64, max: u64, fallback: u64) -> u64 {
        match value.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            Ok(n) => {
                self.push(format!("{flag}={n}: must be between {min} and {max}"));
                fallback
            }
            Err(_) => {
                self.push(format!("{flag}={value:?}: not a non-negative integer"));
                fallback
            }
        }
    }
    /// Parses a boolean the way Go's `strconv.ParseBool` does.
    pub fn bool(&mut self, flag: &str, value: &str, fallback: bool) -> bool {
        match parse_bool(value) {
            Some(b) => b,
            None => {
                self.push(format!("{flag}={value:?}: not {BOOL_EXPECTED}"));
                fallback
            }
        }
    }
    /// True when no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// `Ok(value)` when no problem was recorded, else the combined error.
    pub fn finish<T>(self, value: T) -> Result<T, ConfigError> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(ConfigError { problems: self.0 })
        }
    }
}

/// `host:port` or `:port` (all interfaces), as Go's listeners take it.
pub(super) fn parse_listen_address(name: &str, value: &str) -> Result<SocketAddr, String> {
    let v = value.trim();
    let full = if v.starts_with(':') {
        format!("0.0.0.0{v}")
    } else {
        v.to_string()
    };
    full.parse::<SocketAddr>()
        .map_err(|_| format!("{name}={value:?}: expected host:port or :port"))
}
