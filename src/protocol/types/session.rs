//! A session as the registry keeps it: its fields, its channel tag, usage, security
//! state and lifecycle state, and the readers that accept older stored forms.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::ChannelKind;
use crate::protocol::driver::DriverSpec;

/// A session in the registry. `Default` is the empty session, so a place that makes one
/// names only the fields it sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    /// Through the hub: the kiln the session belongs to (its name); absent from a kiln's
    /// own daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln: Option<String>,
    #[serde(default)]
    pub worktree: Option<String>,
    pub agent_type: String,
    pub agent_name: String,
    /// "active" or "idle".
    pub status: String,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub last_heartbeat: String,
    /// `{worktree} @ {agent}`.
    pub display_name: String,
    /// The lifecycle state of a session whose agent crucible runs; absent for a session
    /// that registered itself.
    #[serde(default)]
    pub state: Option<SessionState>,
    /// Why the session is in its state: the error, or how it stopped.
    #[serde(default)]
    pub state_reason: Option<String>,
    /// The task the session was created with.
    #[serde(default)]
    pub task: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    /// Whether crucible created the worktree (and may remove it on delete).
    #[serde(default)]
    pub worktree_owned: bool,
    /// The agent's own id for the conversation, used to resume it after a restart.
    #[serde(default)]
    pub acp_session_id: Option<String>,
    /// The agent process while it runs.
    #[serde(default)]
    pub agent_pid: Option<u32>,
    /// RFC 3339: the last change of state.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Termination record: when the agent ended, and its exit code if it had one.
    #[serde(default)]
    pub ended_at: Option<String>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// A bounded summary of the session's context (its `GOAL:`/`ENTITIES:`/
    /// `DECISIONS:`/`PENDING:`/`TURNS:` lines, at most 1,000 characters), updated after
    /// every turn; absent before the first.
    #[serde(default)]
    pub context_summary: Option<String>,
    /// How many turns have ended.
    #[serde(default)]
    pub turn_count: u64,
    /// Where the agent runs; absent: `local`.
    #[serde(default, deserialize_with = "object_or_text")]
    pub driver: Option<DriverSpec>,
    /// The limits in force on the agent's environment, as the driver applied them.
    #[serde(default)]
    pub limits: Vec<String>,
    /// What the rules know of this session.
    #[serde(default, deserialize_with = "security_state")]
    pub security: SecurityState,
    /// The agent's own commands (ACP `available_commands_update`): `name — description`.
    #[serde(default)]
    pub skills: Vec<String>,
    /// The kiln's branch this session's branch was made from: what `session.diff`
    /// compares against and `session.merge` merges into.
    #[serde(default)]
    pub base_branch: Option<String>,
    /// Context and cost as the agent last reported them (ACP `usage_update`).
    #[serde(
        default,
        deserialize_with = "object_or_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<Usage>,
    /// What the session has spent, as far as its agent told (tokens, cost, by day), and
    /// how far a person raised its budget.
    #[serde(
        default,
        deserialize_with = "object_or_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub spent: Option<Spent>,
    /// What its agent's process tree costs the machine now (CPU time so far, resident
    /// memory); filled in by `session.list` when asked, never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Lineage of a hand-off: the session whose task this one took over, and the one
    /// that took this one's over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handed_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handed_to: Option<String>,
    /// Set when the hand-off to `handed_to` was a profile switch of the fallback chain
    /// (a usage limit, or the task coming back at the limit's reset).
    #[serde(
        default,
        deserialize_with = "object_or_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub switched: Option<super::ProfileSwitch>,
    /// The channel that started it and the conversation it carries, for sessions started
    /// from outside the workbench (a webhook); `None` for the workbench and the CLI.
    #[serde(
        default,
        deserialize_with = "object_or_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub channel: Option<ChannelTag>,
    /// The daemon that runs the session's agent (its instance id), and the host it runs
    /// on. Several daemons share sessions in team mode; each drives only its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Prompts acknowledged (`queued: true`) and not yet given to the agent, oldest
    /// first: kept with the session, so a restart runs them.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub queued: Vec<String>,
    /// The prompt of the turn running now; once the session is `interrupted`, of the turn
    /// that was cut short: what `session.resend` sends again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_prompt: Option<String>,
}

