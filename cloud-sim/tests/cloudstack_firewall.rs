//! CloudStack firewall rules on isolated networks, network ACLs on VPC tiers, and the jobs of
//! load-balancer commands that fail or never end.

mod common;

use std::time::Duration;

use cloud_sim::{CsClientError, Sim};
use common::cloudstack::{assert_cs_error, associate, lb_world, network_id, rule_params};
use serde_json::json;

#[tokio::test]
async fn firewall_rules_on_isolated_networks_and_acls_on_vpc_tiers() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let net = network_id(&cs, "default-zone-1").await;
    let ip = associate(&cs, &[("networkid", &net)]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let fw = [
        ("ipaddressid", ip.as_str()),
        ("protocol", "tcp"),
        ("startport", "80"),
        ("endport", "80"),
        ("cidrlist", "0.0.0.0/0"),
    ];
    let rule = cs.call_async("createFirewallRule", &fw).await.unwrap()["firewallrule"].clone();
    assert_eq!(
        (rule["startport"].as_u64(), rule["endport"].as_u64()),
        (Some(80), Some(80))
    );
    assert_eq!(
        (rule["protocol"].as_str(), rule["cidrlist"].as_str()),
        (Some("tcp"), Some("0.0.0.0/0"))
    );
    let listed = cs
        .call(
            "listFirewallRules",
            &[("ipaddressid", &ip), ("listall", "true")],
        )
        .await
        .unwrap();
    assert_eq!(listed["firewallrule"][0], rule);
    let r = cs.raw("createFirewallRule", &fw).await.unwrap();
    assert_cs_error(&r, "createfirewallruleresponse", 537, Some(4360));
    let mut other = fw;
    other[4] = ("cidrlist", "10.0.0.0/8,192.168.0.0/16");
    let two = cs.call_async("createFirewallRule", &other).await.unwrap()["firewallrule"].clone();
    assert_eq!(two["cidrlist"], "10.0.0.0/8,192.168.0.0/16");
    cs.call_async(
        "deleteFirewallRule",
        &[("id", rule["id"].as_str().unwrap())],
    )
    .await
    .unwrap();
    assert_eq!(
        cs.call("listFirewallRules", &[("ipaddressid", &ip)])
            .await
            .unwrap()["count"],
        1
    );
    // The load balancer's openfirewall (default true outside VPCs) makes the rule itself.
    let mut params = rule_params("open-tcp-443", &ip, &net, "tcp");
    params.retain(|(k, _)| *k != "openfirewall");
    params[4] = ("publicport", "443");
    cs.call_async("createLoadBalancerRule", &params)
        .await
        .unwrap();
    let rules = cs
        .call("listFirewallRules", &[("ipaddressid", &ip)])
        .await
        .unwrap();
    assert!(
        rules["firewallrule"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["startport"] == 443),
        "{rules}"
    );

    // A VPC tier with a list of its own: no Firewall service, ACLs instead.
    let tier = cs
        .create_network(
            json!({"name": "tier-1", "kind": "vpc_tier", "vpc": "vpc-k8s", "acl": "k8s-acl"}),
        )
        .await
        .unwrap();
    let tier_net = cs.call("listNetworks", &[("id", &tier)]).await.unwrap()["network"][0].clone();
    let acl = tier_net["aclid"].as_str().unwrap().to_owned();
    let vpc = tier_net["vpcid"].as_str().unwrap().to_owned();
    let lists = cs
        .call("listNetworkACLLists", &[("id", &acl)])
        .await
        .unwrap();
    assert_eq!(
        (lists["count"].as_u64(), &lists["networkacllist"][0]["name"]),
        (Some(1), &json!("k8s-acl"))
    );
    let vpc_ip = associate(&cs, &[("vpcid", &vpc)]).await;
    assert_eq!(vpc_ip["vpcid"], vpc.as_str());
    assert!(vpc_ip.get("associatednetworkid").is_none());
    let vpc_ip = vpc_ip["id"].as_str().unwrap().to_owned();
    // The first rule puts the address in the tier.
    cs.call_async(
        "createLoadBalancerRule",
        &rule_params("t-tcp-80", &vpc_ip, &tier, "tcp"),
    )
    .await
    .unwrap();
    let in_tier = cs
        .call("listPublicIpAddresses", &[("id", &vpc_ip)])
        .await
        .unwrap();
    assert_eq!(
        in_tier["publicipaddress"][0]["associatednetworkid"],
        tier.as_str()
    );
    let r = cs
        .raw(
            "createFirewallRule",
            &[
                ("ipaddressid", &vpc_ip),
                ("protocol", "tcp"),
                ("startport", "80"),
            ],
        )
        .await
        .unwrap();
    assert_cs_error(&r, "createfirewallruleresponse", 431, Some(4350));
    let acl_params = [
        ("protocol", "TCP"),
        ("aclid", acl.as_str()),
        ("networkid", tier.as_str()),
        ("action", "Allow"),
        ("cidrlist", "0.0.0.0/0"),
        ("startport", "80"),
        ("endport", "80"),
        ("traffictype", "Ingress"),
        ("reason", "a0216b82-tcp-80"),
    ];
    let made = cs
        .call_async("createNetworkACL", &acl_params)
        .await
        .unwrap()["networkacl"]
        .clone();
    assert_eq!(
        (made["startport"].as_str(), made["endport"].as_str()),
        (Some("80"), Some("80"))
    );
    assert_eq!(
        (made["protocol"].as_str(), made["number"].as_u64()),
        (Some("tcp"), Some(1))
    );
    assert_eq!(
        (made["aclname"].as_str(), made["traffictype"].as_str()),
        (Some("k8s-acl"), Some("Ingress"))
    );
    // The creator's `reason` is kept and listed (CloudStack 4.12+).
    assert_eq!(made["reason"].as_str(), Some("a0216b82-tcp-80"));
    let listed = cs
        .call(
            "listNetworkACLs",
            &[("networkid", &tier), ("listall", "true")],
        )
        .await
        .unwrap();
    assert_eq!(listed["networkacl"][0], made);
    cs.call_async("deleteNetworkACL", &[("id", made["id"].as_str().unwrap())])
        .await
        .unwrap();
    assert_eq!(
        cs.call("listNetworkACLs", &[("aclid", &acl)])
            .await
            .unwrap(),
        json!({})
    );
    // The shared default lists cannot be changed.
    let plain = cs
        .create_network(json!({"name": "tier-2", "kind": "vpc_tier", "vpc": "vpc-k8s"}))
        .await
        .unwrap();
    let r = cs
        .raw(
            "createNetworkACL",
            &[
                ("protocol", "tcp"),
                ("networkid", &plain),
                ("startport", "80"),
            ],
        )
        .await
        .unwrap();
    let text = assert_cs_error(&r, "createnetworkaclresponse", 431, Some(4350));
    assert_eq!(text, "Default ACL cannot be modified");
}

