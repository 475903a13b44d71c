//! apache/cloudstack-go v2.19.0, the SDK of the upstream CloudStack CCM, against the simulator:
//! `tests/go/cloudstack-check` (built here with the Go toolchain, through the module proxy the
//! first time) makes the SDK's calls, the helpers the CCM uses included, and prints what the SDK
//! decoded. Every field the simulator sent that the SDK's structs know must come back with the
//! same value (a type mismatch would have failed the decoding), and the SDK's own reading of
//! errors and counts (`count == 0` is how the CCM tells a VM is gone) must be the CCM's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cloud_sim::{CloudStackClient, CsVmSpec, Sim};
use serde_json::Value;

/// Builds cloudstack-check once per test process (Go's build cache makes later builds quick).
fn binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/cloudstack-check");
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cloudstack-check");
            let status = Command::new("go")
                .args(["build", "-mod=readonly", "-buildvcs=false", "-o"])
                .arg(&out)
                .arg(".")
                .current_dir(&src)
                // The checksum database has no entries for github.com/apache modules; go.sum
                // pins their hashes.
                .env("GONOSUMDB", "github.com/apache")
                .status()
                .unwrap_or_else(|e| panic!("running the Go toolchain: {e}"));
            assert!(status.success(), "building cloudstack-check failed");
            out
        })
        .clone()
}

