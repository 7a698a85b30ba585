//! One change to a context stack: the one type for it, from the command line and the TUI
//! through the protocol and the sessions to the stack. The five human operations each
//! have a `context.*` method; `Push` and `ToolError` are the session's own (the agent's
//! feeding and the tool-error policy) and no method carries them.

use serde::{Deserialize, Serialize};

use super::change::Change;
use super::error::StackError;
use super::message::Message;
use super::stack::ContextStack;
use super::summary::fallback_summary;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextOp {
    /// Remove the top N entries.
    Pop(usize),
    /// Name the current top entry.
    Checkpoint(String),
    /// Remove everything above the checkpoint's entry.
    Rollback(String),
    /// Replace the top entry by this summary.
    ReplaceTop(String),
    /// Back to the system entry alone, with no checkpoints.
    Reset,
    /// Replace everything above the system entry by one summary: this text, or (`None`)
    /// the session's own (its model's for internal agents, otherwise the deterministic
    /// one).
    Summarize(Option<String>),
    /// Internal: an entry the conversation adds.
    Push(Message),
    /// Internal: the tool-error policy replaces the failed tool result on top by this
    /// error.
    ToolError(String),
}

impl ContextOp {
    /// Whether only the session itself applies it (no `context.*` method carries it).
    pub fn internal(&self) -> bool {
        matches!(self, ContextOp::Push(_) | ContextOp::ToolError(_))
    }
}

impl ContextStack {
    /// Applies `op`: the stack changes and the change says how, or it is refused and
    /// nothing changes. `Summarize(None)` uses the deterministic summary.
    pub fn apply(&mut self, op: ContextOp) -> Result<Change, StackError> {
        match op {
            ContextOp::Pop(n) => self.pop(n),
            ContextOp::Checkpoint(name) => self.checkpoint(&name),
            ContextOp::Rollback(name) => self.rollback(&name),
            ContextOp::ReplaceTop(summary) => self.replace_top(summary),
            ContextOp::Reset => Ok(self.reset()),
            ContextOp::Summarize(Some(summary)) => self.summarize(summary),
            ContextOp::Summarize(None) => {
                let summary = fallback_summary(self.entries());
                self.summarize(summary)
            }
            ContextOp::Push(message) => self.push(message),
            ContextOp::ToolError(error) => self.recover_tool_error(error),
        }
    }
}
