//! A real one-node Kubernetes cluster on this machine (`cargo xtask cluster up|down|env`).
//!
//! The node is the machine itself: kubelet (`--cloud-provider=external`, so the Node registers
//! with the `uninitialized` taint), kube-proxy (iptables), containerd with Debian's runc (through
//! an `oom_score_adj` clamp, see [`config::runc_wrapper`]), the CNI bridge, and a local registry
//! (`crane registry serve`) containerd pulls from over plain HTTP. The control plane is etcd,
//! kube-apiserver (Node + RBAC authorization, NodeRestriction, a client certificate for the
//! kubelets), kube-scheduler and kube-controller-manager (node IPAM gives the node its podCIDR; no
//! cloud controllers). Everything is built from source ([`crate::ensure_binaries`],
//! [`crate::binaries::ensure_cluster`]) and runs detached, so the cluster outlives `up`.
//!
//! Files, logs and the record of what `up` changed live in [`state_dir`]
//! (`~/.cache/cloud-controllers/cluster/`). [`down`] stops every process and undoes every change to
//! the host (see [`host`]); it works from a separate invocation and after a `kill -9` of the whole
//! tree, and [`up`] runs it first when it finds leftovers.
//!
//! `up_in` below is the sequence, each step in a module of its own: `packages` (the host's
//! prerequisites), `files` and `pki` (the state directory), `apiserver` (etcd and kube-apiserver,
//! as `control_plane.rs` starts them), `registry`, `node` (containerd, kubelet, kube-proxy),
//! `controllers` (kube-controller-manager, kube-scheduler), `cloud_sim`; `procs` runs and records
//! the processes, `state` is what [`down`] needs to undo it all.

mod apiserver;
mod cloud_sim;
mod config;
mod controllers;
mod down;
mod files;
pub mod host;
mod layout;
mod node;
mod packages;
mod pki;
mod procs;
mod registry;
mod state;

use std::path::PathBuf;
use std::time::Instant;

pub use down::{down, down_in};
pub use layout::{
    APISERVER_PORT, BRIDGE, CLOUD_SIM_PORT, CLUSTER_CIDR, CLUSTER_DNS, CNI_NETWORK, HELLO_IMAGE,
    Layout, PAUSE_IMAGE, REGISTRY, SERVICE_CIDR, state_dir,
};
pub use packages::{ensure_packages, node_ip, node_name};
pub use procs::{CGROUP_V1_CAUSE, KUBELET_CGROUP_V1_REFUSAL, Step, known_cause};
pub use state::{CloudSim, RecordedProcess, State, status};

use crate::binaries::{self, Binaries, ClusterBinaries};
use crate::error::Result;
use procs::{Procs, Timer, cluster_error};

/// A running cluster, as `up` leaves it.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub layout: Layout,
    pub node: String,
    pub node_ip: String,
    pub pod_cidr: String,
    pub steps: Vec<Step>,
    pub binaries: ClusterBinaries,
    pub cloud_sim: Option<CloudSim>,
}

impl Cluster {
    pub fn kubeconfig(&self) -> PathBuf {
        self.layout.kubeconfig()
    }
    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{APISERVER_PORT}")
    }
    /// An admin client.
    pub async fn client(&self) -> Result<kube::Client> {
        apiserver::client(&self.kubeconfig()).await
    }
}

/// Starts the cluster in the default state directory (see the module docs). Needs root. Cleans up
/// the leftovers of an earlier cluster first; fails when one is running (`down` it first).
pub async fn up(options: &UpOptions) -> Result<Cluster> {
    up_in(&Layout::default(), options).await
}

/// What `up` starts besides the cluster itself.
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// No progress lines on stderr.
    pub quiet: bool,
    /// A cloud-sim binary: started next to the cluster, holding a server named like the node
    /// whose public IPv4 is the node's address (see [`CloudSim`]).
    pub cloud_sim: Option<PathBuf>,
    /// kubelet's `--node-ip` instead of the machine's address: added to `lo` for the cluster's
    /// lifetime, an address the node's server in cloud-sim does not have (as a WireGuard or
    /// Tailscale address is to Hetzner).
    pub kubelet_node_ip: Option<String>,
}

