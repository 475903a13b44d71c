//! The API token rotated through `HCLOUD_TOKEN_FILE` while the controller runs: the file the
//! kubelet rewrites when its Secret changes. cloud-sim refuses the old token from the moment the
//! file changes, so every call still made with it shows as a 401 in the sim's request log.

mod support;

use std::time::{Duration, Instant};

use cloud_sim::SimConfig;
use support::{Fixture, Options, ingress_ips};
use test_support::e2e::run::http_status;
use test_support::e2e::{T, eventually};

const OLD: &str = "old0000000000000000000000000000000000000000000000000000000000000";
const NEW: &str = "new0000000000000000000000000000000000000000000000000000000000000";
const BAD: &str = "bad0000000000000000000000000000000000000000000000000000000000000";
/// How often the controller reads the token file (the default is 2 s).
const POLL: Duration = Duration::from_millis(200);
const SERVICES: usize = 8;

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The sim's request log from `after_seq` on: (calls, 401s).
fn calls_after(fx: &Fixture, after_seq: u64) -> (usize, usize) {
    let log: Vec<_> = fx
        .sim
        .request_log()
        .into_iter()
        .filter(|e| e.seq > after_seq)
        .collect();
    (log.len(), log.iter().filter(|e| e.status == 401).count())
}

fn last_seq(fx: &Fixture) -> u64 {
    fx.sim.request_log().last().map_or(0, |e| e.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_file_rotates_while_services_converge_and_a_refused_token_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{OLD}\n")).unwrap();
    let watched = file.clone();
    let fx = Fixture::start_with(Options {
        sim: Some(SimConfig {
            token: Some(OLD.into()),
            request_log_capacity: 100_000,
            ..SimConfig::default()
        }),
        cloud: Some(Box::new(move |cfg| {
            cfg.client.token_file = Some(watched);
            cfg.client.token_file_poll = POLL;
        })),
        ..Options::default()
    })
    .await;
    fx.nodes(2).await;
    let admin = fx.ctl.as_ref().unwrap().admin;

    // 1. A burst of Services; the token changes while they converge.
    for i in 0..SERVICES {
        fx.service(&format!("burst-{i}"), &[80], &[]).await;
    }
    eventually("the burst under way", T, || async {
        (!fx.sim.inventory().load_balancers.is_empty()).then_some(())
    })
    .await;
    let switch_seq = last_seq(&fx);
    let switched = Instant::now();
    std::fs::write(&file, format!("{NEW}\n")).unwrap();
    fx.sim.set_token(Some(NEW));
    eventually("the controller read the new token", T, || async {
        let m = fx.metrics().await;
        (metric(&m, "cloud_controllers_cloud_api_token_rotations_total") == Some(1.0)).then_some(())
    })
    .await;
    let observed_seq = last_seq(&fx);
    let observed_after = switched.elapsed();
    for i in 0..SERVICES {
        let name = format!("burst-{i}");
        eventually(&format!("ingress of {name}"), T, || async {
            fx.get(&name).await.filter(|s| !ingress_ips(s).is_empty())
        })
        .await;
    }
    let (during, refused_during) = (
        observed_seq - switch_seq,
        calls_after(&fx, switch_seq).1 - calls_after(&fx, observed_seq).1,
    );
    let (after, refused_after) = calls_after(&fx, observed_seq);
    eprintln!(
        "rotation: the new token was in use {:.2} s after the file changed (poll {} ms); {during} \
         calls in between, {refused_during} of them refused with the old token; {after} calls \
         after, {refused_after} refused",
        observed_after.as_secs_f64(),
        POLL.as_millis()
    );
    assert_eq!(
        refused_after, 0,
        "no call may use the old token once the new one was read"
    );
    assert_eq!(fx.sim.inventory().load_balancers.len(), SERVICES);
    assert_eq!(http_status(admin, "/readyz").await.unwrap().0, 200);

    // 2. A token the API refuses: reported, retried, and nothing deleted.
    std::fs::write(&file, BAD).unwrap();
    eventually("the bad token read", T, || async {
        let m = fx.metrics().await;
        (metric(&m, "cloud_controllers_cloud_api_token_rotations_total") == Some(2.0)).then_some(())
    })
    .await;
    fx.service("during-bad", &[80], &[]).await;
    let (status, body) = eventually("/readyz failing on the refused token", T, || async {
        let (status, body) = http_status(admin, "/readyz").await.ok()?;
        (status == 503).then_some((status, body))
    })
    .await;
    assert!(
        body.contains("refuses the current token"),
        "{status}: {body}"
    );
    assert!(!body.contains(BAD) && !body.contains(NEW));
    let m = fx.metrics().await;
    assert_eq!(
        metric(&m, "cloud_controllers_cloud_api_token_refused"),
        Some(1.0)
    );
    assert!(!m.contains(BAD) && !m.contains(NEW) && !m.contains(OLD));
    assert_eq!(
        fx.sim.inventory().load_balancers.len(),
        SERVICES,
        "a refused token deletes nothing"
    );
    for i in 0..SERVICES {
        let svc = fx.get(&format!("burst-{i}")).await.unwrap();
        assert!(!ingress_ips(&svc).is_empty(), "burst-{i} kept its ingress");
    }

    // 3. The good token back: ready again, and the Service created meanwhile converges.
    std::fs::write(&file, NEW).unwrap();
    eventually("/readyz ok again", T, || async {
        let (status, _) = http_status(admin, "/readyz").await.ok()?;
        (status == 200).then_some(())
    })
    .await;
    eventually("ingress of during-bad", T, || async {
        fx.get("during-bad")
            .await
            .filter(|s| !ingress_ips(s).is_empty())
    })
    .await;
    let m = fx.metrics().await;
    assert_eq!(
        metric(&m, "cloud_controllers_cloud_api_token_refused"),
        Some(0.0)
    );
    assert_eq!(fx.sim.inventory().load_balancers.len(), SERVICES + 1);
}
