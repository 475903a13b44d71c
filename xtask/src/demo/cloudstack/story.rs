//! The CloudStack node story: each step changes the world as a person (or CloudStack) would and
//! waits, with a deadline, for what `kubectl get nodes` then shows.

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, Client};

use super::super::machines::UNINITIALIZED;
use super::super::progress::Progress;
use super::super::story::{has_taint, label, provider_id, until};
use super::VmRow;
use cloud_sim::CsVmSpec;

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// A VM of the demo.
#[derive(Debug, Clone)]
pub struct Vm {
    pub id: String,
    pub name: String,
    pub zone: &'static str,
    /// Its service offering's name.
    pub offering: &'static str,
    /// Its first NIC's address.
    pub ip: String,
    /// Its static-NAT address, if it has one.
    pub public_ip: Option<String>,
}

impl Vm {
    /// What the Node's instance-type labels say: the offering's name, letters and digits only.
    fn instance_type(&self) -> String {
        self.offering
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect()
    }
}

/// Creates VM `cs-<i>`: odd ones in zone-1 (`Small Instance`), even ones in zone-2 (`Medium
/// Instance`), cs-1 with a static-NAT public address.
pub async fn create_vm(sim: &cloud_sim::Sim, i: usize) -> anyhow::Result<Vm> {
    let name = format!("cs-{i}");
    let (zone, offering) = if i % 2 == 1 {
        ("zone-1", "Small Instance")
    } else {
        ("zone-2", "Medium Instance")
    };
    let mut spec = CsVmSpec::named(&name).zone(zone).offering(offering);
    if i == 1 {
        spec = spec.static_nat();
    }
    let cs = sim.cloudstack_client();
    let id = cs
        .create_vm(&spec)
        .await
        .map_err(|e| anyhow::anyhow!("creating VM {name}: {e}"))?;
    let shown = cs
        .vm(&id)
        .await
        .map_err(|e| anyhow::anyhow!("reading VM {name}: {e}"))?;
    let ip = shown["ip"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("VM {name} has no address"))?
        .to_string();
    Ok(Vm {
        id,
        name,
        zone,
        offering,
        ip,
        public_ip: shown["public_ip"].as_str().map(str::to_string),
    })
}

/// The VM's Node as its kubelet registers it with `--cloud-provider=external --node-ip=<its
/// address>` (the uninitialized taint, no providerID), Ready.
pub async fn register_node(client: &Client, vm: &Vm) -> anyhow::Result<()> {
    testenv::KubeletNode {
        node_ip: Some(vm.ip.clone()),
        ..testenv::KubeletNode::new(&vm.name)
    }
    .register(client)
    .await
    .map_err(|e| anyhow::anyhow!("registering node {}: {e}", vm.name))?;
    set_ready(client, &vm.name, true).await
}

/// Writes the node's Ready condition, as kubelet's heartbeat (or its absence) would.
async fn set_ready(client: &Client, name: &str, ready: bool) -> anyhow::Result<()> {
    testenv::set_node_ready(client, name, ready)
        .await
        .map_err(|e| anyhow::anyhow!("setting Ready={ready} on {name}: {e}"))
}

/// The demo world's handles.
pub struct Story<'a> {
    pub admin: Client,
    pub sim: &'a cloud_sim::Sim,
    pub vms: Vec<Vm>,
    pub progress: &'a Progress,
}

