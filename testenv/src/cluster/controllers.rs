//! kube-controller-manager (node IPAM, no cloud controllers) and kube-scheduler.

use super::layout::{CLUSTER_CIDR, SERVICE_CIDR};
use super::pki::ClusterPki;
use super::procs::Procs;
use crate::binaries::ClusterBinaries;
use crate::error::Result;

pub(super) fn start_controllers(
    procs: &mut Procs,
    nb: &ClusterBinaries,
    pki: &ClusterPki,
) -> Result<()> {
    let root = procs.layout.root().to_path_buf();
    let kcm = pki.kubeconfigs["kube-controller-manager"]
        .display()
        .to_string();
    let kcm_args = vec![
        format!("--kubeconfig={kcm}"),
        format!("--authentication-kubeconfig={kcm}"),
        format!("--authorization-kubeconfig={kcm}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!(
            "--cert-dir={}",
            root.join("kube-controller-manager").display()
        ),
        // /usr/libexec/kubernetes/... otherwise, created at start.
        format!(
            "--flex-volume-plugin-dir={}",
            root.join("kube-controller-manager/volume-plugins")
                .display()
        ),
        "--leader-elect=false".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            pki.pki.service_account_key.display()
        ),
        format!("--root-ca-file={}", pki.pki.ca_cert.display()),
        "--use-service-account-credentials=true".to_owned(),
        // Node IPAM: the node's podCIDR.
        "--allocate-node-cidrs=true".to_owned(),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
        "--node-cidr-mask-size=24".to_owned(),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        // The cloud's part is ours (the controllers under test). v1.36 has no cloud controllers
        // left in kube-controller-manager; `external` says so explicitly.
        "--cloud-provider=external".to_owned(),
    ];
    procs.spawn(
        "kube-controller-manager",
        &nb.kube_controller_manager,
        &kcm_args,
        &[],
    )?;
    let sched = pki.kubeconfigs["kube-scheduler"].display().to_string();
    procs.spawn(
        "kube-scheduler",
        &nb.kube_scheduler,
        &[
            format!("--kubeconfig={sched}"),
            format!("--authentication-kubeconfig={sched}"),
            format!("--authorization-kubeconfig={sched}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--cert-dir={}", root.join("kube-scheduler").display()),
            "--leader-elect=false".to_owned(),
        ],
        &[],
    )
}
