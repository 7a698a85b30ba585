//! The workbench with a thousand sessions: the status bar shows a window around the
//! focused session and every waiting one, and the sessions overlay finds a session by
//! what is typed and draws only what fits.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::protocol::SessionState;
use crate::tui::fixture;
use crate::tui::keymap::Keymap;
use crate::tui::model::{Model, Overlay};
use crate::tui::theme::Theme;
use crate::tui::view::{ViewState, render};

const FLEET: u32 = 1000;

/// A thousand sessions: `feat/s{n}`, idle but for #500 waiting and every 100th working.
fn fleet() -> Model {
    let sessions = (1..=FLEET)
        .map(|n| {
            let state = match n {
                500 => SessionState::Waiting,
                n if n.is_multiple_of(100) => SessionState::Working,
                _ => SessionState::Complete,
            };
            let agent = if n.is_multiple_of(2) {
                "codex"
            } else {
                "claude"
            };
            let mut session = fixture::session(
                n,
                &format!("feat/s{n}"),
                agent,
                Some(state),
                &format!("task {n}"),
            );
            session.started_at = format!("2026-11-02T09:00:00.{n:04}Z");
            session
        })
        .collect();
    let mut model = Model::new(Keymap::default());
    model.sync(sessions, Vec::new());
    model
}

fn screen(model: &Model, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| render(f, model, &mut ViewState::default(), &Theme::default()))
        .unwrap();
    terminal.backend().to_string()
}

fn typed(model: &mut Model, text: &str) {
    for c in text.chars() {
        model.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

fn press(model: &mut Model, code: KeyCode) {
    model.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn focused_name(model: &Model) -> String {
    model.focused_session().unwrap().display_name.clone()
}

#[test]
fn the_status_bar_shows_a_window_around_the_focused_session_and_the_waiting_one() {
    let mut model = fleet();
    model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    typed(&mut model, "feat/s737 ");
    press(&mut model, KeyCode::Enter);
    assert_eq!(focused_name(&model), "feat/s737 @ claude");
    let shown = screen(&model, 160, 30);
    let bar = shown.lines().last().unwrap();
    assert!(bar.contains("▸[737]"), "{bar}");
    assert!(bar.contains("[736]") && bar.contains("[738]"), "{bar}");
    assert!(!bar.contains("[1]"), "{bar}");
    // The waiting session is named however far from the window it is.
    assert!(
        bar.contains("waiting: ![500]") || bar.contains("[500] feat/s500"),
        "{bar}"
    );
}

#[test]
fn the_sessions_overlay_filters_as_you_type_and_draws_only_what_fits() {
    let mut model = fleet();
    model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    let all = screen(&model, 120, 30);
    assert!(
        all.contains("sessions · 1000 · 9 working · 1 waiting"),
        "{all}"
    );
    assert!(all.contains("[1]") && all.contains("[20]"), "{all}");
    assert!(!all.contains("[999]"), "{all}");

    // Words of the name and the state: the waiting one.
    typed(&mut model, "WAITING feat");
    assert_eq!(model.picked(), vec![499]);
    let found = screen(&model, 120, 30);
    assert!(found.contains("filter: WAITING feat"), "{found}");
    assert!(found.contains("1 of 1000"), "{found}");
    assert!(found.contains("[500]  feat/s500 @ codex"), "{found}");
    for _ in 0.."WAITING feat".len() {
        press(&mut model, KeyCode::Backspace);
    }

    // A number ranks its session first; the others that hold it follow.
    typed(&mut model, "42");
    let picked = model.picked();
    assert_eq!(picked[0], 41);
    assert!(picked.contains(&419) && picked.contains(&941), "{picked:?}");
    assert_eq!(model.overlay, Some(Overlay::Sessions { selected: 0 }));
    // Down twice: the third kept session; Enter focuses it and closes.
    press(&mut model, KeyCode::Down);
    press(&mut model, KeyCode::Down);
    let chosen = model.picked()[2];
    let drawn = screen(&model, 120, 30);
    assert!(
        drawn.contains(&format!("›[{}]", chosen + 1)),
        "the chosen row is marked: {drawn}"
    );
    press(&mut model, KeyCode::Enter);
    assert_eq!(model.overlay, None);
    assert_eq!(
        focused_name(&model),
        format!(
            "feat/s{} @ {}",
            chosen + 1,
            if (chosen + 1).is_multiple_of(2) {
                "codex"
            } else {
                "claude"
            }
        )
    );
    assert_eq!(model.input.text(), "", "nothing typed reached the prompt");
}

#[test]
fn a_number_no_other_starts_with_focuses_at_once_and_a_miss_stays_open() {
    let mut model = fleet();
    model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    // 1000 is the only number that starts with "1000"; "100" also starts 1000.
    typed(&mut model, "100");
    assert!(model.overlay.is_some());
    typed(&mut model, "0");
    assert_eq!(model.overlay, None);
    assert_eq!(focused_name(&model), "feat/s1000 @ codex");

    model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    typed(&mut model, "no such session");
    assert!(model.picked().is_empty());
    press(&mut model, KeyCode::Enter);
    assert!(model.overlay.is_some(), "nothing to focus: it stays open");
    assert!(screen(&model, 120, 30).contains("none matches"));
    press(&mut model, KeyCode::Esc);
    assert_eq!(model.overlay, None);
    assert_eq!(focused_name(&model), "feat/s1000 @ codex");
    // Opened again, the filter is empty.
    model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    assert_eq!(model.picked().len(), 1000);
}
