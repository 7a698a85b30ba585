//! What the session machine is told: what the agent did, what people asked, and the
//! answers to the effects that ask something.

use super::{GateRequest, Key};
use crate::agent::{AgentEvent, TurnTokens};
use crate::ledger::LedgerError;
use crate::protocol::{EntryKind, Usage};
use crate::sessions::budget::Over;
use crate::sessions::guard::gate::Judgement;

/// What happens to the session.
#[derive(Debug)]
pub(in crate::sessions) enum SessionInput {
    /// The actor begins; the agent's process was just launched.
    Start,

    /// What the agent did, as it tells it. Its requests for the gate come as
    /// [`SessionInput::Gate`] instead (the actor keeps their reply channels), and what it
    /// spent as [`SessionInput::Usage`] and [`SessionInput::TurnTokens`] (dated).
    Agent(AgentEvent),
    /// The agent's context window use and cost, reported on `day` (UTC).
    Usage {
        usage: Usage,
        day: String,
    },
    /// The tokens the ending turn used, reported on `day`.
    TurnTokens {
        tokens: TurnTokens,
        day: String,
    },
    /// Whether the session is over a budget now (the budget keeper's verdict).
    Budget(Option<Over>),
    /// Budgets the session's spending brought near their end, in words.
    BudgetNear(Vec<String>),
    /// The id the inbox gave the budget's question, or why it could not be asked.
    BudgetAsked(Result<String, LedgerError>),
    /// The id the inbox gave the plan's review, or why it could not be asked.
    PlanAsked(Result<String, LedgerError>),
    /// Something for the approval gate: what the agent asks for, what crucible runs or
    /// serves for it, or what it ran by itself.
    Gate(GateRequest),
    /// The turn failed on a usage or rate limit: parked until it resets (`resumes`, in
    /// words), then its prompt is sent again.
    TurnLimited {
        why: String,
        wait: std::time::Duration,
        resumes: String,
    },
    /// The usage limit the session was parked for has reset.
    LimitReset,
    /// The agent announced a usage limit reached, resetting in `wait` (`resumes`, in
    /// words), ahead of a turn failing on it.
    LimitAhead {
        why: String,
        wait: std::time::Duration,
        resumes: String,
    },

    // What people asked.
    Prompt(String),
    /// Send the turn that was cut short again.
    Resend,
    Cancel,
    Stop {
        shutdown: bool,
    },
    /// Idle too long: tear the environment down, keep the session.
    Park,
    /// Switch a rule off (or on again) for this session.
    SetRule {
        rule: String,
        enabled: bool,
    },
    /// The agent asks for a credential, numbered `key`; `approved`: approved before in
    /// this session.
    Credential {
        key: Key,
        name: String,
        approved: bool,
    },
    /// A blocking inbox message of this session opened (a question the agent asked).
    Opened(String),
    /// One was answered or withdrawn.
    Answered {
        id: String,
        response: Option<String>,
        /// Who answered, through which channel (`None`: not recorded).
        by: Option<String>,
    },
    /// A question the agent of the daemon the session moved from asked was answered
    /// here: its answer goes to this agent as `prompt`.
    CarriedAnswer {
        id: String,
        prompt: String,
    },
    /// Inbox events were missed: what is open must be read again.
    Resync,

    // Answers to effects.
    /// What the transcript kept of a streamed chunk ([`Effect::Stream`]).
    Kept {
        kind: EntryKind,
        text: String,
    },
    /// The rules' judgement of a request for the gate ([`Effect::Judge`]); `changed`:
    /// the session's security state changed (a rule activated on it).
    Judged {
        request: GateRequest,
        judgement: Judgement,
        changed: bool,
    },
    /// The approval of request `key` was posted with this message id, or could not be.
    Posted {
        key: Key,
        result: Result<String, LedgerError>,
    },
    /// The session's open blocking messages ([`Effect::ReadOpen`]).
    Open(Vec<String>),
    /// Messages no longer open, with their answers ([`Effect::ReadAnswers`]).
    Closed(Vec<(String, Option<String>, Option<String>)>),
    /// A store write failed; why, in words for the turn's error.
    StoreFailed(String),
}
