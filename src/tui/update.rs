//! What keys and slash commands do to the [`Model`]: pure functions that return the
//! [`Action`]s for the runtime to perform. Keys for an overlay go to its sub-model
//! (`update/overlay.rs`), a line sent from the input to `update/submit.rs`, a slash
//! command to `update/slash.rs`.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use crate::protocol::SessionState;

use super::action::Action;
use super::answer::Choice;
use super::inbox::InboxMsg;
use super::keymap::{KeyAction, Scope};
use super::model::{Flash, Model, Overlay, TranscriptMsg, Zone};
use super::view;
use crate::protocol::methods::Request;

mod overlay;
mod slash;
mod submit;

use slash::{diff, resend};

/// Rows one notch of the mouse wheel scrolls.
const WHEEL_ROWS: i32 = 3;

impl Model {
    /// Handles a key press.
    pub fn handle_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        self.flash = None;
        if let Some(confirm) = self.confirm.take() {
            return self.confirm_key(confirm, key);
        }
        if self.overlay == Some(Overlay::Diff) {
            return self.review_key(key);
        }
        if let Some(overlay) = self.overlay {
            return self.overlay_key(overlay, key);
        }
        match self.zone {
            Zone::Input => match self.keymap.lookup(Scope::Input, &key) {
                Some(action) => self.perform(action),
                None => match self.keymap.lookup(Scope::Global, &key) {
                    Some(action) => self.perform(action),
                    None => self.type_key(key),
                },
            },
            Zone::Inbox => self.inbox_key(key),
        }
    }

    /// A key while the inbox has the keyboard. The inbox takes its own keys (moving,
    /// opening, Esc), and the answer keys only while a message is open; any other
    /// printable key goes back to the input and is typed there, so text typed into the
    /// inbox by mistake never answers anything.
    fn inbox_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let opened = self.inbox.opened().is_some();
        match self.keymap.lookup(Scope::Inbox, &key) {
            Some(action @ (KeyAction::Approve | KeyAction::Deny)) if opened => {
                return self.perform(action);
            }
            Some(KeyAction::Approve | KeyAction::Deny) => return self.type_into_input(key),
            Some(action) => return self.perform(action),
            None => {}
        }
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char(c @ '1'..='9') if plain && opened => {
                self.answer_opened(Choice::Option(c as usize - '0' as usize))
            }
            KeyCode::Char(_) if plain => self.type_into_input(key),
            _ => match self.keymap.lookup(Scope::Global, &key) {
                Some(action) => self.perform(action),
                None => Vec::new(),
            },
        }
    }

    /// Gives the keyboard back to the input and types `key` there.
    fn type_into_input(&mut self, key: KeyEvent) -> Vec<Action> {
        self.zone = Zone::Input;
        self.type_key(key)
    }

    /// Handles a mouse event on a screen of size `screen`: the wheel scrolls the
    /// transcript (or moves the selection over the inbox); a click on the status bar
    /// focuses that session, a click on the inbox or the input gives it the keyboard.
    pub fn handle_mouse(&mut self, mouse: MouseEvent, screen: Rect) -> Vec<Action> {
        if self.overlay.is_some()
            || screen.width < view::MIN_WIDTH
            || screen.height < view::MIN_HEIGHT
        {
            return Vec::new();
        }
        let areas = view::layout(self, screen);
        let at = Position::new(mouse.column, mouse.row);
        let over_inbox = areas.inbox.is_some_and(|r| r.contains(at));
        match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let up = mouse.kind == MouseEventKind::ScrollUp;
                if over_inbox {
                    self.inbox.update(InboxMsg::Move(if up { -1 } else { 1 }))
                } else {
                    let rows = if up { WHEEL_ROWS } else { -WHEEL_ROWS };
                    self.transcripts.update(TranscriptMsg::ScrollRows(rows))
                }
            }
            MouseEventKind::Down(MouseButton::Left) if areas.status_bar.contains(at) => {
                let clicked = view::session_at(self, screen.width, mouse.column)
                    .and_then(|i| self.sessions.get(i))
                    .map(|s| s.id.clone());
                clicked.map_or_else(Vec::new, |id| self.focus(&id))
            }
            MouseEventKind::Down(MouseButton::Left) if over_inbox => {
                self.zone = Zone::Inbox;
                Vec::new()
            }
            MouseEventKind::Down(MouseButton::Left) if areas.input.contains(at) => {
                self.zone = Zone::Input;
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Pastes text into the input (bracketed paste).
    pub fn handle_paste(&mut self, text: &str) {
        self.zone = Zone::Input;
        self.input.area.insert_str(text.replace("\r\n", "\n"));
    }

    fn perform(&mut self, action: KeyAction) -> Vec<Action> {
        match action {
            KeyAction::Quit => vec![Action::Quit],
            KeyAction::Help => self.toggle_overlay(Overlay::Help {
                scroll: 0,
                commands_first: false,
            }),
            KeyAction::Sessions => self.toggle_overlay(Overlay::Sessions { selected: 0 }),
            KeyAction::ToggleInbox => {
                self.toggle_inbox();
                Vec::new()
            }
            KeyAction::ToggleContext => {
                self.panes.context = !self.panes.context;
                match self.focused.clone() {
                    Some(id) => self.context_wanted(&id),
                    None => Vec::new(),
                }
            }
            KeyAction::NextSession => self.cycle(1),
            KeyAction::PrevSession => self.cycle(-1),
            KeyAction::NextWaiting => self.next_waiting(),
            KeyAction::Focus(n) => self.goto(usize::from(n)),
            KeyAction::ScrollUp => self.transcripts.update(TranscriptMsg::ScrollPages(1)),
            KeyAction::ScrollDown => self.transcripts.update(TranscriptMsg::ScrollPages(-1)),
            KeyAction::ToggleThoughts => self.transcripts.update(TranscriptMsg::ToggleThoughts),
            KeyAction::Answer => self.open_inline_item(),
            KeyAction::Send => self.submit(),
            KeyAction::Newline => {
                self.input.area.insert_newline();
                Vec::new()
            }
            KeyAction::Complete => self.complete(),
            KeyAction::HistoryPrev | KeyAction::HistoryNext if !self.input.walks_history() => {
                let code = if action == KeyAction::HistoryPrev {
                    KeyCode::Up
                } else {
                    KeyCode::Down
                };
                self.type_key(KeyEvent::new(code, KeyModifiers::NONE))
            }
            KeyAction::HistoryPrev => {
                self.input.recall_older();
                Vec::new()
            }
            KeyAction::HistoryNext => {
                self.input.recall_newer();
                Vec::new()
            }
            KeyAction::InboxUp => self.inbox.update(InboxMsg::Move(-1)),
            KeyAction::InboxDown => self.inbox.update(InboxMsg::Move(1)),
            KeyAction::InboxOpen => self.inbox.update(InboxMsg::Open),
            KeyAction::Approve => self.answer_opened(Choice::Approve),
            KeyAction::Deny => self.answer_opened(Choice::Deny),
            KeyAction::Diff => self.on_focused(diff),
            // The daemon says so when no turn was cut short.
            KeyAction::Resend => self.on_focused(resend),
            KeyAction::CancelTurn if !self.input.is_empty() => Vec::new(),
            KeyAction::CancelTurn => match self.focused_session() {
                Some(session) if session.state.is_some_and(SessionState::is_busy) => {
                    vec![Action::on_session(
                        Request::SessionCancel,
                        session.id.clone(),
                    )]
                }
                // Nothing to cancel: Esc stays harmless.
                _ => Vec::new(),
            },
            KeyAction::Back => {
                self.zone = Zone::Input;
                self.inbox.update(InboxMsg::Close)
            }
        }
    }

    fn type_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.code == KeyCode::Char('?') && self.input.is_empty() {
            return self.toggle_overlay(Overlay::Help {
                scroll: 0,
                commands_first: false,
            });
        }
        // The shell's line editing, not the text area's own: Ctrl-U clears the line up to
        // the cursor (so a cleared line is empty before a command is typed), Ctrl-Z undoes.
        if key.modifiers == crossterm::event::KeyModifiers::CONTROL {
            match key.code {
                KeyCode::Char('u') => {
                    self.input.area.delete_line_by_head();
                    return Vec::new();
                }
                KeyCode::Char('z') => {
                    self.input.area.undo();
                    return Vec::new();
                }
                _ => {}
            }
        }
        self.input.area.input(key);
        Vec::new()
    }

    /// Hidden → shown and focused; focused → hidden; shown elsewhere → focused.
    fn toggle_inbox(&mut self) {
        match (self.panes.inbox, self.zone) {
            (true, Zone::Inbox) => {
                self.panes.inbox = false;
                self.zone = Zone::Input;
            }
            _ => {
                self.panes.inbox = true;
                self.zone = Zone::Inbox;
            }
        }
    }

    fn goto(&mut self, n: usize) -> Vec<Action> {
        let count = self.sessions.len();
        match self.sessions.get(n.wrapping_sub(1)).map(|s| s.id.clone()) {
            Some(id) => self.focus(&id),
            None if count == 0 => self.refuse(format!(
                "no session [{n}]: there are none yet — /new creates one"
            )),
            None => self.refuse(format!("no session [{n}]: there are {count} (1–{count})")),
        }
    }

    fn cycle(&mut self, step: isize) -> Vec<Action> {
        let count = self.sessions.len();
        if count == 0 {
            return self.refuse("no sessions yet — /new creates one");
        }
        let current = self.focused_index().unwrap_or(0);
        let next = (current as isize + step).rem_euclid(count as isize) as usize;
        let id = self.sessions[next].id.clone();
        self.focus(&id)
    }

    fn next_waiting(&mut self) -> Vec<Action> {
        let count = self.sessions.len();
        let start = self.focused_index().map_or(0, |i| i + 1);
        let found = (0..count)
            .map(|k| &self.sessions[(start + k) % count])
            .find(|s| Some(&s.id) != self.focused.as_ref() && self.is_waiting(&s.id))
            .map(|s| s.id.clone());
        match found {
            Some(id) => self.focus(&id),
            None => self.refuse("no other session is waiting"),
        }
    }

    pub(super) fn focused_index(&self) -> Option<usize> {
        let id = self.focused.as_deref()?;
        self.sessions.iter().position(|s| s.id == id)
    }

    /// Moves to the inbox with the focused session's open item opened.
    fn open_inline_item(&mut self) -> Vec<Action> {
        let Some(id) = self.inline_item().map(|m| m.id.clone()) else {
            return self.refuse("the focused session has no open decision or approval");
        };
        self.panes.inbox = true;
        self.zone = Zone::Inbox;
        self.inbox.update(InboxMsg::Select(id));
        self.inbox.update(InboxMsg::Open)
    }

    pub(super) fn refuse(&mut self, text: impl Into<String>) -> Vec<Action> {
        self.flash = Some(Flash::error(text));
        Vec::new()
    }
}
