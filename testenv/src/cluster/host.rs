//! What a node changes on the host, and undoing it: mounts, interfaces, iptables chains, sysctls,
//! cgroups, directories outside the state directory, and processes. Every function here is
//! idempotent and works from what it finds, so `down` also cleans up after a `kill -9`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::layout::{BRIDGE, CNI_NETWORK};

/// Sysctls the node's components may change (the bridge plugin: ip_forward; kubelet: its kernel
/// tunables), recorded before `up` and written back by `down`.
pub const SYSCTLS: [&str; 9] = [
    "net/ipv4/ip_forward",
    "net/ipv6/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// Directories outside the state directory that a component creates at a path it does not let us
/// configure: containerd's shim sockets (`/run/containerd/s`), go-cni's result cache
/// (`/var/lib/cni`), kubelet's device-plugin directory (`/var/lib/kubelet/device-plugins`) and
/// container-log links (`/var/log/containers`). `down` removes those that did not exist before
/// `up`. The others are listed to catch a component that starts using them.
pub const HOST_PATHS: [&str; 12] = [
    "/run/containerd",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/usr/libexec/kubernetes",
    "/run/netns",
    "/etc/cni",
    "/opt/cni",
    "/opt/containerd",
    "/var/lib/containerd",
    "/run/kubernetes",
];

pub fn read_sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|name| {
            let value = std::fs::read_to_string(Path::new("/proc/sys").join(name)).ok()?;
            Some((name.to_string(), value.trim().to_owned()))
        })
        .collect()
}

pub fn restore_sysctls(before: &BTreeMap<String, String>, log: &mut Vec<String>) {
    for (name, value) in before {
        let path = Path::new("/proc/sys").join(name);
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now.trim() != value && std::fs::write(&path, value).is_ok() {
            log.push(format!("sysctl {name}: {} -> {value}", now.trim()));
        }
    }
}

/// Host paths from [`HOST_PATHS`] that do not exist (yet).
pub fn absent_host_paths() -> Vec<String> {
    HOST_PATHS
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .map(|p| p.to_string())
        .collect()
}

pub fn remove_created_paths(created: &[String], log: &mut Vec<String>) {
    for path in created {
        let path = Path::new(path);
        if !path.exists() {
            continue;
        }
        unmount_under(path, log);
        // `/run/netns` is shared with other users of network namespaces (podman): only when empty.
        let removed = if path == Path::new("/run/netns") {
            std::fs::remove_dir(path)
        } else {
            std::fs::remove_dir_all(path)
        };
        match removed {
            Ok(()) => log.push(format!("removed {}", path.display())),
            Err(e) => log.push(format!("could not remove {}: {e}", path.display())),
        }
    }
}

/// Mount points at or under `dir`, deepest first (from /proc/self/mountinfo; octal escapes undone).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

