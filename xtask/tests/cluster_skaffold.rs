//! skaffold.yaml used for real against `cargo xtask cluster up`, in a copy of this checkout (the
//! test edits a source file there):
//!
//! 1. `skaffold run`: every image built with podman (`cargo xtask skaffold-build`), pushed to the
//!    cluster's registry, the chart deployed with helm; each pod runs the image skaffold built.
//! 2. `skaffold dev`: an edit of service-controller's source is rebuilt, pushed and rolled out
//!    with no further input; the new pod logs the edited line, only service-controller's image was
//!    rebuilt and no other pod restarted. Prints the time from the write to the new pod Ready.
//! 3. `skaffold dev -p service-controller`: only service-controller and cloud-sim are deployed.
//!
//! `cluster down` at the end, also when a check fails. Needs root and builds the images:
//! `cargo test -p xtask --test cluster_skaffold -- --ignored --nocapture`; `cargo xtask test`
//! runs it with the other real-cluster test.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Down, RELEASE, condition, is_ready, kubectl, kubectl_json, layout, output, release_pods,
    wait_for, wait_for_or_show_log, xtask,
};
use serde_json::Value;

const REGISTRY: &str = "localhost:5001";

/// The checkout's files (tracked and untracked, not ignored) copied into a temporary directory,
/// with their modification times.
fn copy_of_checkout() -> tempfile::TempDir {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut git = Command::new("git");
    git.args([
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ])
    .current_dir(repo);
    let files = output(git);
    let copy = tempfile::Builder::new()
        .prefix("cloud-controllers-skaffold-")
        .tempdir()
        .expect("a temp dir");
    for file in files.split('\0').filter(|f| !f.is_empty()) {
        let (from, to) = (repo.join(file), copy.path().join(file));
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        std::fs::create_dir_all(to.parent().unwrap()).expect("mkdir");
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{file}: {e}"));
        // With the same modification times, cargo in the image build finds the crates compiled
        // by an earlier build of this checkout fresh (its target dir is a cache mount).
        let modified = from.metadata().and_then(|m| m.modified()).expect("mtime");
        std::fs::File::options()
            .write(true)
            .open(&to)
            .and_then(|f| f.set_modified(modified))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    copy
}

/// skaffold in `dir`, against the cluster, pushing to its registry, building with the test's
/// own xtask binary (no `cargo` run inside skaffold).
fn skaffold(dir: &Path, args: &[&str]) -> Command {
    let bin = layout().bin();
    let mut cmd = Command::new(bin.join("skaffold"));
    cmd.args(args)
        .args(["--default-repo", &format!("{REGISTRY}/cloud-controllers")])
        .args(["--insecure-registry", REGISTRY])
        .current_dir(dir)
        .env("KUBECONFIG", layout().kubeconfig())
        .env("CLOUD_CONTROLLERS_XTASK", env!("CARGO_BIN_EXE_xtask"))
        .env("SKAFFOLD_UPDATE_CHECK", "false")
        .env("SKAFFOLD_INTERACTIVE", "false");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

/// The release's pods by component (`node-controller`, …, `simulator`).
fn pods_by_component() -> BTreeMap<String, Vec<Value>> {
    let mut by = BTreeMap::<String, Vec<Value>>::new();
    for pod in release_pods(RELEASE) {
        let component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        by.entry(component).or_default().push(pod);
    }
    by
}

/// Ready and not on its way out.
fn is_serving(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null() && is_ready(pod)
}

fn image_of(pod: &Value) -> String {
    pod["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until exactly `components` run, one Ready pod each, and returns them.
fn wait_for_release(components: &BTreeSet<&str>, timeout: Duration) -> BTreeMap<String, Value> {
    wait_for(&format!("{components:?} Ready"), timeout, || {
        let by = pods_by_component();
        let names: BTreeSet<&str> = by.keys().map(String::as_str).collect();
        let ready = names == *components
            && by
                .values()
                .all(|pods| pods.len() == 1 && pods.iter().all(is_ready));
        ready.then(|| {
            by.into_iter()
                .map(|(c, mut pods)| (c, pods.remove(0)))
                .collect()
        })
    })
}

/// A background `skaffold dev` whose output goes to a file; interrupted (as by Ctrl-C, so it
/// cleans up) when dropped.
struct Dev {
    child: Child,
    log: PathBuf,
}

impl Dev {
    fn start(dir: &Path, args: &[&str]) -> Dev {
        let log = dir.join(format!("skaffold-dev-{}.log", args.join("-")));
        let file = std::fs::File::create(&log).expect("log file");
        let mut all = vec!["dev", "--port-forward=off"];
        all.extend(args);
        let child = skaffold(dir, &all)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("skaffold dev starts");
        Dev { child, log }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGINT, then waits (skaffold deletes what it deployed) up to two minutes.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// The artifacts skaffold built, from the output's `Building [artifact]...` lines.
fn built_in(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("Building ["))
        .filter_map(|l| l.split_once(']'))
        .map(|(artifact, _)| artifact.to_owned())
        .collect()
}

/// The node's server in the in-cluster cloud-sim, reached through its Service's ClusterIP from the
/// host, attached to the network the chart made it create (dev/values.yaml: `k8s`) as on Hetzner,
/// so route-controller can route the node's podCIDR. Returns the address and the server's id.
fn seed_simulator(node: &str, node_ip: &str) -> (String, u64) {
    let svc = kubectl_json(&[
        "get",
        "service",
        "-n",
        "kube-system",
        "cloud-controllers-simulator",
    ]);
    let sim = format!(
        "http://{}:{}",
        svc["spec"]["clusterIP"].as_str().unwrap(),
        svc["spec"]["ports"][0]["port"]
    );
    let token = kubectl(&[
        "get",
        "secret",
        "-n",
        "kube-system",
        "cloud-controllers-simulator",
        "-o",
        "jsonpath={.data.token}",
    ]);
    let token = String::from_utf8(base64_decode(token.trim()).expect("the token is base64"))
        .expect("a UTF-8 token");
    let world = cloud_sim::SimClient::new(&format!("{sim}/v1"), &token);
    let body = serde_json::json!({
        "name": node, "public_ipv4": node_ip,
        "server_type": "cx22", "location": "fsn1", "image": "debian-12",
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(async {
        let server = world
            .create_servers_with(1, node, body)
            .await
            .expect("POST /_sim/batch/servers")[0];
        let networks = world
            .get("/networks?name=k8s")
            .await
            .expect("GET /networks");
        let network = networks["networks"][0]["id"]
            .as_u64()
            .expect("the network k8s");
        world
            .attach_to_network(server, network, Some("10.0.0.2"))
            .await
            .expect("attach the server to the network");
        server
    });
    (sim, server)
}

/// route-controller's podCIDR route made: `NetworkUnavailable=False`.
fn wait_for_network_available(node: &str) {
    let reason = wait_for("NetworkUnavailable=False", Duration::from_secs(120), || {
        let node = kubectl_json(&["get", "node", node]);
        condition(&node, "NetworkUnavailable")
            .filter(|c| c["status"] == "False")
            .map(|c| c["reason"].clone())
    });
    eprintln!("route-controller: the podCIDR route, NetworkUnavailable=False ({reason})");
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut cmd = Command::new("base64");
    cmd.arg("-d").stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cmd.spawn().ok()?;
    std::io::Write::write_all(&mut child.stdin.take()?, text.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    out.status.success().then_some(out.stdout)
}

/// `artifact -> reference` from the `Tags used in deployment:` block skaffold prints.
fn deployed_tags(output: &str) -> BTreeMap<String, String> {
    output
        .lines()
        .skip_while(|l| !l.starts_with("Tags used in deployment:"))
        .skip(1)
        .map_while(|l| l.strip_prefix(" - "))
        .filter_map(|l| l.split_once(" -> "))
        .map(|(a, r)| (a.to_owned(), r.to_owned()))
        .collect()
}

#[test]
#[ignore = "needs root, builds the images, changes the host's network: \
            cargo test -p xtask --test cluster_skaffold -- --ignored --nocapture"]
fn skaffold_run_and_dev_against_a_real_cluster() {
    common::no_cluster_running();
    let status = xtask()
        .args(["cluster", "up"])
        .status()
        .expect("xtask runs");
    let _down = Down;
    assert!(status.success(), "cluster up failed");
    let copy = copy_of_checkout();
    let dir = copy.path();
    let everything: BTreeSet<&str> = [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
        "route-controller",
        "simulator",
    ]
    .into();

    // 1. skaffold run.
    let started = Instant::now();
    let out = skaffold(dir, &["run"]).output().expect("skaffold runs");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "skaffold run:\n{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("skaffold run: {:.1?}", started.elapsed());
    let tags: BTreeMap<String, String> = deployed_tags(&printed)
        .into_iter()
        .map(|(artifact, tag)| {
            let component = if artifact == "cloud-sim" {
                "simulator".to_owned()
            } else {
                artifact
            };
            (component, tag)
        })
        .collect();
    assert_eq!(
        tags.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        everything
    );
    let pods = wait_for_release(&everything, Duration::from_secs(180));
    for (component, pod) in &pods {
        let tag = &tags[component];
        assert!(
            tag.starts_with(&format!("{REGISTRY}/cloud-controllers/")),
            "{component}: {tag}"
        );
        // The tag skaffold deployed, pinned to the digest it pushed.
        assert_eq!(&image_of(pod), tag, "{component}");
        eprintln!("skaffold run: {component} runs {tag}");
    }
    eprintln!(
        "{}",
        kubectl(&["get", "pods", "-n", "kube-system", "-o", "wide"])
    );

    // The controllers reach the in-cluster cloud-sim without cluster DNS (there is none here):
    // give it a server for the node, and node-controller initializes the node from it.
    let state = testenv::cluster::status().expect("a running cluster");
    let (sim, server) = seed_simulator(&state.node, &state.node_ip);
    // node-controller has been failing to find the node's server since it started, backing off
    // up to 5 min between looks; a change to the Node makes it look again now.
    kubectl(&[
        "label",
        "node",
        &state.node,
        "cloud-controllers.test/seeded=true",
    ]);
    let provider_id = wait_for_or_show_log(
        "the node initialized",
        Duration::from_secs(120),
        "node-controller",
        || {
            let node = kubectl_json(&["get", "node", &state.node]);
            node["spec"]["providerID"].as_str().map(str::to_owned)
        },
    );
    assert_eq!(provider_id, format!("hcloud://{server}"));
    eprintln!(
        "in-cluster cloud-sim at {sim}: node {} is {provider_id}",
        state.node
    );
    wait_for_network_available(&state.node);

    // 2. skaffold dev over that release (same tags: nothing rolls), then an edit.
    let mut dev = Dev::start(dir, &[]);
    wait_for("skaffold dev watching", Duration::from_secs(300), || {
        dev.output().contains("Watching for changes").then_some(())
    });
    // The images are skaffold run's (same tags, nothing rebuilt), but skaffold labels the pods
    // with its run, so they roll once.
    let rebuilt = built_in(&dev.output());
    assert!(rebuilt.is_empty(), "skaffold dev rebuilt {rebuilt:?}");
    // That includes cloud-sim, whose world is in an emptyDir: the new pod starts with the network
    // and no servers. Seeded again, it hands out the same id (a fresh world counts from 1), so
    // the node's providerID holds.
    let first_sim = pods["simulator"]["metadata"]["uid"].clone();
    wait_for("the new cloud-sim Ready", Duration::from_secs(120), || {
        let by = pods_by_component();
        let sims = by.get("simulator")?;
        (sims.len() == 1 && is_serving(&sims[0]) && sims[0]["metadata"]["uid"] != first_sim)
            .then_some(())
    });
    let (_, again) = seed_simulator(&state.node, &state.node_ip);
    assert_eq!(provider_id, format!("hcloud://{again}"));
    wait_for_network_available(&state.node);
    let before = wait_for_release(&everything, Duration::from_secs(120));
    for (component, pod) in &before {
        assert_eq!(image_of(pod), image_of(&pods[component]), "{component}");
    }
    let logged_before = dev.output().len();
    let nonce = format!("edited-{}", std::process::id());
    let lib = dir.join("service-controller/src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let line = r#""node cache synced""#;
    assert!(source.contains(line), "service-controller's log line moved");
    let edited = source.replace(line, &format!(r#""node cache synced ({nonce})""#));
    let written = Instant::now();
    std::fs::write(&lib, edited).unwrap();
    let (new_pod, took) = wait_for(
        "the edited service-controller Ready",
        Duration::from_secs(600),
        || {
            let by = pods_by_component();
            let pod = by
                .get("service-controller")?
                .iter()
                .find(|p| is_serving(p) && image_of(p) != image_of(&before["service-controller"]))?
                .clone();
            Some((pod, written.elapsed()))
        },
    );
    // The new pod logs the edited line once it leads (the old one releases the Lease as it stops).
    let name = new_pod["metadata"]["name"].as_str().unwrap().to_owned();
    wait_for("the edited log line", Duration::from_secs(120), || {
        let mut logs = common::tool("kubectl");
        logs.args(["logs", "-n", "kube-system", &name]);
        let out = logs.output().ok()?;
        String::from_utf8_lossy(&out.stdout)
            .contains(&nonce)
            .then_some(())
    });
    let after_edit = dev.output()[logged_before..].to_owned();
    let rebuilt = built_in(&after_edit);
    eprintln!(
        "skaffold dev: {:.1?} from the write to the new pod {} Ready; rebuilt {rebuilt:?}",
        took,
        new_pod["metadata"]["name"].as_str().unwrap_or_default()
    );
    assert_eq!(rebuilt, ["service-controller"], "{after_edit}");
    let now = pods_by_component();
    for (component, pod) in &before {
        if component == "service-controller" {
            continue;
        }
        let still: Vec<&str> = now[component]
            .iter()
            .filter_map(|p| p["metadata"]["uid"].as_str())
            .collect();
        assert_eq!(
            still,
            [pod["metadata"]["uid"].as_str().unwrap()],
            "{component} was not rolled"
        );
        let status = &now[component][0]["status"]["containerStatuses"][0];
        assert_eq!(
            status["restartCount"], 0,
            "{component} restarted; its last run: {:#}",
            status["lastState"]
        );
    }
    dev.stop();
    wait_for("skaffold dev's clean-up", Duration::from_secs(120), || {
        pods_by_component().is_empty().then_some(())
    });

    // 3. skaffold dev -p service-controller.
    let mut one = Dev::start(dir, &["-p", "service-controller"]);
    let only: BTreeSet<&str> = ["service-controller", "simulator"].into();
    wait_for_release(&only, Duration::from_secs(300));
    let deployments = kubectl(&["get", "deployments", "-n", "kube-system", "-o", "name"]);
    eprintln!("skaffold dev -p service-controller:\n{deployments}");
    assert_eq!(
        deployments.lines().collect::<BTreeSet<_>>(),
        [
            "deployment.apps/cloud-controllers-service-controller",
            "deployment.apps/cloud-controllers-simulator"
        ]
        .into()
    );
    one.stop();
}
