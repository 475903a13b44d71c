//! The shared server snapshot: one paginated `GET /servers` list serves every lookup (by id, name,
//! private IP) until it is older than the max age. Refreshes are single-flight: concurrent callers
//! wait for the one list in progress instead of starting their own.
//!
//! That is `HCLOUD_SERVER_CACHE_MODE=all`, the default. With `one`, a lookup by id or name reads
//! that one server (`GET /servers/{id}`, `GET /servers?name=`) and keeps the answer for the max
//! age; with `off` it reads it every time. Lookups by private IP (routes) always use the list.
//!
//! A snapshot past its max age is first confirmed by one call, when it can be (see
//! [`change_probe`](super::change_probe)): if no server action started since its list began, it
//! is still the truth and counts as fresh again; if actions name fewer servers than a list has
//! pages, those servers are marked stale and the rest counts as fresh. A stale server is read
//! (`GET /servers/{id}`) into the snapshot when a lookup lands on it, not before: each process
//! reads only the changed servers it asks about (lifecycle-controller never reads a new server,
//! node-controller never a deleted one). A full list is made when more changed, when the snapshot
//! is older than the relist period (`HCLOUD_SERVER_CACHE_RELIST_PERIOD`, 1 h; what no action
//! records, such as a rename, shows then), or when the probe cannot answer.
//!
//! A miss is never trusted from an old snapshot: unless the snapshot is younger than `miss_fresh`
//! and has no stale server (an id is asked whatever the snapshot's age, since lists lag behind
//! creates), the server itself is read (`GET /servers/{id}`, `GET /servers?name=`; a private IP:
//! the stale servers, then one fresh list) before "not found" is reported. That is what keeps a
//! stale cache from ever deleting a Node, and a new Node costs one call, not a list of every
//! server.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::CloudError;
use crate::hcloud::change_probe::{ChangeProbe, Watermark};
use crate::hcloud::config::ServerCacheConfig;
use crate::hcloud::config::ServerCacheMode;
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{Server, ServerResponse, ServersPage};

/// One consistent list of all servers with its indexes.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub generation: u64,
    pub fetched: Instant,
    /// Every server action up to it is reflected; `None`: unknown (no probe).
    watermark: Option<Watermark>,
    /// When the snapshot was last known to be the truth but for `stale`: its list, or a probe
    /// since.
    confirmed: Mutex<Instant>,
    /// Servers that changed (or were created) since the list, not read yet: an entry here may be
    /// out of date or missing.
    stale: BTreeSet<i64>,
    by_id: HashMap<i64, Arc<Server>>,
    by_name: HashMap<String, i64>,
    by_private_ip: HashMap<String, i64>,
}

impl Snapshot {
    fn build(generation: u64, servers: Vec<Server>, watermark: Option<Watermark>) -> Self {
        let now = Instant::now();
        Self::index(
            generation,
            now,
            servers.into_iter().map(Arc::new),
            watermark,
            BTreeSet::new(),
        )
    }

    fn index(
        generation: u64,
        fetched: Instant,
        servers: impl ExactSizeIterator<Item = Arc<Server>>,
        watermark: Option<Watermark>,
        stale: BTreeSet<i64>,
    ) -> Self {
        let mut s = Snapshot {
            generation,
            fetched,
            watermark,
            confirmed: Mutex::new(Instant::now()),
            stale,
            by_id: HashMap::with_capacity(servers.len()),
            by_name: HashMap::with_capacity(servers.len()),
            by_private_ip: HashMap::new(),
        };
        for srv in servers {
            s.by_name.insert(srv.name.clone(), srv.id);
            for p in &srv.private_net {
                if !p.ip.is_empty() {
                    s.by_private_ip.insert(p.ip.clone(), srv.id);
                }
            }
            s.by_id.insert(srv.id, srv);
        }
        s
    }

    /// This snapshot with the servers read since (`None`: gone) and `stale` the servers still
    /// to read, up to date to `watermark`. It keeps the list's time (the relist period still
    /// counts from the last full list) and when it was last confirmed.
    fn patched(
        &self,
        read: Vec<(i64, Option<Arc<Server>>)>,
        stale: BTreeSet<i64>,
        watermark: Option<Watermark>,
    ) -> Self {
        let mut by_id = self.by_id.clone();
        for (id, server) in read {
            match server {
                Some(s) => by_id.insert(id, s),
                None => by_id.remove(&id),
            };
        }
        let patched = Self::index(
            self.generation + 1,
            self.fetched,
            by_id.into_values(),
            watermark,
            stale,
        );
        *patched.confirmed.lock().unwrap_or_else(|e| e.into_inner()) = self.confirmed_at();
        patched
    }

