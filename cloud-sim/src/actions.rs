//! Actions (docs/hetzner-api.md, "Actions and `locked`"): every mutation starts one, it stays
//! `running` for the configured duration and locks its primary resource meanwhile. Completion is
//! lazy: whoever locks the state first calls `advance`, which finishes every action whose time is
//! up. That keeps the simulator free of timers, deterministic under test, and correct across
//! restarts.

use serde_json::{Value, json};

use crate::clock::{now_ms, rfc3339};
use crate::error::ApiError;
use crate::state::State;

// The action records are stored with the rest of the world; this module is their lifecycle.
pub use crate::state::{Action, ActionFailure, Effect, ResourceRef};

tokio::task_local! {
    /// Set by the fault middleware for one request when an `action_error` fault fires, so the
    /// actions that request starts end in `error` without every handler threading it through.
    pub static FORCED_ACTION_ERROR: Option<ActionFailure>;
    /// Set by the fault middleware for one request when an `action_duration` fault fires: how
    /// long (ms) the actions that request starts take.
    pub static FORCED_ACTION_MS: Option<u64>;
}

impl State {
    /// Starts an action on `resources` (the first one gets locked) and returns its id.
    pub fn start_action(
        &mut self,
        command: &str,
        resources: Vec<ResourceRef>,
        effect: Effect,
    ) -> u64 {
        let id = State::next_id(&mut self.next.action);
        let now = now_ms();
        let forced = FORCED_ACTION_ERROR.try_with(|f| f.clone()).ok().flatten();
        let duration_ms = FORCED_ACTION_MS
            .try_with(|ms| *ms)
            .ok()
            .flatten()
            .unwrap_or(self.action_ms);
        self.actions.insert(
            id,
            Action {
                id,
                command: command.to_owned(),
                status: "running".to_owned(),
                started_ms: now,
                finished_ms: None,
                finish_at_ms: now + duration_ms,
                resources,
                error: forced,
                effect,
            },
        );
        self.running.insert(id);
        if duration_ms == 0 {
            self.advance(now);
        }
        id
    }

    /// Finishes every running action whose time is up and applies its effect.
    pub fn advance(&mut self, now: u64) -> bool {
        let due: Vec<u64> = self
            .running
            .iter()
            .copied()
            .filter(|id| self.actions.get(id).is_none_or(|a| a.finish_at_ms <= now))
            .collect();
        for id in &due {
            self.running.remove(id);
            let Some(action) = self.actions.get_mut(id) else {
                continue;
            };
            let failed = action.error.is_some();
            action.status = if failed { "error" } else { "success" }.to_owned();
            action.finished_ms = Some(action.finish_at_ms.max(action.started_ms));
            let effect = action.effect.clone();
            let failure = action.error.clone();
            self.apply(effect, failure);
        }
        !due.is_empty()
    }

    fn apply(&mut self, effect: Effect, failure: Option<ActionFailure>) {
        match effect {
            Effect::None => {}
            Effect::ServerStatus { server, status } => {
                if let Some(s) = self.servers.get_mut(&server) {
                    // A failed power action leaves the server where it was before.
                    if failure.is_none() {
                        s.status = status;
                    } else if s.status == "initializing" || s.status == "starting" {
                        s.status = "off".to_owned();
                    } else if s.status == "stopping" {
                        s.status = "running".to_owned();
                    }
                }
            }
            Effect::CertificateIssued { certificate } => {
                if let Some(c) = self.certificates.get_mut(&certificate) {
                    c.finish_issuance(failure);
                }
            }
        }
    }

    /// `locked` while a running action holds the resource, like concurrent mutations get from
    /// the real API.
    pub fn ensure_unlocked(&self, kind: &str, id: u64) -> Result<(), ApiError> {
        let held = self.running.iter().any(|a| {
            self.actions
                .get(a)
                .and_then(|a| a.resources.first())
                .is_some_and(|r| r.kind == kind && r.id == id)
        });
        if held {
            Err(ApiError::locked(kind, id))
        } else {
            Ok(())
        }
    }

    pub fn action_json(&self, id: u64) -> Value {
        self.actions
            .get(&id)
            .map(action_json)
            .unwrap_or(Value::Null)
    }
}

pub fn action_json(a: &Action) -> Value {
    let progress = match a.status.as_str() {
        "running" => {
            let total = a.finish_at_ms.saturating_sub(a.started_ms).max(1);
            let done = now_ms().saturating_sub(a.started_ms).min(total);
            (done * 100 / total).min(99)
        }
        _ => 100,
    };
    json!({
        "id": a.id,
        "command": a.command,
        "status": a.status,
        "progress": progress,
        "started": rfc3339(a.started_ms),
        "finished": a.finished_ms.map(rfc3339),
        "resources": a.resources,
        "error": a.error.as_ref().map(|e| json!({"code": e.code, "message": e.message})),
    })
}
