//! Uploaded certificates as Hetzner checks and renders them (docs/hetzner-api.md,
//! "Certificates"): what an upload is refused for, the fields read from the certificate, the
//! key kept out of every answer, and a certificate in use refused deletion.

mod common;

use cloud_sim::client::{RawResponse, SimClient};
use cloud_sim::test_certs::{self, self_signed, self_signed_between};
use cloud_sim::{Sim, SimConfig};
use common::{assert_error, invalid_fields, send};
use reqwest::Method;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

async fn sim() -> Sim {
    Sim::start_with(SimConfig {
        action_duration: std::time::Duration::ZERO,
        ..SimConfig::default()
    })
    .await
}

async fn upload(w: &SimClient, name: &str, cert: &str, key: &str) -> RawResponse {
    send(
        w,
        Method::POST,
        "/certificates",
        Some(json!({"name": name, "type": "uploaded", "certificate": cert, "private_key": key})),
    )
    .await
}

/// Asserts a 400 `invalid_input` naming exactly `field`.
#[track_caller]
fn refused_for(r: &RawResponse, field: &str) {
    assert_error(r, 400, "invalid_input");
    assert_eq!(invalid_fields(r), [field], "{}", r.body);
}

#[tokio::test]
async fn uploads_hetzner_refuses_are_refused() {
    let sim = sim().await;
    let w = sim.client();
    let (cert, key) = self_signed(&["example.com"]);
    let (_, other_key) = self_signed(&["example.com"]);

    // Not PEM at all, a PEM block that is no certificate, a certificate block of garbage.
    refused_for(&upload(&w, "a", "hello", &key).await, "certificate");
    refused_for(&upload(&w, "b", &key, &key).await, "certificate");
    let garbage = "-----BEGIN CERTIFICATE-----\nTUlJQlNJTVVMQVRFRA==\n-----END CERTIFICATE-----\n";
    refused_for(&upload(&w, "c", garbage, &key).await, "certificate");
    // A key that is no key, and one that belongs to another certificate.
    refused_for(&upload(&w, "d", &cert, "not a key").await, "private_key");
    refused_for(&upload(&w, "e", &cert, &cert).await, "private_key");
    let r = upload(&w, "f", &cert, &other_key).await;
    refused_for(&r, "private_key");
    let msg = r
        .body
        .pointer("/error/details/fields/0/messages/0")
        .unwrap();
    assert!(msg.as_str().unwrap().contains("does not match"), "{msg}");

    // Limits (changelog 2026-02-11): at most 5 certificates in the chain...
    let six = cert.repeat(6);
    refused_for(&upload(&w, "g", &six, &key).await, "certificate");
    assert_eq!(upload(&w, "five", &cert.repeat(5), &key).await.status, 201);
    // ... of at most 30 000 bytes (a leaf with 1 200 names is about 48 kB) ...
    let names: Vec<String> = (0..1200)
        .map(|i| format!("host-{i:04}.example.com"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (big, big_key) = self_signed(&names);
    assert!(big.len() > 30_000, "{}", big.len());
    refused_for(&upload(&w, "h", &big, &big_key).await, "certificate");
    // ... and a key of at most 5 000 bytes (an RSA-8192 key is ~6.3 kB; text before the PEM
    // block stands in for one, the limit is on what is sent).
    let padded = format!("{}\n{key}", "x".repeat(5_000));
    refused_for(&upload(&w, "i", &cert, &padded).await, "private_key");

    // Nothing refused was stored.
    let list = send(&w, Method::GET, "/certificates", None).await;
    let names: Vec<&str> = list.body["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["five"]);
}

#[tokio::test]
async fn an_upload_renders_what_its_certificate_says_and_never_the_key() {
    let sim = sim().await;
    let w = sim.client();
    // 2026-01-02T03:04:05Z to 2027-01-02T03:04:05Z.
    let from = 1_767_323_045_000;
    let to = from + 365 * 86_400_000;
    let (cert, key) = self_signed_between(&["example.com", "*.example.org"], from, to);
    let r = upload(&w, "site", &cert, &key).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"], Value::Null);
    let c = &r.body["certificate"];
    assert_eq!(c["type"], "uploaded");
    assert_eq!(c["certificate"], json!(cert));
    assert_eq!(c["not_valid_before"], "2026-01-02T03:04:05+00:00");
    assert_eq!(c["not_valid_after"], "2027-01-02T03:04:05+00:00");
    assert_eq!(c["domain_names"], json!(["example.com", "*.example.org"]));
    let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
    let sha = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &der);
    let hex: Vec<String> = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(c["fingerprint"], json!(hex.join(":")));
    assert_eq!(c["status"], Value::Null);

    // The key is in no answer: create, get, list.
    let id = c["id"].as_u64().unwrap();
    let got = send(&w, Method::GET, &format!("/certificates/{id}"), None).await;
    let list = send(&w, Method::GET, "/certificates", None).await;
    for body in [&r.body, &got.body, &list.body] {
        let text = body.to_string();
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(!text.contains("private_key"), "{text}");
    }
    assert_eq!(got.body["certificate"], *c);
}

#[tokio::test]
async fn expired_and_not_yet_valid_certificates_are_accepted_with_their_dates() {
    // Hetzner documents no refusal for either: the owner watches the dates.
    let sim = sim().await;
    let w = sim.client();
    let day = 86_400_000;
    let (old, old_key) = self_signed_between(&["old.example.com"], day, 2 * day);
    let r = upload(&w, "expired", &old, &old_key).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body["certificate"]["not_valid_after"],
        "1970-01-03T00:00:00+00:00"
    );
    // 2100-01-01 to 2100-02-01.
    let future = 4_102_444_800_000;
    let (new, new_key) = self_signed_between(&["new.example.com"], future, future + 31 * day);
    let r = upload(&w, "future", &new, &new_key).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body["certificate"]["not_valid_before"],
        "2100-01-01T00:00:00+00:00"
    );
}

