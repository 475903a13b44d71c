//! Helpers of the CloudStack tests.

use cloud_sim::{CloudStackClient, CsResponse, CsVmSpec};
use serde_json::{Value, json};

/// The error answer of `command` as CloudStack serializes it, with the status it came with.
#[track_caller]
pub fn assert_cs_error(resp: &CsResponse, key: &str, errorcode: u16, cs: Option<u32>) -> String {
    assert_eq!(resp.status, errorcode, "{}", resp.body);
    let inner = &resp.body[key];
    assert_eq!(inner["errorcode"], errorcode, "{}", resp.body);
    assert_eq!(inner["uuidList"], json!([]), "{}", resp.body);
    assert_eq!(
        inner.get("cserrorcode").and_then(Value::as_u64),
        cs.map(u64::from),
        "{}",
        resp.body
    );
    assert_eq!(
        resp.body.as_object().map(|o| o.len()),
        Some(1),
        "{}",
        resp.body
    );
    inner["errortext"].as_str().unwrap_or_default().to_owned()
}

pub fn names(list: &Value) -> Vec<String> {
    list["virtualmachine"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The id of the network named `name`.
pub async fn network_id(cs: &CloudStackClient, name: &str) -> String {
    let nets = cs
        .call("listNetworks", &[("listall", "true")])
        .await
        .unwrap();
    nets["network"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no network {name}: {nets}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Associates an address with `network` and waits for it: the address object.
pub async fn associate(cs: &CloudStackClient, params: &[(&str, &str)]) -> Value {
    cs.call_async("associateIpAddress", params).await.unwrap()["ipaddress"].clone()
}

/// The upstream CCM's rule for a Service port, on an address of the default network.
pub async fn lb_world(cs: &CloudStackClient) -> (String, String, Vec<String>) {
    let net = network_id(cs, "default-zone-1").await;
    let ip = associate(cs, &[("networkid", &net)]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let vms = cs
        .create_vms(3, "node", &CsVmSpec::default())
        .await
        .unwrap();
    (net, ip, vms)
}

pub fn rule_params<'a>(
    name: &'a str,
    ip: &'a str,
    net: &'a str,
    protocol: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("name", name),
        ("algorithm", "roundrobin"),
        ("publicipid", ip),
        ("networkid", net),
        ("publicport", "80"),
        ("privateport", "30080"),
        ("protocol", protocol),
        ("openfirewall", "false"),
        ("cidrlist", "0.0.0.0/0"),
    ]
}
