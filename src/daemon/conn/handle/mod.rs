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
mod web;

use super::call::{Call, agent_door, app_error, forbidden};
use crate::protocol::check::Check;
use crate::protocol::methods::{self as m, Handler, *};
use crate::protocol::*;

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

    async fn session_list(&self, p: SessionListParams) -> Result<ListedSessions, ErrorObject> {
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

    async fn session_resend(&self, p: SessionIdParams) -> Result<PromptResult, ErrorObject> {
        session::resend(self, p).await
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

    async fn session_handoff(&self, p: HandoffParams) -> Result<Created, ErrorObject> {
        session::handoff(self, p).await
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

    async fn search(&self, p: SearchParams) -> Result<SearchResults, ErrorObject> {
        session::search(self, p).await
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

    async fn web_pair(&self, p: WebPairParams) -> Result<WebPairing, ErrorObject> {
        web::pair(self, p).await
    }

    async fn web_devices(&self, p: NoParams) -> Result<WebDevices, ErrorObject> {
        web::devices(self, p).await
    }

    async fn web_revoke(&self, p: WebRevokeParams) -> Result<WebRevoked, ErrorObject> {
        web::revoke(self, p).await
    }

    async fn context_apply(&self, p: ContextApplyParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, p).await
    }

    async fn context_get(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, ContextApplyParams::get(p)).await
    }

    async fn context_pop(&self, p: ContextPopParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, p.into()).await
    }

    async fn context_checkpoint(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, ContextApplyParams::checkpoint(p)).await
    }

    async fn context_rollback(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, ContextApplyParams::rollback(p)).await
    }

    async fn context_replace_top(
        &self,
        p: ContextReplaceParams,
    ) -> Result<ContextResult, ErrorObject> {
        context::apply(self, p.into()).await
    }

    async fn context_reset(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        context::apply(self, ContextApplyParams::reset(p)).await
    }

    async fn context_summarize(
        &self,
        p: ContextSummarizeParams,
    ) -> Result<ContextResult, ErrorObject> {
        context::apply(self, p.into()).await
    }
}
