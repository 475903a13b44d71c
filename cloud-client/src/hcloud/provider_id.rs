//! HCCM-compatible providerIDs (see docs/upstream-behavior.md, "providerIDs").

use crate::error::CloudError;

const CLOUD_PREFIX: &str = "hcloud://";
const ROBOT_PREFIX: &str = "hrobot://";
/// Legacy Syself-fork Robot format; must be checked before the plain `hcloud://` prefix.
const LEGACY_ROBOT_PREFIX: &str = "hcloud://bm-";

/// A parsed providerID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderId {
    /// `hcloud://<id>`: a Cloud server.
    Cloud(i64),
    /// `hrobot://<n>` or `hcloud://bm-<n>`: a Robot (dedicated) server.
    Robot(i64),
}

/// A Hetzner Cloud server or a dedicated (Robot) one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Cloud,
    Robot,
}

impl ProviderId {
    /// Parses a providerID; anything that is not a Hetzner format is `InvalidInput`.
    pub fn parse(s: &str) -> Result<Self, CloudError> {
        let bad = |expected: &str| CloudError::invalid_input("spec.providerID", s, expected);
        if let Some(rest) = s.strip_prefix(LEGACY_ROBOT_PREFIX) {
            return parse_id(rest)
                .map(ProviderId::Robot)
                .ok_or_else(|| bad("hcloud://bm-<server number>"));
        }
        if let Some(rest) = s.strip_prefix(ROBOT_PREFIX) {
            return parse_id(rest)
                .map(ProviderId::Robot)
                .ok_or_else(|| bad("hrobot://<server number>"));
        }
        if let Some(rest) = s.strip_prefix(CLOUD_PREFIX) {
            return parse_id(rest)
                .map(ProviderId::Cloud)
                .ok_or_else(|| bad("hcloud://<server id>"));
        }
        Err(bad(
            "hcloud://<server id> (or hrobot://<n>, hcloud://bm-<n>)",
        ))
    }

    /// Which kind of server a providerID names, by its prefix alone (a malformed number still
    /// says which API it belongs to); `None`: not a Hetzner providerID.
    pub fn kind(s: &str) -> Option<ServerKind> {
        if s.starts_with(ROBOT_PREFIX) || s.starts_with(LEGACY_ROBOT_PREFIX) {
            Some(ServerKind::Robot)
        } else if s.starts_with(CLOUD_PREFIX) {
            Some(ServerKind::Cloud)
        } else {
            None
        }
    }

    /// The providerID of a dedicated server (HCCM writes `hrobot://`).
    pub fn robot(number: i64) -> String {
        format!("{ROBOT_PREFIX}{number}")
    }

    /// The providerID of a Cloud server.
    pub fn cloud(id: i64) -> String {
        format!("{CLOUD_PREFIX}{id}")
    }

    /// The Cloud server id, or `Unsupported` for Robot servers (not implemented by this provider).
    pub fn cloud_id(s: &str) -> Result<i64, CloudError> {
        match Self::parse(s)? {
            ProviderId::Cloud(id) => Ok(id),
            ProviderId::Robot(n) => Err(CloudError::unsupported(format!(
                "providerID {s:?} names Robot (dedicated) server {n}; Robot servers are not supported by this provider"
            ))),
        }
    }
}

fn parse_id(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_hetzner_formats() {
        assert_eq!(
            ProviderId::parse("hcloud://123").unwrap(),
            ProviderId::Cloud(123)
        );
        assert_eq!(
            ProviderId::parse("hrobot://456").unwrap(),
            ProviderId::Robot(456)
        );
        assert_eq!(
            ProviderId::parse("hcloud://bm-789").unwrap(),
            ProviderId::Robot(789)
        );
        assert_eq!(ProviderId::cloud(42), "hcloud://42");
    }

    #[test]
    fn rejects_garbage_with_a_clear_error() {
        for bad in [
            "",
            "hcloud://",
            "hcloud://abc",
            "hcloud://-1",
            "hcloud://0",
            "aws:///i-123",
            "hcloud:/1",
            "hcloud://1 ",
        ] {
            let e = ProviderId::parse(bad).unwrap_err();
            assert!(matches!(e, CloudError::InvalidInput { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("spec.providerID"), "{e}");
        }
    }

    #[test]
    fn robot_is_unsupported_not_missing() {
        for robot in ["hrobot://1", "hcloud://bm-2"] {
            let e = ProviderId::cloud_id(robot).unwrap_err();
            assert!(matches!(e, CloudError::Unsupported { .. }), "{e}");
            assert!(!e.is_not_found());
            assert!(e.to_string().contains("Robot"));
        }
        assert_eq!(ProviderId::cloud_id("hcloud://9").unwrap(), 9);
    }
}
