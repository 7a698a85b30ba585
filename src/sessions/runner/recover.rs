//! Agents a previous daemon left behind: after a restart, sessions whose agent was
//! running are resumed through ACP `session/load` where the agent supports it, and
//! otherwise marked stopped with an `error` message; in team mode, the sessions of a
//! daemon that went away are taken over. Never silently replaced.

use std::sync::{Arc, Weak};

use tokio::sync::mpsc;

use super::{Resume, Runner};
use crate::config::Config;
use crate::ledger::{Takeover, now_rfc3339};
use crate::protocol::env::SESSION as SESSION_ENV;
use crate::protocol::{Session, SessionState};
use crate::sessions::transcript::TranscriptWriter;
use crate::sessions::wording;

impl Runner {
    /// Sessions whose agent was running when the previous daemon ended: resume them with
    /// `session/load` when the agent can, otherwise say they were lost.
    pub(in crate::sessions) async fn recover(self: &Arc<Self>) {
        let config = match Config::load(&self.ledger.kiln().settings_path()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("settings unreadable while recovering sessions: {e}");
                self.ledger.config().clone()
            }
        };
        for session in self.ledger.list_sessions() {
            // Team mode: another daemon's sessions are its to recover.
            if self.ledger.is_foreign(&session) {
                continue;
            }
            let Some(state) = session.state else { continue };
            if state == SessionState::Creating {
                self.mark_lost(session, wording::LOST_WHILE_CREATED.into())
                    .await;
                continue;
            }
            if state == SessionState::Queued {
                self.queue_again(&config, session).await;
                continue;
            }
            let Some(pid) = session.agent_pid else {
                continue;
            };
            if crate::sys::process_has_env(pid, SESSION_ENV, &session.id) {
                tracing::info!(session = %session.id, pid, "ending an agent left by the previous daemon");
                crate::sys::signal_group(pid, libc::SIGKILL);
            }
            self.resume(&config, session, state).await;
        }
    }

    /// A session the previous daemon held back for memory waits again (or starts, when
    /// the memory is there): its prompts were kept with it.
    async fn queue_again(self: &Arc<Self>, config: &Config, session: Session) {
        let Ok(profile) = config.profile(&session.agent_name) else {
            self.mark_lost(session, wording::LOST_PROFILE_GONE.into())
                .await;
            return;
        };
        let resume = session.acp_session_id.clone().map(|acp_session_id| Resume {
            acp_session_id: Some(acp_session_id),
            previous: SessionState::Parked,
            carried: Vec::new(),
        });
        let (id, name) = (session.id.clone(), session.agent_name.clone());
        if let Err(why) = self.admit(session, &name, profile, resume, None).await {
            self.queued_start_failed(&id, &why).await;
        }
    }

    /// Starts the agent of a session the previous daemon ran again, loading its own
    /// session, or says it was lost when that cannot be.
    async fn resume(self: &Arc<Self>, config: &Config, session: Session, state: SessionState) {
        let profile = config.profile(&session.agent_name).ok();
        let (Some(profile), Some(acp_session_id)) = (profile, session.acp_session_id.clone())
        else {
            let why = if config.profile(&session.agent_name).is_ok() {
                wording::LOST_NEVER_OPENED
            } else {
                wording::LOST_PROFILE_GONE
            };
            self.mark_lost(session, why.into()).await;
            return;
        };
        let name = session.agent_name.clone();
        let resume = Resume {
            acp_session_id: Some(acp_session_id),
            previous: state,
            carried: Vec::new(),
        };
        let mut starting = session.clone();
        starting.state = Some(SessionState::Starting);
        starting.state_reason = Some(wording::RESUMING.into());
        starting.agent_pid = None;
        let starting = match self.ledger.save_managed(&starting).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(session = %session.id, "cannot record the resume: {e}");
                return;
            }
        };
        if let Err(e) = self.ledger.revoke_handles(&session.id).await {
            tracing::warn!(session = %session.id, "cannot revoke old handles: {e}");
        }
        if let Err(why) = self
            .spawn(starting.clone(), &name, profile, Some(resume), None)
            .await
        {
            self.mark_lost(starting, why.to_string()).await;
        }
    }

    /// Marks a session stopped because its agent is gone, and says so in the inbox.
    async fn mark_lost(&self, session: Session, why: String) {
        let (reason, report) = wording::lost(&why);
        self.mark_lost_as(session, reason, report).await;
    }

    /// Team mode: sessions taken over from a daemon whose lease ran out. Their agents ran
    /// there and are lost with it; an agent left running on this host is ended first.
    async fn adopt(&self, takeover: Takeover) {
        let from = &takeover.from;
        let same_host = from.host == self.ledger.instance().host;
        for session in takeover.sessions {
            if !session.is_managed() {
                if session.ended_at.is_none() {
                    let reason = format!("its daemon on {} ({}) went away", from.host, from.kiln);
                    if let Err(e) = self.ledger.deregister(&session.id, &reason, None).await {
                        tracing::warn!(session = %session.id, "cannot end a session of a daemon that went away: {e}");
                    }
                }
                continue;
            }
            let running =
                session.state == Some(SessionState::Creating) || session.agent_pid.is_some();
            if !running {
                continue;
            }
            if same_host
                && let Some(pid) = session.agent_pid
                && crate::sys::process_has_env(pid, SESSION_ENV, &session.id)
            {
                tracing::info!(session = %session.id, pid, "ending an agent left by a daemon that went away");
                crate::sys::signal_group(pid, libc::SIGKILL);
            }
            let (reason, report) = wording::lost_with_daemon(&from.host, &from.kiln);
            self.mark_lost_as(session, reason, report).await;
        }
    }

    #[tracing::instrument(name = "session", skip_all, fields(session = %session.id))]
    async fn mark_lost_as(&self, mut session: Session, reason: String, report: wording::Notice) {
        session.state = Some(SessionState::Stopped);
        session.state_reason = Some(reason.clone());
        session.agent_pid = None;
        session.updated_at = Some(now_rfc3339());
        if let Err(e) = self.ledger.revoke_handles(&session.id).await {
            tracing::warn!("cannot revoke handles: {e}");
        }
        if let Err(e) = self.ledger.save_managed(&session).await {
            tracing::error!("cannot record a lost agent: {e}");
            return;
        }
        let mut actor_log = TranscriptWriter::open(&self.ledger, &session).await;
        actor_log
            .state(&self.ledger, SessionState::Stopped, Some(&reason))
            .await;
        if let Err(e) = self.ledger.send(report.into_params(&session.id)).await {
            tracing::error!("cannot report a lost agent: {e}");
        }
    }
}

/// Hands every takeover to the runner, one at a time.
pub(in crate::sessions) async fn take_over(
    runner: Weak<Runner>,
    mut takeovers: mpsc::UnboundedReceiver<Takeover>,
) {
    while let Some(takeover) = takeovers.recv().await {
        let Some(runner) = runner.upgrade() else {
            return;
        };
        runner.adopt(takeover).await;
    }
}
