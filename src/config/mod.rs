//! Settings: `<kiln>/.crucible.toml` over `~/.config/crucible/config.toml` over built-in
//! defaults. Unlike the wire protocol, settings reject unknown keys: a typo should fail
//! loudly with the file, the key and the reason, not be silently ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod budget;
mod builtin;
mod channels;
mod cron;
mod drivers;
mod fleet;
mod hub;
mod load;
mod matrix;
mod profiles;
mod schema;
mod settings;
mod stamp;
mod validate;
mod web;
mod webhooks;
pub use budget::{BudgetConfig, KNOWN_PRICES, Limits as BudgetLimits, Price};
pub use builtin::{Finder, KNOWN, Known, NoAgent, ProfileEntry, ProfileError, ProfileSource};
pub use channels::{ChannelError, ChannelsConfig, HttpConfig, NotifyConfig, RESET_PHRASES};
pub use cron::CronJob;
pub use drivers::{DriversConfig, DriversError};
pub use fleet::FleetConfig;
pub use hub::{HubConfig, HubSettingsError, RemoteKilns};
pub use load::{ConfigError, person_asks_hub, settings_files, user_settings_path};
pub use matrix::MatrixConfig;
pub use profiles::{AgentKind, AgentProfile};
pub use schema::{SCHEMA_FILE, schema_text};
pub use settings::{
    Attention, DaemonConfig, InboxConfig, MAX_LIST_LIMIT, StoreAuth, StoreConfig, TuiConfig,
};
pub use stamp::FileStamp;
pub use validate::InvalidSettings;
pub use web::{DEFAULT_PORT as WEB_DEFAULT_PORT, WebAddress, WebConfig};
pub use webhooks::WebhookConfig;

/// crucible's settings: `<kiln>/.crucible.toml` and `~/.config/crucible/config.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[derive(Default)]
pub struct Config {
    /// `[kiln]`: this kiln as the person's other kilns see it.
    pub kiln: KilnConfig,
    pub daemon: DaemonConfig,
    pub inbox: InboxConfig,
    pub store: StoreConfig,
    /// Agent profiles by name: `[agents.<name>]`, over the built-in ones
    /// ([`Config::profile`]).
    pub agents: BTreeMap<String, AgentProfile>,
    /// The full-screen workbench.
    pub tui: TuiConfig,
    /// Where agents run: `[drivers]` and `[drivers.<name>]` defaults.
    pub drivers: DriversConfig,
    /// `[[rules]]`: added to the built-in rules, or switching them off.
    pub rules: Vec<crate::rules::RuleSpec>,
    /// `[secrets.<NAME>]`: where a credential an agent asks for comes from; a name not
    /// listed comes from the daemon's environment variable of that name.
    pub secrets: BTreeMap<String, SecretSource>,
    /// `[channels]`: how messages from webhooks find their session, and the HTTP
    /// listener.
    pub channels: ChannelsConfig,
    /// `[[webhooks]]`: `POST /hooks/<name>` starts or continues a session.
    pub webhooks: Vec<WebhookConfig>,
    /// `[[cron]]`: sessions started on a schedule.
    pub cron: Vec<CronJob>,
    /// `[notify]`: a command told of every message that needs a human.
    pub notify: NotifyConfig,
    /// `[web]`: the web view.
    pub web: WebConfig,
    /// `[budget]`: what sessions may spend.
    pub budget: BudgetConfig,
    /// `[hub]`: the person's hub (in their own settings): kilns on other machines.
    pub hub: HubConfig,
    /// `[fleet]`: the memory kept free on the host before another agent starts.
    pub fleet: FleetConfig,
}

/// `[kiln]`: this kiln as the person's other kilns see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct KilnConfig {
    /// The name `cru kilns` and every view across kilns show it by (default: the
    /// folder's name).
    pub name: Option<String>,
}

/// Where a credential's value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// A command whose standard output is the value, e.g. `pass show api/token`.
    #[serde(default)]
    pub command: Option<String>,
    /// Another environment variable of the daemon to read it from.
    #[serde(default)]
    pub env: Option<String>,
}

impl Config {
    /// The webhook named `name`.
    pub fn webhook(&self, name: &str) -> Option<&WebhookConfig> {
        self.webhooks.iter().find(|h| h.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::default();
        assert_eq!(c.daemon.grace_period_secs, 5);
        assert_eq!(c.daemon.heartbeat_interval_secs, 30);
        assert_eq!(c.daemon.session_timeout_secs, 300);
        assert_eq!(c.inbox.default_limit, 50);
    }

    #[test]
    fn bad_values_are_rejected_with_reason() {
        for (text, needle) in [
            (
                "[daemon]\ngrace_period_secs = \"soon\"\n",
                "grace_period_secs",
            ),
            ("[daemon]\ngrace_period_secs = -1\n", "grace_period_secs"),
            ("[inbox]\ndefault_limit = 0\n", "default_limit"),
            (
                "[daemon]\nsession_timeout_secs = 10\n",
                "session_timeout_secs",
            ),
            ("[store]\nurl = \"postgres://x\"\n", "store.url"),
            ("not toml at all [", "expected"),
            ("[agents.x]\nargs = []\n", "command"),
            ("[agents.x]\ncommand = \"\"\n", "agents.x.command"),
            ("[agents.x]\ntype = \"telnet\"\ncommand = \"a\"\n", "telnet"),
            ("[agents.\"a b\"]\ncommand = \"a\"\n", "profile name"),
            ("[agents.x]\ncommand = \"a\"\nargz = []\n", "argz"),
        ] {
            let err = Config::parse_layer(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?} gave {err}");
        }
    }

    #[test]
    fn example_file_is_valid_and_complete() {
        let text = include_str!("../../.crucible.toml.example");
        let table = Config::parse_layer(text).expect("the example parses");
        let example: Config = toml::from_str(text).unwrap();
        for name in ["claude", "codex", "gemini", "opencode"] {
            let profile = &example.agents[name];
            assert_eq!(profile.kind, AgentKind::Acp, "{name}");
        }
        assert_eq!(example.agents["claude"].command, "claude-agent-acp");
        assert_eq!(example.agents["gemini"].args, ["--acp"]);
        assert_eq!(example.agents["opencode"].args, ["acp"]);
        // Every key of the model appears in the example.
        let full = toml::Table::try_from(Config::default()).unwrap();
        for (section, keys) in full {
            let toml::Value::Table(keys) = keys else {
                continue;
            };
            for key in keys.keys() {
                let present = table
                    .get(&section)
                    .and_then(|s| s.as_table())
                    .is_some_and(|s| s.contains_key(key))
                    || text.contains(&format!("# {key} ="));
                assert!(
                    present,
                    "{section}.{key} is not documented in .crucible.toml.example"
                );
            }
        }
    }
}
