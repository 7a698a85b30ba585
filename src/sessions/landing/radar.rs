//! The conflict radar: sessions whose branches change the same files, or the same
//! lines, found when a turn ends, a session goes, or a resting session's worktree is
//! changed by hand; never by polling. The report is kept for `session.conflicts` and
//! announced as the `session.conflicts` event when it changes.
//!
//! Its work scales with what changed, not with the fleet: each session's changed lines
//! are kept, and when a session comes to rest only its own worktree is read again (its
//! agent is the one that changes it) and compared with the others' kept changes; a
//! worktree nothing happened in since its last read is not read at all ([`freshness`]).
//! Events that arrive while a worktree is read are taken together, one worktree read at a
//! time (so at most one git process at a time), each session once. Nothing runs while
//! nothing happens.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use tokio::sync::broadcast;

use super::Landing;
use crate::git;
use crate::protocol::{ConflictPair, ConflictReport, Event, Session, SessionState};

mod freshness;
use freshness::Freshness;

/// The lines a session's branch changes, by file (see [`git::changed_lines`]).
type Changes = BTreeMap<String, Vec<(u32, u32)>>;

/// What the radar knows: each session's changes, and the pairs that overlap.
#[derive(Debug, Default)]
pub(super) struct Radar {
    changes: BTreeMap<String, Changes>,
    /// By the two sessions' ids, the smaller first.
    pairs: BTreeMap<(String, String), Vec<crate::protocol::Overlap>>,
}

impl Radar {
    /// Session `id` now changes `changes` (nothing: it is gone or changes nothing): its
    /// pairs are compared again with every other session's kept changes.
    pub fn set(&mut self, id: &str, changes: Option<Changes>) {
        self.pairs.retain(|(a, b), _| a != id && b != id);
        match changes.filter(|c| !c.is_empty()) {
            Some(ours) => {
                for (other, theirs) in &self.changes {
                    if other == id {
                        continue;
                    }
                    // Always from the first session's side, as a full recomputation.
                    let (key, files) = if id < other.as_str() {
                        (
                            (id.to_string(), other.clone()),
                            git::overlaps(&ours, theirs),
                        )
                    } else {
                        (
                            (other.clone(), id.to_string()),
                            git::overlaps(theirs, &ours),
                        )
                    };
                    if files.is_empty() {
                        continue;
                    }
                    self.pairs.insert(key, files);
                }
                self.changes.insert(id.to_string(), ours);
            }
            None => {
                self.changes.remove(id);
            }
        }
    }

    /// Whether `id` has changes kept.
    pub fn knows(&self, id: &str) -> bool {
        self.changes.contains_key(id)
    }

    pub fn report(&self) -> ConflictReport {
        ConflictReport {
            pairs: self
                .pairs
                .iter()
                .map(|((a, b), files)| ConflictPair {
                    a: a.clone(),
                    b: b.clone(),
                    files: files.clone(),
                })
                .collect(),
        }
    }
}

/// What the events since the last look ask of the radar.
#[derive(Debug, Default)]
struct Dirty {
    /// Sessions that came to rest: their worktrees are read again.
    rested: BTreeSet<String>,
    /// Sessions whose worktrees changed while at rest, now quiet: read again if still at
    /// rest.
    touched: BTreeSet<String>,
    /// Sessions that went.
    gone: BTreeSet<String>,
    /// Events were missed: every worktree is read again.
    all: bool,
}

impl Dirty {
    fn is_empty(&self) -> bool {
        self.rested.is_empty() && self.touched.is_empty() && self.gone.is_empty() && !self.all
    }

    /// Whether session `id`, now in `state`, is read: every session when events were
    /// missed; otherwise one that came to rest, or changed while resting, and whose
    /// worktree is not known `clean` (nothing happened in it since its last read).
    fn wants(&self, id: &str, state: Option<SessionState>, clean: bool) -> bool {
        if self.all {
            return true;
        }
        let asked =
            self.rested.contains(id) || (self.touched.contains(id) && state.is_some_and(at_rest));
        asked && !clean
    }
}

