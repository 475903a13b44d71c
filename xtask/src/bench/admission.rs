//! `cargo xtask bench admission`: what the chart's ValidatingAdmissionPolicy for
//! `load-balancer.hetzner.cloud/*` annotations costs each Service write.
//!
//! A fresh control plane, no controller, Service creates with `dryRun=All` (the whole admission
//! chain runs, nothing is stored), one at a time, timed at the client. First N per Service shape
//! with no policy at all; then the policy rendered by `helm template` from the chart's defaults is
//! applied, its binding limited to one namespace, and N creates into that namespace alternate with
//! N into another one: both halves see the same apiserver at the same moment, so their difference
//! is what the policy adds. Three LoadBalancer Services: HCCM's default (type and location, which
//! no rule checks: the match conditions let it pass), an HTTP one (5 checked annotations) and one
//! carrying every annotation (36: every rule runs); then one the policy refuses and a ClusterIP
//! Service. Prints the median and p99 of each; asserts nothing.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::Api;
use kube::api::{PostParams, ResourceExt};
use serde::Serialize;
use serde_json::{Value, json};

use super::{BenchArgs, Env};

const PREFIX: &str = "load-balancer.hetzner.cloud/";
/// The namespace the bench binds the policy to, and one it does not.
const CHECKED: &str = "bench-checked";
const PLAIN: &str = "bench-plain";
const LABEL: &str = "bench.cloud-controllers/admission";

/// An HCCM-made load balancer's Service.
const HCCM: &[(&str, &str)] = &[("type", "lb11"), ("location", "fsn1")];

/// An HTTP load balancer with its health check.
const HTTP: &[(&str, &str)] = &[
    ("location", "fsn1"),
    ("protocol", "http"),
    ("algorithm-type", "least_connections"),
    ("uses-proxyprotocol", "true"),
    ("health-check-http-path", "/healthz"),
    ("health-check-interval", "15s"),
];

/// Every annotation the controller reads, valid (cloud-client's `every_annotation_parses_good_values`).
const EVERY: &[(&str, &str)] = &[
    ("name", "my-lb"),
    ("type", "lb21"),
    ("location", "fsn1"),
    ("algorithm-type", "least_connections"),
    ("protocol", "https"),
    ("uses-proxyprotocol", "true"),
    ("ipv6-disabled", "1"),
    ("disable-public-network", "F"),
    ("disable-private-ingress", "TRUE"),
    ("use-private-ip", "t"),
    ("private-ipv4", "10.0.0.9"),
    ("private-subnet-ip-range", "10.0.1.0/24"),
    ("hostname", "lb.example.com"),
    ("node-selector", "role=edge, zone in (fsn1, nbg1)"),
    ("ipv4-rdns", "v4.example.com"),
    ("ipv6-rdns", "v6.example.com"),
    ("http-cookie-name", "SESS"),
    ("http-cookie-lifetime", "300"),
    ("http-timeout-idle", "1m"),
    ("http-sticky-sessions", "true"),
    ("http-redirect-http", "true"),
    ("certificate-type", "uploaded"),
    ("http-certificates", "12, my-cert"),
    ("health-check-protocol", "http"),
    ("health-check-port", "10256"),
    ("health-check-interval", "15s"),
    ("health-check-timeout", "10"),
    ("health-check-retries", "3"),
    ("health-check-http-domain", "example.com"),
    ("health-check-http-path", "/healthz"),
    ("health-check-http-validate-certificate", "false"),
    ("health-check-kube-proxy", "true"),
    ("http-status-codes", "2??,301"),
    ("ipv4", "1.2.3.4"),
    ("ipv6", "::1"),
    ("id", "77"),
];

/// Two mistakes the policy refuses.
const BAD: &[(&str, &str)] = &[("protocol", "udp"), ("use-private-ip", "maybe")];

/// Latency of one kind of request, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub median_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Requests the policy refused (expected: all of the refused row, none of the others).
    pub refused: usize,
}

impl Latency {
    fn of(mut samples: Vec<Duration>, refused: usize) -> Self {
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
        Latency {
            median_ms: at(0.5),
            p99_ms: at(0.99),
            mean_ms: samples.iter().copied().map(ms).sum::<f64>() / samples.len() as f64,
            refused,
        }
    }
}

