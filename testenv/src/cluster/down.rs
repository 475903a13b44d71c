//! Stopping the cluster and undoing every change `up` made to the host.

use std::time::Duration;

use super::host;
use super::layout::Layout;
use super::procs::{STOP_GRACE, cluster_error};
use super::state::{RecordedProcess, State};
use crate::binaries;
use crate::error::Result;

/// Stops the cluster in the default state directory and undoes its changes to the host; returns
/// what it did, one line per action. Safe to run when nothing runs.
pub fn down() -> Result<Vec<String>> {
    down_in(&Layout::default())
}

pub fn down_in(l: &Layout) -> Result<Vec<String>> {
    let mut log = Vec::new();
    let state = State::read(l);
    let recorded: Vec<RecordedProcess> = state
        .as_ref()
        .map(|s| s.processes.clone())
        .unwrap_or_default();
    let stop = |names: &[&str], log: &mut Vec<String>| {
        for p in recorded.iter().rev() {
            if names.contains(&p.name.as_str()) && p.alive() {
                host::stop_pid(p.pid, STOP_GRACE);
                log.push(format!("stopped {} (pid {})", p.name, p.pid));
            }
        }
    };
    // The node's agents first, so nothing restarts pods or rewrites rules while we clean up.
    stop(
        &[
            "kube-proxy",
            "kubelet",
            "kube-scheduler",
            "kube-controller-manager",
        ],
        &mut log,
    );
    host::remove_kubepods_cgroups(&mut log);
    stop(
        &[
            "cloud-sim",
            "containerd",
            "registry",
            "kube-apiserver",
            "etcd",
        ],
        &mut log,
    );
    // containerd's shims outlive it; after a crash, anything `up` started without recording it
    // (cloud-sim runs from a copy in bin/).
    let strays: Vec<(u32, String)> = [binaries::cache_dir(), l.bin()]
        .iter()
        .flat_map(|root| host::stray_processes(root, l.root()))
        .collect();
    for (pid, cmdline) in strays {
        host::stop_pid(pid, Duration::from_secs(2));
        log.push(format!(
            "stopped stray process {pid}: {}",
            binaries::tail(&cmdline, 1)
                .chars()
                .take(100)
                .collect::<String>()
        ));
    }
    host::remove_kubepods_cgroups(&mut log);
    host::unmount_under(l.root(), &mut log);
    host::remove_links(&mut log);
    host::remove_iptables_rules(&mut log);
    if let Some(state) = &state {
        host::restore_sysctls(&state.sysctls_before, &mut log);
        host::remove_created_paths(&state.absent_paths, &mut log);
        host::remove_empty_tables(&state.tables_before, &mut log);
        if let Some(address) = &state.added_address {
            host::remove_loopback_address(address, &mut log);
        }
    }
    let remaining = host::mounts_under(l.root());
    if !remaining.is_empty() {
        return Err(cluster_error(
            "unmounting",
            format!("still mounted: {remaining:?}"),
        ));
    }
    let _ = std::fs::remove_file(l.state_file());
    if state.is_some() {
        log.push(format!("removed {}", l.state_file().display()));
    }
    Ok(log)
}
