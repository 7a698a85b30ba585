//! The workbench's state and how daemon events change it. Everything here is pure: events
//! go in through [`Model::apply`] and [`Model::sync`] (`model/events.rs`), and what the
//! runtime must do comes back as [`Action`]s; keys are in `update.rs`, drawing in `view/`,
//! pages and flashes in `model/pages.rs`. The parts with state of their own are sub-models, each with an
//! `update` for its own messages that the model delegates to: the inbox (`inbox.rs`), the
//! transcript pane, the sessions picker, the search results, the context pane, the link's
//! health, the watch on quiet sessions (`model/*.rs`) and the review of a diff
//! (`review.rs`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::protocol::{
    ConflictReport, ContextResult, InboxMessage, Session, SessionState, TranscriptEntry,
};

use super::action::Action;
use super::inbox::{Inbox, InboxMsg};
use super::input::PromptEditor;
use super::keymap::Keymap;
use super::review::Review;
use super::transcript::Transcript;

mod contexts;
mod events;
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
    /// The sessions are the first page of the list, the rest being read: lines sent are
    /// held until it is there.
    pub(super) partial: bool,
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
            partial: false,
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
}
