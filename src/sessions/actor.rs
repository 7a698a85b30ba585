//! One running session: the task that owns its agent. It serialises everything that
//! happens to the session (agent events, human commands, inbox answers), so its state,
//! transcript and messages never race each other. What each of those means for the
//! session is decided by its [`Machine`]; this loop feeds it and carries out the effects
//! it returns: the store, the inbox, the context stack, the agent.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::context::{preamble, summary};
use super::gate::{Gate, Judgement};

#[path = "actor_gate.rs"]
mod gate_side;
use super::machine::{self, Change, Effect, Input, Key, Line, Machine, Reply};
use super::transcript::TranscriptWriter;
use super::wording::{self, Notice};
use crate::agent::{AgentEvent, AgentHandle, PermissionChoice};
use crate::audit::{Audit, AuditEvent};
use crate::config::AgentProfile;
use crate::context::ContextOp;
use crate::context::Message;
use crate::protocol::{EntryKind, InboxMessage, MsgType, SendParams, Session, SessionState};
use crate::rules::Operation;
use crate::workbench::{ContextState, Workbench, now_rfc3339};

/// How many lines of an agent's stderr an error message quotes, read from at most this
/// many bytes at its end (a chatty agent's log can be large).
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_BYTES: u64 = 16 * 1024;

pub(super) enum Command {
    /// A prompt; answered with whether it had to queue.
    Prompt {
        text: String,
        ack: oneshot::Sender<bool>,
    },
    Cancel {
        ack: oneshot::Sender<()>,
    },
    /// Ends the agent. `shutdown`: the daemon is going away, so the session keeps its
    /// state for the next daemon to resume.
    Stop {
        ack: oneshot::Sender<()>,
        shutdown: bool,
    },
    /// A blocking message of this session was created or answered.
    Inbox(Box<InboxMessage>),
    /// Inbox events were missed: re-read what is open.
    Resync,
    /// Switch a rule off (or on again) for this session.
    SetRule {
        rule: String,
        enabled: bool,
        ack: oneshot::Sender<crate::protocol::SecurityState>,
    },
    /// The agent asks for approval itself (`cru approve`): the rules' word, if any.
    JudgeApproval {
        title: String,
        ack: oneshot::Sender<Option<bool>>,
    },
    /// The agent asks for a credential: approved once per session by the human.
    Secret {
        name: String,
        ack: oneshot::Sender<Result<String, String>>,
    },
}

pub(super) struct Actor {
    wb: Arc<Workbench>,
    session: Session,
    agent: AgentHandle,
    events: mpsc::UnboundedReceiver<AgentEvent>,
    commands: mpsc::UnboundedReceiver<Command>,
    profile: AgentProfile,
    /// The bottom entry of the session's context stack.
    system: String,
    machine: Machine,
    /// Effects still to carry out, in order.
    todo: VecDeque<Effect>,
    /// The agent's permission requests waiting for an answer, by the machine's key.
    permissions: HashMap<Key, oneshot::Sender<Option<String>>>,
    next_key: Key,
    /// The acknowledgement the command being handled waits for.
    prompt_ack: Option<oneshot::Sender<bool>>,
    cancel_ack: Option<oneshot::Sender<()>>,
    /// Everyone waiting for the agent to be gone.
    stoppers: Vec<oneshot::Sender<()>>,
    finished: bool,
    audit: Audit,
    gate: Gate,
    /// Approvals waiting, by key: the operation, and the options that approve it for
    /// the rest of the session.
    gated: HashMap<Key, (Operation, Vec<String>)>,
    /// Credentials asked for, by approval key: the name and who waits for the value.
    secrets: HashMap<Key, (String, oneshot::Sender<Result<String, String>>)>,
    /// Set once crucible ends the session (a context miss): nothing more goes through.
    ended_by: Option<String>,
    /// How long the session may sit complete before its environment is torn down
    /// (`None`: never, as for the local driver).
    idle_after: Option<std::time::Duration>,
    /// Since when it has sat complete.
    idle_since: Option<tokio::time::Instant>,
}

/// How an actor starts.
pub(super) struct Setup {
    pub profile: AgentProfile,
    pub system: String,
    /// Set when resuming after a restart: the state the session had then.
    pub resumed_from: Option<SessionState>,
    pub first_prompt: Option<String>,
    pub idle_after: Option<std::time::Duration>,
    /// The session's folder as the agent names it, when not the host's path.
    pub agent_cwd: Option<std::path::PathBuf>,
    /// The daemon's rules.
    pub rules: Arc<super::rule_files::RuleBook>,
}

