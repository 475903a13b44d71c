//! Stand-ins for what runs on a node, for load balancers with the data plane on to send traffic
//! and health checks to without a kubelet: a Service's NodePort (an HTTP answer naming the node),
//! kube-proxy's health answers (`GET /healthz`, 200 or 503 as the test says, or any status it
//! sets), an application serving both on one port (for a load balancer whose HTTP health
//! check asks the target port itself), and kube-proxy's health server as k3s and Cilium set it
//! up ([`KubeProxyFlavour`]). Tests, the demo and the benchmark bind them to a simulated
//! server's local address ([`Sim::local_address`](crate::Sim::local_address)), so several "nodes"
//! serve the same port.
//!
//! A request is one connection: the stand-in reads an optional PROXY protocol header (v1 or v2),
//! the request head, answers and closes. The body is `<node>\n`, plus `client=<address>\n` when a
//! PROXY header said who the client was. What it saw of each request (port, path, `Host`, PROXY
//! header) is kept for the test to read ([`NodeStandIn::seen`]).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How many requests [`NodeStandIn::seen`] keeps: the latest ones. A benchmark sends far more, and
/// must not make the stand-in grow without end.
pub const SEEN_KEPT: usize = 10_000;

/// One node's stand-in listeners. Dropping it (or [`NodeStandIn::stop`]) closes them: the node is
/// gone.
#[derive(Debug)]
pub struct NodeStandIn {
    ip: IpAddr,
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

/// What a stand-in saw of one request it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The stand-in's port it came in on.
    pub port: u16,
    /// The request's path (`/`, `/healthz`, ...).
    pub path: String,
    /// Its `Host` header, if it had one.
    pub host: Option<String>,
    /// The PROXY header in front of it, if one came.
    pub proxy: Option<ProxyHeader>,
}

/// A PROXY protocol header as a stand-in read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyHeader {
    /// 1 (text) or 2 (binary).
    pub version: u8,
    /// The client. `None` when the header names no addresses (v1 `UNKNOWN`, v2 `LOCAL`, or a
    /// family other than TCP over IPv4 or IPv6).
    pub source: Option<SocketAddr>,
    /// Where the client connected to: the load balancer's address and listen port. `None` as for
    /// `source`.
    pub destination: Option<SocketAddr>,
}

/// What the listeners share: the answers' state and what was seen.
#[derive(Debug)]
struct Inner {
    name: String,
    /// The status `/healthz` answers with.
    healthz: AtomicU16,
    /// Requests answered with the node's name.
    served: AtomicU64,
    seen: Mutex<VecDeque<SeenRequest>>,
}

/// What answers kube-proxy's health check on port 10256 of a node, as the installers users run
/// set it up ([`NodeStandIn::serve_kube_proxy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeProxyFlavour {
    /// kube-proxy as kubeadm and most distributions run it: `--healthz-bind-address=0.0.0.0:10256`,
    /// `200` while the node can serve, `503` when [`NodeStandIn::set_healthy`] says not.
    KubeProxy,
    /// k3s: kube-proxy's health server listens on 127.0.0.1 only, so a connection to the node's
    /// address (the load balancer's, or any other machine's) is refused. The node's own loopback
    /// is not modelled: nothing listens at the node's address.
    K3s,
    /// Cilium's kube-proxy replacement without `kubeProxyReplacementHealthzBindAddr`: no health
    /// server at all, so connections are refused.
    CiliumWithoutHealthz,
    /// Cilium's kube-proxy replacement with its health server on, while the agent cannot reach
    /// the apiserver: `503` on every node at once (cilium/cilium#39778).
    CiliumApiserverUnreachable,
}

impl KubeProxyFlavour {
    /// kube-proxy's health server port.
    pub const PORT: u16 = 10256;
}

/// What a listener answers.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// Every path: `200` and the node's name.
    NodePort,
    /// Every path: the `/healthz` status.
    Healthz,
    /// `/` as [`Route::NodePort`], `/healthz` as [`Route::Healthz`], any other path `404`.
    App,
}

