//! Process configuration shared by the four controller binaries: clap flags with env fallbacks, one
//! module per concern, each with its flags next to the code that checks them:
//! - [`upstream`]: upstream's `--controllers`, `--concurrent-node-syncs`, `--cluster-name`;
//! - [`serving`]: the admin server, and where `/metrics` is served;
//! - [`logging`]: `--log-format`, klog's `--v` and `--vmodule`;
//! - [`kube_api`]: `--kubeconfig`, `--master`, the client-side rate limit;
//! - [`leader_election`]: the `--leader-elect*` flags;
//! - [`cloud`]: `--cloud-provider` and the providers' own settings, which the provider checks.
//!
//! Parsing is two-staged. clap reads the raw strings (so one bad value never hides the others), then
//! [`CommonArgs::validate`] checks everything and returns either a typed [`Config`] or ONE
//! [`ConfigError`] listing every problem (the binaries exit with code 2 on it).

pub mod cloud;
pub mod kube_api;
pub mod leader_election;
pub mod logging;
mod problems;
pub mod serving;
pub mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgAction, Args};
use cloud_client::registry::{ProviderConfig, Registry, Uses};
use cloud_client::shadow::PlannedWrites;

pub use cloud::{CloudArgs, ProviderSettings};
pub use kube_api::{KubeApiArgs, KubeApiRate};
pub use leader_election::{LeaderElection, LeaderElectionArgs, random_suffix};
pub use logging::{LogFormat, LoggingArgs};
pub use problems::{ConfigError, Problems};
pub use serving::{MetricsServing, ServingArgs};
pub use upstream::{UpstreamArgs, controller_enabled};

use crate::cli::Ignored;
use crate::info::ControllerInfo;

/// Flags and environment variables every controller binary accepts.
///
/// All binaries accept the same upstream flags (so one manifest's argument list works for each of
/// them); each controller uses the ones that apply to it.
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    #[command(flatten)]
    pub kube_api: KubeApiArgs,

    #[command(flatten)]
    pub upstream: UpstreamArgs,

    #[command(flatten)]
    pub serving: ServingArgs,

    #[command(flatten)]
    pub logging: LoggingArgs,

    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,

    /// Shadow mode: watch, plan and reconcile as usual, but write nothing. Cloud writes are not
    /// sent, Kubernetes writes go with `dryRun=All`; both are listed on `/plan` and counted in
    /// `cloud_controllers_planned_writes_total`. Takes its own Lease (`<name>-dry-run`), so it runs
    /// next to HCCM or to the acting controllers without touching their leadership.
    #[arg(long, env = "DRY_RUN", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: bool,

    /// Below this share of the cloud API's rate-limit budget (percent of the limit), periodic
    /// work that only confirms what is known (address syncs, drift checks, route safety resyncs)
    /// waits, so that new Nodes, Services and routes get the calls left. 0 never defers.
    #[arg(long, env = "API_BUDGET_FLOOR", default_value = "20", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub api_budget_floor: u8,

    /// Only watch Nodes matching this label selector (sharding, tests). Default: all Nodes.
    #[arg(long, env = "NODE_LABEL_SELECTOR", hide = true)]
    pub node_label_selector: Option<String>,

    /// The cloud: which provider, and its settings.
    #[command(flatten)]
    pub cloud: CloudArgs,
}

/// The validated configuration every controller reads.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kubeconfig path; in-cluster when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// Whether `--controllers` enables this binary's controller.
    pub enabled: bool,
    /// Admin server address.
    pub admin_address: SocketAddr,
    /// Where `/metrics` is served.
    pub metrics: MetricsServing,
    /// Log format.
    pub log_format: LogFormat,
    /// The log filter used when RUST_LOG is unset (from `--v` and `--vmodule`).
    pub log_filter: String,
    /// `--master`: the API server address, overriding the kubeconfig's.
    pub master: Option<String>,
    /// `--kube-api-qps`/`--kube-api-burst`; `None`: no client-side limit.
    pub kube_api_rate: Option<KubeApiRate>,
    /// Leader election, `None` when disabled.
    pub leader_election: Option<LeaderElection>,
    /// `--concurrent-node-syncs` (controller default applied).
    pub concurrent_node_syncs: u16,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The selected provider's checked settings, ready to build the cloud; `None` when the
    /// controller runs without a cloud of its settings (tests inject one).
    pub cloud: Option<Arc<dyn ProviderConfig>>,
    /// Label selector restricting the Node watch (not a flag: tests and sharding set it in code).
    pub node_label_selector: Option<String>,
    /// Shadow mode (`--dry-run`): where the writes not made are planned; `None` acts.
    pub planned_writes: Option<Arc<PlannedWrites>>,
    /// Flags given that this controller does not read, each with why (logged once at start).
    pub ignored_flags: Vec<Ignored>,
    /// `--api-budget-floor`: percent of the API budget below which periodic work waits.
    pub api_budget_floor: u8,
}

