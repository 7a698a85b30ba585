//! One running session: the task that owns its agent. It serialises everything that
//! happens to the session (agent events, human commands, inbox answers), so its state,
//! transcript and messages never race each other. What each of those means for the
//! session, the approval gate included, is decided by its [`Machine`]; this loop feeds
//! it what it hears ([`inputs`]) and carries out the effects it returns ([`effects`]):
//! the store, the inbox, the context stack, the audit log, the rules, the agent.

mod effects;
mod inputs;
mod watch;

pub(super) use watch::{Fallback, MemoryWatch};

use inputs::Waiting;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::budget::Budgets;
use super::command::Command;
use super::context::{preamble, summary};
use super::guard::credential::CredentialError;
use super::guard::gate::Gate;
use super::machine::{
    Effect, GateRequest, Key, Machine, MachineSetup, RecordChange, Reply, SessionInput,
};
use super::transcript::TranscriptWriter;
use super::wording::{self, Notice};
use crate::agent::{AgentError, AgentEvent, AgentHandle};
use crate::audit::{Audit, AuditEvent};
use crate::config::AgentProfile;
use crate::context::ContextOp;
use crate::context::Message;
use crate::ledger::{ContextState, Ledger, now_rfc3339};
use crate::protocol::{SecurityState, Session, SessionState};

/// How many lines of an agent's stderr an error message quotes, read from at most this
/// many bytes at its end (a chatty agent's log can be large).
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_BYTES: u64 = 16 * 1024;

pub(super) struct Actor {
    ledger: Arc<Ledger>,
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
    /// Requests for the gate waiting for an answer, by the key the machine knows them by.
    waiting: HashMap<Key, Waiting>,
    next_key: Key,
    /// The acknowledgement the command being handled waits for.
    prompt_ack: Option<oneshot::Sender<bool>>,
    resend_ack: Option<oneshot::Sender<Option<bool>>>,
    cancel_ack: Option<oneshot::Sender<()>>,
    rule_ack: Option<oneshot::Sender<SecurityState>>,
    /// Everyone waiting for the agent to be gone.
    stoppers: Vec<oneshot::Sender<()>>,
    finished: bool,
    audit: Audit,
    gate: Gate,
    /// How long the session may sit complete before its environment is torn down
    /// (`None`: never, as for the local driver).
    idle_after: Option<std::time::Duration>,
    /// Since when it has sat complete.
    idle_since: Option<tokio::time::Instant>,
    /// When the usage limit the session is parked for resets.
    limit_deadline: Option<tokio::time::Instant>,
    /// Open questions carried from the daemon the session moved from: id → title.
    carried: HashMap<String, String>,
    /// The session is moving to another daemon: nothing of it is written (see
    /// [`Command::Hold`]).
    held: bool,
    /// A limit the agent announced ahead: why, and when it resets.
    ahead: Option<(String, crate::agent::usage_limit::UsageLimit)>,
    /// The budget keeper, and word from it that a verdict may have changed.
    budgets: Arc<Budgets>,
    budget_changes: tokio::sync::watch::Receiver<u64>,
    /// Where the task goes on when the agent hits a usage limit (taken when used).
    fallback: Option<Fallback>,
    /// The memory the session's limits allow its agent, in bytes, and what is watched
    /// of it while a turn runs ([`MemoryWatch`]).
    memory: Option<MemoryWatch>,
}

/// How an actor starts.
pub(super) struct ActorSetup {
    pub profile: AgentProfile,
    pub system: String,
    /// Set when resuming after a restart: the state the session had then.
    pub resumed_from: Option<SessionState>,
    pub first_prompt: Option<String>,
    pub idle_after: Option<std::time::Duration>,
    /// The session's folder as the agent names it, when not the host's path.
    pub agent_cwd: Option<std::path::PathBuf>,
    /// The daemon's rules.
    pub rules: Arc<super::guard::rule_files::RuleBook>,
    /// The daemon's budget keeper.
    pub budgets: Arc<Budgets>,
    /// Where the agent runs: what its memory is read from.
    pub environment: Arc<crate::driver::Environment>,
    pub fallback: Option<Fallback>,
    /// Open questions of the agent of the daemon the session moved from: id → title.
    pub carried: Vec<(String, String)>,
}

