//! What identifies one controller binary.

/// Static identity of one controller binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerInfo {
    /// Binary / crate name, e.g. `node-controller`; Lease name suffix and metric label.
    pub name: &'static str,
    /// Upstream canonical name, e.g. `cloud-node-controller`.
    pub canonical: &'static str,
    /// Upstream alias, e.g. `cloud-node`.
    pub alias: &'static str,
    /// Event reporting component, e.g. `cloud-node-controller`.
    pub component: &'static str,
    /// Default admin port (distinct per controller).
    pub default_admin_port: u16,
    /// Default for `--concurrent-node-syncs`; `None` when this controller does not read it (the
    /// flag is then accepted without effect, and named in the startup Warning when given).
    pub node_syncs_default: Option<u16>,
    /// Whether this controller reads the provider's load-balancer settings. The others never
    /// parse them, so a wrong one stops only the controller it concerns.
    pub reads_load_balancer_settings: bool,
}
