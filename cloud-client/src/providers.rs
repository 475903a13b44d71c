//! The providers this crate ships, registered by name. A new provider is one line here (see
//! docs/architecture.md, "How to add a provider").

use std::sync::Arc;

use crate::registry::Registry;

/// Every built-in provider; the first (`hcloud`) is the default `--cloud-provider`.
pub fn builtin() -> Registry {
    Registry::new(vec![
        Arc::new(crate::hcloud::HcloudProvider),
        Arc::new(crate::cloudstack::CloudStackProvider),
    ])
}
