//! One request to its answer: every method of the table ([`methods`]), typed end to end.
//! Its params are read as the method's `Params`, its answer is the method's `Result`, and
//! who may call it comes from the table: a connection holding a session handle may call
//! only `Session` methods, for its own session.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Conn, Door, Scope, subscribe};
use crate::context::ContextOp;
use crate::protocol::methods::{self as m, Access, Method};
use crate::protocol::*;
use crate::workbench::WorkbenchError;

fn params<T: DeserializeOwned>(value: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(value)
        .map_err(|e| ErrorObject::invalid_params(format!("bad params: {e}")))
}

fn app_error(e: WorkbenchError) -> ErrorObject {
    let code = match &e {
        WorkbenchError::NotFound(_) => code::NOT_FOUND,
        WorkbenchError::Invalid(_) => code::INVALID_PARAMS,
        WorkbenchError::Conflict(_) => code::CONFLICT,
        WorkbenchError::TimedOut(_) => code::TIMED_OUT,
        WorkbenchError::Store(_) => code::STORE_ERROR,
    };
    ErrorObject::new(code, e.to_string())
}

fn forbidden(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::FORBIDDEN, message)
}

fn agent_door() -> ErrorObject {
    forbidden("this socket serves agents only: handshake with your session handle first")
}

/// `session.create`'s params without the asking process's environment, and that
/// environment (kept apart: the params may be logged or stored, the values never).
fn split_client_env(mut raw: Value) -> Result<(Value, Option<ClientEnv>), ErrorObject> {
    let given = match raw
        .as_object_mut()
        .and_then(|o| o.remove(client_env::FIELD))
    {
        None | Some(Value::Null) => None,
        // serde's words could quote a value: never echo them.
        Some(value) => Some(serde_json::from_value(value).map_err(|_| {
            ErrorObject::invalid_params(format!(
                "bad {}: expected {{by?, path?, vars?: {{NAME: value}}}}",
                client_env::FIELD
            ))
        })?),
    };
    Ok((raw, given))
}

/// Reads `M`'s params, runs `f`, and writes its result.
async fn serve<M, F, Fut>(raw: Value, f: F) -> Result<Value, ErrorObject>
where
    M: Method,
    F: FnOnce(M::Params) -> Fut,
    Fut: Future<Output = Result<M::Result, ErrorObject>>,
{
    let result = f(params::<M::Params>(raw)?).await?;
    serde_json::to_value(result).map_err(|e| ErrorObject::internal(e.to_string()))
}

/// Answers one call on a connection.
pub(super) async fn call(conn: &Arc<Conn>, name: &str, raw: Value) -> Result<Value, ErrorObject> {
    let Some(row) = m::row(name) else {
        return Err(ErrorObject::method_not_found(name));
    };
    if name == m::Handshake::NAME {
        return serve::<m::Handshake, _, _>(raw, |p| async move { handshake(conn, p) }).await;
    }
    if row.access != Access::Open {
        if conn.refused.load(Ordering::Acquire) {
            return Err(forbidden(
                "this connection presented an unknown or revoked session handle; it is not served",
            ));
        }
        // The handshake is optional on the owner's socket: a client that never makes one
        // (seed 003's protocol has none) is served as protocol 1 with the owner's access.
        if !conn.handshaken.load(Ordering::Acquire) && conn.door == Door::Agent {
            return Err(agent_door());
        }
    }
    let scope = conn.scope.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(scope) = &scope {
        if conn.shared.wb.session_for_handle(&scope.handle).as_deref()
            != Some(scope.session_id.as_str())
        {
            return Err(forbidden("the session handle was revoked"));
        }
        if row.access == Access::Owner {
            return Err(forbidden(refusal(name)));
        }
    }
    if scope.is_none()
        && forwarded(name)
        && let Some(session) = raw
            .get("session_id")
            .and_then(Value::as_str)
            .and_then(|id| conn.shared.wb.get_session(id).ok())
        && conn.shared.wb.is_foreign(&session)
    {
        // Team mode: another daemon runs this session's agent; it answers.
        return conn
            .shared
            .wb
            .forward(&session, name, raw)
            .await
            .map_err(|(code, message)| ErrorObject::new(code, message));
    }
    dispatch(conn, scope.as_ref(), name, raw).await
}