fn unescape(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && let Ok(digits) = std::str::from_utf8(digits)
            && let Ok(v) = u8::from_str_radix(digits, 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Lazily unmounts everything at or under `dir` (stacked mounts too).
pub fn unmount_under(dir: &Path, log: &mut Vec<String>) {
    for _ in 0..10 {
        let mounts = mounts_under(dir);
        if mounts.is_empty() {
            return;
        }
        for m in mounts {
            if umount(&m) {
                log.push(format!("unmounted {}", m.display()));
            }
        }
    }
}

fn umount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: umount2 reads a NUL-terminated path that outlives the call.
    unsafe {
        libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0
    }
}

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Deletes the veths on the pod bridge, then the bridge.
pub fn remove_links(log: &mut Vec<String>) {
    if let Some(text) = run("ip", &["-o", "link", "show", "master", BRIDGE]) {
        for line in text.lines() {
            if let Some(name) = line.split(": ").nth(1) {
                let name = name.split('@').next().unwrap_or(name);
                if run("ip", &["link", "delete", name]).is_some() {
                    log.push(format!("deleted link {name}"));
                }
            }
        }
    }
    if run("ip", &["link", "show", BRIDGE]).is_some()
        && run("ip", &["link", "delete", BRIDGE]).is_some()
    {
        log.push(format!("deleted link {BRIDGE}"));
    }
}

/// Adds `address` (`/32`, or `/128` for IPv6) to `lo`, for a kubelet `--node-ip` the machine does
/// not otherwise have. An address already there is fine.
pub fn add_loopback_address(address: &str) -> crate::error::Result<()> {
    let cidr = loopback_cidr(address);
    if run("ip", &["addr", "show", "dev", "lo", "to", &cidr])
        .is_some_and(|out| !out.trim().is_empty())
    {
        return Ok(());
    }
    run("ip", &["addr", "add", &cidr, "dev", "lo"])
        .map(drop)
        .ok_or_else(|| crate::error::Error::Cluster {
            step: "adding kubelet's node IP".to_owned(),
            message: format!("ip addr add {cidr} dev lo failed"),
        })
}

/// Removes what [`add_loopback_address`] added.
pub fn remove_loopback_address(address: &str, log: &mut Vec<String>) {
    let cidr = loopback_cidr(address);
    if run("ip", &["addr", "del", &cidr, "dev", "lo"]).is_some() {
        log.push(format!("removed address {cidr} from lo"));
    }
}

fn loopback_cidr(address: &str) -> String {
    if address.contains(':') {
        format!("{address}/128")
    } else {
        format!("{address}/32")
    }
}

/// Whether an iptables chain is one the node's components made: kubelet and kube-proxy name
/// theirs `KUBE-*`, the CNI plugins theirs `CNI-*`.
fn ours(chain: &str) -> bool {
    chain.starts_with("KUBE-") || chain.starts_with("CNI-")
}

/// Removes every `KUBE-*` and `CNI-*` chain and every rule that jumps to one or carries the pod
/// network's CNI comment, in each table of iptables and ip6tables.
pub fn remove_iptables_rules(log: &mut Vec<String>) {
    for (save, restore) in [
        ("iptables-save", "iptables-restore"),
        ("ip6tables-save", "ip6tables-restore"),
    ] {
        let Some(dump) = run(save, &[]) else {
            continue;
        };
        let script = cleanup_script(&dump);
        if script.is_empty() {
            continue;
        }
        let ok = (|| {
            use std::io::Write as _;
            let mut child = Command::new(restore)
                .arg("--noflush")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .ok()?;
            child.stdin.take()?.write_all(script.as_bytes()).ok()?;
            let out = child.wait_with_output().ok()?;
            if !out.status.success() {
                log.push(format!(
                    "{restore} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Some(out.status.success())
        })();
        if ok == Some(true) {
            let chains = script.lines().filter(|l| l.starts_with("-X ")).count();
            log.push(format!("{save}: removed {chains} chains"));
        }
    }
}

/// An `iptables-restore --noflush` script undoing our rules in the `iptables-save` output `dump`.
fn cleanup_script(dump: &str) -> String {
    let mut script = String::new();
    let mut table = String::new();
    let mut deletes = Vec::new();
    let mut chains = Vec::new();
    let mut flush = |table: &str, deletes: &mut Vec<String>, chains: &mut Vec<String>| {
        if deletes.is_empty() && chains.is_empty() {
            return;
        }
        let _ = writeln!(script, "*{table}");
        for d in deletes.drain(..) {
            let _ = writeln!(script, "{d}");
        }
        for c in chains.iter() {
            let _ = writeln!(script, "-F {c}");
        }
        for c in chains.drain(..) {
            let _ = writeln!(script, "-X {c}");
        }
        let _ = writeln!(script, "COMMIT");
    };
    for line in dump.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_owned();
        } else if line == "COMMIT" {
            flush(&table, &mut deletes, &mut chains);
        } else if let Some(decl) = line.strip_prefix(':') {
            let name = decl.split(' ').next().unwrap_or_default();
            if ours(name) {
                chains.push(name.to_owned());
            }
        } else if let Some(rule) = line.strip_prefix("-A ") {
            let chain = rule.split(' ').next().unwrap_or_default();
            if ours(chain) {
                continue; // flushed with its chain
            }
            let words: Vec<&str> = rule.split(' ').collect();
            let jumps_to_ours = words
                .windows(2)
                .any(|w| (w[0] == "-j" || w[0] == "-g") && ours(w[1]));
            let our_comment = rule.contains(&format!("name: \\\"{CNI_NETWORK}\\\""));
            if jumps_to_ours || our_comment {
                deletes.push(format!("-D {rule}"));
            }
        }
    }
    script
}

/// The tables in iptables-save and ip6tables-save output, as nft names them (`ip nat`, `ip6 filter`).
pub fn iptables_tables() -> Vec<String> {
    let mut tables = Vec::new();
    for (save, family) in [("iptables-save", "ip"), ("ip6tables-save", "ip6")] {
        for line in run(save, &[]).unwrap_or_default().lines() {
            if let Some(t) = line.strip_prefix('*') {
                tables.push(format!("{family} {t}"));
            }
        }
    }
    tables
}

/// With iptables' nf_tables backend, the first rule in a table creates the table, and it stays
/// after its rules are gone. Deletes the tables that did not exist before `up` and are empty now
/// (only built-in chains, no rules), so the host's ruleset is as it was.
pub fn remove_empty_tables(before: &[String], log: &mut Vec<String>) {
    let nf_tables = run("iptables", &["-V"]).is_some_and(|v| v.contains("nf_tables"));
    if !nf_tables {
        return;
    }
    for (save, family) in [("iptables-save", "ip"), ("ip6tables-save", "ip6")] {
        let dump = run(save, &[]).unwrap_or_default();
        for (table, empty) in table_emptiness(&dump) {
            let name = format!("{family} {table}");
            if empty
                && !before.contains(&name)
                && run("nft", &["delete", "table", family, &table]).is_some()
            {
                log.push(format!("deleted empty nftables table {name}"));
            }
        }
    }
}

/// Each table of an iptables-save dump, and whether it has no rules and only built-in chains.
fn table_emptiness(dump: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for line in dump.lines() {
        if let Some(t) = line.strip_prefix('*') {
            out.push((t.to_owned(), true));
        } else if let Some(last) = out.last_mut() {
            let builtin_chain = line.strip_prefix(':').is_some_and(|c| {
                let policy = c.split(' ').nth(1).unwrap_or("-");
                policy != "-"
            });
            if line.starts_with("-A ") || (line.starts_with(':') && !builtin_chain) {
                last.1 = false;
            }
        }
    }
    out
}

/// The cgroup directories kubelet made (`kubepods` in every hierarchy), after killing what runs in
/// them; returns how many processes were killed.
pub fn remove_kubepods_cgroups(log: &mut Vec<String>) -> usize {
    let killed = kill_kubepods();
    if killed > 0 {
        log.push(format!("killed {killed} pod processes"));
    }
    for root in kubepods_roots() {
        let mut dirs = Vec::new();
        walk_dirs(&root, &mut dirs);
        dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        let mut failed = 0;
        for d in &dirs {
            if std::fs::remove_dir(d).is_err() {
                failed += 1;
            }
        }
        if failed == 0 {
            log.push(format!("removed cgroup {}", root.display()));
        } else {
            log.push(format!(
                "could not remove {failed} cgroups under {}",
                root.display()
            ));
        }
    }
    killed
}

/// `kubepods` (and `kubepods.slice`) under every mounted hierarchy of /sys/fs/cgroup.
pub fn kubepods_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let base = Path::new("/sys/fs/cgroup");
    let mut candidates = vec![base.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(base) {
        candidates.extend(entries.flatten().map(|e| e.path()));
    }
    for dir in candidates {
        for name in ["kubepods", "kubepods.slice"] {
            let p = dir.join(name);
            if p.is_dir() {
                roots.push(p);
            }
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

fn walk_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk_dirs(&e.path(), out);
            }
        }
    }
}

/// SIGKILLs every process in a kubepods cgroup until none is left (or 10 s pass).
fn kill_kubepods() -> usize {
    let mut killed = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut pids = Vec::new();
        for root in kubepods_roots() {
            let mut dirs = Vec::new();
            walk_dirs(&root, &mut dirs);
            for d in dirs {
                let text = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        pids.retain(|p| crate::process::pid_alive(*p as u32));
        if pids.is_empty() || Instant::now() > deadline {
            return killed.len();
        }
        for pid in pids {
            signal(pid as u32, libc::SIGKILL);
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    #[allow(unsafe_code)]
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The start time of a process (clock ticks since boot, field 22 of /proc/PID/stat), which tells
/// a recorded process from a later one that got the same pid.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Processes whose executable lies under `bin_root` (the build cache) and whose command line names
/// `state_dir`: what a cluster started, found without its state file (containerd's shims, which
/// outlive it, and everything after a crash of `up`).
pub fn stray_processes(bin_root: &Path, state_dir: &Path) -> Vec<(u32, String)> {
    let me = std::process::id();
    let needle = state_dir.display().to_string();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(exe) = std::fs::read_link(e.path().join("exe")) else {
            continue;
        };
        if !exe.starts_with(bin_root) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) && crate::process::pid_alive(pid) {
            found.push((pid, cmdline.trim().to_owned()));
        }
    }
    found
}

/// SIGTERM, up to `grace` to exit, then SIGKILL; waits until the process is gone.
pub fn stop_pid(pid: u32, grace: Duration) {
    if !crate::process::pid_alive(pid) {
        return;
    }
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !crate::process::pid_alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(pid, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(10);
    while crate::process::pid_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `down` must leave as `up` found it, as comparable text: interfaces, mounts (without ids;
/// podman's store, which other work on this machine uses, left out), iptables and ip6tables rules
/// (no counters), nftables tables, kubepods cgroups, the sysctls of [`SYSCTLS`] and which of
/// [`HOST_PATHS`] exist.
pub fn snapshot() -> String {
    let mut out = String::new();
    out.push_str("## interfaces\n");
    let mut links: Vec<String> = run("ip", &["-o", "link"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.to_owned())
        .collect();
    links.sort();
    for l in links {
        let _ = writeln!(out, "{l}");
    }

    out.push_str("## mounts\n");
    let podman_store = crate::binaries::home_cache().join("containers");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<String> = mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = unescape(fields.get(4)?);
            let sep = fields.iter().position(|f| *f == "-")?;
            let (fstype, source) = (fields.get(sep + 1)?, fields.get(sep + 2)?);
            let podman = Path::new(&point).starts_with(&podman_store)
                || point.contains("/cloud-controllers-containers-")
                || point.starts_with("/run/netns/netns-")
                || point.contains("/containers/storage/");
            (!podman).then(|| format!("{point} {fstype} {source}"))
        })
        .collect();
    mounts.sort();
    for m in mounts {
        let _ = writeln!(out, "{m}");
    }

    for save in ["iptables-save", "ip6tables-save"] {
        let _ = writeln!(out, "## {save}");
        for line in run(save, &[]).unwrap_or_default().lines() {
            if line.starts_with('#') {
                continue;
            }
            // Chain lines carry packet/byte counters: `:INPUT ACCEPT [12:3456]`.
            let line = match line.rsplit_once(" [") {
                Some((head, _)) if line.starts_with(':') => head,
                _ => line,
            };
            let _ = writeln!(out, "{line}");
        }
    }
    if let Some(tables) = run("nft", &["list", "tables"]) {
        out.push_str("## nft tables\n");
        out.push_str(&tables);
    }

    out.push_str("## cgroups\n");
    for root in kubepods_roots() {
        let _ = writeln!(out, "{}", root.display());
    }
    out.push_str("## sysctls\n");
    for (k, v) in read_sysctls() {
        let _ = writeln!(out, "{k} = {v}");
    }
    out.push_str("## host paths\n");
    for p in HOST_PATHS {
        let _ = writeln!(out, "{p}: {}", Path::new(p).exists());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_removes_our_chains_and_the_jumps_to_them() {
        let dump = r#"# Generated by iptables-save v1.8.9 (nf_tables)
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:NETAVARK-1 - [0:0]
-A INPUT -j KUBE-FIREWALL
-A FORWARD -j NETAVARK-1
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -j DROP
COMMIT
*nat
:POSTROUTING ACCEPT [0:0]
:CNI-abc - [0:0]
-A POSTROUTING -s 10.244.0.5/32 -m comment --comment "name: \"cloud-controllers\" id: \"x\"" -j CNI-abc
-A CNI-abc -d 10.244.0.0/24 -j ACCEPT
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
COMMIT
"#;
        let script = cleanup_script(dump);
        assert_eq!(
            script,
            "*filter\n-D INPUT -j KUBE-FIREWALL\n-F KUBE-FIREWALL\n-X KUBE-FIREWALL\nCOMMIT\n\
             *nat\n-D POSTROUTING -s 10.244.0.5/32 -m comment --comment \"name: \\\"cloud-controllers\\\" id: \\\"x\\\"\" -j CNI-abc\n\
             -F CNI-abc\n-X CNI-abc\nCOMMIT\n"
        );
    }

    #[test]
    fn tables_with_rules_or_own_chains_are_not_empty() {
        let dump = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\nCOMMIT\n\
                    *nat\n:POSTROUTING ACCEPT [0:0]\n:NETAVARK-1 - [0:0]\nCOMMIT\n\
                    *mangle\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j MARK --set-mark 1\nCOMMIT\n";
        assert_eq!(
            table_emptiness(dump),
            vec![
                ("filter".to_owned(), true),
                ("nat".to_owned(), false),
                ("mangle".to_owned(), false)
            ]
        );
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
