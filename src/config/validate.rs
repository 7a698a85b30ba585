//! What settings types alone cannot check: ranges, the store's address, the channels'
//! own rules, and the agent profiles.

use super::Config;
use super::budget::BudgetSettingsError;
use super::channels::ChannelError;
use super::drivers::DriversError;
use super::matrix::{MatrixSettingsError, is_target};
use super::profiles::AgentKind;
use super::settings::MAX_LIST_LIMIT;
use super::web::WebSettingsError;

/// Why settings are refused.
#[derive(Debug, thiserror::Error)]
pub enum InvalidSettings {
    /// Not TOML, or a key or value of the wrong kind.
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// A value out of its range or against another, and why.
    #[error("{0}")]
    Value(String),
    /// A channel's settings: the listen address, a hook, a cron job.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// A `[drivers]` table that cannot be meant.
    #[error(transparent)]
    Drivers(#[from] DriversError),
    /// `[channels.matrix]`.
    #[error(transparent)]
    Matrix(#[from] MatrixSettingsError),
    /// `[web]`.
    #[error(transparent)]
    Web(#[from] WebSettingsError),
    /// `[budget]`.
    #[error(transparent)]
    Budget(#[from] BudgetSettingsError),
    /// `[hub]`.
    #[error(transparent)]
    Hub(#[from] super::hub::HubSettingsError),
}

impl Config {
    /// Checks values that types alone cannot.
    pub fn validate(&self) -> Result<(), InvalidSettings> {
        self.check_daemon_and_store()?;
        self.channels.http.address()?;
        self.drivers.check()?;
        self.check_matrix()?;
        self.web.validate()?;
        self.check_fallbacks()?;
        self.budget.validate()?;
        self.hub.validate()?;
        self.check_channels()?;
        if self.store.cache_mb == 0 || self.store.write_buffer_mb == 0 {
            return Err(InvalidSettings::Value(
                "store.cache_mb and store.write_buffer_mb must be at least 1".into(),
            ));
        }
        self.check_profiles()
    }

    /// `[daemon]`, `[inbox]` and the store's address and timings.
    fn check_daemon_and_store(&self) -> Result<(), InvalidSettings> {
        let d = &self.daemon;
        if d.heartbeat_interval_secs == 0 {
            return Err(InvalidSettings::Value(
                "daemon.heartbeat_interval_secs must be at least 1".into(),
            ));
        }
        if d.session_timeout_secs <= d.heartbeat_interval_secs {
            return Err(InvalidSettings::Value(format!(
                "daemon.session_timeout_secs ({}) must be longer than daemon.heartbeat_interval_secs ({})",
                d.session_timeout_secs, d.heartbeat_interval_secs
            )));
        }
        if !(1..=MAX_LIST_LIMIT).contains(&self.inbox.default_limit) {
            return Err(InvalidSettings::Value(format!(
                "inbox.default_limit must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        let url = self.store.url.as_str();
        if !(url.is_empty()
            || url.starts_with("mem://")
            || url.starts_with("surrealkv://")
            || url.starts_with("ws://")
            || url.starts_with("wss://"))
        {
            return Err(InvalidSettings::Value(format!(
                "store.url {url:?} is not supported: use \"\" (embedded), \"mem://\", \"surrealkv://PATH\", \"ws://HOST:PORT\" or \"wss://HOST:PORT\""
            )));
        }
        if self.store.is_server() && (self.store.timeout_secs == 0 || self.store.lease_secs < 3) {
            return Err(InvalidSettings::Value(
                "store.timeout_secs must be at least 1 and store.lease_secs at least 3".into(),
            ));
        }
        Ok(())
    }

    /// Each profile's `idle_stop_minutes` and `fallback`.
    fn check_fallbacks(&self) -> Result<(), InvalidSettings> {
        for (name, profile) in &self.agents {
            if let Some(minutes) = profile.idle_stop_minutes
                && !(minutes.is_finite() && minutes >= 0.0)
            {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.idle_stop_minutes must be 0 or more (0: never)"
                )));
            }
            self.check_chain(name, &profile.fallback)?;
            if profile.fallback_return && profile.fallback.is_empty() {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.fallback_return needs a fallback to come back from"
                )));
            }
        }
        Ok(())
    }

    /// A profile's `fallback` chain: other agent profiles (the settings' or built-in),
    /// each once.
    fn check_chain(&self, name: &str, chain: &[String]) -> Result<(), InvalidSettings> {
        for (i, other) in chain.iter().enumerate() {
            if other.trim().is_empty() || other == name {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.fallback must name other agent profiles, not {other:?}"
                )));
            }
            let builtin = super::builtin::KNOWN.iter().any(|k| k.name == other);
            if !self.agents.contains_key(other) && !builtin {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.fallback names {other:?}, which is no agent profile \
                     (define [agents.{other}] or use a built-in one)"
                )));
            }
            if chain[..i].contains(other) {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.fallback names {other:?} twice"
                )));
            }
        }
        Ok(())
    }

    /// `[notify]`, `[channels.http]`, the cron jobs and the webhooks (ids and names
    /// unique).
    fn check_channels(&self) -> Result<(), InvalidSettings> {
        if self.notify.max_per_minute == 0 || self.notify.timeout_secs == 0 {
            return Err(InvalidSettings::Value(
                "notify.max_per_minute and notify.timeout_secs must be at least 1".into(),
            ));
        }
        if self.channels.http.max_body_kb == 0 {
            return Err(InvalidSettings::Value(
                "channels.http.max_body_kb must be at least 1".into(),
            ));
        }
        for (i, job) in self.cron.iter().enumerate() {
            job.validate()?;
            if self.cron[..i].iter().any(|j| j.id == job.id) {
                return Err(InvalidSettings::Value(format!(
                    "cron: two jobs have the id {:?}",
                    job.id
                )));
            }
        }
        for (i, hook) in self.webhooks.iter().enumerate() {
            hook.validate()?;
            if self.webhooks[..i].iter().any(|h| h.name == hook.name) {
                return Err(InvalidSettings::Value(format!(
                    "webhooks: two hooks are named {:?}",
                    hook.name
                )));
            }
        }
        Ok(())
    }

    /// Each profile's name, what its kind needs, and its startup time.
    fn check_profiles(&self) -> Result<(), InvalidSettings> {
        for (name, profile) in &self.agents {
            if !is_name(name) {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}: a profile name may use only letters, digits, '-' and '_'"
                )));
            }
            if profile.kind == AgentKind::Internal {
                if profile.base_url.trim().is_empty() || profile.model.trim().is_empty() {
                    return Err(InvalidSettings::Value(format!(
                        "agents.{name}: an internal agent needs base_url and model"
                    )));
                }
                if !(profile.base_url.starts_with("http://")
                    || profile.base_url.starts_with("https://"))
                {
                    return Err(InvalidSettings::Value(format!(
                        "agents.{name}.base_url must start with http:// or https://"
                    )));
                }
            } else if profile.command.trim().is_empty() {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.command must not be empty"
                )));
            }
            if profile.startup_timeout_secs == 0 {
                return Err(InvalidSettings::Value(format!(
                    "agents.{name}.startup_timeout_secs must be at least 1"
                )));
            }
        }
        Ok(())
    }
}

