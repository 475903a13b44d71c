//! Value parsers shared by env vars, flags and Service annotations, matching Go's semantics so the
//! same strings that HCCM and upstream accept are accepted here. The one place that parses them.

use std::time::Duration;

/// Go `strconv.ParseBool`.
pub const BOOL_EXPECTED: &str =
    "a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)";
/// What [`parse_duration`] accepts.
pub const DURATION_EXPECTED: &str =
    "a duration: whole seconds (\"15\") or a Go duration (\"15s\", \"1m\", \"500ms\", \"1m30s\")";

/// The `$(NAME)` references left in variable `var`'s `value`, as a problem to report, or `None`.
///
/// The kubelet replaces `$(NAME)` in a container's variable with a variable it knows when it starts
/// the container: the container's own earlier ones and, with `enableServiceLinks` (the default),
/// `<SERVICE>_SERVICE_HOST`/`_PORT` of each Service of the pod's namespace that exists by then
/// (its makeEnvironmentVariables). A name it does not know stays as written. The chart points the
/// controllers at its in-cluster simulator that way (no cluster DNS needed); a pod that started
/// before the Service existed gets the literal text. Exiting on it lets the kubelet start the
/// container again, then with the variable.
pub fn unexpanded_reference(var: &str, value: &str) -> Option<String> {
    let names: Vec<&str> = value
        .split("$(")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(name, _)| name))
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        })
        .collect();
    if names.is_empty() {
        return None;
    }
    let listed = names
        .iter()
        .map(|n| format!("$({n})"))
        .collect::<Vec<_>>()
        .join(", ");
    // <SERVICE>_SERVICE_HOST/_PORT name a Service: its name upper-cased, `-` as `_`.
    let mut services: Vec<String> = names
        .iter()
        .filter_map(|n| {
            n.strip_suffix("_SERVICE_HOST")
                .or_else(|| n.strip_suffix("_SERVICE_PORT"))
        })
        .map(|s| s.to_ascii_lowercase().replace('_', "-"))
        .collect();
    services.dedup();
    let check = if services.is_empty() {
        "check where the variables should come from".to_owned()
    } else {
        format!(
            "check that Service {} exists in the pod's namespace",
            services.join(", ")
        )
    };
    Some(format!(
        "{var}={value:?} still holds {listed}: the kubelet replaces $(NAME) only with a variable it \
         knows when it starts the container, and it knew none of that name. A Service's \
         <NAME>_SERVICE_HOST and _SERVICE_PORT exist only for a Service in the pod's namespace that \
         existed when the container started, and only when the pod's enableServiceLinks is not \
         false. Exiting, so that the kubelet starts the container again with the variables; if this \
         repeats, {check}"
    ))
}

