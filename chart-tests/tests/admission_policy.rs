//! The chart's ValidatingAdmissionPolicy (templates/validating-admission-policy.yaml), rendered
//! with the defaults and installed on a real kube-apiserver, held to the service-controller's own
//! bad-input catalogue and accepted values (`test_support::catalogues::bad_input`, which
//! `service-controller/tests/bad_input.rs` runs against the controller with no policy):
//!
//! - every catalogue case decided by the Service alone is refused, naming the annotation, quoting
//!   the value and saying what is accepted, as the controller's Warning does; the cases that need
//!   the cloud or the controller's configuration are admitted (the controller refuses them);
//! - every accepted value of every annotation, and every Service shape of the e2e suites, is
//!   admitted; so are Services the controller does not serve (not LoadBalancer, another class);
//! - on UPDATE only changed annotations are checked;
//! - mutated values: the policy never refuses one the controller's parser accepts, and refuses
//!   what it refuses except where it is knowingly looser (fractional or sub-second duration forms,
//!   label-selector lengths).
//!
//! Plus render-only checks: a rule for every annotation the parser checks, the values that switch
//! the policy off or name the load-balancer class.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chart_tests::{Render, apply, kind, name};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::{Value, json};
use test_support::catalogues::bad_input::{
    ACCEPTED, Admission, BOOL_EXPECTED, CASES, DURATION_EXPECTED, PREFIX, Ports, VALID_SERVICES,
    annotations, checked_annotations, parse_error,
};

const VAP: &str = "ValidatingAdmissionPolicy";
const BINDING: &str = "ValidatingAdmissionPolicyBinding";
/// The policy's name with the defaults (release cloud-controllers).
const POLICY: &str = "cloud-controllers-service-controller-annotations";
/// How long the apiserver may take to compile a new policy.
const ACTIVE_WITHIN: Duration = Duration::from_secs(30);

/// The policy and its binding as `render` makes them (none: empty). The source-range policy is
/// `tests/source_ranges_policy.rs`'s.
fn policy_objects(render: &Render) -> Vec<Value> {
    chart_tests::admission_policy(render, "annotations")
}

/// The rendered policy's `variables` or `matchConditions`, `name → expression`.
fn expressions(policy: &Value, field: &str) -> BTreeMap<String, String> {
    policy["spec"][field]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_owned(),
                v["expression"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A Service of `type_` (and `class`) with these annotations (prefixed keys) and TCP `ports`.
fn service(
    name: &str,
    ann: &BTreeMap<String, String>,
    ports: Ports,
    type_: &str,
    class: Option<&str>,
) -> Service {
    let ports: Vec<Value> = match ports {
        Ports::Tcp(ps) => ps
            .iter()
            .map(|p| json!({"name": format!("p{p}"), "port": p, "protocol": "TCP"}))
            .collect(),
        Ports::Udp(p) => vec![json!({"name": "dns", "port": p, "protocol": "UDP"})],
    };
    let mut spec = json!({"type": type_, "ports": ports, "selector": {"app": name}});
    if type_ == "ExternalName" {
        spec = json!({"type": type_, "externalName": "example.com"});
    }
    if let Some(c) = class {
        spec["loadBalancerClass"] = json!(c);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": spec,
    }))
    .expect("a Service")
}

fn lb(name: &str, ann: &BTreeMap<String, String>) -> Service {
    service(name, ann, Ports::Tcp(&[80]), "LoadBalancer", None)
}

/// Creates `svc` (`dry_run`: dryRun=All): `Ok` when admitted, `Err(message)` when the policy
/// refused it; any other failure panics.
async fn create(api: &Api<Service>, svc: &Service, dry_run: bool) -> Result<(), String> {
    let pp = PostParams {
        dry_run,
        ..Default::default()
    };
    refusal(api.create(&pp, svc).await.map(|_| ()), &describe(svc))
}

fn describe(svc: &Service) -> String {
    svc.metadata.name.clone().unwrap_or_default()
}

