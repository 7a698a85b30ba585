//! How the daemon's reads and events change the workbench: a fresh read of every session
//! and message ([`Model::sync`]), one event ([`Model::apply`]), sessions arriving and
//! leaving (the focus moves to a neighbour), and the bell when a session that is not
//! focused starts waiting.

use std::collections::HashSet;

use super::{
    Action, Connection, ContextMsg, HealthMsg, InboxMsg, Model, QuietMsg, TranscriptMsg, Zone,
};
use crate::protocol::{Event, InboxMessage, Session, SessionState};

impl Model {
    /// Replaces sessions and inbox with a fresh read (on connect, reconnect, or after
    /// `events.lagged`). Keeps the focus when its session still exists; transcripts are
    /// asked for again from where they stopped.
    pub fn sync(&mut self, sessions: Vec<Session>, messages: Vec<InboxMessage>) -> Vec<Action> {
        self.partial = false;
        self.replace(sessions, messages)
    }

    /// [`Model::sync`] with the first page of the sessions: lines sent are held until
    /// [`Model::sync_sessions`] brings the whole list.
    pub fn sync_first_page(
        &mut self,
        sessions: Vec<Session>,
        messages: Vec<InboxMessage>,
    ) -> Vec<Action> {
        self.partial = true;
        self.replace(sessions, messages)
    }

    fn replace(&mut self, sessions: Vec<Session>, messages: Vec<InboxMessage>) -> Vec<Action> {
        let ids = self.take_list(sessions);
        self.inbox.update(InboxMsg::Synced {
            messages,
            keyboard: self.zone == Zone::Inbox,
        });
        self.transcripts
            .update(TranscriptMsg::Resynced(ids.clone()));
        let still_waiting: HashSet<String> = self
            .flagged
            .iter()
            .filter(|id| self.is_waiting(id))
            .cloned()
            .collect();
        self.flagged = still_waiting;
        let focus = self
            .focused
            .clone()
            .filter(|id| ids.contains(id))
            .or_else(|| self.sessions.first().map(|s| s.id.clone()));
        self.focused = None;
        let mut actions = focus.map_or_else(Vec::new, |id| self.focus(&id));
        actions.extend(self.run_held_now());
        actions
    }

    /// Replaces the sessions with the whole list, read after [`Model::sync`] was given
    /// the first page of it: the focus stays (or goes to the first session, or to one
    /// waited for, when it is not in the list), and the inbox and transcripts are kept.
    pub fn sync_sessions(&mut self, sessions: Vec<Session>) -> Vec<Action> {
        self.partial = false;
        let ids = self.take_list(sessions);
        let kept = self.focused.as_ref().is_some_and(|id| ids.contains(id));
        let focus = match self.pending_focus.take_if(|id| ids.contains(id)) {
            Some(id) => Some(id),
            None if kept => None,
            None => self.sessions.first().map(|s| s.id.clone()),
        };
        let mut actions = Vec::new();
        if let Some(id) = focus {
            self.focused = None;
            actions = self.focus(&id);
        }
        actions.extend(self.run_held_now());
        actions
    }

    /// Puts `sessions` in place of the list, in order, and unflags the sessions gone;
    /// returns the ids now listed.
    fn take_list(&mut self, sessions: Vec<Session>) -> HashSet<String> {
        self.sessions = sessions;
        sort_sessions(&mut self.sessions);
        let ids: HashSet<String> = self.sessions.iter().map(|s| s.id.clone()).collect();
        self.flagged.retain(|id| ids.contains(id));
        ids
    }

    /// The lines held, carried out once they can be: connected, with the whole list.
    fn run_held_now(&mut self) -> Vec<Action> {
        if self.health.connection == Connection::Connected && !self.partial {
            self.run_held()
        } else {
            Vec::new()
        }
    }

