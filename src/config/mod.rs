//! Settings: `<kiln>/.crucible.toml` over `~/.config/crucible/config.toml` over built-in
//! defaults. Unlike the wire protocol, settings reject unknown keys: a typo should fail
//! loudly with the file, the key and the reason, not be silently ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::{DriverKind, DriverOptions, DriverSpec};

mod builtin;
mod channels;
pub use builtin::{Finder, KNOWN, Known, ProfileEntry, ProfileSource};
pub use channels::{
    ChannelError, ChannelsConfig, CronJob, HttpConfig, NotifyConfig, RESET_PHRASES, WebhookConfig,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid settings in {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[derive(Default)]
pub struct Config {
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
}

/// Where a credential's value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// A command whose standard output is the value, e.g. `pass show api/token`.
    #[serde(default)]
    pub command: Option<String>,
    /// Another environment variable of the daemon to read it from.
    #[serde(default)]
    pub env: Option<String>,
}

/// `[drivers]`: defaults per driver, under what a session asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriversConfig {
    /// A sandbox, ssh or podman environment idle this long is torn down (the worktree
    /// and transcript stay) and made again by the next prompt.
    pub idle_timeout_minutes: f64,
    pub sandbox: DriverOptions,
    pub ssh: DriverOptions,
    pub podman: DriverOptions,
}

impl Default for DriversConfig {
    fn default() -> Self {
        Self {
            idle_timeout_minutes: 15.0,
            sandbox: DriverOptions::default(),
            ssh: DriverOptions::default(),
            podman: DriverOptions::default(),
        }
    }
}

impl Config {
    /// The webhook named `name`.
    pub fn webhook(&self, name: &str) -> Option<&WebhookConfig> {
        self.webhooks.iter().find(|h| h.name == name)
    }

    /// The driver a session of `profile` gets when it asks for `asked`: the driver named
    /// in `asked`, else the profile's, else `local`; options from `asked` over
    /// `[drivers.<name>]`.
    pub fn driver_spec(
        &self,
        profile: &AgentProfile,
        asked: &DriverOptions,
    ) -> Result<DriverSpec, String> {
        let kind = asked.driver.or(profile.driver).unwrap_or_default();
        let section = match kind {
            DriverKind::Local => DriverOptions::default(),
            DriverKind::Sandbox => self.drivers.sandbox.clone(),
            DriverKind::Ssh => self.drivers.ssh.clone(),
            DriverKind::Podman => self.drivers.podman.clone(),
        };
        let mut merged = asked.over(&section);
        merged.driver = Some(kind);
        merged.resolve()
    }
}

/// `[tui]`: the workbench's look, keys and attention signal. Applied live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    /// A built-in theme (`dark`, `light`) or a `<name>.toml` in `<kiln>/themes/` or the
    /// user's `themes/` settings folder, which win over the built-in ones.
    pub theme: String,
    /// How a session that needs you announces itself when it is not focused.
    pub attention: Attention,
    /// The agent profile `/new` uses when none is given; empty: the only profile, if
    /// there is exactly one.
    pub default_agent: String,
    /// Key bindings over the defaults: action name → key, e.g. `next_waiting = "alt-w"`.
    pub keys: toml::Table,
    /// A working session with no agent output for this long shows how long it has been
    /// quiet.
    pub stall_secs: u64,
}

