//! The metric families HCCM serves, under HCCM's names, types and labels, so that dashboards and
//! alerts written for it keep working after a switch. They sit next to ours (`cloud_controllers_*`)
//! on the same `/metrics` page, in a registry without prefix ([`crate::Runtime::registries_mut`]).
//!
//! The cloud API's families are the provider's to name ([`ApiMetricFamilies`]); Hetzner's are
//! hcloud-go's instrumentation, `hcloud_api_requests_total{code,method,api_endpoint}`,
//! `hcloud_api_request_duration_seconds{method}`, `hcloud_api_in_flight_requests`, and HCCM's
//! `cloud_controller_manager_operations_total{op}`. From client-go: `leader_election_master_status
//! {name}`. From Prometheus's process collector: `process_*`. The controllers register
//! k8s.io/cloud-provider's own series (`service_controller_*`, `route_controller_*`,
//! `node_controller_*`) themselves. Go's `go_*` runtime series have no meaning for this process
//! and are not served; `workqueue_*` and `rest_client_*` neither (their counterparts are
//! `cloud_controllers_queue_depth`, `_reconciles_total`, `_kube_api_requests_total`).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::Histogram;

use cloud_client::stats::LATENCY_BUCKETS;
use cloud_client::{ApiMetricFamilies, ClientStats};

/// The API families the provider declares ([`ApiMetricFamilies`]; Hetzner: hcloud-go's and
/// HCCM's), read from cloud-client's statistics at scrape time.
#[derive(Debug)]
pub struct ApiFamiliesCollector {
    stats: Arc<ClientStats>,
    families: ApiMetricFamilies,
}

impl ApiFamiliesCollector {
    /// Serves the statistics of one cloud client under `families`.
    pub fn new(stats: Arc<ClientStats>, families: ApiMetricFamilies) -> Self {
        Self { stats, families }
    }
}

impl Collector for ApiFamiliesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.stats.snapshot();
        let f = &self.families;
        {
            let mut requests = encoder.encode_descriptor(
                f.requests.name,
                f.requests.help,
                None,
                MetricType::Counter,
            )?;
            // hcloud-go counts answered requests only (no status, no sample).
            for (key, count) in snap.calls.iter().filter(|(k, _)| k.status != 0) {
                let labels = [
                    ("code", key.status.to_string()),
                    ("method", key.method.to_ascii_lowercase()),
                    ("api_endpoint", (f.api_endpoint)(&key.endpoint)),
                ];
                requests
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(count, None)?;
            }
        }
        {
            let mut durations = encoder.encode_descriptor(
                f.request_duration.name,
                f.request_duration.help,
                None,
                MetricType::Histogram,
            )?;
            for (method, latency) in &snap.latency {
                // Per bucket, not cumulative (the encoder adds up); the rest above the last bound.
                let above = latency.count - latency.buckets.iter().sum::<u64>();
                let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
                    .iter()
                    .copied()
                    .zip(latency.buckets)
                    .chain(std::iter::once((f64::INFINITY, above)))
                    .collect();
                durations
                    .encode_family(&[("method", method.to_ascii_lowercase())])?
                    .encode_histogram::<NoLabelSet>(latency.sum, latency.count, &buckets, None)?;
            }
        }
        encoder
            .encode_descriptor(f.in_flight.name, f.in_flight.help, None, MetricType::Gauge)?
            .encode_gauge(&snap.in_flight)?;
        let mut operations = encoder.encode_descriptor(
            f.operations.name,
            f.operations.help,
            None,
            MetricType::Counter,
        )?;
        for (op, count) in &snap.operations {
            operations
                .encode_family(&[("op", *op)])?
                .encode_counter::<NoLabelSet, _, u64>(count, None)?;
        }
        Ok(())
    }
}

/// Prometheus's standard `process_*` families (as client_golang's process collector serves them),
/// read from `/proc` at scrape time.
#[derive(Debug)]
pub struct ProcessCollector {
    /// `/proc/self`; another directory of the same layout in tests.
    proc_dir: std::path::PathBuf,
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self {
            proc_dir: "/proc/self".into(),
        }
    }
}

/// Linux's clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on every Linux platform we run on)
/// and page size are constants here, to need no libc.
const TICKS_PER_SECOND: f64 = 100.0;

