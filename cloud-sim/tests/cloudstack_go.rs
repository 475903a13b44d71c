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
        let sent = cs.call(command, params).await.unwrap();
        assert_eq!(line["count"], sent["count"], "{command}: {line}");
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