impl Actor {
    pub fn new(
        ledger: Arc<Ledger>,
        session: Session,
        agent: AgentHandle,
        events: mpsc::UnboundedReceiver<AgentEvent>,
        commands: mpsc::UnboundedReceiver<Command>,
        setup: ActorSetup,
    ) -> Self {
        let ActorSetup {
            profile,
            system,
            resumed_from,
            first_prompt,
            idle_after,
            agent_cwd,
            rules,
            budgets,
            environment,
            fallback,
            carried,
        } = setup;
        let audit = Audit::new(ledger.kiln());
        let folder = std::path::PathBuf::from(super::context::folder(&ledger, &session));
        let mut worktrees = vec![folder];
        worktrees.extend(agent_cwd);
        let gate = Gate::new(rules, worktrees);
        let machine = Machine::new(MachineSetup {
            kind: profile.kind,
            agent_pid: agent.pid,
            state: session.state,
            resumed_from,
            first_prompt,
            queued: session.queued.clone(),
            turn_prompt: session.turn_prompt.clone(),
            skills: session.skills.clone(),
            usage: session.usage.clone(),
            spent: session.spent.clone().unwrap_or_default(),
            price: budgets.price(&session.agent_name),
            plan_review: profile.plan_review,
        });
        let budget_changes = budgets.subscribe();
        let memory = session
            .driver
            .as_ref()
            .and_then(|d| d.memory())
            .map(|mib| MemoryWatch {
                cap: mib.saturating_mul(1024 * 1024),
                next: None,
                warned: false,
                oom_seen: environment.oom_kills().unwrap_or(0),
                oom_at: None,
                environment,
            });
        Self {
            ledger,
            session,
            agent,
            events,
            commands,
            profile,
            system,
            machine,
            todo: VecDeque::new(),
            waiting: HashMap::new(),
            next_key: 0,
            prompt_ack: None,
            resend_ack: None,
            cancel_ack: None,
            rule_ack: None,
            stoppers: Vec::new(),
            finished: false,
            audit,
            gate,
            idle_after,
            idle_since: None,
            limit_deadline: None,
            ahead: None,
            held: false,
            carried: carried.into_iter().collect(),
            budgets,
            budget_changes,
            fallback,
            memory,
        }
    }

    pub fn id(&self) -> &str {
        &self.session.id
    }

    /// Runs the session until its agent is gone; what it logs carries the session's id.
    pub async fn run(self) {
        let span = crate::logging::session_span(&self.session.id);
        self.serve().instrument(span).await;
    }

