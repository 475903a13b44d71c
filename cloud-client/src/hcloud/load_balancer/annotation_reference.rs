//! The annotation reference: for every key, what it accepts, its default, what it does and how it
//! compares with HCCM. docs/annotations.md's tables, the per-port list and the key count are
//! rendered from it (`cargo xtask docs`); a test fails when the page and this differ, and another
//! when a key of [`annotations::ALL`](super::annotations::ALL) has no entry here.

use super::annotations as a;

/// One section of the page: a heading and its table.
#[derive(Debug)]
pub struct Section {
    pub title: &'static str,
    pub entries: &'static [Entry],
}

/// One annotation's row.
#[derive(Debug)]
pub struct Entry {
    pub key: &'static str,
    pub values: &'static str,
    pub default: &'static str,
    pub does: &'static str,
    pub hccm: &'static str,
}

impl Entry {
    /// A key HCCM reserves and nothing reads: only the HCCM notes say something.
    const RESERVED: Entry = Entry {
        key: "",
        values: "",
        default: "",
        does: "",
        hccm: "",
    };

    fn is_reserved(&self) -> bool {
        self.values.is_empty()
    }

    /// The key without the common prefix, as the page writes it.
    pub fn short_key(&self) -> &'static str {
        self.key.strip_prefix(a::PREFIX).unwrap_or(self.key)
    }
}

