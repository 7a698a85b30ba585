//! The method table: every method the daemon serves, declared once with its name, who
//! may call it (and why not, when a handle may not), whether it is answered in order or
//! on its own, which daemon answers it in team mode, its params in the documented order,
//! its params and result types, whether the web view offers it (`web:`) and what a call
//! of it does in words (`doing:`). The daemon implements an [`Answer`] to each row (so
//! it is a [`Handler`]) and answers through [`handle`], the client calls the methods by
//! type (`Client::call::<M>`) or sends any [`Request`] (`Client::send`), and a test holds
//! the table and PROTOCOL.md to each other.
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::Check;
use super::context::*;
use super::jsonrpc::ErrorObject;
use super::params::*;
use super::review::*;
use super::types::*;
use super::web::*;

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

/// Which daemon answers a method in team mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Any daemon: it reads or writes only what the shared database holds.
    Local,
    /// For a session another daemon runs, that daemon (its owner): the call touches the
    /// agent, its worktree or its state, and is forwarded there.
    Owner,
    /// Only another daemon of the team calls it, naming this daemon: never forwarded,
    /// and refused to every other caller.
    Peer,
}

/// One method of the protocol.
pub trait Method {
    const NAME: &'static str;
    const ACCESS: Access;
    const ORDER: Order;
    const ROUTE: Route;
    /// The params' names in the documented order: how positional params are named.
    const PARAMS: &'static [&'static str];
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;
    type Result: Serialize + DeserializeOwned + Send + Sync + 'static;
}

/// Whether the web view offers a method to a paired browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Web {
    /// It only reads: any paired browser may call it.
    Read,
    /// It changes something: a browser paired with full access may call it.
    Change,
    /// The web view does not offer it.
    No,
}

/// What answers the method `M`: its params in, its result (or why not) out. The daemon
/// implements it once per row, in the file of the method's noun.
pub trait Answer<M: Method> {
    fn answer(
        &self,
        params: M::Params,
    ) -> impl std::future::Future<Output = Result<M::Result, ErrorObject>> + Send;
}

/// One row of the table, for code that goes by name.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub name: &'static str,
    pub access: Access,
    pub order: Order,
    pub route: Route,
    /// Why a session handle may not call an `Owner` method, when that needs more than
    /// "may not call".
    pub refusal: Option<&'static str>,
    pub params: &'static [&'static str],
    /// Whether the web view offers it, to read or to change.
    pub web: Web,
    /// What a call of it does, in words, for "… failed: why" (the name when absent).
    pub doing: Option<&'static str>,
    /// What it does: the `///` lines above its row (a test holds every row to one).
    pub doc: &'static str,
}

/// A typed result as the JSON answer.
fn written<T: Serialize>(result: Result<T, ErrorObject>) -> Result<Value, ErrorObject> {
    serde_json::to_value(result?).map_err(|e| ErrorObject::internal(e.to_string()))
}

/// `raw` as a method's params.
fn read<T: DeserializeOwned>(raw: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(raw).map_err(|e| ErrorObject::invalid_params(format!("bad params: {e}")))
}

macro_rules! some {
    () => {
        None
    };
    ($why:literal) => {
        Some($why)
    };
}

macro_rules! web {
    () => {
        Web::No
    };
    ($web:ident) => {
        Web::$web
    };
}

