//! Waiting for asynchronous actions. One background poller serves every waiter: all pending action
//! ids go into a single `GET /actions?id=…&id=…` call, and each action is polled at growing intervals
//! (e.g. 100 ms, 200 ms, 400 ms … capped), instead of one 500 ms loop per action.
//!
//! The first poll of an action comes when actions of its kind (`add_route`, `add_target`, …)
//! usually finish, learned from earlier ones ([`FirstPoll`]): a controller that must wait for each
//! action before the next (routes lock their network) then neither polls too early nor waits long
//! past the end of each action. A running action's `progress` says how far along it is: a lone
//! action's next poll comes when, at that pace, it will have finished ([`total_bounds`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::error::CloudError;
use crate::hcloud::config::ActionPollPolicy;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{Action, ActionsResponse};

/// The API caps filters at a reasonable number of ids per request; hcloud-go uses 25.
const IDS_PER_CALL: usize = 25;

#[derive(Clone)]
pub(crate) struct ActionWaiter {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    policy: ActionPollPolicy,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    pending: HashMap<i64, Pending>,
    poller_running: bool,
    first_poll: HashMap<String, FirstPoll>,
}

struct Pending {
    command: String,
    waiters: Vec<oneshot::Sender<Result<(), CloudError>>>,
    interval: Duration,
    next_poll: Instant,
    deadline: Instant,
    /// When we started waiting: a kind that never finished by its first poll learns from how
    /// long this one took.
    since: Instant,
    /// Set until the first poll that was due for this action (not one it rode along on).
    first: Option<FirstPollTry>,
}

/// What the first poll of an action tried.
#[derive(Debug, Clone, Copy)]
struct FirstPollTry {
    delay: Duration,
    probe: bool,
    /// A probe was due but the delay is already close to the floor.
    skipped: bool,
}

/// When to poll an action of one kind first. Starts at the policy's initial delay; until one first
/// poll found its action done, the delay jumps to how long the last action took. A first poll that
/// finds the action still running lengthens the delay to the longest the action can take by its
/// progress (by a quarter when it shows none), and raises the floor to the shortest. Every 32nd
/// first poll (every 16th while learning) probes shorter: halfway down to the floor (15 % less
/// before there is one), keeping the shorter delay when it hits — unless that could save less
/// than a thirty-second of the wait; then the floor sinks a little instead, so probing resumes
/// now and then and follows actions that got faster. So the delay closes in on the usual action
/// time from above, at the price of about one extra poll in a hundred.
#[derive(Debug, Clone, Copy)]
struct FirstPoll {
    delay: Duration,
    /// The longest first-poll delay known to be too short (`ZERO`: none yet).
    floor: Duration,
    hits: u32,
    /// First polls learned from, probes included (schedules the next probe).
    tries: u32,
}

/// Every this many first polls, one probe tries a shorter delay (more often while learning).
const PROBE_EVERY: u32 = 32;
const PROBE_EVERY_WHILE_LEARNING: u32 = 16;
/// Hits after which a kind counts as learned.
const LEARNED_AFTER: u32 = 32;
/// Shortest first-poll delay (an action takes at least a round trip).
const MIN_FIRST_POLL: Duration = Duration::from_millis(10);
/// A probe that could save less than this fraction of the delay is not worth a poll.
const CLOSE_ENOUGH: u32 = 32;

/// The API rounds a running action's progress down, so one `elapsed` into its run at `progress`
/// percent takes between `elapsed·100/(progress+1)` and `elapsed·100/progress` in all, if it
/// progresses evenly. `None` when the progress says nothing (0, or 100 while still running).
fn total_bounds(elapsed: Duration, progress: u8) -> Option<(Duration, Duration)> {
    (1..100).contains(&progress).then(|| {
        let p = u32::from(progress);
        (elapsed * 100 / (p + 1), elapsed * 100 / p)
    })
}

