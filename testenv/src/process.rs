//! Child processes of a control plane: started with their output in a log file, and stopped
//! gracefully (SIGTERM, then SIGKILL after a grace period).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a process outlives the one that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed by the kernel when the starting thread's process dies, however it dies (even SIGKILL),
    /// so a crashed test binary cannot leave an apiserver behind. The kernel ties this to the
    /// *thread* that spawned the child, so start such processes from a long-lived thread.
    TiedToParent,
    /// In its own session, surviving the starter (`cargo xtask control-plane up`).
    Detached,
}

/// A running (or finished) child process and its log.
#[derive(Debug)]
pub struct Process {
    pub name: &'static str,
    pub pid: u32,
    pub log: PathBuf,
    /// `None` when we did not start it ourselves (re-attached by pid from a state file).
    child: Option<Child>,
}

impl Process {
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Process> {
        Self::spawn_with_env(name, program, args, &[], log, lifetime)
    }

    /// [`Process::spawn`] with these environment variables set (on top of ours).
    pub fn spawn_with_env(
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Process> {
        let out = File::create(&log).map_err(Error::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io("duplicating a log file handle"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        #[allow(unsafe_code)]
        // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
        // syscalls (prctl, getppid, setsid) without allocating.
        unsafe {
            cmd.pre_exec(move || {
                match lifetime {
                    Lifetime::TiedToParent => {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        // The parent may have died between fork and prctl.
                        if libc::getppid() == 1 {
                            libc::_exit(1);
                        }
                    }
                    Lifetime::Detached => {
                        if libc::setsid() < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(Error::io(format!("starting {}", program.display())))?;
        Ok(Process {
            name,
            pid: child.id(),
            log,
            child: Some(child),
        })
    }

    /// A handle on a process started by an earlier invocation (see [`Lifetime::Detached`]).
    pub fn attach(name: &'static str, pid: u32, log: PathBuf) -> Process {
        Process {
            name,
            pid,
            log,
            child: None,
        }
    }

    /// `Some(description)` once the process has exited.
    pub fn exit_status(&mut self) -> Option<String> {
        match &mut self.child {
            Some(child) => match child.try_wait() {
                Ok(Some(status)) => Some(status.to_string()),
                Ok(None) => None,
                Err(e) => Some(format!("unknown ({e})")),
            },
            None => (!pid_alive(self.pid)).then(|| "exited".to_owned()),
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL; returns once the process is gone.
    pub fn stop(&mut self, grace: Duration) {
        if self.exit_status().is_some() {
            return;
        }
        signal(self.pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exit_status().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(
            name = self.name,
            pid = self.pid,
            "did not stop on SIGTERM; killing it"
        );
        signal(self.pid, libc::SIGKILL);
        while self.exit_status().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last `lines` lines of the process's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        crate::binaries::tail(&String::from_utf8_lossy(&text), lines)
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    #[allow(unsafe_code)]
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Whether a process with this pid exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}
