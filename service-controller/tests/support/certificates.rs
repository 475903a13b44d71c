//! The world of the certificate-Secret tests: TLS Secrets put as cert-manager puts them, the
//! simulator's uploads, what a load balancer serves, and the controller reading labelled Secrets
//! under the opt-in role.

use std::collections::BTreeSet;

use cloud_sim::test_certs;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use serde_json::Value;
use service_controller::Settings;
use test_support::e2e::{apply_chart_rbac, eventually, rbac_file};

use super::{Fixture, T, ingress_ips};

pub const LABEL: &str = "cloud-controllers.io/load-balancer-certificate";

/// Creates or replaces Secret `name` (server-side apply), labelled for the controller or not.
pub async fn put_secret(fx: &Fixture, name: &str, cert: &str, key: &str, labelled: bool) {
    let secrets: Api<Secret> = Api::namespaced(fx.admin.clone(), &fx.ns);
    let labels = labelled.then(|| [(LABEL.to_string(), "true".to_string())].into());
    let s = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels,
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        string_data: Some(
            [
                ("tls.crt".to_string(), cert.to_string()),
                ("tls.key".to_string(), key.to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    secrets
        .patch(
            name,
            &PatchParams::apply("certificate-secrets-test").force(),
            &Patch::Apply(&s),
        )
        .await
        .expect("put the Secret");
}

/// Every certificate in the simulator.
pub async fn certificates(fx: &Fixture) -> Vec<Value> {
    fx.sim
        .client()
        .list_all("certificates")
        .await
        .expect("list certificates")
}

/// The certificate ids of the https services of `svc`'s load balancer.
pub async fn served(fx: &Fixture, name: &str) -> BTreeSet<u64> {
    let Some(svc) = fx.get(name).await else {
        return BTreeSet::new();
    };
    if ingress_ips(&svc).is_empty() {
        return BTreeSet::new();
    }
    let lb = fx.lb_of(&svc).await;
    lb["services"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| {
            s["http"]["certificates"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.as_u64())
        .collect()
}

/// The one upload of the Secret, once there is exactly one.
pub async fn one_upload(fx: &Fixture) -> Value {
    eventually("exactly one upload of the Secret", T, || async {
        let all = certificates(fx).await;
        (all.len() == 1).then(|| all[0].clone())
    })
    .await
}

pub fn serial_of(cert: &Value) -> Option<String> {
    test_certs::serial(cert["certificate"].as_str()?)
}

/// The world with `sim`, the controller reading labelled TLS Secrets under the opt-in role.
pub async fn certificate_fixture(sim: Option<cloud_sim::SimConfig>) -> Fixture {
    let mut fx = Fixture::without_controller(sim).await;
    let role = rbac_file("service-controller-certificate-secrets");
    apply_chart_rbac(&fx.admin, &role, &fx.ns, "service-controller").await;
    fx.start_controller_with(Settings {
        certificate_secrets: true,
        ..Default::default()
    })
    .await;
    fx
}

/// A rotation's writes (`fx.writes_since`): at most `max`, one of them the upload.
pub fn assert_rotation_writes(writes: &[(String, String)], max: usize, what: &str) {
    assert!(
        writes.len() <= max,
        "{what} costs at most {max} writes: {writes:?}"
    );
    let uploads = writes
        .iter()
        .filter(|(m, e)| m == "POST" && e == "/certificates")
        .count();
    assert_eq!(uploads, 1, "uploaded once: {writes:?}");
}

/// Service `name` with one `https` port, 443, whose certificate comes from Secret `secret`; the
/// node's stand-in answers on its NodePort.
pub async fn https_service_from_secret(
    fx: &Fixture,
    stand_in: &mut cloud_sim::stand_in::NodeStandIn,
    name: &str,
    secret: &str,
) -> k8s_openapi::api::core::v1::Service {
    let https = [("protocol", "https"), ("http-certificate-secret", secret)];
    let svc = fx.service(name, &[443], &https).await;
    stand_in
        .serve_node_port(super::traffic::node_port(&svc, 443))
        .await
        .expect("bind");
    svc
}