impl ProcessCollector {
    fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.proc_dir.join(file)).ok()
    }

    /// `status`'s line `key:` in bytes (the kernel writes kB).
    fn status_bytes(&self, key: &str) -> Option<i64> {
        let status = self.read("status")?;
        let kib: i64 = status
            .lines()
            .find(|l| l.starts_with(key))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    /// The fields of `stat` after the command name (which is in parentheses and may contain
    /// spaces): index 0 is field 3, `state`.
    fn stat_fields(&self) -> Option<Vec<String>> {
        let stat = self.read("stat")?;
        Some(
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        )
    }

    /// User plus system CPU time.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let f = self.stat_fields()?;
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        Some((utime + stime) / TICKS_PER_SECOND)
    }

    /// Resident memory in bytes.
    pub fn resident_bytes(&self) -> Option<i64> {
        self.status_bytes("VmRSS:")
    }

    /// Open file descriptors.
    pub fn open_fds(&self) -> Option<i64> {
        Some(std::fs::read_dir(self.proc_dir.join("fd")).ok()?.count() as i64)
    }

    fn max_fds(&self) -> Option<i64> {
        let limits = self.read("limits")?;
        limits
            .lines()
            .find(|l| l.starts_with("Max open files"))?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()
    }

    /// Start time in seconds since the epoch: boot time plus `stat`'s `starttime` ticks.
    fn start_time_seconds(&self) -> Option<f64> {
        let ticks: f64 = self.stat_fields()?.get(19)?.parse().ok()?;
        let boot: f64 = std::fs::read_to_string(self.proc_dir.join("../stat"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        Some(boot + ticks / TICKS_PER_SECOND)
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(seconds) = self.cpu_seconds() {
            encoder
                .encode_descriptor(
                    "process_cpu_seconds",
                    "Total user and system CPU time spent in seconds.",
                    None,
                    MetricType::Counter,
                )?
                .encode_counter::<NoLabelSet, _, u64>(&seconds, None)?;
        }
        let int_gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                self.resident_bytes(),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                self.status_bytes("VmSize:"),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                self.open_fds(),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                self.max_fds(),
            ),
        ];
        for (name, help, value) in int_gauges {
            if let Some(value) = value {
                encoder
                    .encode_descriptor(name, help, None, MetricType::Gauge)?
                    .encode_gauge(&value)?;
            }
        }
        if let Some(start) = self.start_time_seconds() {
            encoder
                .encode_descriptor(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&start)?;
        }
        Ok(())
    }
}

/// Upstream's histogram buckets for the cloud-provider controllers' latencies: 1 s to 16384 s.
pub fn upstream_latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1.0, 2.0, 15,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::metrics::{Registries, encode};

    fn value(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    /// Read from a directory laid out like `/proc/self` (its parent holding `stat`), so the
    /// figures are exact; then from the real one.
    #[test]
    fn process_figures_are_read_at_scrape_time_under_the_standard_names() {
        let root = std::env::temp_dir().join(format!("proc-figures-{}", std::process::id()));
        let dir = root.join("self");
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        std::fs::write(
            dir.join("status"),
            "Name:\tx\nVmSize:\t   10240 kB\nVmRSS:\t    2048 kB\n",
        )
        .unwrap();
        // pid (comm) state ppid ... utime=250 stime=50 ... starttime=1000
        let mut stat = vec!["0"; 50];
        stat[11] = "250";
        stat[12] = "50";
        stat[19] = "1000";
        std::fs::write(dir.join("stat"), format!("7 (a b) {}", stat.join(" "))).unwrap();
        std::fs::write(root.join("stat"), "cpu 1 2 3\nbtime 1700000000\n").unwrap();
        std::fs::write(
            dir.join("limits"),
            "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n",
        )
        .unwrap();
        for fd in ["0", "1", "2"] {
            std::fs::write(dir.join("fd").join(fd), "").unwrap();
        }
        let mut reg = Registries::default();
        reg.upstream.register_collector(Box::new(ProcessCollector {
            proc_dir: dir.clone(),
        }));
        let text = encode(&reg);
        assert_eq!(
            value(&text, "process_resident_memory_bytes"),
            2048.0 * 1024.0
        );
        assert_eq!(
            value(&text, "process_virtual_memory_bytes"),
            10240.0 * 1024.0
        );
        assert_eq!(value(&text, "process_cpu_seconds_total"), 3.0);
        assert_eq!(value(&text, "process_max_fds"), 1024.0);
        assert_eq!(value(&text, "process_start_time_seconds"), 1_700_000_010.0);
        assert_eq!(value(&text, "process_open_fds"), 3.0);
        for fd in ["3", "4"] {
            std::fs::write(dir.join("fd").join(fd), "").unwrap();
        }
        assert_eq!(value(&encode(&reg), "process_open_fds"), 5.0);
        std::fs::remove_dir_all(&root).unwrap();

        let mut real = Registries::default();
        real.upstream
            .register_collector(Box::new(ProcessCollector::default()));
        let text = encode(&real);
        assert!(
            value(&text, "process_resident_memory_bytes") > 1e6,
            "{text}"
        );
        assert!(value(&text, "process_start_time_seconds") > 1.6e9, "{text}");
        assert!(value(&text, "process_max_fds") >= 3.0, "{text}");
    }

    #[test]
    fn the_api_families_are_the_ones_the_provider_declares() {
        use cloud_client::MetricFamily;
        let family = |name| MetricFamily { name, help: "h" };
        let families = ApiMetricFamilies {
            requests: family("other_api_requests"),
            request_duration: family("other_api_request_duration_seconds"),
            in_flight: family("other_api_in_flight_requests"),
            operations: family("other_operations"),
            api_endpoint: |t| t.to_uppercase(),
        };
        let stats = ClientStats::new();
        stats.record_operation("op/One");
        let mut reg = Registries::default();
        reg.upstream
            .register_collector(Box::new(ApiFamiliesCollector::new(stats, families)));
        let text = encode(&reg);
        assert_eq!(value(&text, "other_api_in_flight_requests"), 0.0);
        assert_eq!(value(&text, r#"other_operations_total{op="op/One"}"#), 1.0);
        assert!(!text.contains("hcloud_api"), "{text}");
    }
}
