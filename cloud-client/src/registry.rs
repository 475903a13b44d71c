//! Providers by name, as upstream's `cloudprovider.RegisterCloudProvider(name, factory)`:
//! `--cloud-provider=<name>` selects one, and the provider owns its settings. It declares them
//! ([`Provider::settings`], so every binary lists them in `--help` and takes them as flags),
//! parses and checks them ([`Provider::configure`]), and builds the [`Cloud`] the controllers use.
//! The controllers and their kit never name a provider's variables.
//!
//! A [`Registry`] is a plain value: the binaries use [`crate::providers::builtin`], tests
//! register providers of their own next to it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::capabilities::{Capability, Cloud};
use crate::error::CloudError;
use crate::secret::Secret;
use crate::shadow::PlannedWrites;

/// One setting of a provider: an environment variable (the name users know, e.g. HCCM's
/// `HCLOUD_TOKEN`), also taken as a flag named after it (`--hcloud-token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub env: &'static str,
    pub help: &'static str,
    /// A credential: read straight into a [`Secret`], its value never shown in `--help`.
    pub secret: bool,
    /// What the controllers' kit reads it for, when it is not the provider's own.
    pub kit: Option<KitSetting>,
}

impl Setting {
    /// The flag's name: the variable in lower case, `_` as `-`.
    pub fn flag(&self) -> String {
        self.env.to_ascii_lowercase().replace('_', "-")
    }
}

/// Settings a provider names but the kit reads: where `/metrics` is served goes by the
/// provider's names (HCCM's `HCLOUD_METRICS_*`), so an operator's environment works unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KitSetting {
    /// Whether `/metrics` is served at all (default true).
    MetricsEnabled,
    /// Serve `/metrics` on this address instead of the admin address.
    MetricsAddress,
}

