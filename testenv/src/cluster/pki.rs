//! The cluster's certificates and every component's kubeconfig.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::layout::{APISERVER_PORT, KUBERNETES_SERVICE_IP, Layout};
use crate::error::Result;
use crate::pki::Pki;

/// Certificates and kubeconfigs of every component.
pub(super) struct ClusterPki {
    pub(super) pki: Pki,
    pub(super) kubelet_client: (PathBuf, PathBuf),
    pub(super) kubeconfigs: BTreeMap<&'static str, PathBuf>,
}

pub(super) fn write_pki(l: &Layout, node: &str, node_ip: &str) -> Result<ClusterPki> {
    let dir = l.pki();
    let sans = [
        node_ip.to_owned(),
        KUBERNETES_SERVICE_IP.to_owned(),
        "kubernetes.default.svc.cluster.local".to_owned(),
        node.to_owned(),
    ];
    let (pki, ca) = Pki::generate_with(&dir, &sans)?;
    let server = format!("https://127.0.0.1:{APISERVER_PORT}");
    let kubelet_client = ca.client(
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        &[],
    )?;
    let node_cn = format!("system:node:{node}");
    let identities: [(&'static str, &str, &[&str]); 4] = [
        ("kubelet", &node_cn, &["system:nodes"]),
        ("kube-proxy", "system:kube-proxy", &[]),
        ("kube-scheduler", "system:kube-scheduler", &[]),
        (
            "kube-controller-manager",
            "system:kube-controller-manager",
            &[],
        ),
    ];
    let mut kubeconfigs = BTreeMap::new();
    crate::control_plane::write_kubeconfig_with(
        &l.kubeconfig(),
        &server,
        &pki.ca_cert,
        &pki.admin_cert,
        &pki.admin_key,
    )?;
    for (name, cn, orgs) in identities {
        let (cert, key) = ca.client(name, cn, orgs)?;
        let path = dir.join(format!("{name}.kubeconfig"));
        crate::control_plane::write_kubeconfig_with(&path, &server, &pki.ca_cert, &cert, &key)?;
        kubeconfigs.insert(name, path);
    }
    Ok(ClusterPki {
        pki,
        kubelet_client,
        kubeconfigs,
    })
}
