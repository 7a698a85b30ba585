//! The in-memory side of the session registry: the cached sessions, their heartbeat
//! clocks, and the two background tasks that persist heartbeats and reap orphans. Both
//! tasks sleep on a `Notify` while nothing changes.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use super::Ledger;
use crate::kiln::Kiln;
use crate::protocol::Session;
use crate::text::now_rfc3339;

/// A reaper that wakes this much later than it meant to was not running (the daemon was
/// stopped or suspended), not idle.
const FROZEN: Duration = Duration::from_millis(500);

/// Heartbeats arriving within this window are written together.
const HEARTBEAT_FLUSH_DELAY: Duration = Duration::from_secs(1);

/// `{worktree} @ {agent}`: a worktree under the kiln's worktree folder is named by its path
/// there (usually the branch), another path by its last component, none as `main`.
pub fn display_name(kiln: &Kiln, worktree: Option<&str>, agent: &str) -> String {
    let name = match worktree {
        None => "main".to_string(),
        Some(w) => {
            let path = Path::new(w);
            if let Ok(rel) = path.strip_prefix(kiln.state_dir().join("worktrees")) {
                rel.display().to_string()
            } else if path.is_absolute() {
                path.file_name()
                    .map_or_else(|| w.to_string(), |n| n.to_string_lossy().into_owned())
            } else {
                w.to_string()
            }
        }
    };
    format!("{name} @ {agent}")
}

struct Entry {
    session: Session,
    last_beat: Instant,
}

/// What is left of a registered session after it ended (its termination record: when,
/// and why), kept for status queries until it expires.
struct Record {
    session: Session,
    expires: Instant,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, Entry>,
    ended: HashMap<String, Record>,
    dirty: HashSet<String>,
}

pub(super) struct Registry {
    inner: Mutex<Inner>,
    timeout: Duration,
    idle_after: Duration,
    /// How long termination records are kept.
    record_ttl: Duration,
    beats_pending: Notify,
    changed: Notify,
    /// Team mode: this daemon's instance id. Sessions another daemon owns are shown, but
    /// their heartbeats and termination records are that daemon's business.
    me: Option<String>,
}

impl Registry {
    /// Sessions loaded from the store get a fresh clock: the daemon was away, not them.
    /// Termination records keep the time left from when their session ended.
    pub fn new(
        sessions: Vec<Session>,
        timeout: Duration,
        heartbeat_interval: Duration,
        record_ttl: Duration,
        me: Option<String>,
    ) -> Arc<Self> {
        let now = Instant::now();
        let mut inner = Inner::default();
        for session in sessions {
            match session.ended_at.as_deref() {
                Some(ended) if !session.is_managed() => {
                    let expires = now + record_ttl.saturating_sub(age(ended));
                    inner
                        .ended
                        .insert(session.id.clone(), Record { session, expires });
                }
                _ => {
                    let entry = Entry {
                        session,
                        last_beat: now,
                    };
                    inner.sessions.insert(entry.session.id.clone(), entry);
                }
            }
        }
        Arc::new(Self {
            inner: Mutex::new(inner),
            timeout,
            idle_after: heartbeat_interval * 2,
            record_ttl,
            beats_pending: Notify::new(),
            changed: Notify::new(),
            me,
        })
    }

    /// Whether another daemon owns the session (team mode).
    fn foreign(&self, session: &Session) -> bool {
        match (&self.me, &session.owner) {
            (Some(me), Some(owner)) => me != owner,
            _ => false,
        }
    }

    /// After a gap in what other daemons said: their sessions as the database has them
    /// now (this daemon's own are its to know).
    pub fn replace_foreign(&self, stored: Vec<Session>, me: &str) {
        let mut inner = self.lock();
        let theirs: HashSet<String> = stored
            .iter()
            .filter(|s| s.owner.as_deref() != Some(me))
            .map(|s| s.id.clone())
            .collect();
        inner
            .sessions
            .retain(|id, e| theirs.contains(id) || e.session.owner.as_deref() == Some(me));
        for session in stored {
            if !theirs.contains(&session.id) {
                continue;
            }
            match inner.sessions.get_mut(&session.id) {
                Some(entry) => entry.session = session,
                None => {
                    let entry = Entry {
                        session,
                        last_beat: Instant::now(),
                    };
                    inner.sessions.insert(entry.session.id.clone(), entry);
                }
            }
        }
        drop(inner);
        self.changed.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, session: Session) {
        self.lock().sessions.insert(
            session.id.clone(),
            Entry {
                session,
                last_beat: Instant::now(),
            },
        );
        self.changed.notify_one();
    }

