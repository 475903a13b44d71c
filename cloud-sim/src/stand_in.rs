//! Stand-ins for what runs on a node, for load balancers with the data plane on to send traffic
//! and health checks to without a kubelet: a Service's NodePort (an HTTP answer naming the node)
//! and kube-proxy's health answers (`GET /healthz`, 200 or 503 as the test says). Tests, the demo
//! and the benchmark bind them to a simulated server's local address
//! ([`Sim::local_address`](crate::Sim::local_address)), so several "nodes" serve the same port.
//!
//! A request is one connection: the stand-in reads an optional PROXY protocol header (v1 or v2),
//! the request head, answers and closes. The body is `<node>\n`, plus `client=<address>\n` when a
//! PROXY header said who the client was.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One node's stand-in listeners. Dropping it (or [`NodeStandIn::stop`]) closes them: the node is
/// gone.
#[derive(Debug)]
pub struct NodeStandIn {
    name: String,
    ip: IpAddr,
    healthy: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<()>>,
}

impl NodeStandIn {
    /// A node called `name` at the local address `ip`, healthy, serving nothing yet.
    pub fn new(name: impl Into<String>, ip: IpAddr) -> Self {
        NodeStandIn {
            name: name.into(),
            ip,
            healthy: Arc::new(AtomicBool::new(true)),
            served: Arc::default(),
            tasks: Vec::new(),
        }
    }

    /// Answers every request on `port` with `200` and the node's name: a NodePort whose endpoint
    /// answers (with `externalTrafficPolicy: Cluster` every node forwards, so every node answers).
    pub async fn serve_node_port(&mut self, port: u16) -> std::io::Result<SocketAddr> {
        let name = self.name.clone();
        let served = self.served.clone();
        self.listen(port, move |_| {
            served.fetch_add(1, Ordering::Relaxed);
            (200, name.clone())
        })
        .await
    }

    /// kube-proxy's answer on `port` (a `healthCheckNodePort`, or 10256): `200` while the node is
    /// healthy ([`NodeStandIn::set_healthy`]), `503` otherwise.
    pub async fn serve_healthz(&mut self, port: u16) -> std::io::Result<SocketAddr> {
        let healthy = self.healthy.clone();
        self.listen(port, move |_| {
            if healthy.load(Ordering::Relaxed) {
                (200, "ok".into())
            } else {
                (503, "no local endpoints".into())
            }
        })
        .await
    }

    /// What kube-proxy's health answers say from now on.
    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Ordering::Relaxed);
    }

    /// Requests answered on the NodePorts so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The local address it listens on.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Closes every listener (connections being answered finish).
    pub fn stop(&mut self) {
        self.tasks.drain(..).for_each(|t| t.abort());
    }

    async fn listen(
        &mut self,
        port: u16,
        answer: impl Fn(&str) -> (u16, String) + Send + Sync + 'static,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind((self.ip, port)).await?;
        let addr = listener.local_addr()?;
        let answer = Arc::new(answer);
        self.tasks.push(tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    // Out of file descriptors, say: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let answer = answer.clone();
                tokio::spawn(async move {
                    let _ = respond(conn, |path| answer(path)).await;
                });
            }
        }));
        Ok(addr)
    }
}

impl Drop for NodeStandIn {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads a PROXY header (if any) and a request head, writes the answer.
async fn respond(
    mut conn: TcpStream,
    answer: impl Fn(&str) -> (u16, String),
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(512);
    let head_end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n").filter(|_| !starts_proxy_v2(&buf)) {
            // A v1 header is one line before the request; a v2 header is binary and is taken off
            // before the head is looked for.
            break end;
        }
        if starts_proxy_v2(&buf) && buf.len() >= 16 {
            let len = 16 + u16::from_be_bytes([buf[14], buf[15]]) as usize;
            if buf.len() >= len {
                let client = proxy_v2_source(&buf[..len]);
                buf.drain(..len);
                buf.splice(0..0, proxy_v1_line(client).into_bytes());
                continue;
            }
        }
        let mut chunk = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default();
    let mut client = None;
    if let Some(proxy) = first.strip_prefix("PROXY ") {
        // PROXY TCP4 <src> <dst> <sport> <dport>
        let f: Vec<&str> = proxy.split(' ').collect();
        if f.len() == 5 {
            client = Some(format!("{}:{}", f[1], f[3]));
        }
        first = lines.next().unwrap_or_default();
    }
    let path = first.split(' ').nth(1).unwrap_or("/");
    let (status, mut body) = answer(path);
    body.push('\n');
    if let Some(c) = client {
        body.push_str(&format!("client={c}\n"));
    }
    let reason = if status == 200 { "OK" } else { "Unavailable" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes()).await?;
    conn.shutdown().await
}

