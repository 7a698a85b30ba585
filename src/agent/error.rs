//! What an agent operation can fail with: starting the agent, a request the firewall,
//! the rules or the human refuse, a file, a command or terminal, the session the
//! internal agent works in, and the agent's side of ACP. Each says what failed in words.

/// Why an agent operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The agent could not be started: its program, its stderr log, its folder, its
    /// API key, or the session it needs.
    #[error("{0}")]
    Start(String),
    /// The firewall, the rules or the human refused what the agent asked, or the
    /// session ended before they answered.
    #[error("{0}")]
    Refused(String),
    /// A file or folder the agent asked for could not be read or written.
    #[error("{0}")]
    Io(String),
    /// A command the agent ran could not run, failed or timed out, or a tool call
    /// lacks what it needs.
    #[error("{0}")]
    Tool(String),
    /// No such terminal, or its command was lost.
    #[error("{0}")]
    Terminal(String),
    /// The session the internal agent works in (its context stack, its inbox) failed.
    #[error("{0}")]
    Session(String),
    /// The agent answered ACP with an error, or cannot do what was asked of it.
    #[error("{0}")]
    Protocol(String),
}
