//! Sessions: registering, creating, prompting, stopping, deleting and reshaping them.

use std::future::Future;

use super::*;
use crate::ledger::LedgerError;

impl Answer<m::SessionRegister> for Call<'_> {
    async fn answer(&self, p: RegisterParams) -> Result<Registered, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let (session, handle, evicted) = ledger.register(p).await?;
        Ok(m::Registered {
            session_id: session.id.clone(),
            session,
            handle: handle.expose().to_string(),
            evicted,
        })
    }
}

impl Answer<m::SessionList> for Call<'_> {
    async fn answer(&self, p: SessionListParams) -> Result<ListedSessions, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let mut sessions = ledger.list_sessions();
        if let Some(channel) = &p.channel {
            sessions.retain(|s| match &s.channel {
                Some(tag) => &tag.kind == channel,
                None => channel == "interactive",
            });
        }
        if let Some(limit) = p.limit {
            sessions.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        if p.resources {
            let runner = self.conn.services.sessions.runner();
            let table = crate::proc_tree::ProcTable::read();
            // Only this daemon's: another's agent pid is of another host.
            for s in sessions.iter_mut().filter(|s| !ledger.is_foreign(s)) {
                let environment = runner.environment(&s.id);
                // An ssh or qemu session's agent is read where it runs, never as its ssh
                // client or its QEMU.
                if let Some(environment) = &environment
                    && let Some(measured) = environment.measured().await
                {
                    s.resources = measured;
                    continue;
                }
                let contained = match &environment {
                    Some(environment) => environment.process_root().await,
                    None => None,
                };
                let root = contained.or_else(|| crate::proc_tree::agent_process(s.agent_pid));
                s.resources = root.and_then(|pid| table.tree(pid));
            }
        }
        Ok(m::ListedSessions { sessions })
    }
}

impl Answer<m::SessionGet> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let scope = self.scope;
        self.own(&p.session_id)?;
        let session = match scope {
            Some(_) => ledger.get_session(&p.session_id),
            None => ledger.session_or_record(&p.session_id),
        };
        Ok(m::SessionReply { session: session? })
    }
}

impl Answer<m::SessionHeartbeat> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<Done, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        self.own(&p.session_id)?;
        ledger.heartbeat(&p.session_id)?;
        Ok(m::Done { ok: true })
    }
}

impl Answer<m::SessionDeregister> for Call<'_> {
    async fn answer(&self, p: DeregisterParams) -> Result<Done, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let reason = p.reason.as_deref().unwrap_or("deregistered");
        ledger
            .deregister(&p.session_id, reason, p.exit_code)
            .await?;
        Ok(m::Done { ok: true })
    }
}

impl Call<'_> {
    /// Refuses a call naming a kiln (through the person's hub) that is not this one.
    fn own_kiln(&self, named: Option<&str>) -> Result<(), ErrorObject> {
        let Some(named) = named else {
            return Ok(());
        };
        let services = &self.conn.services;
        let kiln = services.ledger.kiln();
        let ours = crate::kilns::name_of(kiln, services.settings.current().kiln.name.as_deref());
        let path = kiln.root().display().to_string();
        if named != ours && named != path {
            return Err(ErrorObject::invalid_params(format!(
                "this daemon serves kiln {ours} ({path}), not {named:?}"
            )));
        }
        Ok(())
    }
}

impl Answer<m::SessionCreate> for Call<'_> {
    async fn answer(&self, p: CreateSessionParams) -> Result<Created, ErrorObject> {
        self.own_kiln(p.kiln.as_deref())?;
        let services = &self.conn.services;
        let sessions = &services.sessions;
        let given = self.take_client_env();
        let session = sessions.lifecycle().create_for(p, given).await?;
        Ok(m::Created {
            session_id: session.id.clone(),
            session,
        })
    }
}

impl Answer<m::SessionPrompt> for Call<'_> {
    async fn answer(&self, p: PromptParams) -> Result<PromptResult, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let queued = sessions.prompt(&p.session_id, p.text).await?;
        Ok(PromptResult { queued })
    }
}

impl Answer<m::SessionResend> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<PromptResult, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let queued = sessions.lifecycle().resend(&p.session_id).await?;
        Ok(PromptResult { queued })
    }
}

impl Answer<m::SessionCancel> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<Done, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions.cancel(&p.session_id).await?;
        Ok(m::Done { ok: true })
    }
}

impl Answer<m::SessionStop> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions.stop(&p.session_id).await?;
        Ok(m::SessionReply { session })
    }
}

impl Answer<m::SessionDelete> for Call<'_> {
    async fn answer(&self, p: DeleteSessionParams) -> Result<DeleteOutcome, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .lifecycle()
            .delete(&p.session_id, &p.options)
            .await
            .map_err(ErrorObject::from)
    }
}

