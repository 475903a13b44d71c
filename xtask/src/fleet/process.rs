//! One controller binary as a child process: its command line, where its output goes, its memory,
//! and stopping it with `SIGKILL` or `SIGTERM`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

/// Where a process's stdout and stderr go.
#[derive(Debug, Clone)]
pub enum Output {
    /// Both appended to this file, so a restarted process adds to its predecessor's log.
    Log(PathBuf),
    /// stdout dropped, stderr on ours: a benchmark shows only the warnings.
    Stderr,
}

/// How to start a controller binary.
#[derive(Debug, Clone)]
pub struct Launch {
    binary: PathBuf,
    /// Runs the binary under this, e.g. `heaptrack` (the memory figures are then the wrapper's).
    wrapper: Option<String>,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    output: Output,
}

impl Launch {
    /// `binary --kubeconfig <kubeconfig>`, its output on our stderr.
    pub fn new(binary: &Path, kubeconfig: &Path) -> Launch {
        Launch {
            binary: binary.to_owned(),
            wrapper: None,
            args: vec!["--kubeconfig".into(), kubeconfig.into()],
            env: Vec::new(),
            output: Output::Stderr,
        }
    }

    pub fn wrapper(mut self, wrapper: Option<&str>) -> Launch {
        self.wrapper = wrapper.map(str::to_owned);
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Launch {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Later settings of the same variable win.
    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `sim`'s token and endpoint: the cloud the controller talks to.
    pub fn sim(self, sim: &cloud_sim::Sim) -> Launch {
        self.env("HCLOUD_TOKEN", &sim.token())
            .env("HCLOUD_ENDPOINT", &sim.endpoint())
    }

    pub fn output(mut self, output: Output) -> Launch {
        self.output = output;
        self
    }

    /// Starts it; the process is killed when the handle is dropped, so an error or Ctrl-C in the
    /// caller leaves nothing running.
    pub fn spawn(&self) -> anyhow::Result<Process> {
        let mut cmd = match &self.wrapper {
            Some(w) => {
                let mut c = tokio::process::Command::new(w);
                // Its own process group, so stopping it also stops the controller it started.
                c.arg(&self.binary).process_group(0);
                c
            }
            None => tokio::process::Command::new(&self.binary),
        };
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(true);
        match &self.output {
            Output::Log(path) => {
                let out = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("opening {}", path.display()))?;
                cmd.stdout(Stdio::from(out.try_clone()?))
                    .stderr(Stdio::from(out));
            }
            Output::Stderr => {
                cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
            }
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let pid = child.id().context("child pid")?;
        Ok(Process {
            child,
            pid,
            wrapped: self.wrapper.is_some(),
        })
    }
}

/// A running controller process (killed when dropped).
#[derive(Debug)]
pub struct Process {
    child: tokio::process::Child,
    pid: u32,
    /// Started under `--wrapper`, in a process group of its own.
    wrapped: bool,
}

impl Process {
    /// Its memory and threads now, from `/proc/<pid>/status`.
    pub fn memory(&self) -> Memory {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let kib = |key: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(0)
        };
        Memory {
            peak_rss_kib: kib("VmHWM:"),
            rss_kib: kib("VmRSS:"),
            rss_anon_kib: kib("RssAnon:"),
            rss_file_kib: kib("RssFile:"),
            threads: kib("Threads:"),
        }
    }

    /// User plus system CPU seconds it has used, from `/proc/<pid>/stat` (0 once it is gone).
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // The fields after the command name (in parentheses, which may contain spaces).
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// `SIGKILL`; returns when the process is gone. A wrapper's process group first gets `SIGTERM`
    /// (a profiler writes its data then), so the controller under it stops too.
    pub async fn kill(mut self) {
        if self.wrapped {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", self.pid)])
                .status();
            let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        }
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// `SIGTERM`, then waits up to `grace` for the exit: its status, or `None` when it had to be
    /// killed after all.
    pub async fn terminate(mut self, grace: Duration) -> anyhow::Result<Option<ExitStatus>> {
        std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()?;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => Ok(Some(status?)),
            Err(_) => {
                self.kill().await;
                Ok(None)
            }
        }
    }
}

/// `/proc/<pid>/status` figures of a controller.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Memory {
    /// VmHWM: peak resident set.
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
    pub rss_anon_kib: u64,
    /// File-backed resident pages, mostly the binary's code.
    pub rss_file_kib: u64,
    pub threads: u64,
}
