//! The sessions overlay as a picker: what is typed filters the list, the arrows choose,
//! Enter focuses. At a thousand sessions the list is found by typing, not by reading.
//!
//! The filter's words must each appear in a session's line (its number as `[n]`, name,
//! agent, state and task), in any case. A number typed alone ranks the session of that
//! number first, and when no other session's number starts with it, focuses it at once:
//! with nine sessions or fewer a digit goes straight to its session.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::protocol::{Resources, Session};

/// What the picker is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tui) enum PickerMsg {
    /// A character typed into the filter.
    Type(char),
    Erase,
    /// Move the choice (now `selected`) by `delta` within what the filter keeps.
    Move {
        selected: usize,
        delta: isize,
    },
    /// Focus the chosen session.
    Enter {
        selected: usize,
    },
    Close,
}

impl PickerMsg {
    /// What a key means while the overlay is open (with `selected` chosen); `None` for
    /// the keys it leaves to the workbench (Alt and Ctrl chords: Alt-s closes it, Ctrl-c
    /// quits).
    pub(in crate::tui) fn from_key(key: KeyEvent, selected: usize) -> Option<Self> {
        if key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
        {
            return None;
        }
        let by = |delta| Some(Self::Move { selected, delta });
        match key.code {
            KeyCode::Char(c) => Some(Self::Type(c)),
            KeyCode::Backspace => Some(Self::Erase),
            KeyCode::Up => by(-1),
            KeyCode::Down => by(1),
            KeyCode::PageUp => by(-10),
            KeyCode::PageDown => by(10),
            KeyCode::Enter => Some(Self::Enter { selected }),
            KeyCode::Esc => Some(Self::Close),
            _ => None,
        }
    }
}

/// What the workbench does after the picker took a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::tui) enum Picked {
    /// The overlay stays, with this session chosen.
    Choose(usize),
    /// Close the overlay and focus the session at this index of the sessions.
    Focus(usize),
    Close,
    /// Nothing matches what is typed: says so, and stays open.
    NoMatch(String),
}

/// What was typed into the sessions overlay, and what each agent costs the machine.
#[derive(Debug, Default)]
pub struct Picker {
    filter: String,
    /// What each session's agent costs the machine, as read when the overlay was last
    /// opened.
    resources: HashMap<String, Resources>,
}

impl Picker {
    /// Carries out `msg` over the sessions' lines (see [`Picker::line`]), in status-bar
    /// order.
    pub(in crate::tui) fn update(&mut self, msg: PickerMsg, lines: &[String]) -> Picked {
        match msg {
            PickerMsg::Type(c) => {
                self.filter.push(c);
                let typed = self.filter.trim();
                if let Ok(n) = typed.parse::<usize>() {
                    let count = lines.len();
                    let unique = (1..=count)
                        .filter(|k| k.to_string().starts_with(typed))
                        .count()
                        == 1;
                    if unique && (1..=count).contains(&n) {
                        self.filter.clear();
                        return Picked::Focus(n - 1);
                    }
                }
                Picked::Choose(0)
            }
            PickerMsg::Erase => {
                self.filter.pop();
                Picked::Choose(0)
            }
            PickerMsg::Move { selected, delta } => {
                let count = self.picked(lines).len();
                Picked::Choose(
                    selected
                        .saturating_add_signed(delta)
                        .min(count.saturating_sub(1)),
                )
            }
            PickerMsg::Enter { selected } => match self.picked(lines).get(selected) {
                Some(&index) => {
                    self.filter.clear();
                    Picked::Focus(index)
                }
                None => Picked::NoMatch(format!("no session matches “{}”", self.filter)),
            },
            PickerMsg::Close => {
                self.filter.clear();
                Picked::Close
            }
        }
    }

    /// Forgets what was typed (the overlay opened or closed).
    pub(in crate::tui) fn clear(&mut self) {
        self.filter.clear();
    }

    /// What was typed since the overlay opened.
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// The sessions the filter keeps, as indexes into `lines`, best first: the session
    /// numbered as typed, then the others in status-bar order.
    pub fn picked(&self, lines: &[String]) -> Vec<usize> {
        let filter = self.filter.trim().to_lowercase();
        let words: Vec<&str> = filter.split_whitespace().collect();
        let exact = filter
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=lines.len()).contains(n))
            .map(|n| n - 1);
        let mut picked: Vec<usize> = exact.into_iter().collect();
        picked.extend(
            (0..lines.len())
                .filter(|&i| Some(i) != exact)
                .filter(|&i| words.iter().all(|w| lines[i].contains(w))),
        );
        picked
    }

    /// What the filter is matched against: `[n] name agent state task`, lowercase.
    pub(in crate::tui) fn line(number: usize, session: &Session, state: &str) -> String {
        format!(
            "[{number}] {} {} {state} {}",
            session.display_name,
            session.agent_name,
            session.task.as_deref().unwrap_or("")
        )
        .to_lowercase()
    }

    /// What each session's agent costs the machine (`session.list` with resources).
    pub(in crate::tui) fn set_resources(&mut self, sessions: &[Session]) {
        self.resources = sessions
            .iter()
            .filter_map(|s| Some((s.id.clone(), s.resources.clone()?)))
            .collect();
    }

    /// What `session_id`'s agent cost the machine when last read.
    pub fn resources_of(&self, session_id: &str) -> Option<&Resources> {
        self.resources.get(session_id)
    }
}
