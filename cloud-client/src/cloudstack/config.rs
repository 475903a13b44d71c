//! Upstream's cloud-config file (`--cloud-config`, from the Secret `cloudstack-secret`, key
//! `cloud-config`): one `[Global]` section with `api-url`, `api-key`, `secret-key`,
//! `project-id`, `zone`, `region` and `ssl-no-verify`, read as upstream's gcfg reads it (names
//! and section case-insensitive, a key given twice keeps its last value). Upstream refuses an
//! unknown key or section too, but names neither its line nor a missing key; here every problem
//! is listed at once, each with the file, the line number and the line, the value hidden where
//! it may be a credential (`api-key`, `secret-key`, and any unknown key: it may be one misspelt).

use std::path::Path;
use std::time::Duration;

use super::ini::{self, Item, ItemKind};
use crate::retry::RetryPolicy;
use crate::secret::Secret;

/// Every key `[Global]` may hold, as upstream's `CSConfig` declares them.
pub const KEYS: [&str; 7] = [
    "api-url",
    "api-key",
    "secret-key",
    "project-id",
    "zone",
    "region",
    "ssl-no-verify",
];

/// Keys whose values are never shown.
const SECRET_KEYS: [&str; 2] = ["api-key", "secret-key"];

/// Where upstream's deployment mounts the file (for messages).
pub const UPSTREAM_PATH: &str = "/config/cloud-config";

/// The CloudStack provider's configuration: the file's settings, and how the client behaves
/// (not in the file; tests tune it).
#[derive(Debug, Clone, PartialEq)]
pub struct CloudStackConfig {
    /// `api-url`: the API endpoint, e.g. `https://cloud.example.com/client/api`.
    pub api_url: String,
    /// `api-key`.
    pub api_key: Secret,
    /// `secret-key`: signs every request.
    pub secret_key: Secret,
    /// `project-id`: a project's id (or name, resolved once at start): every call is scoped to
    /// it. `None`: the keys' own account.
    pub project_id: Option<String>,
    /// `zone`: a zone's name or id. Nodes are looked up by name in this zone only. `None`: every
    /// zone.
    pub zone: Option<String>,
    /// `region`: the region label of every Node; `None`: each VM's zone name, as upstream.
    pub region: Option<String>,
    /// `ssl-no-verify`: accept any TLS certificate of `api-url`.
    pub ssl_no_verify: bool,
    /// What the file was read from, for messages (`None`: built in code).
    pub source: Option<String>,
    pub client: ClientSettings,
}

/// How the API client behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSettings {
    /// Per request.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    pub jobs: JobPolling,
    pub user_agent: String,
}

impl Default for ClientSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            jobs: JobPolling::default(),
            user_agent: format!(
                "cloud-controllers/{} (external-cloudstack)",
                env!("CARGO_PKG_VERSION")
            ),
        }
    }
}

/// How an async job is polled with `queryAsyncJobResult`: first after `initial`, then after
/// waits growing by `factor` up to `max`, until `timeout` (then the job is reported as not
/// finished; it may still finish later).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobPolling {
    pub initial: Duration,
    pub factor: f64,
    pub max: Duration,
    pub timeout: Duration,
}

impl Default for JobPolling {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(250),
            factor: 2.0,
            max: Duration::from_secs(5),
            timeout: Duration::from_secs(300),
        }
    }
}

impl CloudStackConfig {
    /// A configuration for `api_url` and the key pair, every other setting at its default.
    pub fn new(api_url: impl Into<String>, api_key: Secret, secret_key: Secret) -> Self {
        Self {
            api_url: api_url.into(),
            api_key,
            secret_key,
            project_id: None,
            zone: None,
            region: None,
            ssl_no_verify: false,
            source: None,
            client: ClientSettings::default(),
        }
    }

    /// Reads the cloud-config file at `path`: every problem at once.
    pub fn from_file(path: &Path) -> Result<Self, Vec<String>> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![format!(
                "cannot read the cloud-config file {shown}: {e} (upstream's deployment mounts \
                 the Secret cloudstack-secret, key cloud-config, at {UPSTREAM_PATH})"
            )]
        })?;
        Self::parse(&text, &shown)
    }

    /// Reads a cloud-config's text; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<Self, Vec<String>> {
        let items = match ini::parse(text) {
            Ok(items) => items,
            Err(errors) => {
                let lines: Vec<&str> = text.lines().collect();
                let problems = errors
                    .into_iter()
                    .map(|e| {
                        let shown = lines.get(e.line - 1).map_or(String::new(), |l| shown(l));
                        format!("{source} line {} ({shown:?}): {}", e.line, e.message)
                    })
                    .collect();
                return Err(scrubbed(problems, text));
            }
        };
        let mut reader = Reader {
            source,
            text,
            problems: Vec::new(),
            values: Default::default(),
            global_line: None,
        };
        reader.read(&items);
        let config = reader.finish();
        config.map_err(|problems| scrubbed(problems, text))
    }
}