const PROXY_V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

fn starts_proxy_v2(buf: &[u8]) -> bool {
    buf.len() >= 12 && &buf[..12] == PROXY_V2_SIGNATURE
}

/// The source address of a v2 header (TCP over IPv4 or IPv6), if it has one.
fn proxy_v2_source(h: &[u8]) -> Option<SocketAddr> {
    let addr = &h[16..];
    match h[13] >> 4 {
        1 if addr.len() >= 12 => {
            let ip: [u8; 4] = addr[..4].try_into().ok()?;
            Some(SocketAddr::from((
                ip,
                u16::from_be_bytes([addr[8], addr[9]]),
            )))
        }
        2 if addr.len() >= 36 => {
            let ip: [u8; 16] = addr[..16].try_into().ok()?;
            Some(SocketAddr::from((
                ip,
                u16::from_be_bytes([addr[32], addr[33]]),
            )))
        }
        _ => None,
    }
}

/// The v1 line that says the same as a v2 header, so one parser reads both.
fn proxy_v1_line(client: Option<SocketAddr>) -> String {
    match client {
        Some(c) => format!("PROXY TCP4 {} 0.0.0.0 {} 0\r\n", c.ip(), c.port()),
        None => "PROXY UNKNOWN\r\n".into(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request as a load balancer's client makes it: a new connection, `GET /`, the whole answer.
/// `Ok` holds the status and body; a refused, reset or timed-out connection is an `Err`.
pub async fn get(addr: SocketAddr, timeout: Duration) -> std::io::Result<(u16, String)> {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
            .await?;
        let mut out = Vec::new();
        conn.read_to_end(&mut out).await?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {text:?}")))?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_with_the_node_name_and_the_proxied_client() {
        let mut node = NodeStandIn::new("node-a", IpAddr::from([127, 0, 0, 1]));
        let addr = node.serve_node_port(0).await.unwrap();
        let (status, body) = get(addr, Duration::from_secs(5)).await.unwrap();
        assert_eq!((status, body.as_str()), (200, "node-a\n"));
        assert_eq!(node.served(), 1);

        for header in [
            b"PROXY TCP4 203.0.113.7 100.64.0.2 40000 80\r\n".to_vec(),
            {
                let mut v2 = PROXY_V2_SIGNATURE.to_vec();
                v2.extend_from_slice(&[0x21, 0x11, 0, 12, 203, 0, 113, 7, 100, 64, 0, 2]);
                v2.extend_from_slice(&40000u16.to_be_bytes());
                v2.extend_from_slice(&80u16.to_be_bytes());
                v2
            },
        ] {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            conn.write_all(&header).await.unwrap();
            conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut out = String::new();
            conn.read_to_string(&mut out).await.unwrap();
            assert!(out.ends_with("node-a\nclient=203.0.113.7:40000\n"), "{out}");
        }
    }

    #[tokio::test]
    async fn healthz_follows_the_switch_and_stop_closes() {
        let mut node = NodeStandIn::new("node-a", IpAddr::from([127, 0, 0, 1]));
        let addr = node.serve_healthz(0).await.unwrap();
        let t = Duration::from_secs(5);
        assert_eq!(get(addr, t).await.unwrap().0, 200);
        node.set_healthy(false);
        assert_eq!(get(addr, t).await.unwrap().0, 503);
        node.stop();
        // The aborted accept loop drops its listener; poll until connects are refused.
        let deadline = tokio::time::Instant::now() + t;
        while TcpStream::connect(addr).await.is_ok() {
            assert!(tokio::time::Instant::now() < deadline, "still listening");
            tokio::task::yield_now().await;
        }
    }
}
