//! Well-known label, taint and annotation keys (upstream `k8s.io/cloud-provider/api`, `k8s.io/api/core/v1`).

/// Taint kubelet sets with `--cloud-provider=external`; removed once the node is initialized.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// kubelet's `--node-ip` value, written for external cloud providers.
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// Ours: `accept` on a Node lets its kubelet's node IP stand although its server does not have
/// it (WireGuard, Tailscale, a Robot vSwitch), as `--accept-node-ip-outside-cloud` does for every
/// Node. A label, not an annotation, so that kubelet can set it at registration (`--node-labels`).
pub const LABEL_NODE_IP_OUTSIDE_CLOUD: &str = "cloud-controllers.io/node-ip-outside-cloud";

/// Stable instance-type label.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Deprecated beta instance-type label.
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// Stable zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Deprecated beta zone label.
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// Stable region label.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Deprecated beta region label.
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// (beta, stable) pairs reconciled on initialized nodes: the beta key is the source of truth.
pub const BETA_TO_STABLE: [(&str, &str); 3] = [
    (LABEL_ZONE_BETA, LABEL_ZONE),
    (LABEL_REGION_BETA, LABEL_REGION),
    (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
];
