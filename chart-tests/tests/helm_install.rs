//! `helm install`, `upgrade` and `uninstall` for real, against a control plane of this test's own
//! (the shared one would see this test's releases): the chart owns the controllers' Leases, an
//! upgrade leaves who holds them alone, uninstall deletes them, a second release is refused with the
//! reason, and a Lease an earlier chart version's controllers made is adopted after the documented
//! label and annotations (docs/helm-chart.md).

use std::path::Path;

use chart_tests::{chart, helm, run, tool};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const LEASE: &str = "cloud-controller-manager-node-controller";

/// `helm <args>` against `kubeconfig`; (success, stdout + stderr).
fn helm_run(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = tool(helm());
    cmd.args(args).arg("--kubeconfig").arg(kubeconfig);
    let out = run(cmd);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn install(kubeconfig: &Path, release: &str, ns: &str, extra: &[&str]) -> (bool, String) {
    let chart = chart();
    let mut args = vec!["install", release, chart.to_str().unwrap(), "-n", ns];
    args.extend_from_slice(extra);
    helm_run(kubeconfig, &args)
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get(LEASE)
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity)
}

/// Takes the Lease as a controller does (its own field manager, spec only).
async fn hold(leases: &Api<Lease>, identity: &str) {
    let now = k8s_openapi::jiff::Timestamp::now();
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "holderIdentity": identity,
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
                "leaseDurationSeconds": 15,
            }})),
        )
        .await
        .expect("hold the Lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_owns_the_leases_and_refuses_to_be_installed_twice() {
    let plane = testenv::ControlPlane::start()
        .await
        .expect("a control plane of this test's own");
    let kc = plane.kubeconfig().to_path_buf();
    let admin = plane.client().await.expect("admin client");
    for ns in ["one", "two", "three"] {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .expect("namespace");
    }
    let one = Api::<Lease>::namespaced(admin.clone(), "one");

    // Installed: one Lease per enabled controller, labelled like the chart's objects, nobody holds it.
    let (ok, out) = install(&kc, "first", "one", &[]);
    assert!(ok, "helm install first:\n{out}");
    for c in [
        "node-controller",
        "lifecycle-controller",
        "service-controller",
    ] {
        let lease = one
            .get(&format!("cloud-controller-manager-{c}"))
            .await
            .unwrap_or_else(|e| panic!("{c}'s Lease: {e}"));
        let labels = lease.metadata.labels.unwrap_or_default();
        assert_eq!(labels["app.kubernetes.io/component"], c);
        assert_eq!(labels["app.kubernetes.io/instance"], "first");
        assert!(
            lease.spec.is_none_or(|s| s.holder_identity.is_none()),
            "{c}"
        );
    }
    assert!(
        one.get_opt("cloud-controller-manager-route-controller")
            .await
            .unwrap()
            .is_none(),
        "no Lease for a disabled controller"
    );

    // An upgrade leaves who holds the Lease alone.
    hold(&one, "first-node-controller-abc").await;
    let (ok, out) = helm_run(
        &kc,
        &[
            "upgrade",
            "first",
            chart().to_str().unwrap(),
            "-n",
            "one",
            "--set",
            "nodeController.replicas=2",
            "--set",
            "commonLabels.upgraded=yes",
        ],
    );
    assert!(ok, "helm upgrade first:\n{out}");
    let lease = one.get(LEASE).await.unwrap();
    assert_eq!(
        lease.metadata.labels.unwrap_or_default()["upgraded"],
        "yes",
        "the upgrade reached the Lease"
    );
    assert_eq!(
        holder(&one).await.as_deref(),
        Some("first-node-controller-abc")
    );

    // Installed twice: in another namespace, and in the same one.
    for (release, ns) in [("second", "two"), ("third", "one")] {
        let (ok, out) = install(&kc, release, ns, &[]);
        assert!(!ok, "helm install {release} -n {ns} succeeded:\n{out}");
        assert!(
            out.contains(
                "cloud-controllers is installed already: release first in namespace one runs the \
                 node-controller (its Lease one/cloud-controller-manager-node-controller). Two \
                 releases must not both run it: both would manage the same Nodes, routes and load \
                 balancers"
            ),
            "{release}: {out}"
        );
        eprintln!("helm install {release} -n {ns}: {}", out.trim());
    }
    // A shadow writes nothing: it may run beside the acting release.
    let (ok, out) = install(
        &kc,
        "shadow",
        "two",
        &[
            "--set",
            "nodeController.dryRun=true",
            "--set",
            "lifecycleController.dryRun=true",
            "--set",
            "serviceController.dryRun=true",
            "--set",
            "serviceController.validation.enabled=false",
        ],
    );
    assert!(ok, "helm install shadow:\n{out}");
    let two = Api::<Lease>::namespaced(admin.clone(), "two");
    assert!(
        two.get_opt(&format!("{LEASE}-dry-run"))
            .await
            .unwrap()
            .is_some()
    );

    // Uninstalled: no Lease is left behind.
    for (release, ns) in [("first", "one"), ("shadow", "two")] {
        let (ok, out) = helm_run(&kc, &["uninstall", release, "-n", ns, "--wait"]);
        assert!(ok, "helm uninstall {release}:\n{out}");
    }
    assert!(
        one.get_opt(LEASE).await.unwrap().is_none(),
        "a Lease outlived helm uninstall"
    );
    assert!(
        two.get_opt(&format!("{LEASE}-dry-run"))
            .await
            .unwrap()
            .is_none()
    );

    // Upgrading from a chart version whose controllers made their own Lease: helm refuses to
    // adopt it until it carries helm's label and annotations (docs/helm-chart.md) ...
    let three = Api::<Lease>::namespaced(admin.clone(), "three");
    let legacy: Lease = serde_json::from_value(json!({"metadata": {"name": LEASE}})).unwrap();
    three.create(&PostParams::default(), &legacy).await.unwrap();
    hold(&three, "legacy-node-controller-xyz").await;
    let only_node = [
        "--set",
        "lifecycleController.enabled=false",
        "--set",
        "serviceController.enabled=false",
    ];
    let (ok, out) = install(&kc, "cloud-controllers", "three", &only_node);
    assert!(!ok, "helm adopted a Lease it does not own:\n{out}");
    assert!(
        out.contains(&format!(
            "Lease \"{LEASE}\" in namespace \"three\" exists and cannot be imported into the \
             current release: invalid ownership metadata"
        )),
        "{out}"
    );
    eprintln!("helm install over a controller-made Lease: {}", out.trim());
    // ... `kubectl label` and `kubectl annotate`, as docs/helm-chart.md gives them:
    three
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {
                    "meta.helm.sh/release-name": "cloud-controllers",
                    "meta.helm.sh/release-namespace": "three",
                },
            }})),
        )
        .await
        .unwrap();
    let (ok, out) = install(&kc, "cloud-controllers", "three", &only_node);
    assert!(ok, "helm install after the label and annotations:\n{out}");
    // Adopted without a change of holder: the running leader keeps leading.
    assert_eq!(
        holder(&three).await.as_deref(),
        Some("legacy-node-controller-xyz")
    );
    let labels = three
        .get(LEASE)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(labels["app.kubernetes.io/instance"], "cloud-controllers");
    plane.stop();
}
