//! CloudStack load-balancer rules on the wire, over real sockets: TCP, UDP and `tcp-proxy` rules
//! reach their members' stand-ins, firewall rules (isolated networks) and the tier's ACL (VPCs)
//! decide which sources get in, and a member removed or a rule deleted stops carrying traffic.
//! The world is built and the rules made through the CloudStack API and `/_sim/cloudstack`; the
//! listener's address comes from `GET /_sim/cloudstack/load_balancer_rules/{id}/listeners`.
//!
//! A client's simulated source is its real local address: the tests bind clients to 127.0.0.2
//! (let in) and 127.0.0.3 (not). Every wait polls with a deadline; a datagram that must not
//! come back is waited for with a short timeout, the only way UDP tells "dropped".

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use cloud_sim::stand_in::NodeStandIn;
use cloud_sim::stand_in_udp::{self, UdpStandIn};
use cloud_sim::{CloudStackClient, CsVmSpec, DataPlaneConfig, Sim, SimConfig};
use common::cloudstack::{associate, network_id};
use common::eventually;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const ALLOWED: &str = "127.0.0.2";
const REFUSED: &str = "127.0.0.3";
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a datagram that must be dropped is waited for.
const DROPPED: Duration = Duration::from_millis(300);

async fn dp_sim() -> Sim {
    Sim::start_with(SimConfig {
        action_duration: Duration::ZERO,
        data_plane: Some(DataPlaneConfig::default()),
        ..SimConfig::default()
    })
    .await
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A VM's NIC address mapped to the local address its stand-ins bind.
async fn local_of(sim: &Sim, cs: &CloudStackClient, vm: &str) -> IpAddr {
    let shown = cs.vm(vm).await.unwrap();
    sim.local_address(ip(shown["ip"].as_str().unwrap()))
}

/// `GET /` to `addr` from a client bound to `from`: the answer's body, or `None` when the
/// connection was closed or reset without an answer.
async fn get_from(addr: SocketAddr, from: &str) -> Option<String> {
    let exchange = async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(ip(from), 0))?;
        let mut conn = socket.connect(addr).await?;
        conn.write_all(b"GET / HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
            .await?;
        let mut out = Vec::new();
        conn.read_to_end(&mut out).await?;
        std::io::Result::Ok(String::from_utf8_lossy(&out).into_owned())
    };
    let text = tokio::time::timeout(TIMEOUT, exchange).await.ok()?.ok()?;
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// The node that answered a body (`<node>\n...`).
fn node(body: &str) -> &str {
    body.lines().next().unwrap_or_default()
}

/// Creates a rule (`openfirewall=false`: the tests make the firewall themselves) and assigns
/// `members`; its id.
async fn rule(
    cs: &CloudStackClient,
    ip_id: &str,
    net: &str,
    (protocol, public, private): (&str, u16, u16),
    members: &[String],
) -> String {
    let (public, private) = (public.to_string(), private.to_string());
    let created = cs
        .call_async(
            "createLoadBalancerRule",
            &[
                ("name", &format!("a1-{protocol}-{public}")),
                ("algorithm", "roundrobin"),
                ("publicipid", ip_id),
                ("networkid", net),
                ("publicport", &public),
                ("privateport", &private),
                ("protocol", protocol),
                ("openfirewall", "false"),
                ("cidrlist", "0.0.0.0/0"),
            ],
        )
        .await
        .unwrap();
    let id = created["loadbalancer"]["id"].as_str().unwrap().to_owned();
    cs.call_async(
        "assignToLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", &members.join(","))],
    )
    .await
    .unwrap();
    id
}

async fn firewall(cs: &CloudStackClient, ip_id: &str, protocol: &str, port: u16, cidr: &str) {
    let port = port.to_string();
    cs.call_async(
        "createFirewallRule",
        &[
            ("ipaddressid", ip_id),
            ("protocol", protocol),
            ("startport", &port),
            ("endport", &port),
            ("cidrlist", cidr),
        ],
    )
    .await
    .unwrap();
}