/// What the file said, collected.
struct Reader<'a> {
    source: &'a str,
    text: &'a str,
    problems: Vec<String>,
    /// Each known key's last value and its line.
    values: std::collections::BTreeMap<&'static str, (usize, Option<String>)>,
    /// The line of the first `[Global]`.
    global_line: Option<usize>,
}

impl Reader<'_> {
    fn read(&mut self, items: &[Item]) {
        // Whether the variables that follow are in `[Global]`.
        let mut in_global = false;
        for item in items {
            match &item.kind {
                ItemKind::Section { name, sub } => {
                    in_global = name.eq_ignore_ascii_case("global") && sub.is_none();
                    if in_global {
                        self.global_line.get_or_insert(item.line);
                    } else {
                        let what = match sub {
                            Some(sub) => format!("subsection \"{sub}\" of [{name}]"),
                            None => format!("section [{name}]"),
                        };
                        self.at(
                            item.line,
                            format!("unknown {what}: the cloud-config has one section, [Global]"),
                        );
                    }
                }
                ItemKind::Variable { name, value } => {
                    let key = KEYS.iter().find(|k| k.eq_ignore_ascii_case(name));
                    match key {
                        _ if self.global_line.is_none() => self.at(
                            item.line,
                            format!(
                                "{:?} is outside any section; it belongs in [Global]",
                                name_shown(name)
                            ),
                        ),
                        // A variable of an unknown section was refused with its section.
                        _ if !in_global => {}
                        Some(key) => {
                            self.values.insert(key, (item.line, value.clone()));
                        }
                        None => self.at(
                            item.line,
                            format!(
                                "unknown key {:?} in [Global]; known keys: {}",
                                name_shown(name),
                                KEYS.join(", ")
                            ),
                        ),
                    }
                }
            }
        }
    }

    /// A problem about `line`, quoting it (its value hidden where it may be a credential).
    fn at(&mut self, line: usize, problem: String) {
        let text = self.text.lines().nth(line - 1).unwrap_or_default();
        self.problems.push(format!(
            "{} line {line} ({:?}): {problem}",
            self.source,
            shown(text)
        ));
    }

    /// The value of `key`: `None` when absent or empty (upstream treats both alike).
    fn text(&mut self, key: &'static str) -> Option<(usize, String)> {
        match self.values.get(key) {
            Some((line, Some(v))) if !v.trim().is_empty() => Some((*line, v.trim().to_owned())),
            Some((line, None)) => {
                let line = *line;
                self.at(line, format!("{key} needs a value (`{key} = …`)"));
                None
            }
            _ => None,
        }
    }

    /// `key`, which must be there: its absence is a problem naming what it is.
    fn required(&mut self, key: &'static str, what: &str) -> Option<(usize, String)> {
        let value = self.text(key);
        if value.is_none() && !self.values.get(key).is_some_and(|(_, v)| v.is_none()) {
            let place = match self.global_line {
                Some(line) => format!("[Global] (line {line})"),
                None => "the file (it has no [Global] section)".to_owned(),
            };
            self.problems
                .push(format!("{}: {place} has no {key}: {what}", self.source));
        }
        value
    }

    fn finish(mut self) -> Result<CloudStackConfig, Vec<String>> {
        let api_url = self.required(
            "api-url",
            "the CloudStack API endpoint, e.g. https://cloud.example.com/client/api",
        );
        if let Some((line, url)) = &api_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            let line = *line;
            self.at(line, "api-url must be an http:// or https:// URL".into());
        }
        let api_key = self.required(
            "api-key",
            "the API key of the account the controllers act as",
        );
        let secret_key = self.required("secret-key", "the secret key that signs its requests");
        let project_id = self.text("project-id").map(|(_, v)| v);
        let zone = self.text("zone").map(|(_, v)| v);
        let region = self.text("region").map(|(_, v)| v);
        let ssl_no_verify = match self.values.get("ssl-no-verify").cloned() {
            None | Some((_, None)) => self.values.contains_key("ssl-no-verify"),
            Some((line, Some(v))) => gcfg_bool(&v).unwrap_or_else(|| {
                self.at(
                    line,
                    "ssl-no-verify must be true/yes/on/1 or false/no/off/0".into(),
                );
                false
            }),
        };
        if !self.problems.is_empty() {
            return Err(self.problems);
        }
        let (Some((_, api_url)), Some((_, api_key)), Some((_, secret_key))) =
            (api_url, api_key, secret_key)
        else {
            return Err(self.problems);
        };
        Ok(CloudStackConfig {
            api_url,
            api_key: Secret::new(api_key),
            secret_key: Secret::new(secret_key),
            project_id,
            zone,
            region,
            ssl_no_verify,
            source: Some(self.source.to_owned()),
            client: ClientSettings::default(),
        })
    }
}

