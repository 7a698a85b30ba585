//! The data that crosses the wire: sessions, inbox messages and events (the params and
//! results of the methods are in `params.rs`). Wire types never deny unknown fields; new fields get
//! `#[serde(default)]` so older and newer peers can talk.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::driver::DriverSpec;
use crate::context::{Change, Checkpoint};

/// The kinds of inbox message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MsgType {
    DecisionNeeded,
    ApprovalRequired,
    TaskComplete,
    Error,
    Info,
}

impl MsgType {
    pub const ALL: [MsgType; 5] = [
        MsgType::DecisionNeeded,
        MsgType::ApprovalRequired,
        MsgType::TaskComplete,
        MsgType::Error,
        MsgType::Info,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MsgType::DecisionNeeded => "decision_needed",
            MsgType::ApprovalRequired => "approval_required",
            MsgType::TaskComplete => "task_complete",
            MsgType::Error => "error",
            MsgType::Info => "info",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the sending agent waits for a human answer.
    pub fn blocks(self) -> bool {
        matches!(self, MsgType::DecisionNeeded | MsgType::ApprovalRequired)
    }
}

impl std::fmt::Display for MsgType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answers an approval accepts when the agent offers no options of its own.
/// Words that mean "approve" and "deny" for an approval whose options say it otherwise.
pub const APPROVING_WORDS: [&str; 5] = ["approve", "allow", "yes", "accept", "ok"];
pub const DENYING_WORDS: [&str; 5] = ["deny", "reject", "no", "decline", "cancel"];

pub const APPROVAL_ANSWERS: [&str; 2] = ["approve", "deny"];

/// A session in the registry. `Default` is the empty session, so a place that makes one
/// names only the fields it sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
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
}

/// Where a session's messages come from (the channel's kind and the conversation's
/// reference) and how the last one found its session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelTag {
    /// `webhook` (or `cron`).
    pub kind: String,
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

/// Seed 001's resolution of an inbound message: which policy fired.
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
    /// Seed 002's read manifest: when set, reads outside these globs (relative ones
    /// from the worktree) end the session with `CONTEXT_MISS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_manifest: Option<Vec<String>>,
    /// How often the manifest was widened for this work item.
    #[serde(default)]
    pub refinements: u32,
}

/// Seed 002: how often a work item's read manifest may be widened.
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

/// A value the wire carries as an object and the store keeps as its JSON text (a
/// driver spec, a security state, usage): either is read.
fn object_or_text<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
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
            SessionState::Starting => "starting",
            SessionState::Working => "working",
            SessionState::Waiting => "waiting",
            SessionState::Complete => "complete",
            SessionState::Cancelled => "cancelled",
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
                | SessionState::Starting
                | SessionState::Working
                | SessionState::Waiting
        )
    }

    /// Whether the agent runs and waits for a prompt (the last turn ended or was
    /// cancelled).
    pub fn is_resting(self) -> bool {
        matches!(self, SessionState::Complete | SessionState::Cancelled)
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a session's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub session_id: String,
    /// 1, 2, 3… within the session.
    pub seq: u64,
    /// RFC 3339.
    pub at: String,
    pub kind: EntryKind,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// A tool call's status, a permission's outcome, or a turn's stop reason.
    #[serde(default)]
    pub status: Option<String>,
}

/// What a transcript entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A prompt sent to the agent (the task or a follow-up).
    Prompt,
    /// Text the agent wrote.
    Message,
    /// The agent's reasoning.
    Thought,
    /// A tool call the agent started.
    ToolCall,
    /// A change to a tool call (usually its status).
    ToolUpdate,
    /// The agent's plan, one `[status] step` per line.
    Plan,
    /// A permission request and, in `status`, its outcome.
    Permission,
    /// A file the agent read or wrote through crucible, or was refused.
    File,
    /// The end of a turn; `status` is the stop reason.
    TurnEnd,
    /// A change of lifecycle state.
    State,
    /// Something that went wrong.
    Error,
}

/// Streamed text, pushed as it arrives (the transcript stores it in whole messages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputChunk {
    pub session_id: String,
    /// `message` or `thought`.
    pub kind: EntryKind,
    pub text: String,
}

/// A message in the inbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxMessage {
    pub id: String,
    pub session_id: String,
    pub session_name: String,
    /// RFC 3339.
    pub timestamp: String,
    pub msg_type: MsgType,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// For an approval from an ACP agent: each option's kind (`allow_once`,
    /// `allow_always`, `reject_once`, `reject_always`), in the options' order; what
    /// `approve` and `deny` are mapped by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_kinds: Option<Vec<String>>,
    /// For an approval a rule asked for: the rule. Such an approval is approved only after
    /// a confirmation that names [`operation`](Self::operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// For an approval a rule asked for: the operation it covers, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub responded: bool,
    #[serde(default)]
    pub response: Option<String>,
    /// Closed without a human answer (its turn was cancelled, its session stopped);
    /// `response` says why.
    #[serde(default)]
    pub withdrawn: bool,
}