impl NodeStandIn {
    /// A node called `name` at the local address `ip`, healthy, serving nothing yet.
    pub fn new(name: impl Into<String>, ip: IpAddr) -> Self {
        NodeStandIn {
            ip,
            inner: Arc::new(Inner {
                name: name.into(),
                healthz: AtomicU16::new(200),
                served: AtomicU64::new(0),
                seen: Mutex::default(),
            }),
            tasks: Vec::new(),
        }
    }

    /// Answers every request on `port` with `200` and the node's name: a NodePort whose endpoint
    /// answers (with `externalTrafficPolicy: Cluster` every node forwards, so every node answers).
    pub async fn serve_node_port(&mut self, port: u16) -> std::io::Result<SocketAddr> {
        self.listen(port, Route::NodePort).await
    }

    /// kube-proxy's answer on `port` (a `healthCheckNodePort`, or 10256), whatever the path: `200`
    /// while the node is healthy ([`NodeStandIn::set_healthy`]), `503` otherwise (or the status
    /// [`NodeStandIn::set_healthz_status`] set).
    pub async fn serve_healthz(&mut self, port: u16) -> std::io::Result<SocketAddr> {
        self.listen(port, Route::Healthz).await
    }

    /// kube-proxy's health server on port [`KubeProxyFlavour::PORT`] as `flavour` has it: the
    /// address it listens on, `None` when nothing listens at the node's address.
    pub async fn serve_kube_proxy(
        &mut self,
        flavour: KubeProxyFlavour,
    ) -> std::io::Result<Option<SocketAddr>> {
        match flavour {
            KubeProxyFlavour::K3s | KubeProxyFlavour::CiliumWithoutHealthz => Ok(None),
            KubeProxyFlavour::KubeProxy => {
                self.serve_healthz(KubeProxyFlavour::PORT).await.map(Some)
            }
            KubeProxyFlavour::CiliumApiserverUnreachable => {
                self.set_healthy(false);
                self.serve_healthz(KubeProxyFlavour::PORT).await.map(Some)
            }
        }
    }

    /// An application with its own health endpoint on `listener`, which the caller bound (normally
    /// at [`NodeStandIn::ip`]; several stand-ins on one port need it found free on every address
    /// first): `GET /` answers as [`NodeStandIn::serve_node_port`] does, `GET /healthz` as
    /// [`NodeStandIn::serve_healthz`] does, any other path `404`.
    pub fn serve_app_on(&mut self, listener: TcpListener) -> std::io::Result<SocketAddr> {
        self.serve(listener, Route::App)
    }

    /// What kube-proxy's health answers say from now on: `200` or `503`.
    pub fn set_healthy(&self, healthy: bool) {
        self.set_healthz_status(if healthy { 200 } else { 503 });
    }

    /// The HTTP status `/healthz` answers with from now on. The body is `ok` with a `2xx`,
    /// `no local endpoints` otherwise.
    pub fn set_healthz_status(&self, status: u16) {
        self.inner.healthz.store(status, Ordering::Relaxed);
    }

    /// Requests answered with the node's name so far (on NodePorts, and `/` of an app).
    pub fn served(&self) -> u64 {
        self.inner.served.load(Ordering::Relaxed)
    }

    /// The requests answered on every port, oldest first: the last [`SEEN_KEPT`]. A connection
    /// closed before a whole request came (a TCP health check) is not one.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.inner.seen().iter().cloned().collect()
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The local address it listens on.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Closes every listener (connections being answered finish).
    pub fn stop(&mut self) {
        self.tasks.drain(..).for_each(|t| t.abort());
    }

