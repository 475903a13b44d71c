//! Upstream's providerIDs: `external-cloudstack://<VM id>`.

use crate::error::CloudError;

/// The provider's name (`--cloud-provider=external-cloudstack`), upstream's, and the
/// providerID's scheme.
pub const PROVIDER_NAME: &str = "external-cloudstack";

/// What every providerID of this provider starts with.
pub const PREFIX: &str = "external-cloudstack://";

/// The providerID of VM `id`.
pub fn of(id: &str) -> String {
    format!("{PREFIX}{id}")
}

/// The VM id of a providerID; anything else is the Node's bad input (`InvalidInput`: never
/// looked up, never deleted).
pub fn vm_id(provider_id: &str) -> Result<&str, CloudError> {
    let bad = || {
        CloudError::invalid_input(
            "spec.providerID",
            provider_id,
            "external-cloudstack://<VM id>",
        )
    };
    let id = provider_id.strip_prefix(PREFIX).ok_or_else(bad)?;
    let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if valid { Ok(id) } else { Err(bad()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providerids_are_upstreams() {
        let id = "6b1c0c0e-0000-4000-8000-000000000001";
        assert_eq!(of(id), format!("external-cloudstack://{id}"));
        assert_eq!(vm_id(&of(id)).unwrap(), id);
        for bad in [
            "external-cloudstack://",
            "external-cloudstack://a/b",
            "hcloud://12",
            id,
            "aws:///eu-west-1a/i-1",
        ] {
            let e = vm_id(bad).unwrap_err();
            assert!(matches!(e, CloudError::InvalidInput { .. }), "{bad}: {e:?}");
        }
    }
}
