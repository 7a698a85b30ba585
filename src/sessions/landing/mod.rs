//! Landing: what a session's work is and where it goes. Its diff against the point its
//! branch left the base branch, a commit, a merge into the base branch, a pull request,
//! a command run in the session's environment and the audit of those, and the conflict
//! radar (which sessions' branches change the same lines).
//!
//! [`Landing`] owns the radar. It shares the repository's git lock with the sessions'
//! lifecycle (worktrees and branches are made under it) and reads the runner only for a
//! running agent's environment. Its refusals are [`LandingError`]s, each with its own
//! JSON-RPC code.

mod error;
mod exec;
mod land;
mod radar;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::driver;
use crate::ledger::Ledger;
use crate::protocol::{ConflictReport, Session};

use super::Runner;
pub use error::LandingError;

pub type Result<T> = std::result::Result<T, LandingError>;

/// Reviewing and landing sessions' work, and the radar of where it overlaps.
pub struct Landing {
    ledger: Arc<Ledger>,
    /// For a running agent's environment (`exec` runs there).
    runner: Arc<Runner>,
    /// One git change to the repository at a time: shared with the sessions' lifecycle,
    /// whose worktrees and branches share the repository's lock files.
    git: Arc<tokio::sync::Mutex<()>>,
    /// The conflict radar as last computed ([`radar`]).
    radar: Mutex<ConflictReport>,
}

impl Landing {
    /// Landing over the kiln's sessions; the radar waits for [`Landing::follow`].
    pub(super) fn new(
        ledger: Arc<Ledger>,
        runner: Arc<Runner>,
        git: Arc<tokio::sync::Mutex<()>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            ledger,
            runner,
            git,
            radar: Mutex::new(ConflictReport::default()),
        })
    }

    /// Starts the radar following the sessions' events (once the sessions a previous
    /// daemon left are dealt with).
    pub(super) fn follow(self: &Arc<Self>) {
        tokio::spawn(radar::watch(Arc::downgrade(self), self.ledger.subscribe()));
    }

    /// The remote place of an ssh session.
    fn remote(&self, session: &Session) -> Option<driver::ssh::Remote> {
        driver::remote_of(session.driver.as_ref()?, self.ledger.kiln(), &session.id)
    }

    /// The session, refused when it registered itself (crucible has no worktree of it).
    fn managed(&self, id: &str) -> Result<Session> {
        Ok(super::managed(&self.ledger, id)?)
    }

    /// Where the kiln's own checkout is.
    fn repo(&self) -> PathBuf {
        self.ledger.kiln().root().to_path_buf()
    }

    /// The kiln's checkout, borrowed.
    fn root(&self) -> &Path {
        self.ledger.kiln().root()
    }
}
