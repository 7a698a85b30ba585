//! The workbench's state and how daemon events change it. Everything here is pure: events
//! go in through [`Model::apply`] and [`Model::sync`], and what the runtime must do comes
//! back as [`Action`]s; keys are in `update.rs`, drawing in `view/`, pages and flashes in
//! `model/pages.rs`. The parts with state of their own are sub-models, each with an
//! `update` for its own messages that the model delegates to: the inbox (`inbox.rs`), the
//! transcript pane, the sessions picker, the search results, the context pane, the link's
//! health, the watch on quiet sessions (`model/*.rs`) and the review of a diff
//! (`review.rs`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::protocol::{
    ConflictReport, ContextResult, Event, InboxMessage, Session, SessionState, TranscriptEntry,
};

use super::action::Action;
use super::inbox::{Inbox, InboxMsg};
use super::input::PromptEditor;
use super::keymap::Keymap;
use super::review::Review;
use super::transcript::Transcript;

mod contexts;
mod fields;
mod health;
mod pages;
mod picker;
mod quiet;
mod search;
mod transcripts;

pub use contexts::ContextView;
pub(super) use contexts::{ContextMsg, Contexts};
pub use fields::{Activity, Confirm, Flash, Overlay, Panes, ScrollExtent, Zone};
pub use health::Connection;
pub(super) use health::{Health, HealthMsg};
pub(super) use picker::{Picked, Picker, PickerMsg};
pub(super) use quiet::{Quiet, QuietMsg};
pub use search::Found;
pub(super) use search::{Search, SearchMsg, Searched};
pub use transcripts::Jump;
pub(super) use transcripts::{TranscriptMsg, Transcripts};

/// The whole state of the workbench.
#[derive(Debug)]
pub struct Model {
    /// In creation order: `[1]` is the first.
    pub(super) sessions: Vec<Session>,
    pub(super) focused: Option<String>,
    /// A session to focus once it is registered (one just created).
    pending_focus: Option<String>,
    /// The transcript pane: every session's transcript, the scroll, a search's jump.
    pub(super) transcripts: Transcripts,
    pub(super) inbox: Inbox,
    /// Sessions that started waiting while not focused.
    pub(super) flagged: HashSet<String>,
    pub(super) panes: Panes,
    pub(super) zone: Zone,
    pub(super) overlay: Option<Overlay>,
    pub(super) input: PromptEditor,
    pub(super) flash: Option<Flash>,
    /// The link to the daemon, its database, and the settings files.
    pub(super) health: Health,
    /// This machine: sessions that run on another (team mode) say where.
    pub(super) host: String,
    pub(super) keymap: Keymap,
    /// Context stacks read for the context pane, by session.
    pub(super) contexts: Contexts,
    /// The page shown by [`Overlay::Page`]: its title and lines.
    pub(super) page: Option<(String, Vec<String>)>,
    /// The agent profiles `/new` can start (built-in ones found, or the settings').
    pub(super) agents: Vec<String>,
    /// The diff [`Overlay::Diff`] shows and the review comments not yet sent.
    pub(super) review: Review,
    /// The conflict radar: sessions whose branches change the same files.
    pub(super) conflicts: ConflictReport,
    /// Since when each working session has said nothing.
    pub(super) quiet: Quiet,
    /// An approval a rule asked for, answered and waiting for `y`.
    pub(super) confirm: Option<Confirm>,
    /// Lines sent (Enter) before the daemon answered: carried out, in order, once the
    /// state is read.
    pub(super) held: Vec<String>,
    /// The last `/search`'s results ([`Overlay::Search`] lists them).
    pub(super) search: Search,
    /// What was typed into the sessions overlay ([`Overlay::Sessions`]).
    pub(super) picker: Picker,
    /// What the workbench shows: its kiln's name, or every kiln (through the hub).
    pub(super) place: Option<String>,
    /// Every kiln: sessions and messages are named with their kiln.
    pub(super) across_kilns: bool,
}