    /// This snapshot with servers read one by one after `seen` was current: only those still
    /// stale, and only if no probe or list came since (`None`: nothing to change). A probe after
    /// the reads may have marked a server stale for a change the reads did not see; settling it
    /// would hide that change until the next full list.
    fn settled(&self, seen: &Snapshot, read: Vec<(i64, Option<Arc<Server>>)>) -> Option<Self> {
        if self.watermark != seen.watermark || self.fetched != seen.fetched {
            return None;
        }
        let read: Vec<_> = read
            .into_iter()
            .filter(|(id, _)| self.stale.contains(id))
            .collect();
        if read.is_empty() {
            return None;
        }
        let mut stale = self.stale.clone();
        for (id, _) in &read {
            stale.remove(id);
        }
        Some(self.patched(read, stale, self.watermark))
    }

    /// Full-list pages: what reading servers one by one must cost less than.
    fn list_pages(&self) -> usize {
        self.by_id.len().div_ceil(50).max(1)
    }

    fn confirmed_at(&self) -> Instant {
        *self.confirmed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the snapshot was listed or confirmed less than `max_age` ago.
    fn is_current(&self, max_age: Duration) -> bool {
        self.confirmed_at().elapsed() < max_age
    }

    fn confirm(&self) {
        *self.confirmed.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    pub fn by_id(&self, id: i64) -> Option<Arc<Server>> {
        self.by_id.get(&id).cloned()
    }

    pub fn by_name(&self, name: &str) -> Option<Arc<Server>> {
        self.by_name.get(name).and_then(|id| self.by_id(*id))
    }

    pub fn by_private_ip(&self, ip: &str) -> Option<Arc<Server>> {
        self.by_private_ip.get(ip).and_then(|id| self.by_id(*id))
    }
}

/// What a probe says of an old snapshot.
enum Confirmation {
    /// No server changed since its list: it is the truth again.
    Current,
    /// These servers changed, fewer than a list has pages: the rest is the truth to the
    /// watermark, they are read when asked for.
    Servers(BTreeSet<i64>, Watermark),
    /// More servers changed; the watermark for the list that follows.
    Changed(Watermark),
    /// The probe cannot tell (switched off, failed, the snapshot too old, or its page does not
    /// reach back to the snapshot's watermark).
    Unknown,
}

/// Which server a lookup wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerKey<'a> {
    Id(i64),
    Name(&'a str),
    PrivateIp(&'a str),
}

impl ServerKey<'_> {
    fn find(&self, s: &Snapshot) -> Option<Arc<Server>> {
        match self {
            ServerKey::Id(id) => s.by_id(*id),
            ServerKey::Name(n) => s.by_name(n),
            ServerKey::PrivateIp(ip) => s.by_private_ip(ip),
        }
    }

    /// Whether `server` is the one this key asks for.
    fn matches(&self, server: &Server) -> bool {
        match self {
            ServerKey::Id(id) => server.id == *id,
            ServerKey::Name(n) => server.name == *n,
            ServerKey::PrivateIp(ip) => server.private_net.iter().any(|p| p.ip == *ip),
        }
    }
}

#[derive(Clone)]
pub(crate) struct ServerCache {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    mode: ServerCacheMode,
    /// Servers read one by one (`one` mode), by key, with when they were read. Misses are not
    /// kept: a server that is not there yet may be created any moment.
    single: RwLock<HashMap<String, (Instant, Arc<Server>)>>,
    max_age: Duration,
    miss_fresh: Duration,
    /// Confirms an old snapshot in one call; `None` when the relist period is 0 (always list).
    probe: Option<ChangeProbe>,
    relist_period: Duration,
    current: RwLock<Option<Arc<Snapshot>>>,
    refresh: tokio::sync::Mutex<()>,
}

impl fmt::Debug for ServerCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCache")
            .field("max_age", &self.inner.max_age)
            .finish()
    }
}

