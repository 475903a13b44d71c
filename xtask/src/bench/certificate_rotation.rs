//! `bench services`, phase 4 (ours only: HCCM reads no Secrets): certificates from a TLS Secret.
//!
//! Set-up, not measured: one TLS Secret labelled for the controller, and every Service's port 443
//! made `https` with its certificate (`protocol.443`, `http-certificate-secret.443`), until every
//! load balancer serves the one upload. Then:
//! - **renewal**: the Secret gets a new certificate, as cert-manager renews it; until every load
//!   balancer serves the new upload and the old one is deleted: the writes, per load balancer
//!   (the goal: at most 4);
//! - **unchanged Secret**: the Secret is touched without changing its certificate (a label, so
//!   its resourceVersion moves and every Service naming it is reconciled again), then the
//!   controller is left alone for [`QUIET`]: its cloud calls (the goal: 0).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::services::{NAMESPACE, TIMEOUT};
use super::{Calls, Controller, Env, PROBE_QUERY};

const SECRET: &str = "bench-tls";
const HOST: &str = "shop.example.com";
const PORT: u16 = 443;
/// How long the controller is watched after the unchanged Secret's touch.
const QUIET: Duration = Duration::from_secs(10);
/// How long a renewal may take before it is reported as never done.
const RENEWAL_TIMEOUT: Duration = Duration::from_secs(60);
/// The flag our controller needs for this phase.
pub const FLAG: &str = "--certificate-secrets";

/// Phase 4's figures.
#[derive(Debug, Serialize)]
pub struct Rotation {
    pub load_balancers: usize,
    /// Until every load balancer serves the renewed certificate and the old upload is gone.
    pub renewed_s: Option<f64>,
    pub renewal: Calls,
    pub writes: u64,
    pub writes_per_load_balancer: f64,
    /// The unchanged Secret touched, then [`QUIET`]: every call the controller made.
    pub unchanged: Calls,
}

pub async fn run(env: &Env, ctl: &mut Controller, services: usize) -> anyhow::Result<Rotation> {
    let (cert, key) = cloud_sim::test_certs::self_signed(&[HOST]);
    put_secret(env, &cert, &key).await?;
    let api: Api<Service> = Api::namespaced(env.client.clone(), NAMESPACE);
    let https = json!({"metadata": {"annotations": {
        format!("load-balancer.hetzner.cloud/protocol.{PORT}"): "https",
        format!("load-balancer.hetzner.cloud/http-certificate-secret.{PORT}"): SECRET,
    }}});
    for i in 1..=services {
        let name = format!("bench-svc-{i}");
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&https))
            .await?;
    }
    let serves = |serial: Option<String>| {
        let env = &env;
        async move { every_lb_serves_only(env, services, serial.as_deref()).await }
    };
    let first = cloud_sim::test_certs::serial(&cert);
    anyhow::ensure!(
        ctl.wait_until(TIMEOUT, async || serves(first.clone()).await)
            .await?,
        "the load balancers never served the Secret's certificate"
    );

    // Renewal.
    env.sim.reset_counters();
    let start = Instant::now();
    let (cert, key) = cloud_sim::test_certs::self_signed(&[HOST]);
    put_secret(env, &cert, &key).await?;
    let renewed = cloud_sim::test_certs::serial(&cert);
    let done = ctl
        .wait_until(RENEWAL_TIMEOUT, async || serves(renewed.clone()).await)
        .await?;
    let renewed_s = done.then(|| start.elapsed().as_secs_f64());
    if !done {
        print_events(env).await?;
    }
    tokio::time::sleep(super::services::SETTLE).await;
    let renewal = Calls::of(&env.sim);
    let writes = renewal
        .by_endpoint
        .iter()
        .filter(|(k, _)| !k.starts_with("GET "))
        .map(|(_, n)| n)
        .sum::<u64>();

    // The same certificate, the Secret touched.
    env.sim.reset_counters();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    let touch = json!({"metadata": {"labels": {"bench/touched": "yes"}}});
    secrets
        .patch(SECRET, &PatchParams::default(), &Patch::Merge(&touch))
        .await?;
    tokio::time::sleep(QUIET).await;
    Ok(Rotation {
        load_balancers: services,
        renewed_s,
        writes_per_load_balancer: writes as f64 / services as f64,
        writes,
        renewal,
        unchanged: Calls::of(&env.sim),
    })
}

/// Creates or replaces the Secret, labelled as cert-manager's `secretTemplate` labels it.
async fn put_secret(env: &Env, cert: &str, key: &str) -> anyhow::Result<()> {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET,
                     "labels": {cloud_client::CERTIFICATE_SECRET_LABEL: "true"}},
        "stringData": {"tls.crt": cert, "tls.key": key},
    });
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    let pp = PatchParams::apply("bench").force();
    secrets.patch(SECRET, &pp, &Patch::Apply(&secret)).await?;
    Ok(())
}

/// Whether the sim holds exactly one certificate, of `serial`, and each of the `n` load
/// balancers serves it on [`PORT`]. Read with [`PROBE_QUERY`], not counted as the controller's.
async fn every_lb_serves_only(env: &Env, n: usize, serial: Option<&str>) -> anyhow::Result<bool> {
    let client = env.sim.client();
    let list = |what: &'static str| {
        let client = client.clone();
        async move {
            client
                .list_all(&format!("{what}?{PROBE_QUERY}"))
                .await
                .map_err(|e| anyhow::anyhow!("listing {what}: {e}"))
        }
    };
    let certificates = list("certificates").await?;
    let [only] = certificates.as_slice() else {
        return Ok(false);
    };
    let uploaded = only["certificate"]
        .as_str()
        .and_then(cloud_sim::test_certs::serial);
    if uploaded.as_deref() != serial {
        return Ok(false);
    }
    let serving = |lb: &Value| {
        lb["services"].as_array().into_iter().flatten().any(|s| {
            s["listen_port"] == PORT && s["http"]["certificates"] == json!([only["id"].clone()])
        })
    };
    let lbs = list("load_balancers").await?;
    Ok(lbs.len() == n && lbs.iter().all(serving))
}

/// What the controller said about the Services, when the renewal never ended.
async fn print_events(env: &Env) -> anyhow::Result<()> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    for e in events.list(&Default::default()).await? {
        eprintln!(
            "  event {} {}: {} {}",
            e.involved_object.name.unwrap_or_default(),
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.message.unwrap_or_default()
        );
    }
    Ok(())
}
