//! Starting a session's agent: its driver's environment provisioned, a fresh handle,
//! the agent launched with the session's variables, and the actor that owns it run
//! until the agent is gone (then the environment closed, and after a context miss the
//! question whether to widen the manifest asked).

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Runner, locked};
use crate::agent::{self, AgentEvent, AgentHandle, Launch};
use crate::audit::{Audit, AuditEvent};
use crate::config::{AgentKind, AgentProfile, Config};
use crate::driver::{self, DriverError, Environment};
use crate::kiln::Kiln;
use crate::ledger::LedgerError;
use crate::protocol::env::{self, SESSION as SESSION_ENV};
use crate::protocol::{DriverKind, Session, SessionState};
use crate::sessions::actor::{Actor, ActorSetup, Fallback};
use crate::sessions::lifecycle::ask_to_refine;
use crate::sessions::{context, given, wording};

/// What a resumed actor needs to know.
pub(in crate::sessions) struct Resume {
    /// The agent's own session to load (none for agents that keep none).
    pub acp_session_id: Option<String>,
    pub previous: SessionState,
    /// Questions left open by the agent of another daemon the session moved from (id,
    /// title): answered here, their answer goes to this agent as a prompt.
    pub carried: Vec<(String, String)>,
}

/// Why a session's agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The agent's program cannot be found.
    #[error(transparent)]
    Locate(LedgerError),
    /// The agent's program cannot be launched.
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error("cannot record the session's limits: {0}")]
    Limits(LedgerError),
    #[error("cannot issue a session handle: {0}")]
    Handle(LedgerError),
    #[error("cannot record the session: {0}")]
    Record(LedgerError),
}

/// What starting an agent made before its actor runs.
struct Started {
    environment: Arc<Environment>,
    agent_cwd: Option<PathBuf>,
    handle: AgentHandle,
    events: mpsc::UnboundedReceiver<AgentEvent>,
}

impl Runner {
    /// Starts the agent, with a fresh handle, and the actor that owns it.
    #[tracing::instrument(name = "session", skip_all, fields(session = %session.id))]
    pub(in crate::sessions) async fn spawn(
        self: &Arc<Self>,
        mut session: Session,
        profile_name: &str,
        profile: AgentProfile,
        resume: Option<Resume>,
        first_prompt: Option<String>,
    ) -> std::result::Result<(), SpawnError> {
        let folder = context::folder(&self.ledger, &session);
        let system = context::system_entry(&session, Some(&profile), &folder);
        let spec = session.driver.clone().unwrap_or_default();
        let session_id = session.id.clone();
        let given = self.given(&session_id);
        let (_, missing) = given::values(spec.env(), given.as_deref());
        let profile = given::locate(profile_name, profile, spec.kind(), given.as_deref())
            .map_err(SpawnError::Locate)?;
        let idle_after = self.idle_after(spec.kind(), &profile);
        let started = self
            .start_agent(
                &mut session,
                profile_name,
                &profile,
                &system,
                resume.as_ref(),
            )
            .await?;
        let (tx, commands) = mpsc::unbounded_channel();
        locked(&self.actors).insert(session.id.clone(), tx);
        locked(&self.environments).insert(session.id.clone(), Arc::clone(&started.environment));
        self.running.send_modify(|n| *n += 1);
        // Its usage limits are reported to the manager (the fallback chain).
        let fallback = Some(Fallback {
            sessions: self.sessions.clone(),
        });
        let actor = Actor::new(
            Arc::clone(&self.ledger),
            session,
            started.handle,
            started.events,
            commands,
            ActorSetup {
                profile,
                system,
                resumed_from: resume.as_ref().map(|r| r.previous),
                carried: resume.map(|r| r.carried).unwrap_or_default(),
                first_prompt,
                idle_after,
                agent_cwd: started.agent_cwd,
                rules: Arc::clone(&self.rules),
                budgets: Arc::clone(&self.budgets),
                environment: Arc::clone(&started.environment),
                fallback,
            },
        );
        self.run_actor(actor, started.environment);
        if !missing.is_empty() {
            let notice = wording::started_without(&missing);
            if let Err(e) = self.ledger.send(notice.into_params(&session_id)).await {
                tracing::warn!("cannot say which variables are missing: {e}");
            }
        }
        Ok(())
    }

