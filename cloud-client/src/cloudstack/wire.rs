//! What the CloudStack API answers, as far as the provider reads it. Every answer is one object
//! `{"<command>response": {...}}`; a list's inner object is `{"count": n, "<item>": [...]}`, or
//! `{}` when nothing matched. Fields the provider does not read are not declared (serde skips
//! them), and every declared one may be missing: CloudStack leaves out what is empty or what the
//! caller may not see (`hostname` for non-admins).

use serde::Deserialize;
use serde_json::Value;

/// A VM of `listVirtualMachines`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct VirtualMachine {
    pub id: String,
    pub name: String,
    pub state: String,
    pub zoneid: String,
    pub zonename: String,
    pub serviceofferingname: String,
    /// The static-NAT public address, when the VM has one.
    pub publicip: Option<String>,
    /// NICs in the order the API lists them (upstream reads the first).
    pub nic: Vec<Nic>,
    /// The project the VM belongs to, if any, and its name.
    pub projectid: Option<String>,
    pub project: Option<String>,
    /// The owning account and its domain.
    pub account: Option<String>,
    pub domain: Option<String>,
}

/// A VM's network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct Nic {
    pub ipaddress: Option<String>,
    pub ip6address: Option<String>,
    pub networkid: String,
    pub isdefault: bool,
}

/// A zone of `listZones`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct Zone {
    pub id: String,
    pub name: String,
}

/// A project of `listProjects`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct Project {
    pub id: String,
    pub name: String,
}

/// `queryAsyncJobResult`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(crate) struct AsyncJob {
    pub jobid: String,
    /// 0 pending, 1 done, 2 failed.
    pub jobstatus: i64,
    pub jobresultcode: i64,
    /// The result object when done, `{"errorcode", "errortext"}` when failed.
    pub jobresult: Option<Value>,
}

/// The inner object of an error answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct ErrorBody {
    pub errorcode: Option<u16>,
    pub cserrorcode: Option<u32>,
    pub errortext: Option<String>,
}

/// The inner object of an answer: the value of its one key (cloudstack-go takes it whatever the
/// key's name). `None` when the answer is not one object of one key.
pub(crate) fn inner(body: &Value) -> Option<&Value> {
    match body {
        Value::Object(m) if m.len() == 1 => m.values().next(),
        _ => None,
    }
}

/// A list answer's items under `key` and its `count` (the number of matches, of which this
/// page is a part). `{}` is the empty list. `None` when the answer is no list.
pub(crate) fn list<'a>(inner: &'a Value, key: &str) -> Option<(u64, &'a [Value])> {
    let m = inner.as_object()?;
    let items = match m.get(key) {
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => return None,
        None => &[],
    };
    let count = match m.get("count") {
        Some(c) => c.as_u64()?,
        None => items.len() as u64,
    };
    Some((count, items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vm_as_cloudstack_go_reads_it() {
        let v = json!({"id": "a", "name": "n", "state": "Running", "cpunumber": 1,
                       "nic": [{"ipaddress": "10.1.0.5", "deviceid": "0", "isdefault": true,
                                "networkid": "net", "vlanid": 3}],
                       "details": {"x": "y"}});
        let vm: VirtualMachine = serde_json::from_value(v).unwrap();
        assert_eq!(vm.nic[0].ipaddress.as_deref(), Some("10.1.0.5"));
        assert_eq!(vm.publicip, None);
    }

    #[test]
    fn lists_count_their_matches_and_empty_is_an_empty_object() {
        let page = json!({"count": 3, "zone": [{"id": "z"}]});
        assert_eq!(list(&page, "zone").map(|(c, i)| (c, i.len())), Some((3, 1)));
        assert_eq!(
            list(&json!({}), "zone").map(|(c, i)| (c, i.len())),
            Some((0, 0))
        );
        assert_eq!(list(&json!({"count": 2}), "zone").unwrap().0, 2);
        assert!(list(&json!({"zone": {}}), "zone").is_none());
        assert!(list(&json!([]), "zone").is_none());
        let body = json!({"listzonesresponse": {"count": 1}});
        assert_eq!(inner(&body), Some(&json!({"count": 1})));
        assert!(inner(&json!({"a": 1, "b": 2})).is_none());
    }
}
