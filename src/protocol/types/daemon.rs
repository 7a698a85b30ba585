//! The daemon as `daemon.status` shows it: its store, its team, its settings and its
//! Matrix channel.

use serde::{Deserialize, Serialize};

use super::StoreHealth;

/// `daemon.status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub daemon_version: String,
    pub protocol_version: u32,
    pub kiln: String,
    pub database: String,
    pub uptime_secs: u64,
    pub clients: usize,
    pub sessions: usize,
    /// Agent processes the daemon runs.
    #[serde(default)]
    pub agents: usize,
    pub unread: u64,
    /// `embedded`, `memory` or `server` (team mode).
    #[serde(default)]
    pub store_kind: String,
    /// Whether the database answers (always, for an embedded one).
    #[serde(default)]
    pub store: Option<StoreHealth>,
    /// This daemon, as other daemons see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<DaemonInfo>,
    /// Team mode: the other daemons sharing the database, live or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemons: Vec<DaemonInfo>,
    /// Why the settings files cannot be used; the daemon keeps the last good ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
    /// Changes of the settings the daemon has not applied, each saying what to do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings_pending: Vec<String>,
    /// Why the database refuses every write (a storage failure stopped them), while it
    /// does: everything acknowledged before is kept, and a restart is what resumes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_refused: Option<String>,
    /// The Matrix channel, when `[channels.matrix]` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixStatus>,
    /// What each of the daemon's components (the Matrix channel, the web view, the
    /// webhook listener, cron, the notify command) reports, in the order they started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentStatus>,
}

/// One component of the daemon as `daemon.status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentStatus {
    /// `matrix`, `web`, `webhooks`, `cron`, `notify`.
    pub name: String,
    pub state: ComponentState,
    /// What it does now, in a line: where it listens, whom it is logged in as.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// What went wrong last, while it is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether a component is at work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentState {
    /// Working.
    On,
    /// Not set up in the settings, or turned off there.
    Off,
    /// Set up, not working yet (logging in).
    Starting,
    /// Set up, and failing: `error` says why; it tries again.
    Failing,
}

impl ComponentState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Starting => "starting",
            Self::Failing => "failing",
        }
    }
}

/// The Matrix channel as `daemon.status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixStatus {
    /// The bot account.
    pub user_id: String,
    pub homeserver: String,
    /// Whether the bot is logged in (its stored device restored).
    #[serde(default)]
    pub logged_in: bool,
    /// The bot's device, which allowed users verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// The rooms it has joined.
    #[serde(default)]
    pub rooms: usize,
    /// RFC 3339: the last sync the homeserver answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<String>,
    /// What went wrong last (cleared by the next good sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The device's ed25519 key (base64), which a person compares by hand to verify the
    /// bot without emoji (Element calls it the session key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Whether the bot's own identity has signed its device (cross-signing), which clients
    /// that exclude insecure devices need before they talk to it.
    #[serde(default)]
    pub cross_signed: bool,
    /// The emoji verification under way or last ended, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<MatrixVerification>,
}

/// An emoji (SAS) verification of the bot's device by an allowed user: the emoji both
/// sides show, and how far it is. The bot confirms only when the person says they match
/// (`matrix.verify`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixVerification {
    /// Who verifies the bot, from which of their devices.
    pub user_id: String,
    pub device_id: String,
    /// The verification's id (its transaction or the request event's id).
    pub flow_id: String,
    pub state: VerificationState,
    /// The seven emoji to compare, once the keys are exchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emoji: Vec<VerificationEmoji>,
    /// The same as three numbers, for clients that show no emoji.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decimals: Option<[u16; 3]>,
    /// Why it was cancelled, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl MatrixVerification {
    /// The emoji in one line: `🐶 Dog, 🐱 Cat, …`.
    pub fn emoji_line(&self) -> String {
        self.emoji
            .iter()
            .map(|e| format!("{} {}", e.symbol, e.description))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How far an emoji verification is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationState {
    /// Asked for and accepted; the keys are not exchanged yet.
    #[default]
    Requested,
    /// The emoji are shown: waiting for the person to say whether they match.
    Emoji,
    /// The person said they match; waiting for the other side.
    Confirmed,
    /// Both sides confirmed: the device is verified.
    Done,
    Cancelled,
}

impl VerificationState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Emoji => "emoji",
            Self::Confirmed => "confirmed",
            Self::Done => "done",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether the verification has ended (done or cancelled).
    pub fn is_over(self) -> bool {
        matches!(self, Self::Done | Self::Cancelled)
    }
}

/// One emoji of a verification, with its name (`🐶`, `Dog`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationEmoji {
    pub symbol: String,
    pub description: String,
}

/// `matrix.verify`: whether the emoji the bot shows match the ones on the person's
/// client (`true` confirms, `false` cancels as a mismatch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixVerifyParams {
    pub confirm: bool,
}

/// One daemon of a team (a record of the `daemons` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// Its instance id, which sessions' `owner` names.
    pub id: String,
    pub host: String,
    pub kiln: String,
    pub pid: u32,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339: it holds its sessions until then unless it renews.
    pub lease_until: String,
    /// The daemon that took its sessions over after its lease ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_by: Option<String>,
    /// Whether its lease is current (as this daemon sees the clock).
    #[serde(default)]
    pub live: bool,
}
