//! Agent processes and the Agent Client Protocol (ACP).
//!
//! [`launch`] starts an agent's process in its session's folder and drives it as an ACP
//! client: `initialize`, then `session/new` (or `session/load` to resume), then prompts
//! and cancels on command. What the agent does comes back as [`AgentEvent`]s on one
//! channel, in the order it happened; the last one is always [`AgentEvent::Exited`].
//! Profiles of `type = "command"` run a plain program per prompt instead (see
//! [`command`]), and `type = "internal"` profiles run crucible's own agent loop (see
//! [`internal`]); they report through the same events.
//! This module knows nothing of the store or the inbox: the session that owns the
//! agent turns events into state, transcript and messages.

mod acp;
pub mod command;
mod error;
mod events;
mod fs;
mod handle;
pub mod internal;
mod link;
mod process;
pub mod start_failure;
mod terminal;
pub mod usage_limit;

use tokio::sync::mpsc;

use crate::config::AgentKind;

pub use error::AgentError;
pub use events::{AgentEvent, OptionKind, PermissionChoice, TurnFailure, TurnTokens};
pub use handle::{AgentHandle, Launch};
pub use link::SessionLink;

/// Starts the agent and its supervisor. Fails only if the agent cannot be started;
/// everything later arrives as events.
pub fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, AgentError> {
    match launch.profile.kind {
        AgentKind::Command => command::launch(launch, events),
        AgentKind::Internal => internal::launch(launch, events),
        AgentKind::Acp => process::launch(launch, events),
    }
}
