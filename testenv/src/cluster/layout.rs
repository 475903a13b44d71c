//! Where the cluster is: its fixed addresses, ports and images, and the paths inside its state
//! directory.

use std::path::{Path, PathBuf};

use crate::binaries;

/// The podCIDRs kube-controller-manager hands out (one /24 per node).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// ClusterIPs; the `kubernetes` Service is the first.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
pub(super) const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// What kubelet writes into pods' resolv.conf (no DNS server runs yet).
pub const CLUSTER_DNS: &str = "10.96.0.10";
/// The local registry: containerd pulls `localhost:5001/...` over plain HTTP.
pub const REGISTRY: &str = "localhost:5001";
pub(super) const REGISTRY_PORT: u16 = 5001;
pub const APISERVER_PORT: u16 = 6443;
/// cloud-sim, when `up` starts it: `http://<node IP>:8780/v1`, so pods reach it (see
/// `cloud_sim.rs`).
pub const CLOUD_SIM_PORT: u16 = 8780;
pub(super) const ETCD_PORT: u16 = 12379;
pub(super) const ETCD_PEER_PORT: u16 = 12380;
/// The pod network's bridge and CNI network name.
pub const BRIDGE: &str = "cc-cni0";
pub const CNI_NETWORK: &str = "cloud-controllers";
/// The sandbox (pause) image and a small HTTP server for test pods, pushed by `up`.
pub const PAUSE_IMAGE: &str = "localhost:5001/cloud-controllers/pause:1";
pub const HELLO_IMAGE: &str = "localhost:5001/cloud-controllers/hello:1";

/// `~/.cache/cloud-controllers/cluster/`: the cluster's files, logs and state.
pub fn state_dir() -> PathBuf {
    binaries::home_cache().join("cluster")
}

/// Paths inside a cluster's state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub(super) fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    pub(super) fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// Tools for people: kubectl, ctr, crane (see `cluster env`).
    pub fn bin(&self) -> PathBuf {
        self.root.join("bin")
    }
    pub(super) fn containerd(&self) -> PathBuf {
        self.root.join("containerd")
    }
    pub(super) fn containerd_socket(&self) -> PathBuf {
        self.containerd().join("containerd.sock")
    }
    pub(super) fn runc_wrapper(&self) -> PathBuf {
        self.containerd().join("runc-wrap")
    }
    pub(super) fn cni_bin(&self) -> PathBuf {
        self.root.join("cni/bin")
    }
    pub(super) fn cni_conf(&self) -> PathBuf {
        self.root.join("cni/conf")
    }
    pub(super) fn cni_ipam(&self) -> PathBuf {
        self.root.join("cni/ipam")
    }
    pub(super) fn kubelet(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    /// The admin (`system:masters`) kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("admin.kubeconfig")
    }
    pub(super) fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::new(state_dir())
    }
}
