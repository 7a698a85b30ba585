//! The actor's side of the machine's effects: each carried out with I/O (the store, the
//! inbox, the context stack, the audit log, the rules, the agent and whoever waits on a
//! request for the approval gate), and what I/O found out fed back to the machine.

use super::*;
use crate::protocol::{EntryKind, MsgType, Purpose, SendParams};
use crate::sessions::budget::Scope;
use crate::sessions::machine::Line;
use crate::sessions::machine::{GateReply, review_options};

impl Actor {
    pub(super) async fn perform(&mut self, t: &mut TranscriptWriter, effect: Effect) {
        if self.held && effect.writes() {
            // Moving: the daemon taking the session over may own its records already.
            return;
        }
        let id = self.session.id.clone();
        match effect {
            Effect::Record(change) => self.record(change),
            Effect::SetState { state, reason } => self.set_state(t, state, reason).await,
            Effect::Save => self.save().await,
            Effect::RecordTurn => self.record_turn().await,
            Effect::Append(line) => {
                t.append(&self.ledger, line).await;
                self.check(t);
            }
            Effect::Stream {
                kind,
                text,
                message_id,
            } => {
                let text = t.chunk(&self.ledger, kind, text, message_id).await;
                self.check(t);
                self.step(SessionInput::Kept { kind, text });
            }
            Effect::Post(notice) => self.post(notice).await,
            effect @ Effect::Ask { .. } => self.ask(effect).await,
            Effect::AskPlan { title, body, steps } => self.ask_plan(title, body, steps).await,
            effect @ (Effect::Spend { .. }
            | Effect::AskBudget { .. }
            | Effect::RaiseBudget { .. }) => self.budget_effect(t, effect).await,
            Effect::Judge(request) => self.judge(request),
            Effect::ReplyGate { key, reply } => self.reply_gate(key, reply),
            Effect::Grant { key, name } => self.grant(key, name),
            Effect::Audit(event) => self.audit.record(&id, event),
            Effect::Withdraw { message_id, note } => {
                if let Err(e) = self.ledger.withdraw(&message_id, &note).await {
                    tracing::warn!(message = %message_id, "cannot withdraw an approval: {e}");
                }
            }
            Effect::WithdrawOpen { note } => {
                if let Err(e) = self.ledger.withdraw_open(&id, &note).await {
                    tracing::warn!("cannot withdraw open questions: {e}");
                }
            }
            Effect::OpenContext => {
                self.context().await;
            }
            Effect::Push(message) => self.push(message).await,
            Effect::Prompt { text, renew } => {
                self.audit
                    .record(&id, AuditEvent::Prompt { text: text.clone() });
                self.prompt(text, renew).await
            }
            Effect::CancelTurn => self.agent.cancel(),
            Effect::FallBack => {
                if let Some((_, limit)) = self.ahead.take() {
                    self.fall_back(limit.resets_at);
                }
            }
            Effect::WakeAfter(wait) => {
                self.limit_deadline = Some(tokio::time::Instant::now() + wait);
            }
            Effect::StopAgent => self.agent.stop(),
            Effect::RevokeHandles => {
                if let Err(e) = self.ledger.revoke_handles(&id).await {
                    tracing::error!("cannot revoke the handle: {e}");
                }
            }
            Effect::SeedFresh => {
                let system = self.system.clone();
                if let Err(e) = self.ledger.mark_fresh_start(&id, move || system).await {
                    self.failed_to_store("mark the context for a fresh agent session", e);
                }
            }
            Effect::ClearFreshStart => {
                if let Err(e) = self.ledger.clear_fresh_start(&id).await {
                    tracing::error!("cannot record the fresh session: {e}");
                }
            }
            Effect::ReadOpen => match self.ledger.open_blocking(&id).await {
                Ok(open) => self.step(SessionInput::Open(open)),
                Err(e) => tracing::warn!("cannot read open messages: {e}"),
            },
            Effect::ReadAnswers(ids) => self.read_answers(ids).await,
            Effect::Reply(reply) => self.reply(reply),
            Effect::Finish => self.finished = true,
        }
    }

