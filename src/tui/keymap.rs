//! Key bindings: one table ([`BINDINGS`]) of every bindable action with its name (as used
//! in `[tui.keys]`), help text and default keys. A `[tui.keys]` table patches the defaults:
//!
//! ```toml
//! [tui.keys]
//! next_waiting = "ctrl-n"          # one key
//! toggle_inbox = ["f2", "alt-i"]   # several
//! toggle_context = []              # unbound
//! ```
//!
//! Key strings are `[ctrl-][alt-][shift-]<key>`, where `<key>` is one character or a name:
//! enter, tab, backtab, esc, space, backspace, delete, insert, home, end, pageup, pagedown,
//! up, down, left, right, f1…f12. Printable keys that are not bound (and `?` on an empty
//! input, which opens the help) go to the input; in the inbox pane, digits 1–9 choose an
//! option.

use crossterm::event::KeyEvent;

mod chord;

pub use chord::{KeyChord, KeyError};

/// Where an action applies. Input and inbox bindings are looked up before global ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    /// While the text input has the keyboard.
    Input,
    /// While the inbox pane has the keyboard.
    Inbox,
}

/// Something a key can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyAction {
    Quit,
    Help,
    Sessions,
    ToggleInbox,
    ToggleContext,
    NextSession,
    PrevSession,
    /// Focus the next session (after the focused one) that waits for the human.
    NextWaiting,
    /// Focus session n (1–9).
    Focus(u8),
    ScrollUp,
    ScrollDown,
    ToggleThoughts,
    /// Move to the inbox with the focused session's open decision or approval selected.
    Answer,
    Send,
    Newline,
    Complete,
    HistoryPrev,
    HistoryNext,
    InboxUp,
    InboxDown,
    InboxOpen,
    Approve,
    Deny,
    /// Close the opened message, or go back to the input.
    Back,
    /// On an empty input: cancel the focused session's turn.
    CancelTurn,
    /// Open the focused session's diff.
    Diff,
    /// Send the focused session's turn that was cut short again.
    Resend,
}

/// One row of the binding table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub name: &'static str,
    pub action: KeyAction,
    pub scope: Scope,
    pub help: &'static str,
    pub defaults: &'static [&'static str],
}

const fn bind(
    name: &'static str,
    action: KeyAction,
    scope: Scope,
    help: &'static str,
    defaults: &'static [&'static str],
) -> Binding {
    Binding {
        name,
        action,
        scope,
        help,
        defaults,
    }
}

use KeyAction as A;
use Scope::{Global as G, Inbox as B, Input as I};

/// Every bindable action, in help order.
pub const BINDINGS: &[Binding] = &[
    bind(
        "quit",
        A::Quit,
        G,
        "quit (agents keep working)",
        &["ctrl-c", "ctrl-q"],
    ),
    bind(
        "help",
        A::Help,
        G,
        "show this help (also ? on an empty input)",
        &["f1"],
    ),
    bind("sessions", A::Sessions, G, "list sessions", &["alt-s"]),
    bind(
        "toggle_inbox",
        A::ToggleInbox,
        G,
        "inbox pane: focus / hide",
        &["f2", "alt-i"],
    ),
    bind(
        "toggle_context",
        A::ToggleContext,
        G,
        "context-stack pane",
        &["f3"],
    ),
    bind(
        "next_session",
        A::NextSession,
        G,
        "next session",
        &["alt-n"],
    ),
    bind(
        "prev_session",
        A::PrevSession,
        G,
        "previous session",
        &["alt-p"],
    ),
    bind(
        "next_waiting",
        A::NextWaiting,
        G,
        "next waiting session",
        &["alt-w"],
    ),
    bind(
        "diff",
        A::Diff,
        G,
        "the focused session's changes (review, comment)",
        &["alt-d"],
    ),
    bind(
        "resend",
        A::Resend,
        G,
        "send the focused session's cut-short turn again",
        &["alt-r"],
    ),
    bind("focus_1", A::Focus(1), G, "focus session 1", &["alt-1"]),
    bind("focus_2", A::Focus(2), G, "focus session 2", &["alt-2"]),
    bind("focus_3", A::Focus(3), G, "focus session 3", &["alt-3"]),
    bind("focus_4", A::Focus(4), G, "focus session 4", &["alt-4"]),
    bind("focus_5", A::Focus(5), G, "focus session 5", &["alt-5"]),
    bind("focus_6", A::Focus(6), G, "focus session 6", &["alt-6"]),
    bind("focus_7", A::Focus(7), G, "focus session 7", &["alt-7"]),
    bind("focus_8", A::Focus(8), G, "focus session 8", &["alt-8"]),
    bind("focus_9", A::Focus(9), G, "focus session 9", &["alt-9"]),
    bind(
        "scroll_up",
        A::ScrollUp,
        G,
        "scroll the transcript up",
        &["pageup"],
    ),
    bind(
        "scroll_down",
        A::ScrollDown,
        G,
        "scroll the transcript down",
        &["pagedown"],
    ),
    bind(
        "toggle_thoughts",
        A::ToggleThoughts,
        G,
        "fold / unfold thoughts",
        &["alt-t"],
    ),
    bind(
        "answer",
        A::Answer,
        G,
        "answer the focused session's question",
        &["alt-a"],
    ),
    bind(
        "send",
        A::Send,
        I,
        "send the prompt or /command",
        &["enter"],
    ),
    bind(
        "newline",
        A::Newline,
        I,
        "new line in the input",
        &["alt-enter", "ctrl-j"],
    ),
    bind("complete", A::Complete, I, "complete a /command", &["tab"]),
    bind(
        "cancel_turn",
        A::CancelTurn,
        I,
        "cancel the focused session's turn (empty input)",
        &["esc"],
    ),
    bind(
        "history_prev",
        A::HistoryPrev,
        I,
        "earlier input (single line)",
        &["up"],
    ),
    bind(
        "history_next",
        A::HistoryNext,
        I,
        "later input (single line)",
        &["down"],
    ),
    bind("inbox_up", A::InboxUp, B, "previous message", &["up", "k"]),
    bind(
        "inbox_down",
        A::InboxDown,
        B,
        "next message",
        &["down", "j"],
    ),
    bind(
        "inbox_open",
        A::InboxOpen,
        B,
        "open the message",
        &["enter"],
    ),
    bind("approve", A::Approve, B, "approve", &["a"]),
    bind("deny", A::Deny, B, "deny", &["d"]),
    bind(
        "back",
        A::Back,
        B,
        "close the message / back to the input",
        &["esc"],
    ),
];

