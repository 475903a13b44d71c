//! A release installed the way users install it, on the real node: `cargo xtask cluster up`, then
//! `cargo xtask release --registry localhost:5001 --version 0.0.0-test` (both platforms, the
//! chart to `oci://localhost:5001/charts`), `podman manifest inspect` of each pushed image lists
//! linux/amd64 and linux/arm64 (an OCI index in the registry; each platform's size printed, at
//! most 25 MB), and `helm install cloud-controllers
//! oci://localhost:5001/charts/cloud-controllers --version 0.0.0-test` with only the Secret and
//! cloud-sim's endpoint (and `networking.enabled` for the route-controller) — no image value —
//! gives four Ready pods running the released images. A
//! LoadBalancer Service gets its load balancer; then a second release (0.0.0-test.2) and `helm
//! upgrade` to it roll all four pods with no write to the load balancer (cloud-sim's request log).
//! `cluster down` at the end, also when a check fails.
//!
//! Needs root and builds both platforms' images (the `dev-image` profile, as `cargo xtask test`
//! builds): `cargo test -p xtask --test cluster_release -- --ignored --nocapture`; `cargo xtask
//! test` runs it after `release_platforms`, so the images are built once. A cold cache compiles
//! the workspace for arm64 (figures in docs/images-and-dev-loop.md, "The release installed from
//! the registry").

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Down, is_ready, kubectl, kubectl_json, output, release_pods, tool, wait_for, xtask};
use serde_json::Value;

const REGISTRY: &str = "localhost:5001";
const CHART: &str = "oci://localhost:5001/charts/cloud-controllers";
const FIRST: &str = "0.0.0-test";
/// cloud-sim's network for the route-controller.
const NETWORK: &str = "cluster";
const SECOND: &str = "0.0.0-test.2";
/// How long the load balancer is watched for writes after the new service-controller read it.
const SETTLE_SECS: u64 = 15;
const CONTROLLERS: [&str; 4] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
];

fn release(version: &str) {
    let started = Instant::now();
    let out = xtask()
        .args(["release", "--registry", REGISTRY, "--version", version])
        .args(["--profile", "dev-image"])
        .output()
        .expect("xtask runs");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.status.success(), "cargo xtask release {version} failed");
    eprintln!("release {version}: {:.1?}", started.elapsed());
}

