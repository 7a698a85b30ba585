//! A session's security state from outside its actor: the rules and how each stands in
//! the session (`rules.list`), switching a rule off or on for it (`session.rule`), and
//! the credentials an agent asks for (`secret.get`), whose values come from the daemon's
//! environment or a configured command and are never stored or logged.

use tokio::sync::oneshot;

use super::command::Command;
use super::{Result, Sessions};
use crate::ledger::{Ledger, LedgerError};
use crate::protocol::{RuleInfo, RulesFileError, RulesReply, SecurityReply, SecurityState};

impl Sessions {
    pub fn security(&self, id: &str) -> Result<SecurityReply> {
        let session = self.ledger.get_session(id)?;
        Ok(SecurityReply {
            session_id: session.id,
            security: session.security,
        })
    }

    /// The rules in force (the last good set when the files are bad, with the fault;
    /// none when no good set was read yet).
    pub fn rules(&self, session_id: Option<&str>) -> Result<RulesReply> {
        let security = match session_id {
            Some(id) => self.ledger.get_session(id)?.security,
            None => SecurityState::default(),
        };
        let in_force = self.rules.in_force();
        let last_good = in_force.rules.is_some();
        let rules = in_force
            .rules
            .iter()
            .flat_map(|set| {
                set.rules.iter().map(|r| RuleInfo {
                    id: r.id.clone(),
                    description: r.description.clone(),
                    action: format!("{:?}", r.action).to_lowercase(),
                    builtin: r.builtin,
                    needs_activation: r.gated_by_activation(),
                    off: set.off.contains(&r.id),
                    disabled: security.disabled.contains(&r.id),
                    activated: security.activated.get(&r.id).cloned(),
                })
            })
            .collect();
        let error = in_force.fault.map(|fault| RulesFileError {
            file: fault.file.display().to_string(),
            reason: fault.reason,
            last_good,
        });
        let problem = error.as_ref().map(|e| {
            let instead = if e.last_good {
                "the last good rules apply"
            } else {
                "no good rules were read since the daemon started, so every operation the \
                 rules judge is refused"
            };
            format!("rules not in force: {}: {}; {instead}", e.file, e.reason)
        });
        Ok(RulesReply {
            rules,
            problem,
            error,
        })
    }

    /// Switches `rule` off (or on again) for the session.
    pub async fn set_rule(&self, id: &str, rule: &str, enabled: bool) -> Result<SecurityReply> {
        let mut session = self.managed(id)?;
        let in_force = self.rules.in_force();
        let Some(known) = in_force.rules else {
            let why = in_force.fault.map(|f| f.to_string()).unwrap_or_default();
            return Err(LedgerError::Invalid(format!(
                "no rules are in force ({why}); fix the file first"
            )));
        };
        if known.get(rule).is_none() {
            let ids: Vec<&str> = known.rules.iter().map(|r| r.id.as_str()).collect();
            return Err(LedgerError::Invalid(format!(
                "no rule {rule:?}; the rules are: {}",
                ids.join(", ")
            )));
        }
        if let Some(actor) = self.runner.actor(id) {
            let (ack, done) = oneshot::channel();
            let rule = rule.to_string();
            if actor.send(Command::SetRule { rule, enabled, ack }).is_ok()
                && let Ok(security) = done.await
            {
                return Ok(SecurityReply {
                    session_id: id.to_string(),
                    security,
                });
            }
            session = self.managed(id)?;
        }
        session.security.disabled.retain(|d| d != rule);
        if !enabled {
            session.security.disabled.push(rule.to_string());
        }
        let saved = self.ledger.save_managed(&session).await?;
        Ok(SecurityReply {
            session_id: saved.id,
            security: saved.security,
        })
    }

    /// `/reset`: a new session for the same worktree, agent profile and
    /// driver, with a fresh agent and an empty security state (the disabled rules kept
    /// if asked); the old one is stopped with reason `reset`, its transcript and audit
    /// log kept.
    pub async fn reset(
        self: &std::sync::Arc<Self>,
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
                self.set_rule(&created.id, rule, false).await?;
            }
        }
        self.ledger.get_session(&created.id)
    }

    /// The rules' word on an approval the session's agent asks for itself: `Some(true)`
    /// when a rule allows it (or it was approved before), `Some(false)` when one denies
    /// it, `None` when the human decides.
    pub async fn judge_approval(&self, id: &str, title: &str) -> Option<bool> {
        let actor = self.runner.actor(id)?;
        let (ack, done) = oneshot::channel();
        actor
            .send(Command::JudgeApproval {
                title: title.to_string(),
                ack,
            })
            .ok()?;
        done.await.ok().flatten()
    }

    /// A refinement: widens the read manifest of a session a context miss
    /// stopped and starts its agent again (its own session reloaded where it can), with
    /// `prompt` first. At most [`MAX_REFINEMENT_ATTEMPTS`] per work item.
    pub async fn refine(
        self: &std::sync::Arc<Self>,
        id: &str,
        globs: Vec<String>,
        prompt: Option<String>,
    ) -> Result<crate::protocol::Session> {
        use crate::protocol::{MAX_REFINEMENT_ATTEMPTS, SessionState};
        if globs.iter().all(|g| g.trim().is_empty()) {
            return Err(LedgerError::Invalid("give the globs to allow".into()));
        }
        let _one_at_a_time = self.runner.one_start_at_a_time().await;
        let session = self.managed(id)?;
        if self.runner.actor(id).is_some() {
            return Err(LedgerError::Conflict(format!(
                "session {id} is running; a refinement restarts a session a context miss stopped"
            )));
        }
        if session.security.refinements >= MAX_REFINEMENT_ATTEMPTS {
            return Err(LedgerError::Invalid(format!(
                "session {id} was refined {MAX_REFINEMENT_ATTEMPTS} times, the most for one work item (MAX_REFINEMENT_ATTEMPTS); start a new session with the manifest it needs"
            )));
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
        self.ledger.get_session(id)
    }

    /// A credential for the session's agent: asked of the human the first time in the
    /// session, then given.
    pub async fn secret(&self, id: &str, name: &str) -> Result<String> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if !valid {
            return Err(LedgerError::Invalid(format!(
                "{name:?} is not a credential name"
            )));
        }
        let session = self.managed(id)?;
        let actor = self
            .runner
            .actor(id)
            .ok_or_else(|| super::not_running(&session))?;
        let (ack, done) = oneshot::channel();
        actor
            .send(Command::Secret {
                name: name.to_string(),
                ack,
            })
            .map_err(|_| super::not_running(&session))?;
        done.await
            .map_err(|_| super::not_running(&session))?
            .map_err(|e| LedgerError::Invalid(e.to_string()))
    }
}

/// After a context miss stopped the session: the question whether to widen.
#[tracing::instrument(name = "session", skip_all, fields(session = %session.id))]
pub(super) async fn ask_to_refine(ledger: &Ledger, session: &crate::protocol::Session) {
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
            super::wording::WIDEN.into(),
            super::wording::LEAVE_STOPPED.into(),
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
