//! The environment crucible gives every agent it starts (documented in PROTOCOL.md): the
//! names are part of the contract with agents, so they live here, once.

/// The session the agent works for; also how a restarted daemon recognises an agent its
/// predecessor left behind.
pub const SESSION: &str = "CRUCIBLE_SESSION_ID";
/// The session's handle (`H-…`), the agent's only credential.
pub const HANDLE: &str = "CRUCIBLE_HANDLE";
/// The agent socket (`<kiln>/.crucible/agent.sock`).
pub const SOCKET: &str = "CRUCIBLE_SOCKET";
/// The kiln's root.
pub const KILN: &str = "CRUCIBLE_KILN";
/// For plain-program agents: the prompt (also on their stdin).
pub const PROMPT: &str = "CRUCIBLE_PROMPT";
