//! The data-path tests' world: cloud-sim with its data plane on, every node a stand-in at its
//! server's local address (`cloud_sim::stand_in`), and what they read back: listeners, the
//! targets' health as the API reports it, who answered; an HTTPS client for `https` services,
//! saying which certificate was served.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use cloud_sim::stand_in::NodeStandIn;
use cloud_sim::test_certs;
use cloud_sim::{DataPlaneConfig, SimConfig};
use k8s_openapi::api::core::v1::Service;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::Value;
use service_controller::Settings;
use test_support::e2e::{NodeSpecT, create_node, eventually, unique};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{Fixture, Options, T, TestNode, node_ports};

/// Health checks run 50 times faster than their settings say: HCCM's 15 s interval is 300 ms.
pub const SPEEDUP: f64 = 50.0;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

pub fn data_plane() -> SimConfig {
    SimConfig {
        action_duration: Duration::from_millis(50),
        data_plane: Some(DataPlaneConfig {
            health_check_speedup: SPEEDUP,
            ..Default::default()
        }),
        ..SimConfig::default()
    }
}

pub async fn fixture(drift_period: Duration) -> Fixture {
    Fixture::start_with(Options {
        sim: Some(data_plane()),
        settings: Settings {
            drift_period,
            ..Settings::default()
        },
        ..Options::default()
    })
    .await
}

/// A node's stand-in at its server's local address.
pub async fn stand_in(fx: &Fixture, node: &TestNode) -> NodeStandIn {
    let v = fx
        .sim
        .client()
        .get_server(node.server)
        .await
        .expect("server");
    let s = v.get("server").unwrap_or(&v);
    let ip: IpAddr = s["public_net"]["ipv4"]["ip"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .expect("the server's IPv4");
    NodeStandIn::new(&node.name, fx.sim.local_address(ip))
}

/// One server and its Ready Node whose `InternalIP` is the server's local address, with the
/// node's stand-in there: where anything in the cluster (the controller's probes of kube-proxy)
/// reaches the node, as the load balancer does.
pub async fn reachable_node(fx: &Fixture) -> (TestNode, NodeStandIn) {
    let name = unique("node");
    let server = fx.server(&name).await;
    let ip: IpAddr = server.ipv4.parse().expect("the server's IPv4");
    let local = fx.sim.local_address(ip);
    create_node(
        &fx.admin,
        &fx.run,
        &name,
        NodeSpecT {
            provider_id: Some(format!("hcloud://{}", server.id)),
            node_ip: Some(local.to_string()),
            ready: Some(true),
            ..Default::default()
        },
    )
    .await;
    let stand_in = NodeStandIn::new(&name, local);
    let node = TestNode {
        name,
        server: server.id,
    };
    (node, stand_in)
}

pub fn node_port(svc: &Service, port: u64) -> u16 {
    node_ports(svc)
        .into_iter()
        .find(|(p, _)| *p == port)
        .map(|(_, n)| n as u16)
        .expect("a nodePort")
}

pub fn health_check_node_port(svc: &Service) -> u16 {
    svc.spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .expect("a healthCheckNodePort") as u16
}

/// Where the load balancer's service on `port` accepts connections.
pub async fn listener(fx: &Fixture, lb: &Value, port: u16) -> SocketAddr {
    let id = lb["id"].as_u64().expect("lb id");
    eventually(&format!("a listener for port {port}"), T, || async {
        fx.sim.listener(id, port)
    })
    .await
}

/// `(healthy, unhealthy, unknown)` over the load balancer's targets, as the API reports them.
pub fn health_counts(lb: &Value) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for t in lb["targets"].as_array().into_iter().flatten() {
        let states: Vec<&str> = t["health_status"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["status"].as_str())
            .collect();
        if states.contains(&"unhealthy") {
            c.1 += 1;
        } else if !states.is_empty() && states.iter().all(|s| *s == "healthy") {
            c.0 += 1;
        } else {
            c.2 += 1;
        }
    }
    c
}

pub async fn wait_health(fx: &Fixture, svc: &Service, want: (usize, usize, usize)) -> Value {
    eventually(&format!("target health {want:?}"), T, || async {
        let lb = fx.lbs_of(svc).await.into_iter().next()?;
        (health_counts(&lb) == want).then_some(lb)
    })
    .await
}

/// The first line of the answer: the node's name.
pub fn answered_by(body: &str) -> &str {
    body.lines().next().unwrap_or_default()
}

/// A TLS client trusting exactly `certs` (PEM, self-signed: each is its own root).
pub fn tls_client(certs: &[&str]) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for pem in certs {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).expect("a PEM certificate");
        roots.add(der).expect("a usable root");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// One HTTPS request as a load balancer's client makes it: a new connection, a TLS handshake
/// naming `host`, `GET /`, the whole answer, all within [`REQUEST_TIMEOUT`]. `Ok` holds the serial
/// of the certificate served ([`test_certs::serial`]'s form) and the body of a 200 answer;
/// anything else is an `Err`.
pub async fn https_get(
    tls: &TlsConnector,
    addr: SocketAddr,
    host: &str,
) -> std::io::Result<(String, String)> {
    let exchange = async {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from(host.to_owned()).map_err(std::io::Error::other)?;
        let mut conn = tls.connect(name, tcp).await?;
        let served = conn.get_ref().1.peer_certificates().and_then(|c| c.first());
        let serial = served
            .and_then(|c| test_certs::serial_of_der(c))
            .ok_or_else(|| std::io::Error::other("no readable server certificate"))?;
        let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        conn.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        // A peer closing without close_notify after its whole answer loses nothing.
        match conn.read_to_end(&mut raw).await {
            Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof || raw.is_empty() => {
                return Err(e);
            }
            _ => {}
        }
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.lines().next().unwrap_or_default();
        if !status.contains(" 200 ") {
            return Err(std::io::Error::other(format!("{status}: {body}")));
        }
        Ok((serial, body.to_owned()))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}