    /// A turn ended: counted, and the context stack summed up on the record, saved.
    async fn record_turn(&mut self) {
        self.session.turn_count += 1;
        if let Some(state) = self.context().await {
            let text = summary(Some(&self.profile), state.stack.entries()).await;
            self.session.context_summary = Some(text);
        }
        self.save().await;
    }

    /// Posts the approval the agent waits for; the machine is told the message's id.
    async fn ask(&mut self, effect: Effect) {
        let Effect::Ask {
            key,
            title,
            body,
            options,
            kinds,
            flagged,
        } = effect
        else {
            return;
        };
        let asking = SendParams {
            session_id: self.session.id.clone(),
            msg_type: MsgType::ApprovalRequired,
            title,
            body: Some(body),
            options,
            option_kinds: kinds,
            flagged,
        };
        let sent = self.ledger.send_for(asking, Purpose::Approval).await;
        let result = sent.map(|m| m.id);
        self.step(SessionInput::Posted { key, result });
    }

    /// Asks for the review of the agent's plan; the machine is told the message's id.
    async fn ask_plan(&mut self, title: String, body: String, steps: usize) {
        let (options, kinds) = review_options();
        let asking = SendParams {
            session_id: self.session.id.clone(),
            msg_type: MsgType::ApprovalRequired,
            title,
            body: Some(body),
            options: Some(options),
            option_kinds: Some(kinds),
            flagged: None,
        };
        let sent = self
            .ledger
            .send_for(asking, Purpose::PlanReview { steps })
            .await;
        self.step(SessionInput::PlanAsked(sent.map(|m| m.id)));
    }

    /// A `state` transcript entry, then the record's state and reason, saved.
    async fn set_state(
        &mut self,
        t: &mut TranscriptWriter,
        state: crate::protocol::SessionState,
        reason: Option<String>,
    ) {
        let id = self.session.id.clone();
        self.idle_since = state.is_resting().then(tokio::time::Instant::now);
        self.audit.record(
            &id,
            AuditEvent::State {
                state: state.as_str().to_string(),
                reason: reason.clone(),
            },
        );
        t.state(&self.ledger, state, reason.as_deref()).await;
        self.check(t);
        self.session.state = Some(state);
        self.session.state_reason = reason;
        self.session.updated_at = Some(now_rfc3339());
        self.save().await;
    }

    /// The effects of the session's budget: spending counted, the question, a raise.
    async fn budget_effect(&mut self, t: &mut TranscriptWriter, effect: Effect) {
        let id = self.session.id.clone();
        match effect {
            Effect::Spend { charge, day } => {
                let spent = self.session.spent.clone().unwrap_or_default();
                let agent = self.session.agent_name.clone();
                let near = self.budgets.charge(&id, &agent, &spent, charge, &day);
                if !near.is_empty() {
                    self.step(SessionInput::BudgetNear(near));
                }
            }
            Effect::AskBudget {
                title,
                body,
                options,
            } => {
                let sent = self
                    .ledger
                    .send_for(
                        SendParams {
                            session_id: id,
                            msg_type: MsgType::DecisionNeeded,
                            title,
                            body: Some(body),
                            options: Some(options),
                            option_kinds: None,
                            flagged: None,
                        },
                        Purpose::BudgetRaise,
                    )
                    .await;
                self.step(SessionInput::BudgetAsked(sent.map(|m| m.id)));
            }
            Effect::RaiseBudget { scope, raise } => {
                if scope == Scope::Session {
                    self.budgets.session_raised(&id);
                } else if let Err(e) = self.budgets.raise(&scope, raise) {
                    tracing::error!("cannot keep the raised budget: {e}");
                    let why = format!("the budget could not be raised: {e}");
                    t.append(&self.ledger, Line::new(EntryKind::Error).text(why))
                        .await;
                    self.check(t);
                }
            }
            _ => {}
        }
    }

