//! A built controller binary run as a process against the test control plane and a cloud-sim: what
//! the in-process tests cannot show (flag and environment parsing, exit codes, signals).

use std::time::Duration;

use kube::Client;
use tokio::process::{Child, Command};

/// The `--leader-elect-identity` prefix of a binary started with [`Binary::leader_elect`].
pub const IDENTITY: &str = "bin-test";

/// A controller binary's command line: the admin kubeconfig and an ephemeral admin port. The
/// process is killed when its handle is dropped, so a failing test leaves nothing running.
#[derive(Debug)]
pub struct Binary {
    cmd: Command,
}

impl Binary {
    /// `bin` (an `env!("CARGO_BIN_EXE_…")`) against `k`.
    pub fn new(bin: &str, k: &testenv::TestKube) -> Binary {
        let mut cmd = Command::new(bin);
        cmd.arg("--kubeconfig")
            .arg(k.kubeconfig())
            .arg("--admin-address=127.0.0.1:0")
            .kill_on_drop(true);
        Binary { cmd }
    }

    /// `sim`'s token and endpoint.
    pub fn sim(self, sim: &cloud_sim::Sim) -> Binary {
        self.env("HCLOUD_TOKEN", sim.token())
            .env("HCLOUD_ENDPOINT", sim.endpoint())
    }

    /// Its Lease in `ns` with the tests' short durations (the defaults would make a hand-over take
    /// 15 s), held as [`IDENTITY`].
    pub fn leader_elect(self, ns: &str) -> Binary {
        self.args(&[
            "--leader-elect-resource-namespace",
            ns,
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            &format!("--leader-elect-identity={IDENTITY}"),
        ])
    }

    /// Watching only the Nodes of `run` (tests share one apiserver).
    pub fn nodes_of(self, run: &str) -> Binary {
        self.args(&[
            "--node-label-selector",
            &format!("{}={run}", crate::e2e::TEST_LABEL),
        ])
    }

    pub fn args(mut self, args: &[&str]) -> Binary {
        self.cmd.args(args);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Binary {
        self.cmd.env(key, value);
        self
    }

    /// The command itself, to spawn with other settings (e.g. piped output).
    pub fn command(self) -> Command {
        self.cmd
    }

    pub fn spawn(mut self) -> Child {
        self.cmd.spawn().expect("start the controller binary")
    }

    /// Runs it to its exit (at most 30 s): the exit code and everything it printed, stderr first.
    pub async fn output(mut self) -> (Option<i32>, String) {
        let out = tokio::time::timeout(Duration::from_secs(30), self.cmd.output())
            .await
            .expect("exits within 30 s")
            .expect("run the binary");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        (out.status.code(), all)
    }
}

/// Asserts that `child` (started with [`Binary::leader_elect`] in `ns`) holds `controller`'s
/// Lease, then that SIGTERM makes it exit 0 and release the Lease, so a successor need not wait
/// for it to expire.
pub async fn assert_leads_then_releases_on_sigterm(
    child: &mut Child,
    admin: &Client,
    ns: &str,
    controller: &str,
) {
    let lease_name = format!("cloud-controller-manager-{controller}");
    let h = lease_holder(admin, ns, &lease_name)
        .await
        .expect("the binary holds the Lease");
    assert!(h.starts_with(IDENTITY), "{h}");

    let status = sigterm(child).await;
    assert!(status.success(), "graceful shutdown exits 0: {status}");
    assert_eq!(
        lease_holder(admin, ns, &lease_name).await,
        None,
        "Lease released on shutdown"
    );
}

/// Sends SIGTERM to a controller process and waits (at most 30 s) for it to exit.
pub async fn sigterm(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id().expect("the child runs").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait for the child")
}

/// The holder of Lease `ns/name`, if any.
pub async fn lease_holder(client: &Client, ns: &str, name: &str) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    kube::Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}
