//! The configuration files of the cluster's components, as text.

use std::path::Path;

use super::layout::{BRIDGE, CLUSTER_CIDR, CLUSTER_DNS, CNI_NETWORK, Layout, REGISTRY};

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// containerd v2 (config version 3): every path under the state directory, the runc wrapper as the
/// runtime, network namespaces under the state directory, and `REGISTRY` over plain HTTP.
pub fn containerd(l: &Layout, sandbox_image: &str) -> String {
    let c = l.containerd();
    format!(
        r#"version = 3
root = "{root}"
state = "{state}"
# Plugins that need what this machine lacks, would write outside the state directory (NRI's socket,
# /opt/containerd), or send traces.
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
  "io.containerd.nri.v1.nri",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{sandbox_image}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{certs}"

[plugins.'io.containerd.cri.v1.runtime']
  # /run/netns otherwise.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        # The oom_score_adj clamp (see docs/real-cluster.md), which runs Debian's runc.
        BinaryName = "{runc}"
        SystemdCgroup = false
        Root = "{runc_root}"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
        root = p(&c.join("root")),
        state = p(&c.join("state")),
        sock = p(&l.containerd_socket()),
        certs = p(&c.join("certs.d")),
        runc = p(&l.runc_wrapper()),
        runc_root = p(&c.join("runc")),
        cni_bin = p(&l.cni_bin()),
        cni_conf = p(&l.cni_conf()),
    )
}

/// `certs.d/<registry>/hosts.toml`: pull from the local registry over plain HTTP.
pub fn registry_hosts() -> String {
    format!(
        r#"server = "http://{REGISTRY}"

[host."http://{REGISTRY}"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
"#
    )
}

/// The runc wrapper: this VM's root lacks CAP_SYS_RESOURCE, so runc cannot write the negative
/// `oom_score_adj` kubelet puts into every pod sandbox (-998) and Guaranteed container (-997); the
/// wrapper raises negative values in the bundle's config.json (and `--process` files) to 0.
pub fn runc_wrapper(runc: &Path) -> String {
    format!(
        r#"#!/bin/sh
# Written by `cargo xtask cluster up`: clamps a negative oomScoreAdj to 0, then runs runc.
prev=
for a in "$@"; do
  case "$prev" in --bundle|-b) f="$a/config.json" ;; --process|-p) f="$a" ;; *) f= ;; esac
  if [ -n "$f" ] && [ -f "$f" ]; then
    python3 -c 'import json,sys
p=sys.argv[1]; s=json.load(open(p)); proc=s.get("process",s)
if proc.get("oomScoreAdj",0)<0:
    proc["oomScoreAdj"]=0; json.dump(s,open(p,"w"))' "$f"
  fi
  prev="$a"
done
exec {runc} "$@"
"#,
        runc = runc.display()
    )
}

/// The pod network: a bridge with host-local addresses from the node's podCIDR, and portmap.
pub fn cni_conflist(l: &Layout, pod_cidr: &str) -> String {
    serde_json::to_string_pretty(&serde_json::json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": p(&l.cni_ipam()),
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    }))
    .expect("a JSON value serializes")
}

/// KubeletConfiguration. `failCgroupV1: false`: kubelet >= 1.35 refuses to start on cgroup v1
/// (this machine is hybrid) without it. No disk-pressure eviction (as kind does): the node shares
/// its disk with builds and caches, and kubelet's default thresholds (imagefs under 15 % free)
/// would taint it `disk-pressure` on a full developer disk and leave every pod Pending.
pub fn kubelet(l: &Layout, ca: &Path) -> String {
    let k = l.kubelet();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://{sock}
staticPodPath: {manifests}
volumePluginDir: {plugins}
podLogsDir: {pod_logs}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
clusterDomain: cluster.local
clusterDNS: [{CLUSTER_DNS}]
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
serializeImagePulls: false
evictionHard: {{memory.available: 100Mi, nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}}
"#,
        sock = p(&l.containerd_socket()),
        manifests = p(&k.join("manifests")),
        plugins = p(&k.join("volume-plugins")),
        pod_logs = p(&k.join("pod-logs")),
        ca = p(ca),
    )
}

/// KubeProxyConfiguration: iptables mode; no conntrack sysctls (nothing to restore), no
/// `route_localnet` (localhost NodePorts off), and oomScoreAdj 0 (no CAP_SYS_RESOURCE here).
pub fn kube_proxy(kubeconfig: &Path, node: &str) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
mode: iptables
iptables: {{localhostNodePorts: false}}
hostnameOverride: {node}
clusterCIDR: {CLUSTER_CIDR}
oomScoreAdj: 0
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
"#,
        kubeconfig = p(kubeconfig),
    )
}
