//! The method table: every method the daemon serves, declared once with its name, who may
//! call it, whether it is answered in order or on its own, its params in the documented
//! order, and its params and result types. The daemon dispatches by these types and
//! answers by the order, the client calls them (`Client::call::<M>`), and a test holds
//! the table and PROTOCOL.md to each other.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::Check;
use super::params::*;
use super::review::*;
use super::types::*;
use crate::context::ContextOp;

/// Who may call a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, at any time (liveness and the handshake).
    Open,
    /// The owner's connections only (no session handle).
    Owner,
    /// The owner, and a session handle acting for its own session.
    Session,
}

/// When a method is answered on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// In the order the requests arrived.
    InOrder,
    /// On its own, when done (it can take long): later requests go on meanwhile.
    Apart,
}

/// One method of the protocol.
pub trait Method {
    const NAME: &'static str;
    const ACCESS: Access;
    const ORDER: Order;
    /// The params' names in the documented order: how positional params are named.
    const PARAMS: &'static [&'static str];
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;
    type Result: Serialize + DeserializeOwned + Send + Sync + 'static;
}

/// One row of the table, for code that goes by name.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub name: &'static str,
    pub access: Access,
    pub order: Order,
    pub params: &'static [&'static str],
}

macro_rules! methods {
    ($( $(#[$doc:meta])* $ty:ident = $name:literal, $access:ident, $order:ident, [$($p:literal),*], $params:ty => $result:ty; )*) => {
        $(
            $(#[$doc])*
            pub struct $ty;

            impl Method for $ty {
                const NAME: &'static str = $name;
                const ACCESS: Access = Access::$access;
                const ORDER: Order = Order::$order;
                const PARAMS: &'static [&'static str] = &[$($p),*];
                type Params = $params;
                type Result = $result;
            }
        )*

        /// Every method, in PROTOCOL.md's order.
        pub const TABLE: &[Row] = &[
            $( Row { name: $name, access: Access::$access, order: Order::$order, params: &[$($p),*] }, )*
        ];
    };
}

methods! {
    Ping = "ping", Open, InOrder, [], NoParams => Pong;
    Handshake = "handshake", Open, InOrder, ["protocol_version", "client", "handle"],
        HandshakeParams => HandshakeResult;
    SessionRegister = "session.register", Owner, InOrder, ["agent_type", "agent_name", "worktree"],
        RegisterParams => Registered;
    SessionList = "session.list", Owner, InOrder, [], SessionListParams => Sessions;
    SessionGet = "session.get", Session, InOrder, ["session_id"], SessionIdParams => SessionReply;
    SessionHeartbeat = "session.heartbeat", Session, InOrder, ["session_id"], SessionIdParams => Done;
    SessionDeregister = "session.deregister", Owner, InOrder, ["session_id", "reason", "exit_code"],
        DeregisterParams => Done;
    SessionCreate = "session.create", Owner, InOrder,
        ["agent", "worktree", "in_place", "task", "driver", "allow_read"],
        CreateSessionParams => Created;
    SessionPrompt = "session.prompt", Owner, InOrder, ["session_id", "text"], PromptParams => PromptResult;
    SessionCancel = "session.cancel", Owner, InOrder, ["session_id"], SessionIdParams => Done;
    SessionStop = "session.stop", Owner, Apart, ["session_id"], SessionIdParams => SessionReply;
    SessionDelete = "session.delete", Owner, Apart,
        ["session_id", "remove_worktree", "delete_branch", "force", "audit"],
        DeleteSessionParams => DeleteOutcome;
    SessionPrune = "session.prune", Owner, Apart,
        ["remove_worktree", "delete_branch", "force", "audit"],
        RemoveOptions => PruneResult;
    SessionExec = "session.exec", Owner, Apart, ["session_id", "command", "timeout_secs"],
        ExecParams => ExecResult;
    SessionAudit = "session.audit", Owner, InOrder, ["session_id"], SessionIdParams => AuditLog;
    SessionSecurity = "session.security", Owner, InOrder, ["session_id"],
        SessionIdParams => SecurityReply;
    SessionRule = "session.rule", Owner, InOrder, ["session_id", "rule", "enabled"],
        SessionRuleParams => SecurityReply;
    SessionRefine = "session.refine", Owner, Apart, ["session_id", "allow_read", "prompt"],
        RefineParams => SessionReply;
    SessionReset = "session.reset", Owner, Apart, ["session_id", "keep_disabled"],
        ResetParams => Created;
    SessionRestart = "session.restart", Owner, Apart, ["session_id"], SessionIdParams => SessionReply;
    SessionResolve = "session.resolve", Owner, InOrder,
        ["channel", "source", "ref", "text", "agent", "driver", "words"], ResolveParams => ResolveResult;
    SessionClose = "session.close", Owner, InOrder, ["session_id"], SessionIdParams => SessionReply;
    CronList = "cron.list", Owner, InOrder, [], NoParams => CronJobs;
    CronRunNow = "cron.run", Owner, Apart, ["id"], CronRunParams => CronRun;
    SessionRename = "session.rename", Owner, InOrder, ["session_id", "name"],
        RenameParams => SessionReply;
    SessionFork = "session.fork", Owner, Apart, ["session_id", "worktree", "task"],
        ForkParams => Created;
    SessionDiff = "session.diff", Owner, Apart, ["session_id", "context"], DiffParams => DiffReply;
    SessionCommit = "session.commit", Owner, Apart, ["session_id", "message"],
        CommitParams => CommitReply;
    SessionMerge = "session.merge", Owner, Apart, ["session_id", "strategy", "message"],
        MergeParams => MergeReply;
    SessionPr = "session.pr", Owner, Apart, ["session_id", "title", "body"], PrParams => PrReply;
    SessionConflicts = "session.conflicts", Owner, InOrder, [], NoParams => ConflictReport;
    RulesList = "rules.list", Owner, InOrder, ["session_id"], RulesParams => RulesReply;
    SecretGet = "secret.get", Session, Apart, ["session_id", "name"], SecretParams => SecretReply;
    SessionTranscript = "session.transcript", Owner, InOrder, ["session_id", "after", "limit"],
        TranscriptParams => Entries;
    InboxSend = "inbox.send", Session, InOrder, ["session_id", "msg_type", "title", "body", "options"],
        SendParams => Sent;
    InboxList = "inbox.list", Owner, InOrder, ["unread_only", "limit", "session_id"],
        ListParams => Messages;
    InboxGet = "inbox.get", Session, InOrder, ["id"], IdParams => MessageReply;
    InboxMarkRead = "inbox.mark_read", Owner, InOrder, ["ids"], IdsParams => Updated;
    InboxRespond = "inbox.respond", Owner, InOrder, ["id", "response"], RespondParams => MessageReply;
    InboxWait = "inbox.wait", Session, Apart, ["id", "timeout_secs"], WaitParams => MessageReply;
    InboxClear = "inbox.clear", Owner, InOrder, [], NoParams => Deleted;
    DbQuery = "db.query", Owner, InOrder, ["sql", "bindings"], QueryParams => QueryResult;
    DbCheck = "db.check", Owner, Apart, [], NoParams => Check;
    Subscribe = "subscribe", Owner, InOrder, ["topics"], SubscribeParams => Subscribed;
    Unsubscribe = "unsubscribe", Owner, InOrder, [], NoParams => Subscribed;
    DaemonStatusOf = "daemon.status", Owner, InOrder, [], NoParams => DaemonStatus;
    DaemonShutdown = "daemon.shutdown", Owner, InOrder, [], NoParams => Stopping;
    ContextGet = "context.get", Owner, InOrder, ["session_id"], SessionIdParams => ContextResult;
    ContextPop = "context.pop", Owner, InOrder, ["session_id", "n"], ContextPopParams => ContextResult;
    ContextCheckpoint = "context.checkpoint", Owner, InOrder, ["session_id", "name"],
        ContextNameParams => ContextResult;
    ContextRollback = "context.rollback", Owner, InOrder, ["session_id", "name"],
        ContextNameParams => ContextResult;
    ContextReplaceTop = "context.replace_top", Owner, InOrder, ["session_id", "summary"],
        ContextReplaceParams => ContextResult;
    ContextReset = "context.reset", Owner, InOrder, ["session_id"], SessionIdParams => ContextResult;
    ContextSummarize = "context.summarize", Owner, InOrder, ["session_id", "summary"],
        ContextSummarizeParams => ContextResult;
}

/// A `context.*` call from the command line or the TUI: look at the stack, or change it
/// with one of the operations a method carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextCall {
    Get,
    Apply(ContextOp),
}

/// The table's row for a method name.
pub fn row(name: &str) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.name == name)
}