/// Every key, by the section of docs/annotations.md it is described in.
pub const REFERENCE: &[Section] = &[
    Section {
        title: "Identity and placement",
        entries: &[
            Entry {
                key: a::NAME,
                values: "up to 63 characters",
                default: "`a` + the Service UID without dashes, cut to 32 characters (upstream's default name)",
                does: "Name of the load balancer. With the annotation, an existing load balancer is renamed to it (`PUT`), and a load balancer of that name that is not yet ours is adopted by labelling it `hcloud-ccm/service-uid=<UID>` (a `LoadBalancerAdopted` Warning says so when it carried another Service's UID). Without the annotation, the default name is only looked up when a create finds it taken.",
                hccm: "As HCCM: a load balancer found by label keeps its own name unless the annotation asks otherwise.",
            },
            Entry {
                key: a::SHARED,
                values: "boolean; needs `name`",
                default: "`false`",
                does: "Ours. Shares the load balancer named by `name` with every other Service that sets `shared: \"true\"` and the same `name`; each Service owns its own listen ports on it. See [Several Services on one load balancer](#several-services-on-one-load-balancer-shared).",
                hccm: "Not in HCCM (hcloud-cloud-controller-manager#277).",
            },
            Entry {
                key: a::TYPE,
                values: "a load balancer type: `lb11`, `lb21`, `lb31`, or any other the project's `GET /load_balancer_types` lists",
                default: "env `HCLOUD_LOAD_BALANCERS_TYPE`; without either `lb11`, with a `LoadBalancerTypeUnconfigured` Warning",
                does: "Type of a new load balancer; on an existing one `change_type` when it differs. A deprecated type gets a `LoadBalancerTypeDeprecated` Warning. Also bounds the ports (services: lb11 5, lb21 15, lb31 30) and targets (25, 75, 150): with more eligible nodes the ones that were targets first stay, each other node gets a `MaxTargetsReached` Warning, and the Service a `TargetsLeftOut` Warning and condition reason (still `True`) saying how many nodes get no traffic and the fixes.",
                hccm: "Removing the annotation does not downgrade, as HCCM. An unknown type is refused before the create, listing the known ones.",
            },
            Entry {
                key: a::LOCATION,
                values: "a location: `fsn1`, `nbg1`, `hel1`, `ash`, `hil`, `sin`, or another the project's `GET /locations` lists",
                default: "env `HCLOUD_LOAD_BALANCERS_LOCATION`",
                does: "Where a new load balancer is created. Create-only: changing it later does nothing. An empty annotation clears the env default.",
                hccm: "When both a location and a network zone are set (by annotation or env), the location wins and a `NetworkZoneIgnored` Warning says so, as HCCM's create does; a location outside that zone is refused. Neither set: refused (`a location … or a network zone`).",
            },
            Entry {
                key: a::NETWORK_ZONE,
                values: "`eu-central`, `us-east`, `us-west`, `ap-southeast` (or another zone of a listed location)",
                default: "env `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`",
                does: "Network zone of a new load balancer when no location is set. Create-only. An empty annotation clears the env default.",
                hccm: "The two env variables together are a configuration error (mutually exclusive), as in HCCM.",
            },
            Entry {
                key: a::ONE_PER_NETWORK_ZONE,
                values: "boolean; not with `shared`",
                default: "env `HCLOUD_LOAD_BALANCERS_ONE_PER_NETWORK_ZONE` (chart: `hcloud.loadBalancers.onePerNetworkZone`); else `false`",
                does: "Ours. For a cluster whose nodes are in several network zones: besides the load balancer placed by `location` / `network-zone` (the home one, which keeps the name), one more in each other zone that has eligible nodes, named `<name>-<zone>` and labelled `hcloud-ccm/service-uid=<UID>-<zone>`, each targeting its own zone's nodes with the same services. `status.loadBalancer.ingress` lists the home load balancer's addresses first, then each zone's. A zone that loses its last eligible node has its addresses taken out of the status first; its load balancer is deleted by the next reconcile, at the latest the drift check (`--load-balancer-drift-check-period`), so a client's DNS can follow. Removing the annotation does the same for every zone's load balancer. See [docs/running.md](running.md#a-cluster-across-network-zones).",
                hccm: "Not in HCCM, which makes one load balancer and cannot target servers of another zone.",
            },
            Entry {
                key: a::ALGORITHM_TYPE,
                values: "`round_robin`, `least_connections` (any case)",
                default: "env `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`; else the load balancer's own (API default `round_robin`)",
                does: "`change_algorithm` when it differs.",
                hccm: "Lowercased before checking, as HCCM.",
            },
        ],
    },
    Section {
        title: "Forwarding (services of the load balancer)",
        entries: &[
            Entry {
                key: a::PROTOCOL,
                values: "`tcp`, `http`, `https` (any case)",
                default: "`tcp`",
                does: "Protocol of every port's service. `https` needs a certificate (see below), checked before the create.",
                hccm: "Case-insensitive, as HCCM.",
            },
            Entry {
                key: a::USES_PROXYPROTOCOL,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`; else left as the services have it (new: off)",
                does: "PROXY protocol towards the nodes. The Service's ingress `ipMode` is `Proxy` when it is on, else `VIP`.",
                hccm: "As HCCM, which leaves the field out of its requests when unset.",
            },
            Entry {
                key: a::HTTP_COOKIE_NAME,
                values: "string",
                default: "left as is (API default on a new service)",
                does: "Sticky-session cookie name. `http`/`https` only.",
                hccm: "",
            },
            Entry {
                key: a::HTTP_COOKIE_LIFETIME,
                values: "duration",
                default: "left as is",
                does: "Sticky-session cookie lifetime (sent in seconds). `http`/`https` only.",
                hccm: "HCCM documents an integer; both forms accepted.",
            },
            Entry {
                key: a::HTTP_TIMEOUT_IDLE,
                values: "duration, 30 s to 300 s",
                default: "left as is",
                does: "Idle timeout of HTTP connections (`http.timeout_idle`). `http`/`https` only.",
                hccm: "",
            },
            Entry {
                key: a::HTTP_STICKY_SESSIONS,
                values: "boolean",
                default: "left as is",
                does: "Sticky sessions. `http`/`https` only.",
                hccm: "",
            },
            Entry {
                key: a::HTTP_REDIRECT_HTTP,
                values: "boolean",
                default: "left as is",
                does: "Redirect HTTP to HTTPS. Only sent for `https`.",
                hccm: "",
            },
        ],
    },
    Section {
        title: "TLS certificates (`protocol: https` only)",
        entries: &[
            Entry {
                key: a::CERTIFICATE_TYPE,
                values: "`uploaded`, `managed` (exactly, lowercase)",
                default: "`uploaded`",
                does: "Where the certificate comes from: existing certificates, or a Let's Encrypt certificate Hetzner issues.",
                hccm: "Compared exactly, as HCCM; `Managed` is refused rather than guessed.",
            },
            Entry {
                key: a::HTTP_CERTIFICATES,
                values: "comma-separated certificate ids or names",
                default: "none; required for `https` with `uploaded`",
                does: "The certificates of every https service. Names are looked up (`GET /certificates?name=`); an id not in use yet is checked to exist. An unknown one is refused before any write.",
                hccm: "",
            },
            Entry {
                key: a::HTTP_MANAGED_CERTIFICATE_NAME,
                values: "string",
                default: "`ccm-managed-certificate-<Service UID>`",
                does: "Name of the managed certificate ordered for this Service.",
                hccm: "The certificate is found again by its `hcloud-ccm/service-uid` label, not its name, as HCCM: renaming does not order a second one. A name taken by a certificate without our label is refused. Managed certificates are never deleted, as in HCCM.",
            },
            Entry {
                key: a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                values: "comma-separated domain names, `*.` wildcards allowed",
                default: "none; required with `managed`",
                does: "Domains of the managed certificate.",
                hccm: "",
            },
            Entry {
                key: a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING,
                values: "boolean",
                default: "`false`",
                does: "Labels the managed certificate `HC-Use-Staging-CA=true` (Hetzner's staging CA, for testing).",
                hccm: "",
            },
        ],
    },
    Section {
        title: "Health check",
        entries: &[
            Entry {
                key: a::HEALTH_CHECK_PROTOCOL,
                values: "`tcp`, `http`, `https` (any case)",
                default: "the `protocol` of the Service",
                does: "Check protocol.",
                hccm: "",
            },
            Entry {
                key: a::HEALTH_CHECK_PORT,
                values: "1–65535",
                default: "the port's nodePort",
                does: "Port the check connects to.",
                hccm: "",
            },
            Entry {
                key: a::HEALTH_CHECK_INTERVAL,
                values: "duration",
                default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL` (ignored when 0); else left as is",
                does: "Time between checks.",
                hccm: "HCCM documents an integer; both forms accepted.",
            },
            Entry {
                key: a::HEALTH_CHECK_TIMEOUT,
                values: "duration",
                default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT` (ignored when 0); else left as is",
                does: "Timeout of one check.",
                hccm: "As above.",
            },
            Entry {
                key: a::HEALTH_CHECK_RETRIES,
                values: "non-negative integer",
                default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES` (ignored when 0); else left as is",
                does: "Failed checks before a target counts as unhealthy.",
                hccm: "",
            },
            Entry {
                key: a::HEALTH_CHECK_HTTP_DOMAIN,
                values: "host name",
                default: "left as is",
                does: "Domain (`Host` header) of the HTTP check.",
                hccm: "",
            },
            Entry {
                key: a::HEALTH_CHECK_HTTP_PATH,
                values: "absolute path without spaces, e.g. `/healthz`",
                default: "left as is (API default `/`)",
                does: "Path of the HTTP check.",
                hccm: "",
            },
            Entry {
                key: a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
                values: "boolean",
                default: "left as is",
                does: "Validate the TLS certificate of an `https` check (`tls`).",
                hccm: "",
            },
            Entry {
                key: a::HTTP_STATUS_CODES,
                values: "comma-separated 3-character codes, `?` as wildcard, e.g. `2??,301`",
                default: "left as is",
                does: "Status codes the HTTP check accepts.",
                hccm: "HCCM's key has no `health-check-` prefix; kept as is.",
            },
            Entry {
                key: a::HEALTH_CHECK_KUBE_PROXY,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY` (chart: `hcloud.loadBalancers.healthCheck.kubeProxy`); else `false`",
                does: "Ours. Health-checks where kube-proxy says whether the node can serve: HTTP `GET /healthz` on the Service's `healthCheckNodePort` for `externalTrafficPolicy: Local`, on kube-proxy's own port 10256 for `Cluster`. See below.",
                hccm: "Not in HCCM, which always checks TCP on the nodePort.",
            },
        ],
    },
    Section {
        title: "Private network, targets and status",
        entries: &[
            Entry {
                key: a::USE_PRIVATE_IP,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`; else `false`",
                does: "Targets are reached over their private IP in the `HCLOUD_NETWORK` network. Changing it replaces every target.",
                hccm: "`true` without `HCLOUD_NETWORK` is refused before any write (env: at startup).",
            },
            Entry {
                key: a::PRIVATE_IPV4,
                values: "IPv4 address",
                default: "none",
                does: "Fixed IP of the load balancer in the network; a different one is detached and re-attached.",
                hccm: "Without `HCLOUD_NETWORK` it is ignored, as HCCM does, but with a `PrivateNetworkIgnored` Warning.",
            },
            Entry {
                key: a::PRIVATE_SUBNET_IP_RANGE,
                values: "IPv4 CIDR of an existing subnet, e.g. `10.0.1.0/24`",
                default: "env `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`",
                does: "Subnet the load balancer's private IP comes from, when it is attached to the network.",
                hccm: "As `private-ipv4`.",
            },
            Entry {
                key: a::DISABLE_PUBLIC_NETWORK,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK`; else left as is",
                does: "`true` disables the public interface, `false` enables it. The public IPs stay allocated but leave the Service status.",
                hccm: "",
            },
            Entry {
                key: a::DISABLE_PRIVATE_INGRESS,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`; else `false`",
                does: "Leaves the load balancer's private IP out of the Service status (for kube-proxy/IPVS setups that would loop on it).",
                hccm: "",
            },
            Entry {
                key: a::IPV6_DISABLED,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`; else `false`",
                does: "Leaves the IPv6 address out of the Service status; the load balancer keeps it.",
                hccm: "",
            },
            Entry {
                key: a::HOSTNAME,
                values: "lowercase DNS name, not an IP, e.g. `lb.example.com`",
                default: "none",
                does: "The Service status shows only this hostname instead of the IPs.",
                hccm: "Checked up front: the apiserver refuses anything else, and only after the load balancer exists.",
            },
            Entry {
                key: a::IPV4_RDNS,
                values: "host name",
                default: "left as is",
                does: "Reverse DNS of the public IPv4 (`change_dns_ptr` when it differs).",
                hccm: "HCCM documents it as read-only but applies it; so do we.",
            },
            Entry {
                key: a::IPV6_RDNS,
                values: "host name",
                default: "left as is",
                does: "Reverse DNS of the public IPv6.",
                hccm: "As `ipv4-rdns`.",
            },
            Entry {
                key: a::NODE_SELECTOR,
                values: "Kubernetes label selector: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`; comma = and",
                default: "all eligible nodes",
                does: "Only matching nodes are targets; others are removed.",
                hccm: "Node label changes are followed at once (they are part of the node-set fingerprint); HCCM re-applies the selector only on its next update.",
            },
            Entry {
                key: a::ROBOT_TARGET_ADDRESS_FAMILY,
                values: "`ipv4`, `ipv6`, `dualstack`",
                default: "env `HCLOUD_LOAD_BALANCERS_ROBOT_TARGET_ADDRESS_FAMILY`; else the Service's `spec.ipFamilies` (`IPv4` in a single-stack cluster)",
                does: "Ours (the key and variable of syself's fork). Which addresses of a dedicated (Robot) server are its IP targets: its main IPv4 and/or the first address of its /64 (with `use-private-ip`: its first InternalIP of each family). An address kube-proxy does not serve the NodePorts on would fail its health check for ever; a target of another family is removed. A Robot server without an address of the family gets a `RobotTargetFamilyMissing` Warning.",
                hccm: "Not in HCCM, which targets a dedicated server's main IPv4 only.",
            },
            Entry {
                key: a::TARGET_NODES_WITH_ENDPOINTS,
                values: "boolean",
                default: "env `HCLOUD_LOAD_BALANCERS_TARGET_NODES_WITH_ENDPOINTS` (chart: `hcloud.loadBalancers.targetNodesWithEndpoints`); else `false`",
                does: "Ours. With `externalTrafficPolicy: Local`, the targets are only the eligible nodes that run a serving endpoint of the Service (its EndpointSlices: ready, or terminating and still serving), so a Service with 3 pods on a 500-node cluster has 3 targets and fits any load balancer type. Endpoint moves reach the load balancer at most once per `--endpoint-sync-window` (default 5s) per Service. With `Cluster`, or on a shared load balancer, it is ignored with an `EndpointTargetsIgnored` Warning.",
                hccm: "Not in HCCM, which targets every node and leaves the nodes without an endpoint to fail their health check.",
            },
        ],
    },
    Section {
        title: "Reserved keys (never read or written)",
        entries: &[
            Entry {
                key: a::IPV4,
                hccm: "Declared read-only by HCCM and never written by it; ignored here.",
                ..Entry::RESERVED
            },
            Entry {
                key: a::IPV6,
                hccm: "As `ipv4`.",
                ..Entry::RESERVED
            },
            Entry {
                key: a::ID,
                hccm: "Reserved by HCCM; ignored here.",
                ..Entry::RESERVED
            },
        ],
    },
];

