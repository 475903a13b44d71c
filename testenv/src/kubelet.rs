//! What a kubelet (and kube-controller-manager) would write: no kubelet runs here, so tests, the
//! demo and the benchmarks register Nodes and report their status themselves.
//!
//! [`KubeletNode`] builds a Node the way kubelet v1.36 registers one with
//! `--cloud-provider=external` (`initialNode` + `setNodeStatus` upstream): the labels and
//! annotations it sets, five conditions with their messages, `nodeInfo`, capacity and allocatable,
//! the 50 largest images (`--node-status-max-images`), runtime handlers and features. Every write
//! goes through the field manager the real component uses, so the apiserver keeps `managedFields`
//! as in a real cluster. The result is 11–12 KB of JSON per Node, like the Nodes of a real
//! cluster, so the memory each controller spends on its Node cache is measured on realistic
//! objects.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::error::Result;

/// The taint kubelet registers with under `--cloud-provider=external`.
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The taint the apiserver adds to every new Node until the node lifecycle controller sees it
/// Ready (no kube-controller-manager runs here, see [`KubeletNode::register`]).
const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Images kubelet reports (`--node-status-max-images` default).
pub const MAX_IMAGES: usize = 50;

/// Writes the Node's `Ready` condition as kubelet's heartbeat (or its absence) would. A strategic
/// merge by condition type, so conditions other components own (e.g. `NetworkUnavailable`) stay.
pub async fn set_node_ready(client: &Client, name: &str, ready: bool) -> Result<()> {
    let status = NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            reason: Some(
                if ready {
                    "KubeletReady"
                } else {
                    "KubeletNotReady"
                }
                .into(),
            ),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"status": status})),
        )
        .await?;
    Ok(())
}

/// One Node as a real kubelet registers and updates it.
#[derive(Debug, Clone)]
pub struct KubeletNode {
    pub name: String,
    /// `--node-ip`: the `alpha.kubernetes.io/provided-node-ip` annotation and the InternalIP
    /// kubelet reports until the cloud provider sets the addresses.
    pub node_ip: Option<String>,
    /// `--node-labels`.
    pub labels: Vec<(String, String)>,
    /// Registered with the `uninitialized` taint (what `--cloud-provider=external` does); `false`
    /// for a Node the cloud provider initialized before.
    pub uninitialized: bool,
    /// `--provider-id` (most clusters leave it to the cloud provider).
    pub provider_id: Option<String>,
    /// Assigned by kube-controller-manager's IPAM after registration.
    pub pod_cidr: Option<String>,
}

impl KubeletNode {
    pub fn new(name: impl Into<String>) -> Self {
        KubeletNode {
            name: name.into(),
            node_ip: None,
            labels: Vec::new(),
            uninitialized: true,
            provider_id: None,
            pod_cidr: None,
        }
    }

