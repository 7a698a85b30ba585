//! A session's security state from outside its actor: the rules and how each stands in
//! the session (`rules.list`), switching a rule off or on for it (`session.rule`), and
//! the credentials an agent asks for (`secret.get`), whose values come from the daemon's
//! environment or a configured command and are never stored or logged.

use tokio::sync::oneshot;

use super::{Guard, GuardError, Result};
use crate::protocol::{RuleInfo, RulesFileError, RulesReply, SecurityReply, SecurityState};
use crate::sessions::command::Command;

impl Guard {
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
            return Err(GuardError::NoRules { why });
        };
        if known.get(rule).is_none() {
            let ids: Vec<&str> = known.rules.iter().map(|r| r.id.as_str()).collect();
            return Err(GuardError::NoSuchRule {
                rule: rule.to_string(),
                rules: ids.join(", "),
            });
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

    /// A credential for the session's agent: asked of the human the first time in the
    /// session, then given.
    pub async fn secret(&self, id: &str, name: &str) -> Result<String> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if !valid {
            return Err(GuardError::NotACredentialName {
                name: name.to_string(),
            });
        }
        let session = self.managed(id)?;
        let not_running = || GuardError::NotRunning {
            id: session.id.clone(),
            state: session.state,
        };
        let actor = self.runner.actor(id).ok_or_else(not_running)?;
        let (ack, done) = oneshot::channel();
        actor
            .send(Command::Secret {
                name: name.to_string(),
                ack,
            })
            .map_err(|_| not_running())?;
        Ok(done.await.map_err(|_| not_running())??)
    }
}