    async fn listen(&mut self, port: u16, route: Route) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind((self.ip, port)).await?;
        self.serve(listener, route)
    }

    fn serve(&mut self, listener: TcpListener, route: Route) -> std::io::Result<SocketAddr> {
        let addr = listener.local_addr()?;
        let inner = self.inner.clone();
        self.tasks.push(tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    // Out of file descriptors, say: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let inner = inner.clone();
                tokio::spawn(async move {
                    let _ = respond(conn, &inner, route).await;
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

impl Inner {
    /// Status and body for `path` on a listener answering as `route`.
    fn answer(&self, route: Route, path: &str) -> (u16, String) {
        let node = || {
            self.served.fetch_add(1, Ordering::Relaxed);
            (200, self.name.clone())
        };
        let healthz = || {
            let status = self.healthz.load(Ordering::Relaxed);
            let body = if (200..300).contains(&status) {
                "ok"
            } else {
                "no local endpoints"
            };
            (status, body.to_owned())
        };
        match (route, path) {
            (Route::NodePort, _) | (Route::App, "/") => node(),
            (Route::Healthz, _) | (Route::App, "/healthz") => healthz(),
            (Route::App, _) => (404, "not found".to_owned()),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, VecDeque<SeenRequest>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, request: SeenRequest) {
        let mut seen = self.seen();
        if seen.len() == SEEN_KEPT {
            seen.pop_front();
        }
        seen.push_back(request);
    }
}

/// Reads a PROXY header (if any) and a request head, records them, writes the answer.
async fn respond(mut conn: TcpStream, inner: &Inner, route: Route) -> std::io::Result<()> {
    let port = conn.local_addr()?.port();
    let mut buf = Vec::with_capacity(512);
    let (proxy, head) = loop {
        if let Some(parsed) = parse(&buf) {
            break parsed;
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
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|first| first.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let host = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim().to_owned())
    });
    let (status, mut body) = inner.answer(route, &path);
    // Recorded before the answer goes out: a client that has its answer finds its request here.
    inner.record(SeenRequest {
        port,
        path,
        host,
        proxy,
    });
    body.push('\n');
    if let Some(c) = proxy.and_then(|p| p.source) {
        body.push_str(&format!("client={c}\n"));
    }
    let response = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    );
    conn.write_all(response.as_bytes()).await?;
    conn.shutdown().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

const PROXY_V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// `Some((PROXY header, request head))` once `buf` holds a whole request head, after a PROXY
/// header if one came first; `None` while more is to come.
fn parse(buf: &[u8]) -> Option<(Option<ProxyHeader>, String)> {
    let (proxy, rest) = if buf.starts_with(b"PROXY ") {
        let end = find(buf, b"\r\n")?;
        let line = String::from_utf8_lossy(&buf[..end]);
        (Some(proxy_v1(&line)), &buf[end + 2..])
    } else if !buf.is_empty() && buf.starts_with(&PROXY_V2_SIGNATURE[..buf.len().min(12)]) {
        // A v2 header, or the start of its signature so far (which begins like an empty head).
        if buf.len() < 16 {
            return None;
        }
        let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
        let header = buf.get(..len)?;
        (Some(proxy_v2(header)), &buf[len..])
    } else {
        (None, buf)
    };
    let end = find(rest, b"\r\n\r\n")?;
    Some((proxy, String::from_utf8_lossy(&rest[..end]).into_owned()))
}

/// `PROXY TCP4 <source> <destination> <source port> <destination port>` (or `TCP6`, or
/// `UNKNOWN`).
fn proxy_v1(line: &str) -> ProxyHeader {
    let f: Vec<&str> = line.split(' ').collect();
    let tcp = f.len() == 6 && matches!(f[1], "TCP4" | "TCP6");
    let addr = |ip: usize, port: usize| -> Option<SocketAddr> {
        tcp.then_some(())?;
        Some(SocketAddr::new(f[ip].parse().ok()?, f[port].parse().ok()?))
    };
    ProxyHeader {
        version: 1,
        source: addr(2, 4),
        destination: addr(3, 5),
    }
}

/// A whole v2 header: signature, version and command, family and transport, length, addresses.
/// Addresses are read for the PROXY command over TCP, IPv4 or IPv6.
fn proxy_v2(h: &[u8]) -> ProxyHeader {
    let a = &h[16..];
    let port = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
    let (source, destination) = match (h[12], h[13]) {
        (0x21, 0x11) if a.len() >= 12 => {
            let ip = |o: usize| IpAddr::from([a[o], a[o + 1], a[o + 2], a[o + 3]]);
            (
                Some(SocketAddr::new(ip(0), port(8))),
                Some(SocketAddr::new(ip(4), port(10))),
            )
        }
        (0x21, 0x21) if a.len() >= 36 => {
            let ip = |o: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&a[o..o + 16]);
                IpAddr::from(octets)
            };
            (
                Some(SocketAddr::new(ip(0), port(32))),
                Some(SocketAddr::new(ip(16), port(34))),
            )
        }
        _ => (None, None),
    };
    ProxyHeader {
        version: 2,
        source,
        destination,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What [`request`] brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The client's own end of the connection: what a PROXY header names as the source.
    pub local: SocketAddr,
}

/// One request as a load balancer's client makes it: a new connection, `GET /`, the whole answer.
/// `Ok` holds the status and body; a refused, reset or timed-out connection is an `Err`, and so
/// is one closed without an answer.
pub async fn get(addr: SocketAddr, timeout: Duration) -> std::io::Result<(u16, String)> {
    request(addr, timeout).await.map(|r| (r.status, r.body))
}

/// [`get`], also saying which local address the request came from. A timeout is an `Err` of kind
/// [`TimedOut`](std::io::ErrorKind::TimedOut).
pub async fn request(addr: SocketAddr, timeout: Duration) -> std::io::Result<Reply> {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await?;
        let local = conn.local_addr()?;
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
        Ok(Reply {
            status,
            body,
            local,
        })
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
        let reply = request(addr, Duration::from_secs(5)).await.unwrap();
        assert_eq!((reply.status, reply.body.as_str()), (200, "node-a\n"));
        assert_eq!(node.served(), 1);
        assert_eq!(
            node.seen(),
            [SeenRequest {
                port: addr.port(),
                path: "/".into(),
                host: Some("lb".into()),
                proxy: None,
            }]
        );
        assert_ne!(reply.local, addr);
        assert_eq!(reply.local.ip(), addr.ip());

        let source: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        let destination: SocketAddr = "100.64.0.2:80".parse().unwrap();
        for (version, header) in [
            (
                1,
                b"PROXY TCP4 203.0.113.7 100.64.0.2 40000 80\r\n".to_vec(),
            ),
            (2, {
                let mut v2 = PROXY_V2_SIGNATURE.to_vec();
                v2.extend_from_slice(&[0x21, 0x11, 0, 12, 203, 0, 113, 7, 100, 64, 0, 2]);
                v2.extend_from_slice(&40000u16.to_be_bytes());
                v2.extend_from_slice(&80u16.to_be_bytes());
                v2
            }),
        ] {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            // Byte by byte: a header cut anywhere (even inside the v2 signature, which begins
            // like an empty request head) waits for the rest.
            for b in header.iter().chain(b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n") {
                conn.write_all(&[*b]).await.unwrap();
                conn.flush().await.unwrap();
            }
            let mut out = String::new();
            conn.read_to_string(&mut out).await.unwrap();
            assert!(out.ends_with("node-a\nclient=203.0.113.7:40000\n"), "{out}");
            assert_eq!(
                node.seen().last(),
                Some(&SeenRequest {
                    port: addr.port(),
                    path: "/x".into(),
                    host: Some("x".into()),
                    proxy: Some(ProxyHeader {
                        version,
                        source: Some(source),
                        destination: Some(destination),
                    }),
                })
            );
        }
        assert_eq!(node.served(), 3);
    }

    #[test]
    fn proxy_headers_without_addresses_name_none() {
        let none = |version| ProxyHeader {
            version,
            source: None,
            destination: None,
        };
        assert_eq!(proxy_v1("PROXY UNKNOWN"), none(1));
        assert_eq!(
            proxy_v1("PROXY TCP6 2001:db8::1 2001:db8::2 1000 443"),
            ProxyHeader {
                version: 1,
                source: Some("[2001:db8::1]:1000".parse().unwrap()),
                destination: Some("[2001:db8::2]:443".parse().unwrap()),
            }
        );
        // v2: LOCAL command, and AF_UNSPEC.
        let mut local = PROXY_V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x11, 0, 12]);
        local.extend_from_slice(&[0; 12]);
        assert_eq!(proxy_v2(&local), none(2));
        let mut unspec = PROXY_V2_SIGNATURE.to_vec();
        unspec.extend_from_slice(&[0x21, 0x00, 0, 0]);
        assert_eq!(proxy_v2(&unspec), none(2));
    }

    #[tokio::test]
    async fn healthz_follows_the_switch_and_stop_closes() {
        let mut node = NodeStandIn::new("node-a", IpAddr::from([127, 0, 0, 1]));
        let addr = node.serve_healthz(0).await.unwrap();
        let t = Duration::from_secs(5);
        assert_eq!(get(addr, t).await.unwrap(), (200, "ok\n".into()));
        node.set_healthy(false);
        assert_eq!(get(addr, t).await.unwrap().0, 503);
        node.set_healthz_status(204);
        assert_eq!(get(addr, t).await.unwrap(), (204, "ok\n".into()));
        assert_eq!(node.served(), 0, "health answers are not the node's");
        node.stop();
        // The aborted accept loop drops its listener; poll until connects are refused.
        let deadline = tokio::time::Instant::now() + t;
        while TcpStream::connect(addr).await.is_ok() {
            assert!(tokio::time::Instant::now() < deadline, "still listening");
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn kube_proxy_flavours_answer_as_their_installers_set_them_up() {
        let t = Duration::from_secs(5);
        for (i, flavour) in [
            KubeProxyFlavour::KubeProxy,
            KubeProxyFlavour::K3s,
            KubeProxyFlavour::CiliumWithoutHealthz,
            KubeProxyFlavour::CiliumApiserverUnreachable,
        ]
        .into_iter()
        .enumerate()
        {
            // Each at an address of its own: port 10256 is fixed.
            let ip = IpAddr::from([127, 0, 77, i as u8 + 1]);
            let mut node = NodeStandIn::new("node-a", ip);
            let addr = node.serve_kube_proxy(flavour).await.unwrap();
            let to = SocketAddr::new(ip, KubeProxyFlavour::PORT);
            let answer = get(to, t).await.map(|(status, _)| status).ok();
            let want = match flavour {
                KubeProxyFlavour::KubeProxy => Some(200),
                KubeProxyFlavour::CiliumApiserverUnreachable => Some(503),
                KubeProxyFlavour::K3s | KubeProxyFlavour::CiliumWithoutHealthz => None,
            };
            assert_eq!(answer, want, "{flavour:?}");
            assert_eq!(addr.is_some(), want.is_some(), "{flavour:?}");
        }
    }

    #[tokio::test]
    async fn an_app_answers_its_root_its_healthz_and_nothing_else() {
        let mut node = NodeStandIn::new("node-a", IpAddr::from([127, 0, 0, 1]));
        let listener = TcpListener::bind((node.ip(), 0)).await.unwrap();
        let addr = node.serve_app_on(listener).unwrap();
        let ask = |path: &'static str| async move {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            let head = format!("GET {path} HTTP/1.1\r\nHost: health.example.com\r\n\r\n");
            conn.write_all(head.as_bytes()).await.unwrap();
            let mut out = String::new();
            conn.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(ask("/").await.ends_with("\r\n\r\nnode-a\n"));
        node.set_healthz_status(503);
        assert!(ask("/healthz").await.starts_with("HTTP/1.1 503 "));
        assert!(ask("/nope").await.starts_with("HTTP/1.1 404 "));
        assert_eq!(node.served(), 1);
        let seen: Vec<(String, Option<String>)> =
            node.seen().into_iter().map(|s| (s.path, s.host)).collect();
        let host = Some("health.example.com".to_owned());
        assert_eq!(
            seen,
            [
                ("/".to_owned(), host.clone()),
                ("/healthz".to_owned(), host.clone()),
                ("/nope".to_owned(), host),
            ]
        );
    }

    #[tokio::test]
    async fn a_connection_without_a_request_is_not_seen_and_the_record_is_bounded() {
        let mut node = NodeStandIn::new("node-a", IpAddr::from([127, 0, 0, 1]));
        let addr = node.serve_node_port(0).await.unwrap();
        // A TCP health check: connect, close.
        drop(TcpStream::connect(addr).await.unwrap());
        let t = Duration::from_secs(5);
        assert_eq!(get(addr, t).await.unwrap().0, 200);
        assert_eq!(node.seen().len(), 1);
        for i in 0..SEEN_KEPT + 1 {
            node.inner.record(SeenRequest {
                port: 0,
                path: format!("/{i}"),
                host: None,
                proxy: None,
            });
        }
        let seen = node.seen();
        assert_eq!(seen.len(), SEEN_KEPT);
        assert_eq!(seen[0].path, "/1");
        assert_eq!(seen[SEEN_KEPT - 1].path, format!("/{SEEN_KEPT}"));
    }
}
