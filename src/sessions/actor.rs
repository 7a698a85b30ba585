//! One running session: the task that owns its agent. It serialises everything that
//! happens to the session (agent events, human commands, inbox answers), so its state,
//! transcript and messages never race each other.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::context::{preamble, summary};
use super::log::MarkdownLog;
use crate::agent::{AgentEvent, AgentHandle, PermissionChoice, TurnFailure};
use crate::config::{AgentKind, AgentProfile};
use crate::context::Message;
use crate::protocol::{
    EntryKind, InboxMessage, MsgType, OutputChunk, SendParams, Session, SessionState,
    TranscriptEntry, limits,
};
use crate::text::{clip, first_line};
use crate::workbench::{ContextOp, ContextState};
use crate::workbench::{Workbench, now_rfc3339};

/// How much of a reply a `task_complete` message quotes, and how much of it is kept
/// for that.
const SUMMARY_CHARS: usize = 4000;
const REPLY_BYTES: usize = 64 * 1024;
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
    Inbox(InboxMessage),
    /// Inbox events were missed: re-read what is open.
    Resync,
}

/// The session's transcript: stored entries, the markdown log, and the text still
/// streaming in.
pub(super) struct Transcript {
    session_id: String,
    seq: u64,
    log: MarkdownLog,
    /// The agent message streaming in: its kind and id (if the agent gives them), how
    /// much of it was kept and cut so far ([`limits::MESSAGE_BYTES`]).
    message: Option<Streaming>,
    /// Text of that message not yet stored.
    pending: String,
    /// The first store failure since it was last taken: the turn must not end as if
    /// everything it produced was kept.
    failure: Option<String>,
}

struct Streaming {
    kind: EntryKind,
    id: Option<String>,
    kept: usize,
    cut: usize,
}

impl Transcript {
    pub async fn open(wb: &Workbench, session: &Session) -> Self {
        let seq = match wb.store().last_seq(&session.id).await {
            Ok(seq) => seq,
            Err(e) => {
                tracing::error!(session = %session.id, "cannot read the transcript: {e}");
                0
            }
        };
        Self {
            session_id: session.id.clone(),
            seq,
            log: MarkdownLog::open(&wb.kiln().sessions_dir(), session),
            message: None,
            pending: String::new(),
            failure: None,
        }
    }

    pub async fn append(
        &mut self,
        wb: &Workbench,
        kind: EntryKind,
        text: Option<String>,
        tool_call_id: Option<String>,
        status: Option<String>,
    ) {
        self.flush(wb).await;
        self.write(wb, kind, text, tool_call_id, status).await;
    }

    async fn write(
        &mut self,
        wb: &Workbench,
        kind: EntryKind,
        text: Option<String>,
        tool_call_id: Option<String>,
        status: Option<String>,
    ) {
        self.seq += 1;
        let entry = TranscriptEntry {
            session_id: self.session_id.clone(),
            seq: self.seq,
            at: now_rfc3339(),
            kind,
            text: text.map(|t| crate::text::cap(t, limits::ENTRY_BYTES)),
            tool_call_id,
            status,
        };
        self.log.write(&entry);
        if let Err(e) = wb.append_transcript(vec![entry]).await {
            tracing::error!(session = %self.session_id, "cannot store a transcript entry: {e}");
            self.failure
                .get_or_insert_with(|| format!("a transcript entry could not be stored: {e}"));
        }
    }

    /// The store failure since the last call, if any.
    pub fn take_failure(&mut self) -> Option<String> {
        self.failure.take()
    }