    async fn serve(mut self) {
        let mut transcript = TranscriptWriter::open(&self.ledger, &self.session).await;
        let t = &mut transcript;
        self.feed(t, SessionInput::Start).await;
        // The person's day limit counts the other kilns: asked before the first turn.
        self.budgets.refresh_others().await;
        let verdict = self.budget_verdict();
        self.feed(t, SessionInput::Budget(verdict)).await;
        while !self.finished {
            let idle_deadline = self
                .idle_after
                .zip(self.idle_since)
                .map(|(after, since)| since + after);
            let memory_due = self.memory_due();
            tokio::select! {
                _ = tokio::time::sleep_until(memory_due.unwrap_or_else(tokio::time::Instant::now)), if memory_due.is_some() => {
                    self.check_memory().await;
                }
                _ = tokio::time::sleep_until(idle_deadline.unwrap_or_else(tokio::time::Instant::now)), if idle_deadline.is_some() => {
                    self.idle_since = None;
                    self.feed(t, SessionInput::Park).await;
                }
                _ = tokio::time::sleep_until(self.limit_deadline.unwrap_or_else(tokio::time::Instant::now)), if self.limit_deadline.is_some() => {
                    self.limit_deadline = None;
                    self.feed(t, SessionInput::LimitReset).await;
                }
                Ok(()) = self.budget_changes.changed() => {
                    let verdict = self.budget_verdict();
                    self.feed(t, SessionInput::Budget(verdict)).await;
                }
                event = self.events.recv() => {
                    let Some(event) = event else { break };
                    if let Some(input) = self.on_event(t, event).await {
                        self.feed(t, input).await;
                    }
                }
                Some(command) = self.commands.recv() => {
                    if let Some(input) = self.on_command(command) {
                        if matches!(input, SessionInput::Prompt(_)) {
                            // A turn may start: judged with the other kilns' spending of now.
                            self.budgets.refresh_others().await;
                            let verdict = self.budget_verdict();
                            self.feed(t, SessionInput::Budget(verdict)).await;
                        }
                        self.feed(t, input).await;
                    }
                    // Every command is answered by now; an ack left over means "not running".
                    self.prompt_ack = None;
                    self.resend_ack = None;
                    self.cancel_ack = None;
                    self.rule_ack = None;
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

    /// Whether the session is over a budget, as the keeper judges now.
    fn budget_verdict(&self) -> Option<super::budget::Over> {
        let spent = self.session.spent.clone().unwrap_or_default();
        self.budgets
            .judge(&self.session.id, &self.session.agent_name, &spent)
    }

    /// Steps the machine and carries out the effects, with those of any answer (what an
    /// effect found out) ahead of the ones still waiting.
    async fn feed(&mut self, t: &mut TranscriptWriter, input: SessionInput) {
        self.step(input);
        while let Some(effect) = self.todo.pop_front() {
            self.perform(t, effect).await;
        }
    }

    fn step(&mut self, input: SessionInput) {
        for effect in self.machine.step(input).into_iter().rev() {
            self.todo.push_front(effect);
        }
    }

    /// Ends the message streaming in.
    async fn flush(&mut self, t: &mut TranscriptWriter) {
        t.flush(&self.ledger).await;
        self.check(t);
    }

    /// Tells the machine when the transcript could not store an entry.
    fn check(&mut self, t: &mut TranscriptWriter) {
        if let Some(why) = t.take_failure() {
            self.step(SessionInput::StoreFailed(why));
        }
    }

    /// Tells the machine a store write failed.
    fn failed_to_store(&mut self, what: &str, e: impl std::fmt::Display) {
        tracing::error!("cannot {what}: {e}");
        self.step(SessionInput::StoreFailed(wording::store_failed(what, e)));
    }

    async fn save(&mut self) {
        // The name and the channel's record are changed from outside the actor (rename,
        // channel messages): keep them as they are now.
        if let Ok(now) = self.ledger.get_session(&self.session.id) {
            self.session.display_name = now.display_name;
            self.session.channel = now.channel;
        }
        match self.ledger.save_managed(&self.session).await {
            Ok(saved) => self.session = saved,
            Err(e) => self.failed_to_store("save the session", e),
        }
    }

    async fn post(&mut self, notice: Notice) {
        let mut notice = notice;
        if notice.stderr_tail {
            notice.body = notice.body.map(|body| self.with_stderr(body));
        }
        let sent = self.ledger.send(notice.into_params(&self.session.id)).await;
        if let Err(e) = sent {
            self.failed_to_store("post to the inbox", e);
        }
    }

    /// Pushes onto the session's context stack.
    async fn push(&mut self, message: Message) {
        let system = self.system.clone();
        let pushed = self
            .ledger
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
        match self.ledger.context(&self.session.id, move || system).await {
            Ok(state) => Some(state),
            Err(e) => {
                tracing::error!("cannot read the context stack: {e}");
                None
            }
        }
    }

    /// `text`, then the last lines the agent wrote to stderr, if any.
    fn with_stderr(&self, text: String) -> String {
        let path = self
            .ledger
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
