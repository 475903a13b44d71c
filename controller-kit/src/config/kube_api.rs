//! How the controller reaches the Kubernetes API: `--kubeconfig`, upstream's `--master`, and the
//! client-side rate limit of `--kube-api-qps`/`--kube-api-burst`.

use std::path::PathBuf;

use clap::Args;

use super::problems::Problems;

/// The Kubernetes API flags.
#[derive(Args, Debug, Clone, Default)]
pub struct KubeApiArgs {
    /// Path to a kubeconfig file; in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubernetes API server address, overriding the kubeconfig's (upstream `--master`).
    #[arg(long)]
    pub master: Option<String>,
    /// Requests per second this controller sends to the API server at most (client-side token
    /// bucket). Default: no client-side limit, the apiserver's priority and fairness applies; when
    /// only `--kube-api-burst` is given, upstream's 20.
    #[arg(long)]
    pub kube_api_qps: Option<String>,
    /// Requests the token bucket lets through at once. Default with `--kube-api-qps`: upstream's 30.
    #[arg(long)]
    pub kube_api_burst: Option<String>,
}

/// A client-side limit on Kubernetes API requests (a token bucket, as client-go's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KubeApiRate {
    /// Tokens added per second.
    pub qps: f64,
    /// Bucket size.
    pub burst: u32,
}

impl KubeApiArgs {
    /// `--master`, checked to be a URL; `None` when unset or empty.
    pub fn master(&self, p: &mut Problems) -> Option<String> {
        let master = self.master.clone().filter(|m| !m.trim().is_empty());
        if let Some(m) = &master
            && !(m.starts_with("https://") || m.starts_with("http://"))
        {
            p.push(format!(
                "--master={m:?}: expected the API server's URL, e.g. https://10.0.0.1:6443"
            ));
        }
        master
    }

    /// `--kube-api-qps` and `--kube-api-burst`: either one given sets a limit, the other taking
    /// upstream's default.
    pub fn rate(&self, p: &mut Problems) -> Option<KubeApiRate> {
        let (qps, burst) = (self.kube_api_qps.as_deref(), self.kube_api_burst.as_deref());
        if qps.is_none() && burst.is_none() {
            return None;
        }
        let qps = match qps.map(str::trim) {
            None => 20.0,
            Some(v) => match v.parse::<f64>() {
                Ok(q) if q.is_finite() && q > 0.0 => q,
                _ => {
                    p.push(format!(
                        "--kube-api-qps={v:?}: expected a number of requests per second above 0"
                    ));
                    20.0
                }
            },
        };
        let burst = match burst {
            None => 30,
            Some(v) => p.int("--kube-api-burst", v, 1, 100_000, 30) as u32,
        };
        Some(KubeApiRate { qps, burst })
    }
}
