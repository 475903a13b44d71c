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