impl Default for TuiConfig {
    fn default() -> Self {
        Self {
            theme: "dark".into(),
            attention: Attention::Bell,
            default_agent: String::new(),
            keys: toml::Table::new(),
            stall_secs: 120,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// The terminal bell.
    #[default]
    Bell,
    /// An OSC 9 desktop notification (iTerm2, WezTerm, kitty, foot, Windows Terminal…).
    Osc9,
    None,
}

/// How crucible starts one kind of agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// How crucible talks to the agent.
    #[serde(rename = "type", default)]
    pub kind: AgentKind,
    /// The program, found on `PATH` unless it is a path (`acp` and `command` only).
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the environment the agent inherits from the daemon.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long the agent may take to answer `initialize` and open its session.
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_secs: u64,
    /// `internal` only: the API root of an OpenAI-compatible chat-completions endpoint,
    /// e.g. `http://localhost:11434/v1` (Ollama).
    #[serde(default)]
    pub base_url: String,
    /// `internal` only: the model to ask.
    #[serde(default)]
    pub model: String,
    /// `internal` only: the environment variable holding the API key, sent as a bearer
    /// token; none is sent when unset.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `internal` only: the system prompt (the bottom of the context stack); a built-in
    /// one describing the tools and the worktree when unset.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// `internal` only: write files without asking (otherwise every write is an
    /// `approval_required` message).
    #[serde(default)]
    pub allow_writes: bool,
    /// `internal` only: run commands without asking.
    #[serde(default)]
    pub allow_commands: bool,
    /// `internal` only: seed 003's tool-error policy: a failed tool result is popped and
    /// replaced by the error message alone (`pop(1)` + inject the error).
    #[serde(default)]
    pub recover_tool_errors: bool,
    /// Where this profile's sessions run unless a session asks otherwise (`local`).
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// `internal` only: the model writes the session's context summary after every turn
    /// (and for `summarize`); `false` uses the deterministic summary and saves a request.
    #[serde(default = "default_true")]
    pub model_summaries: bool,
}

fn default_true() -> bool {
    true
}

fn default_startup_timeout() -> u64 {
    60
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// The Agent Client Protocol over the agent's stdin and stdout.
    #[default]
    Acp,
    /// A plain program run once per prompt: the prompt on its stdin, its stdout the
    /// reply, its exit the end of the turn.
    Command,
    /// Crucible's own agent loop over an OpenAI-compatible chat endpoint.
    Internal,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Acp => "acp",
            AgentKind::Command => "command",
            AgentKind::Internal => "internal",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Seconds the daemon stays up after its last client leaves and no agent runs.
    pub grace_period_secs: u64,
    /// How often clients are expected to heartbeat their sessions.
    pub heartbeat_interval_secs: u64,
    /// A registered session that has not heartbeat for this long is cleaned up.
    pub session_timeout_secs: u64,
    /// How long a registered session's termination record (why and when it ended, its
    /// exit code) is kept for `cru session status` after it ends.
    pub ended_session_ttl_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InboxConfig {
    /// How many messages `inbox.list` returns when no limit is given.
    pub default_limit: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Where the database lives: empty for the embedded `surrealkv://<kiln>/.crucible/db`,
    /// `mem://` for a throwaway in-memory store, or `ws://host:port` for a SurrealDB server.
    pub url: String,
    pub namespace: String,
    pub database: String,
    /// For a server: user to sign in as, at the level `auth` names; the password is read
    /// from the environment variable named by `password_env`.
    pub username: Option<String>,
    pub password_env: Option<String>,
    /// The level the user is defined at: `root`, `namespace` or `database`.
    pub auth: StoreAuth,
    /// For `wss://`: a PEM file of the certificate authority to trust besides the
    /// usual public ones (a team's own CA).
    pub ca_file: Option<PathBuf>,
    /// For a server: how long a request may go unanswered before the daemon says the
    /// server is unreachable and refuses writes until it is back.
    pub timeout_secs: u64,
    /// Team mode: how long a daemon holds its sessions without renewing its lease. After
    /// that, another daemon takes them over.
    pub lease_secs: u64,
    /// Upper bound of the embedded engine's block cache, in MiB.
    pub cache_mb: u64,
    /// Upper bound of the embedded engine's in-memory write buffer, in MiB.
    pub write_buffer_mb: u64,
    /// Free disk space, in MiB, below which the embedded engine takes no new writes (and
    /// does not open): room for its own flushes and recovery, so a full disk is an error
    /// for new writes and never damage to stored ones.
    pub reserve_mb: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            grace_period_secs: 5,
            heartbeat_interval_secs: 30,
            session_timeout_secs: 300,
            ended_session_ttl_secs: 86_400,
        }
    }
}

