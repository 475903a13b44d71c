use std::path::PathBuf;

/// Everything that can stop a control plane from coming up. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the Go toolchain (>= {min}) is needed to build {component} for the tests, \
         but {found}. Install Go {min} or newer (Debian: a golang-{min} package, or the official \
         tarball) and make sure `go` is on PATH, or point {env_var} at a prebuilt binary"
    )]
    GoMissing {
        component: &'static str,
        min: &'static str,
        found: String,
        env_var: &'static str,
    },

    #[error(
        "building {component} {version} through the Go module proxy failed ({step}); is the proxy \
         reachable (GOPROXY={goproxy})? Output tail:\n{output}"
    )]
    GoBuild {
        component: &'static str,
        version: &'static str,
        step: &'static str,
        goproxy: String,
        output: String,
    },

    #[error("{env_var} points at {path:?}, which is not an executable file")]
    BadOverride {
        env_var: &'static str,
        path: PathBuf,
    },

    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    #[error("generating test certificates: {0}")]
    Pki(#[from] rcgen::Error),

    #[error("{component} exited before it was ready ({status}). Log tail ({log:?}):\n{tail}")]
    ExitedEarly {
        component: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },

    #[error("cannot restart kube-apiserver: {0}")]
    Restart(String),

    #[error("{component} was not ready within {seconds} s. Log tail ({log:?}):\n{tail}")]
    NotReady {
        component: &'static str,
        seconds: u64,
        log: PathBuf,
        tail: String,
    },

    #[error("building a Kubernetes client for the test control plane: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("building a Kubernetes client for the test control plane: {0}")]
    Client(#[from] kube::Error),

    #[error("{tool} is needed and missing: {how}")]
    ToolMissing { tool: String, how: String },

    #[error("installing {requirement} from PyPI failed; is PyPI reachable? Output tail:\n{output}")]
    Pip { requirement: String, output: String },

    #[error("cluster: {step}: {message}")]
    Cluster { step: String, message: String },

    #[error("{path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
