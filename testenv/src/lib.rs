//! A real etcd + kube-apiserver on 127.0.0.1, for tests, benchmarks and the demo.
//!
//! There is no Docker engine or cluster on our machines, so, like controller-runtime's envtest, we
//! run the two real control-plane processes locally. No kubelet, scheduler or controller-manager
//! runs: tests create Nodes themselves, set their conditions by patching status, and nothing
//! garbage-collects or finishes namespace deletion.
//!
//! ```no_run
//! # async fn t() {
//! let k = testenv::kube().await;              // one per test binary, started once
//! let admin = k.client().await;               // system:masters
//! let sa = k.service_account_client("kube-system", "node-controller").await; // RBAC applies
//! # }
//! ```

mod binaries;
mod cert_manager;
pub mod cluster;
mod control_plane;
mod crypto;
mod error;
pub mod kubelet;
mod per_binary;
mod pki;
mod podman;
mod process;
mod python_tools;
mod rbac;
mod workspace;

pub use binaries::{
    Binaries, CERT_MANAGER_VERSION, CLOUDSTACK_CCM_VERSION, CNI_PLUGINS_VERSION,
    CONTAINERD_VERSION, CRANE_VERSION, ClusterBinaries, ETCD_VERSION, HELM_VERSION,
    KUBE_APISERVER_VERSION, SKAFFOLD_VERSION, Tools, all_cached, cache_dir, cert_manager,
    cloudstack_ccm, ensure as ensure_binaries, ensure_cluster as ensure_cluster_binaries,
    ensure_helm, ensure_hrobot_check, ensure_skaffold, ensure_tools,
};
pub use cert_manager::{cert_manager_crds, install_cert_manager_crds};
pub use control_plane::{Connection, ControlPlane, Options, TEMP_ROOT};
pub use crypto::install_crypto_provider;
pub use error::{Error, Result};
pub use kubelet::{KubeletNode, set_node_ready};
pub use per_binary::{TestKube, kube};
pub use podman::{Podman, ensure_podman};
pub use process::{Lifetime, pid_alive};
pub use python_tools::{HADOLINT_VERSION, ensure_hadolint};
pub use rbac::bind_chart_rbac;
pub use workspace::workspace_root;
