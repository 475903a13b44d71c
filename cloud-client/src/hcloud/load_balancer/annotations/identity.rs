//! Name, sharing, type and placement.

use super::declaration::{Annotation, Kind, Origin, Section, declare};

declare! {
    section: "Identity and placement";

    /// LB name; default `a` + UID without dashes, truncated to 32.
    NAME = "name" {
        kind: Kind::OwnRule,
        values: "up to 63 characters",
        default: "`a` + the Service UID without dashes, cut to 32 characters (upstream's default name)",
        does: "Name of the load balancer. With the annotation, an existing load balancer is renamed to it (`PUT`), and a load balancer of that name that is not yet ours is adopted by labelling it `hcloud-ccm/service-uid=<UID>` (a `LoadBalancerAdopted` Warning says so when it carried another Service's UID). Without the annotation, the default name is only looked up when a create finds it taken.",
        hccm: "As HCCM: a load balancer found by label keeps its own name unless the annotation asks otherwise.",
    }

    /// Ours: `true` shares the load balancer named by the `name` annotation with every other
    /// Service that shares it by the same name; each Service owns its own listen ports on it.
    SHARED = "shared" {
        kind: Kind::Bool,
        origin: Origin::Ours,
        values: "boolean; needs `name`",
        default: "`false`",
        does: "Ours. Shares the load balancer named by `name` with every other Service that sets `shared: \"true\"` and the same `name`; each Service owns its own listen ports on it. See [Several Services on one load balancer](#several-services-on-one-load-balancer-shared).",
        hccm: "Not in HCCM (hcloud-cloud-controller-manager#277).",
    }

    /// LB type, e.g. `lb11` (env `HCLOUD_LOAD_BALANCERS_TYPE`).
    TYPE = "type" {
        kind: Kind::Text,
        env: Some("HCLOUD_LOAD_BALANCERS_TYPE"),
        values: "a load balancer type: `lb11`, `lb21`, `lb31`, or any other the project's `GET /load_balancer_types` lists",
        default: "env `HCLOUD_LOAD_BALANCERS_TYPE`; without either `lb11`, with a `LoadBalancerTypeUnconfigured` Warning",
        does: "Type of a new load balancer; on an existing one `change_type` when it differs. A deprecated type gets a `LoadBalancerTypeDeprecated` Warning. Also bounds the ports (services: lb11 5, lb21 15, lb31 30) and targets (25, 75, 150): with more eligible nodes the ones that were targets first stay, each other node gets a `MaxTargetsReached` Warning, and the Service a `TargetsLeftOut` Warning and condition reason (still `True`) saying how many nodes get no traffic and the fixes.",
        hccm: "Removing the annotation does not downgrade, as HCCM. An unknown type is refused before the create, listing the known ones.",
    }

    /// Create-only; wins over network-zone when both are set (HCCM), with a warning.
    LOCATION = "location" {
        kind: Kind::Text,
        env: Some("HCLOUD_LOAD_BALANCERS_LOCATION"),
        values: "a location: `fsn1`, `nbg1`, `hel1`, `ash`, `hil`, `sin`, or another the project's `GET /locations` lists",
        default: "env `HCLOUD_LOAD_BALANCERS_LOCATION`",
        does: "Where a new load balancer is created. Create-only: changing it later does nothing. An empty annotation clears the env default.",
        hccm: "When both a location and a network zone are set (by annotation or env), the location wins and a `NetworkZoneIgnored` Warning says so, as HCCM's create does; a location outside that zone is refused. Neither set: refused (`a location … or a network zone`).",
    }

    /// Create-only; ignored (with a warning) when a location is set too.
    NETWORK_ZONE = "network-zone" {
        kind: Kind::Text,
        env: Some("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE"),
        values: "`eu-central`, `us-east`, `us-west`, `ap-southeast` (or another zone of a listed location)",
        default: "env `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`",
        does: "Network zone of a new load balancer when no location is set. Create-only. An empty annotation clears the env default.",
        hccm: "The two env variables together are a configuration error (mutually exclusive), as in HCCM.",
    }

    /// Ours: `true` gives the Service one load balancer per network zone that has eligible nodes,
    /// each targeting its own zone's nodes (env `HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE`).
    ONE_PER_NETWORK_ZONE = "one-per-network-zone" {
        kind: Kind::Bool,
        env: Some("HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE"),
        origin: Origin::Ours,
        values: "boolean; not with `shared`",
        default: "env `HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE` (chart: `hcloud.loadBalancers.onePerNetworkZone`); else `false`",
        does: "Ours. For a cluster whose nodes are in several network zones: besides the load balancer placed by `location` / `network-zone` (the home one, which keeps the name), one more in each other zone that has eligible nodes, named `<name>-<zone>` and labelled `hcloud-ccm/service-uid=<UID>-<zone>`, each targeting its own zone's nodes with the same services. `status.loadBalancer.ingress` lists the home load balancer's addresses first, then each zone's. A zone that loses its last eligible node has its addresses taken out of the status first; its load balancer is deleted by the next reconcile, at the latest the drift check (`--load-balancer-drift-check-period`), so a client's DNS can follow. Removing the annotation does the same for every zone's load balancer. See [docs/running.md](running.md#a-cluster-across-network-zones).",
        hccm: "Not in HCCM, which makes one load balancer and cannot target servers of another zone.",
    }

    /// `round_robin` | `least_connections`, any case.
    ALGORITHM_TYPE = "algorithm-type" {
        kind: Kind::OwnRule,
        env: Some("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE"),
        values: "`round_robin`, `least_connections` (any case)",
        default: "env `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`; else the load balancer's own (API default `round_robin`)",
        does: "`change_algorithm` when it differs.",
        hccm: "Lowercased before checking, as HCCM.",
    }
}
