//! Why a rule cannot be switched or a credential given: each refusal by what it is, each
//! with its own JSON-RPC code.

use super::credential::CredentialError;
use crate::ledger::LedgerError;
use crate::protocol::{SessionState, code};

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The rule files have never been read well: there is nothing to switch.
    #[error("no rules are in force ({why}); fix the file first")]
    NoRules { why: String },
    #[error("no rule {rule:?}; the rules are: {rules}")]
    NoSuchRule { rule: String, rules: String },
    #[error("{name:?} is not a credential name")]
    NotACredentialName { name: String },
    /// A credential is given only to a running agent.
    #[error(
        "session {id} has no running agent (it is {}); create a new session to continue",
        state.map_or("unmanaged", SessionState::as_str)
    )]
    NotRunning {
        id: String,
        state: Option<SessionState>,
    },
    /// The credential's source did not give it.
    #[error(transparent)]
    Credential(#[from] CredentialError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl GuardError {
    /// The JSON-RPC code of this refusal.
    pub fn code(&self) -> i64 {
        match self {
            GuardError::NoRules { .. }
            | GuardError::NoSuchRule { .. }
            | GuardError::NotACredentialName { .. }
            | GuardError::Credential(_) => code::INVALID_PARAMS,
            GuardError::NotRunning { .. } => code::CONFLICT,
            GuardError::Ledger(e) => e.code(),
        }
    }
}

crate::ledger::coded_error!(GuardError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorObject;

    #[test]
    fn each_refusal_keeps_the_code_and_words_it_had() {
        let stopped = GuardError::NotRunning {
            id: "s1".into(),
            state: Some(SessionState::Stopped),
        };
        assert_eq!(stopped.code(), code::CONFLICT);
        assert_eq!(
            stopped.to_string(),
            "session s1 has no running agent (it is stopped); create a new session to continue"
        );
        let unknown = ErrorObject::from(GuardError::NoSuchRule {
            rule: "x".into(),
            rules: "a, b".into(),
        });
        assert_eq!(
            (unknown.code, unknown.message.as_str()),
            (code::INVALID_PARAMS, "no rule \"x\"; the rules are: a, b")
        );
        let missing = ErrorObject::from(GuardError::Credential(CredentialError::NotSet(
            "TOKEN".into(),
        )));
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (
                code::INVALID_PARAMS,
                "TOKEN is not set in crucible's environment"
            )
        );
        let relayed = LedgerError::from(GuardError::NotACredentialName { name: "a b".into() });
        assert_eq!(relayed.code(), code::INVALID_PARAMS);
    }
}
