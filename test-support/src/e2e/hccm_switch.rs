//! What an operator switching from HCCM keeps, checked against a built controller binary run
//! against the test control plane and a cloud-sim:
//!
//! - the metric families HCCM serves, under HCCM's names, types and labels ([`HCCM_FAMILIES`],
//!   taken from HCCM's and its libraries' source), on `HCLOUD_METRICS_ADDRESS`;
//! - HCCM's environment starts it where it used to stop it (exit 2): an empty `HCLOUD_NETWORK`,
//!   both `HCLOUD_TOKEN` and `HCLOUD_TOKEN_FILE`, `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP` without
//!   a network, `HCLOUD_SERVER_CACHE_MAX_AGE=0`, `HCLOUD_SERVER_CACHE_MODE`,
//!   `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK`, each accepted setting that deserves a word logged;
//! - `HCLOUD_METRICS_ENABLED=false` turns `/metrics` off, and a second process given the same
//!   `HCLOUD_METRICS_ADDRESS` (two controllers on one host network) stops with a message saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

use crate::e2e::process::{Binary, sigterm};
use crate::e2e::run::http_status;
use crate::e2e::test_run::TestRun;
use crate::e2e::{NodeSpecT, T, create_node, eventually};

/// Which binaries serve a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Every controller binary.
    All,
    /// Only this one.
    Only(&'static str),
}

/// One family of HCCM's `/metrics`: name (as Prometheus stores it), type, label names, and where
/// it comes from in HCCM.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: &'static str,
    pub labels: &'static [&'static str],
    pub served: Served,
    pub source: &'static str,
}

/// HCCM's families a dashboard or alert could use, as its source defines them. Go's `go_*`
/// runtime families have no counterpart in a Rust process; `workqueue_*` and `rest_client_*` are
/// not served (see the migration guide for their counterparts).
pub const HCCM_FAMILIES: &[Family] = &[
    Family {
        name: "hcloud_api_requests_total",
        kind: "counter",
        labels: &["code", "method", "api_endpoint"],
        served: Served::All,
        source: "hcloud-go hcloud/internal/instrumentation/metrics.go",
    },
    Family {
        name: "hcloud_api_request_duration_seconds",
        kind: "histogram",
        labels: &["method"],
        served: Served::All,
        source: "hcloud-go hcloud/internal/instrumentation/metrics.go",
    },
    Family {
        name: "hcloud_api_in_flight_requests",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "hcloud-go hcloud/internal/instrumentation/metrics.go",
    },
    Family {
        name: "cloud_controller_manager_operations_total",
        kind: "counter",
        labels: &["op"],
        served: Served::All,
        source: "HCCM internal/metrics/metrics.go",
    },
    Family {
        name: "leader_election_master_status",
        kind: "gauge",
        labels: &["name"],
        served: Served::All,
        source: "client-go tools/leaderelection/metrics.go",
    },
    Family {
        name: "process_cpu_seconds_total",
        kind: "counter",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "process_resident_memory_bytes",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "process_virtual_memory_bytes",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "process_open_fds",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "process_max_fds",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "process_start_time_seconds",
        kind: "gauge",
        labels: &[],
        served: Served::All,
        source: "client_golang prometheus/process_collector.go",
    },
    Family {
        name: "node_controller_cloud_provider_taint_removal_delay_seconds",
        kind: "histogram",
        labels: &[],
        served: Served::Only("node-controller"),
        source: "cloud-provider controllers/node/metrics.go",
    },
    Family {
        name: "node_controller_initial_node_sync_delay_seconds",
        kind: "histogram",
        labels: &[],
        served: Served::Only("node-controller"),
        source: "cloud-provider controllers/node/metrics.go",
    },
    Family {
        name: "service_controller_loadbalancer_sync_total",
        kind: "counter",
        labels: &[],
        served: Served::Only("service-controller"),
        source: "cloud-provider controllers/service/metrics.go",
    },
    Family {
        name: "service_controller_nodesync_error_total",
        kind: "counter",
        labels: &[],
        served: Served::Only("service-controller"),
        source: "cloud-provider controllers/service/metrics.go",
    },
    Family {
        name: "service_controller_nodesync_latency_seconds",
        kind: "histogram",
        labels: &[],
        served: Served::Only("service-controller"),
        source: "cloud-provider controllers/service/metrics.go",
    },
    Family {
        name: "service_controller_update_loadbalancer_host_latency_seconds",
        kind: "histogram",
        labels: &[],
        served: Served::Only("service-controller"),
        source: "cloud-provider controllers/service/metrics.go",
    },
    Family {
        name: "route_controller_route_sync_total",
        kind: "counter",
        labels: &[],
        served: Served::Only("route-controller"),
        source: "cloud-provider controllers/route/metrics.go",
    },
];