/// The calls for one session that the daemon running its agent answers (team mode):
/// everything that touches the agent, its worktree or its state. Reads of what the
/// database holds (a session, its transcript, the inbox) are answered by any daemon.
pub(super) fn forwarded(name: &str) -> bool {
    matches!(
        name,
        m::SessionPrompt::NAME
            | m::SessionCancel::NAME
            | m::SessionStop::NAME
            | m::SessionDelete::NAME
            | m::SessionExec::NAME
            | m::SessionAudit::NAME
            | m::SessionSecurity::NAME
            | m::SessionRule::NAME
            | m::SessionRefine::NAME
            | m::SessionReset::NAME
            | m::SessionRestart::NAME
            | m::SessionClose::NAME
            | m::SessionRename::NAME
            | m::SessionFork::NAME
            | m::SessionDiff::NAME
            | m::SessionCommit::NAME
            | m::SessionMerge::NAME
            | m::SessionPr::NAME
            | m::ContextGet::NAME
            | m::ContextPop::NAME
            | m::ContextCheckpoint::NAME
            | m::ContextRollback::NAME
            | m::ContextReplaceTop::NAME
            | m::ContextReset::NAME
            | m::ContextSummarize::NAME
    )
}

/// Why a session handle may not call an owner's method.
fn refusal(name: &str) -> String {
    match name {
        m::InboxRespond::NAME => {
            "an agent may not answer inbox messages: answers come from a human".into()
        }
        m::DbQuery::NAME => "a session handle may not query the database".into(),
        m::SessionList::NAME => {
            "a session handle may not list other sessions; use session.get for its own".into()
        }
        other => format!("a session handle may not call {other}"),
    }
}

fn handshake(conn: &Conn, p: HandshakeParams) -> Result<HandshakeResult, ErrorObject> {
    let wb = &conn.shared.wb;
    if conn.handshaken.load(Ordering::Acquire) {
        return Err(ErrorObject::invalid_request(
            "this connection has already made its handshake; open a new connection for another",
        ));
    }
    if p.protocol_version != PROTOCOL_VERSION {
        return Err(ErrorObject::new(
            code::VERSION_MISMATCH,
            format!(
                "this daemon speaks protocol {PROTOCOL_VERSION}, the client {}",
                p.protocol_version
            ),
        )
        .with_data(json!({"protocol_version": PROTOCOL_VERSION, "daemon_version": env!("CARGO_PKG_VERSION")})));
    }
    let scope = match p.handle.as_deref() {
        None if conn.door == Door::Agent => return Err(agent_door()),
        None => None,
        Some(text) => {
            let found = Handle::parse(text)
                .and_then(|handle| Some((wb.session_for_handle(&handle)?, handle)));
            let Some((session_id, handle)) = found else {
                conn.refused.store(true, Ordering::Release);
                return Err(forbidden("unknown or revoked session handle"));
            };
            Some(Scope { session_id, handle })
        }
    };
    let session_id = scope.as_ref().map(|s| s.session_id.clone());
    *conn.scope.lock().unwrap_or_else(|e| e.into_inner()) = scope;
    conn.handshaken.store(true, Ordering::Release);
    Ok(HandshakeResult {
        protocol_version: PROTOCOL_VERSION,
        daemon_version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        kiln: wb.kiln().root().display().to_string(),
        session_id,
    })
}

/// A handle acts for its own session only: `session_id` must be its own.
fn own(scope: Option<&Scope>, session_id: &str) -> Result<(), ErrorObject> {
    match scope {
        Some(scope) if scope.session_id != session_id => Err(forbidden(
            "a session handle may act only for its own session",
        )),
        _ => Ok(()),
    }
}

/// An inbox message a handle may see: its own session's; any other is "not found", as if
/// it did not exist, so a handle learns nothing of other sessions.
async fn visible(
    conn: &Conn,
    scope: Option<&Scope>,
    id: &str,
) -> Result<InboxMessage, ErrorObject> {
    let message = conn.shared.wb.get_message(id).await.map_err(app_error)?;
    match scope {
        Some(scope) if message.session_id != scope.session_id => {
            Err(app_error(crate::workbench::no_message(id)))
        }
        _ => Ok(message),
    }
}