impl FirstPoll {
    fn new(policy: &ActionPollPolicy) -> Self {
        Self {
            delay: policy.initial,
            floor: Duration::ZERO,
            hits: 0,
            tries: 0,
        }
    }

    /// The delay for the next action of this kind, and whether it is a probe.
    fn next(&self) -> FirstPollTry {
        let every = if self.hits < LEARNED_AFTER {
            PROBE_EVERY_WHILE_LEARNING
        } else {
            PROBE_EVERY
        };
        let due = self.hits > 0 && self.tries % every == every - 1;
        let close = !self.floor.is_zero()
            && self.delay.saturating_sub(self.floor) < self.delay / CLOSE_ENOUGH;
        if due && !close {
            let shorter = if self.floor.is_zero() {
                self.delay.mul_f64(0.85)
            } else {
                (self.floor + self.delay) / 2
            };
            FirstPollTry {
                delay: shorter.max(MIN_FIRST_POLL),
                probe: true,
                skipped: false,
            }
        } else {
            FirstPollTry {
                delay: self.delay,
                probe: false,
                skipped: due,
            }
        }
    }

    /// Learns from an action of a kind that has never finished by its first poll: it took at
    /// most `took`, so the next first poll waits that long instead of creeping up on it a
    /// quarter at a time (one extra poll per action while it does).
    fn learn_duration(&mut self, took: Duration, max: Duration) {
        if self.hits == 0 && took > self.delay {
            self.delay = took.min(max);
        }
    }

    /// Learns from a first poll: `finished` says whether the action was done by then, `bounds`
    /// what its progress said about its whole duration if not ([`total_bounds`]). Returns the
    /// delay to the next poll when it was not (close behind, once the kind is known to finish
    /// around this time).
    fn learn(
        &mut self,
        tried: FirstPollTry,
        finished: bool,
        bounds: Option<(Duration, Duration)>,
        max: Duration,
    ) -> Option<Duration> {
        self.tries = self.tries.wrapping_add(1);
        if finished {
            self.hits = self.hits.saturating_add(1);
            if tried.probe {
                self.delay = tried.delay;
                // Let the floor sink too, so actions that got faster can be followed down.
                self.floor = self.floor.mul_f64(0.9);
            } else if tried.skipped {
                self.floor = self.floor.mul_f64(0.99);
            }
            return None;
        }
        let known = self.hits > 0;
        if tried.probe {
            self.floor = self.floor.max(tried.delay);
        }
        match bounds {
            Some((shortest, longest)) => {
                self.floor = self.floor.max(shortest);
                self.delay = if tried.probe {
                    self.delay.min(longest)
                } else {
                    self.delay.max(longest).min(max)
                };
            }
            None if tried.probe => {}
            None => self.delay = self.delay.mul_f64(1.25).min(max),
        }
        self.floor = self.floor.min(self.delay);
        known.then(|| (tried.delay / 4).max(MIN_FIRST_POLL))
    }
}

impl fmt::Debug for ActionWaiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionWaiter")
            .field("policy", &self.inner.policy)
            .finish()
    }
}

impl ActionWaiter {
    pub(crate) fn new(transport: Transport, policy: ActionPollPolicy) -> Self {
        Self {
            inner: Arc::new(Inner {
                transport,
                policy,
                state: Mutex::new(State::default()),
                wake: Notify::new(),
            }),
        }
    }

