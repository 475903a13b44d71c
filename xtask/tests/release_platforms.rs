//! The release's two platforms, without a registry: `cargo xtask release --no-push` builds the five
//! images for linux/amd64 and linux/arm64 (arm64 cross-compiled by the Dockerfile's `cross-arm64`
//! builder), each at most 25 MB; the arm64 binaries, copied out of their images, run under
//! qemu-user-static (Debian's package): each answers `--version` as its amd64 twin does, and
//! node-controller, started against cloud-sim and a real kube-apiserver, initializes a Node.
//!
//! Builds images with podman and installs qemu-user-static when missing (root):
//! `cargo test -p xtask --test release_platforms -- --ignored --nocapture`; `cargo xtask test`
//! runs it. Warm (images in podman's layer cache) it takes seconds plus the qemu run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

const IMAGES: [&str; 5] = [
    "node-controller",
    "lifecycle-controller",
    "service-controller",
    "route-controller",
    "cloud-sim",
];
const VERSION: &str = "0.0.0-test";
/// The limit per image and platform, as `podman images` counts (10⁶ bytes).
const MAX_IMAGE_BYTES: u64 = 25_000_000;
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

fn xtask() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
}

fn podman(args: &[&str]) -> String {
    let podman = testenv::ensure_podman().expect("podman");
    let out = podman.command().args(args).output().expect("podman runs");
    assert!(
        out.status.success(),
        "podman {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `/usr/local/bin/<image>` copied out of `localhost/release/<image>:VERSION-<arch>`.
fn binary_of(image: &str, arch: &str, dir: &Path) -> PathBuf {
    let name = format!("localhost/release/{image}:{VERSION}-{arch}");
    let id = podman(&["create", &name]);
    let dest = dir.join(format!("{image}-{arch}"));
    podman(&[
        "cp",
        &format!("{id}:/usr/local/bin/{image}"),
        &dest.display().to_string(),
    ]);
    podman(&["rm", &id]);
    dest
}

/// qemu-aarch64-static, from Debian's qemu-user-static (installed when missing and root).
fn qemu() -> PathBuf {
    let path = PathBuf::from("/usr/bin/qemu-aarch64-static");
    if !path.exists() {
        let root = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false);
        assert!(
            root,
            "qemu-aarch64-static is missing: apt-get install qemu-user-static (or run as root)"
        );
        for args in [
            &["update", "-qq"][..],
            &[
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "qemu-user-static",
            ],
        ] {
            let out = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output()
                .expect("apt-get runs");
            assert!(
                out.status.success(),
                "apt-get {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    path
}

/// ELF machine of a binary: 0x3e x86-64, 0xb7 AArch64.
fn elf_machine(path: &Path) -> u16 {
    let bytes = std::fs::read(path).expect("read the binary");
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", path.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

#[test]
#[ignore = "builds the images for both platforms with podman, runs arm64 under qemu: \
            cargo test -p xtask --test release_platforms -- --ignored --nocapture"]
fn both_platforms_are_built_and_arm64_runs_under_qemu() {
    let started = Instant::now();
    let out = xtask()
        .args([
            "release",
            "--registry",
            "localhost:5001",
            "--version",
            VERSION,
        ])
        .args(["--profile", "dev-image", "--no-push"])
        .output()
        .expect("xtask runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}{stdout}");
    assert!(out.status.success(), "cargo xtask release --no-push failed");
    eprintln!(
        "release --no-push (dev-image, both platforms): {:.1?}",
        started.elapsed()
    );

    // Each image, each platform: the platform podman recorded, and at most 25 MB.
    let dir = tempfile::tempdir().unwrap();
    let mut sizes = Vec::new();
    for image in IMAGES {
        for arch in ["amd64", "arm64"] {
            let name = format!("localhost/release/{image}:{VERSION}-{arch}");
            let meta = podman(&[
                "image",
                "inspect",
                "--format",
                "{{.Os}}/{{.Architecture}} {{.Size}}",
                &name,
            ]);
            let (platform, size) = meta.split_once(' ').unwrap();
            assert_eq!(platform, format!("linux/{arch}"), "{name}");
            let size: u64 = size.parse().unwrap();
            assert!(
                size <= MAX_IMAGE_BYTES,
                "{name} is {size} bytes, over {MAX_IMAGE_BYTES}"
            );
            let binary = binary_of(image, arch, dir.path());
            let machine = elf_machine(&binary);
            assert_eq!(
                machine,
                if arch == "arm64" { 0xb7 } else { 0x3e },
                "{name}'s binary is for ELF machine {machine:#x}"
            );
            sizes.push(format!(
                "{image:<22} linux/{arch:<6} image {:>5.1} MB  binary {:>5.1} MB",
                size as f64 / 1e6,
                std::fs::metadata(&binary).unwrap().len() as f64 / 1e6
            ));
        }
    }
    eprintln!("sizes (10⁶ bytes):\n{}", sizes.join("\n"));

    // arm64 under qemu: `--version` says what amd64's says.
    let qemu = qemu();
    for image in IMAGES {
        let amd64 = Command::new(dir.path().join(format!("{image}-amd64")))
            .arg("--version")
            .output()
            .unwrap();
        let t = Instant::now();
        let arm64 = Command::new(&qemu)
            .arg(dir.path().join(format!("{image}-arm64")))
            .arg("--version")
            .output()
            .unwrap();
        assert!(
            arm64.status.success(),
            "{image} (arm64, qemu) --version: {}",
            String::from_utf8_lossy(&arm64.stderr)
        );
        let said = String::from_utf8_lossy(&arm64.stdout).trim().to_owned();
        assert!(
            !said.is_empty(),
            "{image} (arm64) --version printed nothing"
        );
        assert_eq!(
            said,
            String::from_utf8_lossy(&amd64.stdout).trim(),
            "{image}"
        );
        eprintln!(
            "qemu-aarch64 {image} --version: {said} ({:.2?})",
            t.elapsed()
        );
    }

    // arm64 node-controller against cloud-sim and a real kube-apiserver initializes a Node.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(node_controller_initializes_a_node(
        &qemu,
        &dir.path().join("node-controller-arm64"),
    ));
}

async fn node_controller_initializes_a_node(qemu: &Path, binary: &Path) {
    use kube::api::{Api, PostParams};
    let k = testenv::kube().await;
    let admin = k.client().await;
    let sim = cloud_sim::Sim::start().await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let run = format!("qemu-{nanos:x}");
    let name = format!("arm64-{nanos:x}");
    sim.client()
        .create_server(&name, "cax11", "fsn1")
        .await
        .expect("create the server in cloud-sim");

    let mut child = tokio::process::Command::new(qemu)
        .arg(binary)
        .arg("--kubeconfig")
        .arg(k.kubeconfig())
        .args([
            "--admin-address=127.0.0.1:0",
            "--leader-elect=false",
            "--node-label-selector",
            &format!("cloud-controllers.test/run={run}"),
        ])
        .env("HCLOUD_TOKEN", sim.token())
        .env("HCLOUD_ENDPOINT", sim.endpoint())
        .kill_on_drop(true)
        .spawn()
        .expect("start node-controller under qemu");

    let kubelet = testenv::KubeletNode {
        labels: vec![("cloud-controllers.test/run".into(), run.clone())],
        uninitialized: true,
        ..testenv::KubeletNode::new(&name)
    };
    let nodes: Api<Node> = Api::all(admin);
    nodes
        .create(&PostParams::default(), &kubelet.registration())
        .await
        .expect("create the Node");
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let node = loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("node-controller (arm64, qemu) exited: {status}");
        }
        let node = nodes.get(&name).await.expect("get the Node");
        let tainted = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        if !tainted && provider_id.is_some() {
            break node;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node-controller (arm64, qemu) did not initialize {name} in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let spec = node.spec.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert!(
        spec.provider_id
            .as_deref()
            .is_some_and(|p| p.starts_with("hcloud://")),
        "{:?}",
        spec.provider_id
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("cax11")
    );
    eprintln!(
        "node-controller (arm64, under qemu) initialized {name} in {:.1?}: providerID {}, \
         instance-type cax11, zone {:?}",
        started.elapsed(),
        spec.provider_id.unwrap(),
        labels.get("topology.kubernetes.io/zone")
    );
    let _ = child.kill().await;
}