/// `Err(message)` when the apiserver's answer is the policy's refusal.
fn refusal(r: Result<(), kube::Error>, what: &str) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e))
            if e.code == 422 && e.message.contains("ValidatingAdmissionPolicy") =>
        {
            Err(e.message)
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

/// A merge patch of `svc`: `Ok` when admitted, `Err(message)` when refused.
async fn patch(api: &Api<Service>, svc: &str, body: Value) -> Result<(), String> {
    refusal(
        api.patch(svc, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(|_| ()),
        svc,
    )
}

fn ann_patch(key: &str, value: Option<&str>) -> Value {
    json!({"metadata": {"annotations": {format!("{PREFIX}{key}"): value}}})
}

/// Applies `objects` (the policy and its binding) for real and waits until the policy refuses a
/// known-bad Service (the apiserver compiles policies asynchronously): a dry-run create, repeated
/// until refused or `ACTIVE_WITHIN` passes. Returns how long that took.
async fn install(
    client: &kube::Client,
    discovery: &Discovery,
    objects: &[Value],
    probe: Service,
) -> Duration {
    assert_eq!(objects.len(), 2, "a policy and its binding: {objects:?}");
    for o in objects {
        apply(client, discovery, o, false)
            .await
            .unwrap_or_else(|e| panic!("applying the policy: {e}"));
    }
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    loop {
        if create(&api, &probe, true).await.is_err() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < ACTIVE_WITHIN,
            "the policy did not refuse {} within {ACTIVE_WITHIN:?}",
            describe(&probe)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn namespace(client: &kube::Client, ns: &str) -> Api<Service> {
    let api: Api<Namespace> = Api::all(client.clone());
    let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {ns}: {e}"),
    }
    Api::namespaced(client.clone(), ns)
}

/// Every refused catalogue annotation at once (what a Service out of scope may carry).
fn all_bad_annotations() -> BTreeMap<String, String> {
    CASES
        .iter()
        .filter(|c| c.admission == Admission::Refused)
        .flat_map(|c| annotations(c.ann))
        .collect()
}

/// Annotation keys whose values the policy may accept although the parser refuses them: durations
/// in forms CEL cannot compute like the controller (fractions, us/ns, repeated units, huge
/// numbers) and label selectors (key and value lengths). Everywhere else it is the parser's rule.
const LOOSER: &[&str] = &[
    "http-cookie-lifetime",
    "http-timeout-idle",
    "health-check-interval",
    "health-check-timeout",
    "node-selector",
];

/// Characters mutations insert: the grammar's own, whitespace, and a few non-ASCII ones.
const ALPHABET: &[char] = &[
    '0', '1', '2', '5', '9', '.', '-', '+', '/', ',', ':', '!', '=', '(', ')', '<', '>', '?', '*',
    '_', ' ', '\t', 'a', 'e', 'h', 'i', 'm', 'n', 's', 't', 'u', 'x', 'A', 'T', 'Z', 'µ', '\u{a0}',
];

/// `v` changed by one or two random edits (insert, delete, replace, duplicate a piece, cut).
fn mutate(rng: &mut fastrand::Rng, v: &str) -> String {
    let mut chars: Vec<char> = v.chars().collect();
    for _ in 0..rng.usize(1..=2) {
        let at = rng.usize(0..=chars.len());
        match rng.u8(0..5) {
            0 => chars.insert(at, ALPHABET[rng.usize(0..ALPHABET.len())]),
            1 if !chars.is_empty() => {
                chars.remove(at.min(chars.len() - 1));
            }
            2 if !chars.is_empty() => {
                let i = at.min(chars.len() - 1);
                chars[i] = ALPHABET[rng.usize(0..ALPHABET.len())];
            }
            3 if !chars.is_empty() => {
                let from = rng.usize(0..chars.len());
                let to = rng.usize(from..=chars.len());
                let piece: Vec<char> = chars[from..to].to_vec();
                chars.splice(at..at, piece);
            }
            _ => chars.truncate(at),
        }
    }
    chars.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_refuses_what_the_controller_refuses_and_nothing_it_accepts() {
    let k = testenv::kube().await;
    let client = k.client().await;
    let discovery = chart_tests::discovery(&client).await;
    let objects = policy_objects(&Render::default());
    let api = namespace(&client, "admission").await;

    // Before the policy: Services it would refuse, as a cluster has them when the chart is
    // upgraded to one with the policy (one held by a finalizer, like the controller's).
    let legacy = |name: &str, key: &str, value: &str, type_: &str| {
        let mut s = service(
            name,
            &annotations(&[(key, value)]),
            Ports::Tcp(&[80]),
            type_,
            None,
        );
        s.metadata.finalizers = Some(vec!["chart-tests/hold".into()]);
        s
    };
    for s in [
        legacy("legacy", "use-private-ip", "maybe", "LoadBalancer"),
        legacy("legacy-deleted", "protocol", "udp", "LoadBalancer"),
        legacy("legacy-cluster-ip", "protocol", "udp", "ClusterIP"),
    ] {
        create(&api, &s, false)
            .await
            .expect("no policy installed yet");
    }

    let probe = lb("probe", &annotations(&[("uses-proxyprotocol", "yes")]));
    let took = install(&client, &discovery, &objects, probe).await;
    eprintln!("the policy refuses within {took:.1?} of being applied");

    // 1. The catalogue, each case created for real.
    let mut failures = Vec::new();
    let (mut refused, mut left) = (Vec::new(), Vec::new());
    for c in CASES {
        let svc = service(c.name, &annotations(c.ann), c.ports, "LoadBalancer", None);
        match (c.admission, create(&api, &svc, false).await) {
            (Admission::Refused, Err(msg)) => {
                refused.push(c.name);
                let value = if c.quotes_value() {
                    format!("{:?}", c.value)
                } else {
                    c.value.to_owned()
                };
                for part in [format!("{PREFIX}{}", c.field), value, c.hint.to_owned()] {
                    if !msg.contains(&part) {
                        failures.push(format!("{}: {part:?} missing from {msg:?}", c.name));
                    }
                }
            }
            (Admission::Refused, Ok(())) => failures.push(format!("{}: admitted", c.name)),
            (Admission::ControllerOnly(_), Ok(())) => left.push(c.name),
            (Admission::ControllerOnly(why), Err(msg)) => failures.push(format!(
                "{}: refused, but only the controller can tell ({why}): {msg}",
                c.name
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "catalogue: {} of {} cases refused at admission, {} left to the controller: {}",
        refused.len(),
        CASES.len(),
        left.len(),
        left.join(", ")
    );
    // Both mistakes of the two-at-once case are named, in the controller's order.
    let two = CASES.iter().find(|c| c.name == "m-two").unwrap();
    let msg = create(&api, &lb("m-two-again", &annotations(two.ann)), true)
        .await
        .unwrap_err();
    let (udp, nah) = (msg.find("\"udp\"").unwrap(), msg.find("\"nah\"").unwrap());
    assert!(udp < nah && msg.contains("; also: "), "{msg}");

    // 2. Every accepted value of every annotation, on its own (dry run).
    let mut admitted = 0;
    for acc in ACCEPTED {
        for (i, v) in acc.values.iter().enumerate() {
            let mut pairs = acc.with.to_vec();
            pairs.push((acc.key, v));
            let svc = lb(&format!("ok-{}-{i}", acc.key), &annotations(&pairs));
            match create(&api, &svc, true).await {
                Ok(()) => admitted += 1,
                Err(msg) => failures.push(format!("{}={v:?}: refused: {msg}", acc.key)),
            }
        }
    }
    // 3. Every Service shape of the e2e suites, created for real.
    for s in VALID_SERVICES {
        let svc = service(
            &format!("e2e-{}", s.name),
            &annotations(s.ann),
            Ports::Tcp(s.ports),
            "LoadBalancer",
            None,
        );
        if let Err(msg) = create(&api, &svc, false).await {
            failures.push(format!("{} ({}): refused: {msg}", s.name, s.source));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "admitted: {admitted} accepted values of {} annotations, {} Service shapes of the e2e suites",
        ACCEPTED
            .iter()
            .map(|a| a.key)
            .collect::<BTreeSet<_>>()
            .len(),
        VALID_SERVICES.len()
    );

    // 4. Services the controller does not serve are never looked at, whatever they carry.
    let bad = all_bad_annotations();
    for (name, type_, class) in [
        ("other-cluster-ip", "ClusterIP", None),
        ("other-node-port", "NodePort", None),
        ("other-external-name", "ExternalName", None),
        ("other-class", "LoadBalancer", Some("metallb.io/metallb")),
        (
            "other-own-class",
            "LoadBalancer",
            Some("cloud-controllers.io/hcloud"),
        ),
    ] {
        let svc = service(name, &bad, Ports::Tcp(&[80]), type_, class);
        create(&api, &svc, false)
            .await
            .unwrap_or_else(|msg| panic!("{name}: refused: {msg}"));
    }

    // 5. Updates. An edit to a bad value is refused, with the message of the annotation changed.
    let msg = patch(
        &api,
        "e2e-plain",
        ann_patch("health-check-port", Some("http")),
    )
    .await
    .unwrap_err();
    assert!(msg.contains(&format!("{PREFIX}health-check-port")), "{msg}");
    // Removing an annotation is fine, and does not hide a bad value set next to it.
    patch(
        &api,
        "e2e-hccm-http",
        ann_patch("health-check-http-path", None),
    )
    .await
    .expect("removing an annotation");
    let msg = patch(
        &api,
        "e2e-hccm-http",
        json!({"metadata": {"annotations": {
            format!("{PREFIX}health-check-protocol"): null,
            format!("{PREFIX}health-check-interval"): "soon",
        }}}),
    )
    .await
    .unwrap_err();
    assert!(msg.contains("\"soon\""), "{msg}");
    // Removing what another annotation needs is an edit too.
    let msg = patch(
        &api,
        "e2e-contract-uploaded",
        ann_patch("http-certificates", None),
    )
    .await
    .unwrap_err();
    assert!(msg.contains(&format!("{PREFIX}http-certificates")), "{msg}");
    // A Service made before the policy: unrelated edits pass, its unchanged bad value is not
    // re-checked, a changed one is.
    patch(
        &api,
        "legacy",
        json!({"metadata": {"labels": {"team": "web"}}}),
    )
    .await
    .expect("a label edit");
    patch(&api, "legacy", ann_patch("location", Some("fsn1")))
        .await
        .expect("another annotation");
    let msg = patch(&api, "legacy", ann_patch("use-private-ip", Some("perhaps")))
        .await
        .unwrap_err();
    assert!(
        msg.contains("\"perhaps\"") && !msg.contains("\"maybe\""),
        "{msg}"
    );
    patch(&api, "legacy", ann_patch("use-private-ip", Some("false")))
        .await
        .expect("fixed");
    // Its finalizer is released (as the controller releases its own) once it is deleted.
    api.delete("legacy-deleted", &DeleteParams::default())
        .await
        .expect("delete");
    patch(
        &api,
        "legacy-deleted",
        json!({"metadata": {"finalizers": null}}),
    )
    .await
    .expect("releasing the finalizer");
    // A Service that becomes a LoadBalancer is checked whole.
    let msg = patch(
        &api,
        "legacy-cluster-ip",
        json!({"spec": {"type": "LoadBalancer"}}),
    )
    .await
    .unwrap_err();
    assert!(msg.contains("\"udp\""), "{msg}");
    for s in ["legacy", "legacy-cluster-ip"] {
        patch(&api, s, json!({"metadata": {"finalizers": null}}))
            .await
            .expect("release");
    }

    // 6. The service-controller's class (--load-balancer-class) is served, others are not.
    let classy = policy_objects(&Render::new("classy", "kube-system").set(
        "serviceController.args.load-balancer-class",
        "cloud-controllers.io/hcloud",
    ));
    let own = |name: &str, ann: &BTreeMap<String, String>| {
        service(
            name,
            ann,
            Ports::Tcp(&[80]),
            "LoadBalancer",
            Some("cloud-controllers.io/hcloud"),
        )
    };
    let probe = own(
        "classy-probe",
        &annotations(&[("uses-proxyprotocol", "yes")]),
    );
    install(&client, &discovery, &classy, probe).await;
    create(&api, &own("classy-bad", &bad), true)
        .await
        .unwrap_err();
    create(
        &api,
        &service(
            "classy-metallb",
            &bad,
            Ports::Tcp(&[80]),
            "LoadBalancer",
            Some("metallb.io/metallb"),
        ),
        true,
    )
    .await
    .expect("another class");
    for o in classy.iter().rev() {
        delete_cluster_object(&client, &discovery, o).await;
    }

    // 7. Mutated values: never stricter than the parser; as strict where the rule is the same.
    let mut rng = fastrand::Rng::with_seed(0x5eed_cafe);
    let (mut both, mut neither) = (0, 0);
    let mut looser: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut stricter = Vec::new();
    let seeds = ACCEPTED
        .iter()
        .flat_map(|acc| acc.values.iter().map(move |v| (acc.key, *v, acc.with)))
        .chain(
            CASES
                .iter()
                .flat_map(|c| c.ann.iter().map(|(k, v)| (*k, *v, &[][..]))),
        );
    // CHART_TESTS_FUZZ_ROUNDS=<n> mutates each seed more often (3 by default).
    let rounds: usize = std::env::var("CHART_TESTS_FUZZ_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut n = 0;
    for (key, seed, with) in seeds {
        for _ in 0..rounds {
            let v = mutate(&mut rng, seed);
            let mut pairs = with.to_vec();
            pairs.push((key, v.as_str()));
            let ann = annotations(&pairs);
            let parser = parse_error(&ann);
            n += 1;
            let policy = create(&api, &lb(&format!("fuzz-{n}"), &ann), true).await;
            match (parser, policy) {
                (Some(_), Err(_)) => both += 1,
                (None, Ok(())) => neither += 1,
                (None, Err(msg)) => stricter.push(format!("{key}={v:?}: {msg}")),
                (Some(_), Ok(())) => looser.entry(key).or_default().push(format!("{v:?}")),
            }
        }
    }
    eprintln!(
        "{n} mutated values: {both} refused by both, {neither} accepted by both, {} accepted by \
         the policy only ({:?}), {} refused by the policy only",
        looser.values().map(Vec::len).sum::<usize>(),
        looser
            .iter()
            .map(|(k, v)| (*k, v.len()))
            .collect::<BTreeMap<_, _>>(),
        stricter.len()
    );
    for (key, values) in &looser {
        eprintln!(
            "  accepted by the policy only, {key}: {}",
            values.join(", ")
        );
    }
    assert!(
        stricter.is_empty(),
        "the policy refuses what the controller accepts:\n{}",
        stricter.join("\n")
    );
    let unexpected: Vec<String> = looser
        .iter()
        .filter(|(k, _)| !LOOSER.contains(k))
        .flat_map(|(k, vs)| vs.iter().map(move |v| format!("{k}={v}")))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the policy admits what the controller refuses:\n{}",
        unexpected.join("\n")
    );
}

async fn delete_cluster_object(client: &kube::Client, discovery: &Discovery, obj: &Value) {
    use kube::api::{DynamicObject, GroupVersionKind};
    let (group, version) = obj["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .unwrap();
    let (ar, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(group, version, kind(obj)))
        .expect("served");
    Api::<DynamicObject>::all_with(client.clone(), &ar)
        .delete(name(obj), &DeleteParams::default())
        .await
        .expect("delete");
}

// Render-only checks (no apiserver).

#[test]
fn the_default_install_renders_one_policy_and_its_binding() {
    let objects = policy_objects(&Render::default());
    let kinds: Vec<(&str, &str)> = objects.iter().map(|o| (kind(o), name(o))).collect();
    assert_eq!(kinds, [(VAP, POLICY), (BINDING, POLICY)]);
    let binding = &objects[1]["spec"];
    assert_eq!(binding["policyName"], POLICY);
    assert_eq!(binding["validationActions"], json!(["Deny"]));
    let policy = &objects[0]["spec"];
    assert_eq!(policy["failurePolicy"], "Ignore");
    let rules = &policy["matchConstraints"]["resourceRules"];
    assert_eq!(rules[0]["resources"], json!(["services"]));
    assert_eq!(rules[0]["operations"], json!(["CREATE", "UPDATE"]));
}

#[test]
fn every_annotation_the_parser_checks_has_a_rule_with_the_parsers_words() {
    let objects = policy_objects(&Render::default());
    let exprs = expressions(&objects[0], "variables");
    let text: String = exprs.values().cloned().collect::<Vec<_>>().join("\n");
    let matched = &expressions(&objects[0], "matchConditions")["has-checked-annotations"];
    // An annotation has a rule of its own when some value set alone makes the parser refuse it.
    let long = "x".repeat(64);
    let probes = ["", "x", "-1", "0", "x y", "(", "1.2.3.4", "X_Y!", &long];
    let mut checked = BTreeSet::new();
    for key in ACCEPTED.iter().map(|a| a.key).collect::<BTreeSet<_>>() {
        if probes
            .iter()
            .any(|p| parse_error(&annotations(&[(key, *p)])).is_some())
        {
            checked.insert(key);
            let key = format!("'{PREFIX}{key}'");
            assert!(
                text.contains(&key) && matched.contains(&key),
                "the parser checks {key}, the policy has no rule for it"
            );
        }
    }
    eprintln!("{} annotations with a rule: {checked:?}", checked.len());
    // The probes find every rule of the parser: one for each key its declaration says is checked
    // (a new kind of rule needs a probe here, and a policy rule).
    assert_eq!(checked.len(), checked_annotations(), "{checked:?}");
    // The hints are the controller's own words.
    for hint in [BOOL_EXPECTED, DURATION_EXPECTED] {
        assert!(text.contains(hint), "{hint}");
    }
    for c in CASES.iter().filter(|c| c.admission == Admission::Refused) {
        assert!(text.contains(c.hint), "{}: {}", c.name, c.hint);
    }
    // The validation joins them as the controller does.
    let validation = &objects[0]["spec"]["validations"][0];
    assert!(
        validation["messageExpression"]
            .as_str()
            .unwrap()
            .contains("join('; also: ')")
    );
}

#[test]
fn values_switch_the_policy_off_and_name_the_load_balancer_class() {
    for (what, render) in [
        (
            "validation.enabled=false",
            Render::default().set("serviceController.validation.enabled", false),
        ),
        (
            "serviceController.enabled=false",
            Render::default().set("serviceController.enabled", false),
        ),
        (
            "hcloud.loadBalancers.enabled=false",
            Render::default().set("hcloud.loadBalancers.enabled", false),
        ),
        (
            "HCLOUD_LOAD_BALANCERS_ENABLED=false",
            Render::default().set(
                "serviceController.env.HCLOUD_LOAD_BALANCERS_ENABLED",
                "false",
            ),
        ),
    ] {
        assert!(policy_objects(&render).is_empty(), "{what}");
    }
    let served = |render: Render| -> String {
        expressions(&policy_objects(&render)[0], "matchConditions")
            ["served-by-the-service-controller"]
            .clone()
    };
    assert_eq!(
        served(Render::default()),
        "!has(object.spec.loadBalancerClass)"
    );
    let own = "!has(object.spec.loadBalancerClass) || object.spec.loadBalancerClass == 'cloud-controllers.io/hcloud'";
    assert_eq!(
        served(Render::default().set(
            "serviceController.args.load-balancer-class",
            "cloud-controllers.io/hcloud"
        )),
        own
    );
    assert_eq!(
        served(Render::default().set(
            "serviceController.env.SERVICE_LOAD_BALANCER_CLASS",
            "cloud-controllers.io/hcloud"
        )),
        own
    );
    // The flag wins over the variable, as in the binary.
    assert_eq!(
        served(
            Render::default()
                .set(
                    "serviceController.args.load-balancer-class",
                    "cloud-controllers.io/hcloud"
                )
                .set(
                    "serviceController.env.SERVICE_LOAD_BALANCER_CLASS",
                    "other.io/x"
                )
        ),
        own
    );
    // A class from a Secret cannot be known: only Services without a class are checked.
    assert_eq!(
        served(Render::default().set_json(
            "serviceController.extraEnv",
            &json!([{"name": "SERVICE_LOAD_BALANCER_CLASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])
        )),
        "!has(object.spec.loadBalancerClass)"
    );
}