impl Story<'_> {
    fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    async fn node(&self, name: &str) -> anyhow::Result<Option<Node>> {
        Ok(self.nodes().get_opt(name).await?)
    }

    /// Plays every step.
    pub async fn play(&mut self) -> anyhow::Result<()> {
        let progress = self.progress;
        let vms = self.vms.clone();
        progress
            .step(
                &format!(
                    "{} nodes initialized (providerID external-cloudstack://<VM id>, instance type, zone and region, InternalIP and ExternalIP; taint removed)",
                    vms.len()
                ),
                self.initialized(&vms),
            )
            .await?;
        let stopped = vms[1].clone();
        progress
            .step(
                &format!("{}'s VM stopped → shutdown taint", stopped.name),
                self.stopped(&stopped),
            )
            .await?;
        progress
            .step(
                &format!(
                    "{}'s VM started again, Node Ready → shutdown taint removed",
                    stopped.name
                ),
                self.started(&stopped),
            )
            .await?;
        let gone = self.vms.remove(2);
        progress
            .step(
                &format!("{}'s VM destroyed → its Node deleted", gone.name),
                self.destroyed(&gone),
            )
            .await?;
        progress
            .step(
                "a new VM cs-5 joins → its Node initialized",
                self.node_joins(5),
            )
            .await?;
        Ok(())
    }

    /// Every one of `vms`' Nodes has what upstream's CCM gives it: providerID, the six labels,
    /// the addresses, and no uninitialized taint.
    async fn initialized(&self, vms: &[Vm]) -> anyhow::Result<()> {
        until(async || {
            for vm in vms {
                let Some(node) = self.node(&vm.name).await? else {
                    return Ok(None);
                };
                if !is_initialized(&node, vm) {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await
    }

    async fn stopped(&self, vm: &Vm) -> anyhow::Result<()> {
        self.sim
            .cloudstack_client()
            .stop_vm(&vm.id)
            .await
            .map_err(|e| anyhow::anyhow!("stopping {}: {e}", vm.name))?;
        // kubelet stops reporting: the node goes NotReady.
        set_ready(&self.admin, &vm.name, false).await?;
        until(async || {
            let node = self.node(&vm.name).await?;
            Ok(node.filter(|n| has_taint(n, SHUTDOWN)).map(drop))
        })
        .await
    }

    async fn started(&self, vm: &Vm) -> anyhow::Result<()> {
        let cs = self.sim.cloudstack_client();
        cs.start_vm(&vm.id)
            .await
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", vm.name))?;
        cs.wait_vm_state(&vm.id, "Running")
            .await
            .map_err(|e| anyhow::anyhow!("waiting for {} to run: {e}", vm.name))?;
        set_ready(&self.admin, &vm.name, true).await?;
        until(async || {
            let node = self.node(&vm.name).await?;
            Ok(node.filter(|n| !has_taint(n, SHUTDOWN)).map(drop))
        })
        .await
    }

    async fn destroyed(&self, vm: &Vm) -> anyhow::Result<()> {
        self.sim
            .cloudstack_client()
            .destroy_vm(&vm.id)
            .await
            .map_err(|e| anyhow::anyhow!("destroying {}: {e}", vm.name))?;
        set_ready(&self.admin, &vm.name, false).await?;
        until(async || Ok(self.node(&vm.name).await?.is_none().then_some(()))).await
    }

    async fn node_joins(&mut self, i: usize) -> anyhow::Result<()> {
        let vm = create_vm(self.sim, i).await?;
        register_node(&self.admin, &vm).await?;
        self.vms.push(vm.clone());
        self.initialized(std::slice::from_ref(&vm)).await
    }

    /// All Nodes, for the summary.
    pub async fn all_nodes(&self) -> anyhow::Result<Vec<Node>> {
        Ok(self.nodes().list(&ListParams::default()).await?.items)
    }

    /// Every VM the story made, as the API shows it now (the destroyed one too).
    pub async fn vm_rows(&self) -> anyhow::Result<Vec<VmRow>> {
        let cs = self.sim.cloudstack_client();
        let mut rows = Vec::new();
        for v in cs
            .vms()
            .await
            .map_err(|e| anyhow::anyhow!("listing VMs: {e}"))?
        {
            let zone = v["zone"].as_str().unwrap_or("-").to_string();
            let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
            rows.push([
                s("name"),
                s("id"),
                zone,
                s("state"),
                s("ip"),
                s("public_ip"),
            ]);
        }
        rows.sort();
        Ok(rows)
    }
}

/// providerID, labels and addresses as upstream's CCM gives them, and no uninitialized taint.
fn is_initialized(node: &Node, vm: &Vm) -> bool {
    let want_id = format!("external-cloudstack://{}", vm.id);
    let instance_type = vm.instance_type();
    let labels = [
        ("node.kubernetes.io/instance-type", instance_type.as_str()),
        ("beta.kubernetes.io/instance-type", instance_type.as_str()),
        ("topology.kubernetes.io/zone", vm.zone),
        ("failure-domain.beta.kubernetes.io/zone", vm.zone),
        ("topology.kubernetes.io/region", vm.zone),
        ("failure-domain.beta.kubernetes.io/region", vm.zone),
    ];
    let mut want_addresses = vec![("InternalIP".to_string(), vm.ip.clone())];
    if let Some(public) = &vm.public_ip {
        want_addresses.push(("ExternalIP".to_string(), public.clone()));
    }
    want_addresses.push(("Hostname".to_string(), vm.name.clone()));
    let addresses: Vec<(String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default();
    !has_taint(node, UNINITIALIZED)
        && provider_id(node).as_deref() == Some(want_id.as_str())
        && labels.iter().all(|(k, v)| label(node, k) == *v)
        && addresses == want_addresses
}
