//! The CloudStack API over HTTP: signed requests (and refused ones), `listVirtualMachines` with
//! its filters, scopes and pages, the other node-side lists, errors in CloudStack's form.
//! Requests are signed by `CloudStackClient` (cloudstack-go's way) or, where the point is the
//! signature itself, taken byte for byte from what cloudstack-go v2.19.0 sent.

mod common;

use cloud_sim::{CloudStackClient, CsVmSpec, Sim, SimConfig};
use common::cloudstack::{assert_cs_error, names};
use serde_json::{Value, json};

#[tokio::test]
async fn signed_requests_are_accepted_by_get_and_by_post() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    for client in [cs.clone(), cs.using_post()] {
        let zones = client.call("listZones", &[]).await.unwrap();
        assert_eq!(zones["count"], 2);
        assert_eq!(zones["zone"][0]["name"], "zone-1");
        assert_eq!(zones["zone"][1]["name"], "zone-2");
    }
    // Spaces, `*`, `+`, `/`, `&`, `=` and non-ASCII in a value survive both encodings.
    cs.create_vm(&CsVmSpec::named("odd name*+/&=é"))
        .await
        .unwrap();
    for client in [cs.clone(), cs.using_post()] {
        let found = client
            .call("listVirtualMachines", &[("name", "odd name*+/&=é")])
            .await
            .unwrap();
        assert_eq!(names(&found), ["odd name*+/&=é"]);
    }
    assert_eq!(sim.cloudstack_calls("listZones"), 2);
    assert_eq!(sim.cloudstack_calls("listVirtualMachines"), 2);
    assert_eq!(sim.requests("CLOUDSTACK", "listZones"), 2);
}

/// The request cloudstack-go v2.19.0 built for these keys and parameters (its `EncodeValues`,
/// HMAC-SHA1 and `QueryEscape`d signature), sent as it was: the verifier agrees with the SDK,
/// not only with our own client.
#[tokio::test]
async fn a_request_signed_by_cloudstack_go_is_accepted() {
    let sim = Sim::start_with(SimConfig {
        cloudstack_api_key: "cloudsim-key".into(),
        cloudstack_secret_key: "cloudsim-secret".into(),
        ..Default::default()
    })
    .await;
    let query = "apiKey=cloudsim-key&command=listVirtualMachines&expires=2030-01-02T03%3A04%3A05Z\
                 &listall=true&name=node%201*%2B%2F%26%3D%C3%A9&projectid=-1&response=json\
                 &signatureversion=3&signature=ES6W4hs9Isaq1K6IJg9XeOXeBtI%3D";
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}?{query}", sim.cloudstack_endpoint());
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // Nothing matched: CloudStack answers an empty object, without `count`.
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"listvirtualmachinesresponse": {}}));
    // One character of the signature changed: refused.
    let bad = url.replace("ES6W4hs9", "ES6W4hs8");
    let resp = http.get(&bad).send().await.unwrap();
    assert_eq!(resp.status(), 401);
}

#[tokio::test]
async fn refused_requests_answer_401_in_cloudstack_form() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let text = "unable to verify user credentials and/or request signature";
    let wrong_secret = cs.with_keys(&sim.cloudstack_api_key(), "not-the-secret");
    let r = wrong_secret.raw("listZones", &[]).await.unwrap();
    assert_eq!(assert_cs_error(&r, "listzonesresponse", 401, None), text);
    let unknown_key = cs.with_keys("no-such-key", &sim.cloudstack_secret_key());
    let r = unknown_key.raw("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(
        assert_cs_error(&r, "listvirtualmachinesresponse", 401, None),
        text
    );
    // Signature version 3 with an `expires` in the past.
    let r = cs
        .raw("listZones", &[("expires", "2020-01-01T00:00:00Z")])
        .await
        .unwrap();
    assert_eq!(assert_cs_error(&r, "listzonesresponse", 401, None), text);
    // A command that does not exist (names are case-sensitive): 401 under `errorresponse`.
    for command in ["listEverything", "listzones"] {
        let r = cs.raw(command, &[]).await.unwrap();
        assert_eq!(assert_cs_error(&r, "errorresponse", 401, None), text);
    }
    // No signature at all.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!(
        "{}?command=listZones&response=json&apiKey={}",
        sim.cloudstack_endpoint(),
        sim.cloudstack_api_key()
    );
    assert_eq!(http.get(url).send().await.unwrap().status(), 401);
    // cloudstack-go leaves `~` unescaped where the server's encoder writes `%7E`: a real
    // management server refuses such a request, and so does the simulator.
    let r = cs
        .raw("listVirtualMachines", &[("name", "a~b")])
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    // A disabled account's keys stop working.
    let (account, user) = cs.create_account("ops", "user").await.unwrap();
    assert!(user.call("listZones", &[]).await.is_ok());
    cs.set_account_enabled(&account, false).await.unwrap();
    assert_eq!(user.raw("listZones", &[]).await.unwrap().status, 401);
    // Refused requests are counted too.
    assert_eq!(sim.cloudstack_calls("listZones"), 5);
}