impl InboxMessage {
    /// The answers `inbox.respond` accepts for this message, if it takes one at all.
    /// The option an answer stands for: the option itself (any case), its number
    /// (1-based, as shown), or for an approval a word of intent (`approve`, `allow`,
    /// `yes`… / `deny`, `reject`, `no`…): the option of kind `allow_once` (else
    /// `allow_always`) or `reject_once` (else `reject_always`) when the kinds are known,
    /// otherwise the first option that starts with such a word.
    pub fn answer_for(&self, answer: &str) -> Option<String> {
        let options = self.accepted_answers()?;
        let answer = answer.trim();
        if let Some(exact) = options.iter().find(|o| o.eq_ignore_ascii_case(answer)) {
            return Some(exact.clone());
        }
        if let Ok(n) = answer.parse::<usize>() {
            return n.checked_sub(1).and_then(|i| options.get(i)).cloned();
        }
        if self.msg_type != MsgType::ApprovalRequired {
            return None;
        }
        let lower = answer.to_lowercase();
        let (words, kinds): (&[&str], [&str; 2]) = if APPROVING_WORDS.contains(&lower.as_str()) {
            (&APPROVING_WORDS, ["allow_once", "allow_always"])
        } else if DENYING_WORDS.contains(&lower.as_str()) {
            (&DENYING_WORDS, ["reject_once", "reject_always"])
        } else {
            return None;
        };
        // By the ACP kinds when the agent gave them: the once-option first.
        if let Some(given) = self
            .option_kinds
            .as_ref()
            .filter(|k| k.len() == options.len())
        {
            return kinds
                .iter()
                .find_map(|kind| given.iter().position(|g| g == kind))
                .map(|i| options[i].clone());
        }
        options
            .iter()
            .find(|o| {
                let o = o.to_lowercase();
                words.iter().any(|w| o.starts_with(w))
            })
            .cloned()
    }

    pub fn accepted_answers(&self) -> Option<Vec<String>> {
        match (self.msg_type, &self.options) {
            (t, _) if !t.blocks() => None,
            (_, Some(options)) if !options.is_empty() => Some(options.clone()),
            (MsgType::ApprovalRequired, _) => {
                Some(APPROVAL_ANSWERS.iter().map(|s| s.to_string()).collect())
            }
            // A decision without options takes free text.
            _ => Some(Vec::new()),
        }
    }
}

/// Change events pushed to subscribers as JSON-RPC notifications. The notification's
/// method is [`Event::method`]; its params are the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data")]
pub enum Event {
    #[serde(rename = "session.registered")]
    SessionRegistered(Session),
    #[serde(rename = "session.updated")]
    SessionUpdated(Session),
    #[serde(rename = "session.deregistered")]
    SessionDeregistered { session_id: String, reason: String },
    #[serde(rename = "inbox.created")]
    InboxCreated(InboxMessage),
    #[serde(rename = "inbox.updated")]
    InboxUpdated(InboxMessage),
    #[serde(rename = "inbox.deleted")]
    InboxDeleted { ids: Vec<String> },
    #[serde(rename = "session.transcript")]
    Transcript(TranscriptEntry),
    #[serde(rename = "session.output")]
    Output(OutputChunk),
    /// A session's context stack changed (an entry pushed, or an operation).
    #[serde(rename = "session.context")]
    Context(ContextUpdate),
    /// The conflict radar changed (after a turn ended, or a session went).
    #[serde(rename = "session.conflicts")]
    Conflicts(super::review::ConflictReport),
    /// The database went away or came back (team mode: a SurrealDB server). While it is
    /// away, writes are refused and nothing is acknowledged.
    #[serde(rename = "daemon.store")]
    Store(StoreHealth),
    /// Changes may have been missed (the database's live queries were re-established):
    /// read the state again. Sent to clients as `events.lagged`.
    #[serde(rename = "events.lagged")]
    Resync {
        missed: u64,
        #[serde(default)]
        reason: String,
    },
}

/// Whether the daemon can reach its database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreHealth {
    pub connected: bool,
    /// Why it is not, while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the embedded engine cannot read back: one line per damaged stretch (see
    /// `db.check`); empty when nothing is known to be damaged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<String>,
}

