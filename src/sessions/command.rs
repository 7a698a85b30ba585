//! What the daemon tells a running session's actor: a prompt, a cancel or stop, inbox
//! news, a rule switched, and the approvals and credentials its agent asks for through
//! crucible. Each carries the channel its answer goes back on.

use tokio::sync::oneshot;

use super::guard::credential::CredentialError;
use crate::protocol::{InboxMessage, SecurityState};

pub(super) enum Command {
    /// A prompt; answered with whether it had to queue.
    Prompt {
        text: String,
        ack: oneshot::Sender<bool>,
    },
    /// Send the turn that was cut short again; answered with whether it had to queue,
    /// or `None` when no turn was cut short.
    Resend {
        ack: oneshot::Sender<Option<bool>>,
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
    /// The session is moving to another daemon (`held`), or stays after all: while held
    /// the actor writes nothing of the session (the other daemon may own it already);
    /// let go, it saves its record as it has it. Answered once in effect.
    Hold {
        held: bool,
        ack: oneshot::Sender<()>,
    },
    /// A blocking message of this session was created or answered.
    Inbox(Box<InboxMessage>),
    /// Answered once the actor has handled everything sent before it: its start first,
    /// which withdraws the questions an agent of an earlier daemon asked.
    Settled {
        ack: oneshot::Sender<()>,
    },
    /// Inbox events were missed: re-read what is open.
    Resync,
    /// Park now if idle with nothing open (to make room for sessions waiting for
    /// memory).
    Park,
    /// Switch a rule off (or on again) for this session.
    SetRule {
        rule: String,
        enabled: bool,
        ack: oneshot::Sender<SecurityState>,
    },
    /// The agent asks for approval itself (`cru approve`): the rules' word, if any.
    JudgeApproval {
        title: String,
        ack: oneshot::Sender<Option<bool>>,
    },
    /// The agent asks for a credential: approved once per session by the human.
    Secret {
        name: String,
        ack: oneshot::Sender<Result<String, CredentialError>>,
    },
}
