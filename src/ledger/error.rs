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
    /// A program the operation needs could not be run (`gh`, git itself, a command in a
    /// session's environment); the io error is kept.
    #[error("cannot run {program}: {source}")]
    ToolNotRun {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A program the operation needs is missing, or ran and failed: in words (what it
    /// said, or what to do).
    #[error("{0}")]
    ToolFailed(String),
    /// A file could not be read or written: what was being done, and the io error.
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// The session's environment (its driver) could not be made or used; the driver's
    /// error is kept.
    #[error(transparent)]
    Driver(Box<dyn std::error::Error + Send + Sync>),
    /// A refusal a call through the daemon's door came back with whose cause stayed on
    /// the other side (a file, a driver): its code and words as the door gave them.
    #[error("{message}")]
    Relayed { code: i64, message: String },
    /// A session's agent could not be started (its program, its environment or its
    /// handle); the cause is kept.
    #[error(transparent)]
    Start(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, LedgerError>;

impl LedgerError {
    /// The JSON-RPC code of this kind of failure.
    pub fn code(&self) -> i64 {
        use crate::protocol::code;
        match self {
            LedgerError::NotFound(_) => code::NOT_FOUND,
            LedgerError::Invalid(_) => code::INVALID_PARAMS,
            LedgerError::Conflict(_) => code::CONFLICT,
            LedgerError::TimedOut(_) => code::TIMED_OUT,
            LedgerError::Git { .. } => code::GIT_FAILED,
            LedgerError::ToolNotRun { .. } | LedgerError::ToolFailed(_) => code::TOOL_FAILED,
            LedgerError::Io { .. } => code::IO_ERROR,
            LedgerError::Driver(_) => code::DRIVER_ERROR,
            LedgerError::Relayed { code, .. } => *code,
            LedgerError::Start(_) => code::SPAWN_FAILED,
            LedgerError::Store(_) => code::STORE_ERROR,
        }
    }

    /// A method's refusal (a call made through the daemon's door on a channel's behalf)
    /// as the error of its kind.
    pub fn from_refusal(e: crate::protocol::ErrorObject) -> Self {
        use crate::protocol::code;
        match e.code {
            code::NOT_FOUND => LedgerError::NotFound(e.message),
            code::INVALID_PARAMS => LedgerError::Invalid(e.message),
            code::TIMED_OUT => LedgerError::TimedOut(e.message),
            code::GIT_FAILED | code::TOOL_FAILED => LedgerError::ToolFailed(e.message),
            code::IO_ERROR | code::DRIVER_ERROR => LedgerError::Relayed {
                code: e.code,
                message: e.message,
            },
            code::SPAWN_FAILED => LedgerError::Start(e.message.into()),
            _ => LedgerError::Conflict(e.message),
        }
    }
}

impl From<LedgerError> for crate::protocol::ErrorObject {
    fn from(e: LedgerError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

/// The conversions of a service's error enum (one with `code()` and a `Ledger` variant):
/// to its JSON-RPC error, and, for the sessions' own use, to a ledger error (its ledger
/// errors unwrapped, the rest relayed with their code and words). `answer_only` makes
/// the first alone, for an enum that turns into a ledger error its own way.
macro_rules! coded_error {
    ($error:ident, answer_only) => {
        impl From<$error> for $crate::protocol::ErrorObject {
            fn from(e: $error) -> Self {
                Self::new(e.code(), e.to_string())
            }
        }
    };
    ($error:ident) => {
        $crate::ledger::coded_error!($error, answer_only);

        impl From<$error> for $crate::ledger::LedgerError {
            fn from(e: $error) -> Self {
                match e {
                    $error::Ledger(e) => e,
                    e => $crate::ledger::LedgerError::Relayed {
                        code: e.code(),
                        message: e.to_string(),
                    },
                }
            }
        }
    };
}
pub(crate) use coded_error;

/// "No such session".
pub(super) fn no_session(id: &str) -> LedgerError {
    LedgerError::NotFound(format!("no session {id}"))
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::LedgerError;
    use crate::protocol::{ErrorObject, code};

    #[test]
    fn an_io_error_keeps_its_source_and_says_what_was_being_done() {
        let e = LedgerError::Io {
            doing: "cannot read the audit log".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no access"),
        };
        assert_eq!(e.to_string(), "cannot read the audit log: no access");
        let source = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            source.map(std::io::Error::kind),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }

    #[test]
    fn a_program_that_could_not_run_keeps_its_io_error() {
        let e = LedgerError::ToolNotRun {
            program: "gh".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("cannot run gh: "), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
    }

    #[test]
    fn a_relayed_refusal_keeps_its_code_and_words() {
        for kind in [code::IO_ERROR, code::DRIVER_ERROR] {
            let e = LedgerError::from_refusal(ErrorObject::new(kind, "the words"));
            assert!(
                matches!(&e, LedgerError::Relayed { code, .. } if *code == kind),
                "{e:?}"
            );
            assert_eq!(e.to_string(), "the words");
        }
    }
}
