//! Looks through everything the suite captured — every controller log line at every level the
//! scenarios ran with (a container's termination message is the tail of that log), every Event,
//! every Service's and Node's status and conditions, every `/metrics` and `/plan` page — for any
//! run of [`RUN`] characters of a secret (the API tokens, the Robot user and password, the private
//! keys of TLS Secrets), and for panics. A run, not the whole secret: the cloud's own messages quote half the token.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

/// What the scan found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Scan {
    pub files: usize,
    pub events: usize,
    /// `/metrics` and `/plan` pages.
    pub metrics: usize,
    /// Services and Nodes.
    pub objects: usize,
    /// Where the token showed up (never the line itself: that would print it).
    pub token_hits: Vec<String>,
    /// `file: line` of each panic message.
    pub panics: Vec<String>,
}

impl Scan {
    pub fn clean(&self) -> bool {
        self.token_hits.is_empty() && self.panics.is_empty()
    }
}

/// The length of the runs of a secret's characters looked for. The controllers replace every run
/// of 8 or more; 12 leaves no chance that a run of ordinary text matches by accident.
pub const RUN: usize = 12;

#[derive(Debug, Default)]
pub struct Scanner {
    /// Every run of [`RUN`] characters of every secret (a shorter secret whole).
    needles: HashSet<Vec<char>>,
    /// The needles' lengths: [`RUN`], and those of shorter secrets.
    lengths: BTreeSet<usize>,
    scan: Scan,
}

impl Scanner {
    /// Looks for every run of [`RUN`] characters of `secret` too in what is scanned from now on.
    pub fn watch(&mut self, secret: &str) {
        let chars: Vec<char> = secret.chars().collect();
        if chars.is_empty() {
            return;
        }
        let run = RUN.min(chars.len());
        self.lengths.insert(run);
        self.needles
            .extend(chars.windows(run).map(<[char]>::to_vec));
    }

    /// Looks for every run of [`RUN`] characters of a PEM private key's base64 body (its lines
    /// but the `-----` ones, joined), except the runs that are also runs of `public_pem`'s body
    /// (its certificate's: the public key is in both, and the certificate is no secret).
    pub fn watch_private_key(&mut self, key_pem: &str, public_pem: &str) {
        let body = |pem: &str| -> Vec<char> {
            pem.lines()
                .filter(|l| !l.starts_with("-----"))
                .flat_map(|l| l.trim().chars())
                .collect()
        };
        let (key, public) = (body(key_pem), body(public_pem));
        if key.len() < RUN {
            return self.watch(&key.iter().collect::<String>());
        }
        let public: HashSet<&[char]> = public.windows(RUN).collect();
        self.lengths.insert(RUN);
        self.needles.extend(
            key.windows(RUN)
                .filter(|w| !public.contains(w))
                .map(<[char]>::to_vec),
        );
    }

    fn holds_a_secret(&self, line: &str) -> bool {
        let chars: Vec<char> = line.chars().collect();
        self.lengths
            .iter()
            .any(|&n| chars.windows(n).any(|w| self.needles.contains(w)))
    }

    /// Scans a text captured from `source`.
    pub fn text(&mut self, source: &str, text: &str) {
        if source.ends_with("/metrics") || source.ends_with("/plan") {
            self.scan.metrics += 1;
        }
        for (n, line) in text.lines().enumerate() {
            if self.holds_a_secret(line) {
                self.scan.token_hits.push(format!("{source}:{}", n + 1));
            }
            if line.contains("panicked at") {
                self.scan
                    .panics
                    .push(format!("{source}:{}: {}", n + 1, line.trim()));
            }
        }
    }

    /// Scans a log file (missing files count as empty).
    pub fn file(&mut self, path: &std::path::Path) {
        self.scan.files += 1;
        let text = std::fs::read(path).unwrap_or_default();
        self.text(&path.display().to_string(), &String::from_utf8_lossy(&text));
    }

