//! Running a rendered release: apply what pods need, start every rendered Deployment as a local
//! process or as its image under podman (see [`crate::pod`]), wait with a deadline, print the
//! processes' output on failure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::pod::{Launch, PodTemplate, Process, Runtime};
use crate::{apply, binary, kind, name, of_kind};

/// The deadline of every wait.
pub const T: Duration = Duration::from_secs(45);
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The processes of one test; their output is printed when the test fails.
#[derive(Debug)]
pub struct Fleet {
    pub procs: Vec<Process>,
    pub dir: tempfile::TempDir,
    /// Set: pods run as their images; unset: as local processes.
    pub containers: Option<Containers>,
}

/// Pods run as the images `localhost/<image>:<tag>` under `podman`: the chart is rendered with
/// those images.
#[derive(Debug)]
pub struct Containers {
    pub podman: testenv::Podman,
    pub tag: String,
}

impl Fleet {
    /// Pods run as local processes of the binaries their images hold.
    pub fn new(prefix: &str) -> Fleet {
        Fleet {
            procs: Vec::new(),
            dir: tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .expect("temp dir"),
            containers: None,
        }
    }

    /// Pods run as the images `localhost/<image>:<tag>`, under podman.
    pub fn in_containers(prefix: &str, tag: &str) -> Fleet {
        let mut fleet = Fleet::new(prefix);
        fleet.containers = Some(Containers {
            podman: testenv::ensure_podman().expect("podman"),
            tag: tag.to_owned(),
        });
        fleet
    }

    /// SIGTERM to every process (last started first); each must exit 0.
    pub async fn terminate_all(&mut self) {
        for p in self.procs.iter_mut().rev() {
            let status = p.terminate().await;
            assert!(
                status.success(),
                "{} exited with {status}:\n{}",
                p.name,
                p.log_tail(30)
            );
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for p in &self.procs {
                eprintln!(
                    "----- {} ({}) -----\n{}",
                    p.name,
                    p.log.display(),
                    p.log_tail(60)
                );
            }
        }
    }
}

/// Polls `f` until it returns `Some`, or panics naming `what` after [`T`].
pub async fn eventually<R, F, Fut>(what: &str, mut f: F) -> R
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<R>>,
{
    let deadline = tokio::time::Instant::now() + T;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {T:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn create_namespace(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let obj: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {ns}: {e}"),
    }
}

/// The binary an image holds: the Dockerfile's final stage of the same name copies exactly that
/// binary, so `…/node-controller:tag` runs `node-controller`.
pub fn binary_of_image(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last).to_owned()
}

/// Applies what pods need before they run (ServiceAccounts, RBAC, Secrets, the Leases they take, the
/// Services whose variables they read) for real; everything else as a dry run (no kubelet would act
/// on the Deployments here).
pub async fn apply_rendered(client: &Client, objects: &[Value]) {
    let discovery = crate::discovery(client).await;
    for obj in objects {
        let real = matches!(
            kind(obj),
            "ServiceAccount"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "Role"
                | "RoleBinding"
                | "Secret"
                | "Lease"
                | "Service"
        );
        apply(client, &discovery, obj, !real)
            .await
            .unwrap_or_else(|e| panic!("applying the rendered objects: {e}"));
    }
}

/// Starts rendered Deployment `deploy` as pod `pod_name` (one process; replicas would be pods on
/// other nodes). It acts as the Deployment's ServiceAccount when it names one.
pub async fn start(
    k: &testenv::TestKube,
    admin: &Client,
    deploy: &Value,
    pod_name: &str,
    env_rewrites: Vec<(String, String, String)>,
    fleet: &mut Fleet,
) -> PodTemplate {
    let template = PodTemplate::of(deploy);
    let image = template.container["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let runtime = match fleet.containers.as_ref().map(|c| &c.podman) {
        None => Runtime::Process {
            program: binary(&binary_of_image(&image)),
            kubeconfig: template.service_account.as_ref().map(|sa| {
                let path = fleet.dir.path().join(format!("{sa}.kubeconfig"));
                k.connection()
                    .write_service_account_kubeconfig(&path, &template.namespace, sa)
                    .expect("write the ServiceAccount's kubeconfig");
                path
            }),
        },
        Some(podman) => {
            let mut service_account = None;
            if let Some(sa) = &template.service_account {
                let dir = fleet.dir.path().join(format!("{pod_name}-serviceaccount"));
                k.connection()
                    .write_service_account_volume(&dir, &template.namespace, sa)
                    .await
                    .expect("write the ServiceAccount's token volume");
                service_account = Some(dir);
            }
            Runtime::Container {
                podman: podman.clone(),
                service_account,
                apiserver: k.ports().0,
            }
        }
    };
    let process = Launch {
        template: &template,
        runtime,
        pod_name: pod_name.to_owned(),
        env_rewrites,
        dir: fleet.dir.path(),
    }
    .start(admin)
    .await
    .unwrap_or_else(|e| panic!("starting {}: {e}", name(deploy)));
    eprintln!(
        "started {pod_name} ({image}{}): {} [as {}]",
        if fleet.containers.is_some() {
            ", in a container"
        } else {
            ", its binary as a process"
        },
        template.args().join(" "),
        template
            .service_account
            .as_deref()
            .map(|sa| format!("ServiceAccount {}/{sa}", template.namespace))
            .unwrap_or_else(|| "nobody: no API access".into())
    );
    fleet.procs.push(process);
    template
}

/// Starts every rendered controller Deployment and waits for their readiness probes.
pub async fn start_controllers(
    k: &testenv::TestKube,
    admin: &Client,
    objects: &[Value],
    fleet: &mut Fleet,
) -> BTreeMap<String, (PodTemplate, String)> {
    let mut started = BTreeMap::new();
    for deploy in of_kind(objects, "Deployment") {
        let pod_name = format!("{}-5f7c9d-x2k4q", name(deploy));
        let template = start(k, admin, deploy, &pod_name, Vec::new(), fleet).await;
        let component = crate::component(deploy)
            .expect("component label")
            .to_owned();
        started.insert(component, (template, pod_name));
    }
    for p in fleet.procs.iter_mut() {
        p.wait_ready(T).await.unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{} ready {:.2} s after its start (GET :{}{} = 200)",
            p.name,
            p.started.elapsed().as_secs_f64(),
            p.ready.1,
            p.ready.0
        );
    }
    started
}

pub async fn lease_holder(client: &Client, ns: &str, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(lease)
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Creates Node `name` with `spec`, then sets `status` as kubelet would.
pub async fn create_node(client: &Client, name: &str, spec: Value, status: Value) {
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("node");
    let api: Api<Node> = Api::all(client.clone());
    api.create(&PostParams::default(), &node)
        .await
        .expect("create node");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("patch node status");
}

/// A Ready condition.
pub fn ready(status: bool) -> Value {
    json!({"type": "Ready", "status": if status { "True" } else { "False" }, "reason": "Kubelet"})
}

/// The uninitialized taint, as kubelet adds it with --cloud-provider=external.
pub fn uninitialized_taint() -> Value {
    json!({"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]})
}

/// Whether the Node still carries the uninitialized taint.
pub fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
}