/// A block of docs/annotations.md rendered from [`REFERENCE`]: its marker's name and its text.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    pub name: String,
    pub text: String,
}

/// The blocks of docs/annotations.md that are rendered from the code: one table per section,
/// the keys that can be set per port, and the key count.
pub fn blocks() -> Vec<Block> {
    let mut blocks: Vec<Block> = REFERENCE
        .iter()
        .map(|s| Block {
            name: s.title.to_owned(),
            text: table(s),
        })
        .collect();
    let per_port: Vec<String> = a::PER_PORT
        .iter()
        .map(|k| format!("`{}`", k.strip_prefix(a::PREFIX).unwrap_or(k)))
        .collect();
    blocks.push(Block {
        name: "keys that can be set per port".to_owned(),
        text: format!("Keys that can be set per port: {}.", per_port.join(", ")),
    });
    let entries = || REFERENCE.iter().flat_map(|s| s.entries);
    let reserved = entries().filter(|e| e.is_reserved()).count();
    blocks.push(Block {
        name: "key count".to_owned(),
        text: format!(
            "So {} keys in all: {} read, {reserved} reserved.",
            entries().count(),
            entries().count() - reserved
        ),
    });
    blocks
}

/// What opens a rendered block on the page; [`BLOCK_END`] closes it.
pub fn block_start(name: &str) -> String {
    format!(
        "<!-- generated by `cargo xtask docs` from the annotation reference in code: {name} -->"
    )
}

