//! The sessions crucible runs: each one an agent process in its own git worktree.
//!
//! [`Sessions`] holds the services that share them, each with its own state: the
//! [`Lifecycle`] creates, forks, hands off, moves and deletes them (and follows fallback
//! chains); the [`Runner`] starts their agents and prompts, cancels and stops them;
//! [`landing::Landing`] reviews and lands their work and keeps the conflict radar;
//! [`guard::Guard`] keeps the rules, security states and credentials; [`Conversations`]
//! resolves channels' messages and cron runs to the sessions they start and continue. Every running session has an actor task
//! ([`actor`]) that owns its agent and turns what the agent does into lifecycle state,
//! transcript entries and inbox messages. What happens when is decided by a pure state
//! machine ([`machine`]), in the words of [`wording`]. After a restart, sessions whose
//! agent was running are resumed through ACP `session/load` where the agent supports it,
//! and otherwise marked stopped with an `error` message: never silently replaced.

mod actor;
pub mod budget;
pub mod budget_kilns;
pub mod budget_spending;
mod command;
mod context;
pub mod conversations;
mod fallback;
mod given;
pub mod guard;
mod inbox_news;
pub mod landing;
pub mod lifecycle;
mod live;
mod machine;
mod runner;
mod transcript;
mod wording;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::config::{AgentKind, AgentProfile, Config};
use crate::driver;
use crate::git;
use crate::ledger::{Ledger, LedgerError, display_name, now_rfc3339};
use crate::protocol::{
    ClientEnv, CreateSessionParams, DeleteOutcome, DriverSpec, Event, PruneResult, RemoveOptions,
    Session, SessionState, Skipped, limits,
};

use crate::markdown::MarkdownLog;
pub use context::{PREAMBLE_HEADER, preamble};
pub use conversations::{ConversationError, Conversations, CronDoor, Deliver};
pub use lifecycle::{Lifecycle, LifecycleError};
pub use runner::{RunError, Runner, SpawnError};

use command::Command;
use live::LiveSettings;

pub type Result<T> = std::result::Result<T, LedgerError>;

pub struct Sessions {
    ledger: Arc<Ledger>,
    /// The running agents and their actors ([`runner`]).
    runner: Arc<Runner>,
    /// Creating, changing, moving and deleting sessions ([`lifecycle`]).
    lifecycle: Arc<Lifecycle>,
    /// Reviewing and landing sessions' work, and the conflict radar ([`landing`]).
    landing: Arc<landing::Landing>,
    /// The rules, the sessions' security states and credentials ([`guard`]).
    guard: Arc<guard::Guard>,
    /// The daemon's settings in use, once it follows them ([`Sessions::follow_settings`]).
    settings: Arc<LiveSettings>,
    /// What sessions spent today, and whether each may start a turn ([`budget`]).
    budgets: Arc<budget::Budgets>,
}

