//! The values annotations take that are more than a string: the protocol, the algorithm, and
//! where a new load balancer goes.

/// Load-balancer service protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LbProtocol {
    #[default]
    Tcp,
    Http,
    Https,
}

impl LbProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            LbProtocol::Tcp => "tcp",
            LbProtocol::Http => "http",
            LbProtocol::Https => "https",
        }
    }

    /// Case-insensitive: HCCM lowercases `protocol` and `health-check-protocol` before checking
    /// them (`validateServiceProtocol`), so `HTTP` works there and must work here.
    pub(super) fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Some(LbProtocol::Tcp),
            "http" => Some(LbProtocol::Http),
            "https" => Some(LbProtocol::Https),
            _ => None,
        }
    }
}

/// How the load balancer spreads connections over its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbAlgorithm {
    RoundRobin,
    LeastConnections,
}

impl LbAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            LbAlgorithm::RoundRobin => "round_robin",
            LbAlgorithm::LeastConnections => "least_connections",
        }
    }

    /// Case-insensitive like HCCM's `validateAlgorithmType`, which lowercases first, so
    /// `Round_Robin` is accepted.
    pub(super) fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "round_robin" => Some(LbAlgorithm::RoundRobin),
            "least_connections" => Some(LbAlgorithm::LeastConnections),
            _ => None,
        }
    }
}

/// Where a new load balancer is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Location(String),
    NetworkZone(String),
}
