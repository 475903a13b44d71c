//! What the stages' unit tests share: the load balancers' client against a cloud-sim, and a
//! Service to ask it about.

use std::sync::Arc;
use std::time::Duration;

use cloud_sim::Sim;

use super::HcloudLoadBalancers;
use crate::capabilities::{PortProtocol, ServicePort, ServiceRef};
use crate::hcloud::{HcloudClients, HcloudConfig, RetryPolicy, Token};

/// The client for `sim`, retrying a few milliseconds apart.
pub(super) async fn load_balancers(sim: &Sim) -> Arc<HcloudLoadBalancers> {
    let mut c = HcloudConfig::new(Token::new(sim.token()));
    c.client.endpoint = sim.endpoint();
    c.client.retry = RetryPolicy {
        max_attempts: 3,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(20),
    };
    HcloudClients::new(c)
        .await
        .expect("client for cloud-sim")
        .load_balancer_client()
}

/// Service `default/web` (port 80 → NodePort 30080) with `annotations` (full keys).
pub(super) fn service(uid: &str, annotations: &[(&str, &str)]) -> ServiceRef {
    ServiceRef {
        uid: uid.into(),
        namespace: "default".into(),
        name: "web".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ports: vec![ServicePort {
            name: Some("http".into()),
            protocol: PortProtocol::Tcp,
            port: 80,
            node_port: 30080,
        }],
        ..Default::default()
    }
}
