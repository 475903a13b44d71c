//! Looks through everything the suite captured — every controller log line at every level the
//! scenarios ran with, every Event in the cluster, every `/metrics` page — for the API token (or
//! its first half, should something cut it) and for panics.

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

/// What the scan found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Scan {
    pub files: usize,
    pub events: usize,
    pub metrics: usize,
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

#[derive(Debug, Default)]
pub struct Scanner {
    /// The first half of every token to look for: a log that cut or wrapped one still matches.
    needles: Vec<String>,
    scan: Scan,
}

impl Scanner {
    /// Looks for `token` too in what is scanned from now on.
    pub fn watch(&mut self, token: &str) {
        let needle = token[..token.len() / 2].to_owned();
        if !self.needles.contains(&needle) {
            self.needles.push(needle);
        }
    }

    /// Scans a text captured from `source`.
    pub fn text(&mut self, source: &str, text: &str) {
        if source.ends_with("/metrics") {
            self.scan.metrics += 1;
        }
        for (n, line) in text.lines().enumerate() {
            if self.needles.iter().any(|n| line.contains(n.as_str())) {
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

    pub fn finish(self) -> Scan {
        self.scan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_token_and_panics_without_repeating_them() {
        let token = "t".repeat(32) + &"u".repeat(32);
        let mut s = Scanner::default();
        s.watch(&token);
        s.text(
            "a.log",
            "fine\nAuthorization: Bearer tttttttttttttttttttttttttttttttt…\n",
        );
        s.text("b/metrics", "thread 'main' panicked at src/main.rs:1:1");
        s.text("c.log", &"u".repeat(64));
        let scan = s.finish();
        assert_eq!(scan.token_hits, ["a.log:2"]);
        assert_eq!(scan.panics.len(), 1);
        assert_eq!(scan.metrics, 1);
        assert!(!scan.clean());
        assert!(!format!("{scan:?}").contains(&token[..32]));
    }
}
