//! The params and results of the methods on sessions crucible runs: creating, prompting,
//! running commands, resetting, forking, handing off, deleting and reading them.

use serde::{Deserialize, Serialize};

use crate::protocol::driver::DriverOptions;
use crate::protocol::types::{Session, TranscriptEntry};

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
    /// Through the hub: the kiln to start it in (its name, or its folder's path); a
    /// kiln's own daemon refuses a name that is not its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln: Option<String>,
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
    /// At most this many, the oldest first: the workbench's first screenful, read before
    /// the whole list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registered {
    pub session_id: String,
    pub session: Session,
    /// The session's handle, shown once.
    pub handle: String,
    /// Live registered sessions of the same worktree and agent that this one replaced:
    /// they are ended with reason `evicted`.
    #[serde(default)]
    pub evicted: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
/// `session.list`'s answer.
pub struct ListedSessions {
    pub sessions: Vec<Session>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionReply {
    pub session: Session,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Created {
    pub session_id: String,
    pub session: Session,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entries {
    pub entries: Vec<TranscriptEntry>,
}
