//! The params and results of the methods (the table in `methods.rs` says which goes with
//! which). Like every wire type, they never deny unknown fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::driver::DriverOptions;
use super::types::{HitKind, MsgType, SearchHit, Topic};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandshakeParams {
    pub protocol_version: u32,
    #[serde(default)]
    pub client: Option<String>,
    /// A session handle: the connection may then act only for that session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandshakeResult {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub pid: u32,
    pub kiln: String,
    /// The session a handle connection is scoped to.
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegisterParams {
    #[serde(default)]
    pub worktree: Option<String>,
    pub agent_type: String,
    pub agent_name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionIdParams {
    pub session_id: String,
}

/// `session.deregister`: the session ends; its termination record keeps the reason and
/// the agent's exit code for a while.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeregisterParams {
    pub session_id: String,
    /// Why it ended; "deregistered" when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendParams {
    pub session_id: String,
    pub msg_type: MsgType,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// For an approval: each option's ACP kind (`allow_once`, `allow_always`,
    /// `reject_once`, `reject_always`), in the options' order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_kinds: Option<Vec<String>>,
    /// The rule that asked and the operation it covers, set by the daemon's own gate only:
    /// never taken from the wire, so no client can make an approval look flagged or not.
    #[serde(skip)]
    pub flagged: Option<Flagged>,
}

/// An operation a rule flagged for approval: the rule and the operation, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagged {
    pub rule: String,
    pub operation: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListParams {
    #[serde(default)]
    pub unread_only: bool,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdParams {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdsParams {
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RespondParams {
    pub id: String,
    pub response: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitParams {
    pub id: String,
    /// Give up after this many seconds; wait forever when absent.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryParams {
    pub sql: String,
    #[serde(default)]
    pub bindings: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SubscribeParams {
    /// Topics to receive; all when absent.
    #[serde(default)]
    pub topics: Option<Vec<Topic>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CreateSessionParams {
    /// The agent profile: `[agents.<name>]` in the config.
    pub agent: String,
    /// A branch (existing, or new from HEAD) or the path of an existing worktree; a new
    /// branch from HEAD when absent.
    #[serde(default)]
    pub worktree: Option<String>,
    /// Run in the kiln itself, without a worktree.
    #[serde(default)]
    pub in_place: bool,
    /// The first prompt.
    #[serde(default)]
    pub task: Option<String>,
    /// Where the agent runs, over the profile's and `[drivers.<name>]` defaults.
    #[serde(default)]
    pub driver: DriverOptions,
    /// The read manifest: reads outside these globs end the session
    /// (`CONTEXT_MISS`). Empty: no manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_read: Vec<String>,
    /// The channel and conversation that start it (set by channels, not by people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<crate::protocol::ChannelTag>,
}

/// `session.refine`: widen a session's read manifest and start its agent again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefineParams {
    pub session_id: String,
    pub allow_read: Vec<String>,
    /// The restarted agent's first prompt (a note of what was widened by default).
    #[serde(default)]
    pub prompt: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptParams {
    pub session_id: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptResult {
    /// True when the prompt waits: for the running turn to end, or for a budget the
    /// session reached to be raised.
    pub queued: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveOptions {
    /// Also remove the worktree crucible created.
    #[serde(default)]
    pub remove_worktree: bool,
    /// Also delete the branch crucible created (implies `remove_worktree`).
    #[serde(default)]
    pub delete_branch: bool,
    /// Drop uncommitted changes and unmerged commits.
    #[serde(default)]
    pub force: bool,
    /// Also remove the audit log (kept by default: it outlives the session). `prune`
    /// also removes the logs of sessions deleted earlier.
    #[serde(default)]
    pub audit: bool,
}

/// `session.exec`: a command run in the session's environment, for debugging.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecParams {
    pub session_id: String,
    /// The program and its arguments (no shell).
    pub command: Vec<String>,
    /// Killed after this long (default 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecResult {
    /// Absent when it was killed by a signal (or the timeout).
    pub exit_code: Option<i32>,
    /// Each capped at 64 KiB.
    pub stdout: String,
    pub stderr: String,
}

/// `session.reset`: a fresh session for the same worktree and agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResetParams {
    pub session_id: String,
    /// Keep the rules switched off for the old session switched off for the new one.
    #[serde(default)]
    pub keep_disabled: bool,
}

/// `session.rename`: a session's name as lists and the status bar show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RenameParams {
    pub session_id: String,
    pub name: String,
}

/// `session.fork`: a new session on a new branch from this session's HEAD, with its
/// context stack copied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForkParams {
    pub session_id: String,
    /// The new branch; `<branch>-fork` (then `-fork-2`…) when absent.
    #[serde(default)]
    pub worktree: Option<String>,
    /// A first prompt for the new session.
    #[serde(default)]
    pub task: Option<String>,
}

/// `session.handoff`: the session's task goes on with another agent profile, in the
/// same worktree and branch; the session is stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandoffParams {
    pub session_id: String,
    /// The agent profile that takes over.
    pub agent: String,
}

/// `session.security` and `session.rule`: a session's security state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecurityReply {
    pub session_id: String,
    pub security: super::types::SecurityState,
}

/// `session.rule`: switch a rule off (`enabled: false`) or on again for one session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRuleParams {
    pub session_id: String,
    pub rule: String,
    pub enabled: bool,
}

/// `rules.list`: the rules in force, and for a session how each stands in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RulesParams {
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleInfo {
    pub id: String,
    pub description: String,
    /// `allow`, `ask` or `deny`.
    pub action: String,
    pub builtin: bool,
    /// It applies only after an operation matched its `activated_by`.
    pub needs_activation: bool,
    /// Switched off in the settings.
    pub off: bool,
    /// Switched off for the session asked about.
    #[serde(default)]
    pub disabled: bool,
    /// What activated it in that session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activated: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RulesReply {
    /// The rules in force: the last good set when the files are bad; none when no good
    /// set was read since the daemon started.
    pub rules: Vec<RuleInfo>,
    /// [`RulesReply::error`] in one sentence, with what applies instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Why the rule files are not in force, if they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RulesFileError>,
}

/// A rule file that cannot be read or parsed, or holds a bad rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesFileError {
    /// The file at fault: `<kiln>/.crucible/rules.toml` or a settings file.
    pub file: String,
    /// Why (cannot read it, not UTF-8, a TOML error with its line, a bad rule).
    pub reason: String,
    /// True: the last good set applies to every session, new ones too. False: no good
    /// set was read since the daemon started, so every gated operation is refused.
    pub last_good: bool,
}

/// `secret.get`: an agent asks for a credential by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretParams {
    pub session_id: String,
    pub name: String,
}