/// Reads one environment variable.
type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The values the settings were given: the flag when given, else the environment (empty counts
/// as unset, as in HCCM). A provider may also read variables it does not declare as flags (they
/// are too many for `--help`, e.g. the load-balancer defaults); those come from the environment.
#[derive(Clone, Default)]
pub struct SettingValues {
    /// The declared settings, each with what the command line (or clap, from the environment)
    /// gave it: the one reader of a declared setting.
    given: BTreeMap<&'static str, Option<String>>,
    secrets: BTreeMap<&'static str, Option<Secret>>,
    /// The environment; replaceable for tests.
    env: Option<Arc<EnvLookup>>,
}

impl fmt::Debug for SettingValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettingValues")
            .field("given", &self.given)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl SettingValues {
    /// Values read from the process environment for what is not given.
    pub fn from_env() -> Self {
        Self::with_env(|name| std::env::var(name).ok())
    }

    /// Values read from `env` for what is not given (tests).
    pub fn with_env(env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self {
            env: Some(Arc::new(env)),
            ..Self::default()
        }
    }

    /// Records what the command line gave a declared setting (`None`: nothing, not even its
    /// variable).
    pub fn give(&mut self, env: &'static str, value: Option<String>) {
        self.given.insert(env, value);
    }

    /// Records what the command line gave a declared credential.
    pub fn give_secret(&mut self, env: &'static str, value: Option<Secret>) {
        self.secrets.insert(env, value);
    }

    /// The value of `env`: as given when declared, else from the environment.
    pub fn get(&self, env: &str) -> Option<String> {
        match self.given.get(env) {
            Some(given) => given.clone(),
            None => self.env.as_ref().and_then(|lookup| lookup(env)),
        }
    }

    /// The credential `env`: as given when declared, else from the environment.
    pub fn secret(&self, env: &str) -> Option<Secret> {
        match self.secrets.get(env) {
            Some(given) => given.clone(),
            None => self.get(env).map(Secret::new),
        }
    }
}

/// What a controller will use (a bad load-balancer default stops the service-controller, not the
/// other three), and shadow mode's plan for the provider's writes.
#[derive(Debug, Clone, Default)]
pub struct Uses {
    pub load_balancers: bool,
    /// Shadow mode (`--dry-run`): cloud writes are planned here instead of being sent.
    pub shadow: Option<Arc<PlannedWrites>>,
}

/// A provider's checked settings, ready to build the [`Cloud`].
#[async_trait]
pub trait ProviderConfig: fmt::Debug + Send + Sync {
    /// Builds the cloud: clients, and what the cloud must confirm at startup (e.g. that a
    /// configured network exists). What the cloud says about the configuration itself is a
    /// [`CloudError::InvalidConfig`] or [`CloudError::NotFound`]; anything else is retryable.
    async fn build(&self) -> Result<Cloud, CloudError>;
    /// For a test that looks at the provider's own settings.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A cloud provider, registered by name.
pub trait Provider: Send + Sync {
    /// `--cloud-provider`'s value for it.
    fn name(&self) -> &'static str;
    /// Its settings, listed in every binary's `--help`.
    fn settings(&self) -> &'static [Setting];
    /// Checks the settings for `uses`: every problem at once, each naming the setting.
    fn configure(
        &self,
        values: &SettingValues,
        uses: &Uses,
    ) -> Result<Arc<dyn ProviderConfig>, Vec<String>>;
    /// What keeps `capability` from being configured with `values`, checked before anything runs
    /// (e.g. routes need a network). Empty when nothing does.
    fn requirements(&self, capability: Capability, values: &SettingValues) -> Vec<String>;
    /// A providerID prefix of this provider, for messages (e.g. `hcloud://`).
    fn provider_id_example(&self) -> &'static str;
}

/// The providers a binary knows, by name.
#[derive(Clone)]
pub struct Registry {
    providers: Vec<Arc<dyn Provider>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// A registry of `providers`; the first is the default `--cloud-provider`. The binaries use
    /// [`crate::providers::builtin`].
    pub fn new(providers: Vec<Arc<dyn Provider>>) -> Self {
        assert!(!providers.is_empty(), "a registry needs a provider");
        Self { providers }
    }

    /// Adds (or replaces) a provider under its name.
    pub fn register(&mut self, provider: Arc<dyn Provider>) {
        self.providers.retain(|p| p.name() != provider.name());
        self.providers.push(provider);
    }

    /// The provider named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.providers.iter().find(|p| p.name() == name)
    }

    /// The provider used when `--cloud-provider` is not given.
    pub fn default_provider(&self) -> &Arc<dyn Provider> {
        &self.providers[0]
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.providers.iter().map(|p| p.name()).collect()
    }

    /// Every provider's settings, for `--help` and flag parsing.
    pub fn settings(&self) -> impl Iterator<Item = &'static Setting> + '_ {
        self.providers.iter().flat_map(|p| p.settings().iter())
    }

    /// The provider `--cloud-provider` names (the default when `None`), or why there is none.
    pub fn select(&self, name: Option<&str>) -> Result<&Arc<dyn Provider>, String> {
        match name {
            None => Ok(self.default_provider()),
            Some(n) => self.get(n).ok_or_else(|| {
                let names = self.names();
                match names.as_slice() {
                    [only] => format!("--cloud-provider={n:?}: only {only:?} is supported"),
                    _ => format!(
                        "--cloud-provider={n:?}: not a known provider ({})",
                        names.join(", ")
                    ),
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_named_after_their_variables() {
        let s = Setting {
            env: "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            help: "",
            secret: false,
            kit: None,
        };
        assert_eq!(s.flag(), "hcloud-instances-address-family");
    }

    #[test]
    fn given_values_win_over_the_environment_and_secrets_stay_redacted() {
        let mut v = SettingValues::with_env(|name| Some(format!("{name} from env")));
        assert_eq!(v.get("A").as_deref(), Some("A from env"));
        v.give("A", Some("given".into()));
        assert_eq!(v.get("A").as_deref(), Some("given"));
        v.give("B", None);
        assert_eq!(
            v.get("B"),
            None,
            "a declared setting is read by the command line alone"
        );
        v.give_secret("T", Some(Secret::new("t0ken")));
        assert_eq!(v.secret("T"), Some(Secret::new("t0ken")));
        assert!(!format!("{v:?}").contains("t0ken"));
    }

    #[test]
    fn the_selection_names_what_is_known() {
        let r = crate::providers::builtin();
        assert_eq!(r.select(None).unwrap().name(), "hcloud");
        assert_eq!(r.select(Some("hcloud")).unwrap().name(), "hcloud");
        assert_eq!(
            r.select(Some("external-cloudstack")).unwrap().name(),
            "external-cloudstack"
        );
        assert_eq!(
            r.select(Some("aws")).err().unwrap(),
            "--cloud-provider=\"aws\": not a known provider (hcloud, external-cloudstack)"
        );
        let one = Registry::new(vec![r.default_provider().clone()]);
        assert_eq!(
            one.select(Some("aws")).err().unwrap(),
            "--cloud-provider=\"aws\": only \"hcloud\" is supported"
        );
    }
}
