//! What one operation on a context stack did: which operation, what it removed and what
//! it added, for the session's audit history and for people.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::message::{Checkpoint, Entry};

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
    pub(super) fn new(operation: StackEdit) -> Self {
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

fn quoted_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!(
        "checkpoint{} {}",
        if quoted.len() == 1 { "" } else { "s" },
        quoted.join(", ")
    )
}
