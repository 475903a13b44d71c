//! The address map: where a simulated address is reached on this host.
//!
//! Simulated addresses (100.64.x.y public IPv4s, 10.x private IPs, 198.18.x Robot addresses,
//! IP targets) are usually not assigned to any interface here, so nothing could listen on them.
//! An address that is assigned on this host (binding `ip:0` succeeds) stands for itself: that is
//! how the real-node cluster works, whose node's IP is real. Any other address gets a loopback
//! address of its own, handed out in order from `127.B.0.1` upward, `B` a /16 block this process
//! holds alone ([`loopback_base`]): Linux routes all of 127.0.0.0/8 to the loopback interface and
//! lets non-root processes bind any of it.
//!
//! Tests bind the stand-in for a node (its NodePort, kube-proxy) to `local(server_ip)`, and the
//! data plane connects to `local(target_ip)`: both sides agree through this table.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// Loopback addresses handed out so far, by every simulator in this process. Shared on purpose:
/// tests run many simulators side by side in one process, and each one's first server has the
/// same simulated address (100.64.0.1); distinct loopback addresses keep their responders apart.
static NEXT_LOOPBACK: AtomicU32 = AtomicU32::new(0);

/// The /16 blocks of 127.0.0.0/8 a process may claim: `127.1.0.0/16` to `127.254.0.0/16`.
const BLOCKS: u32 = 254;

/// The first loopback address this process hands out: `127.B.0.1`, in a /16 block no other
/// process holds. Test binaries run side by side, and each binds fixed ports (a node's kube-proxy
/// health port) on the addresses it is handed: two processes counting from the same address
/// collided (`Address already in use`). A block is held with a lock on a file named after it,
/// which the kernel drops when the process ends, however it ends.
fn loopback_base() -> Ipv4Addr {
    static BASE: OnceLock<Ipv4Addr> = OnceLock::new();
    *BASE.get_or_init(|| {
        match claim_block(&std::env::temp_dir(), std::process::id()) {
            Some((block, lock)) => {
                // Held until the process exits.
                std::mem::forget(lock);
                Ipv4Addr::new(127, block, 0, 1)
            }
            // Every block held (or no temporary directory): share the first, as before blocks.
            None => Ipv4Addr::new(127, 1, 0, 1),
        }
    })
}

/// The first block from `seed` on whose lock file in `dir` no one else holds a lock, and the
/// locked file.
fn claim_block(dir: &std::path::Path, seed: u32) -> Option<(u8, std::fs::File)> {
    (0..BLOCKS).find_map(|i| {
        let block = 1 + (seed + i) % BLOCKS;
        let path = dir.join(format!("cloud-sim-loopback-127.{block}.lock"));
        let file = std::fs::File::create(path).ok()?;
        file.try_lock().ok()?;
        Some((u8::try_from(block).ok()?, file))
    })
}

#[derive(Debug, Default)]
pub struct AddressMap {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<IpAddr, IpAddr>,
    /// Every local address in `map`, so a loopback address standing for itself (a simulated
    /// address that happens to be on this host) is never handed out a second time.
    locals: BTreeSet<IpAddr>,
}

impl AddressMap {
    /// The local address `ip` is reached at, allocating one on first use.
    pub fn local(&self, ip: IpAddr) -> IpAddr {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(local) = inner.map.get(&ip) {
            return *local;
        }
        let local = if on_this_host(ip) && !inner.locals.contains(&ip) {
            ip
        } else {
            loop {
                let n = NEXT_LOOPBACK.fetch_add(1, Ordering::Relaxed);
                let candidate = IpAddr::V4(Ipv4Addr::from(u32::from(loopback_base()) + n));
                if !inner.locals.contains(&candidate) && !inner.map.contains_key(&candidate) {
                    break candidate;
                }
            }
        };
        inner.map.insert(ip, local);
        inner.locals.insert(local);
        local
    }

    /// The whole map, simulated → local.
    pub fn snapshot(&self) -> BTreeMap<IpAddr, IpAddr> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .clone()
    }
}

/// Whether `ip` is assigned on this host: only then can a socket be bound to it.
fn on_this_host(ip: IpAddr) -> bool {
    !ip.is_unspecified() && !ip.is_multicast() && TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_held_by_another_is_skipped_and_freed_when_its_holder_ends() {
        let dir = tempfile::tempdir().unwrap();
        let (first, held) = claim_block(dir.path(), 4).unwrap();
        assert_eq!(first, 5);
        // Another open file of the same name cannot lock it while `held` lives (as another
        // process could not): the next block is claimed.
        let (second, _also_held) = claim_block(dir.path(), 4).unwrap();
        assert_eq!(second, 6);
        drop(held);
        assert_eq!(claim_block(dir.path(), 4).unwrap().0, 5);
        // Blocks wrap around within 127.1 to 127.254, never 127.0 (127.0.0.1's) or 127.255.
        assert_eq!(claim_block(dir.path(), BLOCKS - 1).unwrap().0, 254);
        assert_eq!(claim_block(dir.path(), BLOCKS).unwrap().0, 1);
    }

    #[test]
    fn unassigned_addresses_get_distinct_loopback_addresses_and_keep_them() {
        let map = AddressMap::default();
        // TEST-NET-3 addresses are never assigned to a real interface.
        let a: IpAddr = "203.0.113.10".parse().unwrap();
        let b: IpAddr = "203.0.113.11".parse().unwrap();
        let la = map.local(a);
        let lb = map.local(b);
        assert!(la.is_loopback() && lb.is_loopback(), "{la} {lb}");
        assert_ne!(la, lb);
        assert_eq!(map.local(a), la, "stable on the second ask");
        assert_eq!(map.snapshot(), BTreeMap::from([(a, la), (b, lb)]));
        // The loopback address really is bindable (what tests rely on).
        assert!(TcpListener::bind(SocketAddr::new(la, 0)).is_ok());
    }

    #[test]
    fn an_address_on_this_host_stands_for_itself() {
        let map = AddressMap::default();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(map.local(lo), lo);
    }
}
