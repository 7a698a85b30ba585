//! The runner: every running session's actor and the environment its agent runs in,
//! what each asking process gave of its environment, and how many agents run. It
//! starts agents ([`spawn`]), tells their actors what to do (prompt, cancel, stop), makes
//! a parked session's environment again, and deals with agents a previous daemon left
//! behind ([`recover`]). Nothing else holds an actor or an environment.

mod admission;
mod recover;
mod spawn;

pub(super) use recover::take_over;
pub(super) use spawn::Resume;
pub use spawn::SpawnError;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::{mpsc, oneshot, watch};

use super::command::Command;
use super::guard::rule_files::RuleBook;
use super::live::LiveSettings;
use super::{Sessions, budget::Budgets, given, managed, not_running, wording};
use crate::config::ProfileError;
use crate::driver::Environment;
use crate::ledger::{Ledger, LedgerError, now_rfc3339};
use crate::protocol::{ClientEnv, Session, SessionState, limits};

/// What running a session's agent can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Its agent could not be started: its program, its environment or its handle.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("the prompt must not be empty")]
    EmptyPrompt,
    #[error(
        "the prompt is {kib} KiB, over the {most_kib} KiB a prompt may hold: put the rest in a file in the worktree and name it in the prompt"
    )]
    PromptTooLong { kib: usize, most_kib: usize },
    /// The session's agent profile is no longer in the settings (or its program is gone).
    #[error("the agent profile {name:?} is gone: {source}")]
    ProfileGone {
        name: String,
        #[source]
        source: ProfileError,
    },
    /// The request or the session's record.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl RunError {
    /// The JSON-RPC code of this failure.
    pub fn code(&self) -> i64 {
        match self {
            RunError::Spawn(_) => crate::protocol::code::SPAWN_FAILED,
            RunError::EmptyPrompt
            | RunError::PromptTooLong { .. }
            | RunError::ProfileGone { .. } => crate::protocol::code::INVALID_PARAMS,
            RunError::Ledger(e) => e.code(),
        }
    }
}

/// As the domain's error: a start that failed keeps its cause ([`LedgerError::Start`]),
/// a refusal of the request is invalid params.
impl From<RunError> for LedgerError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Spawn(why) => LedgerError::Start(Box::new(why)),
            RunError::Ledger(e) => e,
            refused => LedgerError::Invalid(refused.to_string()),
        }
    }
}

crate::ledger::coded_error!(RunError, answer_only);

type Result<T> = std::result::Result<T, RunError>;

pub struct Runner {
    ledger: Arc<Ledger>,
    actors: Mutex<HashMap<String, mpsc::UnboundedSender<Command>>>,
    /// The environments of running agents, by session.
    environments: Mutex<HashMap<String, Arc<Environment>>>,
    /// What the process that asked for each session gave of its environment ([`given`]);
    /// in memory only.
    given: Mutex<HashMap<String, Arc<ClientEnv>>>,
    /// One parked or stopped session made again at a time.
    unparking: tokio::sync::Mutex<()>,
    /// How many agents run; the daemon does not idle out while any does.
    running: watch::Sender<usize>,
    settings: Arc<LiveSettings>,
    /// The rules every session's gate judges by.
    rules: Arc<RuleBook>,
    /// What sessions spent today, and whether each may start a turn.
    budgets: Arc<Budgets>,
    /// The manager a session on a usage limit is handed off through.
    sessions: Weak<Sessions>,
    /// Sessions whose agent waits for the host's memory ([`admission`]).
    admission: admission::Queue,
}