impl Model {
    pub fn new(keymap: Keymap) -> Self {
        Self {
            sessions: Vec::new(),
            focused: None,
            pending_focus: None,
            transcripts: Transcripts::default(),
            inbox: Inbox::default(),
            flagged: HashSet::new(),
            panes: Panes {
                inbox: true,
                context: false,
            },
            zone: Zone::Input,
            overlay: None,
            input: PromptEditor::default(),
            flash: None,
            health: Health::default(),
            host: crate::sys::host_name(),
            keymap,
            contexts: Contexts::default(),
            page: None,
            agents: Vec::new(),
            review: Review::default(),
            conflicts: ConflictReport::default(),
            quiet: Quiet::default(),
            confirm: None,
            held: Vec::new(),
            search: Search::default(),
            picker: Picker::default(),
            place: None,
            across_kilns: false,
        }
    }

    /// Names what the workbench shows (in its border): one kiln, or `across` every kiln.
    pub fn set_place(&mut self, name: String, across: bool) {
        self.place = Some(name);
        self.across_kilns = across;
    }

    /// Replaces sessions and inbox with a fresh read (on connect, reconnect, or after
    /// `events.lagged`). Keeps the focus when its session still exists; transcripts are
    /// asked for again from where they stopped.
    pub fn sync(&mut self, sessions: Vec<Session>, messages: Vec<InboxMessage>) -> Vec<Action> {
        self.sessions = sessions;
        sort_sessions(&mut self.sessions);
        self.inbox.update(InboxMsg::Synced {
            messages,
            keyboard: self.zone == Zone::Inbox,
        });
        let ids: HashSet<String> = self.sessions.iter().map(|s| s.id.clone()).collect();
        self.transcripts
            .update(TranscriptMsg::Resynced(ids.clone()));
        self.flagged.retain(|id| ids.contains(id));
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
        if self.health.connection == Connection::Connected {
            actions.extend(self.run_held());
        }
        actions
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

    /// Adds history from `session.transcript` (after a transcript [`Action`]).
    pub fn load_transcript(&mut self, session_id: &str, entries: Vec<TranscriptEntry>) {
        self.transcripts.update(TranscriptMsg::Loaded {
            session_id: session_id.to_string(),
            entries,
        });
    }

    /// Focuses a session by id (after `session.create` answered), now or once registered.
    pub fn focus_session_id(&mut self, session_id: &str) -> Vec<Action> {
        if self.session(session_id).is_some() {
            self.focus(session_id)
        } else {
            self.pending_focus = Some(session_id.to_string());
            Vec::new()
        }
    }

    /// A stack read with `context.get` or returned by an operation.
    pub fn load_context(&mut self, result: ContextResult) {
        self.contexts.update(ContextMsg::Loaded(result));
    }

    /// The context pane's data for a session, once read.
    pub fn context(&self, session_id: &str) -> Option<&ContextView> {
        self.contexts.get(session_id)
    }

    /// Reads the session's stack again if the context pane shows it.
    pub(super) fn context_wanted(&self, session_id: &str) -> Vec<Action> {
        if self.panes.context && self.focused.as_deref() == Some(session_id) {
            vec![Action::context(
                session_id.to_string(),
                crate::protocol::ContextCall::Get,
            )]
        } else {
            Vec::new()
        }
    }

    /// What each session's agent costs the machine (`session.list` with resources).
    pub fn set_resources(&mut self, sessions: &[Session]) {
        self.picker.set_resources(sessions);
    }

    /// How far the focused transcript could scroll in the frame just drawn; scrolling keys
    /// and the wheel stay within it.
    pub fn set_scroll_extent(&mut self, extent: ScrollExtent) {
        self.transcripts.update(TranscriptMsg::Drawn(extent));
    }

    pub fn set_stall_after(&mut self, after: Duration) {
        self.quiet.update(QuietMsg::StallAfter(after));
    }

    /// How long a working session has been quiet, once that is at least `tui.stall_secs`.
    pub fn stalled_for(&self, session_id: &str, now: Instant) -> Option<Duration> {
        self.quiet.stalled_for(session_id, now)
    }

    /// When the next stall shows or its minutes change: the runtime draws again then
    /// (nothing is drawn on a timer otherwise).
    pub fn next_stall_change(&self, now: Instant) -> Option<Instant> {
        self.quiet.next_change(now)
    }

    /// What was typed into the sessions overlay since it opened.
    pub fn picker_filter(&self) -> &str {
        self.picker.filter()
    }

    /// The sessions the picker's filter keeps, as indexes into [`Model::sessions`], best
    /// first: the session numbered as typed, then the others in status-bar order.
    pub fn picked(&self) -> Vec<usize> {
        self.picker.picked(&self.picker_lines())
    }

    /// Each session's line as the picker matches it.
    pub(super) fn picker_lines(&self) -> Vec<String> {
        self.sessions
            .iter()
            .enumerate()
            .map(|(i, s)| Picker::line(i + 1, s, self.activity(s).label()))
            .collect()
    }

    /// The last search's results.
    pub fn found(&self) -> Option<&Found> {
        self.search.found()
    }

    /// The entry a search jumped to, while its session is focused.
    pub fn jump(&self) -> Option<&Jump> {
        self.transcripts
            .jump()
            .filter(|j| self.focused.as_deref() == Some(j.session_id.as_str()))
    }

    pub fn set_connection(&mut self, connection: Connection) {
        self.health.update(HealthMsg::Connection(connection));
    }

    /// Whether the daemon reaches its database (team mode: a server).
    pub fn set_store(&mut self, health: crate::protocol::StoreHealth) {
        self.health.update(HealthMsg::Store(health));
    }

    /// Why the settings files do not load, or `None` once they do: a banner while set.
    pub fn set_settings_error(&mut self, why: Option<String>) {
        self.health.update(HealthMsg::Settings(why));
    }

    /// Why the daemon does not answer, or `None` once it does: a banner while set.
    pub fn set_daemon_silence(&mut self, why: Option<String>) {
        self.health.update(HealthMsg::Silence(why));
    }

    /// Replaces the key bindings (the config changed).
    pub fn set_keymap(&mut self, keymap: Keymap) {
        self.keymap = keymap;
    }

    /// The radar as the daemon last reported it.
    pub fn set_conflicts(&mut self, report: ConflictReport) {
        self.conflicts = report;
    }

    /// The sessions `session_id` changes the same files as, by number, and whether on
    /// the same lines.
    pub fn conflicts_of(&self, session_id: &str) -> Vec<(usize, bool)> {
        self.conflicts
            .with(session_id)
            .into_iter()
            .filter_map(|(other, same_lines)| Some((self.number_of(other)?, same_lines)))
            .collect()
    }

    pub fn set_agents(&mut self, agents: Vec<String>) {
        self.agents = agents;
    }

    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    pub fn session(&self, session_id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == session_id)
    }

