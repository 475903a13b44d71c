//! What a VM says about its Node, decided without I/O: the VM's state as the lifecycle sees it,
//! and the Node's providerID, labels and addresses, equal to upstream's wherever upstream's are
//! valid, so that switching writes no Node change.

use std::collections::BTreeMap;

use super::provider_id;
use super::wire::VirtualMachine;
use crate::capabilities::{AddressKind, InstanceMetadata, NodeAddress, Warning};

/// The Warning's reason when a cloud value cannot be a label value.
pub const LABEL_VALUE_INVALID: &str = "CloudValueNotALabel";

/// A VM's state, as far as the Node's lifecycle cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Running, starting, migrating, in error, or a state this provider does not know: the VM
    /// is there and not known to be off.
    On,
    /// `Stopping`: going down, not down yet. A stop can fail and leave the VM running, and the
    /// next monitor pass sees `Stopped` a few seconds later; so no shutdown taint yet.
    Stopping,
    /// `Stopped`: the VM is off (its Node gets the shutdown taint).
    Off,
    /// `Destroyed` or `Expunging`: the VM is gone (its Node is deleted). A destroyed VM can be
    /// recovered until it is expunged; its kubelet then registers the Node again.
    Gone,
}

impl Power {
    /// `state` as `listVirtualMachines` writes it (any case).
    pub fn of(state: &str) -> Power {
        match state.to_ascii_lowercase().as_str() {
            "stopped" => Power::Off,
            "stopping" => Power::Stopping,
            "destroyed" | "expunging" => Power::Gone,
            _ => Power::On,
        }
    }
}

/// Upstream's instance type: the service offering's name with every character outside
/// `[A-Za-z0-9]` deleted (`"CKS Instance (2 vCPU, 2GB)"` → `CKSInstance2vCPU2GB`).
pub fn instance_type(offering: &str) -> String {
    offering
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// Whether `v` may be a label value: at most 63 characters, alphanumerics with `-`, `_`, `.`
/// inside.
pub fn label_value_ok(v: &str) -> bool {
    let inner_ok = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    v.len() <= 63
        && inner_ok
        && (v.is_empty()
            || (v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())))
}

/// The Node's metadata from its VM; `region` is the configured one (else the zone's name).
pub(crate) fn of(vm: &VirtualMachine, node: &str, region: Option<&str>) -> InstanceMetadata {
    let mut warnings = Vec::new();
    let mut label = |what: &str, value: String| -> Option<String> {
        if value.is_empty() {
            return None;
        }
        if label_value_ok(&value) {
            return Some(value);
        }
        warnings.push(Warning::on_node(
            node,
            LABEL_VALUE_INVALID,
            format!(
                "the {what} {value:?} of VM {} is not a valid label value (at most 63 \
                 characters: letters, digits, '-', '_', '.'); the Node gets no {what} label",
                vm.id
            ),
        ));
        None
    };
    let instance_type = label("instance type", instance_type(&vm.serviceofferingname));
    let zone = label("zone", vm.zonename.clone());
    let region = match region {
        Some(r) => label("region", r.to_owned()),
        None => zone.clone(),
    };
    InstanceMetadata {
        provider_id: provider_id::of(&vm.id),
        instance_type: instance_type.unwrap_or_default(),
        zone,
        region,
        addresses: addresses(vm),
        additional_labels: BTreeMap::new(),
        stated_by_node: Vec::new(),
        warnings,
    }
}