#[tokio::test]
async fn a_vm_shows_every_field_the_ccm_reads() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let id = cs
        .create_vm(
            &CsVmSpec::named("node-1")
                .offering("Medium Instance")
                .static_nat(),
        )
        .await
        .unwrap();
    let public_ip = cs.vm(&id).await.unwrap()["public_ip"]
        .as_str()
        .unwrap()
        .to_owned();
    let list = cs
        .call("listVirtualMachines", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(list["count"], 1);
    let vm = &list["virtualmachine"][0];
    assert_eq!(vm["id"], id);
    assert_eq!(vm["name"], "node-1");
    assert_eq!(vm["displayname"], "node-1");
    assert_eq!(vm["state"], "Running");
    assert_eq!(vm["zonename"], "zone-1");
    assert_eq!(vm["serviceofferingname"], "Medium Instance");
    assert_eq!(vm["cpunumber"], 1);
    assert_eq!(vm["memory"], 1024);
    assert_eq!(vm["account"], "admin");
    assert_eq!(vm["domain"], "ROOT");
    assert!(vm.get("projectid").is_none());
    assert_eq!(vm["publicip"], public_ip.as_str());
    assert!(vm["publicipid"].as_str().is_some_and(|s| s.len() == 36));
    // The admin caller sees the hypervisor host (upstream's Hostname address).
    assert!(vm["hostname"].as_str().unwrap().starts_with("zone-1-host-"));
    let nic = &vm["nic"][0];
    assert_eq!(nic["isdefault"], true);
    assert_eq!(nic["deviceid"], "0");
    assert!(nic["ipaddress"].as_str().unwrap().starts_with("10.1."));
    assert_eq!(nic["netmask"], "255.255.0.0");
    let networks = cs
        .call(
            "listNetworks",
            &[("id", nic["networkid"].as_str().unwrap())],
        )
        .await
        .unwrap();
    assert_eq!(networks["network"][0]["name"], "default-zone-1");
    let zones = cs.call("listZones", &[("name", "zone-1")]).await.unwrap();
    assert_eq!(vm["zoneid"], zones["zone"][0]["id"]);
    // A user account sees no host; a VM without static NAT has no public address.
    let (_, user) = cs.create_account("dev", "user").await.unwrap();
    cs.create_vm(&CsVmSpec::named("dev-1").account("dev"))
        .await
        .unwrap();
    let mine = user.call("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(names(&mine), ["dev-1"]);
    let vm = &mine["virtualmachine"][0];
    assert!(vm.get("hostname").is_none() && vm.get("hostid").is_none());
    assert!(vm.get("publicip").is_none());
    assert_eq!(vm["account"], "dev");
}

#[tokio::test]
async fn name_is_a_substring_match_and_id_an_exact_one() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let mut ids = Vec::new();
    for name in ["node-1", "node-10", "xnode-1", "other"] {
        ids.push(cs.create_vm(&CsVmSpec::named(name)).await.unwrap());
    }
    let found = cs
        .call("listVirtualMachines", &[("name", "node-1")])
        .await
        .unwrap();
    assert_eq!(names(&found), ["node-1", "node-10", "xnode-1"]);
    assert_eq!(found["count"], 3);
    let found = cs
        .call("listVirtualMachines", &[("name", "NODE-10")])
        .await
        .unwrap();
    assert_eq!(names(&found), ["node-10"]);
    let found = cs
        .call("listVirtualMachines", &[("id", &ids[0])])
        .await
        .unwrap();
    assert_eq!(names(&found), ["node-1"]);
    let found = cs
        .call("listVirtualMachines", &[("name", "absent")])
        .await
        .unwrap();
    assert_eq!(found, json!({}));
    let zone2 = cs.call("listZones", &[("name", "zone-2")]).await.unwrap()["zone"][0]["id"].clone();
    cs.create_vm(&CsVmSpec::named("far").zone("zone-2"))
        .await
        .unwrap();
    let found = cs
        .call(
            "listVirtualMachines",
            &[("zoneid", zone2.as_str().unwrap())],
        )
        .await
        .unwrap();
    assert_eq!(names(&found), ["far"]);
}