/// gcfg's booleans: `true`/`yes`/`on`/`1` and `false`/`no`/`off`/`0`, in any case.
fn gcfg_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A line as a message may quote it: the value of a credential's key, or of a key that may be a
/// misspelt one (any unknown key), is replaced; a line that is no `key = value` is shown up to
/// its first blank only.
fn shown(line: &str) -> String {
    let line = line.trim();
    if line.starts_with('[') || line.starts_with(';') || line.starts_with('#') {
        return line.to_owned();
    }
    let Some((name, _)) = line.split_once('=') else {
        let name = line.split_whitespace().next().unwrap_or_default();
        return if name == line {
            name_shown(name)
        } else {
            format!("{} <rest not shown>", name_shown(name))
        };
    };
    let name = name.trim();
    if known_plain(name) {
        line.to_owned()
    } else {
        format!("{} = <value not shown>", name_shown(name))
    }
}

/// A key as a message may name it: a name longer than any key is more likely a credential
/// pasted on a line of its own (CloudStack's keys are 86 characters), and is not shown.
pub(crate) fn name_shown(name: &str) -> String {
    if name.chars().count() > 32 {
        format!("<a name of {} characters, not shown>", name.chars().count())
    } else {
        name.to_owned()
    }
}

/// A known key whose value may be shown.
fn known_plain(name: &str) -> bool {
    KEYS.iter()
        .any(|k| k.eq_ignore_ascii_case(name) && !SECRET_KEYS.contains(k))
}