/// `podman manifest inspect` of a pushed image: its platforms, `linux/<arch>`, sorted. podman 4.3
/// (Debian bookworm's) has no `--tls-verify` for `manifest inspect`: a registries.conf naming
/// the registry insecure (plain HTTP), as a user of a local registry writes one.
fn platforms(reference: &str) -> Vec<String> {
    let podman = testenv::ensure_podman().expect("podman");
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        conf.path(),
        format!("[[registry]]\nlocation = \"{REGISTRY}\"\ninsecure = true\n"),
    )
    .unwrap();
    let out = podman
        .command()
        .env("CONTAINERS_REGISTRIES_CONF", conf.path())
        .args(["manifest", "inspect", reference])
        .output()
        .expect("podman runs");
    assert!(
        out.status.success(),
        "podman manifest inspect {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut found: Vec<String> = index["manifests"]
        .as_array()
        .expect("an index")
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or_default(),
                m["platform"]["architecture"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    found.sort();
    found
}

/// GET of `/v2/<repository>/manifests/<reference>` from the registry: the content type and the
/// document.
fn registry_manifest(repository: &str, reference: &str) -> (String, Value) {
    let mut c = Command::new("curl");
    c.args(["-sS", "--fail", "--max-time", "10", "-D", "/dev/stderr"])
        .args([
            "-H",
            "Accept: application/vnd.oci.image.index.v1+json, \
             application/vnd.oci.image.manifest.v1+json, \
             application/vnd.docker.distribution.manifest.list.v2+json, \
             application/vnd.docker.distribution.manifest.v2+json",
        ])
        .arg(format!(
            "http://{REGISTRY}/v2/{repository}/manifests/{reference}"
        ));
    let out = c.output().expect("curl runs");
    assert!(
        out.status.success(),
        "GET {repository}:{reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = String::from_utf8_lossy(&out.stderr);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    (
        content_type,
        serde_json::from_slice(&out.stdout).expect("a manifest is JSON"),
    )
}

/// Each pushed platform image of `image`: its platform, the bytes a node pulls (config and
/// compressed layers, from the registry) and its size unpacked (the release's measurement in
/// `images.txt`, found by the image ID, which is the pushed config's digest).
fn platform_sizes(image: &str, version: &str) -> Vec<(String, u64, u64)> {
    let (content_type, index) = registry_manifest(image, version);
    assert_eq!(
        content_type, "application/vnd.oci.image.index.v1+json",
        "{image}:{version} is pushed as an OCI index"
    );
    let listing = std::fs::read_to_string(
        // Where the release writes them: below the workspace it builds (testenv's root).
        testenv::workspace_root()
            .join("target/release-artifacts")
            .join(version)
            .join("images.txt"),
    )
    .expect("the release wrote images.txt");
    let mut sizes = Vec::new();
    for m in index["manifests"].as_array().expect("an index") {
        let platform = format!(
            "{}/{}",
            m["platform"]["os"].as_str().unwrap_or_default(),
            m["platform"]["architecture"].as_str().unwrap_or_default()
        );
        let digest = m["digest"].as_str().expect("a digest");
        let (_, manifest) = registry_manifest(image, digest);
        let pulled: u64 = manifest["config"]["size"].as_u64().unwrap_or(0)
            + manifest["layers"]
                .as_array()
                .expect("layers")
                .iter()
                .map(|l| l["size"].as_u64().unwrap_or(0))
                .sum::<u64>();
        let config = manifest["config"]["digest"].as_str().expect("a config");
        // `<image> <platform> <id> <size> bytes`
        let unpacked = listing
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 5 && f[0] == image && f[1] == platform && config.ends_with(f[2]))
                    .then(|| f[3].parse::<u64>().ok())
                    .flatten()
            })
            .unwrap_or_else(|| {
                panic!("{image} {platform}: config {config} is no image of images.txt:\n{listing}")
            });
        sizes.push((platform, pulled, unpacked));
    }
    sizes.sort();
    sizes
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn helm(args: &[&str]) -> String {
    let mut cmd = tool("helm");
    cmd.args(args);
    output(cmd)
}

/// The controller pods' name → image, once all four are Ready and no other pod of the release is
/// left (a roll is over).
fn ready_controllers(image_tag: &str) -> Option<Vec<(String, String)>> {
    let pods = release_pods(common::RELEASE);
    let mut ready = Vec::new();
    for pod in &pods {
        let image = pod["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
        if deleting || !image.ends_with(&format!(":{image_tag}")) || !is_ready(pod) {
            return None;
        }
        ready.push((
            pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            image,
        ));
    }
    (ready.len() == CONTROLLERS.len()).then_some(ready)
}

/// One request of cloud-sim's log.
struct Request {
    seq: u64,
    method: String,
    /// The path template, e.g. `/load_balancers/{id}/actions/add_target`.
    endpoint: String,
    /// When, `YYYY-MM-DDTHH:MM:SS+00:00`.
    at: String,
}

impl Request {
    fn on_load_balancers(&self) -> bool {
        self.endpoint.starts_with("/load_balancers")
    }
}

/// cloud-sim's request log after `seq`.
fn requests_since(sim: &testenv::cluster::CloudSim, seq: u64) -> Vec<Request> {
    let base = sim.endpoint.trim_end_matches("/v1");
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10"])
        .arg(format!("{base}/_sim/requests"));
    let log: Value = serde_json::from_str(&output(c)).expect("JSON");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    log["requests"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            let n = r["seq"].as_u64()?;
            (n > seq).then(|| Request {
                seq: n,
                method: text(&r["method"]),
                endpoint: text(&r["endpoint"]),
                at: text(&r["at"]),
            })
        })
        .collect()
}

