//! One control plane per test binary: every test of the binary uses it.
//!
//! It is started once, on first use, from a dedicated thread that lives as long as the process:
//! the kernel kills the children when that thread's process dies (even by SIGKILL), and an
//! `atexit` hook stops them gracefully when the test binary ends normally. Tests get a cheap
//! [`TestKube`] handle that builds clients in the test's own runtime.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use crate::control_plane::{Connection, ControlPlane};
use crate::error::Result;

static PLANE: Mutex<Option<ControlPlane>> = Mutex::new(None);

/// Connection details of this binary's plane, or why it could not start (kept as text: every test
/// that asks gets the same explanation).
fn plane_of_this_binary() -> &'static Result<PlaneInfo, String> {
    static INFO: OnceLock<Result<PlaneInfo, String>> = OnceLock::new();
    INFO.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("testenv-control-plane".into())
            .spawn(move || keeper(tx))
            .expect("spawning the control-plane thread");
        rx.recv()
            .unwrap_or_else(|_| Err("the control-plane thread died while starting".into()))
    })
}

#[derive(Debug, Clone)]
struct PlaneInfo {
    connection: Connection,
    pids: (u32, u32),
    ports: (u16, u16),
}

/// Starts the plane, reports back, then parks forever so the children stay tied to a live thread.
fn keeper(tx: std::sync::mpsc::Sender<Result<PlaneInfo, String>>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("building a tokio runtime");
    match runtime.block_on(ControlPlane::start()) {
        Ok(plane) => {
            let info = PlaneInfo {
                connection: plane.connection(),
                pids: plane.pids(),
                ports: plane.ports(),
            };
            eprintln!(
                "testenv: control plane at {} ready in {:.1?} (files in {})",
                plane.apiserver_url(),
                plane.startup_time(),
                plane.dir().display()
            );
            *PLANE.lock().unwrap_or_else(|e| e.into_inner()) = Some(plane);
            register_exit_hook();
            let _ = tx.send(Ok(info));
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            let _ = tx.send(Err(e.to_string()));
        }
    }
}

fn register_exit_hook() {
    extern "C" fn stop_the_plane() {
        let plane = PLANE.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(plane) = plane {
            plane.stop();
        }
    }
    #[allow(unsafe_code)]
    // SAFETY: atexit only records a function pointer; the hook takes the plane out of a Mutex.
    unsafe {
        libc::atexit(stop_the_plane);
    }
}

/// The control plane of this test binary, started on first use (building the binaries on
/// the very first run on a machine). Panics with the reason if it cannot start: an e2e test must
/// never pass or skip silently without an apiserver.
pub async fn kube() -> TestKube {
    let info = tokio::task::spawn_blocking(plane_of_this_binary)
        .await
        .expect("starting the test control plane panicked");
    match info {
        Ok(info) => TestKube { info: info.clone() },
        Err(reason) => panic!("the test control plane could not start: {reason}"),
    }
}

/// A test's handle on its binary's control plane. If the test panics while holding it, the tail of
/// the apiserver and etcd logs is printed.
#[derive(Debug)]
pub struct TestKube {
    info: PlaneInfo,
}

impl TestKube {
    /// An admin (`system:masters`) client.
    pub async fn client(&self) -> kube::Client {
        self.info
            .connection
            .client()
            .await
            .expect("admin client for the test control plane")
    }

    /// A client acting as ServiceAccount `namespace/name` (impersonation), so RBAC applies.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> kube::Client {
        self.info
            .connection
            .service_account_client(namespace, name)
            .await
            .expect("impersonating client for the test control plane")
    }

    /// The connection, for anything not covered here (custom impersonation, log tails).
    pub fn connection(&self) -> &Connection {
        &self.info.connection
    }

    /// The admin kubeconfig file, for running a built binary or kubectl against this plane.
    pub fn kubeconfig(&self) -> &Path {
        self.info.connection.kubeconfig()
    }

    /// (kube-apiserver, etcd) process ids.
    pub fn pids(&self) -> (u32, u32) {
        self.info.pids
    }

    /// (kube-apiserver, etcd client) ports.
    pub fn ports(&self) -> (u16, u16) {
        self.info.ports
    }
}

impl Drop for TestKube {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "testenv: the test failed; last lines of the control plane's logs:\n{}",
                self.info.connection.log_tails(30)
            );
        }
    }
}
