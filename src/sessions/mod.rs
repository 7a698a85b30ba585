//! The sessions crucible runs: each one an agent process in its own git worktree.
//!
//! [`Sessions`] creates, forks, hands off and deletes them; the [`Runner`] starts their
//! agents and prompts, cancels and stops them; [`landing::Landing`] reviews and lands their
//! work and keeps the conflict radar; [`Conversations`] resolves channels' messages and
//! cron runs to the sessions they start and continue. Every running session has an actor task
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
mod control;
pub mod conversations;
mod fallback;
mod given;
pub mod guard;
mod handoff;
mod inbox_news;
pub mod landing;
mod live;
mod machine;
mod moving;
mod refine;
mod runner;
mod transcript;
mod wording;
mod worktree;

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
pub use conversations::{Conversations, CronDoor, Deliver};
pub use runner::{RunError, Runner, SpawnError};

use command::Command;
use live::LiveSettings;

pub type Result<T> = std::result::Result<T, LedgerError>;

pub struct Sessions {
    ledger: Arc<Ledger>,
    /// The running agents and their actors ([`runner`]).
    runner: Arc<Runner>,
    /// One git change to the repository at a time (worktrees and branches share its
    /// lock files); landing merges under it too.
    git: Arc<tokio::sync::Mutex<()>>,
    /// Reviewing and landing sessions' work, and the conflict radar ([`landing`]).
    landing: Arc<landing::Landing>,
    /// The rules, the sessions' security states and credentials ([`guard`]).
    guard: Arc<guard::Guard>,
    /// The daemon's settings in use, once it follows them ([`Sessions::follow_settings`]).
    settings: Arc<LiveSettings>,
    /// What sessions spent today, and whether each may start a turn ([`budget`]).
    budgets: Arc<budget::Budgets>,
    /// Usage limits by profile, and the fallback chains under way ([`fallback`]).
    fallbacks: fallback::Chains,
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
            Self {
                ledger: Arc::clone(&ledger),
                landing: landing::Landing::new(
                    Arc::clone(&ledger),
                    Arc::clone(&runner),
                    Arc::clone(&git),
                ),
                guard: guard::Guard::new(Arc::clone(&ledger), Arc::clone(&runner), rules),
                runner,
                git,
                settings,
                budgets,
                fallbacks: Default::default(),
            }
        });
        tokio::spawn(inbox_news::route_inbox_events(
            Arc::downgrade(&sessions),
            ledger.subscribe(),
        ));
        sessions.runner.recover().await;
        sessions.finish_deletions().await;
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

    /// Creates the worktree, stores the session and starts its agent. Anything that fails
    /// before the agent runs is undone and reported: no half-made session is left behind.
    /// Its agent gets the daemon's environment (see [`Sessions::create_for`]).
    pub async fn create(self: &Arc<Self>, params: CreateSessionParams) -> Result<Session> {
        self.create_from(params, None, None, None).await
    }

    /// [`Sessions::create`] for a process that gave its environment: its program is
    /// looked for on that `PATH` first, and its variables come from there first.
    pub async fn create_for(
        self: &Arc<Self>,
        params: CreateSessionParams,
        given: Option<ClientEnv>,
    ) -> Result<Session> {
        self.create_from(params, None, given.map(Arc::new), None)
            .await
    }

    /// The profile and driver a new session asks for, refused before anything is made
    /// when they cannot work together or with what the asking process gave.
    fn check_create(
        &self,
        params: &CreateSessionParams,
        given: Option<&ClientEnv>,
    ) -> Result<(AgentProfile, DriverSpec)> {
        let kiln = self.ledger.kiln();
        let config = self.settings()?;
        let profile = given::profile(&config, &params.agent, given).map_err(|why| {
            LedgerError::Invalid(format!(
                "{why} (settings: {})",
                kiln.settings_path().display()
            ))
        })?;
        if params.in_place && params.worktree.is_some() {
            return Err(LedgerError::Invalid(
                "choose either a worktree or in_place, not both".into(),
            ));
        }
        let spec = config
            .driver_spec(&profile, &params.driver)
            .map_err(|e| LedgerError::Invalid(e.to_string()))?;
        let kind = spec.kind();
        given::check_env(&spec, &params.driver, given)
            .and_then(|()| given::check_api_key(&params.agent, &profile, given))?;
        given::locate(&params.agent, profile.clone(), kind, given)?;
        if kind.runs_apart() {
            if profile.kind == AgentKind::Internal {
                return Err(LedgerError::Invalid(format!(
                    "crucible's own agent runs in the daemon: use the local or sandbox driver, not {}",
                    kind
                )));
            }
            if params.in_place {
                return Err(LedgerError::Invalid(format!(
                    "the {} driver works in a worktree of its own, not in place",
                    kind
                )));
            }
        }
        Ok((profile, spec))
    }

    /// [`Sessions::create_for`], the new session's context stack a copy of `seed`'s (a
    /// fork), made before its agent starts; for a hand-off, taking over `from`'s worktree
    /// (and its ownership) and base branch, and naming it as where it came from.
    async fn create_from(
        self: &Arc<Self>,
        params: CreateSessionParams,
        seed: Option<&str>,
        given: Option<Arc<ClientEnv>>,
        from: Option<&Session>,
    ) -> Result<Session> {
        let mut params = params;
        if let Some(task) = params.task.take() {
            params.task = Some(control::bounded_task(task, from.is_some())?);
        }
        let kiln = self.ledger.kiln().clone();
        let (profile, spec) = self.check_create(&params, given.as_deref())?;
        let id = self.ledger.next_id();
        let placement = {
            let _git = self.git.lock().await;
            self.place(&id, &params).await?
        };
        let now = now_rfc3339();
        let worktree = placement.path.as_ref().map(|p| p.display().to_string());
        let display = display_name(&kiln, worktree.as_deref(), &params.agent);
        let session = Session {
            state: Some(SessionState::Creating),
            task: params.task.clone().filter(|t| !t.trim().is_empty()),
            branch: placement.branch.clone(),
            worktree_owned: placement.created.is_some() || from.is_some_and(|f| f.worktree_owned),
            handed_from: from.map(|f| f.id.clone()),
            updated_at: Some(now.clone()),
            driver: Some(spec),
            security: crate::protocol::SecurityState {
                read_manifest: (!params.allow_read.is_empty()).then(|| params.allow_read.clone()),
                ..Default::default()
            },
            base_branch: from
                .and_then(|f| f.base_branch.clone())
                .or_else(|| placement.base_branch.clone()),
            channel: params.channel.clone(),
            ..Session::started(
                id.clone(),
                worktree,
                profile.kind.as_str().into(),
                params.agent.clone(),
                display,
                now,
            )
        };
        let session = match self.ledger.add_managed(session).await {
            Ok(s) => s,
            Err(e) => {
                let _git = self.git.lock().await;
                placement.undo(kiln.root()).await;
                return Err(e);
            }
        };
        let seeded = match seed {
            Some(from) => self.ledger.copy_context(from, &id).await,
            None => Ok(()),
        };
        if let Err(e) = seeded {
            let _git = self.git.lock().await;
            placement.undo(kiln.root()).await;
            let _ = self.ledger.remove_managed(&id, &Default::default()).await;
            return Err(e);
        }
        self.runner.keep_given(&id, given);
        // The task goes in with the actor, so the agent starts on it as soon as it is
        // ready (never showing `complete` first).
        let task = session.task.clone();
        if let Err(why) = self
            .runner
            .admit(session, &params.agent, profile, None, task)
            .await
        {
            self.runner.keep_given(&id, None);
            let _git = self.git.lock().await;
            placement.undo(kiln.root()).await;
            let _ = self.ledger.remove_managed(&id, &Default::default()).await;
            let _ = std::fs::remove_file(MarkdownLog::path_for(&kiln.sessions_dir(), &id));
            return Err(RunError::Spawn(why).into());
        }
        self.ledger.get_session(&id)
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
