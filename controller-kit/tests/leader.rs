//! Leader election against a real kube-apiserver (testenv): the Lease the chart renders (metadata
//! only, no spec) is acquired at once, under a Role that allows only `get` and `patch` on it; the
//! acquisition writes only the spec, so the chart's labels and annotations stay; a release empties
//! the spec again for the next holder; a release after `helm uninstall` deleted the Role or the Lease
//! returns.

use std::time::{Duration, Instant};

use controller_kit::LeaderGate;
use controller_kit::config::LeaderElection;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

/// Much shorter than the lease duration below: acquiring a free Lease takes no retry and no wait.
const RETRY: Duration = Duration::from_secs(5);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{nanos:x}")
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("a valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {obj:?}: {e}"));
}

fn election(ns: &str, lease: &str, identity: &str) -> LeaderElection {
    LeaderElection {
        lease_name: lease.to_owned(),
        namespace: ns.to_owned(),
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(30),
        renew_deadline: Duration::from_secs(20),
        retry_period: RETRY,
    }
}

/// Who holds the Lease now.
async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    leases
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

/// `acquire`, which must succeed before the retry period has passed once.
async fn acquire_at_once(gate: &LeaderGate) -> controller_kit::Leadership {
    let started = Instant::now();
    let leadership = tokio::time::timeout(
        Duration::from_secs(60),
        gate.acquire(&CancellationToken::new()),
    )
    .await
    .expect("acquire returns")
    .expect("not cancelled");
    let took = started.elapsed();
    assert!(
        took < RETRY,
        "{}: acquiring a free Lease took {took:?}, a retry period ({RETRY:?}) or more",
        gate.config().identity
    );
    leadership
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_the_chart_rendered_is_acquired_at_once_with_get_and_patch_only() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let ns = unique("leader-chart");
    let lease_name = "cloud-controller-manager-node-controller";
    create(
        &Api::<Namespace>::all(admin.clone()),
        serde_json::json!({"metadata": {"name": ns}}),
    )
    .await;
    // What `helm install` creates: labels, helm's ownership annotations, no spec.
    let labels = serde_json::json!({
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/component": "node-controller",
    });
    let annotations = serde_json::json!({
        "meta.helm.sh/release-name": "cloud-controllers",
        "meta.helm.sh/release-namespace": ns,
    });
    let leases = Api::<Lease>::namespaced(admin.clone(), &ns);
    create(
        &leases,
        serde_json::json!({"metadata": {"name": lease_name, "labels": labels, "annotations": annotations}}),
    )
    .await;
    let before = leases.get(lease_name).await.unwrap();
    assert!(
        before
            .spec
            .as_ref()
            .is_none_or(|s| s.holder_identity.is_none() && s.renew_time.is_none()),
        "{before:?}"
    );
    // A ServiceAccount that may only read and patch that one Lease: no create.
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), &ns),
        serde_json::json!({"metadata": {"name": "controller"}}),
    )
    .await;
    create(
        &Api::<Role>::namespaced(admin.clone(), &ns),
        serde_json::json!({"metadata": {"name": "lease"}, "rules": [{
            "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": [lease_name], "verbs": ["get", "patch"]}]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), &ns),
        serde_json::json!({"metadata": {"name": "lease"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease"},
            "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": ns}]}),
    )
    .await;
    let client = k.service_account_client(&ns, "controller").await;

    let a = LeaderGate::new(client.clone(), election(&ns, lease_name, "pod-a"));
    let leadership = acquire_at_once(&a).await;
    let held = leases.get(lease_name).await.unwrap();
    let spec = held.spec.clone().unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("pod-a"), "{held:?}");
    assert!(spec.renew_time.is_some(), "{held:?}");
    assert_eq!(spec.lease_duration_seconds, Some(30), "{held:?}");
    // The chart's metadata stays as helm wrote it.
    assert_eq!(serde_json::to_value(&held.metadata.labels).unwrap(), labels);
    assert_eq!(
        serde_json::to_value(&held.metadata.annotations).unwrap(),
        annotations
    );

    // Released (SIGTERM), the Lease is free again and the next pod takes it at once too.
    leadership.release().await;
    let released = leases.get(lease_name).await.unwrap();
    assert!(
        released
            .spec
            .as_ref()
            .is_none_or(|s| s.holder_identity.is_none()),
        "{released:?}"
    );
    let b = LeaderGate::new(client.clone(), election(&ns, lease_name, "pod-b"));
    let leadership = acquire_at_once(&b).await;
    assert_eq!(holder(&leases, lease_name).await.as_deref(), Some("pod-b"));
    // helm uninstall deletes the Role and the Lease while the holders stop. Without the Role the
    // release is refused and returns; the Lease stays as it was until helm deletes it ...
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .delete("lease", &Default::default())
        .await
        .expect("delete the RoleBinding");
    // The apiserver's authorizer learns of the delete from its own watch: wait until the
    // ServiceAccount is refused, or the release may still be allowed.
    let as_controller = Api::<Lease>::namespaced(client, &ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    while as_controller.get(lease_name).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the RoleBinding's delete never took effect"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::timeout(Duration::from_secs(10), leadership.release())
        .await
        .expect("a refused release returns");
    assert_eq!(
        holder(&leases, lease_name).await.as_deref(),
        Some("pod-b"),
        "the RoleBinding was gone: nothing could be released"
    );
    // ... and without the Lease there is nothing to release.
    let other = "cloud-controller-manager-lifecycle-controller";
    create(&leases, serde_json::json!({"metadata": {"name": other}})).await;
    let c = LeaderGate::new(admin.clone(), election(&ns, other, "pod-c"));
    let leadership = acquire_at_once(&c).await;
    leases
        .delete(other, &Default::default())
        .await
        .expect("delete the Lease");
    tokio::time::timeout(Duration::from_secs(10), leadership.release())
        .await
        .expect("releasing a deleted Lease returns");
}