async fn dispatch(
    conn: &Arc<Conn>,
    scope: Option<&Scope>,
    name: &str,
    raw: Value,
) -> Result<Value, ErrorObject> {
    let shared = &conn.shared;
    let wb = &shared.wb;
    let sessions = &shared.sessions;
    match name {
        m::Ping::NAME => {
            serve::<m::Ping, _, _>(raw, |_| async { Ok(m::Pong { pong: true }) }).await
        }
        m::SessionRegister::NAME => {
            serve::<m::SessionRegister, _, _>(raw, |p| async move {
                let (session, handle, evicted) = wb.register(p).await.map_err(app_error)?;
                Ok(m::Registered {
                    session_id: session.id.clone(),
                    session,
                    handle: handle.expose().to_string(),
                    evicted,
                })
            })
            .await
        }
        m::SessionList::NAME => {
            serve::<m::SessionList, _, _>(raw, |p| async move {
                let mut sessions = wb.list_sessions();
                if let Some(channel) = &p.channel {
                    sessions.retain(|s| match &s.channel {
                        Some(tag) => &tag.kind == channel,
                        None => channel == "interactive",
                    });
                }
                Ok(m::Sessions { sessions })
            })
            .await
        }
        m::SessionGet::NAME => {
            serve::<m::SessionGet, _, _>(raw, |p| async move {
                own(scope, &p.session_id)?;
                let session = match scope {
                    Some(_) => wb.get_session(&p.session_id),
                    None => wb.session_or_record(&p.session_id),
                };
                Ok(m::SessionReply {
                    session: session.map_err(app_error)?,
                })
            })
            .await
        }
        m::SessionHeartbeat::NAME => {
            serve::<m::SessionHeartbeat, _, _>(raw, |p| async move {
                own(scope, &p.session_id)?;
                wb.heartbeat(&p.session_id).map_err(app_error)?;
                Ok(m::Done { ok: true })
            })
            .await
        }
        m::SessionDeregister::NAME => {
            serve::<m::SessionDeregister, _, _>(raw, |p| async move {
                let reason = p.reason.as_deref().unwrap_or("deregistered");
                wb.deregister(&p.session_id, reason, p.exit_code)
                    .await
                    .map_err(app_error)?;
                Ok(m::Done { ok: true })
            })
            .await
        }
        m::SessionCreate::NAME => {
            let (raw, given) = split_client_env(raw)?;
            serve::<m::SessionCreate, _, _>(raw, |p| async move {
                let session = sessions.create_for(p, given).await.map_err(app_error)?;
                Ok(m::Created {
                    session_id: session.id.clone(),
                    session,
                })
            })
            .await
        }
        m::SessionPrompt::NAME => {
            serve::<m::SessionPrompt, _, _>(raw, |p| async move {
                let queued = sessions
                    .prompt(&p.session_id, p.text)
                    .await
                    .map_err(app_error)?;
                Ok(PromptResult { queued })
            })
            .await
        }
        m::SessionCancel::NAME => {
            serve::<m::SessionCancel, _, _>(raw, |p| async move {
                sessions.cancel(&p.session_id).await.map_err(app_error)?;
                Ok(m::Done { ok: true })
            })
            .await
        }
        m::SessionStop::NAME => {
            serve::<m::SessionStop, _, _>(raw, |p| async move {
                let session = sessions.stop(&p.session_id).await.map_err(app_error)?;
                Ok(m::SessionReply { session })
            })
            .await
        }
        m::SessionDelete::NAME => {
            serve::<m::SessionDelete, _, _>(raw, |p| async move {
                sessions
                    .delete(&p.session_id, &p.options)
                    .await
                    .map_err(app_error)
            })
            .await
        }
        m::SessionPrune::NAME => {
            serve::<m::SessionPrune, _, _>(raw, |p| async move {
                sessions.prune(&p).await.map_err(app_error)
            })
            .await
        }
        m::SessionExec::NAME => {
            serve::<m::SessionExec, _, _>(raw, |p| async move {
                sessions.exec(p).await.map_err(app_error)
            })
            .await
        }
        m::SessionAudit::NAME => {
            serve::<m::SessionAudit, _, _>(raw, |p| async move {
                sessions.audit_log(&p.session_id).map_err(app_error)
            })
            .await
        }
        m::SessionSecurity::NAME => {
            serve::<m::SessionSecurity, _, _>(raw, |p| async move {
                sessions.security(&p.session_id).map_err(app_error)
            })
            .await
        }
        m::SessionRule::NAME => {
            serve::<m::SessionRule, _, _>(raw, |p| async move {
                sessions
                    .set_rule(&p.session_id, &p.rule, p.enabled)
                    .await
                    .map_err(app_error)
            })
            .await
        }
        m::SessionRefine::NAME => {
            serve::<m::SessionRefine, _, _>(raw, |p| async move {
                let session = sessions
                    .refine(&p.session_id, p.allow_read, p.prompt)
                    .await
                    .map_err(app_error)?;
                Ok(m::SessionReply { session })
            })
            .await
        }
        m::SessionReset::NAME => {
            serve::<m::SessionReset, _, _>(raw, |p| async move {
                let session = sessions
                    .reset(&p.session_id, p.keep_disabled)
                    .await
                    .map_err(app_error)?;
                Ok(m::Created {
                    session_id: session.id.clone(),
                    session,
                })
            })
            .await
        }
        m::SessionRestart::NAME => {
            serve::<m::SessionRestart, _, _>(raw, |p| async move {
                let session = sessions.restart(&p.session_id).await.map_err(app_error)?;
                Ok(m::SessionReply { session })
            })
            .await
        }
        m::SessionResolve::NAME => {
            serve::<m::SessionResolve, _, _>(raw, |p| async move {
                sessions.resolve(p).await.map_err(app_error)
            })
            .await
        }
        m::SessionClose::NAME => {
            serve::<m::SessionClose, _, _>(raw, |p| async move {
                let session = sessions.close(&p.session_id).await.map_err(app_error)?;
                Ok(m::SessionReply { session })
            })
            .await
        }
        m::CronList::NAME => {
            serve::<m::CronList, _, _>(raw, |_| async move {
                Ok(CronJobs {
                    jobs: sessions.cron_jobs(),
                    settings_error: shared.settings.error(),
                })
            })
            .await
        }
        m::CronRunNow::NAME => {
            serve::<m::CronRunNow, _, _>(raw, |p| async move {
                sessions.run_cron_now(&p.id).await.map_err(app_error)
            })
            .await
        }
        m::SessionRename::NAME => {
            serve::<m::SessionRename, _, _>(raw, |p| async move {
                let session = sessions
                    .rename(&p.session_id, &p.name)
                    .await
                    .map_err(app_error)?;
                Ok(m::SessionReply { session })
            })
            .await
        }
        m::SessionFork::NAME => {
            serve::<m::SessionFork, _, _>(raw, |p| async move {
                let session = sessions.fork(p).await.map_err(app_error)?;
                Ok(m::Created {
                    session_id: session.id.clone(),
                    session,
                })
            })
            .await
        }
        m::SessionDiff::NAME => {
            serve::<m::SessionDiff, _, _>(raw, |p| async move {
                sessions
                    .diff(&p.session_id, p.context)
                    .await
                    .map_err(app_error)
            })
            .await
        }
        m::SessionCommit::NAME => {
            serve::<m::SessionCommit, _, _>(raw, |p| async move {
                sessions
                    .commit(&p.session_id, p.message)
                    .await
                    .map_err(app_error)
            })
            .await
        }
        m::SessionMerge::NAME => {
            serve::<m::SessionMerge, _, _>(raw, |p| async move {
                sessions.merge(p).await.map_err(app_error)
            })
            .await
        }
        m::SessionPr::NAME => {
            serve::<m::SessionPr, _, _>(
                raw,
                |p| async move { sessions.pr(p).await.map_err(app_error) },
            )
            .await
        }
        m::SessionConflicts::NAME => {
            serve::<m::SessionConflicts, _, _>(raw, |_| async move { Ok(sessions.conflicts()) })
                .await
        }
        m::RulesList::NAME => {
            serve::<m::RulesList, _, _>(raw, |p| async move {
                sessions.rules(p.session_id.as_deref()).map_err(app_error)
            })
            .await
        }
        m::SecretGet::NAME => {
            serve::<m::SecretGet, _, _>(raw, |p| async move {
                let value = sessions
                    .secret(&p.session_id, &p.name)
                    .await
                    .map_err(app_error)?;
                Ok(SecretReply {
                    name: p.name,
                    value,
                })
            })
            .await
        }
        m::SessionTranscript::NAME => {
            serve::<m::SessionTranscript, _, _>(raw, |p| async move {
                Ok(m::Entries {
                    entries: wb.transcript(&p).await.map_err(app_error)?,
                })
            })
            .await
        }
        m::InboxSend::NAME => {
            let mut raw = raw;
            // A handle's messages are its own session's; it may leave the id out.
            if let (Some(scope), Some(map)) = (scope, raw.as_object_mut()) {
                map.entry("session_id")
                    .or_insert_with(|| Value::String(scope.session_id.clone()));
            }
            serve::<m::InboxSend, _, _>(raw, |p| async move {
                own(scope, &p.session_id)?;
                // An approval an agent asks for itself (`cru approve`) is judged by the
                // rules first: one that allows or denies it answers it at once.
                let ruled = if p.msg_type == MsgType::ApprovalRequired {
                    sessions.judge_approval(&p.session_id, &p.title).await
                } else {
                    None
                };
                let mut message = wb.send(p).await.map_err(app_error)?;
                if let Some(allowed) = ruled {
                    let answer = if allowed { "approve" } else { "deny" };
                    message = wb.respond(&message.id, answer).await.map_err(app_error)?;
                }
                Ok(m::Sent {
                    id: message.id.clone(),
                    message,
                })
            })
            .await
        }
        m::InboxList::NAME => {
            serve::<m::InboxList, _, _>(raw, |p| async move {
                Ok(m::Messages {
                    messages: wb.list_messages(&p).await.map_err(app_error)?,
                })
            })
            .await
        }
        m::InboxGet::NAME => {
            serve::<m::InboxGet, _, _>(raw, |p| async move {
                Ok(m::MessageReply {
                    message: visible(conn, scope, &p.id).await?,
                })
            })
            .await
        }
        m::InboxMarkRead::NAME => {
            serve::<m::InboxMarkRead, _, _>(raw, |p| async move {
                Ok(m::Updated {
                    updated: wb.mark_read(&p.ids).await.map_err(app_error)?,
                })
            })
            .await
        }
        m::InboxRespond::NAME => {
            serve::<m::InboxRespond, _, _>(raw, |p| async move {
                Ok(m::MessageReply {
                    message: wb.respond(&p.id, &p.response).await.map_err(app_error)?,
                })
            })
            .await
        }
        m::InboxWait::NAME => {
            serve::<m::InboxWait, _, _>(raw, |p| async move {
                visible(conn, scope, &p.id).await?;
                let timeout = p.timeout_secs.map(Duration::from_secs);
                Ok(m::MessageReply {
                    message: wb
                        .wait_for_answer(&p.id, timeout)
                        .await
                        .map_err(app_error)?,
                })
            })
            .await
        }
        m::InboxClear::NAME => {
            serve::<m::InboxClear, _, _>(raw, |_| async move {
                Ok(m::Deleted {
                    deleted: wb.clear().await.map_err(app_error)?.len(),
                })
            })
            .await
        }
        m::DbQuery::NAME => {
            serve::<m::DbQuery, _, _>(raw, |p| async move {
                let bindings = Value::Object(p.bindings.unwrap_or_default());
                Ok(m::QueryResult {
                    result: wb.query(&p.sql, bindings).await.map_err(app_error)?,
                })
            })
            .await
        }
        m::DbCheck::NAME => {
            serve::<m::DbCheck, _, _>(raw, |_| async move {
                wb.store().check().await.map_err(|e| app_error(e.into()))
            })
            .await
        }
        m::Subscribe::NAME => {
            serve::<m::Subscribe, _, _>(raw, |p| async move {
                subscribe(conn, p.topics).await;
                Ok(m::Subscribed { subscribed: true })
            })
            .await
        }
        m::Unsubscribe::NAME => {
            serve::<m::Unsubscribe, _, _>(raw, |_| async move {
                if let Some(task) = conn.subscription.lock().await.take() {
                    task.abort();
                }
                Ok(m::Subscribed { subscribed: false })
            })
            .await
        }
        m::DaemonStatusOf::NAME => {
            serve::<m::DaemonStatusOf, _, _>(raw, |_| async move {
                let store = wb.store();
                // A server that is away must not hide the rest of the status.
                let unread = match wb.unread_count().await {
                    Ok(n) => n,
                    // Damage is reported below, not in place of the status.
                    Err(_) if store.is_shared() || !store.damage().is_empty() => 0,
                    Err(e) => return Err(app_error(e)),
                };
                let shared_store = store.is_shared();
                let mut instance = wb.instance().clone();
                instance.lease_until.clear();
                Ok(DaemonStatus {
                    store_kind: store.kind().into(),
                    store: Some(StoreHealth {
                        damaged: store.damage(),
                        ..store
                            .health()
                            .map(|h| h.borrow().clone())
                            .unwrap_or(StoreHealth {
                                connected: true,
                                error: None,
                                damaged: Vec::new(),
                            })
                    }),
                    instance: Some(instance),
                    daemons: if shared_store {
                        wb.daemons().await
                    } else {
                        Vec::new()
                    },
                    pid: std::process::id(),
                    daemon_version: env!("CARGO_PKG_VERSION").into(),
                    protocol_version: PROTOCOL_VERSION,
                    kiln: wb.kiln().root().display().to_string(),
                    database: wb.store().url().to_string(),
                    uptime_secs: shared.started.elapsed().as_secs(),
                    clients: *shared.clients.borrow(),
                    sessions: wb.session_count(),
                    agents: *sessions.running().borrow(),
                    unread,
                    settings_error: shared.settings.error(),
                    settings_pending: shared.settings.pending(),
                })
            })
            .await
        }
        m::DaemonShutdown::NAME => {
            serve::<m::DaemonShutdown, _, _>(raw, |_| async move {
                shared.shutdown.notify_one();
                Ok(m::Stopping { stopping: true })
            })
            .await
        }
        m::ContextGet::NAME => {
            context::<m::ContextGet>(conn, raw, |p| (p.session_id, ContextCall::Get)).await
        }
        m::ContextPop::NAME => {
            context::<m::ContextPop>(conn, raw, |p| (p.session_id, apply(ContextOp::Pop(p.n))))
                .await
        }
        m::ContextCheckpoint::NAME => {
            context::<m::ContextCheckpoint>(conn, raw, |p| {
                (p.session_id, apply(ContextOp::Checkpoint(p.name)))
            })
            .await
        }
        m::ContextRollback::NAME => {
            context::<m::ContextRollback>(conn, raw, |p| {
                (p.session_id, apply(ContextOp::Rollback(p.name)))
            })
            .await
        }
        m::ContextReplaceTop::NAME => {
            context::<m::ContextReplaceTop>(conn, raw, |p| {
                (p.session_id, apply(ContextOp::ReplaceTop(p.summary)))
            })
            .await
        }
        m::ContextReset::NAME => {
            context::<m::ContextReset>(conn, raw, |p| (p.session_id, apply(ContextOp::Reset))).await
        }
        m::ContextSummarize::NAME => {
            context::<m::ContextSummarize>(conn, raw, |p| {
                (p.session_id, apply(ContextOp::Summarize(p.summary)))
            })
            .await
        }
        other => Err(ErrorObject::method_not_found(other)),
    }
}

fn apply(op: ContextOp) -> ContextCall {
    ContextCall::Apply(op)
}

/// A `context.*` method: its params say which session and which operation.
async fn context<M>(
    conn: &Conn,
    raw: Value,
    request: impl FnOnce(M::Params) -> (String, ContextCall),
) -> Result<Value, ErrorObject>
where
    M: Method<Result = ContextResult>,
{
    serve::<M, _, _>(raw, |p| async move {
        let (session_id, request) = request(p);
        conn.shared
            .sessions
            .context_call(&session_id, request)
            .await
            .map_err(app_error)
    })
    .await
}