    pub fn focused_session(&self) -> Option<&Session> {
        self.session(self.focused.as_deref()?)
    }

    /// The session's number in the status bar (1-based).
    pub fn number_of(&self, session_id: &str) -> Option<usize> {
        self.sessions
            .iter()
            .position(|s| s.id == session_id)
            .map(|i| i + 1)
    }

    pub fn transcript(&self, session_id: &str) -> Option<&Transcript> {
        self.transcripts.get(session_id)
    }

    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    pub fn is_flagged(&self, session_id: &str) -> bool {
        self.flagged.contains(session_id)
    }

    /// Whether the session waits for the human: its state says so, or (for a session that
    /// registered itself) it has an unanswered decision or approval.
    pub fn is_waiting(&self, session_id: &str) -> bool {
        match self.session(session_id).map(|s| s.state) {
            Some(Some(state)) => state == SessionState::Waiting,
            Some(None) => self.inbox.open_items(session_id).next().is_some(),
            None => false,
        }
    }

    pub fn activity(&self, session: &Session) -> Activity {
        Activity::of(session, self.inbox.open_items(&session.id).next().is_some())
    }

    /// The focused session's oldest decision or approval that waits for an answer.
    pub fn inline_item(&self) -> Option<&InboxMessage> {
        self.inbox.open_items(self.focused.as_deref()?).next()
    }

    /// Moves the focus; asks for the session's transcript the first time.
    pub(super) fn focus(&mut self, session_id: &str) -> Vec<Action> {
        let moved = self.focused.as_deref() != Some(session_id);
        self.focused = Some(session_id.to_string());
        self.flagged.remove(session_id);
        let mut actions = self.context_wanted(session_id);
        actions.extend(self.transcripts.update(TranscriptMsg::Focused {
            session_id: session_id.to_string(),
            moved,
        }));
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
