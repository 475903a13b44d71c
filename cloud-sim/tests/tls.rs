//! TLS termination in the data plane over real sockets: an `https` service ends the client's
//! TLS with its certificate (chosen by SNI) and speaks plain HTTP to the target; switching the
//! service's certificate loses no request. Every wait polls with a deadline (`eventually`).

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cloud_sim::client::SimClient;
use cloud_sim::stand_in::NodeStandIn;
use cloud_sim::test_certs::{self, self_signed};
use cloud_sim::{DataPlaneConfig, Sim, SimConfig};
use common::eventually;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

async fn dp_sim() -> Sim {
    Sim::start_with(SimConfig {
        action_duration: Duration::ZERO,
        data_plane: Some(DataPlaneConfig {
            health_check_speedup: 50.0,
            ..DataPlaneConfig::default()
        }),
        ..SimConfig::default()
    })
    .await
}

/// A server with a stand-in answering `GET /` with `name`, and the port it listens on.
async fn target(sim: &Sim, w: &SimClient, name: &str) -> (u64, u16, NodeStandIn) {
    let id = w.create_server(name, "cx22", "fsn1").await.unwrap();
    let ip: IpAddr = w.get_server(id).await.unwrap()["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let listener = TcpListener::bind((sim.local_address(ip), 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut node = NodeStandIn::new(name, listener.local_addr().unwrap().ip());
    node.serve_app_on(listener).unwrap();
    (id, port, node)
}

/// An https load balancer on 443 with `certs`, forwarding to `port` of `server`; its id and
/// its listener once the target is healthy.
async fn https_lb(
    sim: &Sim,
    w: &SimClient,
    server: u64,
    port: u16,
    certs: &[u64],
) -> (u64, SocketAddr) {
    let lb = w
        .create_load_balancer_with(json!({
            "name": "tls", "load_balancer_type": "lb11", "location": "fsn1",
            "services": [{"protocol": "https", "listen_port": 443, "destination_port": port,
                          "http": {"certificates": certs}}],
            "targets": [{"type": "server", "server": {"id": server}}],
        }))
        .await
        .unwrap();
    let addr = eventually("the listener", || async move { sim.listener(lb, 443) }).await;
    eventually("a healthy target", || async move {
        let v = w.get_load_balancer(lb).await.unwrap();
        let status = v
            .pointer("/targets/0/health_status/0/status")?
            .as_str()?
            .to_owned();
        (status == "healthy").then_some(())
    })
    .await;
    (lb, addr)
}

/// A TLS client trusting exactly `certs` (self-signed, so each is its own root).
fn connector(certs: &[&str]) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for pem in certs {
        roots
            .add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

async fn handshake(
    tls: &TlsConnector,
    addr: SocketAddr,
    sni: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tls.connect(ServerName::try_from(sni.to_owned()).unwrap(), tcp)
        .await
}

/// The serial of the certificate the server presented on `conn`.
fn served_serial(conn: &TlsStream<TcpStream>) -> String {
    let chain = conn.get_ref().1.peer_certificates().unwrap();
    test_certs::serial_of_der(&chain[0]).unwrap()
}

/// `GET /` over an established connection: the status line and the body.
async fn get_over(mut conn: TlsStream<TcpStream>, sni: &str) -> std::io::Result<(String, String)> {
    let req = format!("GET / HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    // The stand-in closes after its answer; some peers skip close_notify, which is no loss here.
    match conn.read_to_end(&mut raw).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body.to_owned()))
}

/// One request on a new connection: the serial served and the answer's body.
async fn request(
    tls: &TlsConnector,
    addr: SocketAddr,
    sni: &str,
) -> std::io::Result<(String, String)> {
    let conn = tokio::time::timeout(Duration::from_secs(5), handshake(tls, addr, sni))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    let serial = served_serial(&conn);
    let (status, body) = get_over(conn, sni).await?;
    if !status.contains(" 200 ") {
        return Err(std::io::Error::other(format!("{status}: {body}")));
    }
    Ok((serial, body))
}

#[tokio::test]
async fn an_https_service_ends_tls_with_its_certificate_and_speaks_http_to_the_target() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (server, port, node) = target(&sim, &w, "web").await;
    let (cert, key) = self_signed(&["example.com"]);
    let id = w.create_certificate("site", &cert, &key).await.unwrap();
    let (_, addr) = https_lb(&sim, &w, server, port, &[id]).await;

    let tls = connector(&[&cert]);
    let (serial, body) = request(&tls, addr, "example.com").await.unwrap();
    assert_eq!(serial, test_certs::serial(&cert).unwrap());
    assert_eq!(body.trim(), "web");
    // The target read plain HTTP: it parsed the request line and the Host header.
    let seen = node.seen();
    let last = seen.iter().rfind(|s| s.path == "/").unwrap();
    assert_eq!(last.host.as_deref(), Some("example.com"));

    // A client that speaks no TLS gets no answer and reaches no target.
    let served = node.served();
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
    assert!(!String::from_utf8_lossy(&buf).contains("web"));
    assert_eq!(node.served(), served);
}

