//! The lifecycle of one running session as a pure state machine: [`Machine::step`] takes
//! one [`SessionInput`] (what the agent did, what a person asked, what the store answered) and
//! returns the [`Effect`]s to carry out, in order. It does no I/O: no awaits, no store,
//! no channels. The actor ([`super::actor`]) feeds it and carries the effects out.
//!
//! Some effects ask something only I/O can tell: what the transcript kept of a chunk
//! ([`Effect::Stream`]), the id the inbox gave an approval ([`Effect::Ask`]), which
//! messages are still open ([`Effect::ReadOpen`], [`Effect::ReadAnswers`]). The answer
//! comes back as the next input, before the remaining effects are carried out. A store
//! write that fails comes back as [`SessionInput::StoreFailed`]: the first one since the last
//! turn ended makes that turn end in `error`, never `complete`.
//!
//! The approval gate is part of it ([`gating`]): the rules' judgement of what the agent
//! asks for is an input, and replying, auditing, granting a credential and remembering
//! an approved operation are effects. How the agent starts, is ready and exits is in
//! [`lifecycle`].

mod approvals;
mod budgeting;
mod doings;
mod effect;
mod gating;
mod input;
mod lifecycle;
mod limited;
mod planning;
mod prompts;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use super::wording;
use crate::agent::{AgentEvent, PermissionChoice, TurnFailure};
use crate::audit::AuditEvent;
use crate::config::AgentKind;
use crate::config::Price;
use crate::context::Message;
use crate::protocol::{EntryKind, Flagged, MsgType, SessionState, Spent, Usage};
use crate::sessions::budget::Over;
use approvals::Approval;
#[cfg(test)]
use approvals::inbox_choices;
use gating::set_rule;

pub(super) use effect::{Effect, Line, RecordChange, Reply};
pub(super) use gating::{GateReply, GateRequest};
pub(super) use input::SessionInput;
pub(super) use planning::review_options;

/// How much of a reply is kept for the `task_complete` message.
const REPLY_BYTES: usize = 64 * 1024;

/// A permission request of the agent, numbered by the actor, which keeps the agent's
/// reply channel under that number.
pub(super) type Key = u64;

/// Where the session's agent is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    /// Started, not yet ready: initialising, opening or reloading its session.
    Starting,
    /// It could not start or resume; it was told to stop, and its exit is awaited.
    StartFailed,
    /// Ready, with no turn running.
    Idle,
    /// A turn runs.
    Turn(Turn),
    /// The agent is gone; the actor ends.
    Ended,
}

/// The running turn: its prompt and what the agent replied so far.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Turn {
    prompt: String,
    reply: String,
}

/// A stop that was asked for; the agent's exit is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// A person stopped the session.
    Requested,
    /// The daemon is going away: the session keeps its state for the next daemon.
    Shutdown,
    /// Idle too long: the environment goes, the session stays.
    Park,
    /// Ended by crucible (a context miss): the reason is in `Machine::terminated`.
    Terminated,
}

/// How a machine starts.
pub(super) struct MachineSetup {
    pub kind: AgentKind,
    /// The agent's process.
    pub agent_pid: u32,
    /// The state the session record has now.
    pub state: Option<SessionState>,
    /// Set when resuming after a restart: the state the session had then.
    pub resumed_from: Option<SessionState>,
    /// A prompt to start on as soon as the agent is ready.
    pub first_prompt: Option<String>,
    /// What the session record keeps of its prompts: those acknowledged and not yet
    /// sent, and the prompt of a turn that never ended (it was cut short).
    pub queued: Vec<String>,
    pub turn_prompt: Option<String>,
    /// The skills and usage the session record has now.
    pub skills: Vec<String>,
    pub usage: Option<Usage>,
    /// What the session spent so far, and the price of its tokens when its agent tells
    /// no cost.
    pub spent: Spent,
    pub price: Option<Price>,
    /// Whether the agent's plans are reviewed before it acts on them.
    pub plan_review: bool,
}

