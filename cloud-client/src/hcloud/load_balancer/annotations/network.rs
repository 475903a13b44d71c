//! Private network, targets and status.

use super::declaration::{Annotation, Kind, Origin, Section, declare};

declare! {
    section: "Private network, targets and status";

    USE_PRIVATE_IP = "use-private-ip" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"),
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`; else `false`",
        does: "Targets are reached over their private IP in the `HCLOUD_NETWORK` network. Changing it replaces every target.",
        hccm: "`true` without `HCLOUD_NETWORK` is refused before any write (env: at startup).",
    }

    PRIVATE_IPV4 = "private-ipv4" {
        kind: Kind::OwnRule,
        values: "IPv4 address",
        default: "none",
        does: "Fixed IP of the load balancer in the network; a different one is detached and re-attached.",
        hccm: "Without `HCLOUD_NETWORK` it is ignored, as HCCM does, but with a `PrivateNetworkIgnored` Warning.",
    }

    PRIVATE_SUBNET_IP_RANGE = "private-subnet-ip-range" {
        kind: Kind::OwnRule,
        env: Some("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE"),
        values: "IPv4 CIDR of an existing subnet, e.g. `10.0.1.0/24`",
        default: "env `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`",
        does: "Subnet the load balancer's private IP comes from, when it is attached to the network.",
        hccm: "As `private-ipv4`.",
    }

    DISABLE_PUBLIC_NETWORK = "disable-public-network" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"),
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK`; else left as is",
        does: "`true` disables the public interface, `false` enables it. The public IPs stay allocated but leave the Service status.",
        hccm: "",
    }

    DISABLE_PRIVATE_INGRESS = "disable-private-ingress" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS"),
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`; else `false`",
        does: "Leaves the load balancer's private IP out of the Service status (for kube-proxy/IPVS setups that would loop on it).",
        hccm: "",
    }

    IPV6_DISABLED = "ipv6-disabled" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6"),
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`; else `false`",
        does: "Leaves the IPv6 address out of the Service status; the load balancer keeps it.",
        hccm: "",
    }

    HOSTNAME = "hostname" {
        kind: Kind::OwnRule,
        values: "lowercase DNS name, not an IP, e.g. `lb.example.com`",
        default: "none",
        does: "The Service status shows only this hostname instead of the IPs.",
        hccm: "Checked up front: the apiserver refuses anything else, and only after the load balancer exists.",
    }

    IPV4_RDNS = "ipv4-rdns" {
        kind: Kind::HostName,
        values: "host name",
        default: "left as is",
        does: "Reverse DNS of the public IPv4 (`change_dns_ptr` when it differs).",
        hccm: "HCCM documents it as read-only but applies it; so do we.",
    }

    IPV6_RDNS = "ipv6-rdns" {
        kind: Kind::HostName,
        values: "host name",
        default: "left as is",
        does: "Reverse DNS of the public IPv6.",
        hccm: "As `ipv4-rdns`.",
    }

    NODE_SELECTOR = "node-selector" {
        kind: Kind::OwnRule,
        values: "Kubernetes label selector: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`; comma = and",
        default: "all eligible nodes",
        does: "Only matching nodes are targets; others are removed.",
        hccm: "Node label changes are followed at once (they are part of the node-set fingerprint); HCCM re-applies the selector only on its next update.",
    }

    /// Ours (syself's fork's key): `ipv4` | `ipv6` | `dualstack`, which addresses of a dedicated
    /// server are targets (env `HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY`; default: the
    /// Service's `ipFamilies`).
    ROBOT_TARGET_ADDRESS_FAMILY = "robot-target-address-family" {
        kind: Kind::OwnRule,
        env: Some("HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY"),
        origin: Origin::Ours,
        values: "`ipv4`, `ipv6`, `dualstack`",
        default: "env `HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY`; else the Service's `spec.ipFamilies` (`IPv4` in a single-stack cluster)",
        does: "Ours (the key and variable of syself's fork). Which addresses of a dedicated (Robot) server are its IP targets: its main IPv4 and/or the first address of its /64 (with `use-private-ip`: its first InternalIP of each family). An address kube-proxy does not serve the NodePorts on would fail its health check for ever; a target of another family is removed. A Robot server without an address of the family gets a `RobotTargetFamilyMissing` Warning.",
        hccm: "Not in HCCM, which targets a dedicated server's main IPv4 only.",
    }

    /// Ours: with `externalTrafficPolicy: Local`, the targets are only the nodes running a
    /// serving endpoint of the Service (from its EndpointSlices), not every eligible node (env
    /// `HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS`).
    TARGET_NODES_WITH_ENDPOINTS = "target-nodes-with-endpoints" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS"),
        origin: Origin::Ours,
        values: "boolean",
        default: "env `HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS` (chart: `hcloud.loadBalancers.targetNodesWithEndpoints`); else `false`",
        does: "Ours. With `externalTrafficPolicy: Local`, the targets are only the eligible nodes that run a serving endpoint of the Service (its EndpointSlices: ready, or terminating and still serving), so a Service with 3 pods on a 500-node cluster has 3 targets and fits any load balancer type. Endpoint moves reach the load balancer at most once per `--endpoint-sync-window` (default 5s) per Service. With `Cluster`, or on a shared load balancer, it is ignored with an `EndpointTargetsIgnored` Warning.",
        hccm: "Not in HCCM, which targets every node and leaves the nodes without an endpoint to fail their health check.",
    }
}
