//! The shared server snapshot: one paginated `GET /servers` list serves every lookup (by id, name,
//! private IP) until it is older than the max age. Refreshes are single-flight: concurrent callers
//! wait for the one list in progress instead of starting their own.
//!
//! That is `HCLOUD_SERVER_CACHE_MODE=all`, the default. With `one`, a lookup by id or name reads
//! that one server (`GET /servers/{id}`, `GET /servers?name=`) and keeps the answer for the max
//! age; with `off` it reads it every time. Lookups by private IP (routes) always use the list.
//!
//! A miss is never trusted from an old snapshot: unless the snapshot is younger than `miss_fresh`
//! (or a refresh already happened since the caller's snapshot was taken), one fresh list is fetched
//! before "not found" is reported. That is what keeps a stale cache from ever deleting a Node.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::CloudError;
use crate::hcloud::config::ServerCacheMode;
use crate::hcloud::pagination::list_all;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::{Server, ServerResponse, ServersPage};

/// One consistent list of all servers with its indexes.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub generation: u64,
    pub fetched: Instant,
    by_id: HashMap<i64, Arc<Server>>,
    by_name: HashMap<String, i64>,
    by_private_ip: HashMap<String, i64>,
}

impl Snapshot {
    fn build(generation: u64, servers: Vec<Server>) -> Self {
        let mut s = Snapshot {
            generation,
            fetched: Instant::now(),
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
            s.by_id.insert(srv.id, Arc::new(srv));
        }
        s
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
    pub(crate) fn new(
        transport: Transport,
        mode: ServerCacheMode,
        max_age: Duration,
        miss_fresh: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                transport,
                mode,
                single: RwLock::new(HashMap::new()),
                max_age,
                miss_fresh,
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

    /// A snapshot no older than `max_age` (refreshing single-flight if needed).
    pub(crate) async fn snapshot(&self, max_age: Duration) -> Result<Arc<Snapshot>, CloudError> {
        if let Some(s) = self.current()
            && s.fetched.elapsed() < max_age
        {
            return Ok(s);
        }
        let seen = self.current().map(|s| s.generation);
        self.refresh_after(seen, max_age).await
    }

    /// Refreshes unless another caller already produced a snapshot newer than generation `seen`
    /// that is younger than `max_age`.
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
        let servers =
            list_all::<ServersPage>(&self.inner.transport, Req::get("/servers", "/servers"))
                .await?;
        let generation = seen
            .unwrap_or(0)
            .max(self.current().map(|s| s.generation).unwrap_or(0))
            + 1;
        let snap = Arc::new(Snapshot::build(generation, servers));
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(snap.clone());
        Ok(snap)
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

    /// Server `id`: a miss in the list is asked again with `GET /servers/{id}`, since lists lag
    /// behind creates; in the other modes the lookup was that read already.
    pub(crate) async fn by_id(&self, id: i64) -> Result<Option<Arc<Server>>, CloudError> {
        match self.lookup(&ServerKey::Id(id)).await? {
            None if self.inner.mode == ServerCacheMode::All => {
                Ok(self.get_by_id(id).await?.map(Arc::new))
            }
            found => Ok(found),
        }
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
        let snap = self.snapshot(max_age).await?;
        if let Some(s) = key.find(&snap) {
            return Ok(Some(s));
        }
        if snap.fetched.elapsed() < self.inner.miss_fresh {
            return Ok(None);
        }
        // Confirm the miss with data younger than the miss itself; concurrent misses share one refresh.
        let snap = self
            .refresh_after(Some(snap.generation), self.inner.miss_fresh)
            .await?;
        Ok(key.find(&snap))
    }
}
