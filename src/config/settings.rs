//! The plain settings sections: `[tui]`, `[daemon]`, `[inbox]` and `[store]`, with their
//! defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[tui]`: the workbench's look, keys and attention signal. Applied live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    /// A built-in theme (`dark`, `light`, `terminal`: the terminal's own sixteen colours)
    /// or a `<name>.toml` in `<kiln>/themes/` or the
    /// user's `themes/` settings folder, which win over the built-in ones.
    pub theme: String,
    /// How a session that needs you announces itself when it is not focused.
    pub attention: Attention,
    /// The agent profile `/new` uses when none is given; empty: the only profile, if
    /// there is exactly one.
    pub default_agent: String,
    /// Key bindings over the defaults: action name → key, e.g. `next_waiting = "alt-w"`,
    /// or a list of keys (`[]` unbinds).
    #[schemars(schema_with = "key_bindings_schema")]
    pub keys: toml::Table,
    /// A working session with no agent output for this long shows how long it has been
    /// quiet.
    pub stall_secs: u64,
}

/// `[tui.keys]`: action name → one key or a list of keys.
fn key_bindings_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } },
            ]
        },
    })
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

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// The terminal bell.
    #[default]
    Bell,
    /// An OSC 9 desktop notification (iTerm2, WezTerm, kitty, foot, Windows Terminal…).
    Osc9,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Seconds the daemon stays up after its last client leaves and no agent runs.
    pub grace_period_secs: u64,
    /// How often clients are expected to heartbeat their sessions.
    #[schemars(range(min = 1))]
    pub heartbeat_interval_secs: u64,
    /// A registered session that has not heartbeat for this long is cleaned up.
    pub session_timeout_secs: u64,
    /// How long a registered session's termination record (why and when it ended, its
    /// exit code) is kept for `cru session status` after it ends.
    pub ended_session_ttl_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct InboxConfig {
    /// How many messages `inbox.list` returns when no limit is given.
    #[schemars(range(min = 1, max = MAX_LIST_LIMIT))]
    pub default_limit: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    #[schemars(range(min = 1))]
    pub cache_mb: u64,
    /// Upper bound of the embedded engine's in-memory write buffer, in MiB.
    #[schemars(range(min = 1))]
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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema,
)]
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