impl Default for InboxConfig {
    fn default() -> Self {
        Self { default_limit: 50 }
    }
}

/// The level a database user is defined at (SurrealDB's root, namespace and database
/// users).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreAuth {
    #[default]
    Root,
    Namespace,
    Database,
}

impl StoreConfig {
    /// Whether the store is a SurrealDB server (team mode).
    pub fn is_server(&self) -> bool {
        self.url.starts_with("ws://") || self.url.starts_with("wss://")
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            namespace: "crucible".into(),
            database: "kiln".into(),
            username: None,
            password_env: None,
            auth: StoreAuth::Root,
            ca_file: None,
            timeout_secs: 10,
            lease_secs: 15,
            cache_mb: 8,
            write_buffer_mb: 8,
            reserve_mb: 64,
        }
    }
}

/// The most messages one `inbox.list` may return.
pub const MAX_LIST_LIMIT: u32 = 10_000;

impl Config {
    /// Loads the layered settings for a kiln.
    pub fn load(kiln_settings: &Path) -> Result<Self, ConfigError> {
        let layers: Vec<Option<PathBuf>> = settings_files(kiln_settings)
            .into_iter()
            .map(Some)
            .collect();
        Self::load_layers(&layers)
    }

    /// Loads `layers` in order, later over earlier, over the defaults. Missing files are
    /// skipped; every present file must be valid on its own.
    pub fn load_layers(layers: &[Option<PathBuf>]) -> Result<Self, ConfigError> {
        let mut merged = toml::Table::new();
        for path in layers.iter().flatten() {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: path.clone(),
                        source,
                    });
                }
            };
            let table = Self::parse_layer(&text).map_err(|message| ConfigError::Invalid {
                path: path.clone(),
                message,
            })?;
            merge(&mut merged, table);
        }
        let config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Invalid {
                    path: PathBuf::from("(merged settings)"),
                    message: e.message().to_string(),
                })?;
        config.validate().map_err(|message| ConfigError::Invalid {
            path: PathBuf::from("(merged settings)"),
            message,
        })?;
        Ok(config)
    }

    /// Parses and checks one file on its own, so an error names the file it is in.
    pub fn parse_layer(text: &str) -> Result<toml::Table, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let alone: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        alone.validate()?;
        Ok(table)
    }

    /// Checks values that types alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        let d = &self.daemon;
        if d.heartbeat_interval_secs == 0 {
            return Err("daemon.heartbeat_interval_secs must be at least 1".into());
        }
        if d.session_timeout_secs <= d.heartbeat_interval_secs {
            return Err(format!(
                "daemon.session_timeout_secs ({}) must be longer than daemon.heartbeat_interval_secs ({})",
                d.session_timeout_secs, d.heartbeat_interval_secs
            ));
        }
        if !(1..=MAX_LIST_LIMIT).contains(&self.inbox.default_limit) {
            return Err(format!(
                "inbox.default_limit must be between 1 and {MAX_LIST_LIMIT}"
            ));
        }
        let url = self.store.url.as_str();
        if !(url.is_empty()
            || url.starts_with("mem://")
            || url.starts_with("surrealkv://")
            || url.starts_with("ws://")
            || url.starts_with("wss://"))
        {
            return Err(format!(
                "store.url {url:?} is not supported: use \"\" (embedded), \"mem://\", \"surrealkv://PATH\", \"ws://HOST:PORT\" or \"wss://HOST:PORT\""
            ));
        }
        if self.store.is_server() && (self.store.timeout_secs == 0 || self.store.lease_secs < 3) {
            return Err(
                "store.timeout_secs must be at least 1 and store.lease_secs at least 3".into(),
            );
        }
        self.channels.http.address()?;
        if self.notify.max_per_minute == 0 || self.notify.timeout_secs == 0 {
            return Err("notify.max_per_minute and notify.timeout_secs must be at least 1".into());
        }
        if self.channels.http.max_body_kb == 0 {
            return Err("channels.http.max_body_kb must be at least 1".into());
        }
        for (i, job) in self.cron.iter().enumerate() {
            job.validate()?;
            if self.cron[..i].iter().any(|j| j.id == job.id) {
                return Err(format!("cron: two jobs have the id {:?}", job.id));
            }
        }
        for (i, hook) in self.webhooks.iter().enumerate() {
            hook.validate()?;
            if self.webhooks[..i].iter().any(|h| h.name == hook.name) {
                return Err(format!("webhooks: two hooks are named {:?}", hook.name));
            }
        }
        if self.store.cache_mb == 0 || self.store.write_buffer_mb == 0 {
            return Err("store.cache_mb and store.write_buffer_mb must be at least 1".into());
        }
        for (name, profile) in &self.agents {
            if !is_name(name) {
                return Err(format!(
                    "agents.{name}: a profile name may use only letters, digits, '-' and '_'"
                ));
            }
            if profile.kind == AgentKind::Internal {
                if profile.base_url.trim().is_empty() || profile.model.trim().is_empty() {
                    return Err(format!(
                        "agents.{name}: an internal agent needs base_url and model"
                    ));
                }
                if !(profile.base_url.starts_with("http://")
                    || profile.base_url.starts_with("https://"))
                {
                    return Err(format!(
                        "agents.{name}.base_url must start with http:// or https://"
                    ));
                }
            } else if profile.command.trim().is_empty() {
                return Err(format!("agents.{name}.command must not be empty"));
            }
            if profile.startup_timeout_secs == 0 {
                return Err(format!(
                    "agents.{name}.startup_timeout_secs must be at least 1"
                ));
            }
        }
        Ok(())
    }
}