#[tokio::test]
async fn sni_chooses_among_the_service_certificates() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (server, port, _node) = target(&sim, &w, "web").await;
    let (a, a_key) = self_signed(&["a.example.com"]);
    let (b, b_key) = self_signed(&["*.b.example.com"]);
    let a_id = w.create_certificate("a", &a, &a_key).await.unwrap();
    let b_id = w.create_certificate("b", &b, &b_key).await.unwrap();
    let (_, addr) = https_lb(&sim, &w, server, port, &[a_id, b_id]).await;

    let tls = connector(&[&a, &b]);
    let (serial, _) = request(&tls, addr, "www.b.example.com").await.unwrap();
    assert_eq!(serial, test_certs::serial(&b).unwrap());
    let (serial, _) = request(&tls, addr, "a.example.com").await.unwrap();
    assert_eq!(serial, test_certs::serial(&a).unwrap());
    // A name neither covers: the first certificate (which this client then refuses).
    let conn = handshake(&connector(&[]), addr, "other.example.net").await;
    assert!(conn.is_err());
}

#[tokio::test]
async fn switching_the_certificate_under_steady_requests_loses_none() {
    let sim = dp_sim().await;
    let w = sim.client();
    let (server, port, _node) = target(&sim, &w, "web").await;
    let (old, old_key) = self_signed(&["example.com"]);
    let (new, new_key) = self_signed(&["example.com"]);
    let (old_serial, new_serial) = (
        test_certs::serial(&old).unwrap(),
        test_certs::serial(&new).unwrap(),
    );
    let old_id = w.create_certificate("old", &old, &old_key).await.unwrap();
    let new_id = w.create_certificate("new", &new, &new_key).await.unwrap();
    let (lb, addr) = https_lb(&sim, &w, server, port, &[old_id]).await;
    let tls = connector(&[&old, &new]);

    // A connection established before the switch, its request sent after it.
    let held = handshake(&tls, addr, "example.com").await.unwrap();
    assert_eq!(served_serial(&held), old_serial);

    // Requests back to back, each on a new connection, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Result<String, String>>::new()));
    let looper = {
        let (tls, stop, seen) = (tls.clone(), stop.clone(), seen.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = request(&tls, addr, "example.com").await;
                let r = r.map(|(serial, _)| serial).map_err(|e| e.to_string());
                seen.lock().unwrap().push(r);
            }
        })
    };
    let count = |serial: &str| {
        let seen = seen.lock().unwrap();
        seen.iter().filter(|r| r.as_deref() == Ok(serial)).count()
    };
    eventually("requests with the old certificate", || async {
        (count(&old_serial) >= 20).then_some(())
    })
    .await;
    w.load_balancer_action(
        lb,
        "update_service",
        json!({"listen_port": 443, "http": {"certificates": [new_id]}}),
    )
    .await
    .unwrap();
    eventually("requests with the new certificate", || async {
        (count(&new_serial) >= 20).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    looper.await.unwrap();

    let seen = seen.lock().unwrap().clone();
    let failed: Vec<_> = seen.iter().filter(|r| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:?}",
        failed.len(),
        seen.len()
    );
    // Once the new certificate is served, the old one never comes back.
    let first_new = seen
        .iter()
        .position(|r| r.as_deref() == Ok(&new_serial))
        .unwrap();
    assert!(
        seen[first_new..]
            .iter()
            .all(|r| r.as_deref() == Ok(&new_serial))
    );
    // The connection made before the switch still gets its answer, under its old certificate.
    let (status, body) = get_over(held, "example.com").await.unwrap();
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(body.trim(), "web");
    // Same listener throughout.
    assert_eq!(sim.listener(lb, 443), Some(addr));
}
