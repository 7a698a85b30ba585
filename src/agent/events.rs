//! What an agent did, as the session hears it: the [`AgentEvent`]s, in order, with the
//! tokens a turn used, the permission choices an agent offers, and how a turn failed;
//! and [`ask_gate`], which puts an operation to the session's approval gate.

use tokio::sync::{mpsc, oneshot};

use super::error::AgentError;
use crate::protocol::EntryKind;
use crate::rules::Operation;

/// Puts an operation to the approval gate and waits for its word: `Ok` to go ahead, or
/// why not (also when the session ends before it answers).
pub(crate) async fn ask_gate(
    events: &mpsc::UnboundedSender<AgentEvent>,
    operation: Operation,
) -> Result<(), AgentError> {
    let (reply, answer) = oneshot::channel();
    let _ = events.send(AgentEvent::Gate { operation, reply });
    answer
        .await
        .unwrap_or_else(|_| Err(AgentError::Refused("the session is ending".into())))
}

/// What an agent did, in order.
#[derive(Debug)]
pub enum AgentEvent {
    /// The agent answered `initialize` and opened (or reloaded) its session.
    Ready {
        acp_session_id: String,
        resumed: bool,
        agent_name: Option<String>,
    },
    /// Streamed text: `Message` or `Thought`. Chunks with different message ids belong
    /// to different messages.
    Chunk {
        kind: EntryKind,
        text: String,
        message_id: Option<String>,
    },
    ToolCall {
        id: String,
        title: String,
        status: String,
        /// What the tool does, for the rules (the agent runs it itself).
        operation: Operation,
    },
    ToolUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
    },
    /// The whole plan, its steps in order (each update sends all of them).
    Plan(Vec<crate::rules::PlanStep>),
    /// The agent's own commands, `name — description` each.
    Skills(Vec<String>),
    /// Context use and cost (ACP `usage_update`).
    Usage(crate::protocol::Usage),
    /// The agent announced that a usage limit is reached, ahead of a turn failing on it
    /// (claude-agent-acp's rate-limit events): why, in words, and when it resets.
    LimitAhead {
        why: String,
        resets_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// The agent waits for permission; answer with an option id, or `None` to cancel.
    Permission {
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        /// What the agent asks to do, for the rules.
        operation: Operation,
        reply: oneshot::Sender<Option<String>>,
    },
    /// An operation crucible runs or serves for the agent (a file request, a terminal
    /// command) waits for the rules: `Ok` to go ahead, or why not.
    Gate {
        operation: Operation,
        reply: oneshot::Sender<Result<(), AgentError>>,
    },
    /// A file request the firewall let through (`refused` empty) or stopped.
    File {
        op: &'static str,
        path: String,
        refused: Option<String>,
    },
    /// The tokens the turn that is ending used, as the agent reported them with its
    /// end (before [`AgentEvent::TurnEnded`]).
    TurnTokens(TurnTokens),
    /// A prompt's turn ended: the stop reason, or why it failed.
    TurnEnded(Result<String, TurnFailure>),
    /// The agent could not be started or resumed.
    StartFailed(String),
    /// The process doing the agent's work now, for agents that run one per prompt
    /// (`None`: the run ended).
    Process(Option<u32>),
    /// The process is gone: how it ended, and its exit code if it had one.
    Exited { status: String, code: Option<i32> },
    /// The agent opened a fresh session for a prompt (after the context shrank); the
    /// old one is no longer used.
    SessionRenewed { acp_session_id: String },
}

/// The tokens one turn used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnTokens {
    pub input: u64,
    pub output: u64,
    /// Read from (or written to) the model's prompt cache.
    pub cached: u64,
}

impl TurnTokens {
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cached)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionChoice {
    pub id: String,
    pub name: String,
    pub kind: OptionKind,
}

/// What choosing a permission option means, as ACP names it (`allow_once`,
/// `allow_always`, `reject_once`, `reject_always`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// A kind this crucible does not know: neither allows nor rejects.
    #[serde(other)]
    Unknown,
}

impl OptionKind {
    /// The kind from its wire name; a name not known is [`OptionKind::Unknown`].
    pub fn from_wire(name: &str) -> Self {
        serde_json::from_value(serde_json::Value::String(name.into())).unwrap_or(Self::Unknown)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowAlways => "allow_always",
            Self::RejectOnce => "reject_once",
            Self::RejectAlways => "reject_always",
            Self::Unknown => "unknown",
        }
    }

    /// Choosing it lets the operation run (once or always).
    pub fn allows(self) -> bool {
        matches!(self, Self::AllowOnce | Self::AllowAlways)
    }

    /// Choosing it refuses the operation (once or always).
    pub fn rejects(self) -> bool {
        matches!(self, Self::RejectOnce | Self::RejectAlways)
    }
}

#[derive(Debug)]
pub enum TurnFailure {
    /// The connection closed; [`AgentEvent::Exited`] follows with the reason.
    Lost,
    /// The agent answered the prompt with an error.
    Failed(String),
}