    /// Streamed text: announced now, stored in entries of at most
    /// [`limits::ENTRY_BYTES`] as it comes and when the message is complete (the next
    /// message, or anything else, begins). Of one message at most
    /// [`limits::MESSAGE_BYTES`] are kept; the cut is marked at its end. Returns the
    /// part of `text` that was kept.
    pub async fn chunk(
        &mut self,
        wb: &Workbench,
        kind: EntryKind,
        mut text: String,
        message_id: Option<String>,
    ) -> String {
        let same = self
            .message
            .as_ref()
            .is_some_and(|m| m.kind == kind && m.id == message_id);
        if !same {
            self.flush(wb).await;
            self.message = Some(Streaming {
                kind,
                id: message_id,
                kept: 0,
                cut: 0,
            });
        }
        let Some(message) = self.message.as_mut() else {
            return String::new();
        };
        let room = limits::MESSAGE_BYTES.saturating_sub(message.kept);
        let keep = crate::text::floor_boundary(&text, room);
        message.cut += text.len() - keep;
        message.kept += keep;
        text.truncate(keep);
        if text.is_empty() {
            return text;
        }
        wb.publish_output(OutputChunk {
            session_id: self.session_id.clone(),
            kind,
            text: text.clone(),
        });
        self.pending.push_str(&text);
        while self.pending.len() >= limits::ENTRY_BYTES {
            let at = crate::text::floor_boundary(&self.pending, limits::ENTRY_BYTES);
            let rest = self.pending.split_off(at);
            let piece = std::mem::replace(&mut self.pending, rest);
            self.write(wb, kind, Some(piece), None, None).await;
        }
        text
    }

    /// Ends the streaming message: stores what is pending and marks a cut.
    pub async fn flush(&mut self, wb: &Workbench) {
        let Some(message) = self.message.take() else {
            return;
        };
        let mut text = std::mem::take(&mut self.pending);
        if message.cut > 0 {
            let marker = crate::text::cut_marker(message.cut);
            wb.publish_output(OutputChunk {
                session_id: self.session_id.clone(),
                kind: message.kind,
                text: marker.clone(),
            });
            text.push_str(&marker);
        }
        if !text.is_empty() {
            self.write(wb, message.kind, Some(text), None, None).await;
        }
    }

    pub async fn state(&mut self, wb: &Workbench, state: SessionState, reason: Option<&str>) {
        self.append(
            wb,
            EntryKind::State,
            reason.map(String::from),
            None,
            Some(state.as_str().into()),
        )
        .await;
    }
}

