//! HCCM's own Robot client against the sim: syself/hrobot-go, the version HCCM requires, built
//! through the Go module proxy (`testenv::ensure_hrobot_check`) and run unchanged against
//! `Sim::robot_endpoint()`. What it parses must be what the sim sent, and its error checks
//! (`models.IsError`, as HCCM calls it) must recognise the sim's errors.

use std::process::Command;

use cloud_sim::Sim;
use serde_json::Value;

/// Runs hrobot-check with `ops` against `sim` as `user`/`password`: one JSON line per op.
async fn hrobot(sim: &Sim, user: &str, password: &str, ops: &[String]) -> Vec<Value> {
    let binary = tokio::task::spawn_blocking(testenv::ensure_hrobot_check)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("building hrobot-check: {e}"));
    let mut cmd = Command::new(binary);
    cmd.args(ops)
        .env("HROBOT_ENDPOINT", sim.robot_endpoint())
        .env("HROBOT_USER", user)
        .env("HROBOT_PASSWORD", password);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("running hrobot-check");
    assert!(
        out.status.success(),
        "hrobot-check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), ops.len(), "{lines:?}");
    lines
}

/// Every field the sim sent comes back from hrobot-go's model with the same value: nothing the
/// client reads is misnamed or mistyped (a type mismatch would have failed its decoding). Fields
/// the model has and the sim did not send come back as Go's zero values, as from the real API.
#[track_caller]
fn assert_parsed_as_sent(parsed: &Value, sent: &Value) {
    if let Err(path) = parsed_as_sent(parsed, sent, String::new()) {
        panic!("{path}: hrobot-go read {parsed}, the sim sent {sent}");
    }
}

fn parsed_as_sent(parsed: &Value, sent: &Value, path: String) -> Result<(), String> {
    match sent {
        Value::Object(fields) => fields
            .iter()
            .try_for_each(|(k, v)| parsed_as_sent(&parsed[k], v, format!("{path}.{k}"))),
        Value::Array(items) => {
            let got = parsed.as_array().ok_or_else(|| path.clone())?;
            if got.len() != items.len() {
                return Err(path);
            }
            got.iter()
                .zip(items)
                .enumerate()
                .try_for_each(|(i, (p, s))| parsed_as_sent(p, s, format!("{path}[{i}]")))
        }
        // `null` (e.g. no linked storage box) decodes into Go's zero value.
        Value::Null => match parsed {
            Value::Null | Value::Bool(false) => Ok(()),
            Value::Number(n) if n.as_f64() == Some(0.0) => Ok(()),
            Value::String(s) if s.is_empty() => Ok(()),
            _ => Err(path),
        },
        _ if parsed == sent => Ok(()),
        _ => Err(path),
    }
}

#[tokio::test]
async fn hrobot_go_reads_servers_and_resets_as_the_sim_sends_them() {
    let sim = Sim::start().await;
    let w = sim.client();
    let a = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let b = w
        .create_robot_server("bm-2", "EX44", "HEL1-DC2")
        .await
        .unwrap();
    w.robot_power_off(b).await.unwrap();
    let ops = [
        "list".to_string(),
        format!("get:{a}"),
        format!("reset:{a}"),
        format!("reset:{b}"),
    ];
    let got = hrobot(&sim, &sim.robot_user(), &sim.robot_password(), &ops).await;
    for line in &got {
        assert!(line.get("error").is_none(), "{line}");
    }

    let list_sent = w
        .robot_raw(
            reqwest::Method::GET,
            "/server",
            Some((&sim.robot_user(), &sim.robot_password())),
        )
        .await
        .unwrap()
        .body;
    let listed = got[0]["result"].as_array().expect("a list");
    assert_eq!(listed.len(), 2, "{listed:?}");
    for (parsed, sent) in listed.iter().zip(list_sent.as_array().unwrap()) {
        assert_parsed_as_sent(parsed, &sent["server"]);
    }
    let numbers: Vec<u64> = listed
        .iter()
        .map(|s| s["server_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [a, b]);

    let detail = sim
        .robot_servers()
        .into_iter()
        .find(|s| s["server"]["server_number"] == a)
        .unwrap();
    assert_parsed_as_sent(&got[1]["result"], &detail["server"]);
    assert_eq!(got[1]["result"]["server_name"], "bm-1");
    assert_eq!(got[1]["result"]["dc"], "FSN1-DC14");

    // HCCM's shutdown rule reads operating_status from ResetGet.
    assert_eq!(got[2]["result"]["server_number"], a);
    assert_eq!(got[2]["result"]["operating_status"], "running");
    assert!(
        got[2]["result"]["type"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(got[3]["result"]["operating_status"], "shut off");
}

#[tokio::test]
async fn hrobot_go_recognises_the_sims_errors_as_hccm_checks_them() {
    let sim = Sim::start().await;
    let w = sim.client();
    let n = w
        .create_robot_server("bm-1", "AX41-NVMe", "FSN1-DC14")
        .await
        .unwrap();
    let missing = n + 1000;

    let got = hrobot(
        &sim,
        &sim.robot_user(),
        &sim.robot_password(),
        &[format!("get:{missing}"), format!("reset:{missing}")],
    )
    .await;
    for line in &got {
        assert_eq!(line["code"], "SERVER_NOT_FOUND", "{line}");
        assert_eq!(line["not_found"], true, "{line}");
    }

    let got = hrobot(&sim, &sim.robot_user(), "wrong", &["list".to_string()]).await;
    assert_eq!(got[0]["code"], "UNAUTHORIZED", "{}", got[0]);
    assert_eq!(got[0]["unauthorized"], true, "{}", got[0]);
    assert!(
        !got[0]["error"].as_str().unwrap().contains("wrong"),
        "the password is not echoed: {}",
        got[0]
    );

    sim.set_robot_rate_limit_remaining("server", 0);
    let got = hrobot(
        &sim,
        &sim.robot_user(),
        &sim.robot_password(),
        &["list".to_string(), format!("get:{n}"), format!("reset:{n}")],
    )
    .await;
    for line in &got[..2] {
        assert_eq!(line["code"], "RATE_LIMIT_EXCEEDED", "{line}");
        assert_eq!(line["rate_limited"], true, "{line}");
    }
    // `reset` is a resource of its own, with its own limit.
    assert_eq!(got[2]["result"]["server_number"], n, "{}", got[2]);
}