/// What a runner is made with.
pub(super) struct RunnerParts {
    pub ledger: Arc<Ledger>,
    pub settings: Arc<LiveSettings>,
    pub rules: Arc<RuleBook>,
    pub budgets: Arc<Budgets>,
    pub sessions: Weak<Sessions>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runner {
    pub(super) fn new(parts: RunnerParts) -> Self {
        let RunnerParts {
            ledger,
            settings,
            rules,
            budgets,
            sessions,
        } = parts;
        Self {
            ledger,
            actors: Mutex::new(HashMap::new()),
            environments: Mutex::new(HashMap::new()),
            given: Mutex::new(HashMap::new()),
            unparking: tokio::sync::Mutex::new(()),
            running: watch::channel(0).0,
            settings,
            rules,
            budgets,
            sessions,
            admission: admission::Queue::default(),
        }
    }

    /// How many agents run, as it changes.
    pub fn running(&self) -> watch::Receiver<usize> {
        self.running.subscribe()
    }

    /// The running session's actor.
    pub(super) fn actor(&self, id: &str) -> Option<mpsc::UnboundedSender<Command>> {
        locked(&self.actors).get(id).cloned()
    }

    /// Gives every running actor a command.
    pub(super) fn tell_all(&self, command: impl Fn() -> Command) {
        for actor in locked(&self.actors).values() {
            let _ = actor.send(command());
        }
    }

    /// The environment the session's agent runs in, while it runs.
    pub fn environment(&self, id: &str) -> Option<Arc<Environment>> {
        locked(&self.environments).get(id).cloned()
    }

    /// What the asking process gave for session `id`, while this daemon runs.
    pub(super) fn given(&self, id: &str) -> Option<Arc<ClientEnv>> {
        locked(&self.given).get(id).cloned()
    }

    /// Keeps (or, with `None`, drops) what the asking process gave for session `id`.
    pub(super) fn keep_given(&self, id: &str, given: Option<Arc<ClientEnv>>) {
        let mut all = locked(&self.given);
        match given {
            Some(given) => all.insert(id.to_string(), given),
            None => all.remove(id),
        };
    }

    /// Held while a stopped or parked session's agent is started again, so two starts of
    /// one session never race.
    pub(super) async fn one_start_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.unparking.lock().await
    }

    /// Sends a prompt now, or queues it behind the running turn. True when queued. A
    /// parked session's environment is made again first, and the prompt is its first.
    pub async fn prompt(self: &Arc<Self>, id: &str, text: String) -> Result<bool> {
        let session = managed(&self.ledger, id)?;
        if text.trim().is_empty() {
            return Err(RunError::EmptyPrompt);
        }
        if text.len() > limits::PROMPT_BYTES {
            return Err(RunError::PromptTooLong {
                kib: text.len().div_ceil(1024),
                most_kib: limits::PROMPT_BYTES / 1024,
            });
        }
        if session.state == Some(SessionState::Parked) {
            let _one_at_a_time = self.unparking.lock().await;
            let session = managed(&self.ledger, id)?;
            if session.state == Some(SessionState::Parked) && self.actor(id).is_none() {
                self.unpark(session, text).await?;
                // Waiting for memory, the prompt is kept with the session: queued.
                let now = self.ledger.get_session(id)?;
                return Ok(now.state == Some(SessionState::Queued));
            }
        }
        self.tell(id, |ack| Command::Prompt { text, ack }).await
    }

    /// Makes a parked session's environment again and starts its agent, resuming the
    /// agent's own session where it can (otherwise a fresh one seeded with the context
    /// stack), with `prompt` as its first.
    pub(super) async fn unpark(self: &Arc<Self>, session: Session, prompt: String) -> Result<()> {
        if let Err(why) = self
            .start_again(
                &session,
                wording::UNPARKING,
                SessionState::Parked,
                Some(prompt),
            )
            .await?
        {
            // Still parked: a later prompt may try again.
            let mut parked = session;
            parked.state_reason = Some(format!("{}; the last try failed: {why}", wording::PARKED));
            self.ledger.save_managed(&parked).await?;
            return Err(why.into());
        }
        Ok(())
    }

    /// Starts a session's agent again with the profile it was given: the session is
    /// `Starting` for `reason`, and the agent's own session is resumed where it can be
    /// (else a fresh one, seeded with the context stack), `prompt` first. The outer error
    /// means nothing was started; the inner one is the agent that would not start, for
    /// the caller to record as its state calls for.
    pub(in crate::sessions) async fn start_again(
        self: &Arc<Self>,
        session: &Session,
        reason: &str,
        previous: SessionState,
        prompt: Option<String>,
    ) -> Result<std::result::Result<(), SpawnError>> {
        let resume = Resume {
            acp_session_id: session.acp_session_id.clone(),
            previous,
            carried: Vec::new(),
        };
        self.start_resuming(session, reason, resume, prompt).await
    }