// ---- params and results that only the table needs ----

/// Params of a method that takes none (anything given is ignored).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NoParams {}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pong {
    pub pong: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registered {
    pub session_id: String,
    pub session: Session,
    /// The session's handle, shown once.
    pub handle: String,
    /// Live registered sessions of the same worktree and agent that this one replaced
    /// (seed 002): they are ended with reason `evicted`.
    #[serde(default)]
    pub evicted: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sessions {
    pub sessions: Vec<Session>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionReply {
    pub session: Session,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Done {
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Created {
    pub session_id: String,
    pub session: Session,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entries {
    pub entries: Vec<TranscriptEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    pub id: String,
    pub message: InboxMessage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Messages {
    pub messages: Vec<InboxMessage>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageReply {
    pub message: InboxMessage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Updated {
    pub updated: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deleted {
    pub deleted: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryResult {
    /// One value per statement.
    pub result: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subscribed {
    pub subscribed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stopping {
    pub stopping: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The methods PROTOCOL.md's table lists: its rows start with "| `name` |".
    fn documented() -> Vec<String> {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("PROTOCOL.md"),
        )
        .unwrap();
        // The method tables open "## Methods" and "## Context stack"; subsections
        // (types, notifications) list other things.
        let mut in_methods = false;
        doc.lines()
            .filter(|l| {
                if l.starts_with("## ") {
                    in_methods = l.starts_with("## Methods") || l.starts_with("## Context stack");
                } else if l.starts_with("### ") {
                    in_methods = false;
                }
                in_methods
            })
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|name| {
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_')
            })
            .filter(|name| !name.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_table_and_protocol_md_list_the_same_methods() {
        let mut documented = documented();
        documented.sort();
        documented.dedup();
        let mut table: Vec<String> = TABLE.iter().map(|r| r.name.to_string()).collect();
        table.sort();
        assert_eq!(table, documented);
    }

    #[test]
    fn names_are_unique_and_params_named_once() {
        let mut names: Vec<&str> = TABLE.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        for row in TABLE {
            let mut params = row.params.to_vec();
            params.sort_unstable();
            params.dedup();
            assert_eq!(params.len(), row.params.len(), "{}", row.name);
        }
    }
}
