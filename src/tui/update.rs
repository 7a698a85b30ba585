//! What keys and slash commands do to the [`Model`]: pure functions that return the
//! [`Action`]s for the runtime to perform.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use crate::protocol::SessionState;

use super::action::Action;
use super::answer::Choice;
use super::commands::{self, SlashCommand};
use super::keymap::{KeyAction, Scope};
use super::model::{Connection, Flash, Model, Overlay, Zone};
use super::review::ReviewComment;
use super::view;
use crate::protocol::IdsParams;
use crate::protocol::methods::Request;

mod slash;

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
            return self.diff_key(key);
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
                    self.inbox.move_selection(if up { -1 } else { 1 });
                } else {
                    self.scroll_rows(if up { WHEEL_ROWS } else { -WHEEL_ROWS });
                }
                Vec::new()
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
            KeyAction::ScrollUp => self.scroll_by(1),
            KeyAction::ScrollDown => self.scroll_by(-1),
            KeyAction::ToggleThoughts => {
                self.show_thoughts = !self.show_thoughts;
                Vec::new()
            }
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
            KeyAction::InboxUp => self.move_selection(-1),
            KeyAction::InboxDown => self.move_selection(1),
            KeyAction::InboxOpen => self.open_selected(),
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
                self.inbox.close();
                self.zone = Zone::Input;
                Vec::new()
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
        self.input.area.input(key);
        Vec::new()
    }

    /// The diff overlay: move over the rows, `c` writes a review comment on the row's
    /// line (enter keeps it, esc drops it), esc or q closes.
    fn diff_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(diff) = self.diff.as_mut() else {
            self.overlay = None;
            return Vec::new();
        };
        if let Some(text) = diff.editing.as_mut() {
            match key.code {
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Esc => diff.editing = None,
                KeyCode::Enter => {
                    let text = diff.editing.take().unwrap_or_default();
                    if let (false, Some((path, line))) = (text.trim().is_empty(), diff.anchor()) {
                        let comments = self.comments.entry(diff.session_id.clone()).or_default();
                        comments.push(ReviewComment {
                            path,
                            line,
                            text: text.trim().to_string(),
                        });
                        let n = comments.len();
                        self.flash = Some(Flash::info(format!(
                            "{n} review comment(s) — /review send gives them to the agent"
                        )));
                    }
                }
                _ => {}
            }
            return Vec::new();
        }
        let page = 10;
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.close_overlay(),
            KeyCode::Up | KeyCode::Char('k') => diff.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => diff.move_by(1),
            KeyCode::PageUp => diff.move_by(-page),
            KeyCode::PageDown => diff.move_by(page),
            KeyCode::Home | KeyCode::Char('g') => diff.cursor = 0,
            KeyCode::End | KeyCode::Char('G') => diff.move_by(isize::MAX),
            KeyCode::Char('c') => diff.editing = Some(String::new()),
            _ => {}
        }
        Vec::new()
    }

    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Vec<Action> {
        if let Overlay::Sessions { selected } = overlay
            && let Some(actions) = self.picker_key(selected, key)
        {
            return actions;
        }
        match self.keymap.lookup(Scope::Global, &key) {
            Some(KeyAction::Quit) => return vec![Action::Quit],
            Some(action @ (KeyAction::Help | KeyAction::Sessions)) => return self.perform(action),
            _ => {}
        }
        match (overlay, key.code) {
            // A page comes up by itself (a failure in words): only Esc, Enter and the
            // arrows are its own; every other key closes it and does what it would
            // have done, so nothing typed while it came up is lost or swallowed.
            (Overlay::Page { .. }, KeyCode::Esc | KeyCode::Enter) => self.close_overlay(),
            (Overlay::Search { selected }, KeyCode::Enter) => return self.open_found(selected),
            (Overlay::Search { selected }, KeyCode::Up | KeyCode::Char('k')) => {
                self.move_found(selected, -1);
            }
            (Overlay::Search { selected }, KeyCode::Down | KeyCode::Char('j')) => {
                self.move_found(selected, 1);
            }
            (Overlay::Search { selected }, KeyCode::PageUp) => self.move_found(selected, -10),
            (Overlay::Search { selected }, KeyCode::PageDown) => self.move_found(selected, 10),
            (Overlay::Page { .. }, _) if !page_key(key) => {
                self.close_overlay();
                return self.handle_key(key);
            }
            (_, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q' | '?')) => self.close_overlay(),
            (
                Overlay::Help {
                    scroll,
                    commands_first,
                },
                KeyCode::Up | KeyCode::PageUp | KeyCode::Char('k'),
            ) => {
                let step = if key.code == KeyCode::PageUp { 10 } else { 1 };
                self.overlay = Some(Overlay::Help {
                    scroll: scroll.saturating_sub(step),
                    commands_first,
                });
            }
            (
                Overlay::Help {
                    scroll,
                    commands_first,
                },
                KeyCode::Down | KeyCode::PageDown | KeyCode::Char('j'),
            ) => {
                let step = if key.code == KeyCode::PageDown { 10 } else { 1 };
                self.overlay = Some(Overlay::Help {
                    scroll: scroll.saturating_add(step),
                    commands_first,
                });
            }
            (Overlay::Page { scroll }, KeyCode::Up | KeyCode::PageUp) => {
                let step = if key.code == KeyCode::PageUp { 10 } else { 1 };
                self.overlay = Some(Overlay::Page {
                    scroll: scroll.saturating_sub(step),
                });
            }
            (Overlay::Page { scroll }, KeyCode::Down | KeyCode::PageDown) => {
                let step = if key.code == KeyCode::PageDown { 10 } else { 1 };
                self.overlay = Some(Overlay::Page {
                    scroll: scroll.saturating_add(step),
                });
            }
            // Any other printable key is typing: the overlay closes and the key goes to
            // the input, so nothing typed while an overlay came up is lost.
            (_, KeyCode::Char(_))
                if !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                self.close_overlay();
                return self.type_key(key);
            }
            _ => {}
        }
        Vec::new()
    }

    fn toggle_overlay(&mut self, overlay: Overlay) -> Vec<Action> {
        let same = matches!(
            (self.overlay, overlay),
            (Some(Overlay::Help { .. }), Overlay::Help { .. })
                | (Some(Overlay::Sessions { .. }), Overlay::Sessions { .. })
        );
        if same {
            self.close_overlay();
            return Vec::new();
        }
        self.overlay = Some(overlay);
        if let Overlay::Sessions { .. } = overlay {
            self.open_picker();
            // What each agent costs the machine, read when the list is opened.
            return vec![
                Request::SessionList(crate::protocol::SessionListParams {
                    channel: None,
                    resources: true,
                })
                .into(),
            ];
        }
        Vec::new()
    }

    /// Closes the overlay; the keys go to the input after it, whatever had them before.
    fn close_overlay(&mut self) {
        self.overlay = None;
        self.zone = Zone::Input;
        self.picker.clear();
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

    /// Scrolls the transcript by pages: up for positive `pages`.
    fn scroll_by(&mut self, pages: i32) -> Vec<Action> {
        let page = self.scroll_extent.page;
        self.scroll_rows(pages * i32::from(page.saturating_sub(2).max(1)));
        Vec::new()
    }

    /// Scrolls the transcript by rows, up for positive `rows`, within what was drawn.
    fn scroll_rows(&mut self, rows: i32) {
        let max = i32::from(self.scroll_extent.max);
        let target = (i32::from(self.scroll) + rows).clamp(0, max);
        self.scroll = u16::try_from(target).unwrap_or(0);
    }

    fn submit(&mut self) -> Vec<Action> {
        let text = self.input.text();
        if text.trim().is_empty() {
            return Vec::new();
        }
        let command =
            (text.starts_with('/') && !text.starts_with("//")).then(|| commands::parse(&text));
        let local = matches!(
            command,
            Some(Ok(SlashCommand::Help | SlashCommand::Quit)) | Some(Err(_))
        );
        if self.connection != Connection::Connected && !local {
            // Typed before the daemon answered (or while it is away): kept, and carried
            // out once the state is read.
            self.held.push(self.input.take());
            self.flash = Some(Flash::info(format!(
                "{} held until the daemon answers",
                match self.held.len() {
                    1 => "1 line".to_string(),
                    n => format!("{n} lines"),
                }
            )));
            return Vec::new();
        }
        match command {
            Some(command) => {
                self.input.take();
                match command {
                    Ok(command) => self.handle_command(command),
                    Err(e) => self.refuse(e.to_string()),
                }
            }
            None => match self.focused.clone() {
                Some(session_id) => {
                    let text = self.input.take();
                    self.prompt(session_id, text)
                }
                None => self.refuse("no session to prompt — /new creates one"),
            },
        }
    }

    /// Carries out the lines held while not connected, in order. A prompt with no session
    /// to take it goes back into the input rather than being lost.
    pub(super) fn run_held(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        for line in std::mem::take(&mut self.held) {
            if line.starts_with('/') && !line.starts_with("//") {
                match commands::parse(&line) {
                    Ok(command) => actions.extend(self.handle_command(command)),
                    Err(e) => {
                        self.refuse(e.to_string());
                    }
                }
                continue;
            }
            match self.focused.clone() {
                Some(session_id) => actions.extend(self.prompt(session_id, line)),
                None => {
                    if self.input.is_empty() {
                        self.input.set_text(&line);
                    }
                    self.refuse("no session to prompt — /new creates one");
                }
            }
        }
        actions
    }

    fn prompt(&mut self, session_id: String, text: String) -> Vec<Action> {
        // `//` sends a prompt that starts with a slash.
        let text = text
            .strip_prefix('/')
            .filter(|t| t.starts_with('/'))
            .map_or(text.clone(), String::from);
        self.scroll = 0;
        vec![Action::prompt(session_id, text)]
    }

    fn complete(&mut self) -> Vec<Action> {
        let text = self.input.text();
        if !text.starts_with('/') || !self.input.is_single_line() {
            return Vec::new();
        }
        let completion = commands::complete(&text);
        if let Some(line) = completion.line {
            self.input.set_text(&line);
        }
        if !completion.candidates.is_empty() {
            self.flash = Some(Flash::info(completion.candidates.join("  ")));
        }
        Vec::new()
    }

    fn move_selection(&mut self, delta: isize) -> Vec<Action> {
        self.inbox.move_selection(delta);
        Vec::new()
    }

    fn open_selected(&mut self) -> Vec<Action> {
        match self.inbox.open_selected() {
            Some(m) if !m.read => vec![
                Request::InboxMarkRead(IdsParams {
                    ids: vec![m.id.clone()],
                })
                .into(),
            ],
            _ => Vec::new(),
        }
    }

    /// Moves to the inbox with the focused session's open item opened.
    fn open_inline_item(&mut self) -> Vec<Action> {
        let Some(id) = self.inline_item().map(|m| m.id.clone()) else {
            return self.refuse("the focused session has no open decision or approval");
        };
        self.panes.inbox = true;
        self.zone = Zone::Inbox;
        self.inbox.select(&id);
        self.open_selected()
    }

    pub(super) fn refuse(&mut self, text: impl Into<String>) -> Vec<Action> {
        self.flash = Some(Flash::error(text));
        Vec::new()
    }
}

/// The keys a page keeps: scrolling it.
fn page_key(key: KeyEvent) -> bool {
    key.modifiers.is_empty()
        && matches!(
            key.code,
            KeyCode::Up | KeyCode::Down | KeyCode::PageUp | KeyCode::PageDown
        )
}