    /// [`Runner::start_again`], resuming as `resume` says (the questions a session moved
    /// here carries, too).
    pub(in crate::sessions) async fn start_resuming(
        self: &Arc<Self>,
        session: &Session,
        reason: &str,
        resume: Resume,
        prompt: Option<String>,
    ) -> Result<std::result::Result<(), SpawnError>> {
        let config = self.settings.get()?;
        let given = self.given(&session.id);
        let profile =
            given::profile(&config, &session.agent_name, given.as_deref()).map_err(|source| {
                RunError::ProfileGone {
                    name: session.agent_name.clone(),
                    source,
                }
            })?;
        let mut starting = session.clone();
        starting.state = Some(SessionState::Starting);
        starting.state_reason = Some(reason.into());
        starting.updated_at = Some(now_rfc3339());
        let starting = self.ledger.save_managed(&starting).await?;
        Ok(self
            .admit(starting, &session.agent_name, profile, Some(resume), prompt)
            .await)
    }

    /// Holds the session's actor for a move (`held`: it writes nothing of the session), or
    /// lets it go on (it saves its record again). False when no actor runs.
    pub(in crate::sessions) async fn hold(&self, id: &str, held: bool) -> bool {
        let Some(actor) = self.actor(id) else {
            return false;
        };
        let (ack, done) = oneshot::channel();
        actor.send(Command::Hold { held, ack }).is_ok() && done.await.is_ok()
    }

    /// Asks the agent to end its turn; pending approvals are withdrawn.
    pub async fn cancel(&self, id: &str) -> Result<()> {
        self.tell(id, |ack| Command::Cancel { ack }).await
    }

    /// Gives a running session's actor a command and waits for its acknowledgement.
    pub(super) async fn tell<T>(
        &self,
        id: &str,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T> {
        let session = managed(&self.ledger, id)?;
        let actor = self.actor(id).ok_or_else(|| not_running(&session))?;
        let (ack, done) = oneshot::channel();
        actor
            .send(command(ack))
            .map_err(|_| not_running(&session))?;
        Ok(done.await.map_err(|_| not_running(&session))?)
    }

    /// Ends the agent and waits until it is gone; the worktree and transcript stay.
    pub async fn stop(&self, id: &str) -> Result<Session> {
        let session = managed(&self.ledger, id)?;
        if session.state == Some(SessionState::Parked) && self.actor(id).is_none() {
            let mut stopped = session;
            stopped.state = Some(SessionState::Stopped);
            stopped.state_reason = Some(wording::STOPPED.into());
            stopped.updated_at = Some(now_rfc3339());
            return Ok(self.ledger.save_managed(&stopped).await?);
        }
        self.stop_actor(id, false).await;
        Ok(self.ledger.get_session(id)?)
    }

    /// Ends the session's actor, if it runs, and the environment its agent ran in.
    pub(super) async fn stop_actor(&self, id: &str, shutdown: bool) {
        let Some(actor) = self.actor(id) else { return };
        // Its environment goes with it (a container, an ssh connection): held from here,
        // so the stop returns only once it is gone, whoever releases it.
        let environment = self.environment(id);
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
        let ids: Vec<String> = locked(&self.actors).keys().cloned().collect();
        let stops = ids.iter().map(|id| self.stop_actor(id, true));
        futures::future::join_all(stops).await;
    }

    /// Forgets the session's environment if it is still `environment` (a restart may have
    /// made the session a new one meanwhile).
    fn forget_environment(&self, id: &str, environment: &Arc<Environment>) {
        let mut environments = locked(&self.environments);
        if environments
            .get(id)
            .is_some_and(|e| Arc::ptr_eq(e, environment))
        {
            environments.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_that_cannot_start_keeps_its_kind_and_its_cause() {
        let why = SpawnError::Handle(LedgerError::Conflict("no handle today".into()));
        let e = LedgerError::from(RunError::from(why));
        assert!(matches!(e, LedgerError::Start(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "cannot issue a session handle: no handle today"
        );
        let refused = RunError::from(LedgerError::Invalid("empty".into()));
        assert!(matches!(
            LedgerError::from(refused),
            LedgerError::Invalid(_)
        ));
        let long = LedgerError::from(RunError::PromptTooLong {
            kib: 300,
            most_kib: 256,
        });
        assert_eq!(
            (long.code(), long.to_string().as_str()),
            (
                crate::protocol::code::INVALID_PARAMS,
                "the prompt is 300 KiB, over the 256 KiB a prompt may hold: put the rest in a file in the worktree and name it in the prompt"
            )
        );
    }
}
