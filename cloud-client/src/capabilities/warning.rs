//! What a provider tells the user through a controller without failing the operation.

/// Something the user should see as a Warning Event on the Service (or Node); the operation continued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Event reason, e.g. `UnsupportedProtocolConfigured`, `MaxTargetsReached`.
    pub reason: String,
    pub message: String,
    /// The Node the warning is about (the event goes on that Node); `None` = about the Service.
    pub node: Option<String>,
}

impl Warning {
    /// A warning about the Service.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
            node: None,
        }
    }

    /// A warning about one Node (e.g. it could not be added as a target).
    pub fn on_node(
        node: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            node: Some(node.into()),
            ..Self::new(reason, message)
        }
    }
}