/// Reads a provider's settings by name, collecting every problem (each naming the setting and its
/// value) and every startup warning instead of stopping at the first. An empty or blank value counts
/// as unset, as in HCCM (whose templates render `HCLOUD_NETWORK=""` when no network is set).
pub struct SettingsReader<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<String>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for SettingsReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsReader")
            .field("problems", &self.problems)
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl<'a> SettingsReader<'a> {
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            lookup,
            problems: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The setting's value, trimmed; `None` when unset or blank.
    pub fn text(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The setting parsed by `parse`; when it does not parse, the problem
    /// `NAME="value": <what>` is recorded and `None` returned.
    pub fn parsed<T>(
        &mut self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
        what: &str,
    ) -> Option<T> {
        let value = self.text(name)?;
        let parsed = parse(&value);
        if parsed.is_none() {
            self.problem(format!("{name}={value:?}: {what}"));
        }
        parsed
    }

    /// A boolean as Go's `strconv.ParseBool` reads it.
    pub fn bool(&mut self, name: &str) -> Option<bool> {
        self.parsed(name, parse_bool, &format!("not {BOOL_EXPECTED}"))
    }

    /// A duration ([`parse_duration`]).
    pub fn duration(&mut self, name: &str) -> Option<Duration> {
        self.parsed(
            name,
            parse_duration,
            &format!("expected {DURATION_EXPECTED}"),
        )
    }

    /// An http:// or https:// base URL, without trailing slash.
    pub fn url(&mut self, name: &str) -> Option<String> {
        let value = self.text(name)?;
        if let Some(problem) =
            unexpanded_reference(name, &value).or_else(|| url_problem(name, &value))
        {
            self.problem(problem);
        }
        Some(value.trim_end_matches('/').to_owned())
    }

    pub fn problem(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    /// Something accepted that deserves a word at startup.
    pub fn warn(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }

    /// The warnings, or every problem found.
    pub fn finish(self) -> Result<Vec<String>, Vec<String>> {
        if self.problems.is_empty() {
            Ok(self.warnings)
        } else {
            Err(self.problems)
        }
    }
}

/// Why `value` of setting `name` is no http:// or https:// URL, if it is not.
pub fn url_problem(name: &str, value: &str) -> Option<String> {
    (!(value.starts_with("http://") || value.starts_with("https://")))
        .then(|| format!("{name}={value:?}: must be an http:// or https:// URL"))
}

/// Go `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Accepts a bare integer (seconds; HCCM documents several annotations and variables as ints) or a
/// Go duration string ([`parse_go_duration`]).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    parse_go_duration(s).ok()
}

/// Go's `time.ParseDuration` for non-negative values (`300ms`, `15s`, `1m`, `1h2m3.5s`; units ns,
/// us, µs, ms, s, m, h; `0` alone), as upstream's duration flags take them: a bare number other
/// than 0 is an error, as in Go. The error says what is accepted.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with('-') {
        return Err("negative duration".into());
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {s:?} (e.g. 15s, 5m, 500ms)"))?;
        if num_len == 0 {
            return Err(format!("invalid duration {s:?} (e.g. 15s, 5m, 500ms)"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid number in duration {s:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => {
                return Err(format!(
                    "unknown unit {u:?} in duration {s:?} (ns, us, ms, s, m, h)"
                ));
            }
        };
        rest = &rest[unit_len..];
        total += value * factor;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("duration {s:?} out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unexpanded_kubelet_references_are_named() {
        let endpoint = "http://$(CC_SIMULATOR_SERVICE_HOST):$(CC_SIMULATOR_SERVICE_PORT)/v1";
        let problem = unexpanded_reference("HCLOUD_ENDPOINT", endpoint).unwrap();
        assert!(
            problem.starts_with(&format!(
                "HCLOUD_ENDPOINT={endpoint:?} still holds $(CC_SIMULATOR_SERVICE_HOST), \
                 $(CC_SIMULATOR_SERVICE_PORT): the kubelet replaces $(NAME)"
            )),
            "{problem}"
        );
        assert!(problem.contains("enableServiceLinks"), "{problem}");
        assert!(
            problem.ends_with("check that Service cc-simulator exists in the pod's namespace"),
            "{problem}"
        );
        for fine in [
            "http://10.96.0.12:8080/v1",
            "https://api.hetzner.cloud/v1",
            "http://x/$(",
            "http://x/$()",
        ] {
            assert_eq!(
                unexpanded_reference("HCLOUD_ENDPOINT", fine),
                None,
                "{fine}"
            );
        }
    }

    #[test]
    fn bools_like_go() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["", "yes", "tRuE", "2", " true"] {
            assert_eq!(parse_bool(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_accept_ints_and_go_strings() {
        assert_eq!(parse_duration("15"), Some(Duration::from_secs(15)));
        assert_eq!(parse_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "s", "15x", "-1s", "abc", "1.2.3s"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn go_durations_refuse_bare_numbers_and_say_what_is_accepted() {
        assert_eq!(parse_go_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        let err = parse_go_duration("15").unwrap_err();
        assert!(
            err.contains("missing unit") && err.contains("e.g. 15s"),
            "{err}"
        );
        assert!(
            parse_go_duration("5x")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert_eq!(parse_go_duration("-5s").unwrap_err(), "negative duration");
        assert_eq!(parse_go_duration("").unwrap_err(), "empty duration");
    }
}
