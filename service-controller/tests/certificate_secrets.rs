//! Certificates from TLS Secrets (annotation `http-certificate-secret`, `--certificate-secrets`),
//! end to end against a real kube-apiserver and cloud-sim, the controller under its chart RBAC
//! with the opt-in Secrets role (`files/rbac/service-controller-certificate-secrets.yaml`):
//!
//! - two Services naming one Secret share one upload, labelled with the Secret's UID and the
//!   chain's hash, whose serial is the Secret's certificate's;
//! - the Secret renewed (as cert-manager renews it): one new upload, both load balancers switched,
//!   the old upload deleted once nothing uses it; the writes are printed and bounded;
//! - a key that is not the certificate's: Warning, both keep serving what they have;
//! - a Secret without the label, or of another namespace: refused with what to do, nothing made;
//! - both Services deleted: the upload goes;
//! - a renewal that arrives while the ensure that uploads the first certificate still runs is
//!   applied at once, not at the next drift check;
//! - faults halfway through a rotation (the upload refused with 429, then the switch with 503
//!   while the Secret renews again): the old certificate serves throughout, and once the faults
//!   end only the newest upload is left; the Secret deleted in use: still served, with a
//!   Warning and `LoadBalancerReady` reason `CertificateSecretUnusable`; recreated: its new upload serves and the old one goes; a Service that stops naming
//!   the Secret deletes its upload;
//! - through the data plane, under steady HTTPS requests: the Secret renewed, the load balancer
//!   serves the new certificate from one handshake to the next and no request is lost.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cloud_sim::test_certs;
use service_controller::reasons;
use support::certificates::*;
use support::traffic::{data_plane, https_get, listener, stand_in, tls_client};
use support::*;
use test_support::e2e::eventually;