    fn record(&mut self, change: RecordChange) {
        let Some(change) = change.apply_security(&mut self.session.security) else {
            return;
        };
        match change {
            RecordChange::AcpSession(acp_session_id) => {
                self.session.acp_session_id = Some(acp_session_id);
            }
            RecordChange::AgentPid(pid) => self.session.agent_pid = Some(pid),
            RecordChange::Ended { exit_code } => {
                self.session.agent_pid = None;
                self.session.ended_at = Some(now_rfc3339());
                self.session.exit_code = exit_code;
            }
            RecordChange::Skills(skills) => self.session.skills = skills,
            RecordChange::Usage(usage) => self.session.usage = Some(usage),
            RecordChange::Spent(spent) => self.session.spent = Some(spent),
            RecordChange::Prompts { queued, turn } => {
                self.session.queued = queued;
                self.session.turn_prompt = turn;
            }
            // Applied to the security state above.
            RecordChange::Rule { .. }
            | RecordChange::OperationApproved { .. }
            | RecordChange::CredentialApproved(_) => {}
        }
    }

    fn reply(&mut self, reply: Reply) {
        match reply {
            Reply::Started | Reply::Queued => {
                let queued = reply == Reply::Queued;
                if let Some(ack) = self.prompt_ack.take() {
                    let _ = ack.send(queued);
                }
                if let Some(ack) = self.resend_ack.take() {
                    let _ = ack.send(Some(queued));
                }
            }
            Reply::NothingCut => {
                if let Some(ack) = self.resend_ack.take() {
                    let _ = ack.send(None);
                }
            }
            // Dropping the ack tells the caller the agent is not running.
            Reply::NotRunning => {
                self.prompt_ack = None;
                self.resend_ack = None;
            }
            Reply::Cancelled => {
                if let Some(ack) = self.cancel_ack.take() {
                    let _ = ack.send(());
                }
            }
            Reply::Security => {
                if let Some(ack) = self.rule_ack.take() {
                    let _ = ack.send(self.session.security.clone());
                }
            }
        }
    }

    /// The rules' judgement of a request, for the machine.
    fn judge(&mut self, request: GateRequest) {
        let operation = request.operation();
        let (judgement, changed) = self.gate.judge(&operation, &mut self.session.security);
        self.step(SessionInput::Judged {
            request,
            judgement,
            changed,
        });
    }

    /// The answers of messages no longer open, for the machine.
    async fn read_answers(&mut self, ids: Vec<String>) {
        let mut answers = Vec::new();
        for id in ids {
            if let Ok(message) = self.ledger.get_message(&id).await {
                answers.push((id, message.response, message.answered_by));
            }
        }
        self.step(SessionInput::Closed(answers));
    }

    /// Answers whoever waits on a request for the gate.
    fn reply_gate(&mut self, key: Key, reply: GateReply) {
        let Some(waiting) = self.waiting.remove(&key) else {
            return;
        };
        let sent = match (waiting, reply) {
            (Waiting::Operation(tx), GateReply::Proceed) => tx.send(Ok(())).is_ok(),
            (Waiting::Operation(tx), GateReply::Refuse(why)) => {
                tx.send(Err(AgentError::Refused(why))).is_ok()
            }
            (Waiting::Permission(tx), GateReply::Choose(option)) => tx.send(option).is_ok(),
            (Waiting::Approval(tx), GateReply::Verdict(verdict)) => tx.send(verdict).is_ok(),
            (Waiting::Credential { name, ack }, GateReply::Withheld) => {
                ack.send(Err(CredentialError::NotGiven(name))).is_ok()
            }
            (_, reply) => {
                tracing::error!("a gate reply {reply:?} does not fit its request; dropped");
                true
            }
        };
        if !sent {
            tracing::debug!("nobody waits for the gate's answer any more");
        }
    }

    /// Gives a credential to whoever asked for it; its value is looked up meanwhile.
    fn grant(&mut self, key: Key, name: String) {
        let Some(Waiting::Credential { ack, .. }) = self.waiting.remove(&key) else {
            return;
        };
        let settings = self.ledger.kiln().settings_path();
        tokio::spawn(async move {
            let _ = ack.send(crate::sessions::guard::credential::resolve(&settings, &name).await);
        });
    }
}
