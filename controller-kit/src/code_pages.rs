//! Hands back the pages of the binary that this process mapped and no longer runs.
//!
//! A controller's code is mapped from its 12 MB executable, and the kernel maps every cached page
//! within 64 KiB of a page it faults in (fault-around). By the time a controller is ready (flags,
//! kubeconfig, TLS set-up, the first lists: code that never runs again), about 10 MiB of the file
//! is mapped in each process and counted in its resident set, though the steady state runs a
//! fraction of it. [`release`] unmaps those pages from this process (`MADV_DONTNEED` on the
//! executable's read-only mappings): they stay in the page cache, and a page the controller runs
//! again is mapped back by a minor fault, with its neighbours.
//!
//! Only mappings that are read-only and have no anonymous (copy-on-write) pages are touched, so
//! every page dropped is identical to the file; relocated data (RELRO) and writable data are left
//! alone, as are shared libraries.

/// What [`release`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub mappings: usize,
    /// Resident before, i.e. what the process stopped counting.
    pub kib: u64,
}

/// Unmaps this process's resident pages of its executable's read-only, unmodified mappings.
pub fn release() -> std::io::Result<Released> {
    #[cfg(target_os = "linux")]
    {
        let exe = std::fs::read_link("/proc/self/exe")?;
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let mut released = Released::default();
        for m in clean_read_only(&smaps, &exe.to_string_lossy()) {
            // SAFETY: the range is a whole private, read-only file mapping of our executable with
            // no anonymous pages, so each page equals the file's and is faulted back from it on
            // its next use; the mapping itself stays.
            #[allow(unsafe_code)]
            let rc =
                unsafe { libc::madvise(m.start as *mut libc::c_void, m.len, libc::MADV_DONTNEED) };
            if rc == 0 {
                released.mappings += 1;
                released.kib += m.rss_kib;
            }
        }
        Ok(released)
    }
    #[cfg(not(target_os = "linux"))]
    Ok(Released::default())
}

/// One mapping of `/proc/self/smaps` that [`release`] may drop.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    len: usize,
    rss_kib: u64,
}

/// The mappings of `path` in `smaps` that are not writable and have no anonymous pages.
fn clean_read_only(smaps: &str, path: &str) -> Vec<Mapping> {
    let mut found = Vec::new();
    // (start, end, eligible so far, rss)
    let mut current: Option<(usize, usize, bool, u64)> = None;
    let mut finish = |c: Option<(usize, usize, bool, u64)>| {
        if let Some((start, end, true, rss_kib)) = c {
            found.push(Mapping {
                start,
                len: end - start,
                rss_kib,
            });
        }
    };
    for line in smaps.lines() {
        if let Some((range, perms, rest)) = header(line) {
            finish(current.take());
            let Some((start, end)) = range
                .split_once('-')
                .and_then(|(a, b)| Some((hex(a)?, hex(b)?)))
            else {
                continue;
            };
            // Private, readable, never writable: `r-xp` or `r--p`.
            let eligible = perms.starts_with('r')
                && perms.as_bytes().get(1) == Some(&b'-')
                && perms.ends_with('p')
                && rest == path;
            current = Some((start, end, eligible, 0));
        } else if let Some(c) = current.as_mut() {
            match field_kib(line) {
                Some(("Rss", kib)) => c.3 = kib,
                Some(("Anonymous", kib)) if kib > 0 => c.2 = false,
                _ => {}
            }
        }
    }
    finish(current.take());
    found
}

/// A mapping's header line: `start-end perms offset dev inode [path]` → (range, perms, path).
fn header(line: &str) -> Option<(&str, &str, &str)> {
    let mut parts = line.splitn(6, ' ');
    let range = parts.next()?;
    if !range.contains('-') || range.ends_with(':') {
        return None;
    }
    let perms = parts.next()?;
    let (_offset, _dev, _inode) = (parts.next()?, parts.next()?, parts.next()?);
    Some((range, perms, parts.next().unwrap_or("").trim_start()))
}

fn hex(s: &str) -> Option<usize> {
    usize::from_str_radix(s, 16).ok()
}

/// `Name:   123 kB` → (`Name`, 123).
fn field_kib(line: &str) -> Option<(&str, u64)> {
    let (name, value) = line.split_once(':')?;
    let kib = value.trim().strip_suffix(" kB")?.trim().parse().ok()?;
    Some((name, kib))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0a0000000-55d0a0200000 r--p 00000000 fd:01 123 /usr/bin/ctl
Size:               2048 kB
Rss:                 900 kB
Anonymous:             0 kB
55d0a0200000-55d0a0900000 r-xp 00200000 fd:01 123 /usr/bin/ctl
Size:               7168 kB
Rss:                6000 kB
Anonymous:             0 kB
55d0a0900000-55d0a0a00000 r--p 00900000 fd:01 123 /usr/bin/ctl
Size:               1024 kB
Rss:                1024 kB
Anonymous:           700 kB
55d0a0a00000-55d0a0a10000 rw-p 00a00000 fd:01 123 /usr/bin/ctl
Size:                 64 kB
Rss:                  64 kB
Anonymous:            64 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
Size:               1024 kB
Rss:                 800 kB
Anonymous:             0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  12 kB
Anonymous:            12 kB
";

    #[test]
    fn only_the_executables_clean_read_only_mappings_are_released() {
        let found = clean_read_only(SMAPS, "/usr/bin/ctl");
        assert_eq!(
            found,
            vec![
                Mapping {
                    start: 0x55d0a0000000,
                    len: 0x200000,
                    rss_kib: 900
                },
                Mapping {
                    start: 0x55d0a0200000,
                    len: 0x700000,
                    rss_kib: 6000
                },
            ],
            "RELRO (relocated, anonymous pages), data, libc and the stack are left alone"
        );
    }

    #[test]
    fn releasing_keeps_the_process_running_its_code() {
        let released = release().expect("smaps readable");
        // The test binary's code is mapped and was running, so some of it was resident.
        assert!(released.mappings >= 1, "{released:?}");
        assert!(released.kib > 0, "{released:?}");
        // Code that runs after the release is faulted back from the page cache.
        let again = release().expect("smaps readable");
        assert!(again.mappings >= 1, "{again:?}");
        assert!(format!("{:?}", std::hint::black_box(vec![1, 2, 3])).len() > 3);
    }
}
