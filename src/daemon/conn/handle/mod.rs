//! The daemon's answers to the methods of the table ([`methods`]), by noun: each row of
//! the table is a method of [`Handler`] (a row without one does not compile), answered
//! here by a function in the file of its noun. What decides whether a call is answered at
//! all (access, a handle's scope, which daemon answers in team mode) is in `dispatch`.

mod context;
mod cron;
mod daemon;
mod inbox;
mod land;
mod rules;
mod session;

use std::sync::Arc;

use super::{Conn, Scope};
use crate::context::ContextOp;
use crate::protocol::check::Check;
use crate::protocol::methods::{self as m, ContextCall, Handler, *};
use crate::protocol::*;
use crate::workbench::WorkbenchError;

/// One call on a connection: who asks (its scope, when it presented a session handle).
pub(super) struct Call<'a> {
    pub(super) conn: &'a Arc<Conn>,
    pub(super) scope: Option<&'a Scope>,
    /// `session.create`'s asking process's environment, taken apart from its params
    /// (the params may be logged or stored, these values never).
    client_env: std::sync::Mutex<Option<ClientEnv>>,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        conn: &'a Arc<Conn>,
        scope: Option<&'a Scope>,
        client_env: Option<ClientEnv>,
    ) -> Self {
        Call {
            conn,
            scope,
            client_env: std::sync::Mutex::new(client_env),
        }
    }

    fn take_client_env(&self) -> Option<ClientEnv> {
        self.client_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// A handle acts for its own session only: `session_id` must be its own.
    fn own(&self, session_id: &str) -> Result<(), ErrorObject> {
        match self.scope {
            Some(scope) if scope.session_id != session_id => Err(super::dispatch::forbidden(
                "a session handle may act only for its own session",
            )),
            _ => Ok(()),
        }
    }

    /// An inbox message a handle may see: its own session's; any other is "not found",
    /// as if it did not exist, so a handle learns nothing of other sessions.
    async fn visible(&self, id: &str) -> Result<InboxMessage, ErrorObject> {
        let message = self
            .conn
            .shared
            .wb
            .get_message(id)
            .await
            .map_err(app_error)?;
        match self.scope {
            Some(scope) if message.session_id != scope.session_id => {
                Err(app_error(crate::workbench::no_message(id)))
            }
            _ => Ok(message),
        }
    }
}

/// A workbench error as its JSON-RPC error: each kind its own code.
pub(super) fn app_error(e: WorkbenchError) -> ErrorObject {
    let code = match &e {
        WorkbenchError::NotFound(_) => code::NOT_FOUND,
        WorkbenchError::Invalid(_) => code::INVALID_PARAMS,
        WorkbenchError::Conflict(_) => code::CONFLICT,
        WorkbenchError::TimedOut(_) => code::TIMED_OUT,
        WorkbenchError::Git { .. } => code::GIT_FAILED,
        WorkbenchError::Tool(_) => code::TOOL_FAILED,
        WorkbenchError::Io(_) => code::IO_ERROR,
        WorkbenchError::Driver(_) => code::DRIVER_ERROR,
        WorkbenchError::Store(_) => code::STORE_ERROR,
    };
    ErrorObject::new(code, e.to_string())
}

/// The context operation a `context.*` method names, applied.
fn apply(op: ContextOp) -> ContextCall {
    ContextCall::Apply(op)
}

/// A `context.*` method: which session, and which operation.
async fn apply_to(
    call: &Call<'_>,
    session_id: String,
    request: ContextCall,
) -> Result<ContextResult, ErrorObject> {
    call.conn
        .shared
        .sessions
        .context_call(&session_id, request)
        .await
        .map_err(app_error)
}