/// A permission request waiting for its inbox answer.
struct Pending {
    title: String,
    /// (option as shown in the inbox, ACP option id)
    choices: Vec<(String, String)>,
    reply: oneshot::Sender<Option<String>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Stopping {
    Requested,
    Shutdown,
}

pub(super) struct Actor {
    wb: Arc<Workbench>,
    session: Session,
    agent: AgentHandle,
    events: mpsc::UnboundedReceiver<AgentEvent>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Set when resuming after a restart: the state the session had then.
    resumed_from: Option<SessionState>,
    ready: bool,
    turn: bool,
    queue: VecDeque<String>,
    /// Open decisions and approvals of this session.
    blocking: HashSet<String>,
    permissions: HashMap<String, Pending>,
    stopping: Option<Stopping>,
    stoppers: Vec<oneshot::Sender<()>>,
    /// A failure was already reported, so the agent's exit needs no second message.
    reported: bool,
    /// The prompt of the running turn and what the agent replied, for `task_complete`.
    prompt: String,
    reply: String,
    profile: AgentProfile,
    /// The bottom entry of the session's context stack.
    system: String,
    /// Agent text of this turn not yet pushed onto the context stack.
    unsaid: String,
    /// Tool calls of this session on the stack: id → title, and those with a result.
    tool_titles: HashMap<String, String>,
    tool_results: HashSet<String>,
    /// The first failed store write since the last turn ended (seed 002: persistence
    /// failures fail closed, so the turn ends in `error`, never `complete`).
    store_failure: Option<String>,
}

/// How an actor starts.
pub(super) struct Setup {
    pub profile: AgentProfile,
    pub system: String,
    /// Set when resuming after a restart: the state the session had then.
    pub resumed_from: Option<SessionState>,
    pub first_prompt: Option<String>,
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
        } = setup;
        Self {
            wb,
            session,
            agent,
            events,
            commands,
            resumed_from,
            ready: false,
            turn: false,
            queue: first_prompt.into_iter().collect(),
            blocking: HashSet::new(),
            permissions: HashMap::new(),
            stopping: None,
            stoppers: Vec::new(),
            reported: false,
            prompt: String::new(),
            reply: String::new(),
            profile,
            system,
            unsaid: String::new(),
            tool_titles: HashMap::new(),
            tool_results: HashSet::new(),
            store_failure: None,
        }
    }

    /// Whether the agent feeds the stack itself (the internal agent) rather than the
    /// actor feeding it from the agent's events.
    fn feeds_itself(&self) -> bool {
        self.profile.kind == AgentKind::Internal
    }

    /// Remembers the first store failure of the turn.
    fn failed_to_store(&mut self, what: &str, e: impl std::fmt::Display) {
        tracing::error!(session = %self.session.id, "cannot {what}: {e}");
        self.store_failure
            .get_or_insert_with(|| format!("crucible could not {what}: {e}"));
    }

    /// Pushes onto the session's context stack; a failure fails the turn.
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

    /// Pushes the agent's text so far as one agent entry.
    async fn push_said(&mut self) {
        let text = std::mem::take(&mut self.unsaid);
        if !text.trim().is_empty() {
            self.push(Message::Agent { text }).await;
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

    /// After every turn: the turn count and the context summary.
    async fn after_turn(&mut self) {
        self.push_said().await;
        self.session.turn_count += 1;
        if let Some(state) = self.context().await {
            let text = summary(Some(&self.profile), state.stack.entries()).await;
            self.session.context_summary = Some(text);
        }
        self.save().await;
    }

    pub fn id(&self) -> &str {
        &self.session.id
    }

    pub async fn run(mut self) {
        let mut transcript = Transcript::open(&self.wb, &self.session).await;
        self.session.agent_pid = Some(self.agent.pid);
        let reason = self
            .resumed_from
            .map(|_| "resuming after a daemon restart".to_string());
        self.set_state(&mut transcript, SessionState::Starting, reason)
            .await;
        self.context().await;
        match self.wb.open_blocking(&self.session.id).await {
            Ok(open) => self.blocking = open.into_iter().collect(),
            Err(e) => tracing::warn!(session = %self.session.id, "cannot read open messages: {e}"),
        }
        loop {
            tokio::select! {
                event = self.events.recv() => {
                    let Some(event) = event else { break };
                    if self.on_event(&mut transcript, event).await {
                        break;
                    }
                }
                Some(command) = self.commands.recv() => {
                    self.on_command(&mut transcript, command).await;
                }
            }
        }
        for ack in self.stoppers.drain(..) {
            let _ = ack.send(());
        }
    }

    async fn set_state(
        &mut self,
        transcript: &mut Transcript,
        state: SessionState,
        reason: Option<String>,
    ) {
        transcript.state(&self.wb, state, reason.as_deref()).await;
        self.session.state = Some(state);
        self.session.state_reason = reason;
        self.session.updated_at = Some(now_rfc3339());
        self.save().await;
    }

    async fn save(&mut self) {
        match self.wb.save_managed(&self.session).await {
            Ok(saved) => self.session = saved,
            Err(e) => self.failed_to_store("save the session", e),
        }
    }

    async fn message(&mut self, msg_type: MsgType, title: String, body: Option<String>) {
        let sent = self
            .wb
            .send(SendParams {
                session_id: self.session.id.clone(),
                msg_type,
                title,
                body,
                options: None,
            })
            .await;
        if let Err(e) = sent {
            self.failed_to_store("post to the inbox", e);
        }
    }

    /// Working or waiting, from whether a blocking message is open.
    async fn settle(&mut self, transcript: &mut Transcript) {
        if !self.turn {
            return;
        }
        let want = if self.blocking.is_empty() {
            SessionState::Working
        } else {
            SessionState::Waiting
        };
        if self.session.state != Some(want) {
            self.set_state(transcript, want, None).await;
        }
    }

    async fn start_turn(&mut self, transcript: &mut Transcript, text: String) {
        transcript
            .append(&self.wb, EntryKind::Prompt, Some(text.clone()), None, None)
            .await;
        self.reply.clear();
        self.unsaid.clear();
        self.prompt = text.clone();
        self.turn = true;
        // An ACP agent whose context shrank gets a fresh session seeded with the stack.
        let fresh = match self.profile.kind {
            AgentKind::Acp => self
                .context()
                .await
                .filter(|state| state.fresh_start)
                .map(|state| preamble(state.stack.entries())),
            _ => None,
        };
        self.push(Message::Human { text: text.clone() }).await;
        match fresh {
            Some(context) => self.agent.prompt_fresh(text, context),
            None => self.agent.prompt(text),
        }
        self.settle(transcript).await;
    }

    /// Answers every pending permission with "cancelled" and closes its inbox message.
    async fn withdraw_permissions(&mut self, transcript: &mut Transcript, why: &str) {
        for (id, pending) in self.permissions.drain() {
            let _ = pending.reply.send(None);
            self.blocking.remove(&id);
            if let Err(e) = self.wb.withdraw(&id, &format!("withdrawn: {why}")).await {
                tracing::warn!(message = %id, "cannot withdraw an approval: {e}");
            }
            transcript
                .append(
                    &self.wb,
                    EntryKind::Permission,
                    Some(pending.title),
                    None,
                    Some("withdrawn".into()),
                )
                .await;
        }
    }

    /// Handles one agent event; true when the agent is gone and the actor should end.
    async fn on_event(&mut self, t: &mut Transcript, event: AgentEvent) -> bool {
        match event {
            AgentEvent::Ready {
                acp_session_id,
                resumed,
                agent_name,
            } => {
                self.ready = true;
                self.session.acp_session_id = Some(acp_session_id);
                if let Some(name) = agent_name {
                    tracing::info!(session = %self.session.id, agent = %name, "agent ready");
                }
                if resumed {
                    let interrupted = self.resumed_from.is_some_and(SessionState::is_busy);
                    let reason = if interrupted {
                        "resumed after a daemon restart; the turn that was running was interrupted"
                    } else {
                        "resumed after a daemon restart"
                    };
                    self.set_state(t, SessionState::Complete, Some(reason.into()))
                        .await;
                    self.message(
                        MsgType::Info,
                        "Session resumed after a daemon restart".into(),
                        Some(format!(
                            "{reason}. The agent reopened its session; send a prompt to continue."
                        )),
                    )
                    .await;
                }
                if let Some(next) = self.queue.pop_front() {
                    self.start_turn(t, next).await;
                } else if !resumed {
                    self.set_state(t, SessionState::Complete, Some("ready for a prompt".into()))
                        .await;
                }
            }
            AgentEvent::Chunk {
                kind,
                text,
                message_id,
            } => {
                let text = t.chunk(&self.wb, kind, text, message_id).await;
                if kind == EntryKind::Message {
                    if self.reply.len() < REPLY_BYTES {
                        self.reply.push_str(&text);
                    }
                    if !self.feeds_itself() {
                        self.unsaid.push_str(&text);
                    }
                }
            }
            AgentEvent::ToolCall { id, title, status } => {
                if !self.feeds_itself() && !self.tool_titles.contains_key(&id) {
                    self.push_said().await;
                    self.tool_titles.insert(id.clone(), title.clone());
                    self.push(Message::ToolCall {
                        call_id: id.clone(),
                        tool: title.clone(),
                        arguments: String::new(),
                    })
                    .await;
                }
                t.append(
                    &self.wb,
                    EntryKind::ToolCall,
                    Some(title),
                    Some(id),
                    Some(status),
                )
                .await;
            }
            AgentEvent::ToolUpdate { id, title, status } => {
                let finished = matches!(status.as_deref(), Some("completed" | "failed"));
                if !self.feeds_itself()
                    && finished
                    && let Some(tool) = self.tool_titles.get(&id).cloned()
                    && self.tool_results.insert(id.clone())
                {
                    let ok = status.as_deref() == Some("completed");
                    let text = title
                        .clone()
                        .unwrap_or_else(|| if ok { "completed" } else { "failed" }.to_string());
                    self.push(Message::ToolResult {
                        call_id: id.clone(),
                        tool,
                        ok,
                        text,
                    })
                    .await;
                }
                t.append(&self.wb, EntryKind::ToolUpdate, title, Some(id), status)
                    .await;
            }
            AgentEvent::Plan(plan) => {
                t.append(&self.wb, EntryKind::Plan, Some(plan), None, None)
                    .await;
            }
            AgentEvent::Permission {
                title,
                tool_call_id,
                options,
                reply,
            } => {
                self.ask_permission(t, title, tool_call_id, options, reply)
                    .await
            }
            AgentEvent::File { op, path, refused } => {
                let (text, status) = match refused {
                    None => (path, op.to_string()),
                    Some(why) => (why, format!("{op} refused")),
                };
                t.append(&self.wb, EntryKind::File, Some(text), None, Some(status))
                    .await;
            }
            AgentEvent::TurnEnded(ended) => self.end_turn(t, ended).await,
            AgentEvent::StartFailed(why) => {
                t.append(&self.wb, EntryKind::Error, Some(why.clone()), None, None)
                    .await;
                self.reported = true;
                if self.resumed_from.is_some() {
                    let (reason, report) = super::lost(&self.session.id, &why);
                    self.set_state(t, SessionState::Stopped, Some(reason)).await;
                    if let Err(e) = self.wb.send(report).await {
                        tracing::error!(session = %self.session.id, "cannot post to the inbox: {e}");
                    }
                } else {
                    self.set_state(t, SessionState::Error, Some(why.clone()))
                        .await;
                    self.message(
                        MsgType::Error,
                        "Agent failed to start".into(),
                        Some(self.with_stderr(why)),
                    )
                    .await;
                }
                self.agent.stop();
            }
            AgentEvent::SessionRenewed { acp_session_id } => {
                self.session.acp_session_id = Some(acp_session_id);
                self.save().await;
                if let Err(e) = self.wb.clear_fresh_start(&self.session.id).await {
                    tracing::error!(session = %self.session.id, "cannot record the fresh session: {e}");
                }
            }
            AgentEvent::Process(pid) => {
                self.session.agent_pid = Some(pid.unwrap_or(self.agent.pid));
                self.save().await;
            }
            AgentEvent::Exited { status, code } => {
                self.exited(t, status, code).await;
                return true;
            }
        }
        false
    }

    async fn ask_permission(
        &mut self,
        t: &mut Transcript,
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        reply: oneshot::Sender<Option<String>>,
    ) {
        t.append(
            &self.wb,
            EntryKind::Permission,
            Some(title.clone()),
            Some(tool_call_id),
            None,
        )
        .await;
        let choices = inbox_choices(&options);
        let listed: Vec<String> = options
            .iter()
            .map(|o| format!("{} ({})", o.name, o.kind.replace('_', " ")))
            .collect();
        let sent = self
            .wb
            .send(SendParams {
                session_id: self.session.id.clone(),
                msg_type: MsgType::ApprovalRequired,
                title: title.clone(),
                body: Some(format!(
                    "The agent asks for permission and waits for your answer.\nOptions: {}",
                    listed.join(", ")
                )),
                options: (!choices.is_empty())
                    .then(|| choices.iter().map(|(shown, _)| shown.clone()).collect()),
            })
            .await;
        match sent {
            Ok(message) => {
                self.blocking.insert(message.id.clone());
                self.permissions.insert(
                    message.id,
                    Pending {
                        title,
                        choices,
                        reply,
                    },
                );
                self.settle(t).await;
            }
            Err(e) => {
                let _ = reply.send(None);
                t.append(
                    &self.wb,
                    EntryKind::Error,
                    Some(format!("could not ask for permission ({e}); refused it")),
                    None,
                    None,
                )
                .await;
            }
        }
    }

    /// An answer to one of this session's blocking messages.
    async fn answered(&mut self, t: &mut Transcript, message: &InboxMessage) {
        self.blocking.remove(&message.id);
        if let Some(pending) = self.permissions.remove(&message.id) {
            let response = message.response.clone().unwrap_or_default();
            let chosen = pending
                .choices
                .iter()
                .find(|(shown, _)| *shown == response)
                .map(|(_, id)| id.clone());
            let status = if chosen.is_some() {
                response
            } else {
                "withdrawn".into()
            };
            let _ = pending.reply.send(chosen);
            t.append(
                &self.wb,
                EntryKind::Permission,
                Some(pending.title),
                None,
                Some(status),
            )
            .await;
        }
        self.settle(t).await;
    }

    async fn end_turn(&mut self, t: &mut Transcript, ended: Result<String, TurnFailure>) {
        t.flush(&self.wb).await;
        // A turn whose output or state could not all be stored did not complete.
        let failure = t.take_failure().or_else(|| self.store_failure.take());
        let ended = match (ended, failure) {
            (Ok(_), Some(why)) => Err(TurnFailure::Failed(why)),
            (ended, _) => ended,
        };
        match ended {
            Ok(reason) => {
                self.turn = false;
                self.after_turn().await;
                t.append(
                    &self.wb,
                    EntryKind::TurnEnd,
                    None,
                    None,
                    Some(reason.clone()),
                )
                .await;
                self.withdraw_permissions(t, "the turn ended").await;
                if let Some(next) = self.queue.pop_front() {
                    self.start_turn(t, next).await;
                    return;
                }
                let note = (reason != "end_turn").then(|| format!("stopped: {reason}"));
                self.set_state(t, SessionState::Complete, note).await;
                if reason != "cancelled" {
                    let mut body = clip(self.reply.trim(), SUMMARY_CHARS);
                    if reason != "end_turn" {
                        body = format!("(the turn stopped: {reason})\n\n{body}");
                    }
                    self.message(
                        MsgType::TaskComplete,
                        format!("Done: {}", clip(first_line(&self.prompt), 80)),
                        Some(body).filter(|b| !b.is_empty()),
                    )
                    .await;
                }
            }
            // The connection is gone; the exit that follows says why.
            Err(TurnFailure::Lost) => self.turn = false,
            Err(TurnFailure::Failed(why)) => {
                self.turn = false;
                self.after_turn().await;
                let dropped = self.queue.len();
                self.queue.clear();
                self.withdraw_permissions(t, "the turn failed").await;
                t.append(&self.wb, EntryKind::Error, Some(why.clone()), None, None)
                    .await;
                let reason = format!("the agent failed the turn: {why}");
                self.set_state(t, SessionState::Error, Some(reason.clone()))
                    .await;
                let mut body =
                    format!("{reason}\n\nThe agent is still running; send a prompt to try again.");
                if dropped > 0 {
                    body.push_str(&format!(" {dropped} queued prompt(s) were dropped."));
                }
                let body = self.with_stderr(body);
                self.message(MsgType::Error, "Turn failed".into(), Some(body))
                    .await;
            }
        }
    }

    async fn exited(&mut self, t: &mut Transcript, status: String, code: Option<i32>) {
        t.flush(&self.wb).await;
        // The agent's handle dies with it.
        if let Err(e) = self.wb.revoke_handles(&self.session.id).await {
            tracing::error!(session = %self.session.id, "cannot revoke the handle: {e}");
        }
        let why = match self.stopping {
            Some(Stopping::Shutdown) => "the daemon is shutting down",
            Some(Stopping::Requested) => "the session was stopped",
            None => "the agent exited",
        };
        self.withdraw_permissions(t, why).await;
        if self.stopping == Some(Stopping::Shutdown) {
            // Left as it is, with its agent pid: the next daemon resumes it honestly.
            return;
        }
        // Questions the agent asked itself (`cru ask`) can no longer be answered.
        let note = format!("withdrawn: {why}");
        if let Err(e) = self.wb.withdraw_open(&self.session.id, &note).await {
            tracing::warn!(session = %self.session.id, "cannot withdraw open questions: {e}");
        }
        self.blocking.clear();
        self.session.agent_pid = None;
        self.session.ended_at = Some(now_rfc3339());
        self.session.exit_code = code;
        if self.stopping == Some(Stopping::Requested) {
            self.set_state(
                t,
                SessionState::Stopped,
                Some(format!("stopped; the agent {status}")),
            )
            .await;
        } else if self.reported {
            self.save().await;
        } else {
            let reason = format!("the agent {status}");
            t.append(&self.wb, EntryKind::Error, Some(reason.clone()), None, None)
                .await;
            self.set_state(t, SessionState::Error, Some(reason.clone()))
                .await;
            let interrupted = if self.turn {
                " in the middle of a turn"
            } else {
                ""
            };
            self.message(
                MsgType::Error,
                format!("Agent {status}"),
                Some(self.with_stderr(format!(
                    "The agent of this session {status}{interrupted}. Other sessions are not affected; \
                     the worktree and transcript are kept."
                ))),
            )
            .await;
        }
    }

    async fn on_command(&mut self, t: &mut Transcript, command: Command) {
        match command {
            Command::Prompt { text, ack } => {
                if self.stopping.is_some() {
                    // Dropping the ack tells the caller the agent is not running.
                    return;
                }
                if self.turn || !self.ready {
                    self.queue.push_back(text);
                    let _ = ack.send(true);
                } else {
                    let _ = ack.send(false);
                    self.start_turn(t, text).await;
                }
            }
            Command::Cancel { ack } => {
                self.queue.clear();
                if self.turn {
                    self.agent.cancel();
                    self.withdraw_permissions(t, "the turn was cancelled").await;
                    self.settle(t).await;
                }
                let _ = ack.send(());
            }
            Command::Stop { ack, shutdown } => {
                self.stoppers.push(ack);
                if self.stopping.is_none() {
                    self.stopping = Some(if shutdown {
                        Stopping::Shutdown
                    } else {
                        Stopping::Requested
                    });
                    self.agent.stop();
                }
            }
            Command::Inbox(message) => {
                if message.session_id != self.session.id {
                    return;
                }
                if message.responded {
                    self.answered(t, &message).await;
                } else {
                    self.blocking.insert(message.id);
                    self.settle(t).await;
                }
            }
            Command::Resync => {
                let open: HashSet<String> = match self.wb.open_blocking(&self.session.id).await {
                    Ok(open) => open.into_iter().collect(),
                    Err(e) => {
                        tracing::warn!(session = %self.session.id, "cannot resync: {e}");
                        return;
                    }
                };
                let closed: Vec<String> = self
                    .blocking
                    .iter()
                    .filter(|id| !open.contains(*id))
                    .cloned()
                    .collect();
                self.blocking = open;
                for id in closed {
                    if let Ok(message) = self.wb.get_message(&id).await {
                        self.answered(t, &message).await;
                    }
                }
                self.settle(t).await;
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
        format!(
            "{text}\n\nLast lines of its stderr ({}):\n{}",
            path.display(),
            tail.join("\n")
        )
    }
}

/// The options an approval shows: the agent's option names, made unique when two
/// differ only in case, each with the ACP option id it stands for.
fn inbox_choices(options: &[PermissionChoice]) -> Vec<(String, String)> {
    let mut seen = HashSet::new();
    options
        .iter()
        .filter(|o| !o.name.trim().is_empty() || !o.id.is_empty())
        .map(|o| {
            let name = if o.name.trim().is_empty() {
                o.id.clone()
            } else {
                o.name.trim().to_string()
            };
            let shown = if seen.insert(name.to_lowercase()) {
                name
            } else {
                format!("{name} ({})", o.id)
            };
            seen.insert(shown.to_lowercase());
            (shown, o.id.clone())
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(id: &str, name: &str) -> PermissionChoice {
        PermissionChoice {
            id: id.into(),
            name: name.into(),
            kind: "allow_once".into(),
        }
    }

    #[test]
    fn inbox_choices_are_unique_and_map_back() {
        let choices = inbox_choices(&[
            choice("a", "Allow"),
            choice("b", "allow"),
            choice("r", "Reject"),
            choice("x", " "),
        ]);
        assert_eq!(
            choices,
            vec![
                ("Allow".to_string(), "a".to_string()),
                ("allow (b)".to_string(), "b".to_string()),
                ("Reject".to_string(), "r".to_string()),
                ("x".to_string(), "x".to_string()),
            ]
        );
    }
}