impl ServerCache {
    pub(crate) fn new(transport: Transport, config: &ServerCacheConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                probe: (!config.relist_period.is_zero())
                    .then(|| ChangeProbe::new(transport.clone())),
                relist_period: config.relist_period,
                transport,
                mode: config.mode,
                single: RwLock::new(HashMap::new()),
                max_age: config.max_age,
                miss_fresh: config.miss_fresh,
                current: RwLock::new(None),
                refresh: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The client's statistics (operations are counted there).
    pub(crate) fn stats(&self) -> &Arc<crate::stats::ClientStats> {
        self.inner.transport.stats()
    }

    fn current(&self) -> Option<Arc<Snapshot>> {
        self.inner
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A snapshot listed or confirmed less than `max_age` ago (confirming or refreshing
    /// single-flight if needed).
    pub(crate) async fn snapshot(&self, max_age: Duration) -> Result<Arc<Snapshot>, CloudError> {
        if let Some(s) = self.current()
            && s.is_current(max_age)
        {
            return Ok(s);
        }
        let _guard = self.inner.refresh.lock().await;
        let Some(s) = self.current() else {
            return self.list(None).await;
        };
        if s.is_current(max_age) {
            return Ok(s);
        }
        match self.confirm(&s).await {
            Confirmation::Current => Ok(s),
            Confirmation::Servers(ids, watermark) => {
                let stale = s.stale.union(&ids).copied().collect();
                let snap = Arc::new(s.patched(Vec::new(), stale, Some(watermark)));
                snap.confirm();
                self.set_current(snap.clone());
                Ok(snap)
            }
            Confirmation::Changed(watermark) => self.list(Some(watermark)).await,
            Confirmation::Unknown => self.list(None).await,
        }
    }

    /// Reads stale server `id` of snapshot `s` into the snapshot; `None`: it is gone.
    async fn read_stale(&self, s: &Snapshot, id: i64) -> Result<Option<Arc<Server>>, CloudError> {
        let server = self.get_by_id(id).await?.map(Arc::new);
        self.settle(s, vec![(id, server.clone())]);
        Ok(server)
    }

    /// Reads every stale server into the snapshot (before a lookup by private IP trusts a miss:
    /// a changed server may have the address now), or lists them all if that costs less.
    async fn read_all_stale(&self, s: &Snapshot) -> Result<Arc<Snapshot>, CloudError> {
        if s.stale.len() >= s.list_pages() {
            return self
                .refresh_after(Some(s.generation), self.inner.miss_fresh)
                .await;
        }
        let mut read = Vec::with_capacity(s.stale.len());
        for &id in &s.stale {
            read.push((id, self.get_by_id(id).await?.map(Arc::new)));
        }
        self.settle(s, read);
        match self.current() {
            Some(current) => Ok(current),
            None => self.refresh_after(None, self.inner.miss_fresh).await,
        }
    }

    /// Puts servers read one by one, after `seen` was current, into the current snapshot (see
    /// [`Snapshot::settled`]).
    fn settle(&self, seen: &Snapshot, read: Vec<(i64, Option<Arc<Server>>)>) {
        let mut current = self
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(settled) = current.as_ref().and_then(|s| s.settled(seen, read)) {
            *current = Some(Arc::new(settled));
        }
    }

    fn set_current(&self, snap: Arc<Snapshot>) {
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(snap);
    }

    /// Whether `s` is still the truth, by one probe (see the module docs).
    async fn confirm(&self, s: &Snapshot) -> Confirmation {
        let (Some(probe), Some(since)) = (&self.inner.probe, s.watermark) else {
            return Confirmation::Unknown;
        };
        if s.fetched.elapsed() >= self.inner.relist_period {
            return Confirmation::Unknown;
        }
        // Older pages of actions while they cost less than half a list.
        let newest = match probe.read_since(since, s.list_pages() / 2).await {
            Ok(newest) => newest,
            Err(e) => {
                tracing::debug!(error = %e, "server change probe failed; listing the servers");
                return Confirmation::Unknown;
            }
        };
        // Every action up to `since` was reflected already; one still running stays above the
        // new watermark and is read again next time.
        let watermark = newest.watermark().max(since);
        match newest.servers_changed_since(since) {
            Some(changed) if changed.is_empty() => {
                s.confirm();
                Confirmation::Current
            }
            // Servers still stale from earlier probes do not count: they cost nothing until a
            // lookup reads them, and each would cost that read whatever this probe says.
            Some(changed) if changed.len() < s.list_pages() => {
                Confirmation::Servers(changed, watermark)
            }
            Some(_) => Confirmation::Changed(watermark),
            None => Confirmation::Changed(newest.watermark()),
        }
    }

    /// Refreshes unless another caller already produced a snapshot newer than generation `seen`
    /// that is younger than `max_age`: a miss wants a list made after it, not a confirmation.
    async fn refresh_after(
        &self,
        seen: Option<u64>,
        max_age: Duration,
    ) -> Result<Arc<Snapshot>, CloudError> {
        let _guard = self.inner.refresh.lock().await;
        if let Some(s) = self.current()
            && Some(s.generation) != seen
            && s.fetched.elapsed() < max_age
        {
            return Ok(s);
        }
        self.list(None).await
    }

    /// Lists every server (the caller holds the refresh lock). `watermark`: from the probe read
    /// just before, if one was; else the probe is read first, so that an action started during the
    /// list shows as a change at the next probe.
    async fn list(&self, watermark: Option<Watermark>) -> Result<Arc<Snapshot>, CloudError> {
        let watermark = match (watermark, &self.inner.probe) {
            (Some(w), _) => Some(w),
            (None, Some(probe)) => match probe.read().await {
                Ok(newest) => Some(newest.watermark()),
                Err(e) => {
                    tracing::debug!(error = %e, "server change probe failed");
                    None
                }
            },
            (None, None) => None,
        };
        let servers =
            list_all::<ServersPage>(&self.inner.transport, Req::get("/servers", "/servers"))
                .await?;
        let generation = self.current().map(|s| s.generation).unwrap_or(0) + 1;
        let snap = Arc::new(Snapshot::build(generation, servers, watermark));
        self.set_current(snap.clone());
        Ok(snap)
    }

    /// The server as the current snapshot has it, whatever its age, without a call; `None`
    /// when there is no snapshot or it lacks the server.
    pub(crate) fn peek(&self, id: i64) -> Option<Arc<Server>> {
        self.current()?.by_id.get(&id).cloned()
    }

    /// Looks a server up. `Ok(None)` only when a fresh read (see module docs) does not find it.
    pub(crate) async fn lookup(
        &self,
        key: &ServerKey<'_>,
    ) -> Result<Option<Arc<Server>>, CloudError> {
        let cache_key = match (self.inner.mode, key) {
            (ServerCacheMode::All, _) | (_, ServerKey::PrivateIp(_)) => {
                return self.lookup_with_age(key, self.inner.max_age).await;
            }
            (_, ServerKey::Id(id)) => format!("id/{id}"),
            (_, ServerKey::Name(name)) => format!("name/{name}"),
        };
        if self.inner.mode == ServerCacheMode::One
            && let Some((read, server)) = self
                .inner
                .single
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&cache_key)
            && read.elapsed() < self.inner.max_age
        {
            return Ok(Some(server.clone()));
        }
        let found = match key {
            ServerKey::Id(id) => self.get_by_id(*id).await?,
            ServerKey::Name(name) => self.get_by_name(name).await?,
            ServerKey::PrivateIp(_) => unreachable!("answered from the list above"),
        }
        .map(Arc::new);
        if self.inner.mode == ServerCacheMode::One
            && let Some(server) = &found
        {
            let mut single = self.inner.single.write().unwrap_or_else(|e| e.into_inner());
            single.retain(|_, (read, _)| read.elapsed() < self.inner.max_age);
            single.insert(cache_key, (Instant::now(), server.clone()));
        }
        Ok(found)
    }

    /// Server `id`: a miss in the list is asked again with `GET /servers/{id}` (see
    /// [`lookup_with_age`](Self::lookup_with_age)), since lists lag behind creates; in the other
    /// modes the lookup was that read already.
    pub(crate) async fn by_id(&self, id: i64) -> Result<Option<Arc<Server>>, CloudError> {
        self.lookup(&ServerKey::Id(id)).await
    }

    /// Reads the server named `name` (`GET /servers?name=`): names are unique in a project.
    async fn get_by_name(&self, name: &str) -> Result<Option<Server>, CloudError> {
        let req = Req::get("/servers", "/servers").query("name", name);
        let page: ServersPage = self.inner.transport.call(&req).await?;
        Ok(page.servers.into_iter().find(|s| s.name == name))
    }

    /// Reads server `id` itself (`GET /servers/{id}`): the API's one unambiguous answer to "is it
    /// gone?". `None` only on a 404; a list that misses the server proves nothing, since lists lag
    /// behind creates.
    pub(crate) async fn get_by_id(&self, id: i64) -> Result<Option<Server>, CloudError> {
        let req = Req::get("/servers/{id}", format!("/servers/{id}"));
        match self.inner.transport.call::<ServerResponse>(&req).await {
            Ok(r) => Ok(Some(r.server)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Same as [`lookup`](Self::lookup) with a caller-specific max age (routes accept older data).
    pub(crate) async fn lookup_with_age(
        &self,
        key: &ServerKey<'_>,
        max_age: Duration,
    ) -> Result<Option<Arc<Server>>, CloudError> {
        let mut snap = self.snapshot(max_age).await?;
        match key.find(&snap) {
            Some(s) if !snap.stale.contains(&s.id) => return Ok(Some(s)),
            // Changed since the list: read it. Gone, that is the answer for its id; renamed or
            // readdressed, the name or address may be another server's now: a miss.
            Some(s) => {
                let read = self.read_stale(&snap, s.id).await?;
                if let ServerKey::Id(_) = key {
                    return Ok(read);
                }
                if let Some(read) = read
                    && key.matches(&read)
                {
                    return Ok(Some(read));
                }
                snap = self.current().unwrap_or(snap);
            }
            None => {}
        }
        if let ServerKey::PrivateIp(_) = key
            && !snap.stale.is_empty()
        {
            snap = self.read_all_stale(&snap).await?;
            if let Some(s) = key.find(&snap) {
                return Ok(Some(s));
            }
        }
        // An id is always asked (lists lag behind creates); otherwise a miss in a list this fresh,
        // with nothing stale, is final.
        if snap.fetched.elapsed() < self.inner.miss_fresh
            && snap.stale.is_empty()
            && !matches!(key, ServerKey::Id(_))
        {
            return Ok(None);
        }
        // Confirm the miss with data younger than the miss itself: the server itself by id or
        // name (one call, and no list lag; a stale one goes into the snapshot), a private IP by a
        // fresh list (the API has no filter for it; concurrent misses share one refresh).
        let found = match key {
            ServerKey::Id(id) => self.get_by_id(*id).await?.map(Arc::new),
            ServerKey::Name(name) => self.get_by_name(name).await?.map(Arc::new),
            ServerKey::PrivateIp(_) => {
                let snap = self
                    .refresh_after(Some(snap.generation), self.inner.miss_fresh)
                    .await?;
                return Ok(key.find(&snap));
            }
        };
        match (key, &found) {
            (ServerKey::Id(id), None) => self.settle(&snap, vec![(*id, None)]),
            (_, Some(s)) => self.settle(&snap, vec![(s.id, Some(s.clone()))]),
            _ => {}
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(id: i64, name: &str) -> Server {
        Server {
            id,
            name: name.into(),
            ..Server::default()
        }
    }

    /// A snapshot of servers 1 and 2 up to `watermark`, with `stale` marked.
    fn snapshot(watermark: i64, stale: &[i64]) -> Snapshot {
        let listed = Snapshot::build(1, vec![server(1, "a"), server(2, "b")], None);
        listed.patched(
            Vec::new(),
            stale.iter().copied().collect(),
            Some(Watermark::at(watermark)),
        )
    }

    #[test]
    fn a_read_settles_a_stale_server_while_no_probe_came_since() {
        let seen = snapshot(10, &[1, 2]);
        let settled = seen
            .settled(&seen, vec![(1, Some(Arc::new(server(1, "renamed"))))])
            .expect("server 1 was stale");
        assert_eq!(settled.stale, BTreeSet::from([2]));
        assert_eq!(
            settled.by_id(1).map(|s| s.name.clone()).as_deref(),
            Some("renamed")
        );
        assert!(settled.by_name("a").is_none());
        // Gone: out of the snapshot.
        let settled = seen.settled(&seen, vec![(2, None)]).expect("stale");
        assert!(settled.by_id(2).is_none());
        // Not stale: nothing to change.
        assert!(snapshot(10, &[]).settled(&seen, vec![(1, None)]).is_none());
    }

    #[test]
    fn a_read_made_before_a_later_probe_does_not_settle() {
        let seen = snapshot(10, &[1]);
        // A probe after the read named server 1 again for a newer action: the read may predate
        // it, so server 1 stays stale and is read again when asked for.
        let current = snapshot(11, &[1]);
        assert!(current.settled(&seen, vec![(1, None)]).is_none());
        assert_eq!(current.stale, BTreeSet::from([1]));
    }
}