/// A scraped page: family → (type, label-name sets of its samples).
type Page = BTreeMap<String, (String, Vec<BTreeSet<String>>)>;

/// Parses OpenMetrics text: `# TYPE` lines name the families (a counter's samples end in
/// `_total`, a histogram's in `_bucket`/`_sum`/`_count`); each sample's label names, `le` aside.
pub fn parse_families(text: &str) -> Page {
    let mut page = Page::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            // Stored as Prometheus stores it: a counter family is queried with `_total`.
            let stored = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            page.insert(stored.clone(), (kind.to_string(), Vec::new()));
            current = Some(stored);
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some(family) = &current else { continue };
        let labels: BTreeSet<String> = match line.split_once('{') {
            Some((_, rest)) => rest
                .split_once('}')
                .map(|(l, _)| l)
                .unwrap_or_default()
                .split(',')
                .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim().to_string()))
                .filter(|k| k != "le")
                .collect(),
            None => BTreeSet::new(),
        };
        if let Some((_, samples)) = page.get_mut(family) {
            samples.push(labels);
        }
    }
    page
}

/// Checks `page` against [`HCCM_FAMILIES`] for `controller`; returns one line per family checked
/// (name, type, labels, whether samples were there to check the labels on), or the mismatches.
pub fn check_families(page: &Page, controller: &str) -> Result<Vec<String>, Vec<String>> {
    let mut report = Vec::new();
    let mut problems = Vec::new();
    for f in HCCM_FAMILIES {
        if let Served::Only(c) = f.served
            && c != controller
        {
            continue;
        }
        let Some((kind, samples)) = page.get(f.name) else {
            problems.push(format!("{}: not served", f.name));
            continue;
        };
        if kind != f.kind {
            problems.push(format!("{}: type {kind}, HCCM's is {}", f.name, f.kind));
        }
        let want: BTreeSet<String> = f.labels.iter().map(|l| l.to_string()).collect();
        for got in samples {
            if *got != want {
                problems.push(format!("{}: labels {got:?}, HCCM's are {want:?}", f.name));
            }
        }
        report.push(format!(
            "{} | {kind} | {{{}}} | {}",
            f.name,
            f.labels.join(","),
            if samples.is_empty() {
                "no sample yet".to_string()
            } else {
                format!("{} samples", samples.len())
            }
        ));
    }
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(problems)
    }
}

/// A free loopback port (bound and released; the test binds it again right away).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Everything a child prints, read as it comes (a full pipe would block the child).
fn capture(child: &mut tokio::process::Child) -> Arc<Mutex<String>> {
    let out = Arc::new(Mutex::new(String::new()));
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let out = out.clone();
        tokio::spawn(async move {
            let mut pipe = pipe;
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                out.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    out
}

/// What the controller under test needs from the world.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// `node-controller`, ...
    pub controller: &'static str,
    /// `CARGO_BIN_EXE_…`.
    pub bin: &'static str,
    /// HCCM's operation this controller performs on the test's one Node (its count is waited
    /// for, so `cloud_controller_manager_operations_total` has a sample to check).
    pub op: Option<&'static str>,
    /// Whether the controller needs `HCLOUD_NETWORK` (route-controller); the others get HCCM's
    /// `HCLOUD_NETWORK=""`.
    pub network: bool,
    /// Flags of its own it needs.
    pub args: &'static [&'static str],
    /// service-controller: watch the test's namespace and serve two Services there.
    pub services: bool,
}

