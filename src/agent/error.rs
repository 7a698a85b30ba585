//! What an agent operation can fail with: starting the agent, a request the firewall,
//! the rules or the human refuse, a file, a command or terminal, the session the
//! internal agent works in, and the agent's side of ACP. Each says what failed in words;
//! an error of the system, the driver, the chat endpoint or ACP keeps its source.

use std::path::PathBuf;

use crate::driver::DriverError;
use crate::openai::ChatError;

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The agent could not be started, and why in words.
    #[error("{0}")]
    Start(String),
    /// The session's folder cannot be the firewall's root.
    #[error("cannot use {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The session's stderr log cannot be opened.
    #[error("cannot open {}: {source}", path.display())]
    StderrLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The session's environment cannot start the profile's program.
    #[error("cannot start agent {profile:?}: {source}")]
    Environment {
        profile: String,
        #[source]
        source: DriverError,
    },
    /// The profile's program cannot be started.
    #[error("cannot start agent {profile:?} ({command}): {source}")]
    Spawn {
        profile: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The profile's program is not found.
    #[error("cannot start agent {profile:?}: program {command} not found")]
    NotFound { profile: String, command: String },
    /// The variable `api_key_env` names is not set.
    #[error("the environment variable {var} (api_key_env) is not set")]
    NoApiKey { var: String },
    /// An internal agent started without its session.
    #[error("agent {profile:?}: an internal agent needs its session")]
    NoSession { profile: String },
    /// What went wrong with the profile `profile`.
    #[error("agent {profile:?}: {source}")]
    Profile {
        profile: String,
        #[source]
        source: Box<AgentError>,
    },
    /// The chat endpoint of an internal agent cannot be used or failed.
    #[error("{0}")]
    Chat(#[from] ChatError),
    /// The firewall, the rules or the human refused what the agent asked, or the
    /// session ended before they answered.
    #[error("{0}")]
    Refused(String),
    /// A file or folder the agent asked for could not be read or written, and why in
    /// words.
    #[error("{0}")]
    Io(String),
    /// A file or folder the agent named could not be read or written.
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A tool call lacks what it needs, or names no tool.
    #[error("{0}")]
    Tool(String),
    /// The session's environment cannot run a command.
    #[error("{0}")]
    Driver(#[source] DriverError),
    /// The session's environment cannot run `command`.
    #[error("cannot run {command}: {source}")]
    Unrunnable {
        command: String,
        #[source]
        source: DriverError,
    },
    /// A command could not be run.
    #[error("cannot run {command}: {source}")]
    Run {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// A command ran longer than it may.
    #[error("timed out after {secs}s")]
    TimedOut { secs: u64 },
    /// A command ended with a failure: its exit code (none: a signal ended it) and
    /// its output.
    #[error("exit {}\n{output}", code.map_or_else(|| "by signal".to_string(), |c| c.to_string()))]
    Exit { code: Option<i32>, output: String },
    /// No terminal has this id.
    #[error("no terminal {id}")]
    NoTerminal { id: String },
    /// The terminal's command was lost before it ended.
    #[error("the terminal's command was lost")]
    TerminalLost,
    /// The session the internal agent works in (its context stack, its inbox) failed.
    #[error("{0}")]
    Session(String),
    /// The agent cannot do what was asked of it, and why in words.
    #[error("{0}")]
    Protocol(String),
    /// The agent answered an ACP request with an error: what was asked, the error, and
    /// (for a session that needs signing in) the ways the agent offers.
    #[error("{doing}: {}{note}", describe(source))]
    Acp {
        doing: String,
        #[source]
        source: Box<agent_client_protocol::Error>,
        note: String,
    },
}

/// Two errors are the same when they are of one kind and say the same: the sources they
/// keep (system, driver, chat and ACP errors) have no equality of their own.
impl PartialEq for AgentError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

/// An ACP error on one line: its message, and its data compactly when there is some.
pub(crate) fn describe(e: &agent_client_protocol::Error) -> String {
    match &e.data {
        None | Some(serde_json::Value::Null) => e.message.clone(),
        Some(serde_json::Value::String(data)) => format!("{}: {data}", e.message),
        Some(data) => format!("{}: {data}", e.message),
    }
}