#[tokio::test]
async fn jobs_can_fail_or_never_end_and_do_nothing_then() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (net, ip, vms) = lb_world(&cs).await;
    sim.cloudstack_fail_jobs(Some("createLoadBalancerRule"), 1, 530);
    let first = cs
        .call(
            "createLoadBalancerRule",
            &rule_params("f-tcp-80", &ip, &net, "tcp"),
        )
        .await
        .unwrap();
    let jobid = first["jobid"].as_str().unwrap();
    match cs.wait_job(jobid).await {
        Err(CsClientError::JobFailed { errorcode: 530, .. }) => {}
        other => panic!("{other:?}"),
    }
    let job = cs
        .call("queryAsyncJobResult", &[("jobid", jobid)])
        .await
        .unwrap();
    assert_eq!(
        (job["jobstatus"].as_u64(), job["jobresultcode"].as_u64()),
        (Some(2), Some(530))
    );
    assert_eq!(job["jobinstancetype"], "LoadBalancerRule");
    assert!(
        job["cmd"]
            .as_str()
            .unwrap()
            .ends_with(".CreateLoadBalancerRuleCmd")
    );
    assert_eq!(
        cs.call("listLoadBalancerRules", &[]).await.unwrap(),
        json!({})
    );
    // The next one works.
    let rule = cs
        .call_async(
            "createLoadBalancerRule",
            &rule_params("f-tcp-80", &ip, &net, "tcp"),
        )
        .await
        .unwrap()["loadbalancer"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.cloudstack_stall_jobs(Some("assignToLoadBalancerRule"), 1);
    let stuck = cs
        .call(
            "assignToLoadBalancerRule",
            &[("id", &rule), ("virtualmachineids", &vms[0])],
        )
        .await
        .unwrap();
    let short = cs.job_deadline(Duration::from_millis(200));
    let stuck = stuck["jobid"].as_str().unwrap();
    assert!(matches!(
        short.wait_job(stuck).await,
        Err(CsClientError::JobTimeout(_))
    ));
    assert_eq!(
        cs.call("queryAsyncJobResult", &[("jobid", stuck)])
            .await
            .unwrap()["jobstatus"],
        0
    );
    assert_eq!(
        cs.call("listLoadBalancerRuleInstances", &[("id", &rule)])
            .await
            .unwrap(),
        json!({})
    );
    assert_eq!(sim.cloudstack_calls("createLoadBalancerRule"), 2);
    assert_eq!(sim.cloudstack_calls("assignToLoadBalancerRule"), 1);
}
