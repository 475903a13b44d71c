//! One redacted string type for every credential: the Cloud API token, the Robot user and
//! password. Its `Debug` and `Display` never show the value; only the clients that send it read it.

use std::fmt;

/// A credential. Surrounding whitespace is dropped on the way in (a Secret made with
/// `--from-file`, or a mounted key, usually ends in a newline).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value, trimmed.
    pub fn new(value: impl AsRef<str>) -> Self {
        Secret(value.as_ref().trim().to_string())
    }

    /// The value itself: for the clients that put it on the wire, and nothing else.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Length in characters (Hetzner tokens are 64 characters; HCCM only warns otherwise).
    pub fn len(&self) -> usize {
        self.0.chars().count()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}
