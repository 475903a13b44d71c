//! Which cloud, and its settings: `--cloud-provider` selects a registered provider
//! ([`cloud_client::registry`]), and every built-in provider's settings are flags (and variables)
//! of every binary, declared by the provider itself. The kit reads none of them: it hands them
//! to the selected provider, which checks them all and reports every problem.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use cloud_client::registry::{Provider, ProviderConfig, Registry, Setting, SettingValues, Uses};
use cloud_client::{Capability, Secret};

use super::problems::Problems;
use crate::cli::{Ignored, Why};

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

    /// The settings given on the command line that `provider` does not read: other providers'
    /// (`--cloud-config` is CloudStack's, and runs under `--cloud-provider=hcloud` to no
    /// effect), each named in the startup Warning with the provider it belongs to.
    pub fn unread_settings(&self, registry: &Registry, provider: &dyn Provider) -> Vec<Ignored> {
        let own = |env: &str| provider.settings().iter().any(|s| s.env == env);
        self.settings
            .given_as_flags
            .iter()
            .filter(|setting| !own(setting.env))
            .filter_map(|setting| {
                let owner = registry
                    .names()
                    .into_iter()
                    .filter_map(|name| registry.get(name))
                    .find(|p| p.settings().iter().any(|s| s.env == setting.env))?;
                Some((Cow::Owned(setting.flag()), Why::SettingOf(owner.name())))
            })
            .collect()
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
    /// The settings given as flags (not from their variables): whichever provider runs, the
    /// others' are named as given without effect.
    pub given_as_flags: Vec<&'static Setting>,
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
        let mut given_as_flags = Vec::new();
        for setting in cloud_client::providers::builtin().settings() {
            if matches.value_source(setting.env) == Some(ValueSource::CommandLine) {
                given_as_flags.push(setting);
            }
            if setting.secret {
                values.give_secret(setting.env, matches.get_one::<Secret>(setting.env).cloned());
            } else {
                values.give(setting.env, matches.get_one::<String>(setting.env).cloned());
            }
        }
        Ok(Self {
            values,
            given_as_flags,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}