    /// The object kubelet POSTs (field manager `kubelet`), `podCIDR` included when set (the
    /// apiserver attributes it to kubelet then; [`KubeletNode::register`] writes it as
    /// kube-controller-manager does instead).
    pub fn registration(&self) -> Node {
        let mut labels = json!({
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "node-role.kubernetes.io/worker": "",
        });
        for (k, v) in &self.labels {
            labels[k] = json!(v);
        }
        let mut annotations = json!({
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
            "csi.volume.kubernetes.io/nodeid": format!(r#"{{"csi.hetzner.cloud":"{}"}}"#, self.seed() % 100_000_000),
        });
        if let Some(ip) = &self.node_ip {
            annotations["alpha.kubernetes.io/provided-node-ip"] = json!(ip);
        }
        let mut spec = json!({});
        if self.uninitialized {
            spec["taints"] =
                json!([{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]);
        }
        if let Some(id) = &self.provider_id {
            spec["providerID"] = json!(id);
        }
        if let Some(cidr) = &self.pod_cidr {
            spec["podCIDR"] = json!(cidr);
            spec["podCIDRs"] = json!([cidr]);
        }
        let mut addresses = Vec::new();
        if let Some(ip) = &self.node_ip {
            addresses.push(json!({"type": "InternalIP", "address": ip}));
        }
        addresses.push(json!({"type": "Hostname", "address": self.name}));
        let now = now();
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": {
                "addresses": addresses,
                "capacity": resources("3908100Ki"),
                "allocatable": resources("3805700Ki"),
                "conditions": conditions(true, &now, &now),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": self.node_info(),
                "images": self.images(0),
                "runtimeHandlers": [
                    {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                    {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                ],
                "features": {"supplementalGroupsPolicy": true},
            },
        });
        serde_json::from_value(node).expect("a kubelet Node is a valid Node")
    }

    /// Registers the Node as kubelet, then does kube-controller-manager's part: the podCIDR (its
    /// IPAM), the TTL annotation (its ttl controller) and clearing the apiserver's `not-ready`
    /// taint (its node lifecycle controller), each as field manager `kube-controller-manager`.
    pub async fn register(&self, client: &Client) -> kube::Result<()> {
        let nodes: Api<Node> = Api::all(client.clone());
        let mut node = self.registration();
        if let Some(spec) = node.spec.as_mut() {
            spec.pod_cidr = None;
            spec.pod_cidrs = None;
        }
        let post = PostParams {
            field_manager: Some("kubelet".into()),
            ..Default::default()
        };
        nodes.create(&post, &node).await?;
        self.controller_manager_writes(&nodes).await
    }

    /// kube-controller-manager's writes after registration, retried on conflicts: they carry the
    /// resourceVersion they were computed from, so they never undo a controller's change.
    async fn controller_manager_writes(&self, nodes: &Api<Node>) -> kube::Result<()> {
        let params = PatchParams {
            field_manager: Some("kube-controller-manager".into()),
            ..Default::default()
        };
        loop {
            let node = nodes.get(&self.name).await?;
            let taints: Vec<_> = node
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key != NOT_READY)
                .collect();
            let mut patch = json!({
                "metadata": {
                    "resourceVersion": node.metadata.resource_version,
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"taints": taints},
            });
            if let Some(cidr) = &self.pod_cidr {
                patch["spec"]["podCIDR"] = json!(cidr);
                patch["spec"]["podCIDRs"] = json!([cidr]);
            }
            match nodes.patch(&self.name, &params, &Patch::Merge(patch)).await {
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                other => return other.map(|_| ()),
            }
        }
    }

    /// Kubelet's periodic status report (`--node-status-report-frequency`, 5 min by default with
    /// Node leases): the strategic merge patch of what changed since its last one — the
    /// heartbeat of every condition it owns and, now and then, the image list (report `n` pulls
    /// a new image every fourth time).
    pub async fn report_status(&self, client: &Client, ready: bool, n: u64) -> kube::Result<()> {
        let now = now();
        let mut status = json!({"conditions": conditions(ready, &now, &now)});
        if n.is_multiple_of(4) {
            status["images"] = self.images(n / 4);
        }
        let params = PatchParams {
            field_manager: Some("kubelet".into()),
            ..Default::default()
        };
        Api::<Node>::all(client.clone())
            .patch_status(
                &self.name,
                &params,
                &Patch::Strategic(json!({"status": status})),
            )
            .await?;
        Ok(())
    }

    /// A number of this node's own, for its IDs.
    fn seed(&self) -> u64 {
        fnv1a(self.name.as_bytes())
    }

    fn node_info(&self) -> Value {
        let s = self.seed();
        json!({
            "architecture": "amd64",
            "bootID": uuid(s ^ 0xb007),
            "containerRuntimeVersion": "containerd://2.1.4",
            "kernelVersion": "6.8.0-79-generic",
            "kubeProxyVersion": "",
            "kubeletVersion": "v1.36.0",
            "machineID": hex(s ^ 0x3ac1, 32),
            "operatingSystem": "linux",
            "osImage": "Ubuntu 24.04.3 LTS",
            "systemUUID": uuid(s ^ 0x5c5),
        })
    }

    /// The [`MAX_IMAGES`] largest images on the node, each by digest and by tag as containerd
    /// reports them; `generation` > 0 replaces one image per step (a pull).
    fn images(&self, generation: u64) -> Value {
        let images: Vec<Value> = (0..MAX_IMAGES as u64)
            .map(|i| {
                let (repo, tag, size) = IMAGES[i as usize % IMAGES.len()];
                let pulled = if i < generation % MAX_IMAGES as u64 {
                    generation
                } else {
                    0
                };
                let version = format!("{tag}-{}", i / IMAGES.len() as u64 + pulled);
                let digest = hex(fnv1a(format!("{repo}:{version}").as_bytes()), 64);
                json!({
                    "names": [format!("{repo}@sha256:{digest}"), format!("{repo}:{version}")],
                    "sizeBytes": size.saturating_sub(i * 1_003),
                })
            })
            .collect();
        Value::Array(images)
    }
}