impl Event {
    pub fn method(&self) -> &'static str {
        match self {
            Event::SessionRegistered(_) => "session.registered",
            Event::SessionUpdated(_) => "session.updated",
            Event::SessionDeregistered { .. } => "session.deregistered",
            Event::InboxCreated(_) => "inbox.created",
            Event::InboxUpdated(_) => "inbox.updated",
            Event::InboxDeleted { .. } => "inbox.deleted",
            Event::Transcript(_) => "session.transcript",
            Event::Output(_) => "session.output",
            Event::Context(_) => "session.context",
            Event::Conflicts(_) => "session.conflicts",
            Event::Store(_) => "daemon.store",
            Event::Resync { .. } => "events.lagged",
        }
    }

    /// The notification params: the payload without the tag.
    pub fn params(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => map.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// Rebuilds an event from a notification.
    pub fn from_notification(method: &str, params: Value) -> Option<Self> {
        serde_json::from_value(serde_json::json!({"event": method, "data": params})).ok()
    }

    pub fn topic(&self) -> Topic {
        match self {
            Event::SessionRegistered(_)
            | Event::SessionUpdated(_)
            | Event::SessionDeregistered { .. }
            | Event::Context(_)
            | Event::Conflicts(_)
            | Event::Store(_)
            | Event::Resync { .. } => Topic::Session,
            Event::Transcript(_) | Event::Output(_) => Topic::Transcript,
            Event::InboxCreated(_) | Event::InboxUpdated(_) | Event::InboxDeleted { .. } => {
                Topic::Inbox
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    Session,
    Inbox,
    /// Transcript entries and streamed output of the sessions crucible runs.
    Transcript,
}

/// The `session.context` event: what changed, and the stack's shape after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextUpdate {
    pub session_id: String,
    pub change: Change,
    /// Entries on the stack after the change, the system prompt included.
    pub entries: usize,
    pub checkpoints: Vec<Checkpoint>,
    #[serde(default)]
    pub fresh_start: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(msg_type: MsgType, options: Option<Vec<&str>>) -> InboxMessage {
        InboxMessage {
            id: "m".into(),
            session_id: "s".into(),
            session_name: "main @ a".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            msg_type,
            title: "t".into(),
            body: None,
            options: options.map(|o| o.into_iter().map(String::from).collect()),
            option_kinds: None,
            rule: None,
            operation: None,
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
        }
    }

    #[test]
    fn event_round_trips_through_a_notification() {
        let event = Event::InboxCreated(message(MsgType::Info, None));
        let back = Event::from_notification(event.method(), event.params()).unwrap();
        assert_eq!(back, event);
        let gone = Event::InboxDeleted {
            ids: vec!["a".into()],
        };
        assert_eq!(
            Event::from_notification(gone.method(), gone.params()).unwrap(),
            gone
        );
    }

    #[test]
    fn accepted_answers_follow_the_type() {
        assert_eq!(message(MsgType::Info, None).accepted_answers(), None);
        assert_eq!(
            message(MsgType::ApprovalRequired, None)
                .accepted_answers()
                .unwrap(),
            vec!["approve", "deny"]
        );
        assert_eq!(
            message(MsgType::DecisionNeeded, Some(vec!["JWT", "Session"]))
                .accepted_answers()
                .unwrap(),
            vec!["JWT", "Session"]
        );
        assert!(
            message(MsgType::DecisionNeeded, None)
                .accepted_answers()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn msg_type_names_match_the_seed() {
        for t in MsgType::ALL {
            assert_eq!(MsgType::parse(t.as_str()), Some(t));
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                serde_json::json!(t.as_str())
            );
        }
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;

    fn approval(options: &[&str]) -> InboxMessage {
        serde_json::from_value(serde_json::json!({
            "id": "m1", "session_id": "s1", "session_name": "s", "timestamp": "2026-01-01T00:00:00Z",
            "msg_type": "approval_required", "title": "Run it?",
            "options": options, "read": false, "responded": false,
        }))
        .unwrap()
    }

    #[test]
    fn answers_by_text_number_or_intent() {
        let codex = approval(&[
            "Yes, proceed",
            "Yes, and don't ask again for this command",
            "No, and tell Codex what to do differently",
        ]);
        assert_eq!(
            codex.answer_for("yes, PROCEED").as_deref(),
            Some("Yes, proceed")
        );
        assert_eq!(
            codex.answer_for("2").as_deref(),
            Some("Yes, and don't ask again for this command")
        );
        assert_eq!(
            codex.answer_for("approve").as_deref(),
            Some("Yes, proceed"),
            "the once option"
        );
        assert_eq!(
            codex.answer_for("deny").as_deref(),
            Some("No, and tell Codex what to do differently")
        );
        assert_eq!(codex.answer_for("4"), None);
        assert_eq!(codex.answer_for("0"), None);
        assert_eq!(codex.answer_for("maybe"), None);
        let plain = approval(&[]);
        assert_eq!(plain.answer_for("APPROVE").as_deref(), Some("approve"));
    }

    #[test]
    fn intent_words_follow_the_acp_kinds_when_the_agent_gave_them() {
        // Names that start with no word of intent, as some agents write them.
        let mut asked = approval(&["Always", "Just this once", "Never", "Not now"]);
        assert_eq!(
            asked.answer_for("approve"),
            None,
            "no kinds, no matching word"
        );
        asked.option_kinds = Some(
            ["allow_always", "allow_once", "reject_always", "reject_once"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(
            asked.answer_for("approve").as_deref(),
            Some("Just this once")
        );
        assert_eq!(asked.answer_for("yes").as_deref(), Some("Just this once"));
        assert_eq!(asked.answer_for("deny").as_deref(), Some("Not now"));
        assert_eq!(asked.answer_for("2").as_deref(), Some("Just this once"));
        asked.option_kinds = Some(["allow_always", "reject_always"].map(String::from).to_vec());
        asked.options = Some(vec!["Always".into(), "Never".into()]);
        assert_eq!(
            asked.answer_for("approve").as_deref(),
            Some("Always"),
            "the always-option when there is no once-option"
        );
    }
}