impl Answer<m::SessionPrune> for Call<'_> {
    async fn answer(&self, p: RemoveOptions) -> Result<PruneResult, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .lifecycle()
            .prune(&p)
            .await
            .map_err(ErrorObject::from)
    }
}

impl Answer<m::SessionExec> for Call<'_> {
    async fn answer(&self, p: ExecParams) -> Result<ExecResult, ErrorObject> {
        Ok(self.conn.services.landing.exec(p).await?)
    }
}

impl Answer<m::SessionAudit> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<AuditLog, ErrorObject> {
        Ok(self.conn.services.landing.audit_log(&p.session_id)?)
    }
}

impl Answer<m::SessionRefine> for Call<'_> {
    async fn answer(&self, p: RefineParams) -> Result<SessionReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions
            .lifecycle()
            .refine(&p.session_id, p.allow_read, p.prompt)
            .await?;
        Ok(m::SessionReply { session })
    }
}

impl Answer<m::SessionReset> for Call<'_> {
    async fn answer(&self, p: ResetParams) -> Result<Created, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions
            .lifecycle()
            .reset(&p.session_id, p.keep_disabled)
            .await?;
        Ok(m::Created {
            session_id: session.id.clone(),
            session,
        })
    }
}

impl Answer<m::SessionRestart> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions.lifecycle().restart(&p.session_id).await?;
        Ok(m::SessionReply { session })
    }
}

impl Answer<m::SessionResolve> for Call<'_> {
    async fn answer(&self, p: ResolveParams) -> Result<ResolveResult, ErrorObject> {
        self.own_kiln(p.kiln.as_deref())?;
        let conversations = &self.conn.services.conversations;
        conversations
            .resolve(p, &Prompter(self))
            .await
            .map_err(ErrorObject::from)
    }
}

/// A channel's follow-up message goes in as `session.prompt` from the same caller, so
/// it is checked and routed (team mode: to the daemon that runs the session) as any
/// prompt is.
struct Prompter<'a, 'b>(&'a Call<'b>);

impl crate::sessions::Deliver for Prompter<'_, '_> {
    fn prompt<'a>(
        &'a self,
        session_id: &'a str,
        text: String,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<bool, LedgerError>> + Send + 'a>> {
        Box::pin(async move {
            let params = serde_json::json!({"session_id": session_id, "text": text});
            let caller = self.0.caller.clone();
            let answer = super::super::dispatch::call_as(
                self.0.conn,
                caller,
                m::SessionPrompt::NAME,
                params,
            )
            .await
            .map_err(LedgerError::from_refusal)?;
            let reply: PromptResult = serde_json::from_value(answer).map_err(|e| {
                LedgerError::Invalid(format!("cannot read the prompt's answer: {e}"))
            })?;
            Ok(reply.queued)
        })
    }
}

impl Answer<m::SessionClose> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SessionReply, ErrorObject> {
        let conversations = &self.conn.services.conversations;
        let session = conversations.close(&p.session_id).await?;
        Ok(m::SessionReply { session })
    }
}

impl Answer<m::SessionRename> for Call<'_> {
    async fn answer(&self, p: RenameParams) -> Result<SessionReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions.lifecycle().rename(&p.session_id, &p.name).await?;
        Ok(m::SessionReply { session })
    }
}

impl Answer<m::SessionFork> for Call<'_> {
    async fn answer(&self, p: ForkParams) -> Result<Created, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions.lifecycle().fork(p).await?;
        Ok(m::Created {
            session_id: session.id.clone(),
            session,
        })
    }
}

impl Answer<m::SessionMove> for Call<'_> {
    async fn answer(&self, p: MoveParams) -> Result<Moved, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .lifecycle()
            .move_to(p)
            .await
            .map_err(ErrorObject::from)
    }
}

impl Answer<m::SessionAdopt> for Call<'_> {
    async fn answer(&self, p: AdoptParams) -> Result<Adopted, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .lifecycle()
            .adopt(p)
            .await
            .map_err(ErrorObject::from)
    }
}

impl Answer<m::SessionHandoff> for Call<'_> {
    async fn answer(&self, p: HandoffParams) -> Result<Created, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let session = sessions.lifecycle().handoff(p).await?;
        Ok(m::Created {
            session_id: session.id.clone(),
            session,
        })
    }
}

impl Answer<m::Search> for Call<'_> {
    async fn answer(&self, p: SearchParams) -> Result<SearchResults, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        ledger.search(&p).await.map_err(ErrorObject::from)
    }
}

impl Answer<m::SessionTranscript> for Call<'_> {
    async fn answer(&self, p: TranscriptParams) -> Result<Entries, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        Ok(m::Entries {
            entries: ledger.transcript(&p).await?,
        })
    }
}
