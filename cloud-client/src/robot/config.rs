//! `ROBOT_*`: HCCM's settings for dedicated (Robot) servers, with its names, defaults and parsing
//! (`internal/config/config.go`): off by default; credentials optional (without them only the
//! load balancers' IP targets work, from the Nodes' own addresses), both or neither; each
//! credential from the variable or, when it is unset, from `<NAME>_FILE`.

use std::time::Duration;

use crate::credentials;
use crate::secret::Secret;
use crate::values::SettingsReader;

/// The Robot webservice's address (ours: HCCM's client has it built in).
pub const DEFAULT_ROBOT_ENDPOINT: &str = "https://robot-ws.your-server.de";

/// `ROBOT_USER` and `ROBOT_PASSWORD` (the user name is treated as a secret too: it is the
/// account's login).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotCredentials {
    pub user: Secret,
    pub password: Secret,
}

/// Everything the Robot provider needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RobotConfig {
    /// `ROBOT_ENABLED` (default false).
    pub enabled: bool,
    /// `ROBOT_USER` + `ROBOT_PASSWORD` (or their `_FILE`s); `None`: no Robot API calls, IP targets
    /// from the Nodes' addresses only.
    pub credentials: Option<RobotCredentials>,
    /// `ROBOT_CACHE_TIMEOUT` (default 5m): how long one server list serves every lookup.
    pub cache_timeout: Duration,
    /// `ROBOT_RATE_LIMIT_WAIT_TIME` (default 0): after a rate-limit answer, no Robot call for
    /// this long (0: until the next cache refresh).
    pub rate_limit_wait: Duration,
    /// `ROBOT_FORWARD_INTERNAL_IPS` (default true, only with Robot enabled): keep the
    /// InternalIPs kubelet's `--node-ip` reports on Robot Nodes.
    pub forward_internal_ips: bool,
    /// `ROBOT_ENDPOINT` (ours; HCCM's is fixed): the webservice's base URL.
    pub endpoint: String,
}

impl Default for RobotConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            credentials: None,
            cache_timeout: Duration::from_secs(300),
            rate_limit_wait: Duration::ZERO,
            forward_internal_ips: false,
            endpoint: DEFAULT_ROBOT_ENDPOINT.to_string(),
        }
    }
}