/// One Service shape with and without the policy.
#[derive(Debug, Serialize)]
pub struct Row {
    /// `load-balancer.hetzner.cloud/*` annotations it carries.
    pub annotations: usize,
    /// Before the policy existed.
    pub no_policy: Latency,
    /// The policy installed, in a namespace it is not bound to (interleaved with `with`).
    pub without: Latency,
    /// The policy installed and bound.
    pub with: Latency,
    /// What the policy adds (`with` − `without`): median and p99, milliseconds.
    pub added_median_ms: f64,
    pub added_p99_ms: f64,
}

impl Row {
    fn new(annotations: usize, no_policy: Latency, (without, with): (Latency, Latency)) -> Self {
        Row {
            annotations,
            added_median_ms: with.median_ms - without.median_ms,
            added_p99_ms: with.p99_ms - without.p99_ms,
            no_policy,
            without,
            with,
        }
    }
}

/// What `bench admission` measured.
#[derive(Debug, Serialize)]
pub struct Figures {
    /// Requests per measurement.
    pub requests: usize,
    /// From applying the policy until it refused a bad Service.
    pub active_after_s: f64,
    /// HCCM's default Service (type, location: no rule applies).
    pub hccm: Row,
    /// An HTTP Service, 5 checked annotations.
    pub http: Row,
    /// Every annotation: every rule runs.
    pub every_annotation: Row,
    /// 2 bad annotations, with the policy (refused).
    pub refused: Latency,
    /// A ClusterIP Service with every annotation, with the policy (not matched).
    pub cluster_ip: Latency,
}

fn service(ns: &str, name: &str, type_: &str, ann: &[(&str, &str)]) -> anyhow::Result<Service> {
    let annotations: serde_json::Map<String, Value> = ann
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), json!(v)))
        .collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "type": type_,
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "https", "port": 443, "protocol": "TCP"}],
        },
    }))?)
}

/// One dry-run create: how long it took and whether the policy refused it.
async fn create(client: &kube::Client, svc: &Service) -> anyhow::Result<(Duration, bool)> {
    let api: Api<Service> = Api::namespaced(client.clone(), &svc.namespace().unwrap_or_default());
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let start = Instant::now();
    let r = api.create(&pp, svc).await;
    let took = start.elapsed();
    match r {
        Ok(_) => Ok((took, false)),
        Err(kube::Error::Api(e)) if e.code == 422 => Ok((took, true)),
        Err(e) => Err(e).context(format!("creating {}", svc.name_any())),
    }
}

/// `n` creates of each Service of `svcs`, round-robin: their latencies, one per Service.
async fn time(client: &kube::Client, svcs: &[&Service], n: usize) -> anyhow::Result<Vec<Latency>> {
    let mut samples = vec![Vec::with_capacity(n); svcs.len()];
    let mut refused = vec![0; svcs.len()];
    for _ in 0..n {
        for (i, svc) in svcs.iter().enumerate() {
            let (took, no) = create(client, svc).await?;
            samples[i].push(took);
            refused[i] += usize::from(no);
        }
    }
    Ok(samples
        .into_iter()
        .zip(refused)
        .map(|(s, r)| Latency::of(s, r))
        .collect())
}

/// The same Service in the namespace without and the one with the policy, interleaved.
async fn pair(
    client: &kube::Client,
    plain: &Service,
    n: usize,
) -> anyhow::Result<(Latency, Latency)> {
    let mut checked = plain.clone();
    checked.metadata.namespace = Some(CHECKED.into());
    let mut l = time(client, &[plain, &checked], n).await?;
    let with = l.pop().expect("two");
    Ok((l.pop().expect("two"), with))
}

/// The chart's policy and binding, rendered from its defaults by helm.
fn render() -> anyhow::Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    let helm = testenv::ensure_helm().map_err(|e| anyhow::anyhow!("helm: {e}"))?;
    let chart = testenv::workspace_root().join("charts/cloud-controllers");
    let out = std::process::Command::new(helm)
        .args(["template", "cloud-controllers"])
        .arg(chart)
        .args([
            "--namespace",
            "kube-system",
            "--show-only",
            "templates/validating-admission-policy.yaml",
        ])
        .output()
        .context("running helm template")?;
    anyhow::ensure!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout))
        .context("parsing the rendered policy")?;
    let of_kind = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .with_context(|| format!("no {kind} rendered"))
    };
    Ok((
        serde_json::from_value(of_kind("ValidatingAdmissionPolicy")?)?,
        serde_json::from_value(of_kind("ValidatingAdmissionPolicyBinding")?)?,
    ))
}

