//! Reading annotations: each value with its source (annotation, port-scoped annotation, env
//! default), each bad one collected as an error naming the key, and the value checks they share.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::values::LbProtocol;
use crate::error::CloudError;
use crate::hcloud::load_balancer::annotations as a;
use crate::values::{BOOL_EXPECTED, DURATION_EXPECTED, parse_bool, parse_duration};

pub(super) fn trimmed(v: Option<&str>) -> Option<String> {
    v.map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

pub(super) struct Reader<'a> {
    pub(super) ann: &'a BTreeMap<String, String>,
    pub(super) errors: Vec<CloudError>,
    pub(super) provenance: Provenance,
    /// Reading the spec of this port: its port-scoped annotations come first.
    pub(super) port: Option<u16>,
}

impl<'a> Reader<'a> {
    /// The port-scoped key that sets `key` for the port being read, if there is one.
    pub(super) fn scoped(&self, key: &str) -> Option<String> {
        let port = self.port.filter(|_| a::is_per_port(key))?;
        let k = a::for_port(key, port);
        self.ann.contains_key(&k).then_some(k)
    }

    pub(super) fn raw(&self, key: &str) -> Option<&'a str> {
        let key = self.scoped(key).unwrap_or_else(|| key.to_string());
        self.ann.get(&key).map(String::as_str)
    }

    pub(super) fn record(&mut self, key: &'static str, source: Source) {
        self.provenance.0.insert(key, source);
    }

    /// `value` as read from annotation `key`, recorded as its source when there is one.
    pub(super) fn seen<T>(&mut self, key: &'static str, value: Option<T>) -> Option<T> {
        if value.is_some() {
            self.record(key, Source::Annotation);
        }
        value
    }

    /// The annotation's value, else the env default (recorded as such).
    pub(super) fn or_env<T>(
        &mut self,
        key: &'static str,
        value: Option<T>,
        env: Option<T>,
    ) -> Option<T> {
        if value.is_some() {
            return value;
        }
        if env.is_some() {
            self.record(key, Source::Env);
        }
        env
    }

    /// For on/off env variables, whose "off" is indistinguishable from unset.
    pub(super) fn or_env_flag(
        &mut self,
        key: &'static str,
        value: Option<bool>,
        env: bool,
    ) -> bool {
        self.or_env(key, value, env.then_some(true))
            .unwrap_or(false)
    }

    /// The trimmed value; an empty annotation counts as unset.
    pub(super) fn string(&mut self, key: &'static str) -> Option<String> {
        let v = trimmed(self.raw(key));
        self.seen(key, v)
    }

    pub(super) fn fail(&mut self, key: &str, value: &str, expected: impl Into<String>) {
        let shown = self.scoped(key).unwrap_or_else(|| key.to_string());
        self.errors.push(CloudError::invalid_input(
            format!("annotation {shown}"),
            value,
            expected,
        ));
    }

    pub(super) fn bool(&mut self, key: &'static str) -> Option<bool> {
        let v = self.raw(key)?;
        let r = parse_bool(v.trim());
        if r.is_none() {
            self.fail(key, v, BOOL_EXPECTED);
        }
        self.seen(key, r)
    }

    pub(super) fn duration(
        &mut self,
        key: &'static str,
        min: Duration,
        max: Option<Duration>,
    ) -> Option<Duration> {
        let v = self.raw(key)?;
        match parse_duration(v) {
            Some(d) if d >= min && max.is_none_or(|m| d <= m) && d.subsec_nanos() == 0 => {
                self.seen(key, Some(d))
            }
            _ => {
                let range = match max {
                    Some(m) => format!(
                        " between {}s and {}s, whole seconds",
                        min.as_secs(),
                        m.as_secs()
                    ),
                    None => format!(" of at least {}s, whole seconds", min.as_secs()),
                };
                self.fail(key, v, format!("{DURATION_EXPECTED}{range}"));
                None
            }
        }
    }

    pub(super) fn int<T: std::str::FromStr>(
        &mut self,
        key: &'static str,
        expected: &str,
    ) -> Option<T> {
        let v = self.raw(key)?;
        let r = v.trim().parse::<T>().ok();
        if r.is_none() {
            self.fail(key, v, expected);
        }
        self.seen(key, r)
    }

    pub(super) fn protocol(&mut self, key: &'static str) -> Option<LbProtocol> {
        let v = self.string(key)?;
        let p = LbProtocol::parse(&v);
        if p.is_none() {
            self.fail(key, &v, "tcp, http or https (any case)");
        }
        p
    }

    /// A host name (reverse DNS, health-check domain): the API refuses anything else, and only
    /// after the load balancer exists.
    pub(super) fn host_name(&mut self, key: &'static str) -> Option<String> {
        let v = self.string(key)?;
        if is_dns_name(&v) {
            Some(v)
        } else {
            self.fail(key, &v, HOST_NAME_EXPECTED);
            None
        }
    }

    pub(super) fn csv(&mut self, key: &'static str) -> Vec<String> {
        let v: Vec<String> = self
            .raw(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !v.is_empty() {
            self.record(key, Source::Annotation);
        }
        v
    }

    /// Annotation (even an empty one, which means "none") over env default.
    pub(super) fn string_or_default(
        &mut self,
        key: &'static str,
        default: &Option<String>,
    ) -> Option<String> {
        match self.raw(key) {
            Some(v) => {
                self.record(key, Source::Annotation);
                trimmed(Some(v))
            }
            None => self.or_env(key, None, default.clone()),
        }
    }
}

/// What [`is_dns_name`] accepts.
pub(super) const HOST_NAME_EXPECTED: &str =
    "a host name such as lb.example.com (letters, digits, '-' and '.', labels of at most 63)";

/// RFC 1123 host name: dot-separated labels of ASCII letters, digits and `-` (not first or last),
/// 1-63 characters each, at most 253 in all; one trailing dot is allowed.
pub(super) fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Kubernetes' DNS-1123 subdomain (lowercase, no trailing dot), and not an IP address: what the
/// apiserver accepts as a load balancer ingress hostname.
pub(super) fn is_dns1123_subdomain(s: &str) -> bool {
    is_dns_name(s)
        && !s.ends_with('.')
        && !s.bytes().any(|b| b.is_ascii_uppercase())
        && s.parse::<std::net::IpAddr>().is_err()
}

pub(super) fn is_ipv4_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, len)| {
        ip.parse::<Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
    })
}

/// Where one value of an `LbSpec` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Service annotation (an empty one counts only where it clears an env default).
    Annotation,
    /// Its `HCLOUD_LOAD_BALANCERS_*` default. A plain on/off variable counts only when on, since
    /// off is also the built-in default.
    Env,
    /// Neither: the built-in default, or no value at all.
    Default,
}

/// The [`Source`] of each value, by annotation key (every value has one). Recorded while parsing,
/// so later stages can say where a value came from without reading annotations again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Provenance(BTreeMap<&'static str, Source>);

impl Provenance {
    pub fn of(&self, key: &str) -> Source {
        self.0.get(key).copied().unwrap_or(Source::Default)
    }
}