/// Watches session events and worktrees; reads a session's worktree again when it comes
/// to rest (its turn ended, it stopped or failed) after something happened in it, or when
/// it changed while at rest; drops it when it goes.
pub(super) async fn watch(landing: Weak<Landing>, mut events: broadcast::Receiver<Arc<Event>>) {
    let mut states: HashMap<String, Option<SessionState>> = HashMap::new();
    let mut radar = Radar::default();
    let mut fresh = Freshness::start();
    let mut dirty = Dirty {
        all: true,
        ..Dirty::default()
    };
    loop {
        if !dirty.is_empty() {
            let Some(landing) = landing.upgrade() else {
                return;
            };
            landing
                .refresh_radar(&mut radar, &mut fresh, std::mem::take(&mut dirty))
                .await;
        }
        // Wait for an event, a change in a watched worktree, or the end of a changed
        // worktree's quiet time; then take every event already queued.
        let due = fresh.next_due();
        tokio::select! {
            first = events.recv() => {
                if matches!(first, Err(broadcast::error::RecvError::Closed)) {
                    return;
                }
                note(&mut states, &mut dirty, first);
            }
            () = fresh.changed() => {}
            () = sleep_until(due), if due.is_some() => {}
        }
        loop {
            match events.try_recv() {
                Ok(event) => note(&mut states, &mut dirty, Ok(event)),
                Err(broadcast::error::TryRecvError::Lagged(_)) => dirty.all = true,
                Err(_) => break,
            }
        }
        fresh.collect();
        dirty
            .touched
            .extend(fresh.take_due(tokio::time::Instant::now()));
    }
}

async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// What one event asks of the radar.
fn note(
    states: &mut HashMap<String, Option<SessionState>>,
    dirty: &mut Dirty,
    event: std::result::Result<Arc<Event>, broadcast::error::RecvError>,
) {
    match event.as_deref() {
        Ok(Event::SessionUpdated(s) | Event::SessionRegistered(s)) => {
            let previous = states.insert(s.id.clone(), s.state);
            if previous != Some(s.state) && s.state.is_some_and(at_rest) {
                dirty.rested.insert(s.id.clone());
            }
        }
        Ok(Event::SessionDeregistered { session_id, .. }) => {
            states.remove(session_id);
            dirty.rested.remove(session_id);
            dirty.gone.insert(session_id.clone());
        }
        Ok(_) => {}
        Err(broadcast::error::RecvError::Lagged(_)) => dirty.all = true,
        Err(broadcast::error::RecvError::Closed) => {}
    }
}

/// A state in which the worktree does not change under the radar's feet.
fn at_rest(state: SessionState) -> bool {
    state.is_resting()
        || matches!(
            state,
            SessionState::Stopped | SessionState::Error | SessionState::Parked
        )
}

impl Landing {
    /// The radar as last computed.
    pub fn conflicts(&self) -> ConflictReport {
        self.radar_lock().clone()
    }

