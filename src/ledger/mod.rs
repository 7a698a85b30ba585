//! The ledger, the domain: the session registry, the inbox, transcripts and the context
//! stacks, over the store. No terminal, no socket.
//!
//! - Sessions are cached in memory; heartbeats touch only the cache and are written behind
//!   in batches (a heartbeat is soft state: after a restart every session gets a fresh
//!   timeout). Everything else is written through before it is acknowledged.
//! - `inbox.send` calls and transcript entries are group-committed: concurrent writes
//!   share one transaction and every caller is answered only after it is durable.
//! - Every change is published on a broadcast channel that the daemon turns into
//!   JSON-RPC notifications.

mod context;
mod inbox;
mod registry;
mod search;
mod team;
mod transcript;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tracing::Instrument;

use crate::config::{Config, MAX_LIST_LIMIT};
use crate::kiln::Kiln;
use crate::protocol::{
    Event, Handle, InboxMessage, OutputChunk, RegisterParams, Session, TranscriptEntry,
    TranscriptParams,
};
use crate::store::{GitLeftovers, Store, StoreError};

pub use context::ContextState;
pub use inbox::no_message;
use inbox::send_writer;
use registry::Registry;
pub use registry::display_name;
pub use search::{DEFAULT_HITS, MAX_HITS};
pub use team::Takeover;

