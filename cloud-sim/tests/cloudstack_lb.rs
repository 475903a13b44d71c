//! The CloudStack load-balancer side over HTTP: public addresses, load-balancer rules and their
//! members, in accounts and projects. Firewall rules, network ACLs and failing jobs:
//! `cloudstack_firewall.rs`.

mod common;

use cloud_sim::{CsClientError, CsVmSpec, Sim};
use common::cloudstack::{assert_cs_error, associate, lb_world, network_id, rule_params};
use serde_json::json;

#[tokio::test]
async fn public_addresses_are_associated_listed_and_released() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let net = network_id(&cs, "default-zone-1").await;
    // The isolated networks' source NAT addresses.
    let own = cs.call("listPublicIpAddresses", &[]).await.unwrap();
    assert_eq!(own["count"], 2);
    assert_eq!(own["publicipaddress"][0]["issourcenat"], true);
    let first = cs
        .call("associateIpAddress", &[("networkid", &net)])
        .await
        .unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    let ip = cs.wait_job(first["jobid"].as_str().unwrap()).await.unwrap()["ipaddress"].clone();
    assert_eq!(ip["id"], id.as_str());
    assert_eq!(ip["state"], "Allocated");
    assert_eq!(ip["associatednetworkid"], net.as_str());
    assert_eq!(ip["issourcenat"], false);
    assert!(
        ip["networkid"].as_str().is_some_and(|n| n != net),
        "the zone's public network"
    );
    assert!(ip["ipaddress"].as_str().unwrap().starts_with("100.101."));
    assert!(ip["allocated"].as_str().unwrap().ends_with("+0000"));
    let listed = cs
        .call("listPublicIpAddresses", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(listed["publicipaddress"][0], ip);
    // A given address; the same again is taken.
    let chosen = associate(&cs, &[("networkid", &net), ("ipaddress", "100.101.0.200")]).await;
    assert_eq!(chosen["ipaddress"], "100.101.0.200");
    let err = cs
        .call(
            "associateIpAddress",
            &[("networkid", &net), ("ipaddress", "100.101.0.200")],
        )
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(431), "{err}");
    // A free address is listed only with allocatedonly=false.
    let free = |allocated_only: &'static str| {
        let cs = cs.clone();
        async move {
            cs.call(
                "listPublicIpAddresses",
                &[
                    ("ipaddress", "100.101.0.250"),
                    ("allocatedonly", allocated_only),
                    ("listall", "true"),
                ],
            )
            .await
            .unwrap()
        }
    };
    assert_eq!(free("true").await, json!({}));
    let listed = free("false").await;
    assert_eq!(
        (
            listed["count"].as_u64(),
            &listed["publicipaddress"][0]["state"]
        ),
        (Some(1), &json!("Free"))
    );
    assert!(listed["publicipaddress"][0].get("allocated").is_none());
    // Source NAT stays; others go.
    let snat = own["publicipaddress"][0]["id"].as_str().unwrap();
    let r = cs
        .raw("disassociateIpAddress", &[("id", snat)])
        .await
        .unwrap();
    assert_cs_error(&r, "disassociateipaddressresponse", 431, Some(4350));
    let done = cs
        .call_async("disassociateIpAddress", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(done, json!({"success": true}));
    assert_eq!(
        cs.call("listPublicIpAddresses", &[("id", &id)])
            .await
            .unwrap(),
        json!({})
    );
    // Bad requests.
    let shared = cs
        .create_network(json!({"name": "shared", "kind": "shared", "cidr": "192.168.0.0/24"}))
        .await
        .unwrap();
    let err = cs
        .call("associateIpAddress", &[("networkid", &shared)])
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(431), "{err}");
    let r = cs
        .raw(
            "associateIpAddress",
            &[("networkid", "0c0ffee0-0000-4000-8000-000000000000")],
        )
        .await
        .unwrap();
    assert_cs_error(&r, "associateipaddressresponse", 431, Some(9999));
    assert_eq!(
        cs.call("associateIpAddress", &[])
            .await
            .unwrap_err()
            .errorcode(),
        Some(431)
    );
}

