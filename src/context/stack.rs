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

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

pub use super::change::{Change, StackEdit};
use super::error::Damage;
pub use super::error::StackError;
pub use super::message::{
    Checkpoint, Entry, MAX_CHECKPOINT_NAME, Message, validate_checkpoint_name,
};

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
                return Err(StackError::Damaged(Damage::NoSystemPrompt));
            }
        }
        if let Some(e) = s.entries[1..]
            .iter()
            .find(|e| matches!(e.message, Message::System { .. }))
        {
            return Err(StackError::Damaged(Damage::SecondSystemPrompt {
                seq: e.seq,
            }));
        }
        let mut last = 0;
        for e in &s.entries {
            if e.seq <= last || e.seq >= s.next_seq {
                return Err(StackError::Damaged(Damage::OutOfSequence { seq: e.seq }));
            }
            last = e.seq;
        }
        for (i, c) in s.checkpoints.iter().enumerate() {
            if s.checkpoints[..i].iter().any(|o| o.name == c.name) {
                return Err(StackError::Damaged(Damage::CheckpointTwice {
                    name: c.name.clone(),
                }));
            }
            if s.entries.iter().all(|e| e.seq != c.seq) {
                return Err(StackError::Damaged(Damage::CheckpointOffStack {
                    name: c.name.clone(),
                    seq: c.seq,
                }));
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
