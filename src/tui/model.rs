//! The workbench's state and how daemon events change it. Everything here is pure: events
//! go in through [`Model::apply`] and [`Model::sync`], and what the runtime must do comes
//! back as [`Action`]s. Key handling is in `update.rs`, drawing in `view/`; the pages and
//! flashes the model shows are in `model/pages.rs`, quiet sessions in `model/quiet.rs`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::protocol::{
    ConflictReport, ContextResult, Event, InboxMessage, Session, SessionState, TranscriptEntry,
};

use super::action::Action;
use super::inbox::Inbox;
use super::input::PromptEditor;
use super::keymap::Keymap;
use super::review::{DiffView, ReviewComment};
use super::transcript::Transcript;

mod fields;
mod pages;
mod picker;
mod quiet;
mod search;

pub use fields::{
    Activity, Confirm, Connection, ContextView, Flash, Overlay, Panes, ScrollExtent, Zone,
};
pub use search::{Found, Jump};

/// The whole state of the workbench.
#[derive(Debug)]
pub struct Model {
    /// In creation order: `[1]` is the first.
    pub(super) sessions: Vec<Session>,
    pub(super) focused: Option<String>,
    /// A session to focus once it is registered (one just created).
    pending_focus: Option<String>,
    pub(super) transcripts: HashMap<String, Transcript>,
    pub(super) inbox: Inbox,
    /// Sessions that started waiting while not focused.
    pub(super) flagged: HashSet<String>,
    pub(super) panes: Panes,
    pub(super) zone: Zone,
    pub(super) overlay: Option<Overlay>,
    pub(super) input: PromptEditor,
    pub(super) flash: Option<Flash>,
    pub(super) connection: Connection,
    /// What the daemon's database cannot read back (its first damaged stretch).
    pub(super) store_damaged: Option<String>,
    /// Team mode: why the daemon cannot reach its database server, while it cannot.
    pub(super) store_down: Option<String>,
    /// Why the settings files do not load (one line), while they do not: the last good
    /// settings stay in use.
    pub(super) settings_error: Option<String>,
    /// Why the connected daemon does not answer (stopped by a signal, or silent), while
    /// it does not.
    pub(super) daemon_silence: Option<String>,
    /// This machine: sessions that run on another (team mode) say where.
    pub(super) host: String,
    pub(super) keymap: Keymap,
    /// Rows scrolled up from the bottom of the focused transcript; 0 follows the tail.
    pub(super) scroll: u16,
    /// How far the focused transcript could scroll in the last frame, as the runtime
    /// passed it ([`Model::set_scroll_extent`]).
    pub(super) scroll_extent: ScrollExtent,
    pub(super) show_thoughts: bool,
    /// Context stacks read for the context pane, by session.
    pub(super) contexts: HashMap<String, ContextView>,
    /// The page shown by [`Overlay::Page`]: its title and lines.
    pub(super) page: Option<(String, Vec<String>)>,
    /// The agent profiles `/new` can start (built-in ones found, or the settings').
    pub(super) agents: Vec<String>,
    /// The diff [`Overlay::Diff`] shows.
    pub(super) diff: Option<DiffView>,
    /// Review comments not yet sent, by session.
    pub(super) comments: HashMap<String, Vec<ReviewComment>>,
    /// The conflict radar: sessions whose branches change the same files.
    pub(super) conflicts: ConflictReport,
    /// Since when each working session has said nothing (its last output, or the start
    /// of its turn).
    pub(super) quiet_since: HashMap<String, Instant>,
    /// How long a working session may be quiet before it shows it (`tui.stall_secs`).
    pub(super) stall_after: Duration,
    /// An approval a rule asked for, answered and waiting for `y`.
    pub(super) confirm: Option<Confirm>,
    /// Lines sent (Enter) before the daemon answered: carried out, in order, once the
    /// state is read.
    pub(super) held: Vec<String>,
    /// The last `/search`'s results ([`Overlay::Search`] lists them).
    pub(super) found: Option<Found>,
    /// The transcript entry the last search result opened.
    pub(super) jump: Option<Jump>,
    /// What each session's agent costs the machine, as read when the sessions overlay
    /// was last opened.
    pub(super) resources: HashMap<String, crate::protocol::Resources>,
    /// What was typed into the sessions overlay.
    pub(super) picker: String,
}

