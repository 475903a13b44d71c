//! Bad configuration, run against a built controller binary: each case must exit with
//! code 2 before touching Kubernetes or the cloud, and say on stderr which flag or variable is
//! wrong, with its value and what is accepted; the token never appears. Every controller's
//! `tests/bad_config.rs` runs [`COMMON`] and adds its own flags' cases.

use std::process::Command;

/// One invalid configuration.
#[derive(Debug)]
pub struct ConfigCase {
    pub name: &'static str,
    pub args: &'static [&'static str],
    /// Environment on top of `HCLOUD_TOKEN=`[`TOKEN`] (a `HCLOUD_TOKEN` here replaces it, an empty
    /// one removes it).
    pub env: &'static [(&'static str, &'static str)],
    /// Substrings stderr must contain: the flag or variable, the value, the accepted forms.
    pub expect: &'static [&'static str],
}

/// A valid-looking token; stderr must never contain it (nor its recognisable start).
pub const TOKEN: &str = "SECRETtokenSECRETtokenSECRETtokenSECRETtokenSECRETtokenSECRETtok";
const TOKEN_MARK: &str = "SECRETtoken";

/// Cases every controller binary shares (controller-kit's flags and HCCM's variables).
pub const COMMON: &[ConfigCase] = &[
    ConfigCase {
        name: "missing token",
        args: &[],
        env: &[("HCLOUD_TOKEN", "")],
        expect: &["HCLOUD_TOKEN (or HCLOUD_TOKEN_FILE) is required"],
    },
    ConfigCase {
        name: "token with a newline inside",
        args: &[],
        env: &[(
            "HCLOUD_TOKEN",
            "SECRETtokenSECRETtokenSECRETtoken\nSECRETtokenSECRETtokenSECRETtoken",
        )],
        expect: &[
            "HCLOUD_TOKEN holds whitespace",
            "value not shown",
            "expected the API token alone",
        ],
    },
    ConfigCase {
        name: "unreadable token file",
        args: &[],
        env: &[
            ("HCLOUD_TOKEN", ""),
            ("HCLOUD_TOKEN_FILE", "/nonexistent/token"),
        ],
        expect: &["HCLOUD_TOKEN_FILE=/nonexistent/token", "cannot read"],
    },
    ConfigCase {
        name: "endpoint not an URL",
        args: &[],
        env: &[("HCLOUD_ENDPOINT", "api.hetzner.cloud/v1")],
        expect: &[
            "HCLOUD_ENDPOINT=\"api.hetzner.cloud/v1\"",
            "http:// or https:// URL",
        ],
    },
    ConfigCase {
        name: "endpoint with another scheme",
        args: &[],
        env: &[("HCLOUD_ENDPOINT", "ftp://api.hetzner.cloud")],
        expect: &[
            "HCLOUD_ENDPOINT=\"ftp://api.hetzner.cloud\"",
            "http:// or https://",
        ],
    },
    ConfigCase {
        // The chart's simulator endpoint in a pod that started before the simulator's Service:
        // the kubelet leaves $(NAME) as written.
        name: "endpoint the kubelet could not expand",
        args: &[],
        env: &[(
            "HCLOUD_ENDPOINT",
            "http://$(CC_SIMULATOR_SERVICE_HOST):$(CC_SIMULATOR_SERVICE_PORT)/v1",
        )],
        expect: &[
            "still holds $(CC_SIMULATOR_SERVICE_HOST), $(CC_SIMULATOR_SERVICE_PORT)",
            "the kubelet replaces $(NAME) only with a variable it knows when it starts the container",
            "check that Service cc-simulator exists in the pod's namespace",
        ],
    },
    ConfigCase {
        name: "address family",
        args: &[],
        env: &[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5")],
        expect: &[
            "HCLOUD_INSTANCES_ADDRESS_FAMILY=\"ipv5\"",
            "ipv4, ipv6 or dualstack",
        ],
    },
    ConfigCase {
        name: "zone label bool",
        args: &[],
        env: &[("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", "maybe")],
        expect: &[
            "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED=\"maybe\"",
            "not a boolean",
        ],
    },
    ConfigCase {
        name: "server cache duration",
        args: &[],
        env: &[("HCLOUD_SERVER_CACHE_MAX_AGE", "soon")],
        expect: &[
            "HCLOUD_SERVER_CACHE_MAX_AGE=\"soon\"",
            "whole seconds (\"15\") or a Go duration (\"15s\"",
        ],
    },
    ConfigCase {
        name: "one Robot credential without the other",
        args: &[],
        // The value carries the token's mark: the scan below proves it is never printed.
        env: &[
            ("ROBOT_ENABLED", "true"),
            ("ROBOT_USER", "SECRETtoken-robot-user"),
        ],
        expect: &[
            "ROBOT_ENABLED=true with ROBOT_USER but not ROBOT_PASSWORD",
            "or neither",
        ],
    },
    ConfigCase {
        name: "Robot cache timeout",
        args: &[],
        env: &[("ROBOT_CACHE_TIMEOUT", "later")],
        expect: &["ROBOT_CACHE_TIMEOUT=\"later\"", "Go duration"],
    },
    ConfigCase {
        name: "server cache mode",
        args: &[],
        env: &[("HCLOUD_SERVER_CACHE_MODE", "some")],
        expect: &["HCLOUD_SERVER_CACHE_MODE=\"some\"", "all, one or off"],
    },
    ConfigCase {
        name: "metrics switch",
        args: &[],
        env: &[("HCLOUD_METRICS_ENABLED", "no")],
        expect: &["HCLOUD_METRICS_ENABLED=\"no\"", "a boolean (1, t, T"],
    },
    ConfigCase {
        name: "metrics address",
        args: &[],
        env: &[("HCLOUD_METRICS_ADDRESS", "8233")],
        expect: &["HCLOUD_METRICS_ADDRESS=\"8233\"", "host:port or :port"],
    },
    ConfigCase {
        name: "kube api qps",
        args: &["--kube-api-qps=0"],
        env: &[],
        expect: &["--kube-api-qps=\"0\"", "above 0"],
    },
    ConfigCase {
        name: "klog verbosity",
        args: &["--v=loud"],
        env: &[],
        expect: &["--v=\"loud\"", "non-negative integer"],
    },
    ConfigCase {
        name: "vmodule",
        args: &["--vmodule=controller.go"],
        env: &[],
        expect: &["--vmodule", "\"controller.go\"", "module=N"],
    },
    ConfigCase {
        name: "master",
        args: &["--master=10.0.0.1:6443"],
        env: &[],
        expect: &["--master=\"10.0.0.1:6443\"", "API server's URL"],
    },
    ConfigCase {
        name: "routes enabled bool (read by cloud-client)",
        args: &[],
        env: &[("HCLOUD_NETWORK_ROUTES_ENABLED", "yes")],
        expect: &[
            "HCLOUD_NETWORK_ROUTES_ENABLED=\"yes\"",
            "a boolean (1, t, T",
        ],
    },
    ConfigCase {
        name: "lease duration",
        args: &["--leader-elect-lease-duration=forever"],
        env: &[],
        expect: &["--leader-elect-lease-duration=\"forever\"", "e.g. 15s"],
    },
    ConfigCase {
        name: "renew deadline not below the lease duration",
        args: &["--leader-elect-renew-deadline=20s"],
        env: &[],
        expect: &[
            "--leader-elect-renew-deadline (20s)",
            "must be less than --leader-elect-lease-duration (15s)",
        ],
    },
    ConfigCase {
        name: "resource lock",
        args: &["--leader-elect-resource-lock=endpoints"],
        env: &[],
        expect: &[
            "--leader-elect-resource-lock=\"endpoints\"",
            "only \"leases\" is supported",
        ],
    },
    ConfigCase {
        name: "admin address",
        args: &["--admin-address=nowhere"],
        env: &[],
        expect: &["--admin-address=\"nowhere\"", "expected host:port or :port"],
    },
    ConfigCase {
        name: "cloud provider",
        args: &["--cloud-provider=aws"],
        env: &[],
        expect: &[
            "--cloud-provider=\"aws\"",
            "not a known provider (hcloud, external-cloudstack)",
        ],
    },
    ConfigCase {
        name: "cloudstack without its cloud-config",
        args: &["--cloud-provider=external-cloudstack"],
        env: &[],
        expect: &[
            "--cloud-config (or CLOUD_CONFIG) is required with --cloud-provider=external-cloudstack",
            "--cloud-config=/config/cloud-config",
        ],
    },
    ConfigCase {
        name: "cloudstack cloud-config with unknown keys and no api-url",
        args: &[
            "--cloud-provider=external-cloudstack",
            concat!(
                "--cloud-config=",
                env!("CARGO_MANIFEST_DIR"),
                "/data/cloudstack/bad-cloud-config.ini"
            ),
        ],
        env: &[],
        expect: &[
            "bad-cloud-config.ini line 5 (\"secret_key = <value not shown>\"): unknown key \"secret_key\"",
            "line 6 (\"foo = <value not shown>\"): unknown key \"foo\" in [Global]",
            "[Global] (line 3) has no api-url",
            "has no secret-key",
        ],
    },
    ConfigCase {
        name: "log format (clap)",
        args: &["--log-format=xml"],
        env: &[],
        expect: &["--log-format", "'xml'", "text, json"],
    },
];

/// For service-controller, the one controller that reads the `HCLOUD_LOAD_BALANCERS_*` settings
/// (the others never parse them).
pub const LOAD_BALANCER_DEFAULT: ConfigCase = ConfigCase {
    name: "load balancer default bool (read by cloud-client)",
    args: &[],
    env: &[("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "maybe")],
    expect: &[
        "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP=\"maybe\"",
        "a boolean (1, t, T",
    ],
};

/// For the two controllers that read `--concurrent-node-syncs` (the others accept it without
/// effect).
pub const NODE_SYNCS: ConfigCase = ConfigCase {
    name: "concurrency",
    args: &["--concurrent-node-syncs=0"],
    env: &[],
    expect: &["--concurrent-node-syncs=0", "between 1 and 1024"],
};

/// Runs `bin` for each case; returns one line per failed expectation.
pub fn check(bin: &str, cases: &[ConfigCase]) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let mut cmd = Command::new(bin);
        // Only what the case sets: no kubeconfig, no HCLOUD_* of the machine running the tests.
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HCLOUD_TOKEN", TOKEN)
            .args(c.args);
        for (k, v) in c.env {
            if v.is_empty() && *k == "HCLOUD_TOKEN" {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let out = cmd.output().expect("run the binary");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) {
            failures.push(format!(
                "{}: exit {:?}, expected 2: {stderr}",
                c.name,
                out.status.code()
            ));
        }
        for e in c.expect {
            if !stderr.contains(e) {
                failures.push(format!("{}: {e:?} missing from stderr: {stderr}", c.name));
            }
        }
        if stderr.contains(TOKEN_MARK) || String::from_utf8_lossy(&out.stdout).contains(TOKEN_MARK)
        {
            failures.push(format!("{}: the token was printed: {stderr}", c.name));
        }
    }
    failures
}

/// Asserts every case of `COMMON` and `own` against `bin`; prints the count.
pub fn assert_all(bin: &str, own: &[ConfigCase]) {
    let started = std::time::Instant::now();
    let mut failures = check(bin, COMMON);
    failures.extend(check(bin, own));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "{} configuration cases ({} shared + {} own) exit 2 naming flag, value and accepted forms ({:.1?})",
        COMMON.len() + own.len(),
        COMMON.len(),
        own.len(),
        started.elapsed()
    );
}
