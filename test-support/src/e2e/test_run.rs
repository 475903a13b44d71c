//! One test's world: its test binary's control plane, a cloud-sim of its own, a run label for its Nodes
//! and a namespace where a controller's chart RBAC is bound to its ServiceAccount; and that
//! controller started in-process under it. The service and route tests' fixtures build on it.

use std::sync::Arc;
use std::time::Duration;

use cloud_client::hcloud::HcloudConfig;
use cloud_client::{ClientStats, Cloud, StatsSnapshot};
use cloud_sim::{Sim, SimConfig};
use controller_kit::{Config, ControllerInfo, RunError, Runtime};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::e2e::run::{Running, cloud_of, spawn, test_config};
use crate::e2e::sim::TestServer;
use crate::e2e::{T, apply_chart_rbac, eventually, rbac_file, unique};

pub struct TestRun {
    /// Admin client (the test's own reads and writes).
    pub admin: Client,
    pub sim: Sim,
    /// Node label value selecting this test's Nodes.
    pub run: String,
    /// The test's namespace, named like the run: the ServiceAccount, its Lease, the test's objects.
    pub ns: String,
    controller: &'static str,
}

impl std::fmt::Debug for TestRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRun")
            .field("sim", &self.sim)
            .field("run", &self.run)
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

impl TestRun {
    /// A cloud-sim configured as `sim` (default: actions take 50 ms, so tests see them pending
    /// without waiting long), a run and namespace `prefix-…`, and `controller`'s chart RBAC bound
    /// to its ServiceAccount there.
    pub async fn start(controller: &'static str, prefix: &str, sim: Option<SimConfig>) -> TestRun {
        let k = testenv::kube().await;
        let admin = k.client().await;
        let sim = Sim::start_with(sim.unwrap_or(SimConfig {
            action_duration: Duration::from_millis(50),
            ..SimConfig::default()
        }))
        .await;
        let run = unique(prefix);
        let ns = run.clone();
        apply_chart_rbac(&admin, &rbac_file(controller), &ns, controller).await;
        TestRun {
            admin,
            sim,
            run,
            ns,
            controller,
        }
    }

    /// A client acting as the controller's ServiceAccount (only the chart's RBAC applies).
    pub async fn service_account(&self) -> Client {
        testenv::kube()
            .await
            .service_account_client(&self.ns, self.controller)
            .await
    }

    /// Starts the controller `info` in-process as `client`, watching this run's Nodes, with a cloud
    /// client configured as `cfg`; returns it and that client's counters.
    pub async fn spawn<F, Fut>(
        &self,
        info: &'static ControllerInfo,
        client: Client,
        cfg: HcloudConfig,
        start: F,
    ) -> (Running, Arc<ClientStats>)
    where
        F: FnOnce(Runtime, Cloud) -> Fut,
        Fut: std::future::Future<Output = Result<(), RunError>> + Send + 'static,
    {
        self.spawn_with(info, client, cfg, test_config(info, &self.run), start)
            .await
    }

    /// [`TestRun::spawn`] with the controller's configuration given (e.g. [`crate::e2e::run::shadow`]).
    pub async fn spawn_with<F, Fut>(
        &self,
        info: &'static ControllerInfo,
        client: Client,
        cfg: HcloudConfig,
        config: Config,
        start: F,
    ) -> (Running, Arc<ClientStats>)
    where
        F: FnOnce(Runtime, Cloud) -> Fut,
        Fut: std::future::Future<Output = Result<(), RunError>> + Send + 'static,
    {
        let cloud = cloud_of(cfg, &config).await;
        let stats = cloud.stats.clone();
        let running = spawn(info, config, client, move |rt| start(rt, cloud)).await;
        (running, stats)
    }

    /// Starts the controller `info` as a ServiceAccount without any permission, so that its first
    /// Node list never completes, waits until it serves its metrics, and stops it:
    /// what the stop returns. A stop before the first list must be a clean exit.
    pub async fn stop_before_the_first_node_list<F, Fut>(
        &self,
        info: &'static ControllerInfo,
        cfg: HcloudConfig,
        start: F,
    ) -> Result<(), RunError>
    where
        F: FnOnce(Runtime, Cloud) -> Fut,
        Fut: std::future::Future<Output = Result<(), RunError>> + Send + 'static,
    {
        let nobody = testenv::kube()
            .await
            .service_account_client(&self.ns, &unique("nobody"))
            .await;
        let config = test_config(info, &self.run);
        let (running, _) = self.spawn_with(info, nobody, cfg, config, start).await;
        eventually("the admin server", T, || async {
            let metrics = crate::e2e::run::try_http_get(running.admin, "/metrics")
                .await
                .ok()?;
            metrics.contains("# EOF").then_some(())
        })
        .await;
        running.stop().await
    }

    /// A running `cx22` server in `fsn1` named `name`.
    pub async fn server(&self, name: &str) -> TestServer {
        crate::e2e::sim::create_server(&self.sim, name).await
    }

    /// A running server in `location` named `name` (see [`create_server_in`](crate::e2e::sim::create_server_in)).
    pub async fn server_in(&self, name: &str, location: &str) -> TestServer {
        crate::e2e::sim::create_server_in(&self.sim, name, location).await
    }

    /// Events about `kind` `name`.
    pub async fn events_of(&self, kind: &str, name: &str) -> Vec<Event> {
        Api::<Event>::all(self.admin.clone())
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                })
            })
            .collect()
    }

    /// Waits for an event with `reason` about `kind/name`; returns its note.
    pub async fn wait_event(&self, kind: &str, name: &str, reason: &str) -> String {
        eventually(&format!("{reason} event on {kind} {name}"), T, || async {
            self.events_of(kind, name)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.note.unwrap_or_default())
        })
        .await
    }

    pub async fn has_event(&self, kind: &str, name: &str, reason: &str) -> bool {
        self.events_of(kind, name)
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason))
    }

    /// Responses with `status` cloud-sim sent (to anyone).
    pub fn responses_with(&self, status: u16) -> usize {
        self.sim
            .request_log()
            .iter()
            .filter(|e| e.status == status)
            .count()
    }
}

/// `(method, endpoint)` of every cloud call counted in `now` but not in `mark`, one per call.
pub fn calls_since(now: &StatsSnapshot, mark: &StatsSnapshot) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, n) in &now.calls {
        let before = mark.calls.get(k).copied().unwrap_or(0);
        for _ in before..*n {
            out.push((k.method.clone(), k.endpoint.clone()));
        }
    }
    out
}

/// The writes among `calls` (as [`calls_since`] returns them).
pub fn writes(calls: Vec<(String, String)>) -> Vec<(String, String)> {
    calls.into_iter().filter(|(m, _)| m != "GET").collect()
}