/// `~/.config/crucible/config.toml` (XDG aware), if a home directory is known.
/// The files a kiln's settings come from, in the order they are layered (the user's, then
/// the kiln's): what the loader reads and what watchers follow.
pub fn settings_files(kiln_settings: &Path) -> Vec<PathBuf> {
    user_settings_path()
        .into_iter()
        .chain(std::iter::once(kiln_settings.to_path_buf()))
        .collect()
}

pub fn user_settings_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "crucible").map(|d| d.config_dir().join("config.toml"))
}

/// A name settings give things (profiles, hooks, jobs): letters, digits, `-` and `_`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn defaults_match_seed_003() {
        let c = Config::default();
        assert_eq!(c.daemon.grace_period_secs, 5);
        assert_eq!(c.daemon.heartbeat_interval_secs, 30);
        assert_eq!(c.daemon.session_timeout_secs, 300);
        assert_eq!(c.inbox.default_limit, 50);
    }

    #[test]
    fn kiln_layer_overrides_user_layer_key_by_key() {
        let tmp = tempfile::tempdir().unwrap();
        let user = write(
            tmp.path(),
            "user.toml",
            "[daemon]\ngrace_period_secs = 9\nsession_timeout_secs = 600\n",
        );
        let kiln = write(tmp.path(), "kiln.toml", "[daemon]\ngrace_period_secs = 1\n");
        let c = Config::load_layers(&[Some(user), Some(kiln)]).unwrap();
        assert_eq!(c.daemon.grace_period_secs, 1);
        assert_eq!(c.daemon.session_timeout_secs, 600);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let tmp = tempfile::tempdir().unwrap();
        let kiln = write(tmp.path(), "kiln.toml", "[daemon]\ngrace_perod_secs = 1\n");
        let err = Config::load_layers(&[Some(kiln.clone())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("kiln.toml"), "{err}");
        assert!(err.contains("grace_perod_secs"), "{err}");
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
            let err = Config::parse_layer(text).unwrap_err();
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
