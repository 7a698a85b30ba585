//! The context stack as a pure data structure: the entries of one session's conversation,
//! bottom (the system prompt) to top (the newest), plus named checkpoints.
//!
//! Every operation either changes the stack and returns a [`Change`] saying what it
//! removed and added, or refuses with a [`StackError`] and changes nothing. Entries that
//! leave the stack are not kept here; they travel in the `Change`, which the caller
//! appends to the session's full history (kept whole in the logs).
//!
//! Rules the operations share:
//! - The system prompt is the bottom entry, exactly one per stack, and never leaves it
//!   (`push` refuses a second one; `pop`, `reset` and `summarize` stop above it).
//! - A checkpoint marks the entry that was on top when it was made, and lives exactly as
//!   long as that entry stays on the stack (`reset` also clears those on the system
//!   prompt: it is a fresh start). Names are unique: making a checkpoint under a name
//!   already in use is refused rather than silently moving the old mark.
//! - Sequence numbers are never reused, so a seq names one entry in the whole history.

use std::fmt;

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

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

/// Which operation a [`Change`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StackEdit {
    Push,
    Pop {
        n: usize,
    },
    Checkpoint {
        name: String,
    },
    Rollback {
        name: String,
    },
    ReplaceTop,
    Reset,
    Summarize,
    /// The tool-error policy: the failed result replaced by the error message.
    ToolError,
}

impl fmt::Display for StackEdit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackEdit::Push => f.write_str("push"),
            StackEdit::Pop { n } => write!(f, "pop {n}"),
            StackEdit::Checkpoint { name } => write!(f, "checkpoint '{name}'"),
            StackEdit::Rollback { name } => write!(f, "rollback to '{name}'"),
            StackEdit::ReplaceTop => f.write_str("replace top"),
            StackEdit::Reset => f.write_str("reset"),
            StackEdit::Summarize => f.write_str("summarize"),
            StackEdit::ToolError => f.write_str("tool error"),
        }
    }
}

/// What one operation did; serialisable for the session's audit history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub operation: StackEdit,
    /// Entries that left the stack, bottom to top.
    pub removed: Vec<Entry>,
    /// Entries that joined the stack, bottom to top.
    pub added: Vec<Entry>,
    pub checkpoint_added: Option<Checkpoint>,
    /// Checkpoints whose entry left the stack (or all of them, on `reset`).
    pub checkpoints_dropped: Vec<Checkpoint>,
}

impl Change {
    fn new(operation: StackEdit) -> Self {
        Change {
            operation,
            removed: Vec::new(),
            added: Vec::new(),
            checkpoint_added: None,
            checkpoints_dropped: Vec::new(),
        }
    }
}

/// One line for people, e.g. `pop 2: removed #5 agent, #6 tool_result`.
impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |entries: &[Entry]| {
            let items: Vec<String> = entries
                .iter()
                .map(|e| format!("#{} {}", e.seq, e.message.kind()))
                .collect();
            items.join(", ")
        };
        let mut parts = Vec::new();
        if !self.removed.is_empty() {
            parts.push(format!("removed {}", list(&self.removed)));
        }
        if !self.added.is_empty() {
            parts.push(format!("added {}", list(&self.added)));
        }
        if let Some(c) = &self.checkpoint_added {
            parts.push(format!("marked #{} as '{}'", c.seq, c.name));
        }
        if !self.checkpoints_dropped.is_empty() {
            parts.push(format!(
                "dropped {}",
                quoted_names(self.checkpoints_dropped.iter().map(|c| c.name.as_str()))
            ));
        }
        if parts.is_empty() {
            parts.push("nothing changed".to_string());
        }
        write!(f, "{}: {}", self.operation, parts.join("; "))
    }
}