#[tokio::test]
async fn load_balancer_rules_and_their_members() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (net, ip, vms) = lb_world(&cs).await;
    let first = cs
        .call(
            "createLoadBalancerRule",
            &rule_params("a1b2c3-tcp-80", &ip, &net, "tcp"),
        )
        .await
        .unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    let rule = cs.wait_job(first["jobid"].as_str().unwrap()).await.unwrap()["loadbalancer"].clone();
    assert_eq!(rule["id"], id.as_str());
    assert_eq!(
        (rule["publicport"].as_str(), rule["privateport"].as_str()),
        (Some("80"), Some("30080"))
    );
    assert_eq!(rule["protocol"], "tcp");
    assert_eq!(rule["algorithm"], "roundrobin");
    assert_eq!(rule["cidrlist"], "0.0.0.0/0");
    assert_eq!(rule["publicipid"], ip.as_str());
    assert_eq!(rule["networkid"], net.as_str());
    assert_eq!(rule["state"], "Active");
    let listed = cs
        .call(
            "listLoadBalancerRules",
            &[("keyword", "a1b2c3"), ("listall", "true")],
        )
        .await
        .unwrap();
    assert_eq!(listed["loadbalancerrule"][0], rule);
    // The same port and transport on the address conflicts (tcp-proxy is TCP); UDP does not.
    let r = cs
        .raw(
            "createLoadBalancerRule",
            &rule_params("x-tcp-proxy-80", &ip, &net, "tcp-proxy"),
        )
        .await
        .unwrap();
    let text = assert_cs_error(&r, "createloadbalancerruleresponse", 537, Some(4360));
    assert!(
        text.starts_with("The range specified, 80-80, conflicts with rule "),
        "{text}"
    );
    cs.call_async(
        "createLoadBalancerRule",
        &rule_params("a1b2c3-udp-80", &ip, &net, "udp"),
    )
    .await
    .unwrap();
    // Members.
    let two = format!("{},{}", vms[0], vms[1]);
    let ok = cs
        .call_async(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", &two)],
        )
        .await
        .unwrap();
    assert_eq!(ok, json!({"success": true}));
    let members = cs
        .call("listLoadBalancerRuleInstances", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(members["count"], 2);
    assert_eq!(
        members["loadbalancerruleinstance"][0]["id"],
        vms[0].as_str()
    );
    let err = cs
        .call_async(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", &vms[0])],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, CsClientError::JobFailed { errorcode: 431, .. }),
        "{err}"
    );
    let far = cs
        .create_vm(&CsVmSpec::named("far").zone("zone-2"))
        .await
        .unwrap();
    let err = cs
        .call_async(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", &far)],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CsClientError::JobFailed { .. }), "{err}");
    cs.call_async(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", &vms[1])],
    )
    .await
    .unwrap();
    let err = cs
        .call_async(
            "removeFromLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", &vms[1])],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CsClientError::JobFailed { .. }), "{err}");
    let members = cs
        .call("listLoadBalancerRuleInstances", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(members["count"], 1);
    let of_vm = cs
        .call("listLoadBalancerRules", &[("virtualmachineid", &vms[0])])
        .await
        .unwrap();
    assert_eq!(of_vm["count"], 1);
    // Updates: algorithm and protocol; cidrlist only from CloudStack 4.22 on.
    let update = [
        ("id", id.as_str()),
        ("algorithm", "source"),
        ("protocol", "tcp-proxy"),
        ("cidrlist", "10.0.0.0/8,192.168.0.0/16"),
    ];
    let updated = cs
        .call_async("updateLoadBalancerRule", &update)
        .await
        .unwrap()["loadbalancer"]
        .clone();
    assert_eq!(
        (updated["algorithm"].as_str(), updated["protocol"].as_str()),
        (Some("source"), Some("tcp-proxy"))
    );
    assert_eq!(updated["cidrlist"], "0.0.0.0/0");
    cs.set_config(json!({"version": "4.22.0.0"})).await.unwrap();
    let updated = cs
        .call_async("updateLoadBalancerRule", &update)
        .await
        .unwrap()["loadbalancer"]
        .clone();
    assert_eq!(updated["cidrlist"], "10.0.0.0/8 192.168.0.0/16");
    // Delete.
    cs.call_async("deleteLoadBalancerRule", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(
        cs.call("listLoadBalancerRules", &[("keyword", "a1b2c3-tcp")])
            .await
            .unwrap(),
        json!({})
    );
    let err = cs
        .call("deleteLoadBalancerRule", &[("id", &id)])
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(431));
}

