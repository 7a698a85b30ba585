//! What sits on a context stack: messages, entries (a message with its sequence number)
//! and the checkpoints that mark them.

use serde::{Deserialize, Serialize};

use super::error::StackError;

/// The longest checkpoint name, in characters.
pub const MAX_CHECKPOINT_NAME: usize = 64;

/// One message on the stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    /// The system prompt; only ever the bottom entry.
    System {
        text: String,
    },
    Human {
        text: String,
    },
    Agent {
        text: String,
    },
    /// A tool the agent called; `arguments` is the call's JSON arguments, as text.
    ToolCall {
        call_id: String,
        tool: String,
        arguments: String,
    },
    /// What a tool call gave back; when `ok` is false, `text` says what went wrong.
    ToolResult {
        call_id: String,
        tool: String,
        ok: bool,
        text: String,
    },
    /// Stands in for the entries it replaced (`replace_top`, `summarize`).
    Summary {
        text: String,
    },
}

impl Message {
    /// The kind as stored and shown: `system`, `human`, `agent`, `tool_call`,
    /// `tool_result` or `summary`.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::System { .. } => "system",
            Message::Human { .. } => "human",
            Message::Agent { .. } => "agent",
            Message::ToolCall { .. } => "tool_call",
            Message::ToolResult { .. } => "tool_result",
            Message::Summary { .. } => "summary",
        }
    }

    /// The message's text; for a tool call, its arguments.
    pub fn text(&self) -> &str {
        match self {
            Message::System { text }
            | Message::Human { text }
            | Message::Agent { text }
            | Message::ToolResult { text, .. }
            | Message::Summary { text } => text,
            Message::ToolCall { arguments, .. } => arguments,
        }
    }
}

/// A message as it sits on the stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique within the session's history; grows with every entry pushed.
    pub seq: u64,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(flatten)]
    pub message: Message,
}

/// A named mark on the entry that was on top when it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub name: String,
    /// The marked entry's seq; a rollback keeps it and everything below.
    pub seq: u64,
    pub created_at: String,
}

/// Checks a checkpoint name: 1 to 64 letters, digits, `-`, `_` or `.`, not starting
/// with `-` (it would read as a command-line flag).
pub fn validate_checkpoint_name(name: &str) -> Result<(), StackError> {
    let refuse = |reason: String| StackError::InvalidCheckpointName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(refuse("a name is needed".to_string()));
    }
    if name.chars().count() > MAX_CHECKPOINT_NAME {
        return Err(refuse(format!(
            "longer than {MAX_CHECKPOINT_NAME} characters"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(refuse(format!(
            "{c:?} is not allowed; use letters, digits, '-', '_' or '.'"
        )));
    }
    if name.starts_with('-') {
        return Err(refuse("it must not start with '-'".to_string()));
    }
    Ok(())
}