/// The same second or later: cloud-sim's `…+00:00` and Kubernetes' `…Z` to the second.
fn not_before(at: &str, since: &str) -> bool {
    at.get(..19).unwrap_or(at) >= since.get(..19).unwrap_or(since)
}

#[test]
#[ignore = "needs root, builds both platforms' images: \
            cargo test -p xtask --test cluster_release -- --ignored --nocapture"]
fn a_release_installs_from_the_registry_with_no_image_value_and_upgrades_without_lb_writes() {
    let started = Instant::now();
    common::no_cluster_running();
    let status = xtask()
        .args(["cluster", "up"])
        .status()
        .expect("xtask runs");
    let _down = Down;
    assert!(status.success(), "cluster up failed");
    let state = testenv::cluster::status().expect("a running cluster");
    let sim = state
        .cloud_sim
        .clone()
        .expect("cluster up starts cloud-sim");
    eprintln!("cluster up: {:.1?}", started.elapsed());

    release(FIRST);
    for image in CONTROLLERS.iter().chain(&["cloud-sim"]) {
        let reference = format!("{REGISTRY}/{image}:{FIRST}");
        let found = platforms(&reference);
        eprintln!("podman manifest inspect {reference}: {found:?}");
        assert_eq!(found, ["linux/amd64", "linux/arm64"], "{reference}");
        for (platform, pulled, unpacked) in platform_sizes(image, FIRST) {
            eprintln!(
                "  {image:<21} {platform:<12} {:>5.1} MB unpacked, {:>5.1} MB pulled",
                mb(unpacked),
                mb(pulled)
            );
            assert!(
                unpacked <= 25_000_000,
                "{reference} {platform}: {:.1} MB > 25 MB",
                mb(unpacked)
            );
        }
    }

    // The route-controller needs a network: cloud-sim's `cluster`, the node's server in it (as
    // `cluster up --with-chart --networking` makes it).
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let world = cloud_sim::SimClient::new(&sim.endpoint, &sim.token);
        let network = world
            .create_network_in_zone(NETWORK, "10.0.0.0/8", "10.0.0.0/24", "eu-central")
            .await
            .expect("create the network in cloud-sim");
        world
            .attach_to_network(sim.server_id, network, Some("10.0.0.2"))
            .await
            .expect("attach the node's server");
    });
    kubectl(&[
        "-n",
        "kube-system",
        "create",
        "secret",
        "generic",
        "hcloud",
        &format!("--from-literal=token={}", sim.token),
        &format!("--from-literal=network={NETWORK}"),
    ]);
    // Only the endpoint and the switch that turns the route-controller on: no image value.
    let values = [
        format!("hcloud.endpoint={}", sim.endpoint),
        "networking.enabled=true".to_owned(),
        // HCLOUD_NETWORK for routes only: node-controller would make 10.0.0.2, which this
        // machine does not have, the node's InternalIP (as `cluster up --with-chart`).
        "hcloud.network.enabled=false".to_owned(),
    ];
    let install = Instant::now();
    let mut args = vec![
        "install",
        common::RELEASE,
        CHART,
        "--version",
        FIRST,
        "-n",
        "kube-system",
    ];
    for v in &values {
        args.extend(["--set", v.as_str()]);
    }
    eprintln!("$ helm {}", args.join(" "));
    helm(&args);
    let pods = wait_for(
        "four controller pods Ready, from the released images",
        Duration::from_secs(240),
        || ready_controllers(FIRST),
    );
    eprintln!(
        "helm install {CHART} --version {FIRST} (no image value): four pods Ready {:.1?} after \
         helm install",
        install.elapsed()
    );
    for (pod, image) in &pods {
        eprintln!("  {pod}: {image}");
        assert!(image.starts_with(&format!("{REGISTRY}/")), "{image}");
    }
    let node = kubectl_json(&["get", "node", &state.node]);
    assert!(
        node["spec"]["providerID"]
            .as_str()
            .is_some_and(|p| p.starts_with("hcloud://")),
        "node-controller initialized the node: {}",
        node["spec"]
    );

    // A load balancer for the upgrade to leave alone.
    let service = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "release-web", "namespace": "default",
                     "annotations": {"load-balancer.hetzner.cloud/location": "fsn1"}},
        "spec": {"type": "LoadBalancer", "selector": {"app": "release-web"},
                 "ports": [{"port": 80, "targetPort": 8080}]},
    })
    .to_string();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), service).unwrap();
    kubectl(&["apply", "-f", &file.path().display().to_string()]);
    let ingress = wait_for(
        "release-web's load-balancer ingress",
        Duration::from_secs(120),
        || {
            let svc = kubectl_json(&["get", "service", "-n", "default", "release-web"]);
            svc["status"]["loadBalancer"]["ingress"][0]["ip"]
                .as_str()
                .map(str::to_owned)
        },
    );
    eprintln!("release-web: ingress {ingress}");

    release(SECOND);
    let before = requests_since(&sim, 0).last().map_or(0, |r| r.seq);
    let upgrade = Instant::now();
    helm(&[
        "upgrade",
        common::RELEASE,
        CHART,
        "--version",
        SECOND,
        "-n",
        "kube-system",
        "--reuse-values",
    ]);
    let rolled = wait_for(
        "four controller pods Ready on the second release",
        Duration::from_secs(240),
        || ready_controllers(SECOND),
    );
    let rolled_in = upgrade.elapsed();
    for (pod, image) in &rolled {
        assert!(
            !pods.iter().any(|(old, _)| old == pod),
            "{pod} was not replaced"
        );
        eprintln!("  {pod}: {image}");
    }
    // The new service-controller has read the load balancer (it reconciles every Service at
    // start): a read no earlier than its container's start (the old one is gone by then).
    let service_controller = common::release_pods(common::RELEASE)
        .into_iter()
        .find(|p| {
            p["metadata"]["labels"]["app.kubernetes.io/component"] == "service-controller"
                && p["metadata"]["deletionTimestamp"].is_null()
        })
        .expect("the new service-controller pod");
    let container_started =
        service_controller["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
            .as_str()
            .expect("the new service-controller runs")
            .to_owned();
    wait_for(
        "the new service-controller reading the load balancer",
        Duration::from_secs(120),
        || {
            requests_since(&sim, before)
                .iter()
                .any(|r| {
                    r.method == "GET"
                        && r.on_load_balancers()
                        && not_before(&r.at, &container_started)
                })
                .then_some(())
        },
    );
    // A write would follow that read within a reconcile; give it time to show.
    std::thread::sleep(Duration::from_secs(SETTLE_SECS));
    let after = requests_since(&sim, before);
    let show = |r: &Request| format!("{} {} {}", r.at, r.method, r.endpoint);
    let lb: Vec<String> = after
        .iter()
        .filter(|r| r.on_load_balancers())
        .map(show)
        .collect();
    let writes: Vec<String> = after
        .iter()
        .filter(|r| r.on_load_balancers() && r.method != "GET")
        .map(show)
        .collect();
    eprintln!(
        "helm upgrade to {SECOND}: four pods rolled in {rolled_in:.1?} (new service-controller \
         started {container_started}); from helm upgrade to {SETTLE_SECS} s after its first \
         read of the load balancer cloud-sim saw {} requests, {} on load balancers, {} \
         load-balancer writes:",
        after.len(),
        lb.len(),
        writes.len()
    );
    for l in &lb {
        eprintln!("  {l}");
    }
    assert!(writes.is_empty(), "load-balancer writes: {writes:?}");
    kubectl(&["delete", "-f", &file.path().display().to_string(), "--wait"]);
    eprintln!("cluster_release: {:.1?} in all", started.elapsed());
}
