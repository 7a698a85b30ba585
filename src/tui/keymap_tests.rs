//! Tests of the key bindings: the defaults, key strings, `[tui.keys]` overrides and their
//! errors.

use crossterm::event::{KeyCode, KeyModifiers};

use super::*;

fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, modifiers)
}

fn table(text: &str) -> toml::Table {
    text.parse().unwrap()
}

#[test]
fn defaults_cover_every_action_and_parse() {
    let keymap = Keymap::default();
    let parsed: usize = BINDINGS.iter().map(|b| b.defaults.len()).sum();
    assert_eq!(keymap.keys.len(), parsed, "a default key failed to parse");
    for b in BINDINGS {
        assert!(!keymap.keys_for(b.action).is_empty(), "{} unbound", b.name);
    }
}

#[test]
fn default_lookups_respect_scope() {
    let keymap = Keymap::default();
    let alt = KeyModifiers::ALT;
    assert_eq!(
        keymap.lookup(Scope::Global, &key(KeyCode::Char('3'), alt)),
        Some(KeyAction::Focus(3))
    );
    let enter = key(KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(keymap.lookup(Scope::Input, &enter), Some(KeyAction::Send));
    assert_eq!(
        keymap.lookup(Scope::Inbox, &enter),
        Some(KeyAction::InboxOpen)
    );
    assert_eq!(
        keymap.lookup(Scope::Input, &key(KeyCode::Enter, alt)),
        Some(KeyAction::Newline)
    );
    assert_eq!(
        keymap.lookup(
            Scope::Input,
            &key(KeyCode::Char('j'), KeyModifiers::CONTROL)
        ),
        Some(KeyAction::Newline)
    );
    // `a` approves only in the inbox; in the input it is a letter.
    let a = key(KeyCode::Char('a'), KeyModifiers::NONE);
    assert_eq!(keymap.lookup(Scope::Inbox, &a), Some(KeyAction::Approve));
    assert_eq!(keymap.lookup(Scope::Input, &a), None);
    assert_eq!(keymap.lookup(Scope::Global, &a), None);
}

#[test]
fn key_strings_round_trip() {
    for text in [
        "alt-1",
        "ctrl-n",
        "f2",
        "enter",
        "alt-enter",
        "shift-tab",
        "?",
        "pageup",
        "ctrl-alt-x",
        "space",
    ] {
        assert_eq!(KeyChord::parse(text).unwrap().to_string(), text);
    }
    assert_eq!(KeyChord::parse("Ctrl-n").unwrap().to_string(), "ctrl-n");
    assert_eq!(KeyChord::parse("alt--").unwrap().to_string(), "alt--");
    // A shifted letter is the capital, however the terminal reports it.
    assert_eq!(
        KeyChord::parse("shift-a").unwrap(),
        KeyChord::from_event(&key(KeyCode::Char('A'), KeyModifiers::SHIFT))
    );
}

#[test]
fn overrides_replace_keys_and_steal_them_within_a_scope() {
    let keymap = Keymap::with_overrides(&table(
        "next_waiting = \"ctrl-n\"\ntoggle_inbox = [\"f5\"]\nnext_session = \"alt-w\"",
    ))
    .unwrap();
    let ctrl_n = key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    assert_eq!(
        keymap.lookup(Scope::Global, &ctrl_n),
        Some(KeyAction::NextWaiting)
    );
    assert_eq!(
        keymap.lookup(Scope::Global, &key(KeyCode::F(2), KeyModifiers::NONE)),
        None
    );
    assert_eq!(
        keymap.lookup(Scope::Global, &key(KeyCode::F(5), KeyModifiers::NONE)),
        Some(KeyAction::ToggleInbox)
    );
    // alt-w moved from next_waiting (which now has only ctrl-n) to next_session.
    assert_eq!(
        keymap.lookup(Scope::Global, &key(KeyCode::Char('w'), KeyModifiers::ALT)),
        Some(KeyAction::NextSession)
    );
    assert_eq!(keymap.hint(KeyAction::NextWaiting), "ctrl-n");
    assert_eq!(keymap.hint(KeyAction::NextSession), "alt-w");
}

#[test]
fn an_empty_array_unbinds() {
    let keymap = Keymap::with_overrides(&table("toggle_context = []")).unwrap();
    assert!(keymap.keys_for(KeyAction::ToggleContext).is_empty());
    assert_eq!(keymap.hint(KeyAction::ToggleContext), "unbound");
}

#[test]
fn errors_name_the_entry() {
    let err = Keymap::with_overrides(&table("next_waiting = \"hyper-x\"")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[tui.keys] next_waiting = \"hyper-x\": unknown key name \"hyper-x\""
    );
    let err = Keymap::with_overrides(&table("toggle_inbox = \"f13\"")).unwrap_err();
    assert!(err.to_string().contains("toggle_inbox = \"f13\""), "{err}");
    let err = Keymap::with_overrides(&table("inbox = \"f2\"")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[tui.keys] inbox: no such action — did you mean toggle_inbox?"
    );
    let err = Keymap::with_overrides(&table("quit = 3")).unwrap_err();
    assert!(matches!(err, KeymapError::BadValue { ref action } if action == "quit"));
}
