//! Which cloud, and its settings: `--cloud-provider` selects a registered provider
//! ([`cloud_client::registry`]), and every built-in provider's settings are flags (and variables)
//! of every binary, declared by the provider itself. The kit reads none of them: it hands them
//! to the selected provider, which checks them all and reports every problem.

use std::convert::Infallible;
use std::sync::Arc;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use cloud_client::registry::{Provider, ProviderConfig, Registry, SettingValues, Uses};
use cloud_client::{Capability, Secret};

use super::problems::Problems;

/// `--cloud-provider` and the providers' settings.
#[derive(Args, Debug, Clone, Default)]
pub struct CloudArgs {
    /// Cloud provider, by its registered name; default: the first built in (`hcloud`, the only
    /// one).
    #[arg(long)]
    pub cloud_provider: Option<String>,

    /// The built-in providers' settings.
    #[command(flatten)]
    pub settings: ProviderSettings,
}

impl CloudArgs {
    /// The provider `--cloud-provider` selects in `registry`, or the problem.
    pub fn provider(&self, registry: &Registry) -> Result<Arc<dyn Provider>, String> {
        registry.select(self.cloud_provider.as_deref()).cloned()
    }

    /// What keeps the selected built-in provider from offering `capability` with these settings
    /// (e.g. routes without a network), for a controller to add to its problems.
    pub fn requirements(&self, capability: Capability) -> Vec<String> {
        match self.provider(&cloud_client::providers::builtin()) {
            Ok(provider) => provider.requirements(capability, &self.settings.values),
            // The selection's own problem is reported once, by the common validation.
            Err(_) => Vec::new(),
        }
    }

    /// A providerID prefix of the selected built-in provider, for messages (e.g. `hcloud://`).
    pub fn provider_id_example(&self) -> &'static str {
        self.provider(&cloud_client::providers::builtin())
            .map(|provider| provider.provider_id_example())
            .unwrap_or("<provider>://")
    }

    /// The selected provider's checked settings; their problems go to `p`.
    pub(super) fn configure(
        &self,
        provider: &dyn Provider,
        uses: &Uses,
        p: &mut Problems,
    ) -> Option<Arc<dyn ProviderConfig>> {
        match provider.configure(&self.settings.values, uses) {
            Ok(config) => Some(config),
            Err(problems) => {
                problems.into_iter().for_each(|problem| p.push(problem));
                None
            }
        }
    }
}

/// Every built-in provider's settings as the command line gave them, read the way clap reads a
/// flag with an environment variable. A credential is a [`Secret`] from the moment clap reads it.
#[derive(Debug, Clone, Default)]
pub struct ProviderSettings {
    pub values: SettingValues,
}

impl Args for ProviderSettings {
    fn augment_args(mut cmd: Command) -> Command {
        for setting in cloud_client::providers::builtin().settings() {
            let arg = Arg::new(setting.env)
                .long(setting.flag())
                .env(setting.env)
                .help(setting.help)
                .action(ArgAction::Set);
            cmd = cmd.arg(if setting.secret {
                arg.hide_env_values(true)
                    .value_parser(|v: &str| Ok::<_, Infallible>(Secret::new(v)))
            } else {
                arg
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ProviderSettings {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut values = SettingValues::from_env();
        for setting in cloud_client::providers::builtin().settings() {
            if setting.secret {
                values.give_secret(setting.env, matches.get_one::<Secret>(setting.env).cloned());
            } else {
                values.give(setting.env, matches.get_one::<String>(setting.env).cloned());
            }
        }
        Ok(Self { values })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}