impl Session {
    /// A session that starts now: the one constructor, so that every session begins
    /// active with its start and first heartbeat at `now`; a place that makes one sets
    /// the rest by name (`..Session::started(…)`).
    pub fn started(
        id: String,
        worktree: Option<String>,
        agent_type: String,
        agent_name: String,
        display_name: String,
        now: String,
    ) -> Session {
        Session {
            id,
            worktree,
            agent_type,
            agent_name,
            status: "active".into(),
            started_at: now.clone(),
            last_heartbeat: now,
            display_name,
            ..Session::default()
        }
    }
}

/// Where a session's messages come from (the channel's kind and the conversation's
/// reference) and how the last one found its session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelTag {
    /// Which channel.
    pub kind: ChannelKind,
    /// Which hook or job: its name.
    pub source: String,
    /// The conversation within it (the hook's `ref` value, e.g. an issue number).
    #[serde(rename = "ref")]
    pub reference: String,
    /// How the last message was resolved to this session.
    pub reason: Resolution,
    /// When the last message arrived (RFC 3339).
    pub last_message_at: String,
    /// Closed by `session.close` or a newer session of the same conversation: the next
    /// message starts a new one.
    #[serde(default)]
    pub closed: bool,
    /// Where the session's questions are posted in Matrix: its cron job's or webhook's
    /// own `approval_target`, as the kiln's settings said when the message came (a bot
    /// that does not read that kiln's settings, the person's hub's, still finds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_target: Option<String>,
    /// The kiln ran a Matrix bot of its own (`[channels.matrix]` in its settings) when
    /// the message came: that bot posts the session's questions, and the person's bot
    /// leaves them to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_bot: bool,
}

impl ChannelTag {
    /// `webhook issues/42`.
    pub fn label(&self) -> String {
        if self.reference.is_empty() {
            format!("{} {}", self.kind, self.source)
        } else {
            format!("{} {}/{}", self.kind, self.source, self.reference)
        }
    }
}

/// How an inbound message found its session: which policy fired (reset phrase, timeout,
/// closed, drift, or continue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// A reset phrase: the conversation starts afresh.
    ExplicitReset,
    /// The first message of the conversation.
    NoSession,
    /// Its last session was closed or has ended.
    Closed,
    /// Its last session was quiet longer than the timeout.
    Timeout,
    /// The model judged the message off its conversation's topic (when a drift check is
    /// configured).
    Drift,
    /// The same conversation, within the timeout: the message goes to its session.
    Continue,
    /// A cron job's run (every run is a new session).
    Scheduled,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::ExplicitReset => "explicit_reset",
            Resolution::NoSession => "no_session",
            Resolution::Closed => "closed",
            Resolution::Timeout => "timeout",
            Resolution::Drift => "drift",
            Resolution::Continue => "continue",
            Resolution::Scheduled => "scheduled",
        }
    }

    /// Whether the message starts a new session or continues one.
    pub fn decision(self) -> &'static str {
        if self == Resolution::Continue {
            "continue"
        } else {
            "new"
        }
    }
}

/// A session's context window use and cost, from the agent (ACP `usage_update`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the agent's context now.
    pub used: u64,
    /// The context window, in tokens.
    pub size: u64,
    /// The session's cost so far, when the agent says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Its unit: a currency code (`USD`) or another unit (`credits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// The CPU time and resident memory of a session's agent and everything it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_secs: f64,
    pub rss_bytes: u64,
    pub processes: u32,
}