impl Sessions {
    /// Starts the manager and deals honestly with sessions a previous daemon left running.
    pub async fn start(ledger: Arc<Ledger>) -> Arc<Self> {
        for dir in [ledger.kiln().sessions_dir(), ledger.kiln().worktrees_dir()] {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), "cannot create: {e}");
            }
        }
        let rules = Arc::new(guard::rule_files::RuleBook::new(ledger.kiln().clone()));
        let settings = Arc::new(LiveSettings::new(ledger.kiln().clone()));
        let budgets = Arc::new(
            budget::Budgets::new(
                ledger.config().budget.clone(),
                ledger.kiln().state_dir().join("budget-raises.json"),
                &ledger.list_sessions(),
            )
            .asking_kilns(ledger.kiln().root()),
        );
        let git = Arc::new(tokio::sync::Mutex::new(()));
        let sessions = Arc::new_cyclic(|me| {
            let runner = Arc::new(Runner::new(runner::RunnerParts {
                ledger: Arc::clone(&ledger),
                settings: Arc::clone(&settings),
                rules: Arc::clone(&rules),
                budgets: Arc::clone(&budgets),
                sessions: me.clone(),
            }));
            let landing =
                landing::Landing::new(Arc::clone(&ledger), Arc::clone(&runner), Arc::clone(&git));
            let guard = guard::Guard::new(Arc::clone(&ledger), Arc::clone(&runner), rules);
            let lifecycle = Arc::new(Lifecycle::new(
                Arc::clone(&ledger),
                Arc::clone(&runner),
                git,
                Arc::clone(&landing),
                Arc::clone(&guard),
                Arc::clone(&settings),
            ));
            Self {
                ledger: Arc::clone(&ledger),
                landing,
                guard,
                runner,
                lifecycle,
                settings,
                budgets,
            }
        });
        tokio::spawn(inbox_news::route_inbox_events(
            Arc::downgrade(&sessions),
            ledger.subscribe(),
        ));
        sessions.runner.recover().await;
        sessions.lifecycle.finish_deletions().await;
        if let Some(takeovers) = ledger.takeovers() {
            tokio::spawn(runner::take_over(
                Arc::downgrade(&sessions.runner),
                takeovers,
            ));
        }
        sessions.landing.follow();
        sessions
    }

    /// The kiln's record of sessions and the inbox.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// Creating, restarting, forking, handing off, resetting, moving and deleting
    /// sessions.
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// A session's agent reported a usage limit: its task goes along the fallback chain
    /// ([`Lifecycle`]).
    pub(in crate::sessions) async fn usage_limited(
        &self,
        id: &str,
        resets_at: chrono::DateTime<chrono::Utc>,
    ) {
        self.lifecycle.usage_limited(id, resets_at).await;
    }

    /// The running agents: prompts, cancels and stops go to it.
    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    /// The rules, the sessions' security states, and the credentials agents ask for.
    pub fn guard(&self) -> &Arc<guard::Guard> {
        &self.guard
    }

    /// Reviewing and landing sessions' work: diffs, commits, merges, pull requests,
    /// commands run in a session's environment, and the conflict radar.
    pub fn landing(&self) -> &Arc<landing::Landing> {
        &self.landing
    }

    /// How many agents run, as it changes.
    pub fn running(&self) -> watch::Receiver<usize> {
        self.runner.running()
    }

    /// Whether a session waits for memory to start its agent (the daemon stays up for it).
    pub fn has_queued(&self) -> bool {
        self.runner.has_queued()
    }

    /// Sends a prompt now, or queues it behind the running turn ([`Runner::prompt`]).
    pub async fn prompt(&self, id: &str, text: String) -> Result<bool> {
        Ok(self.runner.prompt(id, text).await?)
    }

    /// Asks the agent to end its turn ([`Runner::cancel`]).
    pub async fn cancel(&self, id: &str) -> Result<()> {
        Ok(self.runner.cancel(id).await?)
    }

    /// Ends the agent and waits until it is gone ([`Runner::stop`]).
    pub async fn stop(&self, id: &str) -> Result<Session> {
        Ok(self.runner.stop(id).await?)
    }

    /// Ends every agent for a daemon shutdown ([`Runner::shutdown`]).
    pub async fn shutdown(&self) {
        self.runner.shutdown().await;
    }

    /// Makes the settings sessions use (profiles, drivers, channels) the daemon's
    /// settings in use, which follow the files and keep the last good ones when an edit
    /// breaks them. Until then, the files are read at each use.
    pub fn follow_settings(&self, live: watch::Receiver<Arc<Config>>) {
        // Budgets apply as soon as they are edited.
        let budgets = Arc::downgrade(&self.budgets);
        let mut follow = live.clone();
        tokio::spawn(async move {
            loop {
                let config = follow.borrow_and_update().budget.clone();
                let Some(budgets) = budgets.upgrade() else {
                    return;
                };
                budgets.set_config(config);
                drop(budgets);
                if follow.changed().await.is_err() {
                    return;
                }
            }
        });
        self.settings.follow(live);
    }

    /// The kiln's settings as they are now (they apply live).
    pub fn settings(&self) -> Result<Config> {
        self.settings.get()
    }

    fn managed(&self, id: &str) -> Result<Session> {
        managed(&self.ledger, id)
    }
}

/// The session `id`, which crucible runs the agent of.
/// A driver failure as the domain's error: the session's environment could not be made
/// or used (a missing tool, a refusing kernel, an unreachable host).
impl From<driver::DriverError> for LedgerError {
    fn from(e: driver::DriverError) -> Self {
        Self::Driver(Box::new(e))
    }
}

fn managed(ledger: &Ledger, id: &str) -> Result<Session> {
    let session = ledger.get_session(id)?;
    if !session.is_managed() {
        return Err(LedgerError::Invalid(format!(
            "session {id} registered itself; crucible does not run its agent"
        )));
    }
    Ok(session)
}

fn not_running(session: &Session) -> LedgerError {
    LedgerError::Conflict(format!(
        "session {} has no running agent (it is {}); create a new session to continue",
        session.id,
        session.state.map_or("unmanaged", SessionState::as_str)
    ))
}
