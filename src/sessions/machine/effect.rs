//! What the session machine asks the actor to carry out.

use super::{GateReply, GateRequest, Key};
use crate::audit::AuditEvent;
use crate::context::Message;
use crate::protocol::{EntryKind, Flagged, SecurityState, SessionState, Spent, Usage};
use crate::sessions::budget::{Charge, Raise, Scope};
use crate::sessions::wording::Notice;

/// What the actor carries out.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::sessions) enum Effect {
    /// Changes the session record without saving it; the next save stores it.
    Record(RecordChange),
    /// A `state` transcript entry, then the record's state and reason, saved.
    SetState {
        state: SessionState,
        reason: Option<String>,
    },
    /// Saves the session record.
    Save,
    /// Counts the finished turn, refreshes the context summary, saves the record.
    RecordTurn,
    /// Appends a transcript entry (ending the message streaming in).
    Append(Line),
    /// Streams agent text into the transcript; answered with [`SessionInput::Kept`].
    Stream {
        kind: EntryKind,
        text: String,
        message_id: Option<String>,
    },
    /// Sends an inbox message of this session.
    Post(Notice),
    /// Posts the approval the agent waits for; answered with [`SessionInput::Posted`].
    Ask {
        key: Key,
        title: String,
        body: String,
        options: Option<Vec<String>>,
        /// Each option's ACP kind, in order.
        kinds: Option<Vec<String>>,
        /// The rule that asked and the operation, when a rule asks.
        flagged: Option<Flagged>,
    },
    /// Counts what the session spent with the budget keeper; answered with
    /// [`SessionInput::BudgetNear`] when that brought a budget near its end.
    Spend { charge: Charge, day: String },
    /// Asks in the inbox whether to raise a budget or stop; answered with
    /// [`SessionInput::BudgetAsked`].
    AskBudget {
        title: String,
        body: String,
        options: Vec<String>,
    },
    /// Asks in the inbox for the review of the agent's plan of `steps` steps; answered
    /// with [`SessionInput::PlanAsked`].
    AskPlan {
        title: String,
        body: String,
        steps: usize,
    },
    /// Raises a budget (a day's, with the keeper; a session's own is on its record).
    RaiseBudget { scope: Scope, raise: Raise },
    /// Has the rules judge a request; answered with [`SessionInput::Judged`].
    Judge(GateRequest),
    /// Answers whoever waits on gated request `key`.
    ReplyGate { key: Key, reply: GateReply },
    /// Gives the credential asked for as request `key` (approved for the session).
    Grant { key: Key, name: String },
    /// Adds a record to the session's audit log.
    Audit(AuditEvent),
    /// Closes one inbox message with a note.
    Withdraw { message_id: String, note: String },
    /// Closes every open blocking message of the session with a note.
    WithdrawOpen { note: String },
    /// Makes the session's context stack, with its system entry, if it has none.
    OpenContext,
    /// Pushes a message onto the session's context stack.
    Push(Message),
    /// Pushes the prompt onto the context stack and sends it to the agent. With `renew`,
    /// an agent whose context shrank gets a fresh session, seeded with the stack as it
    /// was before this prompt.
    Prompt { text: String, renew: bool },
    /// Asks the agent to end its turn.
    CancelTurn,
    /// The task goes on along the session's fallback chain (if its profile has one),
    /// from the limit the agent announced.
    FallBack,
    /// Wakes the session after this long with [`SessionInput::LimitReset`].
    WakeAfter(std::time::Duration),
    /// Ends the agent; [`SessionInput::Exited`] follows.
    StopAgent,
    /// Revokes the session's handles: the agent's handle dies with it.
    RevokeHandles,
    /// The context stack no longer asks for a fresh agent session.
    ClearFreshStart,
    /// The context stack asks for a fresh agent session (seeded with the stack): the
    /// agent could not take back the one it had.
    SeedFresh,
    /// Reads the session's open blocking messages; answered with [`SessionInput::Open`].
    ReadOpen,
    /// Reads the answers of these messages; answered with [`SessionInput::Closed`].
    ReadAnswers(Vec<String>),
    /// Answers the person whose command is being handled.
    Reply(Reply),
    /// The agent is gone: the actor ends, and everyone waiting for the stop is told.
    Finish,
}

