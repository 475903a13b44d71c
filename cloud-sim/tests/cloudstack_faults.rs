//! The CloudStack side's faults, counters and switches, and its async jobs: injected errors in
//! CloudStack's form, fields left out, throttling, an unreachable management server, jobs that
//! finish, fail or never end; the request log without keys; the world in the state file.

use std::time::{Duration, Instant};

use cloud_sim::{CsClientError, CsVmSpec, FaultKind, FaultRule, Sim, SimConfig};
use serde_json::{Value, json};

#[tokio::test]
async fn injected_errors_answer_in_cloudstack_form_and_are_counted() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_vm(&CsVmSpec::named("node-1")).await.unwrap();
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 1, 530);
    let r = cs.raw("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(r.status, 530);
    assert_eq!(
        r.body,
        json!({"listvirtualmachinesresponse": {
            "uuidList": [],
            "errorcode": 530,
            "cserrorcode": 4250,
            "errortext": "Internal error executing command, please contact your system administrator",
        }})
    );
    // Used up: the next one answers.
    assert_eq!(
        cs.call("listVirtualMachines", &[]).await.unwrap()["count"],
        1
    );
    // 431 and 531, and a rule for every command.
    sim.cloudstack_fail_next(Some("listZones"), 1, 431);
    let err = cs.call("listZones", &[]).await.unwrap_err();
    assert!(
        matches!(
            err,
            CsClientError::Api {
                status: 431,
                errorcode: 431,
                cserrorcode: Some(4350),
                ..
            }
        ),
        "{err}"
    );
    sim.cloudstack_fail_next(None, 2, 531);
    for command in ["listNetworks", "listProjects"] {
        let err = cs.call(command, &[]).await.unwrap_err();
        assert_eq!(err.errorcode(), Some(531), "{err}");
    }
    // A rule with a text and a cserrorcode of its own, through the generic fault API.
    sim.faults().add(FaultRule {
        endpoint: Some("CLOUDSTACK listCapabilities".into()),
        count: Some(1),
        probability: 1.0,
        every: None,
        kind: FaultKind::Error {
            status: Some(530),
            code: "4380".into(),
            message: Some("Resource [Host:3] is unreachable".into()),
        },
    });
    let r = cs.raw("listCapabilities", &[]).await.unwrap();
    assert_eq!(r.body["listcapabilitiesresponse"]["cserrorcode"], 4380);
    assert_eq!(
        r.body["listcapabilitiesresponse"]["errortext"],
        "Resource [Host:3] is unreachable"
    );
    // The harness's own calls pass.
    sim.cloudstack_fail_next(Some("listZones"), 1, 530);
    assert!(cs.unfaulted().call("listZones", &[]).await.is_ok());
    assert!(cs.call("listZones", &[]).await.is_err());
    // Every request counts, failed or not; the Hetzner counters are apart.
    assert_eq!(sim.cloudstack_calls("listVirtualMachines"), 2);
    assert_eq!(sim.cloudstack_calls("listZones"), 3);
    assert_eq!(sim.cloudstack_total_calls(), 8);
    assert_eq!(sim.requests("GET", "/servers"), 0);
    sim.reset_counters();
    assert_eq!(sim.cloudstack_total_calls(), 0);
}

#[tokio::test]
async fn fields_and_items_can_go_missing() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_vms(40, "node", &CsVmSpec::default().static_nat())
        .await
        .unwrap();
    sim.faults().omit_field(
        Some("CLOUDSTACK listVirtualMachines"),
        "virtualmachine.publicip",
        false,
    );
    let list = cs.call("listVirtualMachines", &[]).await.unwrap();
    assert!(
        list["virtualmachine"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v.get("publicip").is_none())
    );
    assert!(list["virtualmachine"][0]["publicipid"].is_string());
    sim.faults().clear();
    sim.faults()
        .omit_items(Some("CLOUDSTACK listVirtualMachines"), 0.5);
    let thinned = cs.call("listVirtualMachines", &[]).await.unwrap();
    let shown = thinned["virtualmachine"].as_array().unwrap().len();
    assert!((5..35).contains(&shown), "{shown}");
    // The count still says what exists, as a lagging list would.
    assert_eq!(thinned["count"], 40);
}