pub const BLOCK_END: &str = "<!-- end of generated block -->";

/// `page` with every rendered block replaced by what the code renders now; an error names a block
/// the page lacks (each must be placed by hand once, between its two markers).
pub fn render_into(page: &str) -> Result<String, String> {
    let mut out = page.to_owned();
    for block in blocks() {
        let start = block_start(&block.name);
        let from = out
            .find(&start)
            .ok_or_else(|| format!("no `{start}` on the page"))?
            + start.len();
        let to = from
            + out[from..]
                .find(BLOCK_END)
                .ok_or_else(|| format!("`{start}` is never closed by `{BLOCK_END}`"))?;
        out.replace_range(from..to, &format!("\n{}\n", block.text));
    }
    Ok(out)
}

fn table(section: &Section) -> String {
    let reserved = section.entries.iter().all(Entry::is_reserved);
    let mut out = if reserved {
        String::from("| annotation | HCCM notes |\n|---|---|\n")
    } else {
        String::from(
            "| annotation | values | default | what it does | HCCM notes |\n|---|---|---|---|---|\n",
        )
    };
    for e in section.entries {
        let key = e.short_key();
        let row = if reserved {
            format!("| `{key}` | {} |", e.hccm)
        } else {
            format!(
                "| `{key}` | {} | {} | {} | {} |",
                e.values, e.default, e.does, e.hccm
            )
        };
        // An empty cell renders as `|  |`; the page writes `| |`.
        out.push_str(&row.replace("|  |", "| |"));
        out.push('\n');
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_code_knows_is_described_once() {
        let described: Vec<&str> = REFERENCE
            .iter()
            .flat_map(|s| s.entries)
            .map(|e| e.key)
            .collect();
        for key in a::ALL {
            let n = described.iter().filter(|d| *d == key).count();
            assert_eq!(n, 1, "{key} is described {n} times in REFERENCE");
        }
        assert_eq!(
            described.len(),
            a::ALL.len(),
            "REFERENCE describes a key a::ALL lacks"
        );
        for e in REFERENCE.iter().flat_map(|s| s.entries) {
            assert!(
                e.is_reserved() || !e.does.is_empty(),
                "{} says nothing about what it does",
                e.key
            );
        }
    }
}