    pub fn remove(&self, id: &str) {
        let mut inner = self.lock();
        inner.sessions.remove(id);
        inner.dirty.remove(id);
        drop(inner);
        self.changed.notify_one();
    }

    /// Replaces a cached session, keeping its heartbeat clock.
    pub fn update(&self, session: Session) -> bool {
        let mut inner = self.lock();
        match inner.sessions.get_mut(&session.id) {
            Some(entry) => {
                entry.session = session;
                true
            }
            None => false,
        }
    }

    /// A session crucible runs is active while it is busy; one that registered itself is
    /// active while its heartbeats arrive.
    fn view(&self, entry: &Entry) -> Session {
        let mut session = entry.session.clone();
        let active = match session.state {
            Some(state) => state.is_busy(),
            None => entry.last_beat.elapsed() <= self.idle_after,
        };
        session.status = if active { "active" } else { "idle" }.into();
        session
    }

    pub fn get(&self, id: &str) -> Option<Session> {
        self.lock().sessions.get(id).map(|e| self.view(e))
    }

    /// Oldest first (ids are time-ordered).
    pub fn list(&self) -> Vec<Session> {
        let inner = self.lock();
        let mut list: Vec<Session> = inner.sessions.values().map(|e| self.view(e)).collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// Moves an ended session out of the live ones into a termination record.
    pub fn end(&self, session: Session) {
        let mut inner = self.lock();
        inner.sessions.remove(&session.id);
        inner.dirty.remove(&session.id);
        let expires = Instant::now() + self.record_ttl;
        inner
            .ended
            .insert(session.id.clone(), Record { session, expires });
        drop(inner);
        self.changed.notify_one();
    }

    /// The termination record of a session that ended, while it is kept.
    pub fn ended(&self, id: &str) -> Option<Session> {
        self.lock().ended.get(id).map(|r| r.session.clone())
    }

    /// The termination records whose time is up, each with whether it is another
    /// daemon's (kept in its store by that daemon). They stay until [`Self::forget_record`].
    fn expired_records(&self) -> Vec<(String, bool)> {
        let now = Instant::now();
        self.lock()
            .ended
            .iter()
            .filter(|(_, r)| r.expires <= now)
            .map(|(id, r)| (id.clone(), self.foreign(&r.session)))
            .collect()
    }

    /// Drops a termination record: its session is no longer answered for.
    fn forget_record(&self, id: &str) {
        self.lock().ended.remove(id);
    }

    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Records a heartbeat; false if the session is unknown.
    pub fn beat(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(entry) = inner.sessions.get_mut(id) else {
            return false;
        };
        entry.last_beat = Instant::now();
        entry.session.last_heartbeat = now_rfc3339();
        let first = inner.dirty.is_empty();
        inner.dirty.insert(id.to_string());
        drop(inner);
        if first {
            self.beats_pending.notify_one();
        }
        true
    }

    fn take_dirty(&self) -> Vec<(String, String)> {
        let mut inner = self.lock();
        let dirty = std::mem::take(&mut inner.dirty);
        dirty
            .into_iter()
            .filter_map(|id| {
                inner
                    .sessions
                    .get(&id)
                    .map(|e| (id, e.session.last_heartbeat.clone()))
            })
            .collect()
    }

    /// When the next session would time out or the next termination record expire.
    /// Sessions crucible runs never time out: their agent's process is watched instead.
    fn next_deadline(&self) -> Option<Instant> {
        let inner = self.lock();
        let timeouts = inner
            .sessions
            .values()
            .filter(|e| !e.session.is_managed() && !self.foreign(&e.session))
            .map(|e| e.last_beat + self.timeout);
        let expiries = inner.ended.values().map(|r| r.expires);
        timeouts.chain(expiries).min()
    }

    /// Counts every registered session as heard from now: after the daemon could not
    /// hear anyone, each gets a whole timeout from here to be heard again.
    fn heard_all_now(&self) {
        let now = Instant::now();
        for entry in self.lock().sessions.values_mut() {
            entry.last_beat = entry.last_beat.max(now);
        }
    }

    fn expired(&self) -> Vec<String> {
        let now = Instant::now();
        self.lock()
            .sessions
            .values()
            .filter(|e| {
                !e.session.is_managed()
                    && !self.foreign(&e.session)
                    && e.last_beat + self.timeout <= now
            })
            .map(|e| e.session.id.clone())
            .collect()
    }
}

pub(super) async fn flush_heartbeats(ledger: &Ledger) {
    let beats = ledger.registry.take_dirty();
    if let Err(e) = ledger.store.sessions().save_heartbeats(&beats).await {
        tracing::warn!(count = beats.len(), "could not save heartbeats: {e}");
    }
}

/// Writes heartbeats behind, at most once per [`HEARTBEAT_FLUSH_DELAY`], only after some
/// arrived.
pub(super) async fn heartbeat_writer(registry: Arc<Registry>, ledger: Weak<Ledger>) {
    loop {
        registry.beats_pending.notified().await;
        tokio::time::sleep(HEARTBEAT_FLUSH_DELAY).await;
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        flush_heartbeats(&ledger).await;
    }
}

/// Deregisters sessions whose heartbeat stopped for longer than the timeout, and drops
/// termination records whose time is up. Sleeps until the earliest deadline, or until
/// the set of sessions changes; with no sessions it only waits for one to appear.
pub(super) async fn reaper(registry: Arc<Registry>, ledger: Weak<Ledger>) {
    loop {
        let deadline = registry.next_deadline();
        if !deadline_or_change(deadline, &registry.changed).await {
            continue;
        }
        // A daemon that was frozen (stopped, suspended) heard no one meanwhile, and the
        // heartbeats sent to it wait in its queue: the time it woke late is not the
        // sessions' silence. Each gets a whole timeout from now to be heard again.
        if let Some(at) = deadline {
            let late = Instant::now().saturating_duration_since(at);
            if late > FROZEN {
                tracing::info!(
                    late_ms = late.as_millis() as u64,
                    "the daemon did not run for a while; sessions are not timed out for it"
                );
                registry.heard_all_now();
                continue;
            }
        }
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        for id in registry.expired() {
            let ledger = &ledger;
            async {
                tracing::info!("session timed out without heartbeats; cleaning up");
                if let Err(e) = ledger.deregister(&id, "timed out", None).await {
                    tracing::warn!("could not clean up session: {e}");
                }
            }
            .instrument(crate::logging::session_span(&id))
            .await;
        }
        // Out of the store first, then out of memory: once a session is no longer
        // answered for, it is not in the database either (a failed delete is tried again).
        for (id, foreign) in registry.expired_records() {
            if !foreign && let Err(e) = ledger.store.sessions().delete(&id).await {
                tracing::warn!(session = %id, "could not drop a termination record: {e}");
                continue;
            }
            registry.forget_record(&id);
        }
    }
}

/// How long ago an RFC 3339 time was; zero if it cannot be read or is in the future.
fn age(rfc3339: &str) -> Duration {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| {
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
                .to_std()
                .ok()
        })
        .unwrap_or_default()
}

/// Sleeps until `deadline`, or until `changed` is notified; true when the deadline came.
/// With no deadline it only waits for a change, and then also returns true, so the caller
/// looks at what changed (the reaper's and the lease watchdog's loop).
pub(super) async fn deadline_or_change(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names() {
        let kiln = Kiln::new("/repo");
        assert_eq!(display_name(&kiln, None, "claude"), "main @ claude");
        assert_eq!(
            display_name(&kiln, Some("/repo/.crucible/worktrees/feat/auth"), "ollama"),
            "feat/auth @ ollama"
        );
        assert_eq!(
            display_name(&kiln, Some("/elsewhere/test"), "gemini"),
            "test @ gemini"
        );
        assert_eq!(
            display_name(&kiln, Some("fix/flaky"), "codex"),
            "fix/flaky @ codex"
        );
    }
}