/// Where rule `id` listens, once the data plane opened it.
async fn listener(cs: &CloudStackClient, id: &str) -> SocketAddr {
    eventually("the rule's listener", || async {
        cs.rule_listener(id).await.unwrap().map(|l| l.address)
    })
    .await
}

/// Two VMs in the default isolated network, an address of it; (network, address id, VMs).
async fn isolated(cs: &CloudStackClient) -> (String, String, Vec<String>) {
    let net = network_id(cs, "default-zone-1").await;
    let ip_id = associate(cs, &[("networkid", &net)]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let vms = cs
        .create_vms(2, "node", &CsVmSpec::default())
        .await
        .unwrap();
    (net, ip_id, vms)
}

#[tokio::test]
async fn a_tcp_rule_balances_over_its_members_until_one_is_removed_or_the_rule_deleted() {
    let sim = dp_sim().await;
    let cs = sim.cloudstack_client();
    let (net, ip_id, vms) = isolated(&cs).await;
    let mut stand_ins = Vec::new();
    for (i, vm) in vms.iter().enumerate() {
        let mut s = NodeStandIn::new(format!("node-{}", i + 1), local_of(&sim, &cs, vm).await);
        s.serve_node_port(30080).await.unwrap();
        stand_ins.push(s);
    }
    let id = rule(&cs, &ip_id, &net, ("tcp", 80, 30080), &vms).await;
    firewall(&cs, &ip_id, "tcp", 80, "0.0.0.0/0").await;
    let addr = listener(&cs, &id).await;
    let mut answered = Vec::new();
    for _ in 0..4 {
        answered.push(node(&get_from(addr, ALLOWED).await.unwrap()).to_owned());
    }
    answered.sort();
    assert_eq!(answered, ["node-1", "node-1", "node-2", "node-2"]);

    // node-2 leaves the rule: from the next connection on, only node-1 answers.
    cs.call_async(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", &vms[1])],
    )
    .await
    .unwrap();
    let before = stand_ins[1].served();
    for _ in 0..4 {
        assert_eq!(node(&get_from(addr, ALLOWED).await.unwrap()), "node-1");
    }
    assert_eq!(stand_ins[1].served(), before);
    let counts = cs.rule_listener(&id).await.unwrap().unwrap().connections;
    assert_eq!((counts.accepted, counts.forwarded), (8, 8), "{counts:?}");

    // A stopped member takes no traffic either: none left, so the connection is refused.
    cs.stop_vm(&vms[0]).await.unwrap();
    cs.wait_vm_state(&vms[0], "Stopped").await.unwrap();
    assert_eq!(get_from(addr, ALLOWED).await, None);

    // The rule goes: its listener closes.
    cs.call_async("deleteLoadBalancerRule", &[("id", &id)])
        .await
        .unwrap();
    eventually("the listener closed", || async {
        sim.rule_listener(&id).is_none().then_some(())
    })
    .await;
    eventually("connections refused", || async {
        tokio::net::TcpStream::connect(addr)
            .await
            .is_err()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_udp_rule_relays_datagrams_and_their_answers() {
    let sim = dp_sim().await;
    let cs = sim.cloudstack_client();
    let (net, ip_id, vms) = isolated(&cs).await;
    let mut stand_ins = Vec::new();
    for (i, vm) in vms.iter().enumerate() {
        let local = local_of(&sim, &cs, vm).await;
        stand_ins.push(
            UdpStandIn::bind(format!("node-{}", i + 1), local, 30053)
                .await
                .unwrap(),
        );
    }
    let id = rule(&cs, &ip_id, &net, ("udp", 53, 30053), &vms).await;
    let addr = listener(&cs, &id).await;
    assert_eq!(
        cs.rule_listener(&id).await.unwrap().unwrap().protocol,
        "udp"
    );

    // No firewall rule for UDP 53 yet: dropped (a TCP one for the port does not open UDP).
    firewall(&cs, &ip_id, "tcp", 53, "0.0.0.0/0").await;
    let dropped = stand_in_udp::ask(addr, Some(ip(ALLOWED)), b"q", DROPPED).await;
    assert_eq!(
        dropped.unwrap_err().kind(),
        std::io::ErrorKind::TimedOut,
        "dropped"
    );
    assert_eq!(stand_ins[0].served() + stand_ins[1].served(), 0);

    firewall(&cs, &ip_id, "udp", 53, "0.0.0.0/0").await;
    let mut answered = Vec::new();
    for i in 0..4 {
        let q = format!("q{i}");
        let a = stand_in_udp::ask(addr, Some(ip(ALLOWED)), q.as_bytes(), TIMEOUT)
            .await
            .unwrap();
        let (node, echo) = a.split_once('\n').unwrap();
        assert_eq!(echo, q, "the answer to this very datagram");
        answered.push(node.to_owned());
    }
    answered.sort();
    assert_eq!(answered, ["node-1", "node-1", "node-2", "node-2"]);

    cs.call_async(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", &vms[0])],
    )
    .await
    .unwrap();
    for _ in 0..4 {
        let a = stand_in_udp::ask(addr, Some(ip(ALLOWED)), b"q", TIMEOUT)
            .await
            .unwrap();
        assert!(a.starts_with("node-2\n"), "{a}");
    }
    cs.call_async("deleteLoadBalancerRule", &[("id", &id)])
        .await
        .unwrap();
    eventually("the socket closed", || async {
        sim.rule_listener(&id).is_none().then_some(())
    })
    .await;
    let after = stand_in_udp::ask(addr, Some(ip(ALLOWED)), b"q", DROPPED).await;
    assert!(after.is_err(), "{after:?}");
}

#[tokio::test]
async fn a_tcp_proxy_rule_tells_the_member_who_the_client_is() {
    let sim = dp_sim().await;
    let cs = sim.cloudstack_client();
    let (net, _, vms) = isolated(&cs).await;
    let public = associate(&cs, &[("networkid", &net)]).await;
    let (public_id, public_ip) = (
        public["id"].as_str().unwrap().to_owned(),
        public["ipaddress"].as_str().unwrap().to_owned(),
    );
    let mut stand_in = NodeStandIn::new("node-1", local_of(&sim, &cs, &vms[0]).await);
    stand_in.serve_node_port(30443).await.unwrap();
    let id = rule(&cs, &public_id, &net, ("tcp-proxy", 443, 30443), &vms[..1]).await;
    firewall(&cs, &public_id, "tcp", 443, "0.0.0.0/0").await;
    let addr = listener(&cs, &id).await;

    let body = get_from(addr, ALLOWED).await.unwrap();
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("node-1"));
    let client = lines.next().unwrap();
    assert!(client.starts_with(&format!("client={ALLOWED}:")), "{body}");
    let seen = stand_in.seen();
    let proxy = seen.last().unwrap().proxy.unwrap();
    assert_eq!(proxy.version, 1);
    assert_eq!(
        proxy.destination,
        Some(SocketAddr::new(ip(&public_ip), 443)),
        "the rule's public address and port"
    );
}

#[tokio::test]
async fn firewall_rules_of_the_public_address_decide_who_reaches_a_rule() {
    let sim = dp_sim().await;
    let cs = sim.cloudstack_client();
    let (net, ip_id, vms) = isolated(&cs).await;
    let mut stand_in = NodeStandIn::new("node-1", local_of(&sim, &cs, &vms[0]).await);
    stand_in.serve_node_port(30080).await.unwrap();
    let id = rule(&cs, &ip_id, &net, ("tcp", 80, 30080), &vms[..1]).await;
    let addr = listener(&cs, &id).await;

    // No firewall rule: a public address lets nothing in.
    assert_eq!(get_from(addr, ALLOWED).await, None);
    // One for another port, another protocol, or another source does not open it either.
    firewall(&cs, &ip_id, "tcp", 8080, "0.0.0.0/0").await;
    firewall(&cs, &ip_id, "udp", 80, "0.0.0.0/0").await;
    firewall(&cs, &ip_id, "tcp", 80, &format!("{ALLOWED}/32")).await;
    assert_eq!(node(&get_from(addr, ALLOWED).await.unwrap()), "node-1");
    assert_eq!(get_from(addr, REFUSED).await, None);
    assert_eq!(
        stand_in.served(),
        1,
        "the refused one never reached the node"
    );
    let counts = cs.rule_listener(&id).await.unwrap().unwrap().connections;
    assert_eq!(
        (counts.accepted, counts.forwarded, counts.refused),
        (3, 1, 2)
    );

    // createLoadBalancerRule's own firewall rule (openfirewall, from its cidrlist) lets its
    // sources in the same way.
    let other = associate(&cs, &[("networkid", &net)]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let opened = cs
        .call_async(
            "createLoadBalancerRule",
            &[
                ("name", "opened"),
                ("algorithm", "leastconn"),
                ("publicipid", &other),
                ("publicport", "80"),
                ("privateport", "30080"),
                ("cidrlist", &format!("{REFUSED}/32")),
            ],
        )
        .await
        .unwrap()["loadbalancer"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    cs.call_async(
        "assignToLoadBalancerRule",
        &[("id", &opened), ("virtualmachineids", &vms[0])],
    )
    .await
    .unwrap();
    let addr = listener(&cs, &opened).await;
    assert_eq!(node(&get_from(addr, REFUSED).await.unwrap()), "node-1");
    assert_eq!(get_from(addr, ALLOWED).await, None);
}

#[tokio::test]
async fn the_tiers_acl_decides_who_reaches_a_vpc_rule_on_the_node_port() {
    let sim = dp_sim().await;
    let cs = sim.cloudstack_client();
    let tier = cs
        .create_network(
            json!({"name": "tier-1", "kind": "vpc_tier", "vpc": "vpc-k8s", "acl": "k8s-acl"}),
        )
        .await
        .unwrap();
    let shown = cs.call("listNetworks", &[("id", &tier)]).await.unwrap()["network"][0].clone();
    let (acl, vpc) = (
        shown["aclid"].as_str().unwrap().to_owned(),
        shown["vpcid"].as_str().unwrap().to_owned(),
    );
    let vms = cs
        .create_vms(1, "tier-node", &CsVmSpec::default().network(&tier))
        .await
        .unwrap();
    let ip_id = associate(&cs, &[("vpcid", &vpc)]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stand_in = NodeStandIn::new("tier-node-1", local_of(&sim, &cs, &vms[0]).await);
    stand_in.serve_node_port(30080).await.unwrap();
    let id = rule(&cs, &ip_id, &tier, ("tcp", 80, 30080), &vms).await;
    let addr = listener(&cs, &id).await;
    let acl_rule =
        |port: &'static str, cidr: String, action: &'static str, number: &'static str| {
            let (cs, acl, tier) = (cs.clone(), acl.clone(), tier.clone());
            async move {
                cs.call_async(
                    "createNetworkACL",
                    &[
                        ("aclid", &acl),
                        ("networkid", &tier),
                        ("protocol", "tcp"),
                        ("startport", port),
                        ("endport", port),
                        ("cidrlist", &cidr),
                        ("action", action),
                        ("traffictype", "Ingress"),
                        ("number", number),
                    ],
                )
                .await
                .unwrap();
            }
        };

    // A list of the VPC's own with no rule: its implicit last rule denies.
    assert_eq!(get_from(addr, ALLOWED).await, None);
    // A rule on the public port is not one on the node port.
    acl_rule("80", "0.0.0.0/0".into(), "Allow", "10").await;
    assert_eq!(get_from(addr, ALLOWED).await, None);
    // On the node port: its source only, and a Deny numbered before an Allow wins.
    acl_rule("30080", format!("{ALLOWED}/32"), "Allow", "20").await;
    assert_eq!(node(&get_from(addr, ALLOWED).await.unwrap()), "tier-node-1");
    assert_eq!(get_from(addr, REFUSED).await, None);
    acl_rule("30080", format!("{ALLOWED}/32"), "Deny", "5").await;
    assert_eq!(get_from(addr, ALLOWED).await, None);
    assert_eq!(stand_in.served(), 1);
}