/// A change to the session record.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::sessions) enum RecordChange {
    AcpSession(String),
    AgentPid(u32),
    Skills(Vec<String>),
    Usage(Usage),
    Spent(Spent),
    /// The prompts acknowledged and not yet sent, and the running (or cut) turn's.
    Prompts {
        queued: Vec<String>,
        turn: Option<String>,
    },
    /// A rule switched off (or on again) for the session.
    Rule {
        rule: String,
        enabled: bool,
    },
    /// An operation approved for the rest of the session (its fingerprint, and what it
    /// is in words).
    OperationApproved {
        fingerprint: String,
        description: String,
    },
    /// A credential approved for the rest of the session.
    CredentialApproved(String),
    /// The agent ended: no pid, the end time, its exit code.
    Ended {
        exit_code: Option<i32>,
    },
}

impl RecordChange {
    /// Applies a change of the session's security state to it; any other change is
    /// given back.
    pub fn apply_security(self, security: &mut SecurityState) -> Option<Self> {
        match self {
            Self::Rule { rule, enabled } => {
                security.disabled.retain(|d| d != &rule);
                if !enabled {
                    security.disabled.push(rule);
                }
            }
            Self::OperationApproved {
                fingerprint,
                description,
            } => {
                security
                    .approved_operations
                    .insert(fingerprint, description);
            }
            Self::CredentialApproved(name) => {
                if !security.approved_credentials.contains(&name) {
                    security.approved_credentials.push(name);
                }
            }
            other => return Some(other),
        }
        None
    }
}

/// The answer to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sessions) enum Reply {
    /// The prompt was sent.
    Started,
    /// The prompt waits behind the running turn (or the agent's start).
    Queued,
    /// The agent is not running (it is being stopped): nothing was done.
    NotRunning,
    /// No turn was cut short: there is nothing to send again.
    NothingCut,
    Cancelled,
    /// The session's security state, after a rule was switched.
    Security,
}

/// One transcript entry to write; its number and time are the writer's.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::sessions) struct Line {
    pub kind: EntryKind,
    pub text: Option<String>,
    pub tool_call_id: Option<String>,
    pub status: Option<String>,
}

impl Line {
    pub fn new(kind: EntryKind) -> Self {
        Self {
            kind,
            text: None,
            tool_call_id: None,
            status: None,
        }
    }

    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    pub fn tool(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    pub fn status(mut self, status: impl Into<String>) -> Self {
        self.status = Some(status.into());
        self
    }
}

impl Effect {
    /// Whether carrying it out writes to the session's records (the store, the inbox,
    /// the transcript, the context stack) or gives its agent a prompt. Every effect is
    /// named, so a new one must be placed on one side.
    pub(in crate::sessions) fn writes(&self) -> bool {
        match self {
            Effect::SetState { .. }
            | Effect::Save
            | Effect::RecordTurn
            | Effect::Append(_)
            | Effect::Stream { .. }
            | Effect::Post(_)
            | Effect::Ask { .. }
            | Effect::AskPlan { .. }
            | Effect::AskBudget { .. }
            | Effect::Withdraw { .. }
            | Effect::WithdrawOpen { .. }
            | Effect::OpenContext
            | Effect::Push(_)
            | Effect::Prompt { .. }
            | Effect::RevokeHandles
            | Effect::SeedFresh
            | Effect::ClearFreshStart => true,
            Effect::Record(_)
            | Effect::Spend { .. }
            | Effect::RaiseBudget { .. }
            | Effect::Judge(_)
            | Effect::ReplyGate { .. }
            | Effect::Grant { .. }
            | Effect::Audit(_)
            | Effect::CancelTurn
            | Effect::FallBack
            | Effect::WakeAfter(_)
            | Effect::StopAgent
            | Effect::ReadOpen
            | Effect::ReadAnswers(_)
            | Effect::Reply(_)
            | Effect::Finish => false,
        }
    }
}
