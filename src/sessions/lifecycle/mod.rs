//! A session's life from crucible's side: creating it (its worktree placed, its record
//! stored, its agent admitted), restarting, renaming, forking and handing it off,
//! resetting and refining it, moving it to another daemon, falling back along its
//! profile's chain at a usage limit, and deleting it and its worktree. The lifecycle owns
//! the fallback chains under way; it shares the repository's git lock with landing, and
//! starts and stops agents through the [`Runner`].

mod control;
mod create;
mod error;
mod handoff;
mod moving;
mod refine;
mod switch;
mod worktree;

pub use error::LifecycleError;
pub(in crate::sessions) use handoff::Switching;
pub(in crate::sessions) use refine::ask_to_refine;

use super::*;

type Result<T> = std::result::Result<T, LifecycleError>;

pub struct Lifecycle {
    ledger: Arc<Ledger>,
    runner: Arc<Runner>,
    /// One git change to the repository at a time (worktrees and branches share its
    /// lock files); landing merges under it too.
    git: Arc<tokio::sync::Mutex<()>>,
    landing: Arc<landing::Landing>,
    guard: Arc<guard::Guard>,
    settings: Arc<LiveSettings>,
    /// Usage limits by profile, and the fallback chains under way ([`fallback`]).
    fallbacks: fallback::Chains,
}

impl Lifecycle {
    /// The lifecycle of the kiln's sessions (made by [`Sessions::start`]), with no
    /// fallback chain under way.
    pub(in crate::sessions) fn new(
        ledger: Arc<Ledger>,
        runner: Arc<Runner>,
        git: Arc<tokio::sync::Mutex<()>>,
        landing: Arc<landing::Landing>,
        guard: Arc<guard::Guard>,
        settings: Arc<LiveSettings>,
    ) -> Self {
        Self {
            ledger,
            runner,
            git,
            landing,
            guard,
            settings,
            fallbacks: fallback::Chains::default(),
        }
    }

    /// The kiln's settings as they are now (they apply live).
    fn settings(&self) -> Result<Config> {
        Ok(self.settings.get()?)
    }

    fn managed(&self, id: &str) -> Result<Session> {
        Ok(managed(&self.ledger, id)?)
    }
}
