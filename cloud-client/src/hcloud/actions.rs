//! Waiting for asynchronous actions. One background poller serves every waiter: all pending action
//! ids go into a single `GET /actions?id=…&id=…` call, and each action is polled at growing intervals
//! (e.g. 100 ms, 200 ms, 400 ms … capped), instead of one 500 ms loop per action.

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
}

struct Pending {
    command: String,
    waiters: Vec<oneshot::Sender<Result<(), CloudError>>>,
    interval: Duration,
    next_poll: Instant,
    deadline: Instant,
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
            return outcome(action);
        }
        let (tx, rx) = oneshot::channel();
        let spawn = {
            let mut s = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let p = s.pending.entry(action.id).or_insert_with(|| Pending {
                command: action.command.clone(),
                waiters: Vec::new(),
                interval: self.inner.policy.initial,
                next_poll: now + self.inner.policy.initial,
                deadline: now + self.inner.policy.timeout,
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
                        let finished = match found {
                            Some(a) if !a.is_running() => Some(outcome(a)),
                            Some(_) => None,
                            None => Some(Err(CloudError::NotFound {
                                what: format!("action {id}"),
                                tried: vec![format!("GET /actions?id={id}")],
                            })),
                        };
                        finish_or_reschedule(&mut s, *id, finished, now, &self.policy);
                    }
                }
                Err(e) if e.is_retryable() => {
                    for id in chunk {
                        finish_or_reschedule(&mut s, *id, None, now, &self.policy);
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

fn finish_or_reschedule(
    s: &mut State,
    id: i64,
    finished: Option<Result<(), CloudError>>,
    now: Instant,
    policy: &ActionPollPolicy,
) {
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
                for w in p.waiters {
                    let _ = w.send(clone_result(&r));
                }
            }
        }
        None => {
            p.interval = p.interval.mul_f64(policy.factor.max(1.0)).min(policy.max);
            p.next_poll = now + p.interval;
        }
    }
}

fn outcome(a: &Action) -> Result<(), CloudError> {
    if a.status == "error" {
        let (code, message) = a
            .error
            .as_ref()
            .map(|e| (e.code.clone(), e.message.clone()))
            .unwrap_or_default();
        Err(CloudError::ActionFailed {
            id: a.id,
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
            id: *id,
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