#[tokio::test]
async fn throttling_answers_429_per_account() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (_, other) = cs.create_account("other", "user").await.unwrap();
    sim.set_cloudstack_throttling(Some((3, Duration::from_secs(60))));
    for _ in 0..3 {
        cs.call("listZones", &[]).await.unwrap();
    }
    let r = cs.raw("listZones", &[]).await.unwrap();
    assert_eq!(r.status, 429);
    let inner = &r.body["listzonesresponse"];
    assert_eq!(inner["errorcode"], 429);
    let text = inner["errortext"].as_str().unwrap();
    assert!(
        text.starts_with(
            "The given user has reached his/her account api limit, please retry after ["
        ),
        "{text}"
    );
    // Another account has its own window; listCapabilities reports the limit.
    let caps = other.call("listCapabilities", &[]).await.unwrap();
    assert_eq!(caps["capability"]["apilimitmax"], 3);
    assert_eq!(caps["capability"]["apilimitinterval"], 60);
    sim.set_cloudstack_throttling(None);
    cs.call("listZones", &[]).await.unwrap();
    // A short window lets the account in again once it ends.
    cs.set_config(json!({"throttling": {"max": 1, "interval_ms": 50}}))
        .await
        .unwrap();
    cs.call("listZones", &[]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match cs.call("listZones", &[]).await {
            Ok(_) => break,
            Err(e) => assert_eq!(e.errorcode(), Some(429), "{e}"),
        }
        assert!(Instant::now() < deadline, "the window never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cs.set_config(json!({"throttling": null})).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_management_server_answers_503_without_a_cloudstack_body() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    sim.set_cloudstack_unreachable(true);
    let r = cs.raw("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(r.status, 503);
    assert!(r.body.is_string(), "{}", r.body);
    assert!(matches!(
        cs.call("listVirtualMachines", &[]).await,
        Err(CsClientError::Unexpected(_))
    ));
    // World building still works; the Hetzner API is untouched.
    cs.create_vm(&CsVmSpec::named("node-1")).await.unwrap();
    assert_eq!(
        sim.client()
            .raw(reqwest::Method::GET, "/v1/servers", None)
            .await
            .unwrap()
            .status,
        200
    );
    cs.set_config(json!({"unreachable": false})).await.unwrap();
    assert_eq!(
        cs.call("listVirtualMachines", &[]).await.unwrap()["count"],
        1
    );
}

#[tokio::test]
async fn jobs_are_pending_then_done_or_failed_or_never_end() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let done = cs
        .create_job(json!({"duration_ms": 0, "result": {"loadbalancer": {"id": "x"}}}))
        .await
        .unwrap();
    let job = cs
        .call("queryAsyncJobResult", &[("jobid", &done)])
        .await
        .unwrap();
    assert_eq!(job["jobstatus"], 1);
    assert_eq!(job["jobresultcode"], 0);
    assert_eq!(job["jobresulttype"], "object");
    assert_eq!(job["jobresult"], json!({"loadbalancer": {"id": "x"}}));
    assert_eq!(job["jobid"], done.as_str());
    assert_eq!(job["account"], "admin");
    assert!(job["created"].as_str().unwrap().ends_with("+0000"));
    let slow = cs.create_job(json!({"duration_ms": 200})).await.unwrap();
    let job = cs
        .call("queryAsyncJobResult", &[("jobid", &slow)])
        .await
        .unwrap();
    assert_eq!(
        (job["jobstatus"].as_u64(), job.get("jobresult")),
        (Some(0), None)
    );
    assert_eq!(cs.wait_job(&slow).await.unwrap(), json!({"success": true}));
    let failed = cs
        .create_job(json!({"fail": {"errorcode": 530, "errortext": "Failed to apply rules"}}))
        .await
        .unwrap();
    match cs.wait_job(&failed).await {
        Err(CsClientError::JobFailed {
            errorcode: 530,
            errortext,
            ..
        }) => {
            assert_eq!(errortext, "Failed to apply rules")
        }
        other => panic!("{other:?}"),
    }
    let job = cs
        .call("queryAsyncJobResult", &[("jobid", &failed)])
        .await
        .unwrap();
    assert_eq!(
        (job["jobstatus"].as_u64(), job["jobresultcode"].as_u64()),
        (Some(2), Some(530))
    );
    assert_eq!(
        job["jobresult"],
        json!({"errorcode": 530, "errortext": "Failed to apply rules"})
    );
    let stuck = cs.create_job(json!({"never": true})).await.unwrap();
    let short = cs.job_deadline(Duration::from_millis(100));
    assert!(matches!(
        short.wait_job(&stuck).await,
        Err(CsClientError::JobTimeout(_))
    ));
    // Unknown job ids are unknown to the API layer; other users' jobs are not theirs.
    let err = cs
        .call(
            "queryAsyncJobResult",
            &[("jobid", "0c0ffee0-0000-4000-8000-000000000000")],
        )
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(431));
    let (_, dev) = cs.create_account("dev", "user").await.unwrap();
    let err = dev
        .call("queryAsyncJobResult", &[("jobid", &done)])
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(531));
    let own = cs
        .create_job(json!({"account": "dev", "duration_ms": 0}))
        .await
        .unwrap();
    assert_eq!(dev.wait_job(&own).await.unwrap(), json!({"success": true}));
}

#[tokio::test]
async fn the_request_log_holds_no_keys() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.call("listZones", &[("name", "zone-1")]).await.unwrap();
    let log = sim.request_log();
    let entry = log.last().unwrap();
    assert_eq!(
        (entry.method.as_str(), entry.endpoint.as_str(), entry.status),
        ("CLOUDSTACK", "listZones", 200)
    );
    assert!(entry.uri.starts_with("/client/api?"), "{}", entry.uri);
    assert!(
        entry.uri.contains("apiKey=***") && entry.uri.contains("signature=***"),
        "{}",
        entry.uri
    );
    assert!(!entry.uri.contains(&sim.cloudstack_api_key()[..12]));
    assert!(entry.uri.contains("name=zone-1"));
}

#[tokio::test]
async fn the_cloudstack_world_survives_a_restart_through_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || SimConfig {
        state_file: Some(dir.path().join("world.json")),
        ..Default::default()
    };
    let sim = Sim::start_with(cfg()).await;
    let cs = sim.cloudstack_client();
    let p = cs.create_project("team-a", &[]).await.unwrap();
    let id = cs
        .create_vm(&CsVmSpec::named("node-1").project(&p).static_nat())
        .await
        .unwrap();
    sim.shutdown().await;
    let sim = Sim::start_with(cfg()).await;
    let cs = sim.cloudstack_client();
    let list = cs
        .call("listVirtualMachines", &[("id", &id), ("projectid", &p)])
        .await
        .unwrap();
    let vm: &Value = &list["virtualmachine"][0];
    assert_eq!(vm["name"], "node-1");
    assert!(vm["publicip"].is_string());
    // Ids made after the restart do not collide with the kept ones.
    let other = cs.create_vm(&CsVmSpec::named("node-2")).await.unwrap();
    assert_ne!(other, id);
}