impl Model {
    pub fn new(keymap: Keymap) -> Self {
        Self {
            sessions: Vec::new(),
            focused: None,
            pending_focus: None,
            transcripts: HashMap::new(),
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
            connection: Connection::Connected,
            store_down: None,
            store_damaged: None,
            settings_error: None,
            daemon_silence: None,
            host: crate::sys::host_name(),
            keymap,
            scroll: 0,
            scroll_extent: ScrollExtent::default(),
            show_thoughts: false,
            contexts: HashMap::new(),
            page: None,
            agents: Vec::new(),
            diff: None,
            comments: HashMap::new(),
            conflicts: ConflictReport::default(),
            quiet_since: HashMap::new(),
            stall_after: Duration::from_secs(120),
            confirm: None,
            held: Vec::new(),
            found: None,
            jump: None,
            resources: HashMap::new(),
            picker: String::new(),
        }
    }

    /// Replaces sessions and inbox with a fresh read (on connect, reconnect, or after
    /// `events.lagged`). Keeps the focus when its session still exists; transcripts are
    /// asked for again from where they stopped.
    pub fn sync(&mut self, sessions: Vec<Session>, messages: Vec<InboxMessage>) -> Vec<Action> {
        self.sessions = sessions;
        sort_sessions(&mut self.sessions);
        self.inbox.replace(messages);
        if self.zone != Zone::Inbox {
            self.inbox.select_newest();
        }
        let ids: HashSet<String> = self.sessions.iter().map(|s| s.id.clone()).collect();
        self.transcripts.retain(|id, _| ids.contains(id));
        for transcript in self.transcripts.values_mut() {
            transcript.requested = false;
            transcript.forget_streamed();
        }
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
        if self.connection == Connection::Connected {
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
                let working = session
                    .state
                    .is_some_and(|s| matches!(s, SessionState::Working | SessionState::Starting));
                if !working {
                    self.quiet_since.remove(&session.id);
                } else if !self.quiet_since.contains_key(&session.id) {
                    self.quiet_since.insert(session.id.clone(), Instant::now());
                }
                self.upsert_session(session)
            }
            Event::SessionDeregistered { session_id, .. } => {
                self.quiet_since.remove(&session_id);
                self.remove_session(&session_id)
            }
            Event::InboxCreated(message) => {
                self.inbox.upsert(message);
                // Until the pane has the keyboard, its selection stays on the newest.
                if self.zone != Zone::Inbox {
                    self.inbox.select_newest();
                }
                Vec::new()
            }
            Event::InboxUpdated(message) => {
                self.inbox.upsert(message);
                Vec::new()
            }
            Event::InboxDeleted { ids } => {
                self.inbox.remove(&ids);
                Vec::new()
            }
            Event::Transcript(entry) => {
                self.heard(&entry.session_id);
                self.transcript_mut(&entry.session_id.clone()).push(entry);
                Vec::new()
            }
            Event::Output(chunk) => {
                self.heard(&chunk.session_id);
                self.transcript_mut(&chunk.session_id)
                    .chunk(chunk.kind, &chunk.text);
                Vec::new()
            }
            Event::Context(update) => {
                if let Some(view) = self.contexts.get_mut(&update.session_id) {
                    view.last_change = Some(update.change.to_string());
                    view.fresh_start = update.fresh_start;
                }
                self.context_wanted(&update.session_id)
            }
            Event::Conflicts(report) => {
                self.conflicts = report;
                Vec::new()
            }
            Event::Store(health) => {
                self.set_store(health);
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
        let transcript = self.transcript_mut(session_id);
        for entry in entries {
            transcript.push(entry);
        }
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
        let last_change = result
            .description
            .or_else(|| result.change.as_ref().map(ToString::to_string))
            .or_else(|| {
                self.contexts
                    .get(&result.session_id)
                    .and_then(|v| v.last_change.clone())
            });
        self.contexts.insert(
            result.session_id,
            ContextView {
                stack: result.stack,
                last_change,
                fresh_start: result.fresh_start,
            },
        );
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
        self.resources = sessions
            .iter()
            .filter_map(|s| Some((s.id.clone(), s.resources.clone()?)))
            .collect();
    }

    /// What `session_id`'s agent cost the machine when last read.
    pub fn resources_of(&self, session_id: &str) -> Option<&crate::protocol::Resources> {
        self.resources.get(session_id)
    }

    /// How far the focused transcript could scroll in the frame just drawn; scrolling keys
    /// and the wheel stay within it.
    pub fn set_scroll_extent(&mut self, extent: ScrollExtent) {
        self.scroll_extent = extent;
        if let Some(offset) = extent.jumped {
            self.jump_placed(offset);
        }
    }

    pub fn set_connection(&mut self, connection: Connection) {
        self.connection = connection;
    }

    /// Whether the daemon reaches its database (team mode: a server).
    pub fn set_store(&mut self, health: crate::protocol::StoreHealth) {
        self.store_damaged = health
            .damaged
            .first()
            .map(|first| match health.damaged.len() {
                1 => first.clone(),
                n => format!("{first} (and {} more)", n - 1),
            });
        self.store_down =
            (!health.connected).then(|| health.error.unwrap_or_else(|| "no answer".into()));
    }

    /// Why the settings files do not load, or `None` once they do: a banner while set.
    pub fn set_settings_error(&mut self, why: Option<String>) {
        self.settings_error = why;
    }

    /// Why the daemon does not answer, or `None` once it does: a banner while set.
    pub fn set_daemon_silence(&mut self, why: Option<String>) {
        self.daemon_silence = why;
    }

    /// Replaces the key bindings (the config changed).
    pub fn set_keymap(&mut self, keymap: Keymap) {
        self.keymap = keymap;
    }

    /// What the sessions spent on `day` (UTC, `YYYY-MM-DD`): tokens and US dollars, as
    /// far as their agents told (`None`: nothing known, never zero).
    pub fn spent_on(&self, day: &str) -> (Option<u64>, Option<f64>) {
        let mut tokens = None;
        let mut cost = None;
        for on_day in self
            .sessions
            .iter()
            .filter_map(|s| s.spent.as_ref()?.days.get(day))
        {
            if let Some(t) = on_day.tokens {
                tokens = Some(tokens.unwrap_or(0) + t);
            }
            if let Some(c) = on_day.cost {
                cost = Some(cost.unwrap_or(0.0) + c);
            }
        }
        (tokens, cost)
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

    /// What the empty workbench says to start with: the agents found and the `/new`
    /// that starts one.
    pub fn how_to_start(&self) -> String {
        if self.connection == Connection::Connecting {
            return "reading the sessions…".into();
        }
        match self.agents.as_slice() {
            // The profiles are in the files that do not load (the banner says why).
            [] if self.settings_error.is_some() => {
                "no session yet — /new --agent <name> <task> starts one".into()
            }
            [] => "no agent found — install one (`cru agents` lists the known ones) or add \
                   [agents.<name>] to .crucible.toml"
                .into(),
            [only] => format!("no session yet — /new <task> starts {only}"),
            many => format!(
                "no session yet — /new --agent <name> <task> · agents: {}",
                many.join(", ")
            ),
        }
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
        match session.state {
            Some(SessionState::Creating | SessionState::Starting) => Activity::Starting,
            Some(SessionState::Working) => Activity::Working,
            Some(SessionState::Waiting) => Activity::Waiting,
            Some(SessionState::Complete) => Activity::Done,
            Some(SessionState::Cancelled) => Activity::Cancelled,
            Some(SessionState::Interrupted) => Activity::Interrupted,
            Some(SessionState::Stopped) => Activity::Stopped,
            Some(SessionState::Parked) => Activity::Parked,
            Some(SessionState::Error) => Activity::Error,
            None if self.inbox.open_items(&session.id).next().is_some() => Activity::Waiting,
            None if session.status == "active" => Activity::Active,
            None => Activity::Idle,
        }
    }

    /// The focused session's oldest decision or approval that waits for an answer.
    pub fn inline_item(&self) -> Option<&InboxMessage> {
        self.inbox.open_items(self.focused.as_deref()?).next()
    }

    /// Moves the focus; asks for the session's transcript the first time.
    pub(super) fn focus(&mut self, session_id: &str) -> Vec<Action> {
        if self.focused.as_deref() != Some(session_id) {
            self.scroll = 0;
            self.jump = None;
        }
        self.focused = Some(session_id.to_string());
        self.flagged.remove(session_id);
        let mut actions = self.context_wanted(session_id);
        let transcript = self.transcript_mut(session_id);
        if !transcript.requested {
            transcript.requested = true;
            actions.push(Action::transcript(
                session_id.to_string(),
                transcript.last_seq(),
            ));
        }
        actions
    }

    fn transcript_mut(&mut self, session_id: &str) -> &mut Transcript {
        self.transcripts.entry(session_id.to_string()).or_default()
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
        self.transcripts.remove(session_id);
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

/// Oldest first: by start time, then by id (ULIDs sort by creation).
fn sort_sessions(sessions: &mut [Session]) {
    sessions.sort_by(|a, b| (&a.started_at, &a.id).cmp(&(&b.started_at, &b.id)));
}

/// The session whose waiting an event may change.
fn concerned_session(event: &Event) -> Option<String> {
    match event {
        Event::SessionRegistered(s) | Event::SessionUpdated(s) => Some(s.id.clone()),
        Event::InboxCreated(m) | Event::InboxUpdated(m) => Some(m.session_id.clone()),
        _ => None,
    }
}