/// A shutdown that comes while an attempt to take a free Lease is in flight never leaves the
/// Lease naming a process that returned "cancelled" (a successor would wait a lease duration for
/// a process long gone); and a standby that stops never frees the holder's Lease. The shutdown
/// comes at delays spread over an attempt's round trip, so some land between its write and the
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_during_an_attempt_leaves_the_lease_free_or_held_by_the_holder() {
    let k = testenv::kube().await;
    let admin = k.client().await;
    let ns = unique("leader-cut");
    create(
        &Api::<Namespace>::all(admin.clone()),
        serde_json::json!({"metadata": {"name": ns}}),
    )
    .await;
    let lease_name = "cloud-controller-manager-route-controller";
    let leases = Api::<Lease>::namespaced(admin.clone(), &ns);
    create(
        &leases,
        serde_json::json!({"metadata": {"name": lease_name}}),
    )
    .await;

    let (mut cancelled, mut acquired) = (0, 0);
    for i in 0..40u64 {
        let gate = LeaderGate::new(admin.clone(), election(&ns, lease_name, "pod-a"));
        let shutdown = CancellationToken::new();
        let cut = shutdown.clone();
        let delay = Duration::from_micros(i * 500);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            cut.cancel();
        });
        match tokio::time::timeout(Duration::from_secs(10), gate.acquire(&shutdown))
            .await
            .expect("acquire returns once cancelled")
        {
            Some(leadership) => {
                acquired += 1;
                leadership.release().await;
            }
            None => {
                cancelled += 1;
                assert_eq!(
                    holder(&leases, lease_name).await,
                    None,
                    "cancelled after {delay:?}: the Lease still names the stopped process"
                );
            }
        }
    }
    assert!(
        cancelled > 0,
        "no attempt was cut short ({acquired} acquired)"
    );

    // A standby stops while pod-b holds the Lease: pod-b keeps it.
    let b = acquire_at_once(&LeaderGate::new(
        admin.clone(),
        election(&ns, lease_name, "pod-b"),
    ))
    .await;
    let shutdown = CancellationToken::new();
    let cut = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cut.cancel();
    });
    let standby = LeaderGate::new(admin.clone(), election(&ns, lease_name, "pod-a"));
    assert!(standby.acquire(&shutdown).await.is_none());
    assert_eq!(holder(&leases, lease_name).await.as_deref(), Some("pod-b"));
    b.release().await;
}
