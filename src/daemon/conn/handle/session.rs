//! Sessions: registering, creating, prompting, stopping, deleting and reshaping them.

use super::*;

pub(super) async fn register(
    call: &Call<'_>,
    p: RegisterParams,
) -> Result<Registered, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    let (session, handle, evicted) = ledger.register(p).await.map_err(app_error)?;
    Ok(m::Registered {
        session_id: session.id.clone(),
        session,
        handle: handle.expose().to_string(),
        evicted,
    })
}

pub(super) async fn list(
    call: &Call<'_>,
    p: SessionListParams,
) -> Result<ListedSessions, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    let mut sessions = ledger.list_sessions();
    if let Some(channel) = &p.channel {
        sessions.retain(|s| match &s.channel {
            Some(tag) => &tag.kind == channel,
            None => channel == "interactive",
        });
    }
    if p.resources {
        let table = crate::proc_tree::ProcTable::read();
        // Only this daemon's: another's agent pid is of another host.
        for s in sessions.iter_mut().filter(|s| !ledger.is_foreign(s)) {
            s.resources = s.agent_pid.and_then(|pid| table.tree(pid));
        }
    }
    Ok(m::ListedSessions { sessions })
}

pub(super) async fn get(call: &Call<'_>, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    let scope = call.scope;
    call.own(&p.session_id)?;
    let session = match scope {
        Some(_) => ledger.get_session(&p.session_id),
        None => ledger.session_or_record(&p.session_id),
    };
    Ok(m::SessionReply {
        session: session.map_err(app_error)?,
    })
}

pub(super) async fn heartbeat(call: &Call<'_>, p: SessionIdParams) -> Result<Done, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    call.own(&p.session_id)?;
    ledger.heartbeat(&p.session_id).map_err(app_error)?;
    Ok(m::Done { ok: true })
}

pub(super) async fn deregister(call: &Call<'_>, p: DeregisterParams) -> Result<Done, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    let reason = p.reason.as_deref().unwrap_or("deregistered");
    ledger
        .deregister(&p.session_id, reason, p.exit_code)
        .await
        .map_err(app_error)?;
    Ok(m::Done { ok: true })
}

pub(super) async fn create(
    call: &Call<'_>,
    p: CreateSessionParams,
) -> Result<Created, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let given = call.take_client_env();
    let session = sessions.create_for(p, given).await.map_err(app_error)?;
    Ok(m::Created {
        session_id: session.id.clone(),
        session,
    })
}

pub(super) async fn prompt(call: &Call<'_>, p: PromptParams) -> Result<PromptResult, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let queued = sessions
        .prompt(&p.session_id, p.text)
        .await
        .map_err(app_error)?;
    Ok(PromptResult { queued })
}

pub(super) async fn resend(
    call: &Call<'_>,
    p: SessionIdParams,
) -> Result<PromptResult, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let queued = sessions.resend(&p.session_id).await.map_err(app_error)?;
    Ok(PromptResult { queued })
}

pub(super) async fn cancel(call: &Call<'_>, p: SessionIdParams) -> Result<Done, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.cancel(&p.session_id).await.map_err(app_error)?;
    Ok(m::Done { ok: true })
}

pub(super) async fn stop(call: &Call<'_>, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions.stop(&p.session_id).await.map_err(app_error)?;
    Ok(m::SessionReply { session })
}

pub(super) async fn delete(
    call: &Call<'_>,
    p: DeleteSessionParams,
) -> Result<DeleteOutcome, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions
        .delete(&p.session_id, &p.options)
        .await
        .map_err(app_error)
}

pub(super) async fn prune(call: &Call<'_>, p: RemoveOptions) -> Result<PruneResult, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.prune(&p).await.map_err(app_error)
}

pub(super) async fn exec(call: &Call<'_>, p: ExecParams) -> Result<ExecResult, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.exec(p).await.map_err(app_error)
}

pub(super) async fn audit(call: &Call<'_>, p: SessionIdParams) -> Result<AuditLog, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.audit_log(&p.session_id).map_err(app_error)
}

pub(super) async fn refine(call: &Call<'_>, p: RefineParams) -> Result<SessionReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions
        .refine(&p.session_id, p.allow_read, p.prompt)
        .await
        .map_err(app_error)?;
    Ok(m::SessionReply { session })
}

pub(super) async fn reset(call: &Call<'_>, p: ResetParams) -> Result<Created, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions
        .reset(&p.session_id, p.keep_disabled)
        .await
        .map_err(app_error)?;
    Ok(m::Created {
        session_id: session.id.clone(),
        session,
    })
}

pub(super) async fn restart(
    call: &Call<'_>,
    p: SessionIdParams,
) -> Result<SessionReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions.restart(&p.session_id).await.map_err(app_error)?;
    Ok(m::SessionReply { session })
}

pub(super) async fn resolve(
    call: &Call<'_>,
    p: ResolveParams,
) -> Result<ResolveResult, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.resolve(p).await.map_err(app_error)
}

pub(super) async fn close(
    call: &Call<'_>,
    p: SessionIdParams,
) -> Result<SessionReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions.close(&p.session_id).await.map_err(app_error)?;
    Ok(m::SessionReply { session })
}

pub(super) async fn rename(call: &Call<'_>, p: RenameParams) -> Result<SessionReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions
        .rename(&p.session_id, &p.name)
        .await
        .map_err(app_error)?;
    Ok(m::SessionReply { session })
}

pub(super) async fn fork(call: &Call<'_>, p: ForkParams) -> Result<Created, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions.fork(p).await.map_err(app_error)?;
    Ok(m::Created {
        session_id: session.id.clone(),
        session,
    })
}

pub(super) async fn handoff(call: &Call<'_>, p: HandoffParams) -> Result<Created, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let session = sessions.handoff(p).await.map_err(app_error)?;
    Ok(m::Created {
        session_id: session.id.clone(),
        session,
    })
}

pub(super) async fn search(call: &Call<'_>, p: SearchParams) -> Result<SearchResults, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    ledger.search(&p).await.map_err(app_error)
}

pub(super) async fn transcript(
    call: &Call<'_>,
    p: TranscriptParams,
) -> Result<Entries, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    Ok(m::Entries {
        entries: ledger.transcript(&p).await.map_err(app_error)?,
    })
}
