//! The node's agents: containerd, kubelet and kube-proxy, and the waits until the node is Ready.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use kube::api::Api;

use super::config;
use super::files::write_file;
use super::layout::{PAUSE_IMAGE, REGISTRY};
use super::pki::ClusterPki;
use super::procs::Procs;
use crate::binaries::ClusterBinaries;
use crate::control_plane::port_open;
use crate::error::{Error, Result};

pub(super) fn system_path(extra: &Path) -> String {
    format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        extra.display()
    )
}

pub(super) async fn start_containerd(procs: &mut Procs, nb: &ClusterBinaries) -> Result<()> {
    let l = procs.layout.clone();
    let config = l.containerd().join("config.toml");
    write_file(&config, &config::containerd(&l, PAUSE_IMAGE))?;
    write_file(
        &l.containerd()
            .join("certs.d")
            .join(REGISTRY)
            .join("hosts.toml"),
        &config::registry_hosts(),
    )?;
    procs.spawn(
        "containerd",
        &nb.containerd_bin.join("containerd"),
        &[format!("--config={}", config.display())],
        // It finds containerd-shim-runc-v2 on PATH.
        &[("PATH", system_path(&nb.containerd_bin))],
    )?;
    let socket = l.containerd_socket();
    procs
        .wait("containerd to listen", || {
            let ok = std::os::unix::net::UnixStream::connect(&socket).is_ok();
            async move { ok.then_some(()) }
        })
        .await
}

pub(super) fn start_kubelet(
    procs: &mut Procs,
    nb: &ClusterBinaries,
    pki: &ClusterPki,
    node: &str,
    node_ip: &str,
) -> Result<()> {
    let l = procs.layout.clone();
    let config = l.kubelet().join("config.yaml");
    write_file(&config, &config::kubelet(&l, &pki.pki.ca_cert))?;
    for dir in ["manifests", "volume-plugins", "pod-logs", "root", "pki"] {
        let dir = l.kubelet().join(dir);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    procs.spawn(
        "kubelet",
        &nb.kubelet,
        &[
            format!("--config={}", config.display()),
            format!("--kubeconfig={}", pki.kubeconfigs["kubelet"].display()),
            format!("--root-dir={}", l.kubelet().join("root").display()),
            format!("--cert-dir={}", l.kubelet().join("pki").display()),
            // As on Hetzner with a cloud-controller-manager: registers with the uninitialized taint.
            "--cloud-provider=external".to_owned(),
            format!("--node-ip={node_ip}"),
            format!("--hostname-override={node}"),
            "--v=2".to_owned(),
        ],
        &[("PATH", system_path(Path::new("/usr/sbin")))],
    )
}

pub(super) async fn wait_for_pod_cidr(
    procs: &mut Procs,
    admin: &kube::Client,
    node: &str,
) -> Result<String> {
    let nodes: Api<Node> = Api::all(admin.clone());
    procs
        .wait("the node to register and get a podCIDR", || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get_opt(node).await.ok()??;
                n.spec?.pod_cidr
            }
        })
        .await
}

pub(super) fn start_kube_proxy(procs: &mut Procs, nb: &ClusterBinaries, node: &str) -> Result<()> {
    let l = procs.layout.clone();
    let kubeconfig = l.pki().join("kube-proxy.kubeconfig");
    let config = l.root().join("kube-proxy.yaml");
    write_file(&config, &config::kube_proxy(&kubeconfig, node))?;
    procs.spawn(
        "kube-proxy",
        &nb.kube_proxy,
        &[format!("--config={}", config.display()), "--v=2".to_owned()],
        &[("PATH", system_path(Path::new("/usr/sbin")))],
    )
}

/// The node Ready, and what kube-controller-manager gives a namespace (the `default`
/// ServiceAccount, `kube-root-ca.crt`) in `default`, so pods can be created right away.
pub(super) async fn wait_ready(procs: &mut Procs, admin: &kube::Client, node: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    procs
        .wait("the node to be Ready", || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get_opt(node).await.ok()??;
                n.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
                    .then_some(())
            }
        })
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    procs
        .wait("the default ServiceAccount and kube-root-ca.crt", || {
            let (accounts, maps) = (accounts.clone(), maps.clone());
            async move {
                accounts.get_opt("default").await.ok()??;
                maps.get_opt("kube-root-ca.crt").await.ok()??;
                Some(())
            }
        })
        .await?;
    procs
        .wait("kube-proxy to be healthy", || async {
            port_open(10256).then_some(())
        })
        .await
}