/// Runs cloudstack-check with `ops` against `sim`, signing with `key`/`secret`.
async fn sdk(sim: &Sim, key: &str, secret: &str, ops: &[String]) -> Vec<Value> {
    let binary = tokio::task::spawn_blocking(binary).await.unwrap();
    let mut cmd = Command::new(binary);
    cmd.args(ops)
        .env("CS_API_URL", sim.cloudstack_endpoint())
        .env("CS_API_KEY", key)
        .env("CS_SECRET_KEY", secret);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("running cloudstack-check");
    assert!(
        out.status.success(),
        "cloudstack-check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), ops.len(), "{lines:?}");
    lines
}

async fn sdk_admin(sim: &Sim, ops: &[String]) -> Vec<Value> {
    sdk(
        sim,
        &sim.cloudstack_api_key(),
        &sim.cloudstack_secret_key(),
        ops,
    )
    .await
}

/// Every field of `sent` that the SDK decoded comes back equal. Keys the SDK's struct does not
/// have are not in `parsed` and are skipped; `null` and empty values decode to Go's zero values.
#[track_caller]
fn assert_parsed_as_sent(parsed: &Value, sent: &Value) {
    if let Err(path) = parsed_as_sent(parsed, sent, String::new()) {
        panic!("{path}: the SDK read {parsed}, the sim sent {sent}");
    }
}

fn parsed_as_sent(parsed: &Value, sent: &Value, path: String) -> Result<(), String> {
    match sent {
        Value::Object(fields) => {
            let known = parsed.as_object().ok_or_else(|| path.clone())?;
            for k in fields.keys().filter(|k| !known.contains_key(*k)) {
                eprintln!("not in the SDK's struct: {path}.{k}");
            }
            fields
                .iter()
                .filter(|(k, _)| known.contains_key(k.as_str()))
                .try_for_each(|(k, v)| parsed_as_sent(&parsed[k], v, format!("{path}.{k}")))
        }
        Value::Array(items) => {
            // An empty list decodes to Go's nil slice.
            if items.is_empty() && parsed.is_null() {
                return Ok(());
            }
            let got = parsed.as_array().ok_or_else(|| path.clone())?;
            if got.len() != items.len() {
                return Err(path);
            }
            got.iter()
                .zip(items)
                .enumerate()
                .try_for_each(|(i, (p, s))| parsed_as_sent(p, s, format!("{path}[{i}]")))
        }
        _ if parsed == sent => Ok(()),
        _ => Err(path),
    }
}

fn ops(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// One item of one of the simulator's own lists, as it sent it.
async fn sent(cs: &CloudStackClient, command: &str, key: &str, params: &[(&str, &str)]) -> Value {
    cs.call(command, params).await.unwrap()[key][0].clone()
}

#[tokio::test]
async fn the_sdk_reads_vms_as_the_ccm_does() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let p = cs.create_project("team-a", &[]).await.unwrap();
    let node1 = cs
        .create_vm(&CsVmSpec::named("node-1").static_nat())
        .await
        .unwrap();
    cs.create_vm(&CsVmSpec::named("node-10")).await.unwrap();
    let in_project = cs
        .create_vm(&CsVmSpec::named("node-1").project(&p).state("Stopped"))
        .await
        .unwrap();
    let gone = cs.create_vm(&CsVmSpec::named("gone")).await.unwrap();
    reqwest::Client::new()
        .delete(format!("{}/_sim/cloudstack/vms/{gone}", sim.base_url()))
        .send()
        .await
        .unwrap();
    let unknown = "0c0ffee0-0000-4000-8000-000000000000";
    let lines = sdk_admin(
        &sim,
        &[
            "vm-by-name:node-1".into(),
            format!("vm-by-name:node-1,{p}"),
            format!("vm-by-id:{node1}"),
            format!("vm-by-id:{unknown}"),
            format!("vm-by-id:{gone}"),
            "vm-by-name:absent".into(),
            "list-vms".into(),
            "project-id:team-a".into(),
        ],
    )
    .await;
    // By name: "node-1" also matches "node-10"; the helper picks the exact name.
    let by_name = &lines[0]["result"];
    assert_eq!(lines[0]["count"], 1, "{}", lines[0]);
    assert_eq!(by_name["id"], node1.as_str());
    let vm = sent(
        &cs,
        "listVirtualMachines",
        "virtualmachine",
        &[("id", &node1)],
    )
    .await;
    assert_parsed_as_sent(by_name, &vm);
    for field in [
        "zonename",
        "serviceofferingname",
        "hostname",
        "publicip",
        "state",
    ] {
        assert!(
            by_name[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field}: {by_name}"
        );
    }
    assert_eq!(by_name["nic"][0]["ipaddress"], vm["nic"][0]["ipaddress"]);
    // With the project: the project's VM of the same name.
    assert_eq!(lines[1]["result"]["id"], in_project.as_str());
    assert_eq!(lines[1]["result"]["state"], "Stopped");
    assert_eq!(lines[2]["result"]["id"], node1.as_str());
    // An id CloudStack never had (a 431) and an expunged VM's (an empty list): both count 0,
    // which is the CCM's "instance does not exist".
    for line in [&lines[3], &lines[4], &lines[5]] {
        assert_eq!(line["count"], 0, "{line}");
        assert!(
            line["error"]
                .as_str()
                .unwrap()
                .starts_with("No match found"),
            "{line}"
        );
    }
    assert_eq!(
        lines[6]["count"], 2,
        "admin, listall, no project: accounts' VMs"
    );
    assert_eq!(lines[7]["result"], p.as_str());
}

#[tokio::test]
async fn the_sdk_reads_zones_offerings_networks_projects_capabilities_and_versions() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_project("team-a", &[]).await.unwrap();
    cs.create_network(serde_json::json!({"name": "tier-1", "kind": "vpc_tier"}))
        .await
        .unwrap();
    let lines = sdk_admin(
        &sim,
        &ops(&[
            "zones",
            "offerings",
            "networks",
            "projects",
            "capabilities",
            "ms",
        ]),
    )
    .await;
    let lists = [
        ("listZones", "zone"),
        ("listServiceOfferings", "serviceoffering"),
        ("listNetworks", "network"),
        ("listProjects", "project"),
        ("listManagementServersMetrics", "managementserver"),
    ];
    for ((command, key), line) in lists
        .iter()
        .zip([&lines[0], &lines[1], &lines[2], &lines[3], &lines[5]])
    {
        let params: &[(&str, &str)] = if *command == "listNetworks" || *command == "listProjects" {
            &[("listall", "true")]
        } else {
            &[]
        };
        let mut sent = cs.call(command, params).await.unwrap();
        assert_eq!(line["count"], sent["count"], "{command}: {line}");
        // The metrics' collection time is the time of each read: the SDK's read and this one
        // may fall in different seconds, so it is compared by its shape only.
        if let Some(servers) = sent[*key].as_array_mut() {
            for (i, server) in servers.iter_mut().enumerate() {
                let Some(time) = server.get_mut("collectiontime") else {
                    continue;
                };
                let read = &line["result"][*key][i]["collectiontime"];
                let shape = |v: &Value| v.as_str().map(|t| (t.len(), t.get(10..11) == Some("T")));
                assert_eq!(shape(read), shape(time), "{command}: collectiontime");
                *time = read.clone();
            }
        }
        // The SDK's structs carry the API's names in their json tags.
        assert_parsed_as_sent(&line["result"], &sent);
        let items = |v: &Value| v[*key].as_array().map(Vec::len);
        assert_eq!(items(&line["result"]), items(&sent), "{command}");
        assert!(items(&sent).is_some_and(|n| n > 0), "{command}: {sent}");
    }
    let caps = cs.call("listCapabilities", &[]).await.unwrap();
    assert_parsed_as_sent(&lines[4]["result"]["capability"], &caps["capability"]);
    assert_eq!(
        lines[5]["result"]["managementserver"][0]["version"],
        "4.20.1.0"
    );
}

