//! What the session machine is told: what the agent did, what people asked, and the
//! answers to the effects that ask something.

use super::Key;
use crate::agent::{PermissionChoice, TurnFailure};
use crate::protocol::{EntryKind, Flagged};

/// What happens to the session.
#[derive(Debug)]
pub(in crate::sessions) enum Input {
    /// The actor begins; the agent's process was just launched.
    Start,

    // What the agent did ([`crate::agent::AgentEvent`]).
    Ready {
        acp_session_id: String,
        resumed: bool,
    },
    Chunk {
        kind: EntryKind,
        text: String,
        message_id: Option<String>,
    },
    ToolCall {
        id: String,
        title: String,
        status: String,
    },
    ToolUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
    },
    Plan(String),
    Permission {
        key: Key,
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        /// Why crucible asks (a rule's reason), above the options.
        reason: Option<String>,
        /// The rule that asked and the operation, when a rule asks.
        flagged: Option<Flagged>,
    },
    File {
        op: &'static str,
        path: String,
        refused: Option<String>,
    },
    /// The turn ended: its stop reason, or why it failed. The actor has ended the
    /// streaming message first, so a failure to store it has already come in.
    TurnEnded(Result<String, TurnFailure>),
    StartFailed(String),
    SessionRenewed {
        acp_session_id: String,
    },
    /// The process doing the agent's work (`None`: the agent's own).
    Process(Option<u32>),
    Exited {
        status: String,
        code: Option<i32>,
    },

    // What people asked.
    Prompt(String),
    Cancel,
    Stop {
        shutdown: bool,
    },
    /// Idle too long: tear the environment down, keep the session.
    Park,
    /// Crucible ends the session (a context miss), with the reason.
    Terminate(String),
    /// A blocking inbox message of this session opened (a question the agent asked).
    Opened(String),
    /// One was answered or withdrawn.
    Answered {
        id: String,
        response: Option<String>,
    },
    /// Inbox events were missed: what is open must be read again.
    Resync,

    // Answers to effects.
    /// What the transcript kept of a streamed chunk ([`Effect::Stream`]).
    Kept {
        kind: EntryKind,
        text: String,
    },
    /// The approval of request `key` was posted with this message id, or could not be.
    Posted {
        key: Key,
        result: Result<String, String>,
    },
    /// The session's open blocking messages ([`Effect::ReadOpen`]).
    Open(Vec<String>),
    /// Messages no longer open, with their answers ([`Effect::ReadAnswers`]).
    Closed(Vec<(String, Option<String>)>),
    /// A store write failed; why, in words for the turn's error.
    StoreFailed(String),
}
