//! etcd and kube-apiserver, started as testenv's control plane starts them
//! (`control_plane.rs`), with a real cluster's choices: Node and RBAC authorization,
//! NodeRestriction, a client certificate towards the kubelets, fixed ports.

use std::path::Path;

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};

use super::layout::{APISERVER_PORT, ETCD_PEER_PORT, ETCD_PORT, SERVICE_CIDR};
use super::pki::ClusterPki;
use super::procs::Procs;
use crate::binaries::Binaries;
use crate::control_plane::{
    ApiserverOptions, Authorization, apiserver_ready, etcd_args, port_open,
};
use crate::error::Result;

/// An admin client from `kubeconfig`.
pub(super) async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    crate::crypto::install_crypto_provider();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

pub(super) async fn start_control_plane(
    procs: &mut Procs,
    cp: &Binaries,
    pki: &ClusterPki,
    node_ip: &str,
) -> Result<()> {
    let root = procs.layout.root().to_path_buf();
    let etcd = etcd_args("cluster", &root.join("etcd"), ETCD_PORT, ETCD_PEER_PORT);
    procs.spawn("etcd", &cp.etcd, &etcd, &[])?;
    procs
        .wait("etcd to listen", || async {
            port_open(ETCD_PORT).then_some(())
        })
        .await?;
    let args = ApiserverOptions {
        etcd_port: ETCD_PORT,
        // The node's address too: pods reach the `kubernetes` Service's endpoint there.
        bind_address: "0.0.0.0",
        port: APISERVER_PORT,
        advertise_address: node_ip,
        endpoint_reconciler: true,
        service_cidr: SERVICE_CIDR,
        authorization: Authorization::NodeAndRbac {
            kubelet_client: (&pki.kubelet_client.0, &pki.kubelet_client.1),
        },
        cert_dir: root.join("apiserver-certs"),
    }
    .args(&pki.pki);
    procs.spawn("kube-apiserver", &cp.kube_apiserver, &args, &[])?;
    let admin = client(&procs.layout.kubeconfig()).await?;
    procs
        .wait("kube-apiserver to be ready", || {
            let admin = admin.clone();
            async move { apiserver_ready(&admin).await.then_some(()) }
        })
        .await
}

/// Lets the apiserver's kubelet client use the kubelet API (logs, exec, port-forward, metrics).
pub(super) async fn bind_kubelet_client(admin: &kube::Client) -> Result<()> {
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cloud-controllers:kube-apiserver-kubelet-client"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:kubelet-api-admin"
        },
        "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "User",
            "name": "kube-apiserver-kubelet-client"
        }]
    }))
    .expect("a valid ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}