    /// Applies a daemon event. Returns a [`Action::Bell`] when a session that is not
    /// focused starts waiting, and a transcript load when the focus moves.
    pub fn apply(&mut self, event: Event) -> Vec<Action> {
        let concerned = concerned_session(&event);
        let was_waiting = concerned.as_deref().is_some_and(|id| self.is_waiting(id));
        let mut actions = match event {
            Event::SessionRegistered(session) | Event::SessionUpdated(session) => {
                self.quiet.update(QuietMsg::State {
                    session_id: session.id.clone(),
                    working: is_working(session.state),
                });
                self.upsert_session(session)
            }
            Event::SessionDeregistered { session_id, .. } => {
                self.quiet.update(QuietMsg::Gone(session_id.clone()));
                self.remove_session(&session_id)
            }
            Event::InboxCreated(message) => self.inbox.update(InboxMsg::Arrived {
                message,
                keyboard: self.zone == Zone::Inbox,
            }),
            Event::InboxUpdated(message) => self.inbox.update(InboxMsg::Changed(message)),
            Event::InboxDeleted { ids } => self.inbox.update(InboxMsg::Deleted(ids)),
            Event::Transcript(entry) => {
                self.heard(&entry.session_id);
                self.transcripts.update(TranscriptMsg::Entry(entry))
            }
            Event::Output(chunk) => {
                self.heard(&chunk.session_id);
                self.transcripts.update(TranscriptMsg::Chunk(chunk))
            }
            Event::Context(update) => {
                let session_id = update.session_id.clone();
                self.contexts.update(ContextMsg::Changed(update));
                self.context_wanted(&session_id)
            }
            Event::Conflicts(report) => {
                self.conflicts = report;
                Vec::new()
            }
            Event::Store(health) => {
                self.set_store(health);
                Vec::new()
            }
            Event::MatrixVerification(verification) => {
                self.health.update(HealthMsg::Verification(verification));
                Vec::new()
            }
            // Sent as `events.lagged`, which the runtime answers by reading everything.
            Event::Resync { .. } => Vec::new(),
        };
        if let Some(id) = concerned {
            actions.extend(self.notice_waiting(&id, was_waiting));
        }
        actions
    }

    /// Notes that a session said something (or stopped working).
    fn heard(&mut self, session_id: &str) {
        let working = is_working(self.session(session_id).and_then(|s| s.state));
        self.quiet.update(QuietMsg::Heard {
            session_id: session_id.to_string(),
            working,
        });
    }

    fn upsert_session(&mut self, session: Session) -> Vec<Action> {
        let id = session.id.clone();
        match self.sessions.iter_mut().find(|s| s.id == id) {
            Some(held) => *held = session,
            None => {
                self.sessions.push(session);
                sort_sessions(&mut self.sessions);
            }
        }
        let wanted = self.pending_focus.as_deref() == Some(id.as_str());
        if wanted || self.focused.is_none() {
            self.pending_focus = self.pending_focus.take().filter(|p| *p != id);
            return self.focus(&id);
        }
        Vec::new()
    }

    fn remove_session(&mut self, session_id: &str) -> Vec<Action> {
        let Some(index) = self.sessions.iter().position(|s| s.id == session_id) else {
            return Vec::new();
        };
        self.sessions.remove(index);
        self.transcripts
            .update(TranscriptMsg::Removed(session_id.to_string()));
        self.flagged.remove(session_id);
        if self.focused.as_deref() != Some(session_id) {
            return Vec::new();
        }
        self.focused = None;
        let neighbour = index.min(self.sessions.len().saturating_sub(1));
        match self.sessions.get(neighbour).map(|s| s.id.clone()) {
            Some(id) => self.focus(&id),
            None => Vec::new(),
        }
    }

    /// Flags a session that is not focused when it starts waiting, and rings once;
    /// unflags it when it stops.
    fn notice_waiting(&mut self, session_id: &str, was_waiting: bool) -> Vec<Action> {
        if !self.is_waiting(session_id) {
            self.flagged.remove(session_id);
            return Vec::new();
        }
        if was_waiting || self.focused.as_deref() == Some(session_id) {
            return Vec::new();
        }
        self.flagged.insert(session_id.to_string());
        let name = self
            .session(session_id)
            .map_or_else(|| session_id.to_string(), |s| s.display_name.clone());
        let number = self.number_of(session_id).unwrap_or_default();
        vec![Action::Bell {
            message: format!("[{number}] {name} is waiting for you"),
        }]
    }
}

/// Whether a session in `state` is working (its quiet is watched).
fn is_working(state: Option<SessionState>) -> bool {
    state.is_some_and(|s| matches!(s, SessionState::Working | SessionState::Starting))
}

/// Grouped by kiln (across kilns), then oldest first: by start time, then by id (ULIDs
/// sort by creation).
fn sort_sessions(sessions: &mut [Session]) {
    sessions.sort_by(|a, b| (&a.kiln, &a.started_at, &a.id).cmp(&(&b.kiln, &b.started_at, &b.id)));
}

/// The session whose waiting an event may change.
fn concerned_session(event: &Event) -> Option<String> {
    match event {
        Event::SessionRegistered(s) | Event::SessionUpdated(s) => Some(s.id.clone()),
        Event::InboxCreated(m) | Event::InboxUpdated(m) => Some(m.session_id.clone()),
        _ => None,
    }
}
