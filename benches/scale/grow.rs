//! Growing the daemon's sessions: `session.create` paced at a steady rate, each session
//! timed from the call to ready (its agent initialised and its turn started: the first
//! `session.updated` in `working` or later), and the turns that leave every session idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::{
    CreateSessionParams, Event, PromptParams, SessionIdParams, SessionState, Topic,
};
use tokio::task::JoinHandle;

use super::figures::Stats;

/// Each session's first turn, and the turn that leaves a session idle after it streamed:
/// the agent says `session <its id>` (what the workbench phase looks for) and the turn ends.
pub const IDLE_TURN: &str = "session";
/// Connections the creates are spread over (a connection answers its calls in order).
const CREATE_CONNECTIONS: usize = 8;
/// How long every session may take to be ready, or idle, once asked.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);

/// When each session was first seen ready, from its `session.updated` events.
pub struct Watcher {
    ready: Arc<Mutex<HashMap<String, Instant>>>,
    task: JoinHandle<()>,
}

impl Watcher {
    /// Subscribes to the session topic on a connection of its own.
    pub async fn start(kiln: &Kiln) -> Result<Self> {
        let client = Client::connect(kiln)
            .await
            .context("connecting the watcher")?;
        let mut notes = client
            .subscribe(Some(vec![Topic::Session]))
            .await
            .context("subscribe")?;
        let ready = Arc::new(Mutex::new(HashMap::new()));
        let seen = Arc::clone(&ready);
        let task = tokio::spawn(async move {
            // The client's connection lives as long as the watcher reads it.
            let _client = client;
            while let Some(note) = notes.recv().await {
                let at = Instant::now();
                if let Some(Event::SessionUpdated(s) | Event::SessionRegistered(s)) =
                    Event::from_notification(&note.method, note.params)
                    && s.state.is_some_and(is_ready)
                {
                    seen.lock().unwrap().entry(s.id).or_insert(at);
                }
            }
        });
        Ok(Self { ready, task })
    }

