//! A session's transcript: its entries, their kinds, and streamed output.

use serde::{Deserialize, Serialize};

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