#[tokio::test]
async fn bad_load_balancer_rules_are_refused_before_the_job() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (net, ip, _) = lb_world(&cs).await;
    let mut bad = rule_params("r", &ip, &net, "sctp");
    let r = cs.raw("createLoadBalancerRule", &bad).await.unwrap();
    assert_cs_error(&r, "createloadbalancerruleresponse", 431, Some(4350));
    bad[6] = ("protocol", "tcp");
    bad[1] = ("algorithm", "random");
    let r = cs.raw("createLoadBalancerRule", &bad).await.unwrap();
    assert_cs_error(&r, "createloadbalancerruleresponse", 431, Some(4350));
    let no_name: Vec<_> = rule_params("r", &ip, &net, "tcp")
        .into_iter()
        .skip(1)
        .collect();
    let r = cs.raw("createLoadBalancerRule", &no_name).await.unwrap();
    let text = assert_cs_error(&r, "createloadbalancerruleresponse", 431, Some(9999));
    assert_eq!(
        text,
        "Unable to execute API command createloadbalancerrule due to missing parameter name"
    );
    // A network without the Lb service.
    let shared = cs
        .create_network(json!({"name": "shared", "kind": "shared", "cidr": "192.168.0.0/24"}))
        .await
        .unwrap();
    let zone = cs.call("listZones", &[("name", "zone-1")]).await.unwrap()["zone"][0]["id"].clone();
    let loose = associate(&cs, &[("zoneid", zone.as_str().unwrap())]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = cs
        .raw(
            "createLoadBalancerRule",
            &rule_params("r", &loose, &shared, "tcp"),
        )
        .await
        .unwrap();
    let text = assert_cs_error(&r, "createloadbalancerruleresponse", 431, Some(4350));
    assert_eq!(text, "LB service is not supported in specified network id");
    // Nothing was made.
    assert_eq!(
        cs.call("listLoadBalancerRules", &[]).await.unwrap(),
        json!({})
    );
}

#[tokio::test]
async fn project_rules_are_listed_in_the_project_scope() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let p = cs.create_project("team-a", &[]).await.unwrap();
    let net = cs
        .create_network(json!({"name": "team-net", "project": "team-a"}))
        .await
        .unwrap();
    let ip = associate(&cs, &[("networkid", &net), ("projectid", &p)]).await;
    assert_eq!(ip["project"], "team-a");
    let ip = ip["id"].as_str().unwrap().to_owned();
    cs.call_async(
        "createLoadBalancerRule",
        &rule_params("p-tcp-80", &ip, &net, "tcp"),
    )
    .await
    .unwrap();
    let outside = cs
        .call(
            "listLoadBalancerRules",
            &[("keyword", "p-tcp"), ("listall", "true")],
        )
        .await
        .unwrap();
    assert_eq!(outside, json!({}));
    let inside = cs
        .call(
            "listLoadBalancerRules",
            &[("keyword", "p-tcp"), ("listall", "true"), ("projectid", &p)],
        )
        .await
        .unwrap();
    assert_eq!(inside["count"], 1);
    assert_eq!(inside["loadbalancerrule"][0]["project"], "team-a");
    // A user outside the project may not use its address.
    let (_, dev) = cs.create_account("dev", "user").await.unwrap();
    let r = dev
        .raw("disassociateIpAddress", &[("id", &ip)])
        .await
        .unwrap();
    assert_cs_error(&r, "disassociateipaddressresponse", 531, Some(4365));
}
