//! Moving a session to another daemon of the team: the call a person makes, and the one
//! the session's daemon makes of the daemon that takes it.

use serde::{Deserialize, Serialize};

use crate::protocol::Session;

/// `session.move`: the session goes on on another daemon of the team.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MoveParams {
    pub session_id: String,
    /// The daemon that takes it: its instance id (or a prefix of it), its host or its
    /// kiln's folder, as `cru daemon status` lists them.
    pub to: String,
}

/// What a move did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Moved {
    pub session: Session,
    /// The hosts it left and went to.
    pub from_host: String,
    pub to_host: String,
    /// How the agent was taken up there.
    pub resumed: Resumed,
    /// The open questions that went with it (answered there, their answers reach the
    /// agent as a prompt), and the approvals withdrawn (its agent asks again).
    pub carried: usize,
    pub withdrawn: usize,
    /// From the call to the target's confirmation, in milliseconds.
    pub millis: u64,
}

/// `session.adopt` (between daemons only): take the session over from `from`, with its
/// branch as a git bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdoptParams {
    pub session_id: String,
    /// The daemon it comes from (its instance id).
    pub from: String,
    pub branch: String,
    /// `git bundle` of the branch, base64.
    pub bundle: String,
}

/// What the daemon that took a session over says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Adopted {
    pub session: Session,
    pub resumed: Resumed,
    pub carried: usize,
    pub withdrawn: usize,
}

/// How the daemon that took a session over took up its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resumed {
    /// The agent reloaded its own session (ACP `session/load`).
    Load,
    /// A new agent session, seeded with the context stack.
    Fresh,
    /// The agent was not ready within the time the target waits for it.
    Starting,
    /// Its agent was not running where it came from, and is not started.
    NotRunning,
}