    fn radar_lock(&self) -> std::sync::MutexGuard<'_, ConflictReport> {
        self.radar.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Brings `radar` up to date with what `dirty` says changed (a session's worktree is
    /// read only if something happened in it since its last read, or if events were
    /// missed), and announces the report if it changed.
    async fn refresh_radar(&self, radar: &mut Radar, fresh: &mut Freshness, dirty: Dirty) {
        for id in &dirty.gone {
            radar.set(id, None);
            fresh.forget(id).await;
        }
        // Only the sessions named are looked at, unless events were missed.
        let looked_at: Vec<Session> = if dirty.all {
            let live = self.ledger.list_sessions();
            let ids: BTreeSet<&str> = live.iter().map(|s| s.id.as_str()).collect();
            let stale: BTreeSet<String> = radar
                .changes
                .keys()
                .chain(fresh.known())
                .filter(|id| !ids.contains(id.as_str()))
                .cloned()
                .collect();
            for id in stale {
                radar.set(&id, None);
                fresh.forget(&id).await;
            }
            live
        } else {
            dirty
                .rested
                .iter()
                .chain(dirty.touched.difference(&dirty.rested))
                .filter_map(|id| self.ledger.get_session(id).ok())
                .collect()
        };
        for session in &looked_at {
            let id = &session.id;
            // What the watcher saw since the last session was read.
            fresh.collect();
            if !dirty.wants(id, session.state, fresh.is_clean(id)) {
                continue;
            }
            let changes = self.changes_of(session, fresh).await;
            if changes.is_some() || radar.knows(id) {
                radar.set(id, changes);
            }
        }
        let report = radar.report();
        {
            let mut current = self.radar_lock();
            if *current == report {
                return;
            }
            *current = report.clone();
        }
        self.ledger.publish_conflicts(report);
    }

    /// The lines `session`'s branch changes against where it left its base branch
    /// (nothing for a session with no worktree of its own, or another daemon's).
    /// From now on `fresh` watches its worktree (a local one).
    async fn changes_of(&self, session: &Session, fresh: &mut Freshness) -> Option<Changes> {
        // Team mode: another daemon's worktrees are on its machine, in its clone.
        if session.worktree.is_none() || session.branch.is_none() || self.ledger.is_foreign(session)
        {
            return None;
        }
        let work = self.work(&session.id).await.ok()?;
        // An ssh session's agent changes the worktree over there, and reading it brings
        // the work here: only its turns say when it changed.
        if self.remote(session).is_none() {
            fresh.reading(&session.id, &work.worktree).await;
        }
        let base = match git::merge_base(&work.worktree, &work.base_branch, "HEAD").await {
            Ok(base) => base,
            Err(e) => {
                tracing::debug!(session = %session.id, "radar: no merge base: {e}");
                return None;
            }
        };
        match git::changed_lines(&work.worktree, &base).await {
            Ok(lines) => Some(lines),
            Err(e) => {
                tracing::debug!(session = %session.id, "radar: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(files: &[(&str, u32, u32)]) -> Changes {
        let mut map = Changes::new();
        for &(path, start, end) in files {
            map.entry(path.to_string()).or_default().push((start, end));
        }
        map
    }

    /// The report a full recomputation over every pair gives.
    fn recomputed(all: &BTreeMap<String, Changes>) -> ConflictReport {
        let ids: Vec<&String> = all.keys().collect();
        let mut pairs = Vec::new();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                let files = git::overlaps(&all[*a], &all[*b]);
                if !files.is_empty() {
                    pairs.push(ConflictPair {
                        a: (*a).clone(),
                        b: (*b).clone(),
                        files,
                    });
                }
            }
        }
        ConflictReport { pairs }
    }

    #[test]
    fn a_worktree_is_read_only_when_something_happened_in_it() {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        let dirty = Dirty {
            rested: ids(&["rested"]),
            touched: ids(&["touched"]),
            ..Dirty::default()
        };
        let idle = Some(SessionState::Complete);
        let working = Some(SessionState::Working);
        assert!(dirty.wants("rested", idle, false));
        assert!(
            !dirty.wants("rested", idle, true),
            "a turn that changed nothing needs no git"
        );
        assert!(dirty.wants("touched", idle, false), "edited while resting");
        assert!(
            !dirty.wants("touched", working, false),
            "its agent is at work: read when the turn ends"
        );
        assert!(!dirty.wants("other", idle, false), "nothing asked");
        let all = Dirty {
            all: true,
            ..Dirty::default()
        };
        assert!(all.wants("other", idle, true), "events were missed");
    }

    #[test]
    fn updating_one_session_gives_what_a_full_recomputation_gives() {
        let mut radar = Radar::default();
        let mut all = BTreeMap::new();
        let steps: Vec<(&str, Option<Changes>)> = vec![
            ("s2", Some(changes(&[("a.rs", 1, 5), ("b.rs", 3, 3)]))),
            ("s1", Some(changes(&[("a.rs", 4, 9)]))),
            ("s3", Some(changes(&[("b.rs", 10, 12), ("c.rs", 1, 1)]))),
            // s2 changes again: it no longer touches a.rs.
            ("s2", Some(changes(&[("b.rs", 3, 3), ("c.rs", 2, 2)]))),
            ("s4", Some(changes(&[("c.rs", 2, 2)]))),
            // s1's work is gone (committed away, or the session deleted).
            ("s1", None),
            ("s3", Some(Changes::new())),
        ];
        for (id, step) in steps {
            match step.clone().filter(|c| !c.is_empty()) {
                Some(c) => {
                    all.insert(id.to_string(), c);
                }
                None => {
                    all.remove(id);
                }
            }
            radar.set(id, step);
            assert_eq!(radar.report(), recomputed(&all), "after {id}");
        }
        let report = radar.report();
        assert_eq!(report.pairs.len(), 1, "{report:?}");
        assert_eq!(
            (report.pairs[0].a.as_str(), report.pairs[0].b.as_str()),
            ("s2", "s4")
        );
    }
}