pub async fn run(args: &BenchArgs) -> anyhow::Result<Figures> {
    let n = args.services.unwrap_or(if args.quick { 50 } else { 500 });
    let (policy, mut binding) = render()?;
    // Bound to one namespace only, so the other one measures the same apiserver without it.
    binding.spec.get_or_insert_default().match_resources = Some(serde_json::from_value(json!({
        "namespaceSelector": {"matchLabels": {LABEL: "checked"}}
    }))?);
    let env = Env::start(None).await?;
    let client = &env.client;
    for (ns, labels) in [(PLAIN, json!({})), (CHECKED, json!({LABEL: "checked"}))] {
        let obj: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns, "labels": labels}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &obj)
            .await?;
    }
    let shapes = [
        service(PLAIN, "hccm", "LoadBalancer", HCCM)?,
        service(PLAIN, "http", "LoadBalancer", HTTP)?,
        service(PLAIN, "every", "LoadBalancer", EVERY)?,
    ];
    let bad = service(CHECKED, "bad", "LoadBalancer", BAD)?;
    let cluster_ip = service(CHECKED, "cluster-ip", "ClusterIP", EVERY)?;

    // Warm up (connections, the apiserver's caches), then no policy at all.
    time(client, &[&shapes[0]], 20).await?;
    let no_policy = time(client, &shapes.iter().collect::<Vec<_>>(), n).await?;

    let pp = PostParams::default();
    let start = Instant::now();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&pp, &policy)
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&pp, &binding)
        .await?;
    while !create(client, &bad).await?.1 {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "the policy refused nothing within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let active_after = start.elapsed();

    time(client, &[&shapes[0]], 20).await?;
    let mut rows = Vec::new();
    for ((s, ann), no_policy) in shapes.iter().zip([HCCM, HTTP, EVERY]).zip(no_policy) {
        rows.push(Row::new(ann.len(), no_policy, pair(client, s, n).await?));
    }
    let [hccm, http, every_annotation] = <[Row; 3]>::try_from(rows).expect("three shapes");
    let mut last = time(client, &[&bad, &cluster_ip], n).await?;
    let cluster_ip = last.pop().expect("two");
    let figures = Figures {
        requests: n,
        active_after_s: active_after.as_secs_f64(),
        hccm,
        http,
        every_annotation,
        refused: last.pop().expect("two"),
        cluster_ip,
    };
    print(&figures);
    Ok(figures)
}

fn print(f: &Figures) {
    println!(
        "admission bench ({} dry-run Service creates per line, one at a time, the lines of a Service \
         interleaved; kube-apiserver {})",
        f.requests,
        testenv::KUBE_APISERVER_VERSION
    );
    println!(
        "  the policy refused its first Service {:.2} s after it was applied",
        f.active_after_s
    );
    println!(
        "  {:<50} {:>9} {:>9} {:>9}  refused",
        "", "median", "p99", "mean"
    );
    let line = |what: &str, l: &Latency| {
        println!(
            "  {what:<50} {:>6.2} ms {:>6.2} ms {:>6.2} ms  {}",
            l.median_ms, l.p99_ms, l.mean_ms, l.refused
        );
    };
    for (what, r) in [
        ("HCCM default (type, location)", &f.hccm),
        ("HTTP (6 annotations)", &f.http),
        ("every annotation (36)", &f.every_annotation),
    ] {
        line(&format!("{what}, no policy yet"), &r.no_policy);
        line(&format!("{what}, namespace not bound"), &r.without);
        line(&format!("{what}, policy"), &r.with);
        println!(
            "  {:<50} {:>+6.2} ms {:>+6.2} ms",
            "  added by the policy", r.added_median_ms, r.added_p99_ms
        );
    }
    line("2 bad annotations, policy (refused)", &f.refused);
    line(
        "ClusterIP, 36 annotations, policy (no match)",
        &f.cluster_ip,
    );
}