    /// Scans every Event in the cluster, all fields.
    pub async fn events(&mut self, client: &Client) -> anyhow::Result<()> {
        let events: Api<Event> = Api::all(client.clone());
        for e in events.list(&ListParams::default()).await?.items {
            self.scan.events += 1;
            let source = format!(
                "Event {}/{}",
                e.metadata.namespace.as_deref().unwrap_or(""),
                e.metadata.name.as_deref().unwrap_or("")
            );
            self.text(&source, &serde_json::to_string(&e)?);
        }
        Ok(())
    }

    /// Scans every Service and every Node, whole: their conditions (`LoadBalancerReady`,
    /// `NetworkUnavailable`) carry the controllers' error messages.
    pub async fn objects(&mut self, client: &Client) -> anyhow::Result<()> {
        let services: Api<Service> = Api::all(client.clone());
        for s in services.list(&ListParams::default()).await?.items {
            let source = format!(
                "Service {}/{}",
                s.metadata.namespace.as_deref().unwrap_or(""),
                s.metadata.name.as_deref().unwrap_or("")
            );
            self.text(&source, &serde_json::to_string(&s)?);
            self.scan.objects += 1;
        }
        let nodes: Api<Node> = Api::all(client.clone());
        for n in nodes.list(&ListParams::default()).await?.items {
            let source = format!("Node {}", n.metadata.name.as_deref().unwrap_or(""));
            self.text(&source, &serde_json::to_string(&n)?);
            self.scan.objects += 1;
        }
        Ok(())
    }

    pub fn finish(self) -> Scan {
        self.scan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_any_run_of_a_secret_and_panics_without_repeating_them() {
        let token = "Kp3xQ9vLmZ2aB7cD1eF4gH6iJ8kL0mN5oP3qR7sT9uV1wX2yZ4aB6cD8eF0gH2iJ";
        let mut s = Scanner::default();
        s.watch(token);
        s.watch("pw-short");
        s.text(
            "a.log",
            &format!(
                "fine\nLimit of '3600' requests per hour for token '{}...' reached.\n",
                &token[..32]
            ),
        );
        s.text("b/metrics", "thread 'main' panicked at src/main.rs:1:1");
        s.text(
            "c.log",
            &format!("x{}y\n{}", &token[40..52], &token[40..51]),
        );
        s.text("d.log", "user pw-short\n<redacted>");
        let scan = s.finish();
        assert_eq!(scan.token_hits, ["a.log:2", "c.log:1", "d.log:1"]);
        assert_eq!(scan.panics.len(), 1);
        assert_eq!(scan.metrics, 1);
        assert!(!scan.clean());
        assert!(!format!("{scan:?}").contains(&token[..32]));
    }

    #[test]
    fn finds_any_run_of_a_private_keys_base64_but_not_of_its_certificate() {
        let (cert, key) = cloud_sim::test_certs::self_signed(&["shop.example.com"]);
        let mut s = Scanner::default();
        s.watch_private_key(&key, &cert);
        let lines: Vec<&str> = key.lines().filter(|l| !l.starts_with("-----")).collect();
        let joined = lines.concat();
        // 12 characters of the private scalar (after the 48 of the PKCS#8 header every P-256 key
        // shares), and 12 across the first line break, as a log that printed the PEM on one
        // line would show them.
        s.text("a.log", &format!("key={}…", &lines[0][50..62]));
        let seam = lines[0].len();
        s.text(
            "b.log",
            &format!("{{\"k\":\"{}\"}}", &joined[seam - 6..seam + 6]),
        );
        s.text("c.log", &format!("only 11: {}", &lines[0][50..61]));
        s.text("d.log", &cert);
        s.text("e.log", "-----BEGIN PRIVATE KEY-----");
        let scan = s.finish();
        assert_eq!(scan.token_hits, ["a.log:1", "b.log:1"]);
    }
}