/// What a domain operation can fail with; each kind has its own JSON-RPC code.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No such session, message or record.
    #[error("{0}")]
    NotFound(String),
    /// The request's params are wrong (empty, out of range, not allowed for this session).
    #[error("{0}")]
    Invalid(String),
    /// The request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// A wait ended without an answer.
    #[error("{0}")]
    TimedOut(String),
    /// A git command failed: which one, and what it said.
    #[error("git {command}: {message}")]
    Git { command: String, message: String },
    /// A program the operation needs is missing or failed (`gh`, git itself).
    #[error("{0}")]
    Tool(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// The session's environment (its driver) could not be made or used.
    #[error("{0}")]
    Driver(String),
    /// A session's agent could not be started (its program, its environment or its
    /// handle); the cause is kept.
    #[error(transparent)]
    Start(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, LedgerError>;

impl LedgerError {
    /// A method's refusal (a call made through the daemon's door on a channel's behalf)
    /// as the error of its kind.
    pub fn from_refusal(e: crate::protocol::ErrorObject) -> Self {
        use crate::protocol::code;
        match e.code {
            code::NOT_FOUND => LedgerError::NotFound(e.message),
            code::INVALID_PARAMS => LedgerError::Invalid(e.message),
            code::TIMED_OUT => LedgerError::TimedOut(e.message),
            code::GIT_FAILED | code::TOOL_FAILED => LedgerError::Tool(e.message),
            code::IO_ERROR => LedgerError::Io(e.message),
            code::DRIVER_ERROR => LedgerError::Driver(e.message),
            code::SPAWN_FAILED => LedgerError::Start(e.message.into()),
            _ => LedgerError::Conflict(e.message),
        }
    }
}

/// The most inbox sends committed in one transaction, and the most bytes of them.
const MAX_SEND_BATCH: usize = 1024;
const MAX_SEND_BATCH_BYTES: usize = 2 * 1024 * 1024;
/// How many events a slow subscriber may fall behind before it is told it missed some.
const EVENT_BUFFER: usize = 8192;

type SendJob = (
    InboxMessage,
    oneshot::Sender<std::result::Result<(), StoreError>>,
);

pub struct Ledger {
    store: Arc<Store>,
    config: Config,
    kiln: Kiln,
    /// Each event is shared by its subscribers, so a slot of the buffer is one pointer
    /// (a whole `Event` a slot made the buffer 8 MB, resident from the start).
    events: broadcast::Sender<Arc<Event>>,
    registry: Arc<Registry>,
    sends: mpsc::Sender<SendJob>,
    appends: mpsc::Sender<transcript::AppendJob>,
    /// Deleted sessions whose transcript and context history are still to be removed.
    purges: mpsc::UnboundedSender<String>,
    ids: Mutex<ulid::Generator>,
    /// Live handles: digest → session id.
    handles: Mutex<HashMap<String, String>>,
    /// Context stacks read so far, by session; see [`context`].
    contexts: tokio::sync::Mutex<HashMap<String, ContextState>>,
    /// This daemon: the owner its sessions name.
    instance: crate::protocol::DaemonInfo,
    /// Team mode (a shared SurrealDB server); see [`team`].
    team: Option<Arc<team::Team>>,
}

/// Removes deleted sessions' transcripts one session at a time, in the background.
async fn purger(store: Arc<Store>, mut ids: mpsc::UnboundedReceiver<String>) {
    while let Some(id) = ids.recv().await {
        let purged = store.purge_deleted(&id);
        async {
            match purged.await {
                Ok(()) => tracing::debug!("purged a deleted session"),
                Err(e) => tracing::warn!(
                    "the deleted session's transcript is not yet purged ({e}); finishing at the next start"
                ),
            }
        }
        .instrument(crate::logging::session_span(&id))
        .await;
    }
}

/// Reads every record once after a start, behind the first answers: damage the engine
/// finds in its table files is logged and shown by `daemon.status` (not found when a
/// read first fails).
async fn check_at_start(ledger: std::sync::Weak<Ledger>) {
    let Some(store) = ledger.upgrade().map(|ledger| Arc::clone(&ledger.store)) else {
        return;
    };
    match store.check().await {
        Ok(check) if check.damaged() => {
            tracing::error!("{}", crate::store::check::WHAT_TO_DO);
            if let Some(ledger) = ledger.upgrade() {
                ledger.publish(Event::Store(crate::protocol::StoreHealth {
                    connected: true,
                    error: None,
                    damaged: store.damage(),
                }));
            }
        }
        Ok(check) => {
            let records: usize = check.tables.iter().map(|t| t.readable).sum();
            tracing::info!(records, "database checked: every record reads back");
        }
        Err(e) => tracing::warn!("the database check at start did not finish: {e}"),
    }
}

pub use crate::text::now_rfc3339;

impl Ledger {
    /// Opens the store and starts the background writers.
    pub async fn open(kiln: Kiln, config: Config) -> Result<Arc<Self>> {
        let mut store = Store::open(&config.store, &kiln.db_path()).await?;
        let instance = team::instance(&kiln);
        store.set_origin(&instance.id);
        let team = match store.is_shared() {
            true => Some(team::Team::join(&store, &instance, &config.store).await?),
            false => None,
        };
        let store = Arc::new(store);
        let sessions = store.list_sessions().await?;
        let handles = store.list_handles().await?.into_iter().collect();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (sends, send_rx) = mpsc::channel(MAX_SEND_BATCH * 4);
        let (purges, purge_rx) = mpsc::unbounded_channel();
        let (appends, append_rx) = mpsc::channel(transcript::MAX_APPEND_JOBS);
        let registry = Registry::new(
            sessions,
            Duration::from_secs(config.daemon.session_timeout_secs),
            Duration::from_secs(config.daemon.heartbeat_interval_secs),
            Duration::from_secs(config.daemon.ended_session_ttl_secs),
            team.as_ref().map(|_| instance.id.clone()),
        );
        let ledger = Arc::new(Self {
            store,
            config,
            kiln,
            events,
            registry,
            sends,
            appends,
            purges,
            ids: Mutex::new(ulid::Generator::new()),
            handles: Mutex::new(handles),
            contexts: tokio::sync::Mutex::new(HashMap::new()),
            instance,
            team,
        });
        if let Some(team) = &ledger.team {
            team::start(&ledger, team);
        }
        tokio::spawn(send_writer(Arc::clone(&ledger.store), send_rx));
        tokio::spawn(transcript::transcript_writer(
            Arc::clone(&ledger.store),
            append_rx,
        ));
        // Purges cut short by a stop are finished behind the first answers.
        for id in ledger.store.deleted_sessions().await? {
            let _ = ledger.purges.send(id);
        }
        tokio::spawn(purger(Arc::clone(&ledger.store), purge_rx));
        if ledger.store.kind() == "embedded" {
            tokio::spawn(check_at_start(Arc::downgrade(&ledger)));
        }
        tokio::spawn(registry::heartbeat_writer(
            Arc::clone(&ledger.registry),
            Arc::downgrade(&ledger),
        ));
        tokio::spawn(registry::reaper(
            Arc::clone(&ledger.registry),
            Arc::downgrade(&ledger),
        ));
        Ok(ledger)
    }

    pub fn kiln(&self) -> &Kiln {
        &self.kiln
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Receives every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    fn publish(&self, event: Event) {
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(Arc::new(event));
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new, time-ordered id.
    pub fn next_id(&self) -> String {
        let mut generator = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        match generator.generate() {
            Ok(id) => id.to_string(),
            // Only on overflow within one millisecond: fall back to a fresh random id.
            Err(_) => ulid::Ulid::new().to_string(),
        }
    }

    // ---- handles ----

    fn lock_handles(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new handle for a session's agent, stored (as a digest) before it is given out.
    pub async fn issue_handle(&self, session_id: &str) -> Result<Handle> {
        let handle = Handle::generate();
        let digest = handle.digest();
        self.store.insert_handle(&digest, session_id).await?;
        self.lock_handles().insert(digest, session_id.to_string());
        Ok(handle)
    }

    /// Revokes every handle of a session: connections using one lose all access.
    pub async fn revoke_handles(&self, session_id: &str) -> Result<()> {
        self.lock_handles().retain(|_, s| s != session_id);
        self.store.revoke_handles(session_id).await?;
        Ok(())
    }

    /// The session a live handle belongs to.
    pub fn session_for_handle(&self, handle: &Handle) -> Option<String> {
        self.lock_handles().get(&handle.digest()).cloned()
    }

    // ---- sessions ----

    /// Registers a session run by someone else, with a handle for its agent.
    /// Registers a session; live registered sessions of the same worktree and agent are
    /// evicted (ended, their handles revoked) and returned.
    pub async fn register(&self, params: RegisterParams) -> Result<(Session, Handle, Vec<String>)> {
        for (field, value) in [
            ("agent_type", &params.agent_type),
            ("agent_name", &params.agent_name),
        ] {
            if value.trim().is_empty() {
                return Err(LedgerError::Invalid(format!("{field} must not be empty")));
            }
        }
        let stale: Vec<String> = self
            .registry
            .list()
            .into_iter()
            .filter(|s| {
                !s.is_managed()
                    && s.status != ENDED
                    && s.worktree == params.worktree
                    && s.agent_name == params.agent_name
                    && s.agent_type == params.agent_type
            })
            .map(|s| s.id)
            .collect();
        let mut evicted = Vec::new();
        for id in stale {
            if self
                .deregister(
                    &id,
                    "evicted: the same worktree and agent registered again",
                    None,
                )
                .await
                .is_ok()
            {
                evicted.push(id);
            }
        }
        let now = now_rfc3339();
        let display = display_name(&self.kiln, params.worktree.as_deref(), &params.agent_name);
        let mut session = Session::started(
            self.next_id(),
            params.worktree,
            params.agent_type,
            params.agent_name,
            display,
            now,
        );
        self.stamp(&mut session);
        self.store.insert_session(&session).await?;
        self.registry.insert(session.clone());
        let handle = self.issue_handle(&session.id).await?;
        self.publish(Event::SessionRegistered(session.clone()));
        Ok((session, handle, evicted))
    }

    pub fn session_count(&self) -> usize {
        self.registry.len()
    }

    pub fn list_sessions(&self) -> Vec<Session> {
        self.registry.list()
    }

    pub fn get_session(&self, id: &str) -> Result<Session> {
        self.registry.get(id).ok_or_else(|| self.gone(id))
    }

    /// A live session, or the termination record of one that ended not long ago.
    pub fn session_or_record(&self, id: &str) -> Result<Session> {
        self.registry
            .get(id)
            .or_else(|| self.registry.ended(id))
            .ok_or_else(|| no_session(id))
    }

    /// Keeps a session alive. Touches memory only.
    pub fn heartbeat(&self, id: &str) -> Result<()> {
        if self.registry.beat(id) {
            Ok(())
        } else {
            Err(self.gone(id))
        }
    }

    /// Ends a registered session: its handles are revoked and a termination record
    /// (why, when, exit code) is kept for `daemon.ended_session_ttl_secs`.
    pub async fn deregister(&self, id: &str, reason: &str, exit_code: Option<i32>) -> Result<()> {
        let mut session = match self.registry.get(id) {
            None => return Err(self.gone(id)),
            Some(s) if s.is_managed() => {
                return Err(LedgerError::Invalid(format!(
                    "session {id} runs under crucible; stop or delete it instead"
                )));
            }
            Some(s) => s,
        };
        self.revoke_handles(id).await?;
        session.status = ENDED.into();
        session.state_reason = Some(reason.into());
        session.ended_at = Some(now_rfc3339());
        session.exit_code = exit_code;
        self.store.save_session(&session).await?;
        self.registry.end(session);
        self.publish(Event::SessionDeregistered {
            session_id: id.to_string(),
            reason: reason.into(),
        });
        Ok(())
    }

    /// Marks a new session as this daemon's, on this host.
    fn stamp(&self, session: &mut Session) {
        session.owner = Some(self.instance.id.clone());
        session.host = Some(self.instance.host.clone());
    }

    /// "No such session", saying when and why it ended if its record is still kept.
    fn gone(&self, id: &str) -> LedgerError {
        match self.registry.ended(id) {
            Some(record) => LedgerError::NotFound(format!(
                "session {id} ended at {} ({})",
                record.ended_at.as_deref().unwrap_or("an unknown time"),
                record
                    .state_reason
                    .as_deref()
                    .unwrap_or("no reason recorded")
            )),
            None => no_session(id),
        }
    }

    // ---- sessions crucible runs ----

    /// Stores a new session and announces it.
    pub async fn add_managed(&self, mut session: Session) -> Result<Session> {
        self.stamp(&mut session);
        self.store.insert_session(&session).await?;
        self.registry.insert(session.clone());
        let view = self.get_session(&session.id)?;
        self.publish(Event::SessionRegistered(view.clone()));
        Ok(view)
    }

    /// Writes a changed session through, then announces it.
    /// Stores a session crucible runs and announces it. When the store fails, the session
    /// is still shown as it is (an `error` the store could not record must not look like
    /// the state before it), and the failure is returned.
    pub async fn save_managed(&self, session: &Session) -> Result<Session> {
        let stored = self.store.save_session(session).await;
        if !self.registry.update(session.clone()) {
            self.registry.insert(session.clone());
        }
        let view = self.get_session(&session.id)?;
        self.publish(Event::SessionUpdated(view.clone()));
        stored?;
        Ok(view)
    }

    /// Deletes a session: gone for everyone in one small transaction that leaves a
    /// tombstone; its transcript and context history are then purged behind it in
    /// bounded batches (a purge cut short is finished at the next start), so deleting a
    /// long session answers as fast as a short one.
    /// `git` is what is still to go from git once the records are gone; see
    /// [`Ledger::git_removed`].
    pub async fn remove_managed(&self, id: &str, git: &GitLeftovers) -> Result<()> {
        self.revoke_handles(id).await?;
        self.store.delete_session_records(id, git).await?;
        self.forget_context(id).await;
        self.registry.remove(id);
        let _ = self.purges.send(id.to_string());
        self.publish(Event::SessionDeregistered {
            session_id: id.to_string(),
            reason: "deleted".into(),
        });
        Ok(())
    }

    /// A deleted session's worktree and branch are dealt with: its tombstone can go once
    /// its transcript is purged.
    pub async fn git_removed(&self, id: &str) -> Result<()> {
        self.store.git_removed(id).await?;
        let _ = self.purges.send(id.to_string());
        Ok(())
    }

    /// Deletions cut short before their worktree or branch went (a kill -9).
    pub async fn git_leftovers(&self) -> Result<Vec<(String, GitLeftovers)>> {
        Ok(self.store.git_leftovers().await?)
    }

    /// Stores transcript entries durably (group-committed with other sessions'), then
    /// announces them.
    pub async fn append_transcript(&self, entries: Vec<TranscriptEntry>) -> Result<()> {
        let stopped = || StoreError::Db("the transcript writer has stopped".into());
        let (ack, done) = oneshot::channel();
        self.appends
            .send((entries.clone(), ack))
            .await
            .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())??;
        for entry in entries {
            self.publish(Event::Transcript(entry));
        }
        Ok(())
    }

    /// Announces streamed text; it is stored later as part of a whole entry.
    /// The conflict radar changed.
    pub fn publish_conflicts(&self, report: crate::protocol::ConflictReport) {
        self.publish(Event::Conflicts(report));
    }

    pub fn publish_output(&self, chunk: OutputChunk) {
        self.publish(Event::Output(chunk));
    }

    pub async fn transcript(&self, params: &TranscriptParams) -> Result<Vec<TranscriptEntry>> {
        self.get_session(&params.session_id)?;
        let limit = params.limit.unwrap_or(MAX_LIST_LIMIT);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(LedgerError::Invalid(format!(
                "limit must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        Ok(self
            .store
            .transcript(&params.session_id, params.after.unwrap_or(0), limit)
            .await?)
    }

    /// The decisions and approvals of a session still waiting for an answer.
    pub async fn open_blocking(&self, session_id: &str) -> Result<Vec<String>> {
        Ok(self.store.open_blocking(session_id).await?)
    }

    /// Closes a question nobody needs answered any more (its turn was cancelled, or its
    /// agent is gone), so it no longer waits in the inbox. `note` is stored as the answer.
    pub async fn withdraw(&self, id: &str, note: &str) -> Result<()> {
        if let Some(updated) = self.store.respond(id, note, true, None).await? {
            self.publish(Event::InboxUpdated(updated));
        }
        Ok(())
    }

    /// Withdraws every open decision and approval of a session.
    pub async fn withdraw_open(&self, session_id: &str, note: &str) -> Result<()> {
        for id in self.open_blocking(session_id).await? {
            self.withdraw(&id, note).await?;
        }
        Ok(())
    }

    /// `db.query`.
    pub async fn query(&self, sql: &str, bindings: Value) -> Result<Vec<Value>> {
        if sql.trim().is_empty() {
            return Err(LedgerError::Invalid("sql must not be empty".into()));
        }
        Ok(self.store.query(sql, bindings).await?)
    }

    /// Writes pending soft state and closes the store.
    pub async fn close(&self) {
        registry::flush_heartbeats(self).await;
        self.store.close().await;
    }
}

/// The status of a registered session that has ended.
const ENDED: &str = "ended";

fn no_session(id: &str) -> LedgerError {
    LedgerError::NotFound(format!("no session {id}"))
}

/// Sleeps until `deadline`, or until `changed` is notified; true when the deadline came.
/// With no deadline it only waits for a change, and then also returns true, so the caller
/// looks at what changed (the reaper's and the lease watchdog's loop).
async fn deadline_or_change(
    deadline: Option<tokio::time::Instant>,
    changed: &tokio::sync::Notify,
) -> bool {
    match deadline {
        None => {
            changed.notified().await;
            true
        }
        Some(at) => tokio::select! {
            _ = tokio::time::sleep_until(at) => true,
            _ = changed.notified() => false,
        },
    }
}