#[tokio::test]
async fn a_managed_certificate_is_issued_as_a_real_one() {
    let sim = sim().await;
    let w = sim.client();
    let id = w
        .create_managed_certificate("m", &["example.com", "www.example.com"])
        .await
        .unwrap();
    let c = w.get_certificate(id).await.unwrap();
    let pem = c["certificate"].as_str().unwrap();
    assert!(test_certs::serial(pem).is_some(), "{pem}");
    assert_eq!(c["domain_names"], json!(["example.com", "www.example.com"]));
    assert_eq!(c["fingerprint"].as_str().unwrap().len(), 32 * 3 - 1);
    assert!(!c.to_string().contains("PRIVATE KEY"));
}

#[tokio::test]
async fn a_certificate_a_service_uses_cannot_be_deleted() {
    let sim = sim().await;
    let w = sim.client();
    let (cert, key) = self_signed(&["example.com"]);
    let used = w.create_certificate("used", &cert, &key).await.unwrap();
    let (cert2, key2) = self_signed(&["example.com"]);
    let next = w.create_certificate("next", &cert2, &key2).await.unwrap();
    let lb = w
        .create_load_balancer_with(json!({
            "name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "https", "listen_port": 443, "destination_port": 80,
                          "http": {"certificates": [used]}}],
        }))
        .await
        .unwrap();
    let r = send(&w, Method::DELETE, &format!("/certificates/{used}"), None).await;
    assert_error(&r, 422, "resource_in_use");
    assert!(w.get_certificate(used).await.is_ok());
    // Rotating: the service takes the new one, then the old one goes.
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 443, "http": {"certificates": [next]}}),
    )
    .await
    .unwrap();
    // The inventory (what audits read) shows each certificate's serial and what each https
    // port serves, never a key.
    let inv = sim.inventory();
    let item = inv.certificates.iter().find(|c| c.id == next).unwrap();
    assert_eq!(item.serial, test_certs::serial(&cert2));
    assert_eq!(inv.load_balancers[0].certificates[&443], [next]);
    assert!(!format!("{inv:?}").contains(key2.lines().nth(1).unwrap()));
    let r = send(&w, Method::DELETE, &format!("/certificates/{used}"), None).await;
    assert_eq!(r.status, 204, "{}", r.body);
}