impl Actor {
    pub fn new(
        wb: Arc<Workbench>,
        session: Session,
        agent: AgentHandle,
        events: mpsc::UnboundedReceiver<AgentEvent>,
        commands: mpsc::UnboundedReceiver<Command>,
        setup: Setup,
    ) -> Self {
        let Setup {
            profile,
            system,
            resumed_from,
            first_prompt,
            idle_after,
            agent_cwd,
            rules,
        } = setup;
        let audit = Audit::new(wb.kiln());
        let folder = std::path::PathBuf::from(super::context::folder(&wb, &session));
        let mut worktrees = vec![folder];
        worktrees.extend(agent_cwd);
        let gate = Gate::new(rules, worktrees);
        let machine = Machine::new(machine::Setup {
            kind: profile.kind,
            agent_pid: agent.pid,
            state: session.state,
            resumed_from,
            first_prompt,
        });
        Self {
            wb,
            session,
            agent,
            events,
            commands,
            profile,
            system,
            machine,
            todo: VecDeque::new(),
            permissions: HashMap::new(),
            next_key: 0,
            prompt_ack: None,
            cancel_ack: None,
            stoppers: Vec::new(),
            finished: false,
            audit,
            gate,
            gated: HashMap::new(),
            secrets: HashMap::new(),
            ended_by: None,
            idle_after,
            idle_since: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.session.id
    }

    pub async fn run(mut self) {
        let mut transcript = TranscriptWriter::open(&self.wb, &self.session).await;
        let t = &mut transcript;
        self.feed(t, Input::Start).await;
        while !self.finished {
            let idle_deadline = self
                .idle_after
                .zip(self.idle_since)
                .map(|(after, since)| since + after);
            tokio::select! {
                _ = tokio::time::sleep_until(idle_deadline.unwrap_or_else(tokio::time::Instant::now)), if idle_deadline.is_some() => {
                    self.idle_since = None;
                    self.feed(t, Input::Park).await;
                }
                event = self.events.recv() => {
                    let Some(event) = event else { break };
                    if let Some(input) = self.on_event(t, event).await {
                        self.feed(t, input).await;
                    }
                }
                Some(command) = self.commands.recv() => {
                    if let Some(input) = self.on_command(command).await {
                        self.feed(t, input).await;
                    }
                    // Every command is answered by now; an ack left over means "not running".
                    self.prompt_ack = None;
                    self.cancel_ack = None;
                }
            }
        }
        let reason = self
            .session
            .state_reason
            .clone()
            .unwrap_or_else(|| "the agent ended".into());
        self.audit
            .record(&self.session.id, AuditEvent::End { reason });
        for ack in self.stoppers.drain(..) {
            let _ = ack.send(());
        }
    }

    /// What an agent event adds to the audit log.
    fn audit_event(&self, event: &AgentEvent) {
        let record = match event {
            AgentEvent::ToolCall { title, status, .. } => AuditEvent::ToolCall {
                tool: title.clone(),
                status: Some(status.clone()),
            },
            AgentEvent::Permission { title, .. } => AuditEvent::PermissionAsked {
                title: title.clone(),
                message_id: None,
            },
            AgentEvent::File { op, path, refused } => {
                let (path, allowed, reason) = (path.clone(), refused.is_none(), refused.clone());
                if *op == "write" {
                    AuditEvent::FileWrite {
                        path,
                        allowed,
                        reason,
                    }
                } else {
                    AuditEvent::FileRead {
                        path,
                        allowed,
                        reason,
                    }
                }
            }
            _ => return,
        };
        self.audit.record(&self.session.id, record);
    }

    /// Steps the machine and carries out the effects, with those of any answer (what an
    /// effect found out) ahead of the ones still waiting.
    async fn feed(&mut self, t: &mut TranscriptWriter, input: Input) {
        self.step(input);
        while let Some(effect) = self.todo.pop_front() {
            self.perform(t, effect).await;
        }
    }

    fn step(&mut self, input: Input) {
        for effect in self.machine.step(input).into_iter().rev() {
            self.todo.push_front(effect);
        }
    }

    /// The machine's input for an agent event.
    async fn on_event(&mut self, t: &mut TranscriptWriter, event: AgentEvent) -> Option<Input> {
        self.audit_event(&event);
        Some(match event {
            AgentEvent::Ready {
                acp_session_id,
                resumed,
                agent_name,
            } => {
                if let Some(name) = agent_name {
                    tracing::info!(session = %self.session.id, agent = %name, "agent ready");
                }
                Input::Ready {
                    acp_session_id,
                    resumed,
                }
            }
            AgentEvent::Chunk {
                kind,
                text,
                message_id,
            } => Input::Chunk {
                kind,
                text,
                message_id,
            },
            AgentEvent::ToolCall {
                id,
                title,
                status,
                operation,
            } => {
                self.flag(&operation).await;
                Input::ToolCall { id, title, status }
            }
            AgentEvent::Gate { operation, reply } => {
                return self.gate_operation(t, operation, reply).await;
            }
            AgentEvent::ToolUpdate { id, title, status } => Input::ToolUpdate { id, title, status },
            AgentEvent::Plan(plan) => Input::Plan(plan),
            AgentEvent::Skills(skills) => {
                if self.session.skills != skills {
                    self.session.skills = skills;
                    self.save().await;
                }
                return None;
            }
            AgentEvent::Usage(usage) => {
                if self.session.usage.as_ref() != Some(&usage) {
                    self.session.usage = Some(usage);
                    self.save().await;
                }
                return None;
            }
            AgentEvent::Permission {
                title,
                tool_call_id,
                options,
                operation,
                reply,
            } => {
                return self
                    .gate_permission(t, title, tool_call_id, options, operation, reply)
                    .await;
            }
            AgentEvent::File { op, path, refused } => Input::File { op, path, refused },
            AgentEvent::TurnEnded(ended) => {
                // The message streaming in ends with the turn; the turn must know whether
                // it could be stored.
                self.flush(t).await;
                Input::TurnEnded(ended)
            }
            AgentEvent::StartFailed(why) => Input::StartFailed(why),
            AgentEvent::SessionRenewed { acp_session_id } => {
                Input::SessionRenewed { acp_session_id }
            }
            AgentEvent::Process(pid) => Input::Process(pid),
            AgentEvent::Exited { status, code } => {
                self.flush(t).await;
                Input::Exited { status, code }
            }
        })
    }

    /// The machine's input for a command, if it concerns this session.
    async fn on_command(&mut self, command: Command) -> Option<Input> {
        Some(match command {
            Command::Prompt { text, ack } => {
                self.prompt_ack = Some(ack);
                Input::Prompt(text)
            }
            Command::Cancel { ack } => {
                self.cancel_ack = Some(ack);
                Input::Cancel
            }
            Command::Stop { ack, shutdown } => {
                self.stoppers.push(ack);
                Input::Stop { shutdown }
            }
            Command::Inbox(message) => {
                if message.session_id != self.session.id {
                    return None;
                }
                if message.responded {
                    Input::Answered {
                        id: message.id,
                        response: message.response,
                    }
                } else {
                    Input::Opened(message.id)
                }
            }
            Command::Resync => Input::Resync,
            Command::SetRule { rule, enabled, ack } => {
                self.set_rule(rule, enabled, ack).await;
                return None;
            }
            Command::JudgeApproval { title, ack } => {
                self.judge_approval(title, ack).await;
                return None;
            }
            Command::Secret { name, ack } => return self.secret(name, ack),
        })
    }

    async fn perform(&mut self, t: &mut TranscriptWriter, effect: Effect) {
        let id = self.session.id.clone();
        match effect {
            Effect::Record(change) => self.record(change),
            Effect::SetState { state, reason } => {
                self.idle_since = state.is_resting().then(tokio::time::Instant::now);
                self.audit.record(
                    &id,
                    AuditEvent::State {
                        state: state.as_str().to_string(),
                        reason: reason.clone(),
                    },
                );
                t.state(&self.wb, state, reason.as_deref()).await;
                self.check(t);
                self.session.state = Some(state);
                self.session.state_reason = reason;
                self.session.updated_at = Some(now_rfc3339());
                self.save().await;
            }
            Effect::Save => self.save().await,
            Effect::RecordTurn => {
                self.session.turn_count += 1;
                if let Some(state) = self.context().await {
                    let text = summary(Some(&self.profile), state.stack.entries()).await;
                    self.session.context_summary = Some(text);
                }
                self.save().await;
            }
            Effect::Append(line) => {
                t.append(&self.wb, line).await;
                self.check(t);
            }
            Effect::Stream {
                kind,
                text,
                message_id,
            } => {
                let text = t.chunk(&self.wb, kind, text, message_id).await;
                self.check(t);
                self.step(Input::Kept { kind, text });
            }
            Effect::Post(notice) => self.post(notice).await,
            Effect::Ask {
                key,
                title,
                body,
                options,
                kinds,
                flagged,
            } => {
                let sent = self
                    .wb
                    .send(SendParams {
                        session_id: id,
                        msg_type: MsgType::ApprovalRequired,
                        title,
                        body: Some(body),
                        options,
                        option_kinds: kinds,
                        flagged,
                    })
                    .await;
                let result = sent.map(|m| m.id).map_err(|e| e.to_string());
                self.step(Input::Posted { key, result });
            }
            Effect::AnswerPermission { key, option } => {
                if let Some((name, ack)) = self.secrets.remove(&key) {
                    if option.as_deref() == Some("allow") {
                        let approved = &mut self.session.security.approved_credentials;
                        if !approved.contains(&name) {
                            approved.push(name.clone());
                        }
                        self.save().await;
                        let settings = self.wb.kiln().settings_path();
                        tokio::spawn(async move {
                            let _ = ack
                                .send(crate::sessions::security::resolve(&settings, &name).await);
                        });
                    } else {
                        let _ = ack.send(Err(format!("the credential {name} was not given")));
                    }
                }
                if let Some((operation, remembered)) = self.gated.remove(&key)
                    && option.as_ref().is_some_and(|o| remembered.contains(o))
                {
                    self.session
                        .security
                        .approved_operations
                        .insert(operation.fingerprint(), operation.describe());
                    self.save().await;
                }
                let (answer, by) = match &option {
                    Some(chosen) => (chosen.clone(), "human (inbox)"),
                    None => ("none".to_string(), "nobody: withdrawn or cancelled"),
                };
                self.audit.record(
                    &id,
                    AuditEvent::PermissionAnswered {
                        answer,
                        by: by.into(),
                    },
                );
                if let Some(reply) = self.permissions.remove(&key) {
                    let _ = reply.send(option);
                }
            }
            Effect::Withdraw { message_id, note } => {
                if let Err(e) = self.wb.withdraw(&message_id, &note).await {
                    tracing::warn!(message = %message_id, "cannot withdraw an approval: {e}");
                }
            }
            Effect::WithdrawOpen { note } => {
                if let Err(e) = self.wb.withdraw_open(&id, &note).await {
                    tracing::warn!(session = %id, "cannot withdraw open questions: {e}");
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
            Effect::StopAgent => self.agent.stop(),
            Effect::RevokeHandles => {
                if let Err(e) = self.wb.revoke_handles(&id).await {
                    tracing::error!(session = %id, "cannot revoke the handle: {e}");
                }
            }
            Effect::SeedFresh => {
                let system = self.system.clone();
                if let Err(e) = self.wb.mark_fresh_start(&id, move || system).await {
                    self.failed_to_store("mark the context for a fresh agent session", e);
                }
            }
            Effect::ClearFreshStart => {
                if let Err(e) = self.wb.clear_fresh_start(&id).await {
                    tracing::error!(session = %id, "cannot record the fresh session: {e}");
                }
            }
            Effect::ReadOpen => match self.wb.open_blocking(&id).await {
                Ok(open) => self.step(Input::Open(open)),
                Err(e) => tracing::warn!(session = %id, "cannot read open messages: {e}"),
            },
            Effect::ReadAnswers(ids) => {
                let mut answers = Vec::new();
                for id in ids {
                    if let Ok(message) = self.wb.get_message(&id).await {
                        answers.push((id, message.response));
                    }
                }
                self.step(Input::Closed(answers));
            }
            Effect::Reply(reply) => self.reply(reply),
            Effect::Finish => self.finished = true,
        }
    }

    fn record(&mut self, change: Change) {
        match change {
            Change::AcpSession(acp_session_id) => {
                self.session.acp_session_id = Some(acp_session_id);
            }
            Change::AgentPid(pid) => self.session.agent_pid = Some(pid),
            Change::Ended { exit_code } => {
                self.session.agent_pid = None;
                self.session.ended_at = Some(now_rfc3339());
                self.session.exit_code = exit_code;
            }
        }
    }

    fn reply(&mut self, reply: Reply) {
        match reply {
            Reply::Started | Reply::Queued => {
                if let Some(ack) = self.prompt_ack.take() {
                    let _ = ack.send(reply == Reply::Queued);
                }
            }
            // Dropping the ack tells the caller the agent is not running.
            Reply::NotRunning => self.prompt_ack = None,
            Reply::Cancelled => {
                if let Some(ack) = self.cancel_ack.take() {
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Ends the message streaming in.
    async fn flush(&mut self, t: &mut TranscriptWriter) {
        t.flush(&self.wb).await;
        self.check(t);
    }

    /// Tells the machine when the transcript could not store an entry.
    fn check(&mut self, t: &mut TranscriptWriter) {
        if let Some(why) = t.take_failure() {
            self.step(Input::StoreFailed(why));
        }
    }

    /// Tells the machine a store write failed.
    fn failed_to_store(&mut self, what: &str, e: impl std::fmt::Display) {
        tracing::error!(session = %self.session.id, "cannot {what}: {e}");
        self.step(Input::StoreFailed(wording::store_failed(what, e)));
    }

    async fn save(&mut self) {
        // The name and the channel's record are changed from outside the actor (rename,
        // channel messages): keep them as they are now.
        if let Ok(now) = self.wb.get_session(&self.session.id) {
            self.session.display_name = now.display_name;
            self.session.channel = now.channel;
        }
        match self.wb.save_managed(&self.session).await {
            Ok(saved) => self.session = saved,
            Err(e) => self.failed_to_store("save the session", e),
        }
    }

    async fn post(&mut self, notice: Notice) {
        let mut notice = notice;
        if notice.stderr_tail {
            notice.body = notice.body.map(|body| self.with_stderr(body));
        }
        let sent = self.wb.send(notice.into_params(&self.session.id)).await;
        if let Err(e) = sent {
            self.failed_to_store("post to the inbox", e);
        }
    }

    /// Pushes onto the session's context stack.
    async fn push(&mut self, message: Message) {
        let system = self.system.clone();
        let pushed = self
            .wb
            .apply_context(
                &self.session.id,
                move || system,
                ContextOp::Push(message),
                false,
            )
            .await;
        if let Err(e) = pushed {
            self.failed_to_store("push onto the context stack", e);
        }
    }

    /// The prompt onto the stack, then to the agent. An agent whose context shrank gets
    /// a fresh session seeded with the stack as it was before the prompt.
    async fn prompt(&mut self, text: String, renew: bool) {
        let fresh = if renew {
            self.context()
                .await
                .filter(|state| state.fresh_start)
                .map(|state| preamble(state.stack.entries()))
        } else {
            None
        };
        self.push(Message::Human { text: text.clone() }).await;
        match fresh {
            Some(context) => self.agent.prompt_fresh(text, context),
            None => self.agent.prompt(text),
        }
    }

    /// The session's context stack (made, with the system entry, if it has none); a
    /// failure is logged.
    async fn context(&self) -> Option<ContextState> {
        let system = self.system.clone();
        match self.wb.context(&self.session.id, move || system).await {
            Ok(state) => Some(state),
            Err(e) => {
                tracing::error!(session = %self.session.id, "cannot read the context stack: {e}");
                None
            }
        }
    }

    /// `text`, then the last lines the agent wrote to stderr, if any.
    fn with_stderr(&self, text: String) -> String {
        let path = self
            .wb
            .kiln()
            .sessions_dir()
            .join(format!("{}.stderr.log", self.session.id));
        let Some(stderr) = read_tail(&path, STDERR_TAIL_BYTES) else {
            return text;
        };
        let lines: Vec<&str> = stderr.lines().collect();
        if lines.is_empty() {
            return text;
        }
        let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
        wording::with_stderr(text, &path, tail)
    }
}

/// The last `max` bytes of a file, from the first whole line in them.
fn read_tail(path: &std::path::Path, max: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let start = file.metadata().ok()?.len().saturating_sub(max);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some(match (start > 0, text.find('\n')) {
        (true, Some(cut)) => text[cut + 1..].to_string(),
        _ => text,
    })
}