/// Runs the whole check for `case` (see the module docs); prints the family table.
pub async fn assert_switch_from_hccm(case: Case) {
    let world = TestRun::start(case.controller, "hccm", None).await;
    let node = format!("{}-node", world.run);
    let server = crate::e2e::sim::create_server(&world.sim, &node).await;
    if case.network {
        world
            .sim
            .client()
            .create_network("k8s", "10.0.0.0/8", "10.0.0.0/16")
            .await
            .expect("create network");
    }
    create_node(
        &world.admin,
        &world.run,
        &node,
        NodeSpecT {
            tainted: case.controller == "node-controller",
            provider_id: (case.controller != "node-controller")
                .then(|| format!("hcloud://{}", server.id)),
            // The lifecycle controller asks the cloud about NotReady Nodes only.
            ready: Some(case.controller != "lifecycle-controller"),
            ..Default::default()
        },
    )
    .await;
    let token_file = std::env::temp_dir().join(format!("{}-token", world.run));
    std::fs::write(&token_file, "the-file-loses\n").expect("write the token file");
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let k = testenv::kube().await;
    let watch_namespace = format!("--watch-namespace={}", world.ns);
    let binary = |metrics_env: &[(&str, String)]| {
        let mut b = Binary::new(case.bin, &k);
        if case.services {
            b = b.args(&[&watch_namespace]);
        }
        b = b
            .leader_elect(&world.ns)
            .nodes_of(&world.run)
            .sim(&world.sim)
            .args(case.args)
            .args(&["--node-monitor-period=1s"])
            .env("HCLOUD_TOKEN_FILE", &token_file)
            .env("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "true")
            .env("HCLOUD_SERVER_CACHE_MAX_AGE", "0")
            .env("HCLOUD_SERVER_CACHE_MODE", "one")
            .env("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")
            .env("HCLOUD_NETWORK", if case.network { "k8s" } else { "" });
        for (k, v) in metrics_env {
            b = b.env(k, v);
        }
        b
    };

    // HCCM's environment starts it; /metrics is served on HCLOUD_METRICS_ADDRESS only.
    let mut child = binary(&[("HCLOUD_METRICS_ADDRESS", metrics.to_string())])
        .args(&[&format!("--admin-address={admin}")])
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let output = capture(&mut child);
    if case.services {
        services(&world).await;
        let note = world
            .wait_event("Service", "private", "SyncLoadBalancerFailed")
            .await;
        assert!(
            note.contains("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"),
            "the Warning names the setting: {note}"
        );
        // Refused before any write: no load balancer carries its UID.
        let uid = kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(
            world.admin.clone(),
            &world.ns,
        )
        .get("private")
        .await
        .expect("the Service")
        .metadata
        .uid
        .expect("a UID");
        let lbs = world
            .sim
            .client()
            .list_load_balancers()
            .await
            .expect("list");
        assert!(
            !lbs.iter()
                .any(|lb| lb["labels"]["hcloud-ccm/service-uid"] == uid.as_str()),
            "nothing half-created for the refused Service: {lbs:?}"
        );
    }
    // Polled by hand rather than with `eventually`, to show what was served and logged.
    let deadline = tokio::time::Instant::now() + T;
    let page = loop {
        let (status, body) = http_status(metrics, "/metrics").await.unwrap_or_default();
        let ready = status == 200
            && body.contains("hcloud_api_requests_total{")
            && body.contains("leader_election_master_status{")
            && case
                .op
                .is_none_or(|op| body.contains(&format!("op=\"{op}\"")));
        if ready {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no HCCM families with samples within {T:?}; last page ({status}):\n{body}\nlogged:\n{}",
            output.lock().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let families = parse_families(&page);
    match check_families(&families, case.controller) {
        Ok(report) => {
            println!("{}: HCCM families served:", case.controller);
            for line in report {
                println!("  {line}");
            }
        }
        Err(problems) => panic!("{}:\n{}\n\n{page}", case.controller, problems.join("\n")),
    }
    let (status, _) = http_status(admin, "/metrics").await.expect("admin answers");
    assert_eq!(status, 404, "/metrics moved to HCLOUD_METRICS_ADDRESS");
    let (status, _) = http_status(admin, "/healthz").await.expect("admin answers");
    assert_eq!(status, 200);

    // A second process given the same address stops, saying why.
    let (code, out) = binary(&[("HCLOUD_METRICS_ADDRESS", metrics.to_string())])
        .args(&["--leader-elect=false"])
        .output()
        .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("HCLOUD_METRICS_ADDRESS={metrics}"))
            && out.contains("each controller needs its own address"),
        "{out}"
    );

    let status = sigterm(&mut child).await;
    assert!(status.success(), "{status}");
    let logged = output.lock().unwrap().clone();
    for said in [
        "using HCLOUD_TOKEN, as HCCM does",
        "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK has no effect",
    ] {
        assert!(logged.contains(said), "{said:?} not logged:\n{logged}");
    }
    assert!(!logged.contains(&world.sim.token()), "the token was logged");

    // HCLOUD_METRICS_ENABLED=false: no /metrics anywhere.
    let mut child = binary(&[("HCLOUD_METRICS_ENABLED", "false".into())])
        .args(&[&format!("--admin-address={admin}")])
        .spawn();
    eventually("the admin server", T, || async {
        matches!(http_status(admin, "/healthz").await, Ok((200, _))).then_some(())
    })
    .await;
    let (status, _) = http_status(admin, "/metrics").await.expect("admin answers");
    assert_eq!(
        status, 404,
        "HCLOUD_METRICS_ENABLED=false turns /metrics off"
    );
    sigterm(&mut child).await;
    std::fs::remove_file(&token_file).ok();
}

/// Two LoadBalancer Services in `ns`: `web` opts out of the private-IP default by annotation and
/// gets its load balancer; `private` follows `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP=true`, which
/// without a network is its own Warning, not a stopped process.
async fn services(world: &TestRun) {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Api, PostParams};
    let api: Api<Service> = Api::namespaced(world.admin.clone(), &world.ns);
    for (name, private) in [("web", Some("false")), ("private", None)] {
        let mut annotations = serde_json::Map::new();
        annotations.insert("load-balancer.hetzner.cloud/location".into(), "fsn1".into());
        if let Some(v) = private {
            annotations.insert(
                "load-balancer.hetzner.cloud/use-private-ip".into(),
                v.into(),
            );
        }
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}
        }))
        .expect("a Service");
        api.create(&PostParams::default(), &svc)
            .await
            .expect("create the Service");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_types_and_label_names_are_read_from_the_page() {
        let page = parse_families(
            "# HELP hcloud_api_requests A counter.\n# TYPE hcloud_api_requests counter\n\
             hcloud_api_requests_total{code=\"200\",method=\"get\",api_endpoint=\"/servers\"} 3\n\
             # TYPE hcloud_api_request_duration_seconds histogram\n\
             hcloud_api_request_duration_seconds_sum{method=\"get\"} 0.1\n\
             hcloud_api_request_duration_seconds_bucket{le=\"0.005\",method=\"get\"} 1\n\
             # TYPE process_open_fds gauge\nprocess_open_fds 9\n# EOF\n",
        );
        assert_eq!(page["hcloud_api_requests_total"].0, "counter");
        assert_eq!(
            page["hcloud_api_requests_total"].1[0],
            ["api_endpoint", "code", "method"]
                .map(String::from)
                .into_iter()
                .collect()
        );
        assert!(
            page["hcloud_api_request_duration_seconds"]
                .1
                .iter()
                .all(|l| l.len() == 1)
        );
        let problems = check_families(&page, "route-controller").unwrap_err();
        assert!(
            problems.contains(&"route_controller_route_sync_total: not served".to_string()),
            "{problems:?}"
        );
        assert!(!problems.iter().any(|p| p.starts_with("process_open_fds")));
    }
}
