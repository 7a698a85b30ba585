//! The params and results of the methods (the table in `methods.rs` says which goes with
//! which). Like every wire type, they never deny unknown fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{MsgType, Topic};
use crate::context::{Change, ContextStack};

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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptParams {
    pub session_id: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptResult {
    /// True when a turn was running and the prompt waits for it to end.
    pub queued: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// `context.pop`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextPopParams {
    pub session_id: String,
    /// How many entries to remove from the top.
    pub n: usize,
}

/// `context.checkpoint` and `context.rollback`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextNameParams {
    pub session_id: String,
    pub name: String,
}

/// `context.replace_top`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextReplaceParams {
    pub session_id: String,
    pub summary: String,
}

/// What every `context.*` method returns: the stack after the call and what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextResult {
    pub session_id: String,
    pub stack: ContextStack,
    /// Set when the stack no longer matches what an ACP agent holds in its own session:
    /// the next prompt opens a fresh ACP session seeded with the stack.
    #[serde(default)]
    pub fresh_start: bool,
    /// Absent for `context.get`.
    #[serde(default)]
    pub change: Option<Change>,
    /// The change in one line for people, e.g. `pop 2: removed #5 agent, #6 tool_result`.
    #[serde(default)]
    pub description: Option<String>,
}

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
}
