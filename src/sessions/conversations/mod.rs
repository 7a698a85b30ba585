//! Conversations: the sessions that messages from outside start and continue. A
//! channel's message (a webhook's, Matrix's) is resolved to its conversation's session
//! ([`channel`]): continued, replaced when quiet too long or off its subject
//! ([`drift`]), or started; a conversation is closed at its end; an approval of a
//! channel session waits only so long. The `[[cron]]` jobs are conversations too: each
//! run starts or continues its job's session ([`cron`]).
//!
//! [`Conversations`] owns what that needs beside the sessions: one message resolved at
//! a time, and the cron jobs' book. It starts, prompts and stops sessions through the
//! sessions' lifecycle ([`Sessions`]).

mod channel;
mod cron;
mod drift;
mod error;

use std::sync::{Arc, Mutex};

use super::Sessions;
use crate::ledger::Ledger;

pub use channel::Deliver;
pub use cron::CronDoor;
pub use error::ConversationError;

/// The conversations of channels and cron jobs, over the kiln's sessions.
pub struct Conversations {
    sessions: Arc<Sessions>,
    ledger: Arc<Ledger>,
    /// One channel message or cron run resolved at a time: two messages of one
    /// conversation must not both find "no session" and make two.
    resolving: tokio::sync::Mutex<()>,
    /// The cron jobs the daemon runs, and their skips since it started ([`cron`]).
    cron: Mutex<cron::CronBook>,
}

impl Conversations {
    pub fn new(sessions: Arc<Sessions>) -> Arc<Self> {
        Arc::new(Self {
            ledger: Arc::clone(sessions.ledger()),
            sessions,
            resolving: tokio::sync::Mutex::new(()),
            cron: Mutex::new(cron::CronBook::default()),
        })
    }
}
