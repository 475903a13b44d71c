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
/// running as a process against a test control plane: `cloud-node` and `cloud-node-lifecycle`
/// (or the controllers given), no leader election, no serving, no routes. Killed when dropped.
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
        Self::start_controllers(
            kubeconfig,
            cloud_config,
            log,
            "cloud-node,cloud-node-lifecycle",
        )
    }

    /// [`UpstreamCcm::start`] running `controllers` (`--controllers`, e.g. `service`).
    pub fn start_controllers(
        kubeconfig: &std::path::Path,
        cloud_config: &std::path::Path,
        log: &std::path::Path,
        controllers: &str,
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
                "--configure-cloud-routes=false",
                "--v=2",
            ])
            .arg(format!("--controllers={controllers}"))
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

/// A load-balancer rule as cloud-sim's CloudStack API lists it, with its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsRule {
    pub name: String,
    /// `tcp`, `udp` or `tcp-proxy`.
    pub protocol: String,
    pub public_ip: String,
    pub public_ip_id: String,
    pub public_port: u16,
    pub private_port: u16,
    /// The member VMs' ids, sorted.
    pub members: Vec<String>,
}

/// A firewall rule on a public address: protocol, start port and the sorted CIDRs.
pub type CsFirewallRule = (String, u16, Vec<String>);

async fn list(
    sim: &Sim,
    command: &str,
    params: &[(&str, &str)],
    key: &str,
) -> Vec<serde_json::Value> {
    let v = sim
        .cloudstack_client()
        .unfaulted()
        .call(command, params)
        .await
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    v[key].as_array().cloned().unwrap_or_default()
}

fn port(v: &serde_json::Value) -> u16 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0)
}

/// The rules of the Service with `uid` (named `<load balancer name>-<protocol>-<port>`, as
/// upstream names them), sorted by name; only exact names count, not the keyword's substrings.
pub async fn lb_rules(sim: &Sim, uid: &str) -> Vec<CsRule> {
    let lb = cloud_client::default_load_balancer_name(uid);
    let listed = list(
        sim,
        "listLoadBalancerRules",
        &[("keyword", &lb), ("listall", "true")],
        "loadbalancerrule",
    )
    .await;
    let mut out = Vec::new();
    for r in listed {
        let name = r["name"].as_str().unwrap_or_default().to_owned();
        let ours = name
            .strip_prefix(&format!("{lb}-"))
            .and_then(|rest| rest.rsplit_once('-'))
            .is_some_and(|(proto, p)| {
                ["tcp", "udp", "tcp-proxy"].contains(&proto) && p.parse::<u16>().is_ok()
            });
        if !ours {
            continue;
        }
        let id = r["id"].as_str().unwrap_or_default();
        let mut members: Vec<String> = list(
            sim,
            "listLoadBalancerRuleInstances",
            &[("id", id)],
            "loadbalancerruleinstance",
        )
        .await
        .iter()
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect();
        members.sort();
        out.push(CsRule {
            name,
            protocol: r["protocol"].as_str().unwrap_or_default().to_owned(),
            public_ip: r["publicip"].as_str().unwrap_or_default().to_owned(),
            public_ip_id: r["publicipid"].as_str().unwrap_or_default().to_owned(),
            public_port: port(&r["publicport"]),
            private_port: port(&r["privateport"]),
            members,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The firewall rules on the public address `ip_id`, sorted.
pub async fn firewall_rules(sim: &Sim, ip_id: &str) -> Vec<CsFirewallRule> {
    let mut out: Vec<CsFirewallRule> = list(
        sim,
        "listFirewallRules",
        &[("ipaddressid", ip_id), ("listall", "true")],
        "firewallrule",
    )
    .await
    .iter()
    .map(|f| {
        let mut cidrs: Vec<String> = f["cidrlist"]
            .as_str()
            .unwrap_or_default()
            .split([',', ' '])
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        cidrs.sort();
        (
            f["protocol"].as_str().unwrap_or_default().to_owned(),
            port(&f["startport"]),
            cidrs,
        )
    })
    .collect();
    out.sort();
    out
}

/// The public addresses the account holds besides source NAT and static NAT ones: those a load
/// balancer would hold.
pub async fn held_addresses(sim: &Sim) -> Vec<String> {
    list(
        sim,
        "listPublicIpAddresses",
        &[("issourcenat", "false"), ("listall", "true")],
        "publicipaddress",
    )
    .await
    .iter()
    .filter(|ip| ip["isstaticnat"] != true)
    .filter_map(|ip| ip["ipaddress"].as_str().map(str::to_owned))
    .collect()
}

/// The CloudStack writes `sim` received so far, by command: every request but reads (`list*`)
/// and job polls, whatever its outcome.
pub fn cloudstack_writes(sim: &Sim) -> std::collections::BTreeMap<String, u64> {
    sim.request_counts()
        .into_iter()
        .filter_map(|(k, n)| {
            let cmd = k.strip_prefix("CLOUDSTACK ")?;
            let read = cmd.starts_with("list") || cmd == "queryAsyncJobResult";
            (!read).then(|| (cmd.to_owned(), n))
        })
        .collect()
}
