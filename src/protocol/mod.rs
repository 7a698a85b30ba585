//! The wire protocol between clients and the daemon: JSON-RPC 2.0, one object per line.
//! No I/O here; see `PROTOCOL.md` at the repository root for the whole contract.

pub mod handle;
pub mod jsonrpc;
pub mod types;

pub use handle::Handle;
pub use jsonrpc::{ErrorObject, Notification, Request, Response, code};
pub use types::*;

/// Bumped whenever a method or a type changes incompatibly. Clients and daemon must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest line the daemon reads; a longer one is answered with -32600 and skipped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Method names.
pub mod method {
    pub const HANDSHAKE: &str = "handshake";
    pub const PING: &str = "ping";
    pub const SESSION_REGISTER: &str = "session.register";
    pub const SESSION_LIST: &str = "session.list";
    pub const SESSION_GET: &str = "session.get";
    pub const SESSION_HEARTBEAT: &str = "session.heartbeat";
    pub const SESSION_DEREGISTER: &str = "session.deregister";
    pub const SESSION_CREATE: &str = "session.create";
    pub const SESSION_PROMPT: &str = "session.prompt";
    pub const SESSION_CANCEL: &str = "session.cancel";
    pub const SESSION_STOP: &str = "session.stop";
    pub const SESSION_DELETE: &str = "session.delete";
    pub const SESSION_PRUNE: &str = "session.prune";
    pub const SESSION_TRANSCRIPT: &str = "session.transcript";
    pub const INBOX_SEND: &str = "inbox.send";
    pub const INBOX_LIST: &str = "inbox.list";
    pub const INBOX_GET: &str = "inbox.get";
    pub const INBOX_MARK_READ: &str = "inbox.mark_read";
    pub const INBOX_RESPOND: &str = "inbox.respond";
    pub const INBOX_WAIT: &str = "inbox.wait";
    pub const INBOX_CLEAR: &str = "inbox.clear";
    pub const DB_QUERY: &str = "db.query";
    pub const SUBSCRIBE: &str = "subscribe";
    pub const UNSUBSCRIBE: &str = "unsubscribe";
    pub const DAEMON_STATUS: &str = "daemon.status";
    pub const DAEMON_SHUTDOWN: &str = "daemon.shutdown";
    pub const CONTEXT_GET: &str = "context.get";
    pub const CONTEXT_POP: &str = "context.pop";
    pub const CONTEXT_CHECKPOINT: &str = "context.checkpoint";
    pub const CONTEXT_ROLLBACK: &str = "context.rollback";
    pub const CONTEXT_REPLACE_TOP: &str = "context.replace_top";
    pub const CONTEXT_RESET: &str = "context.reset";
    pub const CONTEXT_SUMMARIZE: &str = "context.summarize";

    /// Every method the daemon serves.
    pub const ALL: &[&str] = &[
        HANDSHAKE,
        PING,
        SESSION_REGISTER,
        SESSION_LIST,
        SESSION_GET,
        SESSION_HEARTBEAT,
        SESSION_DEREGISTER,
        SESSION_CREATE,
        SESSION_PROMPT,
        SESSION_CANCEL,
        SESSION_STOP,
        SESSION_DELETE,
        SESSION_PRUNE,
        SESSION_TRANSCRIPT,
        INBOX_SEND,
        INBOX_LIST,
        INBOX_GET,
        INBOX_MARK_READ,
        INBOX_RESPOND,
        INBOX_WAIT,
        INBOX_CLEAR,
        DB_QUERY,
        SUBSCRIBE,
        UNSUBSCRIBE,
        DAEMON_STATUS,
        DAEMON_SHUTDOWN,
        CONTEXT_GET,
        CONTEXT_POP,
        CONTEXT_CHECKPOINT,
        CONTEXT_ROLLBACK,
        CONTEXT_REPLACE_TOP,
        CONTEXT_RESET,
        CONTEXT_SUMMARIZE,
    ];
}