macro_rules! methods {
    ($( $(#[doc = $doc:literal])* $ty:ident = $name:literal,
        $access:ident $(($why:literal))?, $order:ident, $route:ident,
        [$($p:literal),*], $params:ty => $result:ty
        $(, web: $web:ident)? $(, doing: $doing:literal)?; )*) => {
        $(
            $(#[doc = $doc])*
            pub struct $ty;

            impl Method for $ty {
                const NAME: &'static str = $name;
                const ACCESS: Access = Access::$access;
                const ORDER: Order = Order::$order;
                const ROUTE: Route = Route::$route;
                const PARAMS: &'static [&'static str] = &[$($p),*];
                type Params = $params;
                type Result = $result;
            }
        )*

        /// Every method, in PROTOCOL.md's order.
        pub const TABLE: &[Row] = &[
            $( Row {
                name: $name,
                access: Access::$access,
                order: Order::$order,
                route: Route::$route,
                refusal: some!($($why)?),
                params: &[$($p),*],
                web: web!($($web)?),
                doing: some!($($doing)?),
                doc: concat!($($doc, "\n",)*),
            }, )*
        ];

        /// What answers every method of the table: an [`Answer`] to each row, so a row
        /// without its answer does not compile (the dispatch, [`handle`], needs one).
        pub trait Handler: Sync $( + Answer<$ty> )* {}

        impl<H: Sync $( + Answer<$ty> )*> Handler for H {}

        /// One call of a method of the table with its typed params: what a caller holds
        /// to send a call without code of its own per method (`Client::send`), and what
        /// the daemon reads a call into. As JSON, `{"method": name, "params": {…}}`.
        // A call is read, routed and answered one at a time, never kept in bulk: its
        // size is the size of its largest params.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "method", content = "params")]
        pub enum Request {
            $( #[serde(rename = $name)] $ty($params), )*
        }

        /// The answer to a [`Request`]: the variant of the same name, holding its row's
        /// result type.
        #[derive(Debug, Clone, Serialize)]
        #[serde(untagged)]
        pub enum Reply {
            $( $ty($result), )*
        }

        impl Request {
            /// The method's name on the wire.
            pub fn method(&self) -> &'static str {
                match self {
                    $( Request::$ty(_) => $name, )*
                }
            }

            /// The params as JSON, to send.
            pub fn params(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $( Request::$ty(p) => serde_json::to_value(p), )*
                }
            }

            /// The daemon's answer to this request, read as its row's result.
            pub fn reply(
                &self,
                raw: &serde_json::value::RawValue,
            ) -> Result<Reply, serde_json::Error> {
                match self {
                    $( Request::$ty(_) => serde_json::from_str(raw.get()).map(Reply::$ty), )*
                }
            }

            /// A call of the method `name` with the JSON params `raw`.
            pub fn read(name: &str, raw: Value) -> Result<Request, ErrorObject> {
                match name {
                    $( $name => read::<$params>(raw).map(Request::$ty), )*
                    other => Err(ErrorObject::method_not_found(other)),
                }
            }
        }

        /// Answers the method `name` with `handler`: its params read as the row's
        /// `Params`, its answer written from the row's `Result`.
        pub async fn handle<H: Handler>(
            handler: &H,
            name: &str,
            raw: Value,
        ) -> Result<Value, ErrorObject> {
            match Request::read(name, raw)? {
                $( Request::$ty(p) => written(Answer::<$ty>::answer(handler, p).await), )*
            }
        }
    };
}

