//! The sessions crucible runs: each one an agent process in its own git worktree.
//!
//! [`Sessions`] creates, prompts, cancels, stops and deletes them; every running session
//! has an actor task ([`actor`]) that owns its agent and turns what the agent does into
//! lifecycle state, transcript entries and inbox messages. What happens when is decided
//! by a pure state machine ([`machine`]), in the words of [`wording`]. After a restart,
//! sessions whose agent was running are resumed through ACP `session/load` where the
//! agent supports it, and otherwise marked stopped with an `error` message: never
//! silently replaced.

mod actor;
pub mod budget;
mod channel;
mod command;
mod context;
mod control;
mod credential;
mod cron;
mod drift;
mod exec;
mod gate;
mod given;
mod handoff;
mod inbox_news;
mod land;
mod machine;
mod radar;
mod rule_files;
mod security;
mod spawn;
mod transcript;
mod wording;
mod worktree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::config::{AgentKind, Config};
use crate::driver::{self, Environment};
use crate::git;
use crate::ledger::{Ledger, LedgerError, display_name, now_rfc3339};
use crate::protocol::{
    ClientEnv, CreateSessionParams, DeleteOutcome, Event, PruneResult, RemoveOptions, Session,
    SessionState, Skipped, limits,
};

use crate::markdown::MarkdownLog;
pub use channel::Deliver;
pub use context::{PREAMBLE_HEADER, preamble};
pub use cron::CronDoor;

use command::Command;
use spawn::Resume;
use transcript::TranscriptWriter;

pub type Result<T> = std::result::Result<T, LedgerError>;

use crate::protocol::env::SESSION as SESSION_ENV;