    /// Resolves when the action finished: `Ok` on success, `ActionFailed` on error.
    pub(crate) async fn wait(&self, action: &Action) -> Result<(), CloudError> {
        if !action.is_running() {
            return outcome(action, &self.inner.transport);
        }
        let (tx, rx) = oneshot::channel();
        let spawn = {
            let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let policy = &self.inner.policy;
            let first = s
                .first_poll
                .entry(action.command.clone())
                .or_insert_with(|| FirstPoll::new(policy))
                .next();
            let p = s.pending.entry(action.id).or_insert_with(|| Pending {
                command: action.command.clone(),
                waiters: Vec::new(),
                interval: first.delay,
                next_poll: now + first.delay,
                deadline: now + policy.timeout,
                since: now,
                first: Some(first),
            });
            p.waiters.push(tx);
            !std::mem::replace(&mut s.poller_running, true)
        };
        if spawn {
            let inner = self.inner.clone();
            tokio::spawn(async move { inner.run().await });
        } else {
            self.inner.wake.notify_one();
        }
        rx.await.unwrap_or_else(|_| {
            Err(CloudError::Transport {
                method: "GET".into(),
                endpoint: "/actions".into(),
                message: "action poller stopped".into(),
            })
        })
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(self: Arc<Self>) {
        loop {
            let earliest = {
                let mut s = self.lock();
                match s.pending.values().map(|p| p.next_poll).min() {
                    Some(t) => t,
                    None => {
                        s.poller_running = false;
                        return;
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep_until(earliest) => {}
                // A new action may be due earlier than what we sleep for.
                _ = self.wake.notified() => continue,
            }
            self.poll_once().await;
        }
    }

    async fn poll_once(&self) {
        // Every pending id rides along, due or not: the call costs the same, early finishers are
        // noticed, and counting it as their poll lines up the schedules of concurrent actions so
        // later polls stay shared.
        let ids: Vec<i64> = self.lock().pending.keys().copied().collect();
        for chunk in ids.chunks(IDS_PER_CALL) {
            let mut req = Req::get("/actions", "/actions");
            for id in chunk {
                req = req.query("id", id.to_string());
            }
            self.transport.stats().record_action_poll();
            let result: Result<ActionsResponse, CloudError> = self.transport.call(&req).await;
            let now = Instant::now();
            let mut s = self.lock();
            match result {
                Ok(resp) => {
                    for id in chunk {
                        let found = resp.actions.iter().find(|a| a.id == *id);
                        let seen = match found {
                            Some(a) if !a.is_running() => {
                                Seen::Finished(outcome(a, &self.transport))
                            }
                            Some(a) => Seen::Running {
                                progress: a.progress,
                            },
                            None => Seen::Finished(Err(CloudError::NotFound {
                                what: format!("action {id}"),
                                tried: vec![format!("GET /actions?id={id}")],
                            })),
                        };
                        finish_or_reschedule(&mut s, *id, seen, now, &self.policy);
                    }
                }
                Err(e) if e.is_retryable() => {
                    for id in chunk {
                        let unknown = Seen::Running { progress: 0 };
                        finish_or_reschedule(&mut s, *id, unknown, now, &self.policy);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    for id in chunk {
                        if let Some(p) = s.pending.remove(id) {
                            for w in p.waiters {
                                let _ = w.send(Err(CloudError::Transport {
                                    method: "GET".into(),
                                    endpoint: "/actions".into(),
                                    message: msg.clone(),
                                }));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What one poll saw of an action (`progress` 0 when the poll failed).
enum Seen {
    Finished(Result<(), CloudError>),
    Running { progress: u8 },
}

fn finish_or_reschedule(
    s: &mut State,
    id: i64,
    seen: Seen,
    now: Instant,
    policy: &ActionPollPolicy,
) {
    let Some(p) = s.pending.get_mut(&id) else {
        return;
    };
    let (finished, bounds) = match seen {
        Seen::Finished(r) => (Some(r), None),
        Seen::Running { progress } => (None, total_bounds(now - p.since, progress)),
    };
    // Only a poll that was due for this action teaches when its kind finishes.
    let soon = match p.first {
        Some(tried) if now >= p.next_poll => {
            p.first = None;
            let command = p.command.clone();
            s.first_poll
                .entry(command)
                .or_insert_with(|| FirstPoll::new(policy))
                .learn(tried, finished.is_some(), bounds, policy.max)
        }
        _ => None,
    };
    let alone = s.pending.len() == 1;
    let Some(p) = s.pending.get_mut(&id) else {
        return;
    };
    let finished = finished.or_else(|| {
        (now >= p.deadline).then(|| {
            Err(CloudError::Timeout {
                operation: format!("waiting for action {id} ({})", p.command),
                after: policy.timeout,
            })
        })
    });
    match finished {
        Some(r) => {
            if let Some(p) = s.pending.remove(&id) {
                if r.is_ok()
                    && let Some(kind) = s.first_poll.get_mut(&p.command)
                {
                    kind.learn_duration(now - p.since, policy.max);
                }
                for w in p.waiters {
                    let _ = w.send(clone_result(&r));
                }
            }
        }
        None => match (bounds.filter(|_| alone), soon) {
            // When it will be done at the pace it shows, with a fiftieth to spare: our clock
            // started a round trip after the action's. Only for a lone action: concurrent ones
            // share every poll, and their common growing schedule keeps those polls few.
            (Some((_, longest)), _) => {
                let end = p.since + longest + longest / 50;
                p.next_poll = end.clamp(now + MIN_FIRST_POLL, now + policy.max);
            }
            (None, Some(delay)) => p.next_poll = now + delay,
            (None, None) => {
                p.interval = p.interval.mul_f64(policy.factor.max(1.0)).min(policy.max);
                p.next_poll = now + p.interval;
            }
        },
    }
}

/// A finished action's result; its error message is the cloud's text, so it is scrubbed of the
/// token like every other (see [`crate::scrub`]).
fn outcome(a: &Action, transport: &Transport) -> Result<(), CloudError> {
    if a.status == "error" {
        let (code, message) = a
            .error
            .as_ref()
            .map(|e| {
                (
                    e.code.clone(),
                    transport.credentials().redact(e.message.clone()),
                )
            })
            .unwrap_or_default();
        Err(CloudError::ActionFailed {
            id: a.id.to_string(),
            command: a.command.clone(),
            code,
            message,
        })
    } else {
        Ok(())
    }
}

fn clone_result(r: &Result<(), CloudError>) -> Result<(), CloudError> {
    match r {
        Ok(()) => Ok(()),
        Err(CloudError::ActionFailed {
            id,
            command,
            code,
            message,
        }) => Err(CloudError::ActionFailed {
            id: id.clone(),
            command: command.clone(),
            code: code.clone(),
            message: message.clone(),
        }),
        Err(CloudError::Timeout { operation, after }) => Err(CloudError::Timeout {
            operation: operation.clone(),
            after: *after,
        }),
        Err(CloudError::NotFound { what, tried }) => Err(CloudError::NotFound {
            what: what.clone(),
            tried: tried.clone(),
        }),
        Err(e) => Err(CloudError::Inconsistent {
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ActionPollPolicy {
        ActionPollPolicy::default()
    }

    /// Simulates actions that always take `took` and show no progress: returns the learned delay
    /// and the extra polls.
    fn run(took: Duration, actions: u32) -> (Duration, u32) {
        let (fp, extra) = run_from(FirstPoll::new(&policy()), took, actions, false);
        (fp.delay, extra)
    }

    /// `progress`: a running action shows how far along it is, rounded down, as the API does.
    fn run_from(
        mut fp: FirstPoll,
        took: Duration,
        actions: u32,
        progress: bool,
    ) -> (FirstPoll, u32) {
        let mut extra = 0;
        for _ in 0..actions {
            let tried = fp.next();
            let hit = tried.delay >= took;
            let shown = if progress && !hit {
                (tried.delay.as_micros() * 100 / took.as_micros()) as u8
            } else {
                0
            };
            if !hit {
                extra += 1;
            }
            fp.learn(tried, hit, total_bounds(tried.delay, shown), policy().max);
            // The poll after a miss comes when the action is done (ours or `total_bounds`).
            fp.learn_duration(took, policy().max);
        }
        (fp, extra)
    }

    #[test]
    fn follows_actions_that_got_faster() {
        let (slow, _) = run_from(
            FirstPoll::new(&policy()),
            Duration::from_millis(400),
            300,
            true,
        );
        assert!(slow.delay >= Duration::from_millis(400), "{:?}", slow.delay);
        let (fast, _) = run_from(slow, Duration::from_millis(50), 2000, true);
        assert!(fast.delay <= Duration::from_millis(60), "{:?}", fast.delay);
    }

    #[test]
    fn settles_just_above_a_short_action() {
        let (delay, extra) = run(Duration::from_millis(50), 1000);
        assert!(delay >= Duration::from_millis(50), "{delay:?}");
        assert!(delay <= Duration::from_millis(53), "{delay:?}");
        // At most one probe in 32 misses once learned, one in 16 while learning.
        let bound =
            (1000 - LEARNED_AFTER) / PROBE_EVERY + LEARNED_AFTER / PROBE_EVERY_WHILE_LEARNING;
        assert!(extra <= bound + 5, "{extra} extra polls (bound {bound})");
    }

    #[test]
    fn a_kind_that_never_finished_by_its_first_poll_waits_as_long_as_one_took() {
        let mut fp = FirstPoll::new(&policy());
        let took = policy().initial * 5;
        let first = fp.next();
        assert!(first.delay < took);
        fp.learn(first, false, None, policy().max);
        fp.learn_duration(took, policy().max);
        assert_eq!(
            fp.next().delay,
            took,
            "one miss, then the observed duration"
        );
        // Once a first poll hit, durations no longer move the delay: probes do.
        fp.learn(fp.next(), true, None, policy().max);
        fp.learn_duration(took * 2, policy().max);
        assert_eq!(fp.delay, took);
    }

    #[test]
    fn grows_towards_a_long_action() {
        let (delay, _) = run(Duration::from_secs(2), 40);
        assert!(delay >= Duration::from_secs(2), "{delay:?}");
        assert!(delay <= policy().max, "{delay:?}");
    }

    #[test]
    fn a_known_kind_that_just_missed_is_polled_again_soon() {
        let mut fp = FirstPoll::new(&policy());
        let first = fp.next();
        assert_eq!(
            fp.learn(first, false, None, policy().max),
            None,
            "unknown kind: normal growth"
        );
        let tried = fp.next();
        assert_eq!(fp.learn(tried, true, None, policy().max), None);
        let tried = fp.next();
        let soon = fp.learn(tried, false, None, policy().max).unwrap();
        assert!(soon < tried.delay, "{soon:?}");
    }

    #[test]
    fn progress_bounds_the_whole_duration() {
        let ms = Duration::from_millis;
        // 100 ms in, 20 % shown: somewhere in [20 %, 21 %) done.
        let (shortest, longest) = total_bounds(ms(100), 20).unwrap();
        assert_eq!(longest, ms(500));
        assert!(shortest > ms(476) && shortest < ms(477), "{shortest:?}");
        assert_eq!(total_bounds(ms(100), 0), None, "no progress shown");
        assert_eq!(total_bounds(ms(100), 100), None, "done but still running");
    }

    /// 100 serial actions of 500 ms that show their progress (the route burst of `cargo xtask
    /// bench routes`): the first costs one extra poll, the probes at most one more, and the
    /// delay ends within a thirty-second of the action's length.
    #[test]
    fn progress_lets_a_serial_burst_poll_once_per_action() {
        let took = Duration::from_millis(498);
        let (fp, extra) = run_from(FirstPoll::new(&policy()), took, 100, true);
        assert!(extra <= 2, "{extra} extra polls");
        assert!(fp.delay >= took, "{:?}", fp.delay);
        assert!(fp.delay <= took + took / CLOSE_ENOUGH, "{:?}", fp.delay);
        // Without progress the floor comes only from probes that miss.
        let (_, blind) = run(took, 100);
        assert!(
            blind > extra,
            "{blind} extra polls without progress, {extra} with"
        );
    }
}
