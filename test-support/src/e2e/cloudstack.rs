//! The CloudStack side of a test: a provider for cloud-sim's CloudStack API (`--cloud-provider=
//! external-cloudstack`), and VMs as a test needs them.

use std::time::Duration;

use cloud_client::Cloud;
use cloud_client::Secret;
use cloud_client::cloudstack::{CloudStackClients, CloudStackConfig};
use cloud_client::retry::RetryPolicy;
use cloud_sim::{CsVmSpec, Sim};

/// The provider's configuration for `sim`'s primary account, with quick retries.
pub fn config(sim: &Sim) -> CloudStackConfig {
    let mut c = CloudStackConfig::new(
        sim.cloudstack_endpoint(),
        Secret::new(sim.cloudstack_api_key()),
        Secret::new(sim.cloudstack_secret_key()),
    );
    c.client.retry = RetryPolicy {
        max_attempts: 3,
        base: Duration::from_millis(20),
        cap: Duration::from_millis(200),
    };
    c
}

/// The cloud of [`config`].
pub async fn cloud(sim: &Sim) -> Cloud {
    cloud_with(config(sim)).await
}

/// The cloud of `config`.
pub async fn cloud_with(config: CloudStackConfig) -> Cloud {
    CloudStackClients::new(config)
        .await
        .expect("CloudStack provider for the sim")
        .cloud()
}

/// What a test needs to know about a VM.
#[derive(Debug, Clone)]
pub struct TestVm {
    pub id: String,
    /// Its first NIC's address.
    pub ip: String,
    /// Its static-NAT address, if it has one.
    pub public_ip: Option<String>,
}

impl TestVm {
    /// The providerID upstream's CCM gives its Node.
    pub fn provider_id(&self) -> String {
        format!("external-cloudstack://{}", self.id)
    }
}

/// Creates a VM as `spec` says.
pub async fn vm(sim: &Sim, spec: &CsVmSpec) -> TestVm {
    let cs = sim.cloudstack_client();
    let id = cs.create_vm(spec).await.expect("create VM");
    let shown = cs.vm(&id).await.expect("show VM");
    TestVm {
        id,
        ip: shown["ip"].as_str().expect("VM has an address").to_owned(),
        public_ip: shown["public_ip"].as_str().map(str::to_owned),
    }
}

/// Puts the VM straight into `state` (`Stopped`, `Destroyed`, ...).
pub async fn set_state(sim: &Sim, vm: &TestVm, state: &str) {
    sim.cloudstack_client()
        .set_vm_state(&vm.id, state)
        .await
        .expect("set VM state");
}

/// Writes upstream's cloud-config (`[Global]`, `api-url`, `api-key`, `secret-key`) for `sim`'s
/// primary account to `path`: the file both upstream's CCM and ours read.
pub fn write_cloud_config(sim: &Sim, path: &std::path::Path) {
    let text = format!(
        "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
        sim.cloudstack_endpoint(),
        sim.cloudstack_api_key(),
        sim.cloudstack_secret_key()
    );
    std::fs::write(path, text).expect("write the cloud-config");
}

/// Upstream's CCM (apache/cloudstack-kubernetes-provider, built by `testenv::cloudstack_ccm()`)
/// running as a process against a test control plane: `cloud-node` and `cloud-node-lifecycle`,
/// no leader election, no serving, no routes. Killed when dropped.
#[derive(Debug)]
pub struct UpstreamCcm {
    child: tokio::process::Child,
    /// Its output (klog), for a failing test's message.
    pub log: std::path::PathBuf,
}

impl UpstreamCcm {
    /// Starts it with `cloud_config` against the apiserver of `kubeconfig`, its output in `log`.
    pub fn start(
        kubeconfig: &std::path::Path,
        cloud_config: &std::path::Path,
        log: &std::path::Path,
    ) -> UpstreamCcm {
        let binary =
            testenv::cloudstack_ccm().expect("upstream's CloudStack CCM (testenv builds it)");
        let out = std::fs::File::create(log).expect("create the upstream CCM's log");
        let err = out.try_clone().expect("duplicate a log file handle");
        let child = tokio::process::Command::new(binary)
            .arg("--cloud-provider=external-cloudstack")
            .arg(format!("--cloud-config={}", cloud_config.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--leader-elect=false",
                "--secure-port=0",
                "--authentication-skip-lookup",
                "--controllers=cloud-node,cloud-node-lifecycle",
                "--configure-cloud-routes=false",
                "--v=2",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("start upstream's CloudStack CCM");
        UpstreamCcm {
            child,
            log: log.to_owned(),
        }
    }

    /// Its output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it (SIGTERM, then waits at most 30 s) and returns its output. Panics if it had
    /// already exited: it must run until told to stop.
    pub async fn stop(mut self) -> String {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("upstream's CCM exited early ({status}):\n{}", self.output());
        }
        crate::e2e::process::sigterm(&mut self.child).await;
        self.output()
    }
}