#[tokio::test]
async fn the_sdk_reports_cloudstack_errors_as_the_ccm_logs_them() {
    let sim = Sim::start().await;
    let wrong = sdk(
        &sim,
        &sim.cloudstack_api_key(),
        "wrong-secret",
        &ops(&["zones"]),
    )
    .await;
    assert_eq!(
        wrong[0]["error"],
        "CloudStack API error 401 (CSExceptionErrorCode: 0): unable to verify user credentials and/or request signature"
    );
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 1, 530);
    let lines = sdk_admin(&sim, &ops(&["vm-by-name:node-1", "vm-by-name:node-1"])).await;
    assert_eq!(
        lines[0]["error"],
        "CloudStack API error 530 (CSExceptionErrorCode: 4250): Internal error executing command, please contact your system administrator"
    );
    // Not "not found": an API error carries count -1 for the CCM.
    assert_eq!(lines[0]["count"], -1);
    assert_eq!(lines[1]["count"], 0);
}

/// The item of a list the simulator sends for `id`.
async fn item(cs: &CloudStackClient, command: &str, key: &str, params: &[(&str, &str)]) -> Value {
    let list = cs.call(command, params).await.unwrap();
    assert_eq!(list["count"], 1, "{command}: {list}");
    list[key][0].clone()
}

fn str_of(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .to_owned()
}