/// Why a `[tui.keys]` table was refused; it names the entry at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeymapError {
    #[error("[tui.keys] {name}: no such action{}", .suggestion.map(|s| format!(" — did you mean {s}?")).unwrap_or_default())]
    UnknownAction {
        name: String,
        suggestion: Option<&'static str>,
    },
    #[error("[tui.keys] {action} = \"{key}\": {reason}")]
    BadKey {
        action: String,
        key: String,
        reason: KeyError,
    },
    #[error("[tui.keys] {action}: expected a key string or an array of key strings")]
    BadValue { action: String },
}

/// The key bindings in use.
#[derive(Debug, Clone, PartialEq)]
pub struct Keymap {
    /// `(key, index into BINDINGS)`, in table order.
    keys: Vec<(KeyChord, usize)>,
}

impl Default for Keymap {
    fn default() -> Self {
        let keys = BINDINGS
            .iter()
            .enumerate()
            .flat_map(|(i, b)| b.defaults.iter().map(move |k| (k, i)))
            .filter_map(|(k, i)| KeyChord::parse(k).ok().map(|chord| (chord, i)))
            .collect();
        Self { keys }
    }
}

impl Keymap {
    /// The defaults patched by a `[tui.keys]` table: each named action gets exactly the
    /// keys given, and loses them from any other action of the same scope.
    pub fn with_overrides(table: &toml::Table) -> Result<Self, KeymapError> {
        let mut keymap = Self::default();
        for (name, value) in table {
            let index = BINDINGS
                .iter()
                .position(|b| b.name == name)
                .ok_or_else(|| KeymapError::UnknownAction {
                    name: name.clone(),
                    suggestion: closest_action(name),
                })?;
            let chords = key_strings(name, value)?
                .into_iter()
                .map(|key| {
                    KeyChord::parse(key).map_err(|reason| KeymapError::BadKey {
                        action: name.clone(),
                        key: key.to_string(),
                        reason,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            keymap.rebind(index, chords);
        }
        Ok(keymap)
    }

    fn rebind(&mut self, index: usize, chords: Vec<KeyChord>) {
        let scope = BINDINGS[index].scope;
        self.keys.retain(|(chord, i)| {
            *i != index && !(BINDINGS[*i].scope == scope && chords.contains(chord))
        });
        self.keys.extend(chords.into_iter().map(|c| (c, index)));
    }

    /// The action a key has in a scope.
    pub fn lookup(&self, scope: Scope, key: &KeyEvent) -> Option<KeyAction> {
        let chord = KeyChord::from_event(key);
        self.keys
            .iter()
            .find(|(c, i)| *c == chord && BINDINGS[*i].scope == scope)
            .map(|(_, i)| BINDINGS[*i].action)
    }

    /// The keys bound to an action, in the order they were given.
    pub fn keys_for(&self, action: KeyAction) -> Vec<KeyChord> {
        self.keys
            .iter()
            .filter(|(_, i)| BINDINGS[*i].action == action)
            .map(|(c, _)| *c)
            .collect()
    }

    /// The first key of an action as text, for hints ("alt-a"); "unbound" when none.
    pub fn hint(&self, action: KeyAction) -> String {
        self.keys_for(action)
            .first()
            .map_or_else(|| "unbound".to_string(), ToString::to_string)
    }
}

fn key_strings<'a>(name: &str, value: &'a toml::Value) -> Result<Vec<&'a str>, KeymapError> {
    let bad = || KeymapError::BadValue {
        action: name.to_string(),
    };
    match value {
        toml::Value::String(s) => Ok(vec![s.as_str()]),
        toml::Value::Array(items) => items.iter().map(|v| v.as_str().ok_or_else(bad)).collect(),
        _ => Err(bad()),
    }
}

fn closest_action(name: &str) -> Option<&'static str> {
    BINDINGS
        .iter()
        .map(|b| b.name)
        .find(|candidate| candidate.contains(name) || name.contains(candidate))
}

#[cfg(test)]
#[path = "keymap_tests.rs"]
mod tests;