/// The value; it is never stored or logged by crucible.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretReply {
    pub name: String,
    pub value: String,
}

/// `session.audit`: the session's audit log, oldest first (also after it was deleted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditLog {
    pub session_id: String,
    pub records: Vec<super::audit::AuditRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeleteSessionParams {
    pub session_id: String,
    #[serde(flatten)]
    pub options: RemoveOptions,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeleteOutcome {
    pub session_id: String,
    pub worktree_removed: bool,
    pub branch_deleted: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PruneResult {
    pub deleted: Vec<DeleteOutcome>,
    /// Sessions left in place, with the reason.
    pub skipped: Vec<Skipped>,
    /// With `audit`: the sessions whose audit logs were removed besides those deleted
    /// now (sessions deleted earlier).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_removed: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub session_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TranscriptParams {
    pub session_id: String,
    /// Only entries after this sequence number.
    #[serde(default)]
    pub after: Option<u64>,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `session.resolve`: a message from a channel (a webhook), resolved to a session by
/// the conversation policy (reset phrase, timeout, closed, drift, continue) and delivered
/// there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResolveParams {
    /// The channel: `webhook`, `matrix`, `cron` (or any name of the caller's).
    pub channel: crate::protocol::ChannelKind,
    /// Which hook or job of it.
    pub source: String,
    /// The conversation within it (e.g. an issue number); `""` for one conversation.
    #[serde(default, rename = "ref")]
    pub reference: String,
    /// The message: the first prompt of a new session, or a follow-up prompt.
    pub text: String,
    /// The sender's own words within `text`, checked against the reset phrases
    /// (default: `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    /// The agent profile a new session runs.
    pub agent: String,
    /// Where a new session runs, over the profile's driver.
    #[serde(default)]
    pub driver: Option<crate::protocol::DriverKind>,
    /// One persistent conversation (a direct chat): it does not time out or drift; only
    /// a reset phrase or closing it starts a new session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persistent: bool,
}

/// How a message was resolved: to which session, and why. On the wire it also says
/// `decision`, `new` or `continue`, which follows from the reason.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "ResolveWire")]
pub struct ResolveResult {
    pub session_id: String,
    /// Which policy fired.
    pub reason: crate::protocol::Resolution,
    /// The session a new one replaced (closed), if any.
    #[serde(default)]
    pub previous_session_id: Option<String>,
    /// On `continue`: true when a turn was running and the message waits for it.
    #[serde(default)]
    pub queued: bool,
}

impl ResolveResult {
    /// `new` or `continue`, from the reason.
    pub fn decision(&self) -> &'static str {
        self.reason.decision()
    }
}

/// [`ResolveResult`] as it is sent, with its decision.
#[derive(Serialize)]
struct ResolveWire {
    session_id: String,
    decision: &'static str,
    reason: crate::protocol::Resolution,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_session_id: Option<String>,
    queued: bool,
}

impl From<ResolveResult> for ResolveWire {
    fn from(r: ResolveResult) -> Self {
        Self {
            decision: r.decision(),
            session_id: r.session_id,
            reason: r.reason,
            previous_session_id: r.previous_session_id,
            queued: r.queued,
        }
    }
}

/// `cron.run`: run a job the daemon runs now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronRunParams {
    pub id: String,
}

