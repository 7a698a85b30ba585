//! Why a channel's message, a conversation's close or a cron run was refused: each by
//! what it is, each with its own JSON-RPC code.

use crate::ledger::LedgerError;
use crate::protocol::code;
use crate::sessions::{LifecycleError, RunError};

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("the message is empty")]
    EmptyMessage,
    #[error("session {id} was not started by a channel; stop it instead")]
    NotFromAChannel { id: String },
    /// The job is not (or no longer) one of the daemon's settings.
    #[error("no cron job {id:?} in the daemon's settings")]
    NoCronJob { id: String },
    /// Starting the conversation's session failed.
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    /// Stopping the previous run's agent failed.
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl ConversationError {
    /// The JSON-RPC code of this refusal.
    pub fn code(&self) -> i64 {
        match self {
            ConversationError::EmptyMessage | ConversationError::NotFromAChannel { .. } => {
                code::INVALID_PARAMS
            }
            ConversationError::NoCronJob { .. } => code::NOT_FOUND,
            ConversationError::Lifecycle(e) => e.code(),
            ConversationError::Run(e) => e.code(),
            ConversationError::Ledger(e) => e.code(),
        }
    }
}

crate::ledger::coded_error!(ConversationError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorObject;

    #[test]
    fn each_refusal_keeps_its_code_and_words_and_what_it_wraps_keeps_its_own() {
        let cases = [
            (
                ConversationError::EmptyMessage,
                code::INVALID_PARAMS,
                "the message is empty",
            ),
            (
                ConversationError::NoCronJob {
                    id: "nightly".into(),
                },
                code::NOT_FOUND,
                "no cron job \"nightly\" in the daemon's settings",
            ),
            (
                ConversationError::Lifecycle(LifecycleError::StillCreating { id: "s1".into() }),
                code::CONFLICT,
                "session s1 is still being created",
            ),
        ];
        for (error, code, words) in cases {
            let object = ErrorObject::from(error);
            assert_eq!((object.code, object.message.as_str()), (code, words));
        }
    }
}
