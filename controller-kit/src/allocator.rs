//! glibc malloc settings for a small, long-running process.
//!
//! By default glibc gives each thread that allocates an arena of its own (up to eight per core), and
//! raises its mmap threshold every time a large block is freed. In a controller that means a list
//! page or a watch event decoded on one Tokio worker leaves its pages in that worker's arena, and
//! later large buffers are carved out of the heap, where they fragment it instead of going back to
//! the kernel. One arena and a fixed 64 KiB mmap threshold cost nothing measurable at a
//! controller's request rates, and took `cargo xtask bench system`'s four controllers at 1000
//! kubelet-shaped Nodes from 97 to 92 MiB peak and the restart peak from 101 to 87 MiB.
//!
//! Freed memory in the middle of the heap still stays resident: after a burst (1000 Nodes
//! initialized, 100 load balancers created at once) the process kept the burst's peak for good.
//! [`trim_periodically`] hands it back every [`TRIM_PERIOD`] with `malloc_trim(0)`, which releases
//! free pages anywhere in the heap and costs well under a millisecond for a heap this size; it took
//! the four controllers' steady RSS during `bench system`'s churn from 106 to 87 MiB
//! (service-controller from 42 to 26 MiB).
//!
//! glibc's own environment variables (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`) still win: a setting whose variable is set is left alone.

/// Applies the settings; call it before any thread starts.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let settings = [
            ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, 1),
            ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 64 << 10),
            ("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, 128 << 10),
        ];
        for (env, param, value) in settings {
            if std::env::var_os(env).is_none() {
                // SAFETY: mallopt only changes allocator parameters; it is called before any
                // other thread exists, as glibc asks.
                #[allow(unsafe_code)]
                unsafe {
                    libc::mallopt(param, value);
                }
            }
        }
    }
}

/// How often [`trim_periodically`] returns free heap pages and idle code pages to the kernel.
pub const TRIM_PERIOD: std::time::Duration = std::time::Duration::from_secs(30);

/// Every [`TRIM_PERIOD`] until `shutdown`: returns the heap's free pages to the kernel, and
/// unmaps the code pages of the binary ([`crate::code_pages`]), so what stays resident is the code
/// that ran since.
pub async fn trim_periodically(shutdown: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(TRIM_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                trim();
                match crate::code_pages::release() {
                    Ok(r) => tracing::debug!(kib = r.kib, mappings = r.mappings, "code pages unmapped"),
                    Err(e) => tracing::debug!(error = %e, "cannot unmap code pages"),
                }
            }
        }
    }
}

fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
