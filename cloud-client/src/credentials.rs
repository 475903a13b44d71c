//! The API token a client sends, replaceable while the process runs.
//!
//! A token given as a file (Hetzner's `HCLOUD_TOKEN_FILE`) is usually a mounted Secret, which the kubelet rewrites in
//! place when the Secret changes. [`Credentials::watch_file`] reads the file again every poll
//! interval and swaps the token in: a call already sent finishes with the token it was sent with,
//! every call after the swap uses the new one. No restart, unlike HCCM.
//!
//! The cloud's verdict on the current token is kept too: a 401 marks it refused (the controllers'
//! `/readyz` fails and a metric says so) until a call with it succeeds or a new token arrives. A
//! 401 answering a call sent with an older token says nothing about the current one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::secret::Secret;
use crate::values::SettingsReader;

/// The current token, the cloud's verdict on it, and every token seen (for redaction).
pub struct Credentials {
    current: RwLock<Current>,
    /// Every token this process has held: none may appear in a message, old ones included.
    seen: Mutex<Vec<Secret>>,
    /// Whether the cloud refused the current token (401), until a call with it succeeds.
    refused: AtomicBool,
    rotations: AtomicU64,
    /// The file the token is read from, when it came from one.
    file: Option<TokenFile>,
}

/// Where a token is read from, and the setting that named the file (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile {
    pub path: PathBuf,
    /// The provider's name for the setting, e.g. `HCLOUD_TOKEN_FILE`.
    pub setting: &'static str,
}

#[derive(Clone)]
struct Current {
    token: Secret,
    /// Bumped by every rotation; tells a verdict on an old token from one on the current token.
    generation: u64,
}

/// The token one call is sent with, and which one it was (`Debug` shows no token).
#[derive(Debug, Clone)]
pub struct InUse {
    pub(crate) token: Secret,
    generation: u64,
}

/// What [`Credentials::status`] reports for metrics and readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsStatus {
    /// Tokens swapped in since start.
    pub rotations: u64,
    /// The cloud refused the current token (HTTP 401) and no call with it has succeeded since.
    pub refused: bool,
    /// The token's file, when it is read from one.
    pub file: Option<PathBuf>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &"<redacted>")
            .field("status", &self.status())
            .finish()
    }
}

impl Credentials {
    /// Credentials holding `token`, read from `file` if it came from one.
    pub fn new(token: Secret, file: Option<TokenFile>) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Current {
                token: token.clone(),
                generation: 0,
            }),
            seen: Mutex::new(vec![token]),
            refused: AtomicBool::new(false),
            rotations: AtomicU64::new(0),
            file,
        })
    }

    /// The token to send a call with now.
    pub fn in_use(&self) -> InUse {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        InUse {
            token: current.token.clone(),
            generation: current.generation,
        }
    }

    /// Swaps `token` in if it differs from the current one; `true` when it did.
    pub fn rotate(&self, token: Secret) -> bool {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current.token == token {
            return false;
        }
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if !seen.contains(&token) {
                seen.push(token.clone());
            }
        }
        current.token = token;
        current.generation += 1;
        self.refused.store(false, Ordering::Release);
        self.rotations.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Records the cloud's answer to a call sent with `used`: a 401 refuses the token, any
    /// success accepts it; answers about an older token are ignored. Returns `true` when this
    /// answer newly refuses the current token (the moment to warn, once).
    pub(crate) fn record_answer(&self, used: &InUse, status: u16) -> bool {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        if current.generation != used.generation {
            return false;
        }
        match status {
            401 => !self.refused.swap(true, Ordering::AcqRel),
            200..=299 => {
                self.refused.store(false, Ordering::Release);
                false
            }
            _ => false,
        }
    }

    /// For metrics and readiness.
    pub fn status(&self) -> CredentialsStatus {
        CredentialsStatus {
            rotations: self.rotations.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Acquire),
            file: self.file.as_ref().map(|f| f.path.clone()),
        }
    }

    /// `s` with every run of 8 or more characters of any token this process has held replaced
    /// by `<redacted>` (see [`crate::scrub`]).
    pub fn redact(&self, s: String) -> String {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        crate::scrub::scrub(&s, seen.iter())
    }

    /// Reads the token file every `poll` and rotates to what it holds, until these credentials
    /// are dropped. An unreadable or empty file, or one holding more than a token, keeps the
    /// current token and is logged (once per distinct problem); so is each rotation.
    pub fn watch_file(self: &Arc<Self>, poll: Duration) {
        let Some(TokenFile { path, setting }) = self.file.clone() else {
            return;
        };
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            let mut last_problem: Option<String> = None;
            loop {
                tick.tick().await;
                let Some(credentials) = Weak::upgrade(&weak) else {
                    return;
                };
                let read = read_secret_file(&path, setting)
                    .and_then(|token| token_problem(setting, &token).map_or(Ok(token), Err));
                match read {
                    Ok(token) => {
                        last_problem = None;
                        if credentials.rotate(token.clone()) {
                            tracing::info!(
                                file = %path.display(),
                                characters = token.len(),
                                "{setting} changed: new calls use the new token"
                            );
                        }
                    }
                    Err(problem) => {
                        if last_problem.as_ref() != Some(&problem) {
                            tracing::warn!(
                                file = %path.display(),
                                "{problem}; keeping the current token"
                            );
                            last_problem = Some(problem);
                        }
                    }
                }
            }
        });
    }
}

