//! Contract tests of the CloudStack provider against cloud-sim's CloudStack API over HTTP.
//! cloud-sim keeps its own wire types and its own signature check, so these compare two
//! independent readings of the API (and of cloudstack-go's signing).

use std::time::Duration;

use cloud_client::cloudstack::{CloudStackClients, CloudStackConfig, JobPolling};
use cloud_client::retry::RetryPolicy;
use cloud_client::{AddressKind, CloudError, ErrorClass, NodeAddress, NodeRef, Secret};
use cloud_sim::{CloudStackClient, CsVmSpec, Sim};
use serde_json::json;

const BY_NAME: &str = "listVirtualMachines?name={name}";
const BY_ID: &str = "listVirtualMachines?id={id}";

/// The provider's configuration for `sim`'s primary account: retries a few milliseconds apart,
/// jobs polled every 10 ms.
fn config(sim: &Sim) -> CloudStackConfig {
    let mut c = CloudStackConfig::new(
        sim.cloudstack_endpoint(),
        Secret::new(sim.cloudstack_api_key()),
        Secret::new(sim.cloudstack_secret_key()),
    );
    c.client.retry = RetryPolicy {
        max_attempts: 4,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
    };
    c.client.jobs = JobPolling {
        initial: Duration::from_millis(10),
        factor: 1.5,
        max: Duration::from_millis(50),
        timeout: Duration::from_secs(5),
    };
    c
}

async fn clients(sim: &Sim, f: impl FnOnce(&mut CloudStackConfig)) -> CloudStackClients {
    let mut c = config(sim);
    f(&mut c);
    CloudStackClients::new(c).await.expect("provider")
}

fn pid(id: &str) -> String {
    format!("external-cloudstack://{id}")
}

fn calls(p: &CloudStackClients, template: &str) -> u64 {
    p.stats().snapshot().calls_to("GET", template)
}

/// An account with keys of our choosing (role `admin` or `user`).
async fn account(sim: &Sim, name: &str, role: &str, keys: (&str, &str)) {
    let base = sim.cloudstack_endpoint().replace("/client/api", "");
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}/_sim/cloudstack/accounts"))
        .json(&json!({"name": name, "role": role, "api_key": keys.0, "secret_key": keys.1}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        201,
        "{}",
        resp.text().await.unwrap()
    );
}

/// No 8 characters in a row of `secret` in `text`.
fn assert_no_run_of(text: &str, secret: &str) {
    for window in secret.as_bytes().windows(8) {
        let run = std::str::from_utf8(window).unwrap();
        assert!(!text.contains(run), "{run:?} of a key in: {text}");
    }
}

async fn vm(cs: &CloudStackClient, spec: CsVmSpec) -> (String, serde_json::Value) {
    let id = cs.create_vm(&spec).await.unwrap();
    let shown = cs.vm(&id).await.unwrap();
    (id, shown)
}

#[tokio::test]
async fn init_metadata_is_upstreams() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.create_offering("CKS Instance (2 vCPU, 2GB)", 2, 2048)
        .await
        .unwrap();
    // A name that contains the Node's is listed by the API's filter, and is not its VM.
    vm(&cs, CsVmSpec::named("worker-10")).await;
    let (id, shown) = vm(
        &cs,
        CsVmSpec::named("worker-1")
            .offering("CKS Instance (2 vCPU, 2GB)")
            .static_nat(),
    )
    .await;
    let p = clients(&sim, |_| {}).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("worker-1"))
        .await
        .unwrap();
    assert_eq!(md.provider_id, pid(&id));
    assert_eq!(md.instance_type, "CKSInstance2vCPU2GB");
    assert_eq!(md.zone.as_deref(), Some("zone-1"));
    assert_eq!(md.region.as_deref(), Some("zone-1"));
    assert_eq!(
        md.addresses,
        [
            NodeAddress::new(AddressKind::InternalIP, shown["ip"].as_str().unwrap()),
            NodeAddress::new(
                AddressKind::ExternalIP,
                shown["public_ip"].as_str().unwrap()
            ),
        ],
        "no Hostname: the API's is the hypervisor's ({})",
        shown["host"]
    );
    assert!(md.additional_labels.is_empty() && md.warnings.is_empty());

    let with_region = clients(&sim, |c| c.region = Some("eu-west".into())).await;
    let md = with_region
        .instances()
        .instance_metadata(&NodeRef::with_provider_id("worker-1", pid(&id)))
        .await
        .unwrap();
    assert_eq!(
        (md.zone.as_deref(), md.region.as_deref()),
        (Some("zone-1"), Some("eu-west"))
    );
}

