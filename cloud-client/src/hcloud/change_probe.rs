//! One call that answers "has any server changed since I listed them all?": the newest entries of
//! the servers' action list (`GET /servers/actions?sort=id:desc`).
//!
//! Everything that changes what the controllers read of a server is an action on it: created,
//! deleted, powered on or off, rebuilt, its type changed, attached to or detached from a network,
//! its alias IPs changed, a Primary IP assigned or unassigned. So while the newest action is the
//! one seen before the last full list, and none of the newest was still running then, that list
//! is still the truth, and a full list (⌈servers / 50⌉ calls) can be skipped for one call.
//!
//! What no action records (a rename or a label change through `PUT /servers/{id}`) is caught by the
//! full list the server cache makes anyway once its list is older than
//! `HCLOUD_SERVER_CACHE_RELIST_PERIOD`.

use crate::error::CloudError;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::ActionsResponse;

/// How many of the newest actions are read: enough that an action still running is seen among
/// them, and it is one page whatever the number.
const NEWEST: u32 = 25;

/// The newest server action's id (0: there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Watermark(i64);

/// Reads the servers' [`Watermark`].
#[derive(Debug, Clone)]
pub(crate) struct ChangeProbe {
    transport: Transport,
}

impl ChangeProbe {
    pub(crate) fn new(transport: Transport) -> Self {
        Self { transport }
    }

    /// The watermark now; `None` when one of the newest actions is still running: what it changes
    /// may be missing from a list made now, so such a list must not be trusted past its max age.
    pub(crate) async fn read(&self) -> Result<Option<Watermark>, CloudError> {
        let req = Req::get("/servers/actions", "/servers/actions")
            .query("sort", "id:desc")
            .query("per_page", NEWEST.to_string());
        let page: ActionsResponse = self.transport.call(&req).await?;
        Ok(watermark(&page))
    }
}

fn watermark(page: &ActionsResponse) -> Option<Watermark> {
    if page.actions.iter().any(|a| a.status == "running") {
        return None;
    }
    Some(Watermark(
        page.actions.iter().map(|a| a.id).max().unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::wire::Action;

    fn page(actions: &[(i64, &str)]) -> ActionsResponse {
        ActionsResponse {
            actions: actions
                .iter()
                .map(|(id, status)| Action {
                    id: *id,
                    command: "attach_to_network".into(),
                    status: (*status).into(),
                    progress: 100,
                    error: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_newest_finished_action_is_the_watermark() {
        assert_eq!(
            watermark(&page(&[(9, "success"), (7, "error")])),
            Some(Watermark(9))
        );
        assert_eq!(watermark(&page(&[])), Some(Watermark(0)));
    }

    #[test]
    fn a_running_action_means_no_watermark() {
        assert_eq!(watermark(&page(&[(9, "success"), (8, "running")])), None);
    }
}