/// `problems` with any 8 characters in a row of a value that may be a credential (any value but
/// a known plain key's, on any line with an `=`, whether the line is valid INI or not) replaced.
fn scrubbed(problems: Vec<String>, text: &str) -> Vec<String> {
    let secrets: Vec<Secret> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(name, _)| !known_plain(name.trim()))
        .map(|(_, value)| Secret::new(value.trim().trim_matches('"')))
        .filter(|s| !s.is_empty())
        .collect();
    problems
        .into_iter()
        .map(|p| crate::scrub::scrub(&p, &secrets))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "[Global]\napi-url = https://cs.example.com/client/api\n\
                      api-key = AKEYakeyAKEYakey\nsecret-key = SKEYskeySKEYskey\n";

    fn problems(text: &str) -> Vec<String> {
        CloudStackConfig::parse(text, "/config/cloud-config").unwrap_err()
    }

    #[test]
    fn upstreams_file_reads_with_its_defaults() {
        let c = CloudStackConfig::parse(OK, "f").unwrap();
        assert_eq!(c.api_url, "https://cs.example.com/client/api");
        assert_eq!(c.api_key, Secret::new("AKEYakeyAKEYakey"));
        assert_eq!(c.secret_key, Secret::new("SKEYskeySKEYskey"));
        assert_eq!((c.project_id, c.zone, c.region), (None, None, None));
        assert!(!c.ssl_no_verify);
        assert!(!format!("{:?}", CloudStackConfig::parse(OK, "f").unwrap()).contains("skey"));
    }

    #[test]
    fn every_key_case_insensitive_and_the_last_value_wins() {
        let text = format!(
            "{OK}[GLOBAL]\nPROJECT-ID = 6a4e0b52-2c8b-4a43-9d5e-5a1b2c3d4e5f\nZone = zone-1\n\
             region = eu\nzone = zone-2\nSSL-No-Verify\n"
        );
        let c = CloudStackConfig::parse(&text, "f").unwrap();
        assert_eq!(
            c.project_id.as_deref(),
            Some("6a4e0b52-2c8b-4a43-9d5e-5a1b2c3d4e5f")
        );
        assert_eq!(c.zone.as_deref(), Some("zone-2"));
        assert_eq!(c.region.as_deref(), Some("eu"));
        assert!(c.ssl_no_verify);
        for (v, want) in [("yes", true), ("On", true), ("0", false), ("FALSE", false)] {
            let c = CloudStackConfig::parse(&format!("{OK}ssl-no-verify = {v}\n"), "f").unwrap();
            assert_eq!(c.ssl_no_verify, want, "{v}");
        }
    }

    #[test]
    fn a_missing_api_url_is_refused_naming_the_section() {
        let text = "[Global]\napi-key = AKEYakeyAKEYakey\nsecret-key = SKEYskeySKEYskey\n";
        assert_eq!(
            problems(text),
            [
                "/config/cloud-config: [Global] (line 1) has no api-url: the CloudStack API \
              endpoint, e.g. https://cloud.example.com/client/api"
            ]
        );
        let empty = problems("; nothing\n");
        assert_eq!(empty.len(), 3, "{empty:?}");
        assert!(empty[0].contains("it has no [Global] section"), "{empty:?}");
    }

    #[test]
    fn unknown_keys_and_sections_are_refused_naming_the_line_with_no_value_shown() {
        let text =
            format!("{OK}secret_key = SKEYskeySKEYskey\nfoo\n[Labels]\nx = 1\n[Global \"two\"]\n");
        let p = problems(&text);
        assert_eq!(
            p,
            [
                "/config/cloud-config line 5 (\"secret_key = <value not shown>\"): unknown key \
                 \"secret_key\" in [Global]; known keys: api-url, api-key, secret-key, \
                 project-id, zone, region, ssl-no-verify",
                "/config/cloud-config line 6 (\"foo\"): unknown key \"foo\" in [Global]; known \
                 keys: api-url, api-key, secret-key, project-id, zone, region, ssl-no-verify",
                "/config/cloud-config line 7 (\"[Labels]\"): unknown section [Labels]: the \
                 cloud-config has one section, [Global]",
                "/config/cloud-config line 9 (\"[Global \\\"two\\\"]\"): unknown subsection \
                 \"two\" of [Global]: the cloud-config has one section, [Global]",
            ]
        );
    }

    #[test]
    fn bad_values_and_syntax_name_the_line_and_never_a_key() {
        let p = problems(&format!(
            "{OK}api-url = cs.example.com\nssl-no-verify = maybe\nzone\n"
        ));
        assert!(
            p[0].contains("line 5 (\"api-url = cs.example.com\")"),
            "{p:?}"
        );
        assert!(p[0].ends_with("api-url must be an http:// or https:// URL"));
        assert!(
            p[1].contains("line 7 (\"zone\"): zone needs a value"),
            "{p:?}"
        );
        assert!(
            p[2].contains("line 6") && p[2].contains("true/yes/on/1"),
            "{p:?}"
        );
        let syntax = problems("[Global]\nsecret-key = \"SKEYskeySKEYskey\n");
        assert_eq!(syntax.len(), 1);
        assert!(
            syntax[0]
                .starts_with("/config/cloud-config line 2 (\"secret-key = <value not shown>\")"),
            "{syntax:?}"
        );
        let outside = problems("api-key = AKEYakeyAKEYakey\n[Global]\n");
        assert!(outside[0].contains("line 1"), "{outside:?}");
        for p in p.iter().chain(&syntax).chain(&outside) {
            assert!(!p.contains("skeySKEY") && !p.contains("akeyAKEY"), "{p}");
        }
    }

    #[test]
    fn a_credential_quoted_anywhere_is_scrubbed() {
        // A line that is not INI is quoted up to its first blank, and a name no key is that long
        // is not shown at all.
        let p =
            problems("[Global]\nAKEYakeyAKEYakey SKEYskeySKEYskey\napi-key = AKEYakeyAKEYakey\n");
        assert!(p.iter().all(|p| !p.contains("SKEYskey")), "{p:?}");
        assert!(p.iter().all(|p| !p.contains("AKEYakey")), "{p:?}");
        let long = "K".repeat(40) + "keykeykey";
        let p = problems(&format!("{OK}{long}\n"));
        assert!(p.iter().all(|p| !p.contains("KKKKKKKK")), "{p:?}");
        assert!(
            p[0].contains("<a name of 49 characters, not shown>"),
            "{p:?}"
        );
    }

    #[test]
    fn an_unreadable_file_says_where_upstream_mounts_it() {
        let p = CloudStackConfig::from_file(Path::new("/nonexistent/cloud-config")).unwrap_err();
        assert!(p[0].contains("/nonexistent/cloud-config"), "{p:?}");
        assert!(p[0].contains("cloudstack-secret"), "{p:?}");
    }
}