/// A credential given as the setting `name` (`value`, kept out of any lookup so that it never
/// travels as a plain string) or, when that is unset, as the content of the file the setting
/// `<name>_FILE` names: HCCM's `LookupEnvWithFile`, and the one reader of credential files here.
/// Both set: the value wins, as in HCCM, with a startup warning naming the file.
pub(crate) fn given(
    name: &str,
    value: Option<Secret>,
    settings: &mut SettingsReader,
) -> Option<Given> {
    let file_setting = format!("{name}_FILE");
    let file = settings.text(&file_setting).map(PathBuf::from);
    match (value.filter(|v| !v.is_empty()), file) {
        (Some(secret), file) => {
            if let Some(path) = file {
                settings.warn(format!(
                    "{name} and {file_setting}={} are both set: using {name}, as HCCM does; \
                     unset one of them",
                    path.display()
                ));
            }
            Some(Given { secret, file: None })
        }
        (None, Some(path)) => match read_secret_file(&path, &file_setting) {
            Ok(secret) => Some(Given {
                secret,
                file: Some(path),
            }),
            Err(problem) => {
                settings.problem(problem);
                None
            }
        },
        (None, None) => None,
    }
}

/// A credential and the file it was read from, if it was.
#[derive(Debug, Clone)]
pub(crate) struct Given {
    pub secret: Secret,
    pub file: Option<PathBuf>,
}

/// The content of the file at `path` (named by the setting `setting`), trimmed; or why it holds
/// no credential. Read at startup and by [`Credentials::watch_file`]; never quotes the content.
pub(crate) fn read_secret_file(path: &Path, setting: &str) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{setting}={}: cannot read: {e}", path.display()))?;
    let secret = Secret::new(text);
    if secret.is_empty() {
        return Err(format!("{setting}={}: the file is empty", path.display()));
    }
    Ok(secret)
}

/// Why `token` (from `setting`) cannot go into an `Authorization` header, if it cannot: a space,
/// newline or control character inside (typically a Secret holding two lines). Never quotes it.
pub(crate) fn token_problem(setting: &str, token: &Secret) -> Option<String> {
    token
        .expose()
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
        .then(|| {
            format!(
                "{setting} holds whitespace or control characters inside the token ({} \
                 characters, value not shown): expected the API token alone",
                token.len()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn a_verdict_on_an_older_token_does_not_touch_the_current_one() {
        let c = Credentials::new(Secret::new(A), None);
        let old = c.in_use();
        assert!(c.rotate(Secret::new(B)));
        assert!(!c.rotate(Secret::new(B)), "the same token is no rotation");
        assert!(
            !c.record_answer(&old, 401),
            "a 401 for A says nothing about B"
        );
        assert!(!c.status().refused);

        let new = c.in_use();
        assert!(c.record_answer(&new, 401), "the first refusal is news");
        assert!(!c.record_answer(&new, 401), "the second is not");
        assert!(c.status().refused);
        assert!(!c.record_answer(&new, 200));
        assert!(!c.status().refused, "a success accepts it again");
        assert_eq!(c.status().rotations, 1);
    }

    #[test]
    fn rotation_clears_a_refusal_and_every_token_seen_is_redacted() {
        let c = Credentials::new(Secret::new(A), None);
        assert!(c.record_answer(&c.in_use(), 401));
        c.rotate(Secret::new(B));
        assert!(!c.status().refused);
        let text = c.redact(format!("sent {A}, then {B}, then half of A: {}", &A[..32]));
        assert_eq!(
            text,
            "sent <redacted>, then <redacted>, then half of A: <redacted>"
        );
        assert!(!format!("{c:?}").contains(A) && !format!("{c:?}").contains(B));
    }

    #[test]
    fn token_files_that_hold_no_token_are_refused_without_quoting_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, format!("{A}\n")).unwrap();
        assert!(read_secret_file(&path, "HCLOUD_TOKEN_FILE").unwrap() == Secret::new(A));
        std::fs::write(&path, "\n").unwrap();
        assert!(
            read_secret_file(&path, "HCLOUD_TOKEN_FILE")
                .unwrap_err()
                .contains("the file is empty")
        );
        std::fs::write(&path, format!("{A}\n{B}\n")).unwrap();
        let two = read_secret_file(&path, "HCLOUD_TOKEN_FILE").unwrap();
        let e = token_problem("HCLOUD_TOKEN_FILE", &two).unwrap();
        assert!(!e.contains(A) && e.contains("129 characters"), "{e}");
        let e = read_secret_file(&dir.path().join("missing"), "HCLOUD_TOKEN_FILE").unwrap_err();
        assert!(
            e.contains("HCLOUD_TOKEN_FILE=") && e.contains("cannot read"),
            "{e}"
        );
    }
}