impl RobotConfig {
    /// Reads the `ROBOT_*` variables through `lookup`; every problem is returned, each naming the
    /// variable (never a credential's value).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Vec<String>> {
        let mut settings = SettingsReader::new(&lookup);
        let c = Self::read(&mut settings);
        settings.finish().map(|_| c)
    }

    /// Reads the `ROBOT_*` settings, recording problems and warnings in `settings`.
    pub fn read(settings: &mut SettingsReader) -> Self {
        let mut c = RobotConfig {
            enabled: settings.bool("ROBOT_ENABLED").unwrap_or(false),
            ..Self::default()
        };
        // As HCCM: only meaningful with Robot on.
        c.forward_internal_ips =
            settings.bool("ROBOT_FORWARD_INTERNAL_IPS").unwrap_or(true) && c.enabled;
        if let Some(d) = settings.duration("ROBOT_CACHE_TIMEOUT")
            && !d.is_zero()
        {
            c.cache_timeout = d;
        }
        if let Some(d) = settings.duration("ROBOT_RATE_LIMIT_WAIT_TIME") {
            c.rate_limit_wait = d;
        }
        if let Some(endpoint) = settings.url("ROBOT_ENDPOINT") {
            c.endpoint = endpoint;
        }
        let user = settings.text("ROBOT_USER").map(Secret::new);
        let user = credentials::given("ROBOT_USER", user, settings);
        let password = settings.text("ROBOT_PASSWORD").map(Secret::new);
        let password = credentials::given("ROBOT_PASSWORD", password, settings);
        if c.enabled {
            match (user, password) {
                (Some(user), Some(password)) => {
                    c.credentials = Some(RobotCredentials {
                        user: user.secret,
                        password: password.secret,
                    })
                }
                (None, None) => {}
                (user, _) => {
                    let (set, unset) = if user.is_some() {
                        ("ROBOT_USER", "ROBOT_PASSWORD")
                    } else {
                        ("ROBOT_PASSWORD", "ROBOT_USER")
                    };
                    settings.problem(format!(
                        "ROBOT_ENABLED=true with {set} but not {unset}: set both ROBOT_USER and \
                         ROBOT_PASSWORD (or their _FILE variants), or neither (then load balancers \
                         target Robot Nodes by their own addresses, and Robot Nodes are not \
                         initialized)"
                    ));
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<RobotConfig, Vec<String>> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RobotConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn an_endpoint_the_kubelet_could_not_expand_stops_startup_and_says_why() {
        let err = cfg(&[(
            "ROBOT_ENDPOINT",
            "http://$(CC_SIMULATOR_SERVICE_HOST):$(CC_SIMULATOR_SERVICE_PORT)/robot",
        )])
        .unwrap_err();
        assert_eq!(err.len(), 1, "{err:#?}");
        assert!(
            err[0].starts_with("ROBOT_ENDPOINT=")
                && err[0].contains("still holds $(CC_SIMULATOR_SERVICE_HOST)"),
            "{err:#?}"
        );
    }

    #[test]
    fn defaults_are_hccms() {
        let c = cfg(&[]).unwrap();
        assert!(!c.enabled && !c.forward_internal_ips && c.credentials.is_none());
        assert_eq!(c.cache_timeout, Duration::from_secs(300));
        assert_eq!(c.rate_limit_wait, Duration::ZERO);
        assert_eq!(c.endpoint, DEFAULT_ROBOT_ENDPOINT);
        let on = cfg(&[("ROBOT_ENABLED", "true")]).unwrap();
        assert!(on.enabled && on.forward_internal_ips && on.credentials.is_none());
    }

    #[test]
    fn credentials_from_variables_or_files_never_shown() {
        let file = std::env::temp_dir().join(format!("robot-password-{}", std::process::id()));
        std::fs::write(&file, "s3cret-pass\n").unwrap();
        let c = cfg(&[
            ("ROBOT_ENABLED", "1"),
            ("ROBOT_USER", "#ws+robotuser"),
            ("ROBOT_PASSWORD_FILE", file.to_str().unwrap()),
            ("ROBOT_CACHE_TIMEOUT", "1m"),
            ("ROBOT_RATE_LIMIT_WAIT_TIME", "30s"),
            ("ROBOT_FORWARD_INTERNAL_IPS", "false"),
        ])
        .unwrap();
        std::fs::remove_file(&file).ok();
        let creds = c.credentials.clone().unwrap();
        assert_eq!(
            (creds.user.expose(), creds.password.expose()),
            ("#ws+robotuser", "s3cret-pass")
        );
        assert_eq!(c.cache_timeout, Duration::from_secs(60));
        assert_eq!(c.rate_limit_wait, Duration::from_secs(30));
        assert!(!c.forward_internal_ips);
        let shown = format!("{c:?} {}", creds.password);
        assert!(
            !shown.contains("s3cret") && !shown.contains("robotuser"),
            "{shown}"
        );
    }

    #[test]
    fn one_credential_without_the_other_is_refused_naming_both() {
        let err = cfg(&[("ROBOT_ENABLED", "true"), ("ROBOT_USER", "u")]).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert!(
            err[0].contains("with ROBOT_USER but not ROBOT_PASSWORD") && !err[0].contains("\"u\""),
            "{err:?}"
        );
        // Robot off: credentials are not looked at (HCCM ignores them too).
        assert!(cfg(&[("ROBOT_USER", "u")]).is_ok());
        let err = cfg(&[
            ("ROBOT_ENABLED", "yes"),
            ("ROBOT_CACHE_TIMEOUT", "soon"),
            ("ROBOT_PASSWORD_FILE", "/nonexistent/robot"),
        ])
        .unwrap_err();
        assert_eq!(err.len(), 3, "{err:?}");
    }
}
