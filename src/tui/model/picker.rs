//! The sessions overlay as a picker: what is typed filters the list, the arrows choose,
//! Enter focuses. At a thousand sessions the list is found by typing, not by reading.
//!
//! The filter's words must each appear in a session's line (its number as `[n]`, name,
//! agent, state and task), in any case. A number typed alone ranks the session of that
//! number first, and when no other session's number starts with it, focuses it at once:
//! with nine sessions or fewer a digit goes straight to its session.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Model, Overlay, Zone};
use crate::tui::action::Action;

impl Model {
    /// What was typed into the sessions overlay since it opened.
    pub fn picker_filter(&self) -> &str {
        &self.picker
    }

    /// The sessions the filter keeps, as indexes into [`Model::sessions`], best first:
    /// the session numbered as typed, then the others in status-bar order.
    pub fn picked(&self) -> Vec<usize> {
        let filter = self.picker.trim().to_lowercase();
        let words: Vec<&str> = filter.split_whitespace().collect();
        let exact = filter
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=self.sessions.len()).contains(n))
            .map(|n| n - 1);
        let mut picked: Vec<usize> = exact.into_iter().collect();
        picked.extend(
            (0..self.sessions.len())
                .filter(|&i| Some(i) != exact)
                .filter(|&i| {
                    let line = self.picker_line(i);
                    words.iter().all(|w| line.contains(w))
                }),
        );
        picked
    }

    /// What the filter is matched against: `[n] name agent state task`, lowercase.
    fn picker_line(&self, index: usize) -> String {
        let session = &self.sessions[index];
        format!(
            "[{}] {} {} {} {}",
            index + 1,
            session.display_name,
            session.agent_name,
            self.activity(session).label(),
            session.task.as_deref().unwrap_or("")
        )
        .to_lowercase()
    }

    /// A key while the sessions overlay is open: typing filters, ↑↓ PgUp PgDn choose,
    /// Enter focuses, Esc closes. `None` for keys it leaves to the workbench (Alt and
    /// Ctrl chords: Alt-s closes it, Ctrl-c quits).
    pub(in crate::tui) fn picker_key(
        &mut self,
        selected: usize,
        key: KeyEvent,
    ) -> Option<Vec<Action>> {
        if key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
        {
            return None;
        }
        match key.code {
            KeyCode::Char(c) => return Some(self.picker_type(c)),
            KeyCode::Backspace => self.picker_erase(),
            KeyCode::Up => self.picker_move(selected, -1),
            KeyCode::Down => self.picker_move(selected, 1),
            KeyCode::PageUp => self.picker_move(selected, -10),
            KeyCode::PageDown => self.picker_move(selected, 10),
            KeyCode::Enter => return Some(self.picker_enter(selected)),
            KeyCode::Esc => {
                self.overlay = None;
                self.zone = Zone::Input;
                self.picker.clear();
            }
            _ => return None,
        }
        Some(Vec::new())
    }

    /// Opens the sessions overlay with an empty filter, the focused session chosen.
    pub(in crate::tui) fn open_picker(&mut self) {
        self.picker.clear();
        let selected = self.focused_index().unwrap_or(0);
        self.overlay = Some(Overlay::Sessions { selected });
    }

    /// A character typed into the filter. A number no other session's number starts
    /// with focuses its session.
    pub(in crate::tui) fn picker_type(&mut self, c: char) -> Vec<Action> {
        self.picker.push(c);
        self.overlay = Some(Overlay::Sessions { selected: 0 });
        let typed = self.picker.trim();
        if let Ok(n) = typed.parse::<usize>() {
            let count = self.sessions.len();
            let unique = (1..=count)
                .filter(|k| k.to_string().starts_with(typed))
                .count()
                == 1;
            if unique && (1..=count).contains(&n) {
                return self.picker_focus(n - 1);
            }
        }
        Vec::new()
    }

    pub(in crate::tui) fn picker_erase(&mut self) {
        self.picker.pop();
        self.overlay = Some(Overlay::Sessions { selected: 0 });
    }

    /// Moves the choice by `delta` within what the filter keeps.
    pub(in crate::tui) fn picker_move(&mut self, selected: usize, delta: isize) {
        let count = self.picked().len();
        let next = selected
            .saturating_add_signed(delta)
            .min(count.saturating_sub(1));
        self.overlay = Some(Overlay::Sessions { selected: next });
    }

    /// Enter: focuses the chosen session and closes the overlay; with nothing kept, says
    /// so and stays open.
    pub(in crate::tui) fn picker_enter(&mut self, selected: usize) -> Vec<Action> {
        match self.picked().get(selected) {
            Some(&index) => self.picker_focus(index),
            None => self.refuse(format!("no session matches “{}”", self.picker)),
        }
    }

    fn picker_focus(&mut self, index: usize) -> Vec<Action> {
        self.overlay = None;
        self.zone = Zone::Input;
        self.picker.clear();
        let id = self.sessions[index].id.clone();
        self.focus(&id)
    }
}