    /// Provisions the session's environment, records its limits, issues a fresh handle
    /// and launches the agent in it.
    async fn start_agent(
        &self,
        session: &mut Session,
        profile_name: &str,
        profile: &AgentProfile,
        system: &str,
        resume: Option<&Resume>,
    ) -> std::result::Result<Started, SpawnError> {
        let kiln = self.ledger.kiln();
        let cwd = PathBuf::from(context::folder(&self.ledger, session));
        let spec = session.driver.clone().unwrap_or_default();
        let given = self.given(&session.id);
        let (passed, _) = given::values(spec.env(), given.as_deref());
        let environment = Environment::provision(
            &spec,
            driver::Setup {
                kiln,
                session_id: &session.id,
                cwd: &cwd,
                program: (profile.kind != AgentKind::Internal).then_some(profile.command.as_str()),
                passed,
                path: given.as_ref().and_then(|g| g.path.as_deref()),
            },
        )
        .await?;
        let environment = Arc::new(environment);
        let agent_cwd = Some(environment.agent_cwd(&cwd)).filter(|c| c != &cwd);
        Audit::new(kiln).record(
            &session.id,
            AuditEvent::Start {
                driver: spec.kind().to_string(),
                mounts: spec.mounts().iter().map(|m| m.to_string()).collect(),
                network: spec.network().as_str().to_string(),
                limits: environment.limits(),
                env: spec.env().to_vec(),
            },
        );
        if session.limits != environment.limits() {
            session.limits = environment.limits();
            self.ledger
                .save_managed(session)
                .await
                .map_err(SpawnError::Limits)?;
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        let handle = self
            .ledger
            .issue_handle(&session.id)
            .await
            .map_err(SpawnError::Handle)?;
        let launch = Launch {
            profile_name: profile_name.to_string(),
            profile: profile.clone(),
            cwd,
            denied: vec![kiln.state_dir()],
            env: agent_env(kiln, &session.id, handle.expose()),
            stderr_log: kiln
                .sessions_dir()
                .join(format!("{}.stderr.log", session.id)),
            resume: resume.and_then(|r| r.acp_session_id.clone()),
            // Made again on purpose (unparked, restarted): a fresh agent session seeded
            // with the stack when the old one cannot be loaded.
            fresh_if_unresumable: resume.is_some_and(|r| {
                matches!(r.previous, SessionState::Parked | SessionState::Stopped)
            }),
            link: (profile.kind == AgentKind::Internal).then(|| {
                Arc::new(context::AgentLink {
                    ledger: Arc::clone(&self.ledger),
                    session_id: session.id.clone(),
                    system: system.to_string(),
                }) as Arc<dyn agent::SessionLink>
            }),
            environment: Arc::clone(&environment),
            api_key: given::api_key(profile, given.as_deref()),
        };
        match agent::launch(launch, events_tx) {
            Ok(handle) => Ok(Started {
                environment,
                agent_cwd,
                handle,
                events,
            }),
            Err(why) => {
                let _ = self.ledger.revoke_handles(&session.id).await;
                Err(SpawnError::Agent(why))
            }
        }
    }

    /// Runs the actor; once it ends, the session's environment goes and a context miss
    /// asks whether to widen the manifest.
    fn run_actor(self: &Arc<Self>, actor: Actor, environment: Arc<Environment>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let id = actor.id().to_string();
            actor.run().await;
            if let Some(me) = me.upgrade() {
                locked(&me.actors).remove(&id);
                me.forget_environment(&id, &environment);
                environment.close().await;
                if let Ok(ended) = me.ledger.get_session(&id)
                    && ended
                        .state_reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with("CONTEXT_MISS"))
                {
                    ask_to_refine(&me.ledger, &ended).await;
                }
                me.running.send_modify(|n| *n = n.saturating_sub(1));
            }
        });
    }

    /// How long a session may sit complete before its agent is stopped (parked): its
    /// profile's `idle_stop_minutes`, else, for a driver other than local, how long before
    /// its environment is torn down (`None`: never).
    fn idle_after(&self, kind: DriverKind, profile: &AgentProfile) -> Option<std::time::Duration> {
        if let Some(minutes) = profile.idle_stop_minutes {
            return (minutes > 0.0).then(|| std::time::Duration::from_secs_f64(minutes * 60.0));
        }
        if !kind.makes_environment() {
            return None;
        }
        let kiln = self.ledger.kiln();
        let minutes = Config::load(&kiln.settings_path())
            .map(|c| c.drivers.idle_timeout_minutes)
            .unwrap_or(self.ledger.config().drivers.idle_timeout_minutes);
        (minutes > 0.0).then(|| std::time::Duration::from_secs_f64(minutes * 60.0))
    }
}

/// The variables crucible gives an agent: its session, handle, kiln and socket.
fn agent_env(kiln: &Kiln, session_id: &str, handle: &str) -> Vec<(String, String)> {
    vec![
        (SESSION_ENV.into(), session_id.to_string()),
        (env::HANDLE.into(), handle.to_string()),
        (env::KILN.into(), kiln.root().display().to_string()),
        (
            env::SOCKET.into(),
            kiln.agent_socket_path().display().to_string(),
        ),
    ]
}
