//! The host's prerequisites: root, Debian's packages, the node's name and address, free ports.

use std::net::Ipv4Addr;
use std::path::Path;

use super::layout::{APISERVER_PORT, CLOUD_SIM_PORT, ETCD_PEER_PORT, ETCD_PORT, REGISTRY_PORT};
use super::procs::cluster_error;
use crate::binaries;
use crate::error::{Error, Result};

/// Debian packages the node needs: the OCI runtime, iptables + conntrack for kubelet, kube-proxy
/// and the CNI plugins, and nft, with which `down` removes the (nf_tables) tables they created.
pub(super) const PACKAGES: [(&str, &str); 4] = [
    ("runc", "/usr/sbin/runc"),
    ("iptables", "/usr/sbin/iptables"),
    ("conntrack", "/usr/sbin/conntrack"),
    ("nftables", "/usr/sbin/nft"),
];

pub(super) fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Installs the Debian packages the node needs when one is missing (root only); whether it did.
pub fn ensure_packages() -> Result<bool> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(_, path)| !binaries::is_executable(Path::new(path)))
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    eprintln!(
        "cluster: installing {} from Debian's packages",
        missing.join(", ")
    );
    for args in [
        vec!["update", "-qq"],
        [
            vec!["install", "-y", "-qq", "--no-install-recommends"],
            missing,
        ]
        .concat(),
    ] {
        let out = std::process::Command::new("apt-get")
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(Error::io("running apt-get"))?;
        if !out.status.success() {
            return Err(Error::ToolMissing {
                tool: "runc, iptables, conntrack, nftables".into(),
                how: format!(
                    "apt-get {} failed:\n{}",
                    args.join(" "),
                    binaries::tail(&String::from_utf8_lossy(&out.stderr), 20)
                ),
            });
        }
    }
    Ok(true)
}

/// The machine's hostname, as the Node's name (and later its cloud-sim server's).
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into())
}

/// The IPv4 address of the interface the default route goes through: what kubelet serves on.
pub fn node_ip() -> Result<String> {
    let route = std::process::Command::new("ip")
        .args(["-o", "-4", "route", "show", "default"])
        .output()
        .map_err(Error::io("running ip route"))?;
    let route = String::from_utf8_lossy(&route.stdout);
    let words: Vec<&str> = route.split_whitespace().collect();
    let dev = words
        .windows(2)
        .find(|w| w[0] == "dev")
        .map(|w| w[1].to_owned())
        .ok_or_else(|| cluster_error("finding the node IP", "no default route"))?;
    let addr = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show", "dev", &dev, "scope", "global"])
        .output()
        .map_err(Error::io("running ip addr"))?;
    let addr = String::from_utf8_lossy(&addr.stdout);
    addr.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .map(str::to_owned)
        .ok_or_else(|| cluster_error("finding the node IP", format!("{dev} has no IPv4 address")))
}

/// The fixed ports the cluster listens on, by what listens there.
pub(super) const PORTS: [(u16, &str); 11] = [
    (CLOUD_SIM_PORT, "cloud-sim"),
    (APISERVER_PORT, "kube-apiserver"),
    (ETCD_PORT, "etcd"),
    (ETCD_PEER_PORT, "etcd (peers)"),
    (REGISTRY_PORT, "the registry"),
    (10248, "kubelet (healthz)"),
    (10249, "kube-proxy (metrics)"),
    (10250, "kubelet"),
    (10256, "kube-proxy (healthz)"),
    (10257, "kube-controller-manager"),
    (10259, "kube-scheduler"),
];

/// Fails early, naming the port, when something else listens on one of [`PORTS`].
pub(super) fn check_ports() -> Result<()> {
    for (port, what) in PORTS {
        if std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_err() {
            return Err(cluster_error(
                "checking ports",
                format!(
                    "port {port} (for {what}) is in use; is another cluster running? \
                     (`cargo xtask cluster down`, or `ss -ltnp 'sport = :{port}'`)"
                ),
            ));
        }
    }
    Ok(())
}
