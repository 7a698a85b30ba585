//! Why an operation on a context stack was refused, and what is wrong with a stored stack
//! that does not hold together.

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
    Damaged(Damage),
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

/// What is wrong with a stored stack.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("a context stack must start with its system prompt")]
    NoSystemPrompt,
    #[error("entry #{seq} is a second system prompt")]
    SecondSystemPrompt { seq: u64 },
    #[error("entry #{seq} is out of sequence")]
    OutOfSequence { seq: u64 },
    #[error("checkpoint '{name}' appears twice")]
    CheckpointTwice { name: String },
    #[error("checkpoint '{name}' marks #{seq}, which is not on the stack")]
    CheckpointOffStack { name: String, seq: u64 },
}