#[tokio::test]
async fn lookups_go_by_id_once_a_node_has_a_provider_id() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (id, _) = vm(&cs, CsVmSpec::named("worker-1")).await;
    let p = clients(&sim, |_| {}).await;
    let inst = p.instances();
    let by_name = inst
        .instance_metadata(&NodeRef::new("worker-1"))
        .await
        .unwrap();
    assert_eq!(calls(&p, BY_NAME), 1);

    let node = NodeRef::with_provider_id("worker-1", by_name.provider_id.clone());
    let by_id = inst.instance_metadata(&node).await.unwrap();
    assert_eq!(by_id, by_name);
    assert!(inst.instance_exists(&node).await.unwrap());
    assert!(!inst.instance_shutdown(&node).await.unwrap());
    assert_eq!(
        calls(&p, BY_NAME),
        1,
        "no name lookup once the providerID is known"
    );
    // The metadata, then the existence check: the shutdown check that follows reuses its read.
    assert_eq!(calls(&p, BY_ID), 2);
    // A Node renamed under the same providerID is still its VM.
    let renamed = NodeRef::with_provider_id("other", pid(&id));
    assert!(inst.instance_exists(&renamed).await.unwrap());
    assert_eq!(calls(&p, BY_NAME), 1);
    // Every request was signed as the API checks it.
    assert!(sim.request_log().iter().all(|e| e.status == 200));
}

#[tokio::test]
async fn a_name_two_vms_have_is_refused_naming_both() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (a, _) = vm(&cs, CsVmSpec::named("dup")).await;
    let (b, _) = vm(&cs, CsVmSpec::named("dup").zone("zone-2")).await;
    let p = clients(&sim, |_| {}).await;
    for e in [
        p.instances()
            .instance_metadata(&NodeRef::new("dup"))
            .await
            .unwrap_err(),
        p.instances()
            .instance_exists(&NodeRef::new("dup"))
            .await
            .unwrap_err(),
    ] {
        let text = e.to_string();
        assert!(text.contains(&a) && text.contains(&b), "{text}");
        assert!(!e.is_not_found() && !e.is_retryable(), "{e:?}");
    }
    // Either VM by its id is no question; nor is the name within one zone.
    let md = p
        .instances()
        .instance_metadata(&NodeRef::with_provider_id("dup", pid(&b)))
        .await
        .unwrap();
    assert_eq!(md.zone.as_deref(), Some("zone-2"));
    let in_zone = clients(&sim, |c| c.zone = Some("zone-2".into())).await;
    let md = in_zone
        .instances()
        .instance_metadata(&NodeRef::new("dup"))
        .await
        .unwrap();
    assert_eq!(md.provider_id, pid(&b));
    assert!(
        sim.request_log()
            .iter()
            .rfind(|e| e.uri.contains("name=dup"))
            .is_some_and(|e| e
                .uri
                .contains(&format!("zoneid={}", in_zone.zone_id().unwrap()))),
        "the zone's name lookups ask for the zone"
    );
}

#[tokio::test]
async fn stopped_is_shut_down_and_stopping_is_not_yet() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (id, _) = vm(&cs, CsVmSpec::named("worker-1")).await;
    let node = NodeRef::with_provider_id("worker-1", pid(&id));
    for (state, off) in [
        ("Stopped", true),
        ("Stopping", false),
        ("Starting", false),
        ("Error", false),
        ("Running", false),
    ] {
        cs.set_vm_state(&id, state).await.unwrap();
        // A provider of its own per state: the existence check's read answers the shutdown
        // check right after it, as in one pass of lifecycle-controller.
        let p = clients(&sim, |_| {}).await;
        assert!(
            p.instances().instance_exists(&node).await.unwrap(),
            "{state}"
        );
        assert_eq!(
            p.instances().instance_shutdown(&node).await.unwrap(),
            off,
            "{state}"
        );
        assert_eq!(calls(&p, BY_ID), 1, "one read per check");
    }
}

#[tokio::test]
async fn destroyed_expunging_and_not_found_by_its_id_are_gone() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let p = clients(&sim, |_| {}).await;
    let inst = p.instances();
    for state in ["Destroyed", "Expunging"] {
        let (id, _) = vm(&cs, CsVmSpec::named(&format!("n-{state}"))).await;
        cs.set_vm_state(&id, state).await.unwrap();
        let node = NodeRef::with_provider_id("n", pid(&id));
        assert!(!inst.instance_exists(&node).await.unwrap(), "{state}");
        assert!(
            inst.instance_shutdown(&node)
                .await
                .unwrap_err()
                .is_not_found()
        );
        // By name such a VM is nobody's (and a name lookup never says "gone").
        let by_name = NodeRef::new(format!("n-{state}"));
        assert!(
            inst.instance_exists(&by_name)
                .await
                .unwrap_err()
                .is_not_found()
        );
    }
    let (id, _) = vm(&cs, CsVmSpec::named("expunged")).await;
    cs.expunge_vm(&id).await.unwrap();
    let node = NodeRef::with_provider_id("expunged", pid(&id));
    test_eventually(|| async { !inst.instance_exists(&node).await.unwrap() }).await;

    // A user's keys do not see destroyed VMs at all: an empty list by id, gone too.
    account(
        &sim,
        "user1",
        "user",
        ("user1-api-key-0001", "user1-secret-key-0001"),
    )
    .await;
    let (mine, _) = vm(&cs, CsVmSpec::named("mine").account("user1")).await;
    cs.set_vm_state(&mine, "Destroyed").await.unwrap();
    let user = clients(&sim, |c| {
        c.api_key = Secret::new("user1-api-key-0001");
        c.secret_key = Secret::new("user1-secret-key-0001");
    })
    .await;
    let node = NodeRef::with_provider_id("mine", pid(&mine));
    assert!(!user.instances().instance_exists(&node).await.unwrap());
}

