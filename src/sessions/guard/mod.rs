//! Guard: what every session's agent may do. The rule files and the rules in force (the
//! last good set when the files are bad), the gate each running agent's operations pass
//! ([`gate`]), a session's security state and its rules switched off, and the credentials
//! an agent asks for ([`credential`]), never stored or logged.
//!
//! [`Guard`] owns the rule book; the runner's actors judge by the same book. Its refusals
//! are [`GuardError`]s, each with its own JSON-RPC code.

pub(crate) mod credential;
mod error;
pub(crate) mod gate;
pub(crate) mod rule_files;
mod security;

use std::sync::Arc;

use crate::ledger::Ledger;
use crate::protocol::Session;

use super::Runner;
pub use error::GuardError;
use rule_files::RuleBook;

pub type Result<T> = std::result::Result<T, GuardError>;

/// The rules, the sessions' security states and their credentials.
pub struct Guard {
    ledger: Arc<Ledger>,
    /// For a running agent's actor (its gate holds the session's security state).
    runner: Arc<Runner>,
    /// The rules every session's gate judges by, with the last good set.
    rules: Arc<RuleBook>,
}

impl Guard {
    pub(super) fn new(ledger: Arc<Ledger>, runner: Arc<Runner>, rules: Arc<RuleBook>) -> Arc<Self> {
        Arc::new(Self {
            ledger,
            runner,
            rules,
        })
    }

    /// The session, refused when it registered itself (crucible does not run its agent).
    fn managed(&self, id: &str) -> Result<Session> {
        Ok(super::managed(&self.ledger, id)?)
    }
}