/// Upstream's addresses, in its order: the first NIC's address as InternalIP, then the
/// static-NAT public address as ExternalIP.
///
/// Upstream also reports the VM's `hostname` as the Node's Hostname, but in a CloudStack answer
/// that is the hypervisor host the VM runs on (and only admin keys see it). None is reported
/// here: node-controller then keeps the Node's own Hostname (the kubelet's, or what upstream
/// wrote), as upstream's cloud-provider does when the cloud gives none. So a Node upstream
/// initialized keeps every address it has (0 writes on a switch), and a new Node gets its own
/// name instead of a hypervisor's, which changed whenever the VM migrated.
///
/// Upstream reads only the IPv4 address and gives an empty InternalIP for a NIC without one;
/// here such a NIC's IPv6 address is the InternalIP (no Node upstream initialized has a valid
/// address there to keep).
pub(crate) fn addresses(vm: &VirtualMachine) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    if let Some(nic) = vm.nic.first() {
        let ip = [&nic.ipaddress, &nic.ip6address]
            .into_iter()
            .flatten()
            .find(|ip| !ip.is_empty());
        if let Some(ip) = ip {
            out.push(NodeAddress::new(AddressKind::InternalIP, ip.clone()));
        }
    }
    if let Some(ip) = vm.publicip.as_ref().filter(|ip| !ip.is_empty()) {
        out.push(NodeAddress::new(AddressKind::ExternalIP, ip.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudstack::wire::Nic;

    fn vm() -> VirtualMachine {
        VirtualMachine {
            id: "6b1c0c0e-0000-4000-8000-000000000001".into(),
            name: "worker-1".into(),
            state: "Running".into(),
            zonename: "zone-1".into(),
            serviceofferingname: "Medium Instance".into(),
            publicip: Some("203.0.113.5".into()),
            nic: vec![
                Nic {
                    ipaddress: Some("10.1.0.11".into()),
                    ..Default::default()
                },
                Nic {
                    ipaddress: Some("10.9.0.11".into()),
                    isdefault: true,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn instance_types_are_sanitized_exactly_as_upstream() {
        for (offering, want) in [
            ("Medium Instance", "MediumInstance"),
            ("m1.small", "m1small"),
            ("2vCPU-4GB", "2vCPU4GB"),
            ("CKS Instance (2 vCPU, 2GB)", "CKSInstance2vCPU2GB"),
            ("Große", "Groe"),
        ] {
            assert_eq!(instance_type(offering), want, "{offering}");
        }
    }

    #[test]
    fn states_map_to_what_the_lifecycle_does() {
        assert_eq!(Power::of("Stopped"), Power::Off);
        assert_eq!(Power::of("stopping"), Power::Stopping);
        for s in ["Destroyed", "Expunging"] {
            assert_eq!(Power::of(s), Power::Gone, "{s}");
        }
        for s in ["Running", "Starting", "Migrating", "Error", "Unknown", ""] {
            assert_eq!(Power::of(s), Power::On, "{s}");
        }
    }

    #[test]
    fn metadata_is_upstreams_providerid_labels_and_addresses() {
        let m = of(&vm(), "worker-1", None);
        assert_eq!(
            m.provider_id,
            "external-cloudstack://6b1c0c0e-0000-4000-8000-000000000001"
        );
        assert_eq!(m.instance_type, "MediumInstance");
        assert_eq!(m.zone.as_deref(), Some("zone-1"));
        assert_eq!(
            m.region.as_deref(),
            Some("zone-1"),
            "no region: the zone's name"
        );
        let shown: Vec<String> = m
            .addresses
            .iter()
            .map(|a| format!("{}={}", a.kind, a.address))
            .collect();
        // The first NIC, not the default one; no Hostname (see `addresses`).
        assert_eq!(shown, ["InternalIP=10.1.0.11", "ExternalIP=203.0.113.5"]);
        assert!(m.warnings.is_empty());
        assert_eq!(
            of(&vm(), "worker-1", Some("eu-west")).region.as_deref(),
            Some("eu-west")
        );
    }

    #[test]
    fn a_value_no_label_may_hold_is_left_out_and_said() {
        let mut v = vm();
        v.zonename = "Zone A".into();
        v.serviceofferingname = "x".repeat(64);
        let m = of(&v, "worker-1", None);
        assert_eq!((m.zone, m.region), (None, None));
        assert_eq!(m.instance_type, "");
        assert_eq!(m.warnings.len(), 2);
        assert!(
            m.warnings[1].message.contains("\"Zone A\""),
            "{:?}",
            m.warnings
        );
        assert_eq!(m.warnings[0].node.as_deref(), Some("worker-1"));
        for ok in ["zone-1", "a", "", "A_b.c-9"] {
            assert!(label_value_ok(ok), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "é"] {
            assert!(!label_value_ok(bad), "{bad}");
        }
    }

    #[test]
    fn an_ipv6_only_nic_and_no_nic() {
        let mut v = vm();
        v.nic = vec![Nic {
            ip6address: Some("fd00::5".into()),
            ..Default::default()
        }];
        v.publicip = None;
        assert_eq!(
            addresses(&v),
            [NodeAddress::new(AddressKind::InternalIP, "fd00::5")]
        );
        v.nic.clear();
        assert!(addresses(&v).is_empty());
    }
}
