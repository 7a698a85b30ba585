//! A session's context: the stack of messages the human can reshape (pop, checkpoint,
//! rollback, replace the top, reset, summarize) and the bounded summary of it. Pure data,
//! no I/O: the store keeps the stack, the sessions apply the operations.

mod change;
mod error;
mod message;
pub mod op;
pub mod stack;
pub mod summary;

pub use op::ContextOp;
pub use stack::{Change, Checkpoint, ContextStack, Entry, Message, StackEdit, StackError};
pub use summary::{MAX_SUMMARY_CHARS, fallback_summary};