/// What a node typically pulls: CNI, CSI, monitoring, ingress and application images.
const IMAGES: [(&str, &str, u64); 25] = [
    ("quay.io/cilium/cilium", "v1.18.2", 244_118_374),
    ("docker.io/grafana/grafana", "12.1.1", 201_734_911),
    (
        "registry.k8s.io/ingress-nginx/controller",
        "v1.13.2",
        112_948_381,
    ),
    ("quay.io/prometheus/prometheus", "v3.5.0", 110_394_882),
    ("docker.io/library/postgres", "17.6-bookworm", 158_311_208),
    ("docker.io/bitnami/redis", "8.2.1-debian-12-r0", 68_339_129),
    (
        "docker.io/hetznercloud/hcloud-csi-driver",
        "v2.17.0",
        35_720_146,
    ),
    (
        "registry.k8s.io/sig-storage/csi-provisioner",
        "v5.3.0",
        31_544_291,
    ),
    (
        "registry.k8s.io/sig-storage/csi-attacher",
        "v4.9.0",
        30_215_807,
    ),
    (
        "registry.k8s.io/sig-storage/csi-resizer",
        "v1.14.0",
        29_962_101,
    ),
    (
        "registry.k8s.io/sig-storage/livenessprobe",
        "v2.16.0",
        15_873_412,
    ),
    (
        "registry.k8s.io/sig-storage/csi-node-driver-registrar",
        "v2.14.0",
        14_230_550,
    ),
    ("quay.io/cilium/operator-generic", "v1.18.2", 33_019_884),
    ("quay.io/cilium/hubble-relay", "v1.18.2", 28_457_319),
    ("docker.io/grafana/loki", "3.5.4", 58_882_146),
    ("docker.io/grafana/promtail", "3.5.4", 84_127_993),
    ("quay.io/prometheus/node-exporter", "v1.9.1", 12_398_773),
    (
        "registry.k8s.io/kube-state-metrics/kube-state-metrics",
        "v2.16.0",
        21_483_650,
    ),
    ("registry.k8s.io/coredns/coredns", "v1.12.3", 22_384_805),
    (
        "registry.k8s.io/metrics-server/metrics-server",
        "v0.8.0",
        19_512_993,
    ),
    (
        "quay.io/jetstack/cert-manager-controller",
        "v1.18.2",
        22_031_276,
    ),
    ("docker.io/traefik", "v3.5.2", 57_392_115),
    ("ghcr.io/example/shop-frontend", "2025.11.3", 96_114_021),
    ("ghcr.io/example/shop-api", "2025.11.3", 74_881_520),
    ("registry.k8s.io/pause", "3.10.1", 320_448),
];

/// `cpu`, `ephemeral-storage`, hugepages, `memory` and `pods`, as kubelet reports them.
fn resources(memory: &str) -> Value {
    json!({
        "cpu": "2",
        "ephemeral-storage": "39937312Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": "110",
    })
}

/// The four conditions kubelet owns, with its reasons and messages.
fn conditions(ready: bool, heartbeat: &str, transition: &str) -> Value {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition,
        })
    };
    json!([
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        if ready {
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            )
        } else {
            condition(
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
            )
        },
    ])
}

/// Now, to the second, as the apiserver stores times.
fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `len` hex digits derived from `seed` (splitmix64).
fn hex(seed: u64, len: usize) -> String {
    let mut state = seed;
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.push_str(&format!("{:016x}", z ^ (z >> 31)));
    }
    out.truncate(len);
    out
}

fn uuid(seed: u64) -> String {
    let h = hex(seed, 32);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_is_as_large_as_a_real_kubelets_node() {
        let mut n = KubeletNode::new("worker-17");
        n.node_ip = Some("10.0.0.17".into());
        let size = serde_json::to_vec(&n.registration()).unwrap().len();
        // Before the apiserver adds managedFields, uid, timestamps and the controllers' writes.
        assert!((9_000..12_000).contains(&size), "{size} bytes");
    }

    #[test]
    fn every_fourth_report_pulls_an_image() {
        let n = KubeletNode::new("worker-1");
        assert_eq!(n.images(0), n.images(0));
        let (before, after) = (n.images(0), n.images(1));
        let differing = (0..MAX_IMAGES).filter(|&i| before[i] != after[i]).count();
        assert_eq!(differing, 1);
    }
}
