//! The agent's Markdown as the transcript draws it: styles, marks dropped, lists, quotes,
//! links, code blocks kept whole, and wrapping by display width.

use insta::assert_snapshot;
use ratatui::style::Modifier;
use ratatui::text::Line;

use super::lines;
use crate::tui::theme::{Role, Theme};
use crate::tui::view::text::wrap;

fn text_of(line: &Line) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

fn drawn(markdown: &str, max: usize) -> Vec<String> {
    lines(markdown, max, &Theme::default())
        .iter()
        .map(text_of)
        .collect()
}

/// The style of the first span whose text is `piece`.
fn style_of(markdown: &str, piece: &str) -> ratatui::style::Style {
    lines(markdown, 80, &Theme::default())
        .iter()
        .flat_map(|l| l.spans.clone())
        .find(|s| s.content == piece)
        .unwrap_or_else(|| panic!("no span {piece:?} in {:?}", drawn(markdown, 80)))
        .style
}

#[test]
fn plain_prose_wraps_as_before() {
    let text = "I'll add a JWT middleware and protect the /api routes. First, the current tests:";
    for max in [1, 7, 20, 33, 80] {
        assert_eq!(drawn(text, max), wrap(text, max), "at {max} columns");
    }
    assert_eq!(drawn("one\ntwo\n\nthree", 20), ["one", "two", "", "three"]);
    assert_eq!(drawn("", 20), [""]);
}

#[test]
fn emphasis_strong_and_code_are_styled_without_their_marks() {
    let text = "a *soft* and **loud** word, `cargo test`, ~~gone~~";
    assert_eq!(drawn(text, 80), ["a soft and loud word, cargo test, gone"]);
    let theme = Theme::default();
    assert!(
        style_of(text, "soft")
            .add_modifier
            .contains(Modifier::ITALIC)
    );
    assert!(style_of(text, "loud").add_modifier.contains(Modifier::BOLD));
    assert!(
        !style_of(text, "loud")
            .add_modifier
            .contains(Modifier::ITALIC)
    );
    assert_eq!(
        style_of(text, "cargo test").fg,
        theme.style(Role::DiffHunk).fg
    );
    assert_ne!(theme.style(Role::DiffHunk).fg, theme.style(Role::Text).fg);
    assert!(
        style_of(text, "gone")
            .add_modifier
            .contains(Modifier::CROSSED_OUT)
    );
}

#[test]
fn headings_are_bold_without_their_hashes() {
    assert_eq!(drawn("## Plan\nthen text", 40), ["Plan", "", "then text"]);
    assert!(
        style_of("### Plan", "Plan")
            .add_modifier
            .contains(Modifier::BOLD)
    );
}

#[test]
fn lists_have_bullets_numbers_and_nest_under_their_text() {
    let text = "- one\n- two is long enough to wrap\n  - inner\n- three\n\n3. third\n4. fourth";
    assert_eq!(
        drawn(text, 16),
        [
            "• one",
            "• two is long",
            "  enough to wrap",
            "  • inner",
            "• three",
            "",
            "3. third",
            "4. fourth",
        ]
    );
}

#[test]
fn code_blocks_are_indented_and_never_wrapped() {
    let long = "let x = some_function_with_a_long_name(argument_one, argument_two);";
    let text = format!("Run:\n\n```rust\n{long}\n\tindented()\n```\nafter");
    let rows = drawn(&text, 20);
    assert_eq!(
        rows,
        [
            "Run:".to_string(),
            String::new(),
            format!("  {long}"),
            "      indented()".to_string(),
            String::new(),
            "after".to_string(),
        ]
    );
    let code = Theme::default().style(Role::DiffHunk).fg;
    let drawn_lines = lines(&text, 20, &Theme::default());
    assert_eq!(drawn_lines[2].spans.last().and_then(|s| s.style.fg), code);
}

#[test]
fn links_show_their_address_dim_unless_it_is_their_text() {
    let text =
        "see [the docs](https://example.com/docs) or <https://example.com> or <me@example.com>";
    assert_eq!(
        drawn(text, 200),
        ["see the docs (https://example.com/docs) or https://example.com or me@example.com"]
    );
    let theme = Theme::default();
    assert_eq!(
        style_of(text, " (https://example.com/docs)").fg,
        theme.style(Role::TextDim).fg
    );
    assert!(
        style_of(text, "the docs")
            .add_modifier
            .contains(Modifier::UNDERLINED)
    );
}

#[test]
fn quotes_are_marked_on_every_line() {
    assert_eq!(
        drawn("> quoted words that wrap\n>\n> again\n\nafter", 14),
        ["│ quoted words", "│ that wrap", "│", "│ again", "", "after"]
    );
}

#[test]
fn wrapping_counts_display_columns() {
    // Each of these characters takes two columns.
    let rows = drawn("**漢字漢字漢字** 漢字", 8);
    assert_eq!(rows, ["漢字漢字", "漢字", "漢字"]);
    for row in lines("- 漢字漢字漢字漢字漢字", 9, &Theme::default()) {
        assert!(row.width() <= 9, "{:?}", text_of(&row));
    }
}

#[test]
fn raw_html_and_unclosed_marks_stay_text() {
    assert_eq!(
        drawn("<script>alert(1)</script> and **open", 80),
        ["<script>alert(1)</script> and **open"]
    );
}

#[test]
fn an_agent_answer_in_markdown() {
    let text = "## What changed\n\nThe middleware checks **every** request:\n\n\
        1. it reads the `Authorization` header\n2. it verifies the token; an *expired* one \
        gets 401\n   - see [RFC 6750](https://www.rfc-editor.org/rfc/rfc6750)\n\n\
        ```rust\nlet claims = verify(&token)?;\n```\n\n> Tests: 14 passed\n\n---\nDone.";
    assert_snapshot!(drawn(text, 44).join("\n"));
}

#[test]
fn the_pane_draws_only_the_agent_prose_from_markdown() {
    use crate::protocol::{EntryKind, Event};
    use crate::tui::fixture::{self, entry};
    use crate::tui::view::transcript::{self, WrapCache};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let mut model = fixture::model();
    let session = model.focused_session().cloned().expect("a focused session");
    let said = [
        (EntryKind::Prompt, "make **this** `verbatim`", None),
        (EntryKind::ToolCall, "Run `grep **x**`", Some("completed")),
        (
            EntryKind::Message,
            "## Done\n\nIt is **fixed**:\n\n- `cargo test` passes",
            None,
        ),
    ];
    for (i, (kind, text, status)) in said.into_iter().enumerate() {
        model.apply(Event::Transcript(entry(
            &session,
            100 + i as u64,
            kind,
            text,
            status,
        )));
    }
    let mut terminal = Terminal::new(TestBackend::new(50, 30)).unwrap();
    let mut cache = WrapCache::default();
    terminal
        .draw(|f| {
            transcript::render(f, f.area(), &model, &mut cache, &Theme::default());
        })
        .unwrap();
    let screen = terminal.backend().to_string();
    assert!(screen.contains("› make **this** `verbatim`"), "{screen}");
    assert!(screen.contains("Run `grep **x**` (completed)"), "{screen}");
    assert!(screen.contains("│Done "), "{screen}");
    assert!(screen.contains("│It is fixed: "), "{screen}");
    assert!(screen.contains("│• cargo test passes "), "{screen}");
    assert!(!screen.contains("## Done"), "{screen}");
}
