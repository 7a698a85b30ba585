//! What a domain operation can fail with; each kind has its own JSON-RPC code.

use crate::store::StoreError;

/// What a domain operation can fail with; each kind has its own JSON-RPC code.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No such session, message or record.
    #[error("{0}")]
    NotFound(String),
    /// The request's params are wrong (empty, out of range, not allowed for this session).
    #[error("{0}")]
    Invalid(String),
    /// The request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// A wait ended without an answer.
    #[error("{0}")]
    TimedOut(String),
    /// A git command failed: which one, and what it said.
    #[error("git {command}: {message}")]
    Git { command: String, message: String },
    /// A program the operation needs is missing or failed (`gh`, git itself).
    #[error("{0}")]
    Tool(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// The session's environment (its driver) could not be made or used.
    #[error("{0}")]
    Driver(String),
    /// A session's agent could not be started (its program, its environment or its
    /// handle); the cause is kept.
    #[error(transparent)]
    Start(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, LedgerError>;

impl LedgerError {
    /// A method's refusal (a call made through the daemon's door on a channel's behalf)
    /// as the error of its kind.
    pub fn from_refusal(e: crate::protocol::ErrorObject) -> Self {
        use crate::protocol::code;
        match e.code {
            code::NOT_FOUND => LedgerError::NotFound(e.message),
            code::INVALID_PARAMS => LedgerError::Invalid(e.message),
            code::TIMED_OUT => LedgerError::TimedOut(e.message),
            code::GIT_FAILED | code::TOOL_FAILED => LedgerError::Tool(e.message),
            code::IO_ERROR => LedgerError::Io(e.message),
            code::DRIVER_ERROR => LedgerError::Driver(e.message),
            code::SPAWN_FAILED => LedgerError::Start(e.message.into()),
            _ => LedgerError::Conflict(e.message),
        }
    }
}

/// "No such session".
pub(super) fn no_session(id: &str) -> LedgerError {
    LedgerError::NotFound(format!("no session {id}"))
}
