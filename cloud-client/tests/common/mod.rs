//! What the cloud-client test binaries share: a provider for a cloud-sim with quick retries.
#![allow(dead_code)]

use std::time::Duration;

use cloud_client::hcloud::{HcloudClients, HcloudConfig, RetryPolicy, Token};
use cloud_sim::{Sim, SimConfig};

/// The client configuration for `sim`: its endpoint and token, retries a few milliseconds apart.
pub fn config(sim: &Sim) -> HcloudConfig {
    let mut c = HcloudConfig::new(Token::new(sim.token()));
    c.client.endpoint = sim.endpoint();
    c.client.retry = RetryPolicy {
        max_attempts: 5,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
    };
    c
}

/// A provider for `sim`, with [`config`] adjusted by `f`.
pub async fn provider(sim: &Sim, f: impl FnOnce(&mut HcloudConfig)) -> HcloudClients {
    let mut c = config(sim);
    f(&mut c);
    HcloudClients::new(c).await.expect("provider")
}

/// A cloud-sim whose actions take `action_duration`.
pub async fn sim_with_actions(action_duration: Duration) -> Sim {
    Sim::start_with(SimConfig {
        action_duration,
        ..SimConfig::default()
    })
    .await
}

/// Robot on, with `sim`'s Robot webservice and credentials.
pub fn robot_config(sim: &Sim) -> cloud_client::robot::RobotConfig {
    use cloud_client::Secret;
    use cloud_client::robot::{RobotConfig, RobotCredentials};
    RobotConfig {
        enabled: true,
        credentials: Some(RobotCredentials {
            user: Secret::new(sim.robot_user()),
            password: Secret::new(sim.robot_password()),
        }),
        endpoint: sim.robot_endpoint(),
        ..RobotConfig::default()
    }
}

/// Every POST/PUT/DELETE since the last `reset_counters`, as `METHOD /template`.
pub fn writes(sim: &Sim) -> Vec<String> {
    sim.request_log()
        .into_iter()
        .filter(|e| e.method != "GET")
        .map(|e| format!("{} {}", e.method, e.endpoint))
        .collect()
}