methods! {
    /// Whether the daemon answers at all (also before the handshake).
    Ping = "ping", Open, InOrder, Local, [], NoParams => Pong;
    /// Agrees the protocol version; with a handle, the connection acts for that session.
    Handshake = "handshake", Open, InOrder, Local, ["protocol_version", "client", "handle"],
        HandshakeParams => HandshakeResult;
    /// Registers an agent started outside the daemon as a session, and gives it its handle.
    SessionRegister = "session.register", Owner, InOrder, Local, ["agent_type", "agent_name", "worktree"],
        RegisterParams => Registered;
    /// Every session, oldest first; by channel, and with each agent's process tree on request.
    SessionList = "session.list", Owner("a session handle may not list other sessions; use session.get for its own"), InOrder, Local, [], SessionListParams => ListedSessions,
        web: Read, doing: "reading the sessions";
    /// One session, or the termination record of a registered one that ended.
    SessionGet = "session.get", Session, InOrder, Local, ["session_id"], SessionIdParams => SessionReply,
        web: Read;
    /// A registered session says it is still alive.
    SessionHeartbeat = "session.heartbeat", Session, InOrder, Local, ["session_id"], SessionIdParams => Done;
    /// A registered session ends: its handles are revoked and a termination record kept.
    SessionDeregister = "session.deregister", Owner, InOrder, Local, ["session_id", "reason", "exit_code"],
        DeregisterParams => Done;
    /// Starts a session: its worktree, its driver's environment and its agent.
    SessionCreate = "session.create", Owner, InOrder, Local,
        ["agent", "worktree", "in_place", "task", "driver", "allow_read"],
        CreateSessionParams => Created,
        web: Change, doing: "starting the session";
    /// Sends a prompt to the session's agent, or queues it behind the running turn.
    SessionPrompt = "session.prompt", Owner, InOrder, Owner, ["session_id", "text"], PromptParams => PromptResult,
        web: Change, doing: "sending the prompt";
    /// Asks the agent to end its turn; queued prompts are dropped, open approvals withdrawn.
    SessionCancel = "session.cancel", Owner, InOrder, Owner, ["session_id"], SessionIdParams => Done,
        web: Change, doing: "cancelling the turn";
    /// Sends the prompt of the turn that was cut short again, ahead of those waiting.
    SessionResend = "session.resend", Owner, InOrder, Owner, ["session_id"], SessionIdParams => PromptResult;
    /// Stops the session's agent; answered once it has ended.
    SessionStop = "session.stop", Owner, Apart, Owner, ["session_id"], SessionIdParams => SessionReply,
        web: Change, doing: "stopping the session";
    /// Deletes a session, and on request its worktree, its branch and its audit log.
    SessionDelete = "session.delete", Owner, Apart, Owner,
        ["session_id", "remove_worktree", "delete_branch", "force", "audit"],
        DeleteSessionParams => DeleteOutcome,
        doing: "deleting the session";
    /// Deletes every session that is complete, cancelled or stopped.
    SessionPrune = "session.prune", Owner, Apart, Local,
        ["remove_worktree", "delete_branch", "force", "audit"],
        RemoveOptions => PruneResult,
        doing: "pruning";
    /// Runs a command in the session's environment, recorded in its audit log.
    SessionExec = "session.exec", Owner, Apart, Owner, ["session_id", "command", "timeout_secs"],
        ExecParams => ExecResult;
    /// The session's audit log, also after the session was deleted.
    SessionAudit = "session.audit", Owner, InOrder, Owner, ["session_id"], SessionIdParams => AuditLog,
        doing: "reading the audit log";
    /// The session's security state: rules activated and disabled, what was approved.
    SessionSecurity = "session.security", Owner, InOrder, Owner, ["session_id"],
        SessionIdParams => SecurityReply,
        doing: "reading the security state";
    /// Switches one rule off, or on again, for the session.
    SessionRule = "session.rule", Owner, InOrder, Owner, ["session_id", "rule", "enabled"],
        SessionRuleParams => SecurityReply,
        doing: "changing the rule";
    /// Widens the read manifest of a session a context miss stopped, and starts its agent again.
    SessionRefine = "session.refine", Owner, Apart, Owner, ["session_id", "allow_read", "prompt"],
        RefineParams => SessionReply;
    /// Stops the session and starts a fresh one for the same worktree, profile and driver.
    SessionReset = "session.reset", Owner, Apart, Owner, ["session_id", "keep_disabled"],
        ResetParams => Created,
        doing: "resetting the session";
    /// Ends the session's agent if it runs and starts it again.
    SessionRestart = "session.restart", Owner, Apart, Owner, ["session_id"], SessionIdParams => SessionReply,
        doing: "restarting the agent";
    /// Delivers a channel's message to its conversation's session, new or the same.
    SessionResolve = "session.resolve", Owner, InOrder, Local,
        ["channel", "source", "ref", "text", "agent", "driver", "words"], ResolveParams => ResolveResult;
    /// Closes a channel session; the conversation's next message starts a new one.
    SessionClose = "session.close", Owner, InOrder, Owner, ["session_id"], SessionIdParams => SessionReply;
    /// The `[[cron]]` jobs the daemon runs, their next and latest runs and their failures.
    CronList = "cron.list", Owner, InOrder, Local, [], NoParams => CronJobs;
    /// Runs a cron job now, as a new session.
    CronRunNow = "cron.run", Owner, Apart, Local, ["id"], CronRunParams => CronRun;
    /// Gives the session a display name that `cru session` commands accept.
    SessionRename = "session.rename", Owner, InOrder, Owner, ["session_id", "name"],
        RenameParams => SessionReply,
        doing: "renaming";
    /// The session goes on on another daemon of the team, with its branch, transcript,
    /// context and open questions; its agent here stops once that daemon has it.
    SessionMove = "session.move", Owner, Apart, Owner, ["session_id", "to"],
        MoveParams => Moved,
        doing: "moving the session";
    /// Between the daemons of a team: take a session over, with its branch as a bundle.
    SessionAdopt = "session.adopt", Owner, Apart, Peer, ["session_id", "from", "branch", "bundle"],
        AdoptParams => Adopted,
        doing: "taking the session over";
    /// A new session of the same profile on a new branch made from the session's HEAD.
    SessionFork = "session.fork", Owner, Apart, Owner, ["session_id", "worktree", "task"],
        ForkParams => Created,
        doing: "forking the session";
    /// The session's task goes on with another agent profile in the same worktree.
    SessionHandoff = "session.handoff", Owner, Apart, Owner, ["session_id", "agent"],
        HandoffParams => Created;
    /// Every change of the session's worktree against where its branch left the base branch.
    SessionDiff = "session.diff", Owner, Apart, Owner, ["session_id", "context"], DiffParams => DiffReply,
        web: Read, doing: "reading the changes";
    /// Commits everything in the session's worktree.
    SessionCommit = "session.commit", Owner, Apart, Owner, ["session_id", "message"],
        CommitParams => CommitReply,
        web: Change, doing: "the commit";
    /// Lands the session's branch on its base branch, refused when it would conflict.
    SessionMerge = "session.merge", Owner, Apart, Owner, ["session_id", "strategy", "message"],
        MergeParams => MergeReply,
        web: Change, doing: "the merge";
    /// Pushes the session's branch and opens a pull request with `gh`.
    SessionPr = "session.pr", Owner, Apart, Owner, ["session_id", "title", "body"], PrParams => PrReply,
        doing: "opening the pull request";
    /// The conflict radar: pairs of sessions whose branches change the same files.
    SessionConflicts = "session.conflicts", Owner, InOrder, Local, [], NoParams => ConflictReport,
        doing: "reading the conflicts";
    /// The rules in force, and why the rule files are not when they cannot be used.
    RulesList = "rules.list", Owner, InOrder, Local, ["session_id"], RulesParams => RulesReply,
        doing: "reading the rules";
    /// A credential for the session's agent, once the human has approved it.
    SecretGet = "secret.get", Session, Apart, Local, ["session_id", "name"], SecretParams => SecretReply;
    /// The session's transcript entries, oldest first.
    SessionTranscript = "session.transcript", Owner, InOrder, Local, ["session_id", "after", "limit"],
        TranscriptParams => Entries,
        web: Read, doing: "reading the transcript";
    /// Transcript entries, inbox messages and sessions holding every word of a query, best first.
    Search = "search", Owner("a session handle may not search other sessions' transcripts"), Apart, Local,
        ["query", "session_id", "types", "limit"], SearchParams => SearchResults,
        doing: "searching";
    /// A session's message to the human: a note, a question or an approval request.
    InboxSend = "inbox.send", Session, InOrder, Local, ["session_id", "msg_type", "title", "body", "options"],
        SendParams => Sent;
    /// The inbox's messages, newest first.
    InboxList = "inbox.list", Owner, InOrder, Local, ["unread_only", "limit", "session_id"],
        ListParams => Messages,
        web: Read;
    /// One inbox message.
    InboxGet = "inbox.get", Session, InOrder, Local, ["id"], IdParams => MessageReply,
        web: Read, doing: "reading the message";
    /// Marks inbox messages read.
    InboxMarkRead = "inbox.mark_read", Owner, InOrder, Local, ["ids"], IdsParams => Updated,
        web: Change, doing: "marking read";
    /// The human's answer to an inbox message, delivered to the session that asked.
    InboxRespond = "inbox.respond", Owner("an agent may not answer inbox messages: answers come from a human"), InOrder, Local, ["id", "response", "asked"], RespondParams => MessageReply,
        web: Change, doing: "answering";
    /// Waits until an inbox message is answered.
    InboxWait = "inbox.wait", Session, Apart, Local, ["id", "timeout_secs"], WaitParams => MessageReply;
    /// Deletes the read messages that need no answer or have one.
    InboxClear = "inbox.clear", Owner, InOrder, Local, [], NoParams => Deleted;
    /// Runs a query on the daemon's database.
    DbQuery = "db.query", Owner("a session handle may not query the database"), InOrder, Local, ["sql", "bindings"], QueryParams => QueryResult;
    /// Reads the whole database and names every record or file block that does not read back.
    DbCheck = "db.check", Owner, Apart, Local, [], NoParams => Check;
    /// Starts the daemon's notifications on this connection, for some topics or all.
    Subscribe = "subscribe", Owner, InOrder, Local, ["topics"], SubscribeParams => Subscribed;
    /// Stops this connection's notifications.
    Unsubscribe = "unsubscribe", Owner, InOrder, Local, [], NoParams => Subscribed;
    /// The daemon's state: its process, database, clients, sessions and settings.
    DaemonStatusOf = "daemon.status", Owner, InOrder, Local, [], NoParams => DaemonStatus;
    /// Stops the daemon cleanly.
    DaemonShutdown = "daemon.shutdown", Owner, InOrder, Local, [], NoParams => Stopping;
    /// Says whether the emoji of the Matrix bot's verification match: confirms or cancels it.
    MatrixVerify = "matrix.verify", Owner, InOrder, Local, ["confirm"], MatrixVerifyParams => MatrixVerification;
    /// A one-time code that pairs a browser with the web view.
    WebPair = "web.pair", Owner, InOrder, Local, ["read_only"], WebPairParams => WebPairing;
    /// The browsers paired with the web view, and where it is served.
    WebDevicesOf = "web.devices", Owner, InOrder, Local, [], NoParams => WebDevices;
    /// Lets a paired browser go; its next request is refused.
    WebRevoke = "web.revoke", Owner, InOrder, Local, ["id"], WebRevokeParams => WebRevoked;
    /// An operation on the session's context stack, or `get` to read it.
    ContextApply = "context.apply", Owner, InOrder, Owner, ["session_id", "op"],
        ContextApplyParams => ContextResult,
        doing: "the context operation";
    /// `context.apply` with `get` (kept under its own name).
    ContextGet = "context.get", Owner, InOrder, Owner, ["session_id"], SessionIdParams => ContextResult;
    /// `context.apply` with `pop` (kept under its own name).
    ContextPop = "context.pop", Owner, InOrder, Owner, ["session_id", "n"], ContextPopParams => ContextResult;
    /// `context.apply` with `checkpoint` (kept under its own name).
    ContextCheckpoint = "context.checkpoint", Owner, InOrder, Owner, ["session_id", "name"],
        ContextNameParams => ContextResult;
    /// `context.apply` with `rollback` (kept under its own name).
    ContextRollback = "context.rollback", Owner, InOrder, Owner, ["session_id", "name"],
        ContextNameParams => ContextResult;
    /// `context.apply` with `replace_top` (kept under its own name).
    ContextReplaceTop = "context.replace_top", Owner, InOrder, Owner, ["session_id", "summary"],
        ContextReplaceParams => ContextResult;
    /// `context.apply` with `reset` (kept under its own name).
    ContextReset = "context.reset", Owner, InOrder, Owner, ["session_id"], SessionIdParams => ContextResult;
    /// `context.apply` with `summarize` (kept under its own name).
    ContextSummarize = "context.summarize", Owner, InOrder, Owner, ["session_id", "summary"],
        ContextSummarizeParams => ContextResult;
}

/// Two requests are equal when they put the same call on the wire.
impl PartialEq for Request {
    fn eq(&self, other: &Self) -> bool {
        self.method() == other.method() && self.params().ok() == other.params().ok()
    }
}

impl Eq for Request {}

impl Request {
    /// What this call does, in words, for "… failed: why": its row's `doing`, else the
    /// method's name.
    pub fn doing(&self) -> &'static str {
        let name = self.method();
        row(name).and_then(|r| r.doing).unwrap_or(name)
    }
}

/// The table's row for a method name.
pub fn row(name: &str) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.name == name)
}

// The results of the session's and the inbox's methods are with their params, one file
// per noun; the table's users name them here as before.
pub use super::params::{
    Created, Deleted, Entries, ListedSessions, MessageReply, Messages, Registered, Sent,
    SessionReply, Updated,
};

// ---- params and results that only the table needs ----

/// Params of a method that takes none (anything given is ignored).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NoParams {}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pong {
    pub pong: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Done {
    pub ok: bool,
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
#[path = "methods_tests.rs"]
mod tests;