#[tokio::test]
async fn an_unknown_id_is_431_and_an_expunged_one_an_empty_list() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let unknown = "0c0ffee0-0000-4000-8000-000000000000";
    let r = cs
        .raw("listVirtualMachines", &[("id", unknown)])
        .await
        .unwrap();
    let text = assert_cs_error(&r, "listvirtualmachinesresponse", 431, Some(9999));
    assert_eq!(
        text,
        format!(
            "Unable to execute API command listvirtualmachines due to invalid value. Invalid \
             parameter id value={unknown} due to incorrect long value format, or entity does not \
             exist or due to incorrect parameter annotation for the field in api cmd class."
        )
    );
    let err = cs
        .call("listVirtualMachines", &[("id", "garbage")])
        .await
        .unwrap_err();
    assert_eq!(err.errorcode(), Some(431));
    let id = cs.create_vm(&CsVmSpec::named("gone")).await.unwrap();
    let r = reqwest::Client::new()
        .delete(format!("{}/_sim/cloudstack/vms/{id}", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let list = cs
        .call("listVirtualMachines", &[("id", &id)])
        .await
        .unwrap();
    assert_eq!(list, json!({}));
}

#[tokio::test]
async fn equal_names_in_two_projects_and_the_scopes_of_a_list() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (dev_id, dev) = cs.create_account("dev", "user").await.unwrap();
    let a = cs.create_project("team-a", &[&dev_id]).await.unwrap();
    let b = cs.create_project("team-b", &[]).await.unwrap();
    let in_a = cs
        .create_vm(&CsVmSpec::named("worker").project(&a))
        .await
        .unwrap();
    let in_b = cs
        .create_vm(&CsVmSpec::named("worker").project("team-b"))
        .await
        .unwrap();
    cs.create_vm(&CsVmSpec::named("worker").account("dev"))
        .await
        .unwrap();
    cs.create_vm(&CsVmSpec::named("admin-vm")).await.unwrap();
    assert_ne!(in_a, in_b);

    let list = |client: CloudStackClient, params: Vec<(&'static str, String)>| async move {
        let p: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        names(&client.call("listVirtualMachines", &p).await.unwrap())
    };
    let worker = || ("name", "worker".to_owned());
    // One project: its VM, naming the project and no account.
    let one = cs
        .call(
            "listVirtualMachines",
            &[("name", "worker"), ("projectid", &a)],
        )
        .await
        .unwrap();
    assert_eq!(one["count"], 1);
    assert_eq!(one["virtualmachine"][0]["id"], in_a.as_str());
    assert_eq!(one["virtualmachine"][0]["project"], "team-a");
    assert!(one["virtualmachine"][0].get("account").is_none());
    // Every project: both, and the caller must tell them apart.
    assert_eq!(
        list(cs.clone(), vec![worker(), ("projectid", "-1".into())]).await,
        ["worker", "worker"]
    );
    // No project: accounts' VMs only; the admin's own, or with listall every account's.
    assert_eq!(list(cs.clone(), vec![]).await, ["admin-vm"]);
    assert_eq!(
        list(cs.clone(), vec![worker(), ("listall", "true".into())]).await,
        ["worker"]
    );
    // By id the project does not matter.
    assert_eq!(
        list(cs.clone(), vec![("id", in_b.clone())]).await,
        ["worker"]
    );
    // A user: its own VMs, the projects it belongs to, and no other.
    assert_eq!(
        list(dev.clone(), vec![("listall", "true".into())]).await,
        ["worker"]
    );
    assert_eq!(
        list(dev.clone(), vec![("projectid", "-1".into())]).await,
        ["worker"]
    );
    let r = dev
        .raw("listVirtualMachines", &[("projectid", &b)])
        .await
        .unwrap();
    assert_cs_error(&r, "listvirtualmachinesresponse", 531, Some(4365));
    assert_eq!(
        list(dev.clone(), vec![("id", in_b.clone())]).await,
        Vec::<String>::new()
    );
    let projects = dev.call("listProjects", &[]).await.unwrap();
    assert_eq!(projects["count"], 1);
    assert_eq!(projects["project"][0]["name"], "team-a");
    let r = cs
        .raw(
            "listVirtualMachines",
            &[("projectid", "0c0ffee0-0000-4000-8000-000000000000")],
        )
        .await
        .unwrap();
    assert_cs_error(&r, "listvirtualmachinesresponse", 431, Some(9999));
}