/// What a session has spent, in all and by UTC day. `None` is unknown: the agent never
/// told (it is never shown as zero).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars: as the agent reported them, or its tokens priced (`priced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub priced: bool,
    /// By UTC day (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub days: std::collections::BTreeMap<String, DaySpent>,
    /// The session cost the agent last reported: an agent counts from zero again in a
    /// new process, so only its increase is spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<f64>,
    /// How far a person raised this session's budget, over the settings' limits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub raised_cost: f64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub raised_tokens: u64,
}

/// What a session spent in one day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaySpent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// A session's security state: rules its operations activated, rules
/// switched off for it, operations approved once (not asked again), credentials approved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Rule id → what activated it (the operation, when).
    #[serde(default)]
    pub activated: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Fingerprint of the operation → the operation, in words.
    #[serde(default)]
    pub approved_operations: std::collections::BTreeMap<String, String>,
    /// Names only.
    #[serde(default)]
    pub approved_credentials: Vec<String>,
    /// The read manifest: when set, reads outside these globs (relative ones
    /// from the worktree) end the session with `CONTEXT_MISS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_manifest: Option<Vec<String>>,
    /// How often the manifest was widened for this work item.
    #[serde(default)]
    pub refinements: u32,
}

/// How often a work item's read manifest may be widened (`cru session refine`).
pub const MAX_REFINEMENT_ATTEMPTS: u32 = 10;

impl SecurityState {
    pub fn is_empty(&self) -> bool {
        self == &SecurityState::default()
    }
}

/// The security state, as an object on the wire or its JSON text as the store keeps it.
fn security_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SecurityState, D::Error> {
    object_or_text(d).map(Option::unwrap_or_default)
}

/// A list the store leaves out when empty (read back as `null`): empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// A value the wire carries as an object and the store keeps as its JSON text (a
/// driver spec, a security state, usage, a message's purpose): either is read.
pub(super) fn object_or_text<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(other) => serde_json::from_value(other)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

impl Session {
    /// Whether crucible runs this session's agent.
    pub fn is_managed(&self) -> bool {
        self.state.is_some()
    }
}

/// The lifecycle of a session crucible runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The worktree is being prepared.
    Creating,
    /// Its agent waits to start until the host has the memory `[fleet]` asks to keep
    /// free; `state_reason` says how much there is, and the prompt it will start with is
    /// kept in `queued`.
    Queued,
    /// The agent process is starting and being initialised.
    Starting,
    /// A turn is running.
    Working,
    /// A turn is running and a blocking inbox message waits for a human.
    Waiting,
    /// The last turn ended; the agent waits for a prompt.
    Complete,
    /// The last turn was cancelled; the agent waits for a prompt.
    Cancelled,
    /// The last turn was cut short before it ended (the daemon stopped, or the agent
    /// ended in its middle); `state_reason` says how, and `session.resend` sends its
    /// prompt again.
    Interrupted,
    /// The agent has ended; the worktree and transcript are kept.
    Stopped,
    /// Idle too long: its environment (sandbox, ssh connection, container) was torn
    /// down; the worktree, transcript and context stay, and the next prompt makes the
    /// environment again and resumes.
    Parked,
    /// Something failed; `state_reason` says what.
    Error,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Creating => "creating",
            SessionState::Queued => "queued",
            SessionState::Starting => "starting",
            SessionState::Working => "working",
            SessionState::Waiting => "waiting",
            SessionState::Complete => "complete",
            SessionState::Cancelled => "cancelled",
            SessionState::Interrupted => "interrupted",
            SessionState::Stopped => "stopped",
            SessionState::Parked => "parked",
            SessionState::Error => "error",
        }
    }

    /// Whether the session is doing something right now (its status is `active`).
    pub fn is_busy(self) -> bool {
        matches!(
            self,
            SessionState::Creating
                | SessionState::Queued
                | SessionState::Starting
                | SessionState::Working
                | SessionState::Waiting
        )
    }

    /// Whether no turn runs and the session waits for a prompt (the last turn ended, was
    /// cancelled or was cut short).
    pub fn is_resting(self) -> bool {
        matches!(
            self,
            SessionState::Complete | SessionState::Cancelled | SessionState::Interrupted
        )
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
