//! The conflict radar: sessions whose branches change the same files, or the same
//! lines, found when a turn ends (or a session goes), never by polling. The report is
//! kept for `session.conflicts` and announced as the `session.conflicts` event when it
//! changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use super::*;
use crate::protocol::{ConflictPair, ConflictReport, Event};

/// Watches session events; recomputes the radar when a session comes to rest (its turn
/// ended, it stopped or failed) or goes.
pub(super) async fn watch(sessions: Weak<Sessions>, mut events: broadcast::Receiver<Arc<Event>>) {
    let mut states: HashMap<String, Option<SessionState>> = HashMap::new();
    if let Some(sessions) = sessions.upgrade() {
        sessions.refresh_radar().await;
    }
    loop {
        let changed = match events.recv().await.as_deref() {
            Ok(Event::SessionUpdated(s) | Event::SessionRegistered(s)) => {
                let previous = states.insert(s.id.clone(), s.state);
                previous != Some(s.state) && s.state.is_some_and(at_rest)
            }
            Ok(Event::SessionDeregistered { session_id, .. }) => {
                states.remove(session_id);
                true
            }
            Ok(_) => false,
            Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !changed {
            continue;
        }
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        sessions.refresh_radar().await;
    }
}

/// A state in which the worktree does not change under the radar's feet.
fn at_rest(state: SessionState) -> bool {
    state.is_resting() || matches!(state, SessionState::Stopped | SessionState::Error)
}

impl Sessions {
    /// The radar as last computed.
    pub fn conflicts(&self) -> ConflictReport {
        self.radar_lock().clone()
    }

    fn radar_lock(&self) -> std::sync::MutexGuard<'_, ConflictReport> {
        self.radar.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Recomputes the radar and announces it if it changed.
    pub(super) async fn refresh_radar(&self) {
        let mut changes: BTreeMap<String, BTreeMap<String, Vec<(u32, u32)>>> = BTreeMap::new();
        for session in self.ledger.list_sessions() {
            // Team mode: another daemon's worktrees are on its machine, in its clone.
            if session.worktree.is_none()
                || session.branch.is_none()
                || self.ledger.is_foreign(&session)
            {
                continue;
            }
            let Ok(work) = self.work(&session.id).await else {
                continue;
            };
            let base = match git::merge_base(&work.worktree, &work.base_branch, "HEAD").await {
                Ok(base) => base,
                Err(e) => {
                    tracing::debug!(session = %session.id, "radar: no merge base: {e}");
                    continue;
                }
            };
            match git::changed_lines(&work.worktree, &base).await {
                Ok(lines) if !lines.is_empty() => {
                    changes.insert(session.id.clone(), lines);
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(session = %session.id, "radar: {e}"),
            }
        }
        let ids: Vec<&String> = changes.keys().collect();
        let mut pairs = Vec::new();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                let files = git::overlaps(&changes[*a], &changes[*b]);
                if !files.is_empty() {
                    pairs.push(ConflictPair {
                        a: (*a).clone(),
                        b: (*b).clone(),
                        files,
                    });
                }
            }
        }
        let report = ConflictReport { pairs };
        {
            let mut current = self.radar_lock();
            if *current == report {
                return;
            }
            *current = report.clone();
        }
        self.ledger.publish_conflicts(report);
    }
}
