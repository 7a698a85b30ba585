//! What a driver hosted inside the daemon reaches of its session (see [`SessionLink`]).

use super::error::AgentError;
use crate::context::{Entry, Message};
use crate::protocol::MsgType;

/// What a driver hosted inside the daemon (the internal agent) reaches of its session:
/// the context stack, which is its conversation, and the inbox. Implemented by the
/// session; boxed futures keep it usable as a trait object.
pub trait SessionLink: Send + Sync {
    /// The stack's entries, bottom to top.
    fn context(&self) -> futures::future::BoxFuture<'_, Result<Vec<Entry>, AgentError>>;
    /// Pushes one message, stored before this returns.
    fn push(&self, message: Message) -> futures::future::BoxFuture<'_, Result<(), AgentError>>;
    /// The tool-error policy: the failed tool result on top replaced by `error`.
    fn recover_tool_error(
        &self,
        error: String,
    ) -> futures::future::BoxFuture<'_, Result<(), AgentError>>;
    /// Posts an inbox message; for a blocking type waits for the human's answer.
    fn ask(
        &self,
        msg_type: MsgType,
        title: String,
        body: Option<String>,
        options: Option<Vec<String>>,
    ) -> futures::future::BoxFuture<'_, Result<Option<String>, AgentError>>;
}