/// One run of a cron job, or why it was skipped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronRun {
    pub job: String,
    /// The run's session; when skipped, the previous run's, still working.
    pub session_id: String,
    pub skipped: bool,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// `cron.list`: the jobs the daemon runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronJobs {
    pub jobs: Vec<CronJobView>,
    /// The webhooks whose deliveries fail in a row, with the last error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<FailingHook>,
    /// Why the settings files cannot be used: the jobs are the last good settings' ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
}

/// A webhook whose deliveries fail in a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingHook {
    pub name: String,
    /// Deliveries in a row that failed (counted across daemon restarts).
    pub failures: u64,
    pub last_error: String,
    /// When the first of them failed (RFC 3339).
    pub since: String,
}

/// A cron job, its next run and its last one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronJobView {
    pub id: String,
    pub schedule: String,
    pub agent: String,
    pub enabled: bool,
    /// RFC 3339, UTC; none when disabled.
    #[serde(default)]
    pub next_run: Option<String>,
    #[serde(default)]
    pub last_session_id: Option<String>,
    #[serde(default)]
    pub last_run_at: Option<String>,
    #[serde(default)]
    pub last_state: Option<crate::protocol::SessionState>,
    /// Runs skipped since the daemon started because the previous one still worked.
    #[serde(default)]
    pub skipped: u64,
    #[serde(default)]
    pub last_skipped_at: Option<String>,
    /// Runs in a row that could not start (0 once one does), counted across daemon
    /// restarts.
    #[serde(default)]
    pub failures: u64,
    /// Why the last of them could not start; kept until a run starts.
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_failed_at: Option<String>,
}

/// `session.list`: every session, or (a named param only, as the first clients send no
/// params by position) those a channel started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionListParams {
    /// `webhook`, `cron`, or `interactive` for the sessions no channel started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Fill in each session's `resources` (its agent's CPU time and memory).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources: bool,
}

/// `search`: the words to find (every one must match), optionally in one session and of
/// some kinds only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchParams {
    pub query: String,
    #[serde(default)]
    pub session_id: Option<String>,
    /// `transcript`, `inbox`, `session`; all when none is given.
    #[serde(default)]
    pub types: Option<Vec<HitKind>>,
    /// The most hits (default 20, at most 200).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The words are in so many transcript entries that not all were ranked: the
    /// transcript hits are the best of the first found. A word more narrows it.
    #[serde(default)]
    pub broad: bool,
}
