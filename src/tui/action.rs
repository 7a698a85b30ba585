//! What the pure core asks of the world: the [`Action`]s the runtime performs, through the
//! daemon client or on the terminal. Key handling and event application both return them,
//! so the runtime has one way to carry them out.

use serde::{Deserialize, Serialize};

use crate::protocol::ContextCall;

/// A request for the runtime to perform. Results come back as daemon events (fed to
/// [`Model::apply`](super::Model::apply)) or, for failures, as a flash
/// ([`Model::report`](super::Model::report)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `session.prompt`.
    Prompt { session_id: String, text: String },
    /// `session.cancel`: end the running turn.
    Cancel { session_id: String },
    /// `session.stop`: end the agent; worktree and transcript stay.
    Stop { session_id: String },
    /// `inbox.respond`.
    Respond {
        message_id: String,
        response: String,
    },
    /// `inbox.mark_read`.
    MarkRead { ids: Vec<String> },
    /// `session.create`; the runtime fills in the configured default agent when `agent` is
    /// absent, and on success calls [`Model::focus_session_id`](super::Model::focus_session_id).
    /// `session.audit`; the runtime hands the log to
    /// [`Model::show_audit`](super::Model::show_audit).
    LoadAudit { session_id: String },
    /// `rules.list`, shown as a page.
    LoadRules { session_id: Option<String> },
    /// `session.security`, shown as a page.
    LoadSecurity { session_id: String },
    /// `session.diff`; the runtime hands the reply to
    /// [`Model::show_diff`](super::Model::show_diff).
    LoadDiff { session_id: String },
    /// `session.commit`.
    Commit {
        session_id: String,
        message: Option<String>,
    },
    /// `session.merge`.
    Merge {
        session_id: String,
        strategy: crate::protocol::MergeStrategy,
    },
    /// `session.pr`.
    Pr { session_id: String },
    /// `session.conflicts`, shown as a page.
    LoadConflicts,
    /// `session.restart`.
    Restart { session_id: String },
    /// `session.delete`.
    Delete {
        session_id: String,
        options: crate::protocol::RemoveOptions,
    },
    /// `session.prune`.
    Prune {
        options: crate::protocol::RemoveOptions,
    },
    /// `session.rename`.
    Rename { session_id: String, name: String },
    /// `session.fork`; the new session is focused once registered.
    Fork {
        session_id: String,
        worktree: Option<String>,
        task: Option<String>,
    },
    /// `session.reset`; the new session is focused once registered.
    Reset {
        session_id: String,
        keep_disabled: bool,
    },
    /// `session.rule`.
    SetRule {
        session_id: String,
        rule: String,
        enabled: bool,
    },
    CreateSession {
        worktree: Option<String>,
        agent: Option<String>,
        task: Option<String>,
        driver: crate::protocol::DriverOptions,
    },
    /// `session.transcript` after `after`; the runtime hands the entries to
    /// [`Model::load_transcript`](super::Model::load_transcript).
    LoadTranscript { session_id: String, after: u64 },
    /// A context-stack operation (`context.<op>`); the runtime hands the result to
    /// [`Model::load_context`](super::Model::load_context) and flashes what changed.
    Context { session_id: String, op: ContextCall },
    /// `context.get`, for the context pane; the result goes to
    /// [`Model::load_context`](super::Model::load_context).
    LoadContext { session_id: String },
    /// A session that is not focused started waiting for the human: ring the bell (or send
    /// an OSC 9 notification with `message`). Returned once per start of waiting.
    Bell { message: String },
    /// Leave the workbench (agents keep working).
    Quit,
}
