//! cert-manager itself issuing the Secret a Service names in `http-certificate-secret`: its own
//! controllers (v1.21.2, built from source by `testenv::cert_manager()`) run as a process against
//! the test apiserver, with its CRDs, a CA Issuer and a Certificate whose `secretTemplate` labels
//! the Secret for the service-controller (`--certificate-secrets`, the opt-in Secrets role); the
//! load balancer in cloud-sim, TLS through its data plane:
//!
//! - the load balancer's https service serves the certificate cert-manager issued;
//! - renewed as `cmctl renew` renews (the Certificate's `Issuing` condition set to `True`, reason
//!   `ManuallyTriggered`, through the status subresource): the new certificate is served within
//!   [`RENEWAL_BOUND`] (the measured time is printed), the old upload is deleted, and the rotation
//!   costs at most 4 cloud writes.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cloud_sim::test_certs;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::certificates::{
    LABEL, assert_rotation_writes, certificate_fixture, certificates, https_service_from_secret,
    serial_of,
};
use support::traffic::{data_plane, https_get, listener, stand_in, tls_client};
use support::*;
use test_support::e2e::eventually;

const HOST: &str = "shop.example.com";

/// How long a renewal may take from `cmctl renew` to the new certificate served by the load
/// balancer: cert-manager's issuance (a new key, a CertificateRequest approved and signed, the
/// Secret written), the controller's upload and switch, the simulator's actions. Measured far
/// below it (the figure is printed); generous for a busy 2-core machine.
const RENEWAL_BOUND: Duration = Duration::from_secs(30);

/// cert-manager's controllers as a process against the test apiserver, watching one namespace.
/// Killed when dropped (a failing test too: then its log's tail is printed).
struct CertManager {
    child: tokio::process::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl CertManager {
    fn start(kubeconfig: &Path, ns: &str) -> CertManager {
        let binary = testenv::cert_manager().expect("cert-manager (testenv builds it)");
        let dir = tempfile::tempdir().expect("a directory for cert-manager's log");
        let log = dir.path().join("cert-manager.log");
        let out = std::fs::File::create(&log).expect("create cert-manager's log");
        let err = out.try_clone().expect("duplicate a log file handle");
        let child = tokio::process::Command::new(binary)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={ns}"))
            .arg("--v=2")
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("start cert-manager");
        CertManager {
            child,
            log,
            _dir: dir,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it (SIGTERM); panics if it had exited before: it must run until told to stop.
    async fn stop(mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("cert-manager exited early ({status}):\n{}", self.output());
        }
        test_support::e2e::process::sigterm(&mut self.child).await;
    }
}

impl Drop for CertManager {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let out = self.output();
            let lines: Vec<&str> = out.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("cert-manager's log, last 40 lines:\n{tail}");
        }
    }
}

