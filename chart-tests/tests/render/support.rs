//! What several test modules read from rendered objects: a controller's Deployment, its pod spec,
//! container, variables, args and token source, which components are deployed, the rolling update
//! a hostNetwork Deployment gets by default; and the line of helm's schema error that matters.

use std::collections::BTreeSet;

use chart_tests::{component, find, of_kind};
use serde_json::{Value, json};

/// The `- at '/path': why` line of helm's schema error.
pub fn schema_line(err: &str) -> &str {
    err.lines()
        .find(|l| l.trim_start().starts_with("- at"))
        .unwrap_or(err)
        .trim()
}

pub fn container(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]["containers"][0]
}

pub fn env<'a>(deploy: &'a Value, var: &str) -> Option<&'a Value> {
    container(deploy)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == var)
}

/// The Secret and key the controller's token comes from, whichever way it is passed: the
/// `HCLOUD_TOKEN` variable's `secretKeyRef`, or the Secret volume `HCLOUD_TOKEN_FILE` lies in.
pub fn token_source(deploy: &Value) -> Value {
    if let Some(e) = env(deploy, "HCLOUD_TOKEN") {
        return e["valueFrom"]["secretKeyRef"].clone();
    }
    let file =
        env(deploy, "HCLOUD_TOKEN_FILE").expect("HCLOUD_TOKEN or HCLOUD_TOKEN_FILE")["value"]
            .as_str()
            .unwrap()
            .to_owned();
    let (dir, name) = file.rsplit_once('/').unwrap();
    let mount = container(deploy)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    assert_eq!(mount["readOnly"], true);
    let volume = pod_spec(deploy)["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = &volume["secret"];
    let item = secret["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"] == name)
        .unwrap_or_else(|| panic!("no item {name} in {volume}"));
    json!({"name": secret["secretName"], "key": item["key"]})
}

pub fn args(deploy: &Value) -> Vec<String> {
    container(deploy)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

pub fn pod_spec(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]
}

pub fn deployment<'a>(objects: &'a [Value], controller: &str) -> &'a Value {
    find(
        objects,
        "Deployment",
        &format!("cloud-controllers-{controller}"),
    )
}

/// The components that have a Deployment.
pub fn deployed(objects: &[Value]) -> BTreeSet<String> {
    of_kind(objects, "Deployment")
        .filter_map(|d| component(d).map(str::to_owned))
        .collect()
}

/// The rolling update a hostNetwork Deployment gets unless a strategy is given.
pub fn no_surge() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
}