/// Waits until both Services' load balancers serve exactly upload `id`.
async fn both_serve(fx: &Fixture, id: u64) {
    eventually(
        &format!("web and api serving certificate {id}"),
        T,
        || async {
            let want = BTreeSet::from([id]);
            (served(fx, "web").await == want && served(fx, "api").await == want).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_certificate_is_uploaded_once_renewed_everywhere_and_retired() {
    let fx = certificate_fixture(None).await;
    fx.nodes(1).await;
    let (cert_a, key_a) = test_certs::self_signed(&["shop.example.com"]);
    put_secret(&fx, "web-tls", &cert_a, &key_a, true).await;
    let https = [
        ("protocol", "https"),
        ("http-certificate-secret", "web-tls"),
    ];
    fx.service("web", &[443], &https).await;
    fx.service("api", &[443], &https).await;

    // One upload for both, named by its labels, serving the Secret's certificate.
    let first = one_upload(&fx).await;
    let first_id = first["id"].as_u64().expect("id");
    both_serve(&fx, first_id).await;
    let labels = &first["labels"];
    assert_eq!(labels["cloud-controllers.io/secret-name"], "web-tls");
    assert_eq!(
        labels["cloud-controllers.io/secret-namespace"],
        fx.ns.as_str()
    );
    assert_eq!(
        labels["cloud-controllers.io/certificate-sha256"]
            .as_str()
            .map(str::len),
        Some(32)
    );
    assert_eq!(serial_of(&first), test_certs::serial(&cert_a));

    // Renewed: a new upload, both switched, the old one deleted.
    let mark = fx.mark();
    let (cert_b, key_b) = test_certs::self_signed(&["shop.example.com"]);
    put_secret(&fx, "web-tls", &cert_b, &key_b, true).await;
    let renewed = eventually("the renewed certificate uploaded", T, || async {
        certificates(&fx)
            .await
            .into_iter()
            .find(|c| serial_of(c) == test_certs::serial(&cert_b))
    })
    .await;
    let renewed_id = renewed["id"].as_u64().expect("id");
    assert_ne!(renewed_id, first_id);
    both_serve(&fx, renewed_id).await;
    assert_eq!(
        one_upload(&fx).await["id"],
        renewed_id,
        "the old upload is deleted"
    );
    let writes = fx.writes_since(&mark);
    eprintln!("writes of a renewal, for 2 load balancers: {writes:?}");
    // The upload, a switch per load balancer, the old upload's delete.
    assert_rotation_writes(&writes, 4, "a renewal of 2 load balancers");

    // A key that is not the certificate's: a Warning, and both keep serving what they have.
    let (cert_c, _) = test_certs::self_signed(&["shop.example.com"]);
    put_secret(&fx, "web-tls", &cert_c, &key_b, true).await;
    let note = fx
        .wait_event("Service", "web", "CertificateSecretUnusable")
        .await;
    assert!(note.contains("not the key of the certificate"), "{note}");
    assert!(
        !note.contains(key_b.lines().nth(1).unwrap_or("-")),
        "no key in: {note}"
    );
    both_serve(&fx, renewed_id).await;

    // Not labelled, or another namespace's: refused saying what to do, nothing made.
    let (cert_d, key_d) = test_certs::self_signed(&["other.example.com"]);
    put_secret(&fx, "bare-tls", &cert_d, &key_d, false).await;
    let unlabelled = [
        ("protocol", "https"),
        ("http-certificate-secret", "bare-tls"),
    ];
    fx.service("bare", &[443], &unlabelled).await;
    let note = fx.wait_event("Service", "bare", reasons::SYNC_FAILED).await;
    assert!(note.contains(LABEL) && note.contains("label it"), "{note}");
    let elsewhere = [
        ("protocol", "https"),
        ("http-certificate-secret", "kube-system/web-tls"),
    ];
    fx.service("elsewhere", &[443], &elsewhere).await;
    let note = fx
        .wait_event("Service", "elsewhere", reasons::SYNC_FAILED)
        .await;
    assert!(note.contains("own namespace"), "{note}");
    assert_eq!(
        certificates(&fx).await.len(),
        1,
        "nothing uploaded for them"
    );
    assert!(
        fx.lbs_of(&fx.get("bare").await.expect("bare"))
            .await
            .is_empty()
    );

    // Both Services gone: so is the upload.
    for name in ["web", "api", "bare", "elsewhere"] {
        fx.delete(name).await;
    }
    eventually(
        "the Secret's upload deleted with its last Service",
        T,
        || async { certificates(&fx).await.is_empty().then_some(()) },
    )
    .await;
}

/// One request of the steady loop: when it was sent, when it ended, the serial served or why not.
#[derive(Debug, Clone)]
struct Sent {
    at: Instant,
    done: Instant,
    served: Result<String, String>,
}

type Seen = Arc<Mutex<Vec<Sent>>>;

fn count(seen: &Seen, serial: &str) -> usize {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|r| r.served.as_deref() == Ok(serial))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewing_the_secret_under_steady_https_requests_loses_none() {
    const HOST: &str = "shop.example.com";
    let fx = certificate_fixture(Some(data_plane())).await;
    let node = fx.nodes(1).await.remove(0);
    let mut node_stand_in = stand_in(&fx, &node).await;
    let (cert_a, key_a) = test_certs::self_signed(&[HOST]);
    let (cert_b, key_b) = test_certs::self_signed(&[HOST]);
    let serial = |pem: &str| test_certs::serial(pem).expect("a serial");
    let (serial_a, serial_b) = (serial(&cert_a), serial(&cert_b));
    put_secret(&fx, "web-tls", &cert_a, &key_a, true).await;
    https_service_from_secret(&fx, &mut node_stand_in, "web", "web-tls").await;
    let svc = fx.wait_ingress("web").await;
    let addr = listener(&fx, &fx.lb_of(&svc).await, 443).await;
    let tls = tls_client(&[&cert_a, &cert_b]);
    eventually("an HTTPS answer with certificate A", T, || async {
        let (served, _) = https_get(&tls, addr, HOST).await.ok()?;
        (served == serial_a).then_some(())
    })
    .await;

    // 50 requests/s, each on a new connection, until told to stop; then the last ones end.
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Seen = Arc::default();
    let started = Instant::now();
    let looper = tokio::spawn({
        let (tls, stop, seen) = (tls.clone(), stop.clone(), seen.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let mut in_flight = tokio::task::JoinSet::new();
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                let (tls, seen) = (tls.clone(), seen.clone());
                in_flight.spawn(async move {
                    let at = Instant::now();
                    let r = https_get(&tls, addr, HOST).await;
                    let served = r.map(|(s, _)| s).map_err(|e| format!("{e} ({e:?})"));
                    let done = Instant::now();
                    seen.lock().unwrap().push(Sent { at, done, served });
                });
                while in_flight.try_join_next().is_some() {}
            }
            in_flight.join_all().await;
        }
    });
    eventually("requests served with A under the loop", T, || async {
        (count(&seen, &serial_a) >= 25).then_some(())
    })
    .await;

    // cert-manager renews the Secret: uploaded, switched, the old upload deleted, all under load.
    let renewed_at = Instant::now();
    put_secret(&fx, "web-tls", &cert_b, &key_b, true).await;
    eventually("certificate B served", T, || async {
        (count(&seen, &serial_b) > 0).then_some(())
    })
    .await;
    eventually("the old upload deleted", T, || async {
        let all = certificates(&fx).await;
        (all.len() == 1 && serial_of(&all[0]).as_ref() == Some(&serial_b)).then_some(())
    })
    .await;
    let b_then = count(&seen, &serial_b);
    eventually("50 more requests served with B", T, || async {
        (count(&seen, &serial_b) >= b_then + 50).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    looper.await.expect("the request loop");
    let ran = started.elapsed();

    let seen = seen.lock().unwrap().clone();
    let with = |serial: &str| -> Vec<&Sent> {
        let s = seen.iter().filter(|r| r.served.as_deref() == Ok(serial));
        s.collect()
    };
    let (a, b) = (with(&serial_a), with(&serial_b));
    let failed: Vec<&Sent> = seen.iter().filter(|r| r.served.is_err()).collect();
    // Once a request has been answered with B, every request sent later is served B.
    let first_b = b.iter().map(|r| r.done).min().expect("B served");
    let a_late: Vec<&&Sent> = a.iter().filter(|r| r.at > first_b).collect();
    eprintln!(
        "certificate rotation under 50 requests/s: {} sent in {ran:.1?}, {} failed, {} served A, \
         {} served B (the first B answered {:.1?} after the Secret changed), {} A sent after it",
        seen.len(),
        failed.len(),
        a.len(),
        b.len(),
        first_b - renewed_at,
        a_late.len(),
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {failed:?}",
        failed.len(),
        seen.len()
    );
    assert!(!a.is_empty(), "A served before the renewal");
    assert!(b.iter().all(|r| r.done > renewed_at), "B only once renewed");
    assert!(a_late.is_empty(), "A served after B was: {a_late:?}");
}

/// Service `web`'s `LoadBalancerReady` condition once its reason is `reason`.
async fn ready_condition(
    fx: &Fixture,
    reason: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    eventually(&format!("web's LoadBalancerReady: {reason}"), T, || async {
        let s = fx.get("web").await?;
        let c = service_controller::condition::current(&s)?.clone();
        (c.reason == reason).then_some(c)
    })
    .await
}

/// Once the simulator holds exactly one upload, of `cert`, and Service `web` serves it: its id.
async fn only_upload_served(fx: &Fixture, cert: &str) -> u64 {
    let serial = test_certs::serial(cert);
    eventually(
        "only the upload of the newest certificate left, and served",
        T,
        || async {
            let all = certificates(fx).await;
            let [only] = all.as_slice() else { return None };
            let id = only["id"].as_u64()?;
            (serial_of(only) == serial && served(fx, "web").await == BTreeSet::from([id]))
                .then_some(id)
        },
    )
    .await
}

/// Until the `fault` rule is used up, the load balancer of Service `name` keeps serving `id`.
async fn serves_throughout(fx: &Fixture, name: &str, id: u64, fault: u64, what: &str) {
    eventually(what, T, || async {
        assert_eq!(
            served(fx, name).await,
            BTreeSet::from([id]),
            "the old certificate serves while {what}"
        );
        let left = fx.sim.faults().list().iter().any(|(f, _)| *f == fault);
        (!left).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_halfway_through_a_rotation_keep_the_old_certificate_and_leak_nothing() {
    let fx = certificate_fixture(None).await;
    fx.nodes(1).await;
    let host = ["shop.example.com"];
    let (cert_a, key_a) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_a, &key_a, true).await;
    let https = [
        ("protocol", "https"),
        ("http-certificate-secret", "web-tls"),
    ];
    fx.service("web", &[443], &https).await;
    let a = one_upload(&fx).await["id"].as_u64().expect("id");
    let only = |id: u64| BTreeSet::from([id]);
    eventually("certificate A served", T, || async {
        (served(&fx, "web").await == only(a)).then_some(())
    })
    .await;

    // The upload refused three times with 429: A serves until it goes through.
    let faults = fx.sim.faults();
    let refused = faults.fail_next(Some("POST /certificates"), 3, 429, "rate_limit_exceeded");
    let (cert_b, key_b) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_b, &key_b, true).await;
    serves_throughout(&fx, "web", a, refused, "the upload is refused").await;
    let b = only_upload_served(&fx, &cert_b).await;

    // The switch refused with 503 while the Secret renews twice: C is uploaded but never
    // served, and deleted once D is; B serves until D does.
    let switch = "POST /load_balancers/{id}/actions/update_service";
    let outage = faults.fail_every(Some(switch), 1, 503, "unavailable");
    let (cert_c, key_c) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_c, &key_c, true).await;
    eventually("C uploaded while its switch is refused", T, || async {
        assert_eq!(served(&fx, "web").await, only(b), "B serves meanwhile");
        let all = certificates(&fx).await;
        all.iter()
            .any(|c| serial_of(c) == test_certs::serial(&cert_c))
            .then_some(())
    })
    .await;
    let (cert_d, key_d) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_d, &key_d, true).await;
    eventually("D uploaded while its switch is refused", T, || async {
        assert_eq!(served(&fx, "web").await, only(b), "B serves meanwhile");
        let all = certificates(&fx).await;
        all.iter()
            .any(|c| serial_of(c) == test_certs::serial(&cert_d))
            .then_some(())
    })
    .await;
    assert!(faults.remove(outage), "the outage was still on");
    let d = only_upload_served(&fx, &cert_d).await;
    assert_ne!(d, b);

    // The Secret deleted while in use: D keeps serving, with a Warning. Recreated (a new UID, as
    // when one deletes it for cert-manager to issue again): its upload serves, D's is deleted.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(fx.admin.clone(), &fx.ns);
    secrets
        .delete("web-tls", &Default::default())
        .await
        .expect("delete the Secret");
    let note = fx
        .wait_event("Service", "web", "CertificateSecretUnusable")
        .await;
    assert!(note.contains("keeps serving"), "{note}");
    assert_eq!(
        served(&fx, "web").await,
        only(d),
        "D serves without its Secret"
    );
    let ready = ready_condition(&fx, "CertificateSecretUnusable").await;
    assert_eq!(ready.status, "True", "still serving: {ready:?}");
    assert!(ready.message.contains("web-tls"), "{ready:?}");
    let (cert_e, key_e) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_e, &key_e, true).await;
    only_upload_served(&fx, &cert_e).await;

    ready_condition(&fx, "EnsuredLoadBalancer").await;

    // The Service stops naming the Secret (plain TCP now): its upload goes with it.
    let plain = serde_json::json!({"metadata": {"annotations": {
        format!("{PREFIX}protocol"): "tcp",
        format!("{PREFIX}http-certificate-secret"): null,
    }}});
    fx.patch("web", plain).await;
    eventually(
        "the upload deleted once the Service stops naming it",
        T,
        || async { certificates(&fx).await.is_empty().then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_during_the_ensure_that_uploads_the_first_certificate_is_not_lost() {
    let fx = certificate_fixture(None).await;
    fx.nodes(1).await;
    let host = ["shop.example.com"];
    let (cert_a, key_a) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_a, &key_a, true).await;
    // The switch takes a second, so the renewal lands while that ensure still runs.
    let switch = "POST /load_balancers/{id}/actions/update_service";
    let slow = fx
        .sim
        .faults()
        .latency(Some(switch), Duration::from_secs(1));
    let https = [
        ("protocol.443", "https"),
        ("http-certificate-secret.443", "web-tls"),
    ];
    fx.service("web", &[80, 443], &https).await;
    eventually("A uploaded", T, || async {
        let all = certificates(&fx).await;
        all.iter()
            .any(|c| serial_of(c) == test_certs::serial(&cert_a))
            .then_some(())
    })
    .await;
    let (cert_b, key_b) = test_certs::self_signed(&host);
    put_secret(&fx, "web-tls", &cert_b, &key_b, true).await;
    fx.sim.faults().remove(slow);
    // Within the wait, not at the next drift check (minutes away).
    eventually("B served, A deleted", T, || async {
        let all = certificates(&fx).await;
        let [b] = all.as_slice() else { return None };
        let id = b["id"].as_u64()?;
        (serial_of(b) == test_certs::serial(&cert_b)
            && served(&fx, "web").await == BTreeSet::from([id]))
        .then_some(())
    })
    .await;
}