impl Handler for Call<'_> {
    async fn ping(&self, p: NoParams) -> Result<Pong, ErrorObject> {
        daemon::ping(self, p).await
    }

    async fn handshake(&self, p: HandshakeParams) -> Result<HandshakeResult, ErrorObject> {
        daemon::handshake(self, p).await
    }

    async fn session_register(&self, p: RegisterParams) -> Result<Registered, ErrorObject> {
        session::register(self, p).await
    }

    async fn session_list(&self, p: SessionListParams) -> Result<Sessions, ErrorObject> {
        session::list(self, p).await
    }

    async fn session_get(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        session::get(self, p).await
    }

    async fn session_heartbeat(&self, p: SessionIdParams) -> Result<Done, ErrorObject> {
        session::heartbeat(self, p).await
    }

    async fn session_deregister(&self, p: DeregisterParams) -> Result<Done, ErrorObject> {
        session::deregister(self, p).await
    }

    async fn session_create(&self, p: CreateSessionParams) -> Result<Created, ErrorObject> {
        session::create(self, p).await
    }

    async fn session_prompt(&self, p: PromptParams) -> Result<PromptResult, ErrorObject> {
        session::prompt(self, p).await
    }

    async fn session_cancel(&self, p: SessionIdParams) -> Result<Done, ErrorObject> {
        session::cancel(self, p).await
    }

    async fn session_stop(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        session::stop(self, p).await
    }

    async fn session_delete(&self, p: DeleteSessionParams) -> Result<DeleteOutcome, ErrorObject> {
        session::delete(self, p).await
    }

    async fn session_prune(&self, p: RemoveOptions) -> Result<PruneResult, ErrorObject> {
        session::prune(self, p).await
    }

    async fn session_exec(&self, p: ExecParams) -> Result<ExecResult, ErrorObject> {
        session::exec(self, p).await
    }

    async fn session_audit(&self, p: SessionIdParams) -> Result<AuditLog, ErrorObject> {
        session::audit(self, p).await
    }

    async fn session_security(&self, p: SessionIdParams) -> Result<SecurityReply, ErrorObject> {
        rules::security(self, p).await
    }

    async fn session_rule(&self, p: SessionRuleParams) -> Result<SecurityReply, ErrorObject> {
        rules::rule(self, p).await
    }

    async fn session_refine(&self, p: RefineParams) -> Result<SessionReply, ErrorObject> {
        session::refine(self, p).await
    }

    async fn session_reset(&self, p: ResetParams) -> Result<Created, ErrorObject> {
        session::reset(self, p).await
    }

    async fn session_restart(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        session::restart(self, p).await
    }

    async fn session_resolve(&self, p: ResolveParams) -> Result<ResolveResult, ErrorObject> {
        session::resolve(self, p).await
    }

    async fn session_close(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        session::close(self, p).await
    }

    async fn cron_list(&self, p: NoParams) -> Result<CronJobs, ErrorObject> {
        cron::list(self, p).await
    }

    async fn cron_run(&self, p: CronRunParams) -> Result<CronRun, ErrorObject> {
        cron::run(self, p).await
    }

    async fn session_rename(&self, p: RenameParams) -> Result<SessionReply, ErrorObject> {
        session::rename(self, p).await
    }

    async fn session_fork(&self, p: ForkParams) -> Result<Created, ErrorObject> {
        session::fork(self, p).await
    }

    async fn session_diff(&self, p: DiffParams) -> Result<DiffReply, ErrorObject> {
        land::diff(self, p).await
    }

    async fn session_commit(&self, p: CommitParams) -> Result<CommitReply, ErrorObject> {
        land::commit(self, p).await
    }

    async fn session_merge(&self, p: MergeParams) -> Result<MergeReply, ErrorObject> {
        land::merge(self, p).await
    }

    async fn session_pr(&self, p: PrParams) -> Result<PrReply, ErrorObject> {
        land::pr(self, p).await
    }

    async fn session_conflicts(&self, p: NoParams) -> Result<ConflictReport, ErrorObject> {
        land::conflicts(self, p).await
    }

    async fn rules_list(&self, p: RulesParams) -> Result<RulesReply, ErrorObject> {
        rules::rules_list(self, p).await
    }

    async fn secret_get(&self, p: SecretParams) -> Result<SecretReply, ErrorObject> {
        rules::secret_get(self, p).await
    }

    async fn session_transcript(&self, p: TranscriptParams) -> Result<Entries, ErrorObject> {
        session::transcript(self, p).await
    }

    async fn inbox_send(&self, p: SendParams) -> Result<Sent, ErrorObject> {
        inbox::send(self, p).await
    }

    async fn inbox_list(&self, p: ListParams) -> Result<Messages, ErrorObject> {
        inbox::list(self, p).await
    }

    async fn inbox_get(&self, p: IdParams) -> Result<MessageReply, ErrorObject> {
        inbox::get(self, p).await
    }

    async fn inbox_mark_read(&self, p: IdsParams) -> Result<Updated, ErrorObject> {
        inbox::mark_read(self, p).await
    }

    async fn inbox_respond(&self, p: RespondParams) -> Result<MessageReply, ErrorObject> {
        inbox::respond(self, p).await
    }

    async fn inbox_wait(&self, p: WaitParams) -> Result<MessageReply, ErrorObject> {
        inbox::wait(self, p).await
    }

    async fn inbox_clear(&self, p: NoParams) -> Result<Deleted, ErrorObject> {
        inbox::clear(self, p).await
    }

    async fn db_query(&self, p: QueryParams) -> Result<QueryResult, ErrorObject> {
        daemon::db_query(self, p).await
    }

    async fn db_check(&self, p: NoParams) -> Result<Check, ErrorObject> {
        daemon::db_check(self, p).await
    }

    async fn subscribe(&self, p: SubscribeParams) -> Result<Subscribed, ErrorObject> {
        daemon::subscribe(self, p).await
    }

    async fn unsubscribe(&self, p: NoParams) -> Result<Subscribed, ErrorObject> {
        daemon::unsubscribe(self, p).await
    }

    async fn daemon_status(&self, p: NoParams) -> Result<DaemonStatus, ErrorObject> {
        daemon::status(self, p).await
    }

    async fn daemon_shutdown(&self, p: NoParams) -> Result<Stopping, ErrorObject> {
        daemon::shutdown(self, p).await
    }

    async fn context_get(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        context::get(self, p).await
    }

    async fn context_pop(&self, p: ContextPopParams) -> Result<ContextResult, ErrorObject> {
        context::pop(self, p).await
    }

    async fn context_checkpoint(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        context::checkpoint(self, p).await
    }

    async fn context_rollback(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        context::rollback(self, p).await
    }

    async fn context_replace_top(
        &self,
        p: ContextReplaceParams,
    ) -> Result<ContextResult, ErrorObject> {
        context::replace_top(self, p).await
    }

    async fn context_reset(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        context::reset(self, p).await
    }

    async fn context_summarize(
        &self,
        p: ContextSummarizeParams,
    ) -> Result<ContextResult, ErrorObject> {
        context::summarize(self, p).await
    }
}
