//! A node's UDP NodePort stand-in: what answers a datagram a CloudStack `udp` rule relays, so a
//! test or the demo can tell which node a datagram reached without a kubelet. TCP NodePorts are
//! [`stand_in`](crate::stand_in)'s; UDP has no request to parse, so this is a separate, smaller
//! thing: each datagram is answered with `<node>\n` followed by the datagram itself (the echo
//! lets a client match answers to what it sent).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// One node's UDP stand-in on one port. Dropping it (or [`UdpStandIn::stop`]) closes it.
#[derive(Debug)]
pub struct UdpStandIn {
    name: String,
    address: SocketAddr,
    served: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl UdpStandIn {
    /// Binds `ip:port` (a node's local address, [`Sim::local_address`](crate::Sim::local_address))
    /// and answers every datagram with the node's `name`.
    pub async fn bind(name: impl Into<String>, ip: IpAddr, port: u16) -> std::io::Result<Self> {
        let socket = UdpSocket::bind((ip, port)).await?;
        let address = socket.local_addr()?;
        let name = name.into();
        let served = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(answer(socket, name.clone(), served.clone()));
        Ok(UdpStandIn {
            name,
            address,
            served,
            task,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Datagrams answered so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    pub fn stop(&mut self) {
        self.task.abort();
    }
}

impl Drop for UdpStandIn {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn answer(socket: UdpSocket, name: String, served: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 65_535];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let mut reply = format!("{name}\n").into_bytes();
        reply.extend_from_slice(&buf[..n]);
        served.fetch_add(1, Ordering::Relaxed);
        let _ = socket.send_to(&reply, from).await;
    }
}

/// Sends `payload` to `to` from a fresh socket on `from` (any port; `None`: 127.0.0.1) and waits
/// at most `timeout` for one answer. A datagram dropped on the way is an `Err` of kind
/// [`TimedOut`](std::io::ErrorKind::TimedOut): UDP says nothing else.
pub async fn ask(
    to: SocketAddr,
    from: Option<IpAddr>,
    payload: &[u8],
    timeout: Duration,
) -> std::io::Result<String> {
    let local = from.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let socket = UdpSocket::bind((local, 0)).await?;
    socket.connect(to).await?;
    socket.send(payload).await?;
    let mut buf = vec![0u8; 65_535];
    let n = tokio::time::timeout(timeout, async {
        loop {
            match socket.recv(&mut buf).await {
                // A port unreachable while the rule is not open yet: keep waiting for an answer.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                other => return other,
            }
        }
    })
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_with_the_node_name_and_the_datagram() {
        let node = UdpStandIn::bind("node-1", IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
            .await
            .unwrap();
        let answer = ask(node.address(), None, b"ping", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer, "node-1\nping");
        assert_eq!(node.served(), 1);
    }
}
