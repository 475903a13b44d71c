//! The cloud-sim `up` starts next to the cluster, holding the node's server.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use super::layout::CLOUD_SIM_PORT;
use super::procs::{Procs, cluster_error};
use super::state::CloudSim;
use crate::error::{Error, Result};

/// cloud-sim on [`CLOUD_SIM_PORT`] with a fresh token, its world kept in the state directory, and
/// the node's server: named like the node, its public IPv4 the node's address (what kubelet
/// serves on), so node-controller writes addresses that work.
///
/// It listens on the node's IP, not on 127.0.0.1: pods on the pod network reach that address
/// through the bridge (their gateway is the host), hostNetwork pods and the host itself reach it
/// directly, so the chart's controllers run in pods against this cloud-sim outside the cluster.
/// The price: whoever reaches the node's IP reaches cloud-sim (its API wants the token, its
/// `/_sim` control endpoints do not).
pub(super) async fn start_cloud_sim(
    procs: &mut Procs,
    binary: &Path,
    node: &str,
    node_ip: &str,
) -> Result<CloudSim> {
    let dir = procs.layout.root().join("cloud-sim");
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    // A copy: a rebuild of the original must not change what runs, and `down` finds it by path.
    let copy = procs.layout.bin().join("cloud-sim");
    std::fs::copy(binary, &copy).map_err(Error::io(format!("copying {}", binary.display())))?;
    let token = random_token()?;
    procs.spawn(
        "cloud-sim",
        &copy,
        &[
            format!("--listen={node_ip}:{CLOUD_SIM_PORT}"),
            format!("--state={}", dir.join("world.json").display()),
            format!("--token={token}"),
            // Load balancers carry traffic to the node (listeners on 127.0.0.1, see
            // docs/real-cluster.md), health checks 10 times faster than configured.
            "--data-plane".to_string(),
            "--health-check-speedup=10".to_string(),
        ],
        &[],
    )?;
    procs
        .wait("cloud-sim to answer", || async {
            http_request("GET", node_ip, CLOUD_SIM_PORT, "/_sim/health", None)
                .filter(|(status, _)| *status == 200)
                .map(|_| ())
        })
        .await?;
    let body = serde_json::json!({
        "count": 1, "prefix": node, "name": node, "public_ipv4": node_ip,
        "server_type": "cx22", "location": "fsn1", "image": "debian-12",
    });
    let (status, answer) = http_request(
        "POST",
        node_ip,
        CLOUD_SIM_PORT,
        "/_sim/batch/servers",
        Some(&body),
    )
    .ok_or_else(|| cluster_error("creating the node's server", "no answer"))?;
    let server_id = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["servers"][0].as_u64())
        .filter(|_| status == 201)
        .ok_or_else(|| {
            cluster_error(
                "creating the node's server in cloud-sim",
                format!("{status}: {answer}"),
            )
        })?;
    Ok(CloudSim {
        endpoint: format!("http://{node_ip}:{CLOUD_SIM_PORT}/v1"),
        token,
        server_id,
    })
}

/// 64 hex characters from the kernel's random source (cloud-sim wants 64 characters).
pub(super) fn random_token() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(Error::io("reading /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A plain HTTP/1.0 request to `ip`:`port`; (status, body).
pub(super) fn http_request(
    method: &str,
    ip: &str,
    port: u16,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let addr = SocketAddr::from((ip.parse::<Ipv4Addr>().ok()?, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {ip}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let status = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}
