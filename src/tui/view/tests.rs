//! Snapshot tests of every component and of the whole screen, drawn from the fixture.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::style::Modifier;

use super::*;
use crate::protocol::{EntryKind, Event};
use crate::tui::Action;
use crate::tui::fixture::{self, entry};
use crate::tui::model::Flash;

/// Draws with a drawing function and returns the screen as text.
fn draw(width: u16, height: u16, paint: impl FnOnce(&mut Frame)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(paint).unwrap();
    terminal.backend().to_string()
}

fn screen(model: &Model, width: u16, height: u16) -> String {
    draw(width, height, |f| {
        render(f, model, &mut ViewState::default(), &Theme::default())
    })
}

/// Draws as the runtime does: then tells the model how far the transcript can scroll.
fn screen_then_scroll_extent(model: &mut Model, width: u16, height: u16) -> String {
    let mut state = ViewState::default();
    let text = draw(width, height, |f| {
        render(f, model, &mut state, &Theme::default())
    });
    model.set_scroll_extent(state.scroll_extent());
    text
}

fn press(model: &mut Model, code: KeyCode, modifiers: KeyModifiers) {
    model.handle_key(KeyEvent::new(code, modifiers));
}

#[test]
fn whole_screen_120x30() {
    assert_snapshot!(screen(&fixture::model(), 120, 30));
}

#[test]
fn whole_screen_80x24() {
    assert_snapshot!(screen(&fixture::model(), 80, 24));
}

#[test]
fn whole_screen_80x24_with_an_opened_approval() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::F(2), KeyModifiers::NONE);
    press(&mut model, KeyCode::Enter, KeyModifiers::NONE);
    assert_snapshot!(screen(&model, 80, 24));
}