pub struct Sessions {
    ledger: Arc<Ledger>,
    actors: Mutex<HashMap<String, mpsc::UnboundedSender<Command>>>,
    /// The environments of running agents, by session.
    environments: Mutex<HashMap<String, Arc<Environment>>>,
    /// What the process that asked for each session gave of its environment ([`given`]);
    /// in memory only.
    given: Mutex<HashMap<String, Arc<ClientEnv>>>,
    /// One parked session made again at a time.
    unparking: tokio::sync::Mutex<()>,
    /// One channel message resolved at a time ([`channel`]).
    resolving: tokio::sync::Mutex<()>,
    /// The cron jobs the daemon runs, and their skips since it started ([`cron`]).
    cron: Mutex<cron::CronBook>,
    /// How many agents run; the daemon does not idle out while any does.
    running: watch::Sender<usize>,
    /// One git change to the repository at a time (worktrees and branches share its
    /// lock files).
    git: tokio::sync::Mutex<()>,
    /// The conflict radar as last computed ([`radar`]).
    radar: Mutex<crate::protocol::ConflictReport>,
    /// The rules every session's gate judges by, with the last good set ([`rule_files`]).
    rules: Arc<rule_files::RuleBook>,
    /// The daemon's settings in use, once it follows them ([`Sessions::follow_settings`]).
    live_settings: std::sync::OnceLock<watch::Receiver<Arc<Config>>>,
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
        let sessions = Arc::new(Self {
            ledger: Arc::clone(&ledger),
            actors: Mutex::new(HashMap::new()),
            environments: Mutex::new(HashMap::new()),
            given: Mutex::new(HashMap::new()),
            unparking: tokio::sync::Mutex::new(()),
            resolving: tokio::sync::Mutex::new(()),
            cron: Mutex::new(cron::CronBook::default()),
            running: watch::channel(0).0,
            git: tokio::sync::Mutex::new(()),
            radar: Mutex::new(Default::default()),
            rules: Arc::new(rule_files::RuleBook::new(ledger.kiln().clone())),
            live_settings: std::sync::OnceLock::new(),
            budgets: Arc::new(budget::Budgets::new(
                ledger.config().budget.clone(),
                ledger.kiln().state_dir().join("budget-raises.json"),
                &ledger.list_sessions(),
            )),
        });
        tokio::spawn(inbox_news::route_inbox_events(
            Arc::downgrade(&sessions),
            ledger.subscribe(),
        ));
        sessions.recover().await;
        sessions.finish_deletions().await;
        if let Some(takeovers) = ledger.takeovers() {
            tokio::spawn(take_over(Arc::downgrade(&sessions), takeovers));
        }
        tokio::spawn(radar::watch(Arc::downgrade(&sessions), ledger.subscribe()));
        sessions
    }

    pub fn running(&self) -> watch::Receiver<usize> {
        self.running.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Command>>> {
        self.actors.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn environments_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Environment>>> {
        self.environments.lock().unwrap_or_else(|e| e.into_inner())
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
        let _ = self.live_settings.set(live);
    }

    /// The kiln's settings as they are now (they apply live).
    pub fn settings(&self) -> Result<Config> {
        match self.live_settings.get() {
            Some(live) => Ok(Config::clone(&live.borrow())),
            None => Config::load(&self.ledger.kiln().settings_path())
                .map_err(|e| LedgerError::Invalid(e.to_string())),
        }
    }

    fn actor(&self, id: &str) -> Option<mpsc::UnboundedSender<Command>> {
        self.lock().get(id).cloned()
    }

    fn managed(&self, id: &str) -> Result<Session> {
        let session = self.ledger.get_session(id)?;
        if !session.is_managed() {
            return Err(LedgerError::Invalid(format!(
                "session {id} registered itself; crucible does not run its agent"
            )));
        }
        Ok(session)
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
        let config = self.settings()?;
        let profile = given::profile(&config, &params.agent, given.as_deref()).map_err(|why| {
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
        given::check_env(&spec, &params.driver, given.as_deref())
            .and_then(|()| given::check_api_key(&params.agent, &profile, given.as_deref()))?;
        given::locate(&params.agent, profile.clone(), kind, given.as_deref())?;
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
        self.keep_given(&id, given);
        // The task goes in with the actor, so the agent starts on it as soon as it is
        // ready (never showing `complete` first).
        match self
            .spawn_actor(
                session.clone(),
                &params.agent,
                profile,
                None,
                session.task.clone(),
            )
            .await
        {
            Ok(()) => {}
            Err(why) => {
                self.keep_given(&id, None);
                let _git = self.git.lock().await;
                placement.undo(kiln.root()).await;
                let _ = self.ledger.remove_managed(&id, &Default::default()).await;
                let _ = std::fs::remove_file(MarkdownLog::path_for(&kiln.sessions_dir(), &id));
                return Err(LedgerError::Invalid(why.to_string()));
            }
        }
        self.ledger.get_session(&id)
    }

    /// Sends a prompt now, or queues it behind the running turn. True when queued. A
    /// parked session's environment is made again first, and the prompt is its first.
    pub async fn prompt(self: &Arc<Self>, id: &str, text: String) -> Result<bool> {
        let session = self.managed(id)?;
        if text.trim().is_empty() {
            return Err(LedgerError::Invalid("the prompt must not be empty".into()));
        }
        if text.len() > limits::PROMPT_BYTES {
            return Err(LedgerError::Invalid(format!(
                "the prompt is {} KiB, over the {} KiB a prompt may hold: put the rest in a \
                 file in the worktree and name it in the prompt",
                text.len().div_ceil(1024),
                limits::PROMPT_BYTES / 1024
            )));
        }
        if session.state == Some(SessionState::Parked) {
            let _one_at_a_time = self.unparking.lock().await;
            let session = self.managed(id)?;
            if session.state == Some(SessionState::Parked) && self.actor(id).is_none() {
                self.unpark(session, text).await?;
                return Ok(false);
            }
        }
        self.tell(id, |ack| Command::Prompt { text, ack }).await
    }

    /// Makes a parked session's environment again and starts its agent, resuming the
    /// agent's own session where it can (otherwise a fresh one seeded with the context
    /// stack), with `prompt` as its first.
    async fn unpark(self: &Arc<Self>, session: Session, prompt: String) -> Result<()> {
        let config = self.settings()?;
        let given = self.given(&session.id);
        let profile =
            given::profile(&config, &session.agent_name, given.as_deref()).map_err(|why| {
                LedgerError::Invalid(format!(
                    "the agent profile {:?} is gone: {why}",
                    session.agent_name
                ))
            })?;
        let mut starting = session.clone();
        starting.state = Some(SessionState::Starting);
        starting.state_reason = Some(wording::UNPARKING.into());
        let starting = self.ledger.save_managed(&starting).await?;
        let resume = Resume {
            acp_session_id: session.acp_session_id.clone(),
            previous: SessionState::Parked,
        };
        let name = session.agent_name.clone();
        if let Err(why) = self
            .spawn_actor(starting, &name, profile, Some(resume), Some(prompt))
            .await
        {
            // Still parked: a later prompt may try again.
            let mut parked = session;
            parked.state_reason = Some(format!("{}; the last try failed: {why}", wording::PARKED));
            self.ledger.save_managed(&parked).await?;
            return Err(LedgerError::Invalid(why.to_string()));
        }
        Ok(())
    }

    /// Asks the agent to end its turn; pending approvals are withdrawn.
    pub async fn cancel(&self, id: &str) -> Result<()> {
        self.tell(id, |ack| Command::Cancel { ack }).await
    }

    /// Gives a running session's actor a command and waits for its acknowledgement.
    async fn tell<T>(
        &self,
        id: &str,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T> {
        let session = self.managed(id)?;
        let actor = self.actor(id).ok_or_else(|| not_running(&session))?;
        let (ack, done) = oneshot::channel();
        actor
            .send(command(ack))
            .map_err(|_| not_running(&session))?;
        done.await.map_err(|_| not_running(&session))
    }

    /// Ends the agent and waits until it is gone; the worktree and transcript stay.
    pub async fn stop(&self, id: &str) -> Result<Session> {
        let session = self.managed(id)?;
        if session.state == Some(SessionState::Parked) && self.actor(id).is_none() {
            let mut stopped = session;
            stopped.state = Some(SessionState::Stopped);
            stopped.state_reason = Some(wording::STOPPED.into());
            stopped.updated_at = Some(now_rfc3339());
            return self.ledger.save_managed(&stopped).await;
        }
        self.stop_actor(id, false).await;
        self.ledger.get_session(id)
    }

    async fn stop_actor(&self, id: &str, shutdown: bool) {
        let Some(actor) = self.actor(id) else { return };
        // Its environment goes with it (a container, an ssh connection): held from here,
        // so the stop returns only once it is gone, whoever releases it.
        let environment = self.environments_lock().get(id).cloned();
        let (ack, done) = oneshot::channel();
        if actor.send(Command::Stop { ack, shutdown }).is_ok() {
            let _ = done.await;
        }
        if let Some(environment) = environment {
            self.forget_environment(id, &environment);
            environment.close().await;
        }
    }

    /// Ends every agent for a daemon shutdown, leaving their sessions as they are so the
    /// next daemon resumes them.
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self.lock().keys().cloned().collect();
        let stops = ids.iter().map(|id| self.stop_actor(id, true));
        futures::future::join_all(stops).await;
    }

    /// Sessions whose agent was running when the previous daemon ended: resume them with
    /// `session/load` when the agent can, otherwise say they were lost.
    async fn recover(self: &Arc<Self>) {
        let config = match Config::load(&self.ledger.kiln().settings_path()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("settings unreadable while recovering sessions: {e}");
                self.ledger.config().clone()
            }
        };
        for session in self.ledger.list_sessions() {
            // Team mode: another daemon's sessions are its to recover.
            if self.ledger.is_foreign(&session) {
                continue;
            }
            let Some(state) = session.state else { continue };
            if state == SessionState::Creating {
                self.mark_lost(session, wording::LOST_WHILE_CREATED.into())
                    .await;
                continue;
            }
            let Some(pid) = session.agent_pid else {
                continue;
            };
            if crate::sys::process_has_env(pid, SESSION_ENV, &session.id) {
                tracing::info!(session = %session.id, pid, "ending an agent left by the previous daemon");
                crate::sys::signal_group(pid, libc::SIGKILL);
            }
            let profile = config.profile(&session.agent_name).ok();
            let (Some(profile), Some(acp_session_id)) = (profile, session.acp_session_id.clone())
            else {
                let why = if config.profile(&session.agent_name).is_ok() {
                    wording::LOST_NEVER_OPENED
                } else {
                    wording::LOST_PROFILE_GONE
                };
                self.mark_lost(session, why.into()).await;
                continue;
            };
            let name = session.agent_name.clone();
            let resume = Resume {
                acp_session_id: Some(acp_session_id),
                previous: state,
            };
            let mut starting = session.clone();
            starting.state = Some(SessionState::Starting);
            starting.state_reason = Some(wording::RESUMING.into());
            starting.agent_pid = None;
            let starting = match self.ledger.save_managed(&starting).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(session = %session.id, "cannot record the resume: {e}");
                    continue;
                }
            };
            if let Err(e) = self.ledger.revoke_handles(&session.id).await {
                tracing::warn!(session = %session.id, "cannot revoke old handles: {e}");
            }
            if let Err(why) = self
                .spawn_actor(starting.clone(), &name, profile, Some(resume), None)
                .await
            {
                self.mark_lost(starting, why.to_string()).await;
            }
        }
    }

    /// Marks a session stopped because its agent is gone, and says so in the inbox.
    async fn mark_lost(&self, session: Session, why: String) {
        let (reason, report) = wording::lost(&why);
        self.mark_lost_as(session, reason, report).await;
    }

    /// Team mode: sessions taken over from a daemon whose lease ran out. Their agents ran
    /// there and are lost with it; an agent left running on this host is ended first.
    async fn adopt(&self, takeover: crate::ledger::Takeover) {
        let from = &takeover.from;
        let same_host = from.host == self.ledger.instance().host;
        for session in takeover.sessions {
            if !session.is_managed() {
                if session.ended_at.is_none() {
                    let reason = format!("its daemon on {} ({}) went away", from.host, from.kiln);
                    if let Err(e) = self.ledger.deregister(&session.id, &reason, None).await {
                        tracing::warn!(session = %session.id, "cannot end a session of a daemon that went away: {e}");
                    }
                }
                continue;
            }
            let running =
                session.state == Some(SessionState::Creating) || session.agent_pid.is_some();
            if !running {
                continue;
            }
            if same_host
                && let Some(pid) = session.agent_pid
                && crate::sys::process_has_env(pid, SESSION_ENV, &session.id)
            {
                tracing::info!(session = %session.id, pid, "ending an agent left by a daemon that went away");
                crate::sys::signal_group(pid, libc::SIGKILL);
            }
            let (reason, report) = wording::lost_with_daemon(&from.host, &from.kiln);
            self.mark_lost_as(session, reason, report).await;
        }
    }

    #[tracing::instrument(name = "session", skip_all, fields(session = %session.id))]
    async fn mark_lost_as(&self, mut session: Session, reason: String, report: wording::Notice) {
        session.state = Some(SessionState::Stopped);
        session.state_reason = Some(reason.clone());
        session.agent_pid = None;
        session.updated_at = Some(now_rfc3339());
        if let Err(e) = self.ledger.revoke_handles(&session.id).await {
            tracing::warn!("cannot revoke handles: {e}");
        }
        if let Err(e) = self.ledger.save_managed(&session).await {
            tracing::error!("cannot record a lost agent: {e}");
            return;
        }
        let mut actor_log = TranscriptWriter::open(&self.ledger, &session).await;
        actor_log
            .state(&self.ledger, SessionState::Stopped, Some(&reason))
            .await;
        if let Err(e) = self.ledger.send(report.into_params(&session.id)).await {
            tracing::error!("cannot report a lost agent: {e}");
        }
    }
}

/// Hands every takeover to the sessions manager, one at a time.
async fn take_over(
    sessions: std::sync::Weak<Sessions>,
    mut takeovers: mpsc::UnboundedReceiver<crate::ledger::Takeover>,
) {
    while let Some(takeover) = takeovers.recv().await {
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        sessions.adopt(takeover).await;
    }
}

fn not_running(session: &Session) -> LedgerError {
    LedgerError::Conflict(format!(
        "session {} has no running agent (it is {}); create a new session to continue",
        session.id,
        session.state.map_or("unmanaged", SessionState::as_str)
    ))
}