/// A running session's state. The phase says where its agent is; a stop can be asked
/// for in any phase and changes only what the agent's exit means (and that prompts are
/// refused meanwhile); the rest is what the session keeps across events: prompts queued,
/// the inbox messages it waits on, the approvals the agent waits on, what the context
/// stack has yet to be told, and the first store failure of the turn.
pub(super) struct Machine {
    kind: AgentKind,
    agent_pid: u32,
    resumed_from: Option<SessionState>,
    phase: Phase,
    stop: Option<Stop>,
    /// The state the session record was last given.
    state: Option<SessionState>,
    queue: VecDeque<String>,
    /// The prompt of the turn that was cut short (a restart, the agent's end): sent
    /// again on request; meanwhile nothing queued behind it starts on its own.
    cut: Option<String>,
    /// Open decisions and approvals of this session.
    blocking: BTreeSet<String>,
    /// Approvals being posted, and those posted (by message id), oldest first.
    posting: HashMap<Key, Approval>,
    approvals: Vec<(String, Approval)>,
    /// Agent text not yet pushed onto the context stack. The agent may speak outside a
    /// turn too (a reloaded session replays some of its history).
    unsaid: String,
    /// Tool calls of this session on the stack: id → title, and those with a result.
    tool_titles: HashMap<String, String>,
    tool_results: HashSet<String>,
    /// The first failed store write since the last turn ended.
    failure: Option<String>,
    /// Why crucible ended the session, for [`Stop::Terminated`]; once set, nothing more
    /// goes through the gate.
    terminated: Option<String>,
    /// The skills and usage the agent last told, as the session record has them.
    skills: Vec<String>,
    usage: Option<Usage>,
    /// What the session spent, as its record has it.
    spent: Spent,
    price: Option<Price>,
    /// The budget the session is over, if any: no turn starts meanwhile.
    over: Option<Over>,
    /// The inbox question about it: being asked, or asked (its message id).
    budget_question: Option<Option<String>>,
    /// The running turn was asked to end because a budget was reached.
    cut_by_budget: bool,
    /// Parked on a usage limit: no turn starts until it resets.
    limited: bool,
    /// Parked on a limit the agent announced, with the fallback chain not yet asked:
    /// the next prompt to run asks it.
    fall_back_ahead: bool,
    /// The agent's plan and its review.
    plan: planning::Planning,
}

type Effects = Vec<Effect>;

impl Machine {
    pub fn new(setup: MachineSetup) -> Self {
        Self {
            kind: setup.kind,
            agent_pid: setup.agent_pid,
            resumed_from: setup.resumed_from,
            phase: Phase::Starting,
            stop: None,
            state: setup.state,
            // A first prompt given with the start (an unpark's) moves on from a cut turn.
            cut: setup.turn_prompt.filter(|_| setup.first_prompt.is_none()),
            queue: setup.queued.into_iter().chain(setup.first_prompt).collect(),
            terminated: None,
            blocking: BTreeSet::new(),
            posting: HashMap::new(),
            approvals: Vec::new(),
            unsaid: String::new(),
            tool_titles: HashMap::new(),
            tool_results: HashSet::new(),
            failure: None,
            skills: setup.skills,
            usage: setup.usage,
            spent: setup.spent,
            price: setup.price,
            over: None,
            budget_question: None,
            cut_by_budget: false,
            limited: false,
            fall_back_ahead: false,
            plan: planning::Planning::new(setup.plan_review),
        }
    }

    /// Whether the agent feeds the context stack itself (the internal agent) rather than
    /// the session feeding it from the agent's events.
    fn feeds_itself(&self) -> bool {
        self.kind == AgentKind::Internal
    }

    /// What `input` changes, and the effects to carry out for it, in order.
    pub fn step(&mut self, input: SessionInput) -> Effects {
        let mut fx = Vec::new();
        match input {
            SessionInput::Start => self.start(&mut fx),
            SessionInput::Agent(event) => self.agent(&mut fx, event),
            SessionInput::Kept { kind, text } => self.kept(kind, &text),
            SessionInput::Gate(request) => self.gate(&mut fx, request),
            SessionInput::Judged {
                request,
                judgement,
                changed,
            } => self.judged(&mut fx, request, judgement, changed),
            SessionInput::Credential {
                key,
                name,
                approved,
            } => self.credential(&mut fx, key, name, approved),
            SessionInput::Usage { usage, day } => self.usage(&mut fx, usage, &day),
            SessionInput::TurnTokens { tokens, day } => self.turn_tokens(&mut fx, tokens, day),
            SessionInput::Budget(over) => self.budget(&mut fx, over),
            SessionInput::BudgetNear(near) => {
                for what in near {
                    fx.push(Effect::Post(wording::budget_near(&what)));
                }
            }
            SessionInput::BudgetAsked(result) => self.budget_asked(&mut fx, result),
            SessionInput::PlanAsked(result) => self.plan_asked(&mut fx, result),
            SessionInput::SetRule { rule, enabled } => set_rule(&mut fx, rule, enabled),
            SessionInput::Posted { key, result } => self.posted(&mut fx, key, result),
            SessionInput::TurnLimited { why, wait, resumes } => {
                self.turn_limited(&mut fx, why, wait, &resumes)
            }
            SessionInput::LimitReset => self.limit_reset(&mut fx),
            SessionInput::LimitAhead { why, wait, resumes } => {
                self.limit_ahead(&mut fx, why, wait, &resumes)
            }
            SessionInput::Prompt(text) => self.prompt(&mut fx, text),
            SessionInput::Resend => self.resend(&mut fx),
            SessionInput::Cancel => self.cancel(&mut fx),
            SessionInput::Stop { shutdown } => self.stop(&mut fx, shutdown),
            SessionInput::Park => self.park(&mut fx),
            SessionInput::Opened(id) => {
                self.blocking.insert(id);
                self.settle(&mut fx);
            }
            SessionInput::Answered { id, response, by } => {
                self.answered(&mut fx, &id, response, by.as_deref())
            }
            SessionInput::Resync => fx.push(Effect::ReadOpen),
            SessionInput::CarriedAnswer { id, prompt } => {
                self.blocking.remove(&id);
                self.prompt(&mut fx, prompt);
            }
            SessionInput::Open(open) => self.open(&mut fx, open),
            SessionInput::Closed(answers) => {
                for (id, response, by) in answers {
                    self.answered(&mut fx, &id, response, by.as_deref());
                }
                self.settle(&mut fx);
            }
            SessionInput::StoreFailed(why) => {
                self.failure.get_or_insert(why);
            }
        }
        fx
    }