    fn ready_at(&self, id: &str) -> Option<Instant> {
        self.ready.lock().unwrap().get(id).copied()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The agent is initialised and its turn has started (or already ended).
fn is_ready(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Working
            | SessionState::Waiting
            | SessionState::Complete
            | SessionState::Cancelled
    )
}

/// What growing took.
pub struct Grown {
    pub ids: Vec<String>,
    /// `session.create` call to its answer.
    pub round_trips: Stats,
    /// `session.create` call to the session ready.
    pub to_ready: Stats,
    /// `session.create` answered to the session ready: the agent starting.
    pub answer_to_ready: Stats,
    /// The first call to the last session ready.
    pub took: Duration,
    /// The first call to the last answer.
    pub answered: Duration,
    /// Creates per second as they were answered.
    pub answered_rate: f64,
}

/// Creates `count` sessions at `rate` per second (each call sent on time, whether the
/// ones before were answered or not), each with [`IDLE_TURN`] as its task, and waits
/// until every one is ready.
pub async fn grow(kiln: &Kiln, watcher: &Watcher, count: usize, rate: f64) -> Result<Grown> {
    let mut clients = Vec::with_capacity(CREATE_CONNECTIONS);
    for _ in 0..CREATE_CONNECTIONS {
        clients.push(Arc::new(
            Client::connect(kiln)
                .await
                .context("connecting a creator")?,
        ));
    }
    let started = Instant::now();
    let mut calls = Vec::with_capacity(count);
    let every = Duration::from_secs_f64(1.0 / rate);
    for i in 0..count {
        tokio::time::sleep_until((started + every * i as u32).into()).await;
        let client = Arc::clone(&clients[i % CREATE_CONNECTIONS]);
        calls.push(tokio::spawn(async move {
            let sent = Instant::now();
            let created = client
                .call::<m::SessionCreate>(&CreateSessionParams {
                    agent: "scripted".into(),
                    worktree: None,
                    in_place: false,
                    task: Some(IDLE_TURN.into()),
                    driver: Default::default(),
                    allow_read: Vec::new(),
                    channel: None,
                    kiln: None,
                })
                .await;
            created.map(|c| (c.session_id, sent, sent.elapsed()))
        }));
    }
    let mut made = Vec::with_capacity(count);
    for (i, call) in calls.into_iter().enumerate() {
        let made_one = call
            .await
            .context("a create task")?
            .with_context(|| format!("session.create (call {} of {count})", i + 1))?;
        made.push(made_one);
    }
    let answered = started.elapsed();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let ready = loop {
        let times: Vec<Instant> = made
            .iter()
            .filter_map(|(id, _, _)| watcher.ready_at(id))
            .collect();
        if times.len() == made.len() {
            break times;
        }
        if Instant::now() > deadline {
            bail!(
                "after {SETTLE_TIMEOUT:?}, {} of {count} new sessions are ready",
                times.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let to_ready = made
        .iter()
        .zip(&ready)
        .map(|((_, sent, _), at)| at.saturating_duration_since(*sent))
        .collect();
    let answer_to_ready = made
        .iter()
        .zip(&ready)
        .map(|((_, sent, took), at)| at.saturating_duration_since(*sent + *took))
        .collect();
    Ok(Grown {
        answer_to_ready: Stats::new(answer_to_ready),
        round_trips: Stats::new(made.iter().map(|(_, _, took)| *took).collect()),
        to_ready: Stats::new(to_ready),
        took: started.elapsed(),
        answered,
        answered_rate: count as f64 / answered.as_secs_f64().max(1e-9),
        ids: made.into_iter().map(|(id, _, _)| id).collect(),
    })
}

/// Waits until each of `ids` is idle (its turn complete or cancelled), polling
/// `session.list`; how long that took.
pub async fn wait_idle(control: &Client, ids: &[String]) -> Result<Duration> {
    let started = Instant::now();
    let deadline = started + SETTLE_TIMEOUT;
    loop {
        let sessions = control
            .call::<m::SessionList>(&Default::default())
            .await
            .context("session.list")?
            .sessions;
        let states: HashMap<&str, Option<SessionState>> =
            sessions.iter().map(|s| (s.id.as_str(), s.state)).collect();
        let failed: Vec<&String> = ids
            .iter()
            .filter(|id| {
                matches!(
                    states.get(id.as_str()),
                    Some(Some(SessionState::Error | SessionState::Stopped)) | None
                )
            })
            .collect();
        if !failed.is_empty() {
            bail!(
                "{} sessions stopped or failed (the first: {})",
                failed.len(),
                failed[0]
            );
        }
        let busy = ids
            .iter()
            .filter(|id| {
                !matches!(
                    states.get(id.as_str()),
                    Some(Some(SessionState::Complete | SessionState::Cancelled))
                )
            })
            .count();
        if busy == 0 {
            return Ok(started.elapsed());
        }
        if Instant::now() > deadline {
            bail!(
                "after {SETTLE_TIMEOUT:?}, {busy} of {} sessions are not idle",
                ids.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Sends `text` to each session as a prompt.
pub async fn prompt_all(control: &Client, ids: &[String], text: &str) -> Result<()> {
    for id in ids {
        control
            .call::<m::SessionPrompt>(&PromptParams {
                session_id: id.clone(),
                text: text.into(),
            })
            .await
            .with_context(|| format!("session.prompt {id}"))?;
    }
    Ok(())
}

/// Ends each session's running turn.
pub async fn cancel_all(control: &Client, ids: &[String]) -> Result<()> {
    for id in ids {
        control
            .call::<m::SessionCancel>(&SessionIdParams {
                session_id: id.clone(),
            })
            .await
            .with_context(|| format!("session.cancel {id}"))?;
    }
    Ok(())
}

/// The agent processes of `ids`, from `session.list`.
pub async fn agent_pids(control: &Client, ids: &[String]) -> Result<Vec<u32>> {
    let sessions = control
        .call::<m::SessionList>(&Default::default())
        .await
        .context("session.list")?
        .sessions;
    Ok(sessions
        .iter()
        .filter(|s| ids.contains(&s.id))
        .filter_map(|s| s.agent_pid)
        .collect())
}
