//! Starting a session's agent afresh: `/reset` (a new session for the same worktree,
//! agent and driver, with an empty security state) and a refinement (the read manifest
//! widened after a context miss stopped the session, and its agent started again), and
//! the question a context miss asks.

use std::sync::Arc;

use super::{Lifecycle, LifecycleError, Result};
use crate::ledger::Ledger;

impl Lifecycle {
    /// `/reset`: a new session for the same worktree, agent profile and
    /// driver, with a fresh agent and an empty security state (the disabled rules kept
    /// if asked); the old one is stopped with reason `reset`, its transcript and audit
    /// log kept.
    pub async fn reset(
        self: &Arc<Self>,
        id: &str,
        keep_disabled: bool,
    ) -> Result<crate::protocol::Session> {
        let old = self.managed(id)?;
        self.runner.stop_actor(id, false).await;
        let mut ended = self.managed(id)?;
        ended.state = Some(crate::protocol::SessionState::Stopped);
        ended.state_reason = Some("reset".into());
        ended.updated_at = Some(crate::ledger::now_rfc3339());
        self.ledger.save_managed(&ended).await?;
        crate::audit::Audit::new(self.ledger.kiln()).record(
            id,
            crate::audit::AuditEvent::State {
                state: "stopped".into(),
                reason: Some("reset".into()),
            },
        );
        let params = crate::protocol::CreateSessionParams {
            kiln: None,
            agent: old.agent_name.clone(),
            worktree: old.worktree.clone(),
            in_place: old.worktree.is_none(),
            task: None,
            driver: old.driver.clone().unwrap_or_default().options(),
            allow_read: old.security.read_manifest.clone().unwrap_or_default(),
            // A channel's conversation goes on in the fresh session.
            channel: old.channel.clone().map(|mut tag| {
                tag.reason = crate::protocol::Resolution::ExplicitReset;
                tag.closed = false;
                tag
            }),
        };
        // The asking process's environment, if this daemon still holds it, goes on too.
        let given = self.runner.given(id).map(|g| (*g).clone());
        let created = self.create_for(params, given).await?;
        if keep_disabled {
            for rule in &old.security.disabled {
                self.guard.set_rule(&created.id, rule, false).await?;
            }
        }
        Ok(self.ledger.get_session(&created.id)?)
    }

    /// A refinement: widens the read manifest of a session a context miss
    /// stopped and starts its agent again (its own session reloaded where it can), with
    /// `prompt` first. At most [`MAX_REFINEMENT_ATTEMPTS`] per work item.
    pub async fn refine(
        self: &Arc<Self>,
        id: &str,
        globs: Vec<String>,
        prompt: Option<String>,
    ) -> Result<crate::protocol::Session> {
        use crate::protocol::{MAX_REFINEMENT_ATTEMPTS, SessionState};
        if globs.iter().all(|g| g.trim().is_empty()) {
            return Err(LifecycleError::NoGlobs);
        }
        let _one_at_a_time = self.runner.one_start_at_a_time().await;
        let session = self.managed(id)?;
        if self.runner.actor(id).is_some() {
            return Err(LifecycleError::RefineRunning { id: id.into() });
        }
        if session.security.refinements >= MAX_REFINEMENT_ATTEMPTS {
            return Err(LifecycleError::RefinedEnough {
                id: id.into(),
                most: MAX_REFINEMENT_ATTEMPTS,
            });
        }
        let mut next = session.clone();
        let manifest = next.security.read_manifest.get_or_insert_with(Vec::new);
        for glob in &globs {
            if !manifest.contains(glob) {
                manifest.push(glob.clone());
            }
        }
        next.security.refinements += 1;
        next.state = Some(SessionState::Parked);
        next.state_reason = Some(format!(
            "refinement {}/{MAX_REFINEMENT_ATTEMPTS}: the read manifest now also allows {}",
            next.security.refinements,
            globs.join(", ")
        ));
        let next = self.ledger.save_managed(&next).await?;
        let prompt = prompt.unwrap_or_else(|| {
            format!(
                "The read manifest now also allows: {}. Continue the task.",
                globs.join(", ")
            )
        });
        self.runner.unpark(next, prompt).await?;
        Ok(self.ledger.get_session(id)?)
    }
}

/// After a context miss stopped the session: the question whether to widen.
#[tracing::instrument(name = "session", skip_all, fields(session = %session.id))]
pub(in crate::sessions) async fn ask_to_refine(
    ledger: &Ledger,
    session: &crate::protocol::Session,
) {
    let Some(reason) = session.state_reason.as_deref() else {
        return;
    };
    let Some(path) = reason
        .strip_prefix("CONTEXT_MISS: ")
        .and_then(|r| r.split(" is outside").next())
    else {
        return;
    };
    let params = crate::protocol::SendParams {
        session_id: session.id.clone(),
        msg_type: crate::protocol::MsgType::DecisionNeeded,
        title: format!("Context miss: widen the read manifest? ({path})"),
        body: Some(format!(
            "{reason}\npath: {path}\n\nWidening allows this path and restarts the agent (a \
             refinement: {} of {} used). Or leave the session stopped.",
            session.security.refinements,
            crate::protocol::MAX_REFINEMENT_ATTEMPTS
        )),
        options: Some(vec![
            crate::sessions::wording::WIDEN.into(),
            crate::sessions::wording::LEAVE_STOPPED.into(),
        ]),
        option_kinds: None,
        flagged: None,
    };
    let purpose = crate::protocol::Purpose::ContextMiss {
        path: path.to_string(),
    };
    if let Err(e) = ledger.send_for(params, purpose).await {
        tracing::error!("cannot ask about the context miss: {e}");
    }
}