    fn set_state(&mut self, fx: &mut Effects, state: SessionState, reason: Option<String>) {
        self.state = Some(state);
        fx.push(Effect::SetState { state, reason });
    }

    /// Working or waiting, from whether a blocking message is open.
    fn settle(&mut self, fx: &mut Effects) {
        if !matches!(self.phase, Phase::Turn(_)) {
            return;
        }
        let want = if self.blocking.is_empty() {
            SessionState::Working
        } else {
            SessionState::Waiting
        };
        if self.state != Some(want) {
            self.set_state(fx, want, None);
        }
    }

    fn cancel(&mut self, fx: &mut Effects) {
        self.queue.clear();
        self.cut = None;
        self.keep_prompts(fx);
        // Nothing waits for a budget any more.
        self.cut_by_budget = false;
        self.withdraw_budget_question(fx, wording::TURN_CANCELLED);
        if matches!(self.phase, Phase::Turn(_)) {
            fx.push(Effect::CancelTurn);
            self.withdraw_approvals(fx, wording::TURN_CANCELLED);
            self.withdraw_plan(fx, wording::TURN_CANCELLED);
            self.settle(fx);
        }
        fx.push(Effect::Reply(Reply::Cancelled));
    }

    fn kept(&mut self, kind: EntryKind, text: &str) {
        if kind != EntryKind::Message {
            return;
        }
        if let Phase::Turn(turn) = &mut self.phase
            && turn.reply.len() < REPLY_BYTES
        {
            turn.reply.push_str(text);
        }
        if !self.feeds_itself() {
            self.unsaid.push_str(text);
        }
    }

    /// Pushes the agent's text so far as one agent entry.
    fn push_said(&mut self, fx: &mut Effects) {
        let text = std::mem::take(&mut self.unsaid);
        if !text.trim().is_empty() {
            fx.push(Effect::Push(Message::Agent { text }));
        }
    }

    fn turn_ended(&mut self, fx: &mut Effects, ended: Result<String, TurnFailure>) {
        if !matches!(self.phase, Phase::Turn(_)) {
            // Not in a turn: nothing to end (agents end only the turns they were given).
            return;
        }
        let Phase::Turn(turn) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        self.plan_turn_ended(fx);
        // A turn whose output or state could not all be stored did not complete.
        let ended = match (ended, self.failure.take()) {
            (Ok(_), Some(why)) => Err(TurnFailure::Failed(why)),
            (ended, _) => ended,
        };
        // Only a turn the budget cut short goes on once it is raised.
        if !matches!(&ended, Ok(reason) if reason == "cancelled") {
            self.cut_by_budget = false;
        }
        match ended {
            Ok(reason) => {
                self.note_prompts(fx);
                self.after_turn(fx);
                let line = Line::new(EntryKind::TurnEnd).status(&reason);
                fx.push(Effect::Append(line));
                self.withdraw_approvals(fx, wording::TURN_ENDED);
                if self.next_turn(fx) {
                    return;
                }
                let note = match &self.over {
                    Some(over) => Some(over.title()),
                    None => wording::stopped_for(&reason),
                };
                let state = if reason == "cancelled" {
                    SessionState::Cancelled
                } else {
                    SessionState::Complete
                };
                self.set_state(fx, state, note);
                if reason != "cancelled" {
                    let notice = wording::done(&turn.prompt, &turn.reply, &reason);
                    fx.push(Effect::Post(notice));
                }
            }
            // The connection is gone; the exit that follows says why, and the turn did
            // not end: it was cut short.
            Err(TurnFailure::Lost) => self.cut = Some(turn.prompt),
            Err(TurnFailure::Failed(why)) => {
                let dropped = self.queue.len();
                self.queue.clear();
                self.note_prompts(fx);
                self.after_turn(fx);
                self.withdraw_approvals(fx, wording::TURN_FAILED);
                fx.push(Effect::Append(Line::new(EntryKind::Error).text(&why)));
                let (reason, notice) = wording::turn_failed(&why, dropped);
                self.set_state(fx, SessionState::Error, Some(reason));
                fx.push(Effect::Post(notice));
            }
        }
    }

    /// After every turn: what the agent said onto the stack, the turn counted.
    fn after_turn(&mut self, fx: &mut Effects) {
        self.push_said(fx);
        fx.push(Effect::RecordTurn);
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