/// Why an operation was refused; the stack is then exactly as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackError {
    #[error("pop needs a count of at least 1")]
    PopZero,
    #[error("{}", pop_too_many(*requested, *available))]
    PopTooMany { requested: usize, available: usize },
    #[error("cannot {operation}: only the system prompt is on the stack")]
    OnlySystemPrompt { operation: &'static str },
    #[error("the stack already has its system prompt at the bottom; push a human or agent entry")]
    SecondSystemPrompt,
    #[error("invalid checkpoint name '{name}': {reason}")]
    InvalidCheckpointName { name: String, reason: String },
    #[error(
        "a checkpoint named '{name}' already exists (at #{seq}); roll back to it or choose another name"
    )]
    DuplicateCheckpoint { name: String, seq: u64 },
    #[error("no checkpoint named '{name}' ({})", known_checkpoints(known))]
    UnknownCheckpoint { name: String, known: Vec<String> },
    #[error("the {what} is empty")]
    EmptyText { what: &'static str },
    #[error("the top entry is a {top} entry, not a tool result")]
    NotAToolResult { top: &'static str },
    /// A stored stack that does not hold together (read back from the database).
    #[error("{0}")]
    Damaged(String),
}

fn pop_too_many(requested: usize, available: usize) -> String {
    let entries = if requested == 1 { "entry" } else { "entries" };
    match available {
        0 => format!("cannot pop {requested} {entries}: nothing is above the system prompt"),
        _ => format!("cannot pop {requested} {entries}: only {available} above the system prompt"),
    }
}

fn known_checkpoints(known: &[String]) -> String {
    if known.is_empty() {
        "there are no checkpoints".to_string()
    } else {
        format!("checkpoints: {}", known.join(", "))
    }
}

fn quoted_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!(
        "checkpoint{} {}",
        if quoted.len() == 1 { "" } else { "s" },
        quoted.join(", ")
    )
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

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One session's context stack. Always holds at least the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StoredStack")]
pub struct ContextStack {
    entries: Vec<Entry>,
    checkpoints: Vec<Checkpoint>,
    next_seq: u64,
}

impl ContextStack {
    /// A stack holding only `system_prompt` (which may be empty: an ACP agent brings its
    /// own).
    pub fn new(system_prompt: impl Into<String>) -> Self {
        let mut stack = ContextStack {
            entries: Vec::new(),
            checkpoints: Vec::new(),
            next_seq: 1,
        };
        let system = stack.stamp(Message::System {
            text: system_prompt.into(),
        });
        stack.entries.push(system);
        stack
    }

    /// Bottom (the system prompt) to top.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// In the order they were made.
    pub fn checkpoints(&self) -> &[Checkpoint] {
        &self.checkpoints
    }

    pub fn system_prompt(&self) -> &str {
        self.entries[0].message.text()
    }

    pub fn top(&self) -> &Entry {
        &self.entries[self.entries.len() - 1]
    }

    /// How many entries sit above the system prompt.
    pub fn poppable(&self) -> usize {
        self.entries.len() - 1
    }

    /// The seq the next entry will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// A stack from its parts as stored (the store keeps its entries one by one), checked
    /// as a stack read back whole is.
    pub fn from_parts(
        entries: Vec<Entry>,
        checkpoints: Vec<Checkpoint>,
        next_seq: u64,
    ) -> Result<Self, StackError> {
        ContextStack::try_from(StoredStack {
            entries,
            checkpoints,
            next_seq,
        })
    }

    /// Puts `message` on top. A second system prompt is refused.
    pub fn push(&mut self, message: Message) -> Result<Change, StackError> {
        if matches!(message, Message::System { .. }) {
            return Err(StackError::SecondSystemPrompt);
        }
        let mut change = Change::new(StackEdit::Push);
        let entry = self.stamp(message);
        change.added.push(entry.clone());
        self.entries.push(entry);
        Ok(change)
    }

    /// Removes the top `n` entries. Refuses 0, and more than sit above the system prompt.
    pub fn pop(&mut self, n: usize) -> Result<Change, StackError> {
        if n == 0 {
            return Err(StackError::PopZero);
        }
        if n > self.poppable() {
            return Err(StackError::PopTooMany {
                requested: n,
                available: self.poppable(),
            });
        }
        Ok(self.truncate(self.entries.len() - n, StackEdit::Pop { n }))
    }

    /// Marks the current top entry as `name`.
    pub fn checkpoint(&mut self, name: &str) -> Result<Change, StackError> {
        validate_checkpoint_name(name)?;
        if let Some(old) = self.find_checkpoint(name) {
            return Err(StackError::DuplicateCheckpoint {
                name: name.to_string(),
                seq: old.seq,
            });
        }
        let checkpoint = Checkpoint {
            name: name.to_string(),
            seq: self.top().seq,
            created_at: now(),
        };
        self.checkpoints.push(checkpoint.clone());
        let mut change = Change::new(StackEdit::Checkpoint {
            name: name.to_string(),
        });
        change.checkpoint_added = Some(checkpoint);
        Ok(change)
    }

    /// Removes every entry above the one checkpoint `name` marks; the checkpoint itself
    /// stays, so the same rollback can be made again.
    pub fn rollback(&mut self, name: &str) -> Result<Change, StackError> {
        let Some(seq) = self.find_checkpoint(name).map(|c| c.seq) else {
            return Err(StackError::UnknownCheckpoint {
                name: name.to_string(),
                known: self.checkpoints.iter().map(|c| c.name.clone()).collect(),
            });
        };
        let keep = self.position(seq) + 1;
        Ok(self.truncate(
            keep,
            StackEdit::Rollback {
                name: name.to_string(),
            },
        ))
    }

    /// Replaces the top entry by a summary entry.
    pub fn replace_top(&mut self, summary: impl Into<String>) -> Result<Change, StackError> {
        let summary = non_empty(summary.into(), "summary")?;
        self.require_above_system("replace the top entry")?;
        let mut change = self.truncate(self.entries.len() - 1, StackEdit::ReplaceTop);
        self.push_into(&mut change, Message::Summary { text: summary });
        Ok(change)
    }

    /// Back to the system prompt alone, with no checkpoints.
    pub fn reset(&mut self) -> Change {
        let mut change = self.truncate(1, StackEdit::Reset);
        change.checkpoints_dropped.append(&mut self.checkpoints);
        change
    }

    /// Collapses everything above the system prompt into one summary entry.
    pub fn summarize(&mut self, summary: impl Into<String>) -> Result<Change, StackError> {
        let summary = non_empty(summary.into(), "summary")?;
        self.require_above_system("summarize")?;
        let mut change = self.truncate(1, StackEdit::Summarize);
        self.push_into(&mut change, Message::Summary { text: summary });
        Ok(change)
    }

    /// The policy for a tool error (bad execution, not bad thinking): pops the
    /// failed tool result on top (`pop(1)`) and injects `error` as that call's result,
    /// so the agent keeps its reasoning and sees only what went wrong.
    pub fn recover_tool_error(&mut self, error: impl Into<String>) -> Result<Change, StackError> {
        let error = non_empty(error.into(), "error message")?;
        let Message::ToolResult { call_id, tool, .. } = &self.top().message else {
            return Err(StackError::NotAToolResult {
                top: self.top().message.kind(),
            });
        };
        let injected = Message::ToolResult {
            call_id: call_id.clone(),
            tool: tool.clone(),
            ok: false,
            text: error,
        };
        let mut change = self.truncate(self.entries.len() - 1, StackEdit::ToolError);
        self.push_into(&mut change, injected);
        Ok(change)
    }

    fn stamp(&mut self, message: Message) -> Entry {
        let seq = self.next_seq;
        self.next_seq += 1;
        Entry {
            seq,
            created_at: now(),
            message,
        }
    }

    fn push_into(&mut self, change: &mut Change, message: Message) {
        let entry = self.stamp(message);
        change.added.push(entry.clone());
        self.entries.push(entry);
    }

    /// Keeps the bottom `keep` entries (at least the system prompt) and drops the
    /// checkpoints of the rest.
    fn truncate(&mut self, keep: usize, operation: StackEdit) -> Change {
        let mut change = Change::new(operation);
        change.removed = self.entries.split_off(keep.max(1));
        let (kept, dropped) = std::mem::take(&mut self.checkpoints)
            .into_iter()
            .partition(|c| change.removed.iter().all(|e| e.seq != c.seq));
        self.checkpoints = kept;
        change.checkpoints_dropped = dropped;
        change
    }

    fn require_above_system(&self, operation: &'static str) -> Result<(), StackError> {
        if self.poppable() == 0 {
            return Err(StackError::OnlySystemPrompt { operation });
        }
        Ok(())
    }

    fn find_checkpoint(&self, name: &str) -> Option<&Checkpoint> {
        self.checkpoints.iter().find(|c| c.name == name)
    }

    /// The index of the entry `seq`; only called for checkpointed seqs, which are always
    /// on the stack.
    fn position(&self, seq: u64) -> usize {
        self.entries.iter().position(|e| e.seq == seq).unwrap_or(0)
    }
}

fn non_empty(text: String, what: &'static str) -> Result<String, StackError> {
    if text.trim().is_empty() {
        return Err(StackError::EmptyText { what });
    }
    Ok(text)
}

/// The stored form, checked before it becomes a [`ContextStack`].
#[derive(Deserialize)]
struct StoredStack {
    entries: Vec<Entry>,
    checkpoints: Vec<Checkpoint>,
    next_seq: u64,
}

impl TryFrom<StoredStack> for ContextStack {
    type Error = StackError;

    fn try_from(s: StoredStack) -> Result<Self, StackError> {
        match s.entries.first() {
            Some(Entry {
                message: Message::System { .. },
                ..
            }) => {}
            _ => {
                return Err(StackError::Damaged(
                    "a context stack must start with its system prompt".into(),
                ));
            }
        }
        if let Some(e) = s.entries[1..]
            .iter()
            .find(|e| matches!(e.message, Message::System { .. }))
        {
            return Err(StackError::Damaged(format!(
                "entry #{} is a second system prompt",
                e.seq
            )));
        }
        let mut last = 0;
        for e in &s.entries {
            if e.seq <= last || e.seq >= s.next_seq {
                return Err(StackError::Damaged(format!(
                    "entry #{} is out of sequence",
                    e.seq
                )));
            }
            last = e.seq;
        }
        for (i, c) in s.checkpoints.iter().enumerate() {
            if s.checkpoints[..i].iter().any(|o| o.name == c.name) {
                return Err(StackError::Damaged(format!(
                    "checkpoint '{}' appears twice",
                    c.name
                )));
            }
            if s.entries.iter().all(|e| e.seq != c.seq) {
                return Err(StackError::Damaged(format!(
                    "checkpoint '{}' marks #{}, which is not on the stack",
                    c.name, c.seq
                )));
            }
        }
        Ok(ContextStack {
            entries: s.entries,
            checkpoints: s.checkpoints,
            next_seq: s.next_seq,
        })
    }
}

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;
