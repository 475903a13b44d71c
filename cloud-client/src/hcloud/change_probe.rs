//! One call that answers "which servers changed since I listed them all?": the newest entries of
//! the servers' action list (`GET /servers/actions?sort=id:desc`).
//!
//! Everything that changes what the controllers read of a server is an action on it: created,
//! deleted, powered on or off, rebuilt, its type changed, attached to or detached from a network,
//! its alias IPs changed, a Primary IP assigned or unassigned. A list carries a [`Watermark`]:
//! every action up to it had finished before the list began. While no action is newer, the list is
//! still the truth, and a full list (⌈servers / 50⌉ calls) is skipped for one call; when a few
//! are newer, the servers they name are read one by one when asked for instead. Where more actions
//! came than a page holds, older pages are read while they cost less than half a list.
//!
//! What no action records (a rename or a label change through `PUT /servers/{id}`) is caught by the
//! full list the server cache makes anyway once its list is older than
//! `HCLOUD_SERVER_CACHE_RELIST_PERIOD`.

use std::collections::BTreeSet;

use crate::error::CloudError;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::ActionsResponse;

/// Actions per page: the API's largest page, since a page costs one call whatever its size.
const PER_PAGE: u32 = 50;

/// An action id: every server action up to it had finished when the probe was read (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Watermark(i64);

#[cfg(test)]
impl Watermark {
    /// The watermark at action `id`, for tests of what holds one.
    pub(crate) fn at(id: i64) -> Watermark {
        Watermark(id)
    }
}

/// The newest server actions, as one probe read them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Newest {
    /// `(action id, running, servers it acts on)`.
    actions: Vec<(i64, bool, Vec<i64>)>,
    /// The last page read was full: older actions may exist that it does not show.
    full: bool,
}

impl Newest {
    /// What a list made after this probe reflects: every action older than the oldest one still
    /// running (which may change its server after the list), else every action shown.
    pub(crate) fn watermark(&self) -> Watermark {
        let running = self.actions.iter().filter(|a| a.1).map(|a| a.0).min();
        match running {
            Some(id) => Watermark(id - 1),
            None => Watermark(self.actions.iter().map(|a| a.0).max().unwrap_or(0)),
        }
    }

    /// The servers acted on after `since`; `None` when the page may not reach back that far.
    pub(crate) fn servers_changed_since(&self, since: Watermark) -> Option<BTreeSet<i64>> {
        let reaches_back = !self.full || self.actions.iter().any(|a| a.0 <= since.0);
        reaches_back.then(|| {
            self.actions
                .iter()
                .filter(|a| a.0 > since.0)
                .flat_map(|a| a.2.iter().copied())
                .collect()
        })
    }
}

/// Reads the newest server actions.
#[derive(Debug, Clone)]
pub(crate) struct ChangeProbe {
    transport: Transport,
}

impl ChangeProbe {
    pub(crate) fn new(transport: Transport) -> Self {
        Self { transport }
    }

    /// The newest page of server actions: what a list about to be made will reflect.
    pub(crate) async fn read(&self) -> Result<Newest, CloudError> {
        self.read_since(Watermark(i64::MAX), 1).await
    }

    /// The server actions newer than `since`, reading older pages while a full one does not
    /// reach back to it, at most `max_pages` (each page a call: past that, a list is cheaper).
    /// New actions arriving meanwhile push older ones onto later pages: a page may repeat an
    /// action, never skip one.
    pub(crate) async fn read_since(
        &self,
        since: Watermark,
        max_pages: usize,
    ) -> Result<Newest, CloudError> {
        let mut all = Newest::default();
        for page in 1..=max_pages.max(1) {
            let req = Req::get("/servers/actions", "/servers/actions")
                .query("sort", "id:desc")
                .query("per_page", PER_PAGE.to_string())
                .query("page", page.to_string());
            let read = newest(&self.transport.call::<ActionsResponse>(&req).await?);
            all.actions.extend(read.actions);
            all.full = read.full;
            if !all.full || all.actions.iter().any(|a| a.0 <= since.0) {
                break;
            }
        }
        Ok(all)
    }
}

fn newest(page: &ActionsResponse) -> Newest {
    Newest {
        full: page.actions.len() >= PER_PAGE as usize,
        actions: page
            .actions
            .iter()
            .map(|a| {
                let servers = a
                    .resources
                    .iter()
                    .filter(|r| r.kind == "server")
                    .map(|r| r.id)
                    .collect();
                (a.id, a.is_running(), servers)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcloud::wire::{Action, ResourceRef};

    fn page(actions: &[(i64, &str, i64)]) -> ActionsResponse {
        ActionsResponse {
            actions: actions
                .iter()
                .map(|(id, status, server)| Action {
                    id: *id,
                    command: "attach_to_network".into(),
                    status: (*status).into(),
                    progress: 100,
                    error: None,
                    resources: vec![ResourceRef {
                        id: *server,
                        kind: "server".into(),
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn the_newest_finished_action_is_the_watermark() {
        let p = newest(&page(&[(9, "success", 1), (7, "error", 2)]));
        assert_eq!(p.watermark(), Watermark(9));
        assert_eq!(newest(&page(&[])).watermark(), Watermark(0));
    }

    #[test]
    fn a_running_action_holds_the_watermark_below_it() {
        let p = newest(&page(&[
            (9, "success", 1),
            (8, "running", 2),
            (5, "success", 3),
        ]));
        assert_eq!(p.watermark(), Watermark(7));
    }

    #[test]
    fn the_servers_changed_since_a_watermark_are_named_when_the_page_reaches_it() {
        let p = newest(&page(&[
            (9, "success", 1),
            (8, "success", 2),
            (5, "success", 3),
        ]));
        assert_eq!(
            p.servers_changed_since(Watermark(7)),
            Some(BTreeSet::from([1, 2]))
        );
        assert_eq!(p.servers_changed_since(Watermark(9)), Some(BTreeSet::new()));
        // A full page that does not reach back: older changes may be missing.
        let full: Vec<(i64, &str, i64)> = (100..150).map(|i| (i, "success", i)).collect();
        assert_eq!(
            newest(&page(&full)).servers_changed_since(Watermark(50)),
            None
        );
        assert!(
            newest(&page(&full))
                .servers_changed_since(Watermark(100))
                .is_some()
        );
    }
}