/// Polls `f` until true, for at most 10 s.
async fn test_eventually<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_api_error_is_never_gone() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (id, _) = vm(&cs, CsVmSpec::named("worker-1")).await;
    let p = clients(&sim, |_| {}).await;
    let inst = p.instances();
    let node = NodeRef::with_provider_id("worker-1", pid(&id));

    // 431 (a bad parameter) and 531 (permission): refused at once, not retried.
    for code in [431, 531] {
        sim.reset_counters();
        sim.cloudstack_fail_next(Some("listVirtualMachines"), 1, code);
        let e = inst.instance_exists(&node).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::Permanent, "{code}: {e}");
        assert!(
            e.to_string().contains(&format!("CloudStack error {code}")),
            "{e}"
        );
        assert_eq!(sim.cloudstack_calls("listVirtualMachines"), 1, "{code}");
    }
    // An id CloudStack never had is a 431 as well: an error, not a VM gone.
    let never = NodeRef::with_provider_id("x", pid("00000000-0000-4000-8000-000000000000"));
    assert!(inst.instance_exists(&never).await.is_err());

    // 530 once: retried, and the answer is the VM's.
    sim.reset_counters();
    let retries = p.stats().snapshot().retries;
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 1, 530);
    assert!(inst.instance_exists(&node).await.unwrap());
    assert_eq!(sim.cloudstack_calls("listVirtualMachines"), 2);
    assert_eq!(p.stats().snapshot().retries, retries + 1);
    // 530 every time: retryable, after the attempts.
    sim.cloudstack_fail_next(Some("listVirtualMachines"), 10, 530);
    let e = inst.instance_exists(&node).await.unwrap_err();
    assert!(
        matches!(e, CloudError::RetriesExhausted { attempts: 4, .. }),
        "{e}"
    );
    assert!(e.is_retryable());
    sim.faults().clear();

    // Throttled (429): waits as long as the API says, then gets the answer.
    sim.reset_counters();
    sim.set_cloudstack_throttling(Some((1, Duration::from_millis(300))));
    for _ in 0..2 {
        assert!(inst.instance_exists(&node).await.unwrap());
    }
    assert!(
        sim.request_log().iter().any(|e| e.status == 429),
        "throttled at least once"
    );
    sim.set_cloudstack_throttling(None);

    // An unreachable management server (a proxy's 503, no CloudStack body).
    sim.set_cloudstack_unreachable(true);
    let e = inst.instance_exists(&node).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("no CloudStack answer"), "{e}");
    sim.set_cloudstack_unreachable(false);

    // The keys are in no error: not the key in the URL, not the signature.
    for text in [e.to_string(), format!("{e:?}")] {
        assert_no_run_of(&text, &sim.cloudstack_api_key());
        assert!(
            !text.contains("apiKey") && !text.contains("signature="),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_wrong_secret_key_names_the_setting_and_no_key() {
    let sim = Sim::start().await;
    let wrong = "WRONGsecretWRONGsecretWRONGsecret";
    let e = CloudStackClients::new(CloudStackConfig {
        secret_key: Secret::new(wrong),
        ..config(&sim)
    })
    .await
    .unwrap_err();
    assert!(matches!(e, CloudError::InvalidConfig { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("secret-key"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    for shown in [text, format!("{e:?}")] {
        assert_no_run_of(&shown, wrong);
        assert_no_run_of(&shown, &sim.cloudstack_api_key());
        assert_no_run_of(&shown, &sim.cloudstack_secret_key());
    }

    // Unreachable at all: a transport error without the URL.
    let mut c = config(&sim);
    c.api_url = "http://127.0.0.1:9/client/api".into();
    c.client.retry.max_attempts = 1;
    let e = CloudStackClients::new(c).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let text = format!("{e} {e:?}");
    assert!(
        !text.contains("apiKey") && !text.contains("signature"),
        "{text}"
    );
    assert_no_run_of(&text, &sim.cloudstack_api_key());
}

#[tokio::test]
async fn project_id_is_on_every_call() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let project = cs.create_project("team-a", &[]).await.unwrap();
    let (in_project, _) = vm(&cs, CsVmSpec::named("w").project(&project)).await;
    let (in_account, _) = vm(&cs, CsVmSpec::named("w").zone("zone-2")).await;

    for given in [project.clone(), "team-a".into(), project.to_uppercase()] {
        sim.reset_counters();
        let p = clients(&sim, |c| c.project_id = Some(given.clone())).await;
        assert_eq!(p.project_id(), Some(project.as_str()), "{given}");
        let md = p
            .instances()
            .instance_metadata(&NodeRef::new("w"))
            .await
            .unwrap();
        assert_eq!(md.provider_id, pid(&in_project), "{given}");
        let lookups: Vec<_> = sim
            .request_log()
            .into_iter()
            .filter(|e| e.endpoint == "listVirtualMachines")
            .collect();
        assert!(
            lookups
                .iter()
                .all(|e| e.uri.contains(&format!("projectid={project}"))),
            "{lookups:?}"
        );
        assert_eq!(
            sim.cloudstack_calls("listProjects"),
            1,
            "resolved once, at start"
        );
    }
    // Without a project, the account's own VM.
    let own = clients(&sim, |_| {}).await;
    let md = own
        .instances()
        .instance_metadata(&NodeRef::new("w"))
        .await
        .unwrap();
    assert_eq!(md.provider_id, pid(&in_account));

    // A VM outside the project is no VM gone: the wrong project is named.
    let p = clients(&sim, |c| c.project_id = Some(project.clone())).await;
    let e = p
        .instances()
        .instance_exists(&NodeRef::with_provider_id("w", pid(&in_account)))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not in the configured project"),
        "{e}"
    );

    // A project the keys may not use stops the start, naming the setting.
    let e = CloudStackClients::new(CloudStackConfig {
        project_id: Some("team-b".into()),
        ..config(&sim)
    })
    .await
    .unwrap_err();
    assert!(matches!(e, CloudError::InvalidConfig { .. }), "{e}");
    assert!(e.to_string().contains("project-id \"team-b\""), "{e}");
    let e = CloudStackClients::new(CloudStackConfig {
        zone: Some("zone-9".into()),
        ..config(&sim)
    })
    .await
    .unwrap_err();
    assert!(e.to_string().contains("zone \"zone-9\""), "{e}");
}

#[tokio::test]
async fn name_lookups_read_every_page() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    cs.set_config(json!({"default_page_size": 3}))
        .await
        .unwrap();
    for name in ["worker-10", "worker-11", "worker-12", "worker-13"] {
        vm(&cs, CsVmSpec::named(name)).await;
    }
    let (id, _) = vm(&cs, CsVmSpec::named("worker-1")).await;
    let p = clients(&sim, |_| {}).await;
    let md = p
        .instances()
        .instance_metadata(&NodeRef::new("worker-1"))
        .await
        .unwrap();
    assert_eq!(md.provider_id, pid(&id));
    assert_eq!(calls(&p, BY_NAME), 2, "5 matches, pages of 3");
    let second = sim
        .request_log()
        .into_iter()
        .filter(|e| e.uri.contains("name=worker-1"))
        .nth(1)
        .unwrap();
    assert!(
        second.uri.contains("page=2") && second.uri.contains("pagesize=3"),
        "{}",
        second.uri
    );
}

#[tokio::test]
async fn async_jobs_are_polled_until_done_failed_or_the_deadline() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let p = clients(&sim, |c| c.client.jobs.timeout = Duration::from_millis(300)).await;
    let done = cs
        .create_job(json!({"duration_ms": 60, "result": {"loadbalancer": {"id": "lb-1"}}}))
        .await
        .unwrap();
    let result = p
        .api()
        .wait_job(&done, "createLoadBalancerRule")
        .await
        .unwrap();
    assert_eq!(result, json!({"loadbalancer": {"id": "lb-1"}}));
    assert!(p.stats().snapshot().action_polls >= 2);

    let failed = cs
        .create_job(
            json!({"duration_ms": 10, "fail": {"errorcode": 530, "errortext": "no capacity"}}),
        )
        .await
        .unwrap();
    let e = p
        .api()
        .wait_job(&failed, "assignToLoadBalancerRule")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::ActionFailed { id, .. } if *id == failed),
        "{e:?}"
    );
    assert!(e.to_string().contains("no capacity"), "{e}");
    assert!(e.is_retryable(), "530 may pass later: {e}");

    let never = cs.create_job(json!({"never": true})).await.unwrap();
    let e = p.api().wait_job(&never, "x").await.unwrap_err();
    assert!(matches!(e, CloudError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains(&never), "{e}");
}