impl CommonArgs {
    /// Validates everything; `need_cloud` false skips the cloud settings (tests inject a cloud).
    pub fn validate(&self, info: &ControllerInfo, need_cloud: bool) -> Result<Config, ConfigError> {
        let mut p = Problems::default();
        self.validate_into(info, need_cloud, &mut p)
            .and_then(|c| p.finish(c))
    }

    /// Like [`CommonArgs::validate`], adding problems to `p` (controller crates validate their own
    /// flags into the same collector before calling [`Problems::finish`]).
    pub fn validate_into(
        &self,
        info: &ControllerInfo,
        need_cloud: bool,
        p: &mut Problems,
    ) -> Result<Config, ConfigError> {
        self.validate_with(&cloud_client::providers::builtin(), info, need_cloud, p)
    }

    /// [`CommonArgs::validate_into`] with the providers of `registry` (tests register their own).
    pub fn validate_with(
        &self,
        registry: &Registry,
        info: &ControllerInfo,
        need_cloud: bool,
        p: &mut Problems,
    ) -> Result<Config, ConfigError> {
        let enabled = controller_enabled(info, &self.upstream.controllers, p);
        let admin_address = self.serving.admin_address(info, p);
        let planned_writes = self.dry_run.then(PlannedWrites::new);
        let leader_election = self.leader_election.validate(info, self.dry_run, p);
        let mut ignored_flags = Vec::new();
        let concurrent_node_syncs =
            self.upstream
                .concurrent_node_syncs(info, &mut ignored_flags, p);
        let provider = self.cloud.provider(registry).unwrap_or_else(|problem| {
            p.push(problem);
            registry.default_provider().clone()
        });
        ignored_flags.extend(self.cloud.unread_settings(registry, provider.as_ref()));
        let metrics = serving::metrics_serving(provider.as_ref(), &self.cloud.settings.values, p);
        let log_filter = self.logging.filter(p);
        let kube_api_rate = self.kube_api.rate(p);
        let master = self.kube_api.master(p);
        let uses = Uses {
            load_balancers: info.reads_load_balancer_settings,
            shadow: planned_writes.clone(),
        };
        let cloud = need_cloud
            .then(|| self.cloud.configure(provider.as_ref(), &uses, p))
            .flatten();
        Ok(Config {
            kubeconfig: self.kube_api.kubeconfig.clone(),
            enabled,
            admin_address,
            metrics,
            log_format: self.logging.log_format,
            log_filter,
            master,
            kube_api_rate,
            leader_election,
            concurrent_node_syncs,
            cluster_name: self.upstream.cluster_name.clone(),
            cloud,
            node_label_selector: self.node_label_selector.clone().filter(|s| !s.is_empty()),
            planned_writes,
            ignored_flags,
            api_budget_floor: self.api_budget_floor,
        })
    }
}

/// Nodes per list request of the Node watches (1000 Nodes: 20 requests at start).
pub const NODE_LIST_PAGE: u32 = 50;

impl Config {
    /// The watcher configuration of every Node watch, honouring [`Config::node_label_selector`].
    ///
    /// Lists come in pages of [`NODE_LIST_PAGE`] instead of kube's 500: a page is buffered and
    /// decoded whole before the controller's `slim` runs on its Nodes, so at 12 KB a Node, a page
    /// of 500 costs 6 MB of JSON and several times that decoded, at every start and relist.
    pub fn node_watcher_config(&self) -> kube::runtime::watcher::Config {
        let config = kube::runtime::watcher::Config::default().page_size(NODE_LIST_PAGE);
        match &self.node_label_selector {
            Some(selector) => config.labels(selector),
            None => config,
        }
    }