/// cert-manager.io/v1 `kind` (`plural`) in `ns`.
fn cm_api(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", kind);
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

fn certificates_api(fx: &Fixture) -> Api<DynamicObject> {
    cm_api(&fx.admin, &fx.ns, "Certificate", "certificates")
}

async fn apply(api: &Api<DynamicObject>, name: &str, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    api.patch(
        name,
        &PatchParams::apply("cert-manager-test").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

/// The CA Issuer `ca` and its key pair Secret.
async fn ca_issuer(fx: &Fixture, ca_cert: &str, ca_key: &str) {
    let secrets: Api<Secret> = Api::namespaced(fx.admin.clone(), &fx.ns);
    let mut secret = Secret::default();
    secret.metadata.name = Some("ca-key-pair".into());
    secret.type_ = Some("kubernetes.io/tls".into());
    secret.string_data = Some(
        [
            ("tls.crt".to_string(), ca_cert.to_string()),
            ("tls.key".to_string(), ca_key.to_string()),
        ]
        .into(),
    );
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the CA's Secret");
    let issuers = cm_api(&fx.admin, &fx.ns, "Issuer", "issuers");
    let issuer = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
        "metadata": {"name": "ca"},
        "spec": {"ca": {"secretName": "ca-key-pair"}},
    });
    apply(&issuers, "ca", issuer).await;
}

/// Condition `type_` of a cert-manager object, if it is there.
fn condition(obj: &DynamicObject, type_: &str) -> Option<Value> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// Waits until cert-manager is done with Certificate `name` (`Ready`, no issuance under way: it
/// removes the `Issuing` condition once the Secret is written); returns its revision.
async fn idle(api: &Api<DynamicObject>, name: &str) -> u64 {
    eventually(
        &format!("the Certificate {name} Ready and not issuing"),
        T,
        || async {
            let crt = api.get(name).await.ok()?;
            let ready = condition(&crt, "Ready")?["status"] == "True";
            let issuing = condition(&crt, "Issuing").is_some_and(|c| c["status"] == "True");
            (ready && !issuing).then(|| crt.data["status"]["revision"].as_u64())?
        },
    )
    .await
}

/// The serial of the certificate in Secret `name`'s `tls.crt`, once there is one.
async fn secret_serial(fx: &Fixture, name: &str) -> Option<String> {
    let secrets: Api<Secret> = Api::namespaced(fx.admin.clone(), &fx.ns);
    let s = secrets.get_opt(name).await.expect("get the Secret")?;
    let crt = s.data?.get("tls.crt")?.0.clone();
    test_certs::serial(&String::from_utf8(crt).ok()?)
}

/// What `cmctl renew` does (cert-manager/cmctl `pkg/renew`): the Certificate's `Issuing` condition
/// set to `True` with reason `ManuallyTriggered` (its transition time kept when it was `True`
/// already) and the status written back with an update of the status subresource.
async fn cmctl_renew(api: &Api<DynamicObject>, name: &str) {
    let mut crt = api.get(name).await.expect("get the Certificate");
    let generation = crt.metadata.generation.unwrap_or_default();
    let now = Time(
        k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .expect("a time"),
    );
    let conditions = crt.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut issuing = json!({
        "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
        "message": "Certificate re-issuance manually triggered",
        "lastTransitionTime": now, "observedGeneration": generation,
    });
    let mut found = false;
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .map(|c| {
            if c["type"] != "Issuing" {
                return c;
            }
            found = true;
            if c["status"] == "True" {
                issuing["lastTransitionTime"] = c["lastTransitionTime"].clone();
            }
            issuing.clone()
        })
        .collect();
    if !found {
        conditions.push(issuing);
    }
    crt.data["status"]["conditions"] = Value::Array(conditions);
    api.replace_status(name, &PostParams::default(), &crt)
        .await
        .expect("update the Certificate's status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_manager_issues_and_renews_what_the_load_balancer_serves() {
    let fx = certificate_fixture(Some(data_plane())).await;
    testenv::install_cert_manager_crds(&fx.admin)
        .await
        .expect("install cert-manager's CRDs");
    let kube = testenv::kube().await;
    let cert_manager = CertManager::start(kube.kubeconfig(), &fx.ns);

    let (ca_cert, ca_key) = test_certs::ca("cloud-controllers test CA");
    ca_issuer(&fx, &ca_cert, &ca_key).await;
    let certs = certificates_api(&fx);
    let certificate = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web"},
        "spec": {
            "secretName": "web-tls",
            "secretTemplate": {"labels": {LABEL: "true"}},
            "dnsNames": [HOST],
            "issuerRef": {"name": "ca", "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature"],
        },
    });
    let issued_from = Instant::now();
    apply(&certs, "web", certificate).await;

    let node = fx.nodes(1).await.remove(0);
    let mut node_stand_in = stand_in(&fx, &node).await;
    https_service_from_secret(&fx, &mut node_stand_in, "web", "web-tls").await;

    // Issued: Ready, the Secret labelled, its certificate served through the load balancer.
    let revision = idle(&certs, "web").await;
    let first = eventually("the issued Secret", T, || secret_serial(&fx, "web-tls")).await;
    eprintln!(
        "cert-manager issued the Certificate {:.1?} after it was applied",
        issued_from.elapsed()
    );
    let secrets: Api<Secret> = Api::namespaced(fx.admin.clone(), &fx.ns);
    let labels = secrets
        .get("web-tls")
        .await
        .expect("the Secret")
        .metadata
        .labels;
    assert_eq!(
        labels.unwrap_or_default().get(LABEL).map(String::as_str),
        Some("true"),
        "secretTemplate labels the Secret"
    );
    let svc = fx.wait_ingress("web").await;
    let addr = listener(&fx, &fx.lb_of(&svc).await, 443).await;
    let tls = tls_client(&[&ca_cert]);
    eventually("the issued certificate served", T, || async {
        let (served, _) = https_get(&tls, addr, HOST).await.ok()?;
        (served == first).then_some(())
    })
    .await;
    let uploads = certificates(&fx).await;
    assert_eq!(uploads.len(), 1, "one upload: {uploads:?}");
    assert_eq!(serial_of(&uploads[0]).as_ref(), Some(&first));
    let first_upload = uploads[0]["id"].as_u64().expect("id");

    // Renewed as `cmctl renew` does: the new certificate served, the old upload deleted.
    let mark = fx.mark();
    let renewed_at = Instant::now();
    cmctl_renew(&certs, "web").await;
    let second = eventually("a new certificate served", RENEWAL_BOUND, || async {
        let (served, _) = https_get(&tls, addr, HOST).await.ok()?;
        (served != first).then_some(served)
    })
    .await;
    let took = renewed_at.elapsed();
    assert_eq!(
        secret_serial(&fx, "web-tls").await.as_ref(),
        Some(&second),
        "what is served is the renewed Secret's certificate"
    );
    let crt = certs.get("web").await.expect("the Certificate");
    assert_eq!(
        crt.data["status"]["revision"].as_u64(),
        Some(revision + 1),
        "one issuance more"
    );
    eventually("the old upload deleted", T, || async {
        let all = certificates(&fx).await;
        (all.len() == 1 && serial_of(&all[0]).as_ref() == Some(&second)).then_some(())
    })
    .await;
    assert_ne!(certificates(&fx).await[0]["id"], first_upload);
    let writes = fx.writes_since(&mark);
    eprintln!(
        "cert-manager renewal (cmctl renew) to the new certificate served: {took:.2?} \
         (bound {RENEWAL_BOUND:?}); cloud writes: {writes:?}"
    );
    assert!(took <= RENEWAL_BOUND, "renewal served after {took:?}");
    // The upload, the switch of the https service, the old upload's delete.
    assert_rotation_writes(&writes, 4, "a rotation of one load balancer");
    cert_manager.stop().await;
}
