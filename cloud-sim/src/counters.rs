//! Per-endpoint request counters and a bounded request log, for tests and benchmarks that
//! assert "at most N cloud calls per reconcile".

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// One API request as the simulator saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestLogEntry {
    pub seq: u64,
    pub method: String,
    /// Path template without `/v1`, e.g. `/servers/{id}`; the raw path for unknown paths.
    pub endpoint: String,
    /// Path and query as sent.
    pub uri: String,
    pub status: u16,
    pub duration_ms: u64,
    pub at: String,
}

#[derive(Debug)]
pub struct Counters {
    by_endpoint: Mutex<HashMap<String, u64>>,
    total: AtomicU64,
    seq: AtomicU64,
    log: Mutex<VecDeque<RequestLogEntry>>,
    log_capacity: usize,
}

pub fn key(method: &str, endpoint: &str) -> String {
    format!("{} {endpoint}", method.to_ascii_uppercase())
}

impl Counters {
    pub fn new(log_capacity: usize) -> Self {
        Counters {
            by_endpoint: Mutex::default(),
            total: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            log: Mutex::default(),
            log_capacity,
        }
    }

    pub fn record(&self, mut entry: RequestLogEntry) {
        self.total.fetch_add(1, Ordering::Relaxed);
        *self
            .by_endpoint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key(&entry.method, &entry.endpoint))
            .or_default() += 1;
        entry.seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= self.log_capacity {
            log.pop_front();
        }
        log.push_back(entry);
    }

    pub fn get(&self, method: &str, endpoint: &str) -> u64 {
        self.by_endpoint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key(method, endpoint))
            .copied()
            .unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> HashMap<String, u64> {
        self.by_endpoint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn log(&self) -> Vec<RequestLogEntry> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    pub fn reset(&self) {
        self.by_endpoint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.total.store(0, Ordering::Relaxed);
    }
}