    /// A configuration for in-process tests: no cloud settings, no leader election, admin server on
    /// an ephemeral loopback port.
    pub fn for_tests(info: &ControllerInfo) -> Config {
        let args = CommonArgs {
            leader_election: LeaderElectionArgs {
                leader_elect: false,
                ..Default::default()
            },
            serving: ServingArgs {
                admin_address: Some("127.0.0.1:0".into()),
            },
            ..Default::default()
        };
        args.validate(info, false)
            .expect("the test configuration is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use cloud_client::Secret;
    use cloud_client::hcloud::HcloudConfig;
    use cloud_client::hcloud::registration::ConfiguredHcloud;
    use std::time::Duration;

    const INFO: ControllerInfo = ControllerInfo {
        name: "node-controller",
        canonical: "cloud-node-controller",
        alias: "cloud-node",
        component: "cloud-node-controller",
        default_admin_port: 10270,
        node_syncs_default: Some(16),
        reads_load_balancer_settings: false,
    };

    /// The Hetzner provider as the kit configured it.
    fn configured(c: &Config) -> &ConfiguredHcloud {
        c.cloud
            .as_ref()
            .and_then(|cloud| cloud.as_any().downcast_ref::<ConfiguredHcloud>())
            .expect("hcloud settings")
    }

    /// The Hetzner settings the kit handed to the provider.
    fn hcloud(c: &Config) -> &HcloudConfig {
        &configured(c).config
    }

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    fn parse(args: &[&str]) -> CommonArgs {
        let mut v = vec!["bin"];
        v.extend_from_slice(args);
        crate::cli::parse_from::<Cli, _, _>(v).0.common
    }

    #[test]
    fn controllers_flag() {
        let mut p = Problems::default();
        assert!(controller_enabled(&INFO, "*", &mut p));
        assert!(controller_enabled(&INFO, "*,-route", &mut p));
        assert!(!controller_enabled(&INFO, "*,-cloud-node", &mut p));
        assert!(!controller_enabled(
            &INFO,
            "-cloud-node-controller,*",
            &mut p
        ));
        assert!(controller_enabled(&INFO, "cloud-node,-cloud-node", &mut p));
        assert!(!controller_enabled(&INFO, "service,route", &mut p));
        assert!(p.is_empty());
        controller_enabled(&INFO, "*,-bogus", &mut p);
        assert_eq!(p.0.len(), 1);
    }

    #[test]
    fn every_problem_is_listed_once() {
        let args = parse(&[
            "--leader-elect-lease-duration=abc",
            "--leader-elect-retry-period=5x",
            "--concurrent-node-syncs=0",
            "--controllers=*,-nope",
            "--hcloud-instances-address-family=ipv5",
            "--admin-address=nonsense",
        ]);
        let err = args.validate(&INFO, true).unwrap_err();
        let text = err.to_string();
        for needle in [
            "--leader-elect-lease-duration",
            "--leader-elect-retry-period",
            "--concurrent-node-syncs",
            "nope",
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            "--admin-address",
            "HCLOUD_TOKEN",
        ] {
            assert!(text.contains(needle), "{needle} missing in {text}");
        }
        assert_eq!(err.problems.len(), 7, "{text}");
    }

    #[test]
    fn another_providers_setting_given_as_a_flag_is_named_as_without_effect() {
        let unread = |args: &[&str]| -> Vec<(String, String)> {
            let mut args = parse(args);
            args.cloud
                .settings
                .values
                .give_secret("HCLOUD_TOKEN", Some(Secret::new("t0ken")));
            args.validate(&INFO, false)
                .unwrap()
                .ignored_flags
                .into_iter()
                .map(|(name, why)| (name.into_owned(), why.to_string()))
                .collect()
        };
        assert_eq!(
            unread(&["--cloud-config=/config/cloud-config"]),
            [(
                "cloud-config".to_string(),
                "a setting of --cloud-provider=external-cloudstack, not of the provider this \
                 process runs"
                    .to_string()
            )]
        );
        assert_eq!(
            unread(&["--cloud-provider=external-cloudstack", "--cloud-config=/x"]),
            []
        );
        assert_eq!(
            unread(&[
                "--cloud-provider=external-cloudstack",
                "--hcloud-network=k8s"
            ])[0]
                .0,
            "hcloud-network"
        );
    }

    #[test]
    fn defaults_and_hccm_env() {
        let mut args = parse(&[
            "--leader-elect=false",
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
        ]);
        args.cloud
            .settings
            .values
            .give_secret("HCLOUD_TOKEN", Some(Secret::new("t0ken")));
        args.cloud
            .settings
            .values
            .give("HCLOUD_INSTANCES_ADDRESS_FAMILY", Some("dualstack".into()));
        let c = args.validate(&INFO, true).unwrap();
        assert!(c.enabled);
        assert!(c.leader_election.is_none());
        assert_eq!(c.concurrent_node_syncs, 16);
        assert_eq!(c.admin_address.port(), 10270);
        let cloud = hcloud(&c);
        assert_eq!(
            cloud.instances.address_family,
            cloud_client::hcloud::AddressFamily::DualStack
        );
        assert!(!format!("{cloud:?}").contains("t0ken"));
    }

    #[test]
    fn a_token_with_a_trailing_newline_is_trimmed_not_refused() {
        let args = parse(&["--hcloud-token", "t0ken\n"]);
        let config = args.validate(&INFO, true).unwrap();
        let cloud = hcloud(&config);
        assert_eq!(cloud.client.token, Secret::new("t0ken"));
        let err = parse(&["--hcloud-token", "t0 ken"])
            .validate(&INFO, true)
            .unwrap_err();
        assert!(err.to_string().contains("whitespace"), "{err}");
    }

    #[test]
    fn lease_defaults() {
        let mut args = parse(&[]);
        args.cloud
            .settings
            .values
            .give_secret("HCLOUD_TOKEN", Some(Secret::new("x")));
        let c = args.validate(&INFO, true).unwrap();
        let le = c.leader_election.unwrap();
        assert_eq!(le.lease_name, "cloud-controller-manager-node-controller");
        assert_eq!(le.namespace, "kube-system");
        assert_eq!(le.lease_duration, Duration::from_secs(15));
    }

    #[test]
    fn a_shadow_plans_into_its_cloud_and_takes_a_lease_of_its_own() {
        for (flags, lease) in [
            (
                &["--dry-run"][..],
                "cloud-controller-manager-node-controller-dry-run",
            ),
            (
                &["--dry-run=true", "--leader-elect-resource-name=ccm"][..],
                "ccm-dry-run",
            ),
        ] {
            let mut args = parse(flags);
            args.cloud
                .settings
                .values
                .give_secret("HCLOUD_TOKEN", Some(Secret::new("x")));
            let c = args.validate(&INFO, true).unwrap();
            assert_eq!(c.leader_election.as_ref().unwrap().lease_name, lease);
            let cloud_plan = configured(&c).planned_writes.clone().unwrap();
            let plan = c.planned_writes.unwrap();
            assert!(std::sync::Arc::ptr_eq(&plan, &cloud_plan), "one plan");
        }
        let mut args = parse(&[]);
        args.cloud
            .settings
            .values
            .give_secret("HCLOUD_TOKEN", Some(Secret::new("x")));
        let c = args.validate(&INFO, true).unwrap();
        assert!(
            c.planned_writes.is_none() && configured(&c).planned_writes.is_none(),
            "acting by default"
        );
    }

    #[test]
    fn klog_verbosity_and_vmodule_become_the_log_filter() {
        let mut args = parse(&[
            "--v=4",
            "--vmodule=cloud-client=6,service_controller::node_sync*=2",
            "--logging-format=json",
        ]);
        args.cloud
            .settings
            .values
            .give_secret("HCLOUD_TOKEN", Some(Secret::new("x")));
        let c = args.validate(&INFO, true).unwrap();
        assert_eq!(
            c.log_filter,
            "debug,cloud_client=trace,service_controller::node_sync=info"
        );
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(
            parse(&[]).validate(&INFO, false).unwrap().log_filter,
            "info"
        );
        let err = parse(&["--v=loud", "--vmodule=a.go"])
            .validate(&INFO, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--v=\"loud\"") && err.contains("\"a.go\""),
            "{err}"
        );
    }

    #[test]
    fn kube_api_rate_and_master() {
        let c = parse(&[]).validate(&INFO, false).unwrap();
        assert_eq!((c.kube_api_rate, c.master), (None, None));
        let c = parse(&["--kube-api-qps=5.5", "--master=https://10.0.0.1:6443"])
            .validate(&INFO, false)
            .unwrap();
        assert_eq!(
            c.kube_api_rate,
            Some(KubeApiRate {
                qps: 5.5,
                burst: 30
            })
        );
        assert_eq!(c.master.as_deref(), Some("https://10.0.0.1:6443"));
        let c = parse(&["--kube-api-burst=50"])
            .validate(&INFO, false)
            .unwrap();
        assert_eq!(
            c.kube_api_rate,
            Some(KubeApiRate {
                qps: 20.0,
                burst: 50
            })
        );
        let err = parse(&[
            "--kube-api-qps=0",
            "--kube-api-burst=-1",
            "--master=10.0.0.1",
        ])
        .validate(&INFO, false)
        .unwrap_err();
        assert_eq!(err.problems.len(), 3, "{err}");
    }
}
