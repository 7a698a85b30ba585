//! The wire protocol between clients and the daemon: JSON-RPC 2.0, one object per line.
//! No I/O here; see `PROTOCOL.md` at the repository root for the whole contract.

pub mod env;
pub mod handle;
pub mod jsonrpc;
pub mod types;

pub use handle::Handle;
pub use jsonrpc::{ErrorObject, Id, Notification, Request, Response, code};
pub use types::*;

/// Bumped whenever a method or a type changes incompatibly. Clients and daemon must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// Caps on what agents produce (documented in PROTOCOL.md, "Limits"). Text past a cap is
/// cut, and the cut is marked with how much was left out; nothing is dropped silently.
pub mod limits {
    /// One line of a command agent's output.
    pub const AGENT_LINE_BYTES: usize = 64 * 1024;
    /// One transcript entry's text; a longer message continues in further entries.
    pub const ENTRY_BYTES: usize = 64 * 1024;
    /// One agent message (all of its entries together).
    pub const MESSAGE_BYTES: usize = 1024 * 1024;
    /// An inbox message's title and body.
    pub const TITLE_BYTES: usize = 1024;
    pub const BODY_BYTES: usize = 64 * 1024;
}

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

/// Each method's params in the order PROTOCOL.md lists them: how positional (array)
/// params are named. Struct field order never decides this.
pub fn param_order(name: &str) -> &'static [&'static str] {
    use method::*;
    match name {
        HANDSHAKE => &["protocol_version", "client", "handle"],
        SESSION_REGISTER => &["agent_type", "agent_name", "worktree"],
        SESSION_GET | SESSION_HEARTBEAT | SESSION_CANCEL | SESSION_STOP | CONTEXT_GET
        | CONTEXT_RESET | CONTEXT_SUMMARIZE => &["session_id"],
        SESSION_DEREGISTER => &["session_id", "reason", "exit_code"],
        SESSION_CREATE => &["agent", "worktree", "in_place", "task"],
        SESSION_PROMPT => &["session_id", "text"],
        SESSION_DELETE => &["session_id", "remove_worktree", "delete_branch", "force"],
        SESSION_PRUNE => &["remove_worktree", "delete_branch", "force"],
        SESSION_TRANSCRIPT => &["session_id", "after", "limit"],
        INBOX_SEND => &["session_id", "msg_type", "title", "body", "options"],
        INBOX_LIST => &["unread_only", "limit", "session_id"],
        INBOX_GET => &["id"],
        INBOX_MARK_READ => &["ids"],
        INBOX_RESPOND => &["id", "response"],
        INBOX_WAIT => &["id", "timeout_secs"],
        DB_QUERY => &["sql", "bindings"],
        SUBSCRIBE => &["topics"],
        CONTEXT_POP => &["session_id", "n"],
        CONTEXT_CHECKPOINT | CONTEXT_ROLLBACK => &["session_id", "name"],
        CONTEXT_REPLACE_TOP => &["session_id", "summary"],
        _ => &[],
    }
}

/// Params as an object: positional params are named by [`param_order`]; a `null` in a
/// position means the param is left out.
pub fn named_params(
    name: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, ErrorObject> {
    let serde_json::Value::Array(items) = params else {
        return Ok(params);
    };
    let names = param_order(name);
    if items.len() > names.len() {
        return Err(ErrorObject::invalid_params(format!(
            "{name} takes at most {} positional param(s) ({}), not {}",
            names.len(),
            names.join(", "),
            items.len()
        )));
    }
    Ok(serde_json::Value::Object(
        names
            .iter()
            .zip(items)
            .filter(|(_, v)| !v.is_null())
            .map(|(n, v)| ((*n).to_string(), v))
            .collect(),
    ))
}

#[cfg(test)]
mod param_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn positional_params_follow_the_documented_order() {
        let named = named_params(
            method::SESSION_REGISTER,
            json!(["claude", "alice", "feat/x"]),
        );
        assert_eq!(
            named.unwrap(),
            json!({"agent_type": "claude", "agent_name": "alice", "worktree": "feat/x"})
        );
        let named = named_params(method::SESSION_DELETE, json!(["S1", true, null, true]));
        assert_eq!(
            named.unwrap(),
            json!({"session_id": "S1", "remove_worktree": true, "force": true})
        );
        let err = named_params(method::SESSION_GET, json!(["a", "b"])).unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        let err = named_params(method::SESSION_LIST, json!([1])).unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert_eq!(named_params("x", json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn every_method_with_params_has_an_order() {
        let without = [
            method::PING,
            method::SESSION_LIST,
            method::INBOX_CLEAR,
            method::UNSUBSCRIBE,
            method::DAEMON_STATUS,
            method::DAEMON_SHUTDOWN,
        ];
        for name in method::ALL {
            assert_eq!(
                param_order(name).is_empty(),
                without.contains(name),
                "{name}"
            );
        }
    }
}