pub async fn up_in(l: &Layout, options: &UpOptions) -> Result<Cluster> {
    let quiet = options.quiet;
    let mut t = Timer {
        steps: Vec::new(),
        quiet,
    };
    if !packages::is_root() {
        return Err(cluster_error(
            "checking privileges",
            "a real node needs root (mounts, iptables, cgroups, network namespaces)",
        ));
    }
    if State::read(l).is_some_and(|s| s.running()) {
        return Err(cluster_error(
            "checking for a running cluster",
            format!(
                "a cluster is already running (state in {}); `cargo xtask cluster down` first",
                l.root().display()
            ),
        ));
    }
    let started = Instant::now();
    if packages::ensure_packages()? {
        t.done(
            "installed Debian packages (runc, iptables, conntrack, nftables)",
            started,
        );
    }
    let started = Instant::now();
    let report = down_in(l)?;
    if !report.is_empty() {
        if !quiet {
            eprintln!(
                "cluster: cleaned up an earlier cluster's leftovers:\n  {}",
                report.join("\n  ")
            );
        }
        t.done("cleaned up leftovers", started);
    }
    let (cp, nb) = t.time("found or built the binaries", || {
        Ok((binaries::ensure()?, binaries::ensure_cluster()?))
    })?;
    packages::check_ports()?;
    match start(l, t, nb, cp, options).await {
        Ok(cluster) => Ok(cluster),
        Err(e) => {
            // Leave the host clean; the logs stay in the state directory.
            let _ = down_in(l);
            Err(e)
        }
    }
}

async fn start(
    l: &Layout,
    mut t: Timer,
    nb: ClusterBinaries,
    cp: Binaries,
    options: &UpOptions,
) -> Result<Cluster> {
    t.time("prepared the state directory", || files::prepare_dir(l))?;

    let node = packages::node_name();
    let node_ip = packages::node_ip()?;
    // Before any change to the host: what `down` restores.
    let state = State {
        node: node.clone(),
        node_ip: node_ip.clone(),
        sysctls_before: host::read_sysctls(),
        absent_paths: host::absent_host_paths(),
        tables_before: host::iptables_tables(),
        processes: Vec::new(),
        cloud_sim: None,
        added_address: options.kubelet_node_ip.clone(),
    };
    state.write(l)?;
    let mut procs = Procs {
        layout: l.clone(),
        state,
        running: Vec::new(),
    };

    let started = Instant::now();
    let pki = pki::write_pki(l, &node, &node_ip)?;
    files::link_tools(l, &nb)?;
    t.done("wrote certificates, kubeconfigs and configs", started);

    let started = Instant::now();
    apiserver::start_control_plane(&mut procs, &cp, &pki, &node_ip).await?;
    let admin = apiserver::client(&l.kubeconfig()).await?;
    apiserver::bind_kubelet_client(&admin).await?;
    t.done("started etcd and kube-apiserver", started);

    let started = Instant::now();
    registry::start_registry(&mut procs, &nb)?;
    registry::push_images(l, &nb)?;
    t.done(
        "started the registry and pushed the pause and hello images",
        started,
    );

    let started = Instant::now();
    node::start_containerd(&mut procs, &nb).await?;
    t.done("started containerd", started);

    let started = Instant::now();
    controllers::start_controllers(&mut procs, &nb, &pki)?;
    let kubelet_ip = match &options.kubelet_node_ip {
        Some(ip) => {
            host::add_loopback_address(ip)?;
            ip.clone()
        }
        None => node_ip.clone(),
    };
    node::start_kubelet(&mut procs, &nb, &pki, &node, &kubelet_ip)?;
    let pod_cidr = node::wait_for_pod_cidr(&mut procs, &admin, &node).await?;
    t.done(
        &format!("kubelet registered node {node}, podCIDR {pod_cidr}"),
        started,
    );

    let started = Instant::now();
    files::write_file(
        &l.cni_conf().join("10-cloud-controllers.conflist"),
        &config::cni_conflist(l, &pod_cidr),
    )?;
    node::start_kube_proxy(&mut procs, &nb, &node)?;
    node::wait_ready(&mut procs, &admin, &node).await?;
    t.done(
        "node Ready (pod network, kube-proxy, default ServiceAccount)",
        started,
    );

    let cloud_sim = match &options.cloud_sim {
        Some(binary) => {
            let started = Instant::now();
            let sim = cloud_sim::start_cloud_sim(&mut procs, binary, &node, &node_ip).await?;
            procs.state.cloud_sim = Some(sim.clone());
            procs.state.write(l)?;
            t.done(
                &format!(
                    "started cloud-sim with server {node} ({node_ip}, id {})",
                    sim.server_id
                ),
                started,
            );
            Some(sim)
        }
        None => None,
    };

    Ok(Cluster {
        layout: l.clone(),
        node,
        node_ip,
        pod_cidr,
        steps: t.steps,
        binaries: nb,
        cloud_sim,
    })
}