impl Config {
    /// `[channels.matrix]` and the `approval_target`s that need it.
    fn check_matrix(&self) -> Result<(), InvalidSettings> {
        if let Some(matrix) = &self.channels.matrix {
            matrix.validate()?;
        }
        let targets = self
            .cron
            .iter()
            .map(|j| (format!("cron.{}", j.id), &j.approval_target))
            .chain(
                self.webhooks
                    .iter()
                    .map(|h| (format!("webhooks.{}", h.name), &h.approval_target)),
            );
        for (owner, target) in targets {
            let Some(target) = target else { continue };
            if !is_target(target) {
                return Err(InvalidSettings::Value(format!(
                    "{owner}.approval_target {target:?} is not a Matrix room (!id, #alias) or user (@name:server)"
                )));
            }
        }
        Ok(())
    }

    /// Every `approval_target` has a bot to post there: this kiln's `[channels.matrix]`,
    /// or (`bot_elsewhere`) the person's own, which their hub runs for every kiln.
    pub(super) fn check_targets_have_a_bot(
        &self,
        bot_elsewhere: bool,
    ) -> Result<(), InvalidSettings> {
        if self.channels.matrix.is_some() || bot_elsewhere {
            return Ok(());
        }
        let owner = self
            .cron
            .iter()
            .find(|j| j.approval_target.is_some())
            .map(|j| format!("cron.{}", j.id))
            .or_else(|| {
                self.webhooks
                    .iter()
                    .find(|h| h.approval_target.is_some())
                    .map(|h| format!("webhooks.{}", h.name))
            });
        match owner {
            Some(owner) => Err(InvalidSettings::Value(format!(
                "{owner}.approval_target needs [channels.matrix] (here, or in your own settings for your hub's bot)"
            ))),
            None => Ok(()),
        }
    }
}

/// A name settings give things (profiles, hooks, jobs): letters, digits, `-` and `_`.
pub(super) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
