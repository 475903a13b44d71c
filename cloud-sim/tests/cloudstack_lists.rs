//! CloudStack lists beyond the VMs' filters: pages as `BaseListCmd` cuts them, a thousand VMs,
//! and the zones, offerings, networks (with and without the Firewall and Lb services),
//! capabilities and management servers a CCM reads.

mod common;

use cloud_sim::{CsClientError, CsVmSpec, Sim};
use common::cloudstack::{assert_cs_error, names};
use serde_json::json;

#[tokio::test]
async fn lists_page_as_cloudstack_does() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_vms(7, "node", &CsVmSpec::default())
        .await
        .unwrap();
    let page = |p: &'static str| {
        let cs = cs.clone();
        async move {
            cs.call("listVirtualMachines", &[("page", p), ("pagesize", "3")])
                .await
                .unwrap()
        }
    };
    assert_eq!(names(&page("1").await), ["node-1", "node-2", "node-3"]);
    assert_eq!(names(&page("3").await), ["node-7"]);
    assert_eq!(page("3").await["count"], 7);
    // Past the end: the count alone.
    assert_eq!(page("4").await, json!({"count": 7}));
    let r = cs
        .raw("listVirtualMachines", &[("pagesize", "3")])
        .await
        .unwrap();
    let text = assert_cs_error(&r, "listvirtualmachinesresponse", 431, Some(9999));
    assert_eq!(
        text,
        "\"page\" parameter is required when \"pagesize\" is specified"
    );
    let r = cs
        .raw("listVirtualMachines", &[("page", "1"), ("pagesize", "501")])
        .await
        .unwrap();
    let text = assert_cs_error(&r, "listvirtualmachinesresponse", 431, Some(9999));
    assert_eq!(
        text,
        "Page size can't exceed max allowed page size value: 500"
    );
    // Without paging, one page of `default.page.size`, and the count of all.
    cs.set_config(json!({"default_page_size": 5}))
        .await
        .unwrap();
    let first = cs.call("listVirtualMachines", &[]).await.unwrap();
    assert_eq!((first["count"].as_u64(), names(&first).len()), (Some(7), 5));
    let all = cs
        .call("listVirtualMachines", &[("pagesize", "-1")])
        .await
        .unwrap();
    assert_eq!(names(&all).len(), 7);
}

#[tokio::test]
async fn a_thousand_vms_in_one_request() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let ids = cs
        .create_vms(1000, "bench", &CsVmSpec::default().static_nat())
        .await
        .unwrap();
    assert_eq!(ids.len(), 1000);
    let second = cs
        .call("listVirtualMachines", &[("page", "2"), ("pagesize", "500")])
        .await
        .unwrap();
    assert_eq!(second["count"], 1000);
    assert_eq!(second["virtualmachine"][499]["name"], "bench-1000");
    assert!(second["virtualmachine"][499]["publicip"].is_string());
    // The default list is one page of 500, as on a real management server.
    let first = cs.call("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(first["virtualmachine"].as_array().unwrap().len(), 500);
}

#[tokio::test]
async fn zones_offerings_networks_projects_and_capabilities() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let offerings = cs.call("listServiceOfferings", &[]).await.unwrap();
    let offering_names: Vec<&str> = offerings["serviceoffering"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(offering_names, ["Small Instance", "Medium Instance"]);
    assert_eq!(offerings["serviceoffering"][0]["cpunumber"], 1);
    cs.create_network(json!({"name": "tier-1", "kind": "vpc_tier", "vpc": "vpc-k8s"}))
        .await
        .unwrap();
    cs.create_network(json!({"name": "shared-1", "kind": "shared", "cidr": "192.168.0.0/24"}))
        .await
        .unwrap();
    let nets = cs.call("listNetworks", &[]).await.unwrap();
    let services = |name: &str| -> Vec<String> {
        let net = nets["network"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap();
        net["service"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(services("default-zone-1").contains(&"Firewall".into()));
    assert!(services("default-zone-1").contains(&"Lb".into()));
    assert!(services("tier-1").contains(&"NetworkACL".into()));
    assert!(!services("tier-1").contains(&"Firewall".into()));
    assert!(!services("shared-1").contains(&"Lb".into()));
    let tier = nets["network"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "tier-1")
        .unwrap();
    assert_eq!(tier["vpcname"], "vpc-k8s");
    assert_eq!(tier["aclname"], "default_allow");
    let lb_only = cs
        .call("listNetworks", &[("supportedservices", "Lb,Firewall")])
        .await
        .unwrap();
    assert_eq!(lb_only["count"], 2);
    let caps = cs.call("listCapabilities", &[]).await.unwrap();
    assert_eq!(caps["capability"]["cloudstackversion"], "4.20.1.0");
    let ms = cs.call("listManagementServersMetrics", &[]).await.unwrap();
    assert_eq!(ms["count"], 1);
    assert_eq!(ms["managementserver"][0]["version"], "4.20.1.0");
    // Root admins only.
    let (_, dev) = cs.create_account("dev", "user").await.unwrap();
    let r = dev.raw("listManagementServersMetrics", &[]).await.unwrap();
    let text = assert_cs_error(&r, "listmanagementserversmetricsresponse", 401, Some(9999));
    assert!(text.contains("'listManagementServersMetrics'"), "{text}");
    let err = cs.call("listZones", &[("id", "nope")]).await.unwrap_err();
    assert!(
        matches!(err, CsClientError::Api { errorcode: 431, .. }),
        "{err}"
    );
}