#[tokio::test]
async fn every_state_and_who_sees_destroyed_vms() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let (_, dev) = cs.create_account("dev", "user").await.unwrap();
    let states = [
        "Running",
        "Stopped",
        "Starting",
        "Stopping",
        "Destroyed",
        "Expunging",
        "Error",
    ];
    for state in states {
        let id = cs
            .create_vm(&CsVmSpec::named(&state.to_lowercase()).account("dev"))
            .await
            .unwrap();
        cs.set_vm_state(&id, state).await.unwrap();
    }
    let all = cs
        .call("listVirtualMachines", &[("listall", "true")])
        .await
        .unwrap();
    let seen: Vec<&str> = all["virtualmachine"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["state"].as_str().unwrap())
        .collect();
    assert_eq!(seen, states);
    // The host is there while the VM is on one.
    for vm in all["virtualmachine"].as_array().unwrap() {
        let on_host = ["Running", "Starting", "Stopping"].contains(&vm["state"].as_str().unwrap());
        assert_eq!(vm.get("hostname").is_some(), on_host, "{vm}");
    }
    let mine = dev.call("listVirtualMachines", &[]).await.unwrap();
    assert_eq!(
        mine["count"], 5,
        "users do not see Destroyed and Expunging VMs"
    );
    let present = cs
        .call(
            "listVirtualMachines",
            &[("listall", "true"), ("state", "Present")],
        )
        .await
        .unwrap();
    assert_eq!(present["count"], 5);
    cs.set_config(json!({"allow_user_view_destroyed_vm": true}))
        .await
        .unwrap();
    assert_eq!(
        dev.call("listVirtualMachines", &[]).await.unwrap()["count"],
        7
    );
}

#[tokio::test]
async fn transitional_states_settle_after_the_action_duration() {
    let sim = Sim::start().await;
    let cs = sim.cloudstack_client();
    let id = cs.create_vm(&CsVmSpec::named("node-1")).await.unwrap();
    assert_eq!(cs.stop_vm(&id).await.unwrap()["state"], "Stopping");
    cs.wait_vm_state(&id, "Stopped").await.unwrap();
    let vm = &cs
        .call("listVirtualMachines", &[("id", &id)])
        .await
        .unwrap()["virtualmachine"][0];
    assert_eq!(vm["state"], "Stopped");
    assert!(vm.get("hostname").is_none());
    assert_eq!(cs.start_vm(&id).await.unwrap()["state"], "Starting");
    cs.wait_vm_state(&id, "Running").await.unwrap();
    assert_eq!(cs.expunge_vm(&id).await.unwrap()["state"], "Expunging");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cs.vm(&id).await.unwrap()["expunged"] != true {
        assert!(std::time::Instant::now() < deadline, "never expunged");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        cs.call("listVirtualMachines", &[("id", &id)])
            .await
            .unwrap(),
        json!({})
    );
}