/// The upstream CCM's load-balancer calls, in its order, through the SDK's async client (it
/// polls `queryAsyncJobResult` itself): each answer decodes, and reads back as the simulator
/// lists the object.
#[tokio::test]
async fn the_sdk_drives_a_load_balancer_as_the_ccm_does() {
    // Jobs are done at once, so the SDK's first poll finds them finished (it sleeps a second
    // before the next).
    let sim = Sim::start_with(cloud_sim::SimConfig {
        action_duration: std::time::Duration::ZERO,
        ..Default::default()
    })
    .await;
    let cs = sim.cloudstack_client();
    let nets = cs.call("listNetworks", &[]).await.unwrap();
    let net = str_of(&nets["network"][0], "id");
    let vms = cs
        .create_vms(2, "node", &CsVmSpec::default())
        .await
        .unwrap();
    let tier = cs
        .create_network(serde_json::json!({"name": "tier-1", "kind": "vpc_tier", "acl": "k8s-acl"}))
        .await
        .unwrap();
    let acl = str_of(
        &item(&cs, "listNetworks", "network", &[("id", &tier)]).await,
        "aclid",
    );

    let run = sdk_admin(
        &sim,
        &[format!("network:{net}"), format!("associate:{net}")],
    )
    .await;
    assert_parsed_as_sent(
        &run[0]["result"],
        &item(&cs, "listNetworks", "network", &[("id", &net)]).await,
    );
    assert_eq!(run[0]["count"], 1);
    let ip = str_of(&run[1]["result"], "id");
    let sent_ip = item(
        &cs,
        "listPublicIpAddresses",
        "publicipaddress",
        &[("id", &ip)],
    )
    .await;
    assert_parsed_as_sent(&run[1]["result"], &sent_ip);
    let address = str_of(&sent_ip, "ipaddress");

    let run = sdk_admin(
        &sim,
        &[
            format!("ip:{ip}"),
            format!("ip-by-address:{address}"),
            format!("create-lb:a1b2-tcp-80,{ip},{net},tcp,80,30080"),
        ],
    )
    .await;
    assert_parsed_as_sent(&run[0]["result"], &sent_ip);
    assert_eq!(run[1]["count"], 1);
    let created = &run[2]["result"];
    let rule = str_of(created, "id");
    let sent_rule = item(
        &cs,
        "listLoadBalancerRules",
        "loadbalancerrule",
        &[("id", &rule)],
    )
    .await;
    assert_parsed_as_sent(created, &sent_rule);
    assert_eq!(
        (
            created["publicport"].as_str(),
            created["privateport"].as_str()
        ),
        (Some("80"), Some("30080"))
    );

    let run = sdk_admin(
        &sim,
        &[
            "list-lb:a1b2".into(),
            format!("assign:{rule},{}+{}", vms[0], vms[1]),
            format!("lb-instances:{rule}"),
            format!("fw-create:{ip},tcp,80"),
            format!("fw-list:{ip}"),
            format!("update-lb:{rule},source,tcp-proxy"),
        ],
    )
    .await;
    assert_eq!(run[0]["count"], 1);
    assert_eq!(run[1]["result"]["success"], true, "{}", run[1]);
    assert_eq!(run[2]["count"], 2);
    let fw = str_of(&run[3]["result"], "id");
    let sent_fw = item(&cs, "listFirewallRules", "firewallrule", &[("id", &fw)]).await;
    assert_parsed_as_sent(&run[3]["result"], &sent_fw);
    assert_eq!(run[4]["count"], 1);
    assert_parsed_as_sent(&run[4]["result"]["firewallrule"][0], &sent_fw);
    assert_eq!(
        (
            run[5]["result"]["algorithm"].as_str(),
            run[5]["result"]["protocol"].as_str()
        ),
        (Some("source"), Some("tcp-proxy"))
    );

    let run = sdk_admin(
        &sim,
        &[
            format!("acl-list-by-id:{acl}"),
            format!("acl-create:{acl},{tier},tcp,80"),
            format!("acls:{tier}"),
        ],
    )
    .await;
    assert_eq!(run[0]["result"]["name"], "k8s-acl");
    let acl_rule = str_of(&run[1]["result"], "id");
    let sent_acl = item(&cs, "listNetworkACLs", "networkacl", &[("id", &acl_rule)]).await;
    assert_parsed_as_sent(&run[1]["result"], &sent_acl);
    assert_eq!(run[2]["count"], 1);

    let run = sdk_admin(
        &sim,
        &[
            format!("acl-delete:{acl_rule}"),
            format!("remove:{rule},{}", vms[1]),
            format!("fw-delete:{fw}"),
            format!("delete-lb:{rule}"),
            format!("disassociate:{ip}"),
            "list-lb:a1b2".into(),
            format!("ip:{ip}"),
        ],
    )
    .await;
    for line in &run[..5] {
        assert_eq!(line["result"]["success"], true, "{line}");
    }
    assert_eq!(run[5]["count"], 0);
    // Released: not allocated any more, so not found by id (the SDK's count 0).
    assert_eq!(run[6]["count"], 0, "{}", run[6]);
}

/// A failed job as the SDK reports it: an object `jobresult` is an "Undefined error" carrying
/// CloudStack's error object.
#[tokio::test]
async fn the_sdk_reports_a_failed_job() {
    let sim = Sim::start_with(cloud_sim::SimConfig {
        action_duration: std::time::Duration::ZERO,
        ..Default::default()
    })
    .await;
    let cs = sim.cloudstack_client();
    let net = str_of(
        &cs.call("listNetworks", &[]).await.unwrap()["network"][0],
        "id",
    );
    sim.cloudstack_fail_jobs(Some("associateIpAddress"), 1, 530);
    let run = sdk_admin(
        &sim,
        &[format!("associate:{net}"), format!("associate:{net}")],
    )
    .await;
    let err = run[0]["error"].as_str().unwrap();
    assert!(
        err.starts_with("Undefined error: {\"errorcode\":530,\"errortext\":"),
        "{err}"
    );
    assert!(run[1]["result"]["ipaddress"].is_string(), "{}", run[1]);
}