#[test]
fn whole_screen_120x30_with_context_pane_and_daemon_gone() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::F(3), KeyModifiers::NONE);
    model.set_connection(Connection::Lost {
        reason: "connection reset".into(),
    });
    let text = screen(&model, 120, 30);
    assert!(text.contains("daemon gone (connection reset) — reconnecting…"));
    assert!(text.contains("no context read yet"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn before_the_daemon_answers_the_layout_is_drawn_with_connecting() {
    let mut model = Model::new(crate::tui::Keymap::default());
    model.set_connection(Connection::Connecting);
    let text = screen(&model, 80, 24);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("connecting…"), "{text}");
    assert!(!text.contains("daemon gone"), "{text}");
    // The panes are drawn already, and nothing claims there are no sessions yet.
    assert!(text.contains("┌ transcript"), "{text}");
    assert!(text.contains("┌ inbox"), "{text}");
    assert!(text.contains("reading the sessions…"), "{text}");
    assert!(!text.contains("no sessions"), "{text}");
    model.set_connection(Connection::Connected);
    let text = screen(&model, 80, 24);
    assert!(!text.contains("connecting…"), "{text}");
    assert!(text.contains("no sessions — /new creates one"), "{text}");
}

#[test]
fn a_narrow_screen_gives_the_body_to_the_transcript_or_the_focused_inbox() {
    let mut model = fixture::model();
    let text = screen(&model, 60, 20);
    assert!(text.contains("[1] feat/auth @ claude"), "{text}");
    assert!(!text.contains("inbox ·"), "{text}");
    press(&mut model, KeyCode::F(2), KeyModifiers::NONE);
    assert_snapshot!(screen(&model, 60, 20));
}

#[test]
fn too_small() {
    let text = screen(&fixture::model(), 30, 6);
    assert!(text.contains("need at least 40×8, have 30×6"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn status_bar_at_three_widths() {
    let model = fixture::model();
    let bar = |width| {
        draw(width, 1, |f| {
            status_bar::render(f, f.area(), &model, &Theme::default())
        })
    };
    let wide = bar(120);
    assert!(wide.contains("▸[1] feat/auth/claude ●working"), "{wide}");
    assert!(wide.contains("![2] fix/flaky/codex ●waiting"), "{wide}");
    assert!(wide.contains("| 3 | /sessions"), "{wide}");
    let narrow = bar(40);
    assert!(
        narrow.contains("| 3 | /sessions"),
        "the tail always shows: {narrow}"
    );
    assert_snapshot!(format!("{wide}{}{narrow}", bar(80)));
}

#[test]
fn status_bar_keeps_the_focused_session_in_a_crowd() {
    let mut model = fixture::model();
    for n in 5..=14 {
        model.apply(Event::SessionRegistered(fixture::session(
            n,
            &format!("task-{n}"),
            "claude",
            None,
            "",
        )));
    }
    press(&mut model, KeyCode::Char('9'), KeyModifiers::ALT);
    model.handle_command(crate::tui::commands::SlashCommand::Goto(12));
    let bar = draw(40, 1, |f| {
        status_bar::render(f, f.area(), &model, &Theme::default())
    });
    assert!(bar.contains("▸[12]"), "{bar}");
    assert!(bar.contains('…'), "{bar}");
    assert_snapshot!(bar);
}

#[test]
fn status_bar_colours_come_from_the_theme() {
    let model = fixture::model();
    let theme = Theme::builtin("light").unwrap();
    let mut terminal = Terminal::new(TestBackend::new(120, 1)).unwrap();
    terminal
        .draw(|f| status_bar::render(f, f.area(), &model, &theme))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let text: String = buffer.content().iter().map(|c| c.symbol()).collect();
    let column = |needle: &str| {
        let byte = text.find(needle).unwrap();
        u16::try_from(text[..byte].chars().count()).unwrap()
    };
    let waiting = &buffer[(column("●waiting"), 0)];
    assert_eq!(waiting.fg, theme.color(Role::SessionWaiting));
    let flagged = &buffer[(column("![2]"), 0)];
    assert!(
        flagged.modifier.contains(Modifier::REVERSED),
        "flagged sessions stand out"
    );
    let focused = &buffer[(column("▸[1]"), 0)];
    assert_eq!(focused.fg, theme.color(Role::StatusBarFocused));
    assert_eq!(buffer[(0, 0)].bg, theme.color(Role::StatusBarBg));
}

#[test]
fn transcript_folds_thoughts_and_shows_tools_and_plans() {
    let model = fixture::model();
    let text = draw(60, 18, |f| {
        transcript::render(
            f,
            f.area(),
            &model,
            &mut WrapCache::default(),
            &Theme::default(),
        );
    });
    assert!(text.contains("▸ thought (3 lines)"), "{text}");
    assert!(text.contains("✓ Run cargo test (completed)"), "{text}");
    assert!(text.contains("◐ Add the middleware"), "{text}");
    assert!(
        text.contains("should the tokens be JWTs"),
        "streamed text shows: {text}"
    );
    assert_snapshot!(text);
}

#[test]
fn transcript_unfolded_and_scrolled() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::Char('t'), KeyModifiers::ALT);
    let paint = |model: &mut Model| {
        let mut extent = None;
        let text = draw(60, 10, |f| {
            extent = transcript::render(
                f,
                f.area(),
                model,
                &mut WrapCache::default(),
                &Theme::default(),
            );
        });
        model.set_scroll_extent(extent.unwrap_or_default());
        text
    };
    let tail = paint(&mut model);
    assert!(tail.contains("│cookies?"), "follows the tail: {tail}");
    press(&mut model, KeyCode::PageUp, KeyModifiers::NONE);
    let scrolled = paint(&mut model);
    assert!(scrolled.contains("The API uses axum."), "{scrolled}");
    assert!(scrolled.contains("more rows · pagedown"), "{scrolled}");
    assert_snapshot!(scrolled);
}

#[test]
fn transcript_shows_errors_permissions_and_turn_ends() {
    let mut model = fixture::model();
    let auth = fixture::sessions()[0].clone();
    model.load_transcript(
        &auth.id,
        vec![
            entry(&auth, 7, EntryKind::Permission, "Write src/auth.rs", None),
            entry(
                &auth,
                8,
                EntryKind::Permission,
                "Write src/auth.rs",
                Some("Allow"),
            ),
            entry(&auth, 9, EntryKind::File, "src/auth.rs", Some("write")),
            entry(
                &auth,
                10,
                EntryKind::Error,
                "the agent answered with an error: rate limited",
                None,
            ),
            entry(&auth, 11, EntryKind::TurnEnd, "", Some("end_turn")),
        ],
    );
    let text = draw(60, 12, |f| {
        transcript::render(
            f,
            f.area(),
            &model,
            &mut WrapCache::default(),
            &Theme::default(),
        );
    });
    assert!(
        text.contains("? permission asked: Write src/auth.rs"),
        "{text}"
    );
    assert!(
        text.contains("✗ the agent answered with an error"),
        "{text}"
    );
    assert!(
        !text.contains("Before I go on"),
        "the turn end settled the streamed text: {text}"
    );
    assert_snapshot!(text);
}

#[test]
fn input_with_an_inline_decision_and_a_flash() {
    let mut model = fixture::model();
    model.report(Flash::error("unknown command /nxt — did you mean /next?"));
    let theme = Theme::default();
    let text = draw(80, 8, |f| {
        let [item, input] = [Rect::new(0, 0, 80, 5), Rect::new(0, 5, 80, 3)];
        input::render_inline_item(f, item, &model, &theme);
        input::render(f, input, &model, &theme);
    });
    assert!(text.contains("[1] JWT  [2] Session cookies"), "{text}");
    assert!(text.contains("alt-a opens it, then 1-2"), "{text}");
    assert!(text.contains("did you mean /next?"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn inline_approval_of_the_focused_session() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::Char('2'), KeyModifiers::ALT);
    let text = draw(80, 5, |f| {
        input::render_inline_item(f, f.area(), &model, &Theme::default())
    });
    assert!(text.contains("approval required"), "{text}");
    assert!(text.contains("Run rm -rf build/"), "{text}");
    assert!(text.contains("a/d"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn inbox_list_marks_unread_and_selection() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::F(2), KeyModifiers::NONE);
    press(&mut model, KeyCode::Down, KeyModifiers::NONE);
    let text = draw(48, 9, |f| {
        inbox::render(f, f.area(), &model, &Theme::default())
    });
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].contains(" ●! [2] Run rm -rf build/"),
        "newest first, unread: {text}"
    );
    assert!(
        lines[2].contains("›●? [1] JWT or session cookies?"),
        "selected: {text}"
    );
    assert!(
        lines[5].contains("  i [3] Indexed 214 files"),
        "read, oldest last: {text}"
    );
    assert_snapshot!(text);
}

#[test]
fn inbox_opened_message_shows_its_detail() {
    let mut model = fixture::model();
    press(&mut model, KeyCode::F(2), KeyModifiers::NONE);
    press(&mut model, KeyCode::Down, KeyModifiers::NONE);
    press(&mut model, KeyCode::Enter, KeyModifiers::NONE);
    let text = draw(48, 16, |f| {
        inbox::render(f, f.area(), &model, &Theme::default())
    });
    assert!(text.contains("JWT keeps it"), "{text}");
    assert!(text.contains(" 2 Session cookies"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn help_overlay_lists_the_bindings_in_use() {
    let mut model = fixture::model();
    let table: toml::Table = "next_waiting = \"ctrl-n\"".parse().unwrap();
    model.set_keymap(crate::tui::Keymap::with_overrides(&table).unwrap());
    press(&mut model, KeyCode::F(1), KeyModifiers::NONE);
    let text = screen(&model, 80, 30);
    assert!(text.contains("ctrl-n"), "the override shows: {text}");
    assert!(text.contains("alt-1 … alt-9"), "{text}");
    assert_snapshot!(text);
    for _ in 0..3 {
        press(&mut model, KeyCode::PageDown, KeyModifiers::NONE);
    }
    let scrolled = screen(&model, 80, 30);
    assert!(
        scrolled.contains("/goto /g <n>"),
        "commands further down: {scrolled}"
    );
}

#[test]
fn sessions_overlay_lists_every_session() {
    let mut model = fixture::model();
    model.handle_command(crate::tui::commands::SlashCommand::Sessions);
    let text = screen(&model, 120, 30);
    assert!(text.contains("▸[1]  feat/auth @ claude"), "{text}");
    assert!(text.contains("1 open"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn an_empty_workbench_says_how_to_start() {
    let model = Model::new(crate::tui::Keymap::default());
    let text = screen(&model, 80, 24);
    assert!(text.contains("no sessions — /new creates one"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn a_click_on_the_status_bar_focuses_that_session_and_the_wheel_scrolls() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut model = fixture::model();
    let screen = Rect::new(0, 0, 120, 30);
    let text = self::screen(&model, 120, 30);
    let bar = text.lines().last().unwrap();
    let column = bar
        .find("[3] docs")
        .map(|b| bar[..b].chars().count())
        .unwrap();
    let mouse = |kind, column: usize, row| MouseEvent {
        kind,
        column: u16::try_from(column).unwrap(),
        row,
        modifiers: KeyModifiers::NONE,
    };
    // The bar's text is quoted in the snapshot form: one column for the quote.
    let actions = model.handle_mouse(
        mouse(MouseEventKind::Down(MouseButton::Left), column - 1, 29),
        screen,
    );
    assert_eq!(
        model.focused_session().map(|s| s.display_name.as_str()),
        Some("docs @ gemini")
    );
    assert!(matches!(
        &actions[..],
        [Action::Call(
            crate::protocol::methods::Request::SessionTranscript(_)
        )]
    ));
    // Back on session 1, the wheel scrolls its transcript up, as far as it goes.
    model.handle_key(KeyEvent::new(KeyCode::Char('1'), KeyModifiers::ALT));
    screen_then_scroll_extent(&mut model, 80, 16);
    model.handle_mouse(
        mouse(MouseEventKind::ScrollUp, 5, 3),
        Rect::new(0, 0, 80, 16),
    );
    assert_eq!(model.transcripts.scroll, 3);
}

#[test]
fn context_pane_shows_the_stack_top_first_with_checkpoints_and_the_last_change() {
    use crate::context::{ContextStack, Message};
    use crate::protocol::ContextResult;

    let mut model = fixture::model();
    let focused = model
        .focused_session()
        .expect("a focused session")
        .id
        .clone();
    let mut stack = ContextStack::new("ACP agent claude working in feat/auth");
    stack
        .push(Message::Human {
            text: "Add JWT auth to the API".into(),
        })
        .unwrap();
    stack.checkpoint("before-refactor").unwrap();
    stack
        .push(Message::Agent {
            text: "I'll add a JWT middleware.\nFirst, the tests.".into(),
        })
        .unwrap();
    let change = stack.pop(1).unwrap();
    model.handle_command(crate::tui::commands::parse("/context").unwrap());
    model.load_context(ContextResult {
        session_id: focused,
        stack,
        fresh_start: true,
        description: Some(change.to_string()),
        change: Some(change),
    });
    let text = screen(&model, 120, 30);
    assert!(text.contains("⚑ before-refactor"), "{text}");
    assert!(text.contains("last: pop 1"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn audit_overlay_shows_the_focused_sessions_log_and_contained_sessions_their_driver() {
    use crate::protocol::audit::{AuditEvent, AuditRecord};
    use crate::protocol::{AuditLog, Confinement, DriverSpec};
    let mut model = fixture::model();
    let focused = model.focused_session().unwrap().id.clone();
    for c in "/audit".chars() {
        press(&mut model, KeyCode::Char(c), KeyModifiers::NONE);
    }
    let actions = model.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(
        actions,
        vec![Action::on_session(
            crate::protocol::methods::Request::SessionAudit,
            focused.clone()
        )]
    );
    let record = |event| AuditRecord {
        at: "2026-11-23T08:00:01.000Z".into(),
        session_id: focused.clone(),
        event,
    };
    model.show_audit(AuditLog {
        session_id: focused.clone(),
        records: vec![
            record(AuditEvent::Start {
                driver: "sandbox".into(),
                mounts: vec![],
                network: "none".into(),
                limits: vec!["memory 128 MiB (cgroup v1)".into()],
                env: vec!["API_KEY".into()],
            }),
            record(AuditEvent::FileWrite {
                path: "/etc/passwd".into(),
                allowed: false,
                reason: Some("outside the worktree".into()),
            }),
        ],
    });
    let shown = screen(&model, 120, 30);
    assert!(
        shown.contains("08:00:01 start: driver sandbox; network none; memory 128 MiB"),
        "{shown}"
    );
    assert!(
        shown.contains("file write: /etc/passwd (refused: outside the worktree)"),
        "{shown}"
    );
    assert!(shown.contains("env API_KEY"), "{shown}");

    // The sessions overlay says where a contained session runs.
    let mut model = fixture::model();
    model.sessions[0].driver = Some(DriverSpec::Sandbox(Confinement {
        memory: Some(128),
        ..Default::default()
    }));
    model.sessions[0].limits = vec!["memory 128 MiB (cgroup v1)".into()];
    model.overlay = Some(crate::tui::model::Overlay::Sessions { selected: 0 });
    let shown = screen(&model, 120, 30);
    assert!(
        shown.contains("driver sandbox (network none, memory 128 MiB)"),
        "{shown}"
    );
}

#[test]
fn the_sessions_overlay_asks_what_each_agent_costs_and_shows_it() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut model = fixture::model();
    let actions = model.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT));
    assert_eq!(
        model.overlay,
        Some(crate::tui::model::Overlay::Sessions { selected: 0 })
    );
    assert!(
        matches!(
            &actions[..],
            [crate::tui::Action::Call(crate::protocol::methods::Request::SessionList(p))] if p.resources
        ),
        "{actions:?}"
    );
    let mut listed = model.sessions.clone();
    listed[0].resources = Some(crate::protocol::Resources {
        cpu_secs: 12.44,
        rss_bytes: 245 * 1024 * 1024,
        processes: 3,
    });
    model.set_resources(&listed);
    let shown = screen(&model, 120, 30);
    assert!(
        shown.contains("machine: 12.4 s CPU · 245 MB resident · 3 process(es)"),
        "{shown}"
    );
}

#[test]
fn an_empty_workbench_names_the_agents_it_can_start() {
    let mut model = Model::new(crate::tui::Keymap::default());
    let text = screen(&model, 160, 24);
    assert!(text.contains("no agent found"), "{text}");
    model.set_agents(vec!["claude".into()]);
    let text = screen(&model, 160, 24);
    assert!(text.contains("/new <task> starts claude"), "{text}");
    model.set_agents(vec!["claude".into(), "codex".into()]);
    let text = screen(&model, 160, 24);
    assert!(text.contains("agents: claude, codex"), "{text}");
}

#[test]
fn slash_help_opens_on_the_commands_and_f1_on_the_keys() {
    let mut model = fixture::model();
    model.handle_command(crate::tui::commands::SlashCommand::Help);
    let text = screen(&model, 80, 30);
    assert!(text.contains("/goto /g <n>"), "commands first: {text}");
    assert!(!text.contains("alt-1 … alt-9"), "keys further down: {text}");
    model.handle_command(crate::tui::commands::SlashCommand::Help);
    assert_eq!(model.overlay, None, "/help again closes it");
    press(&mut model, KeyCode::F(1), KeyModifiers::NONE);
    let text = screen(&model, 80, 30);
    assert!(text.contains("alt-1 … alt-9"), "keys first: {text}");
    assert!(!text.contains("/goto /g <n>"), "{text}");
}

#[test]
fn the_conflict_radar_marks_both_sessions_in_the_bar_and_the_list() {
    use crate::protocol::{ConflictPair, ConflictReport, Overlap};
    let mut model = fixture::model();
    let ids: Vec<String> = model.sessions().iter().map(|s| s.id.clone()).collect();
    model.set_conflicts(ConflictReport {
        pairs: vec![ConflictPair {
            a: ids[0].clone(),
            b: ids[2].clone(),
            files: vec![Overlap {
                path: "src/auth.rs".into(),
                lines: vec![(10, 12)],
            }],
        }],
    });
    let text = screen(&model, 160, 30);
    let bar = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(bar.contains("[1]⚠") && bar.contains("[3]⚠"), "{bar}");
    assert!(!bar.contains("[2]⚠"), "{bar}");
    model.handle_command(crate::tui::commands::SlashCommand::Sessions);
    let text = screen(&model, 160, 30);
    assert!(
        text.contains("⚠ changes the same files as [3] (same lines)"),
        "{text}"
    );
}

#[test]
fn usage_cost_and_a_stall_show_in_the_title_and_the_bar() {
    use crate::protocol::{Event, SessionState, Usage};
    let mut model = fixture::model();
    let mut first = model.sessions()[0].clone();
    first.state = Some(SessionState::Working);
    first.usage = Some(Usage {
        used: 48_200,
        size: 200_000,
        cost: Some(0.42),
        currency: Some("USD".into()),
    });
    // What it spent today, as the budget counts it, is the bar's usage line.
    let mut spent = crate::protocol::Spent::default();
    spent.days.insert(
        chrono::Utc::now().format("%Y-%m-%d").to_string(),
        crate::protocol::DaySpent {
            tokens: Some(12_345),
            cost: Some(0.42),
        },
    );
    spent.days.insert(
        "2020-01-01".into(),
        crate::protocol::DaySpent {
            tokens: Some(999_999),
            cost: Some(9.0),
        },
    );
    first.spent = Some(spent);
    let id = first.id.clone();
    model.apply(Event::SessionUpdated(first));
    model.handle_key(crossterm::event::KeyEvent::new(
        KeyCode::Char('1'),
        KeyModifiers::ALT,
    ));
    model.quiet.since.insert(
        id,
        std::time::Instant::now() - std::time::Duration::from_secs(125),
    );
    let text = screen(&model, 180, 30);
    assert!(text.contains("48k/200k tokens · $0.42"), "{text}");
    assert!(text.contains("quiet 2m"), "{text}");
    let bar = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(bar.contains("today $0.42 · 12k tok |"), "{bar}");
    assert!(bar.contains("●working quiet 2m"), "{bar}");
}

#[test]
fn sessions_a_channel_started_carry_its_mark_in_the_bar_and_the_list() {
    use crate::protocol::{ChannelTag, Event, Resolution};
    let mut model = fixture::model();
    let mut second = model.sessions()[1].clone();
    second.channel = Some(ChannelTag {
        kind: "webhook".into(),
        source: "issues".into(),
        reference: "42".into(),
        reason: Resolution::Continue,
        last_message_at: "2026-01-01T00:00:00Z".into(),
        closed: false,
        approval_target: None,
        own_bot: false,
    });
    let mut third = model.sessions()[2].clone();
    third.channel = Some(ChannelTag {
        kind: "cron".into(),
        source: "nightly".into(),
        reference: String::new(),
        reason: Resolution::Scheduled,
        last_message_at: "2026-01-01T00:00:00Z".into(),
        closed: false,
        approval_target: None,
        own_bot: false,
    });
    model.apply(Event::SessionUpdated(second));
    model.apply(Event::SessionUpdated(third));
    let text = screen(&model, 160, 30);
    let bar = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(bar.contains("[2]↯") && bar.contains("[3]◷"), "{bar}");
    assert!(!bar.contains("[1]↯") && !bar.contains("[1]◷"), "{bar}");
    model.handle_command(crate::tui::commands::SlashCommand::Sessions);
    let text = screen(&model, 160, 30);
    assert!(text.contains("↯ webhook issues/42 (continue)"), "{text}");
    assert!(text.contains("◷ cron nightly (scheduled)"), "{text}");
}

#[test]
fn a_transcript_wrapped_over_many_frames_draws_as_one_wrapped_afresh() {
    let mut model = fixture::model();
    let session = model.focused_session().unwrap().clone();
    // Draws with the lines kept from earlier frames, then with nothing kept: the same.
    let mut kept_state = ViewState::default();
    let mut check = |model: &Model, width: u16, what: &str| {
        let kept = draw(width, 30, |f| {
            render(f, model, &mut kept_state, &Theme::default())
        });
        let fresh = screen(model, width, 30);
        assert_eq!(kept, fresh, "after {what}");
    };
    check(&model, 120, "the first frame");
    let mut seq = 100;
    let mut next = |kind, text: &str, status| {
        seq += 1;
        Event::Transcript(entry(&session, seq, kind, text, status))
    };
    // New entries, a tool call whose status changes later, text still streaming.
    model.apply(next(EntryKind::Prompt, "Now the refresh tokens", None));
    model.apply(next(
        EntryKind::ToolCall,
        "Run cargo test",
        Some("in_progress"),
    ));
    check(&model, 120, "a prompt and a running tool call");
    let mut update = entry(
        &session,
        103,
        EntryKind::ToolUpdate,
        "Run cargo test",
        Some("failed"),
    );
    update.tool_call_id = Some("call-102".into());
    model.apply(Event::Transcript(update));
    let text = screen(&model, 120, 30);
    assert!(text.contains("Run cargo test (failed)"), "{text}");
    check(&model, 120, "the tool call's update");
    model.apply(Event::Output(crate::protocol::OutputChunk {
        session_id: session.id.clone(),
        kind: EntryKind::Message,
        text: "streaming a long line that wraps at the narrower width and beyond it".into(),
    }));
    check(&model, 120, "streamed text");
    // Another width, thoughts unfolded.
    check(&model, 60, "a narrower pane");
    press(&mut model, KeyCode::Char('t'), KeyModifiers::ALT);
    check(&model, 60, "unfolded thoughts");
    // Past the cap, the oldest entries go: the prompt that is now first loses its gap.
    for i in 0..crate::tui::TRANSCRIPT_CAP {
        let kind = if i % 7 == 0 {
            EntryKind::Prompt
        } else {
            EntryKind::Message
        };
        model.apply(next(kind, &format!("line {i}"), None));
        if i % 500 == 0 {
            check(&model, 60, "entries streaming in");
        }
    }
    check(&model, 60, "entries past the cap");
}

#[test]
fn a_session_on_another_host_says_where_and_an_unreachable_server_is_a_banner() {
    use crate::protocol::StoreHealth;
    let mut model = fixture::model();
    let mut session = model.focused_session().cloned().expect("a focused session");
    session.host = Some("build-server".into());
    model.apply(Event::SessionUpdated(session));
    let text = screen(&model, 120, 30);
    assert!(text.contains("· on build-server"), "{text}");
    assert!(!text.contains("unreachable"), "{text}");

    model.apply(Event::Store(StoreHealth {
        connected: false,
        error: Some("Connection reset".into()),
        damaged: Vec::new(),
        rebuilt: Vec::new(),
    }));
    let text = screen(&model, 120, 30);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("database server unreachable (Connection reset)"),
        "{text}"
    );
    model.apply(Event::Store(StoreHealth {
        connected: true,
        error: None,
        damaged: Vec::new(),
        rebuilt: Vec::new(),
    }));
    assert!(!screen(&model, 120, 30).contains("unreachable"));

    // Damage the daemon found in its database is a banner too, until it is repaired.
    model.apply(Event::Store(StoreHealth {
        connected: true,
        error: None,
        damaged: vec![
            "inbox_messages: unreadable records after 01A".into(),
            "x".into(),
        ],
        rebuilt: Vec::new(),
    }));
    let text = screen(&model, 160, 30);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(
            "database damaged: inbox_messages: unreadable records after 01A (and 1 more)"
        ) && first.contains("cru daemon repair"),
        "{text}"
    );
    model.apply(Event::Store(StoreHealth {
        connected: true,
        error: None,
        damaged: Vec::new(),
        rebuilt: Vec::new(),
    }));
    assert!(!screen(&model, 160, 30).contains("damaged"));

    // A database the daemon rebuilt as it started is said, with where to read what was
    // lost, and not as damage to repair.
    model.apply(Event::Store(StoreHealth {
        connected: true,
        error: None,
        damaged: Vec::new(),
        rebuilt: vec!["the engine's catalog did not read back".into(), "y".into()],
    }));
    let text = screen(&model, 200, 30);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("database rebuilt as the daemon started: the engine's catalog")
            && first.contains("cru daemon status")
            && !first.contains("cru daemon repair"),
        "{text}"
    );
}

#[test]
fn settings_that_do_not_load_are_a_banner_until_they_do() {
    let mut model = fixture::model();
    assert!(!screen(&model, 120, 30).contains("settings:"));
    model.set_settings_error(Some(
        ".crucible.toml, line 3, column 1: unknown field `comand`".into(),
    ));
    let text = screen(&model, 120, 30);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(
            "settings: .crucible.toml, line 3, column 1: unknown field `comand` — the last good ones stay in use"
        ),
        "{text}"
    );
    // The daemon gone says more: it takes the one line.
    model.set_connection(Connection::Lost {
        reason: "no daemon".into(),
    });
    let first = screen(&model, 120, 30)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(first.contains("daemon gone (no daemon)"), "{first}");
    model.set_connection(Connection::Connected);
    model.set_settings_error(None);
    assert!(!screen(&model, 120, 30).contains("settings:"));
}
