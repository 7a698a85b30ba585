use proptest::prelude::*;

use super::*;
use crate::context::stack::ContextStack;

const LABELS: [&str; 5] = [
    "GOAL: ",
    "ENTITIES: ",
    "DECISIONS: ",
    "PENDING: ",
    "TURNS: ",
];

fn stack(messages: Vec<Message>) -> ContextStack {
    let mut s = ContextStack::new("You may read src/secret.rs");
    for m in messages {
        s.push(m).unwrap();
    }
    s
}

fn human(text: &str) -> Message {
    Message::Human { text: text.into() }
}

fn agent(text: &str) -> Message {
    Message::Agent { text: text.into() }
}

fn line<'a>(summary: &'a str, label: &str) -> &'a str {
    summary
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in {summary:?}"))
}

#[test]
fn empty_conversation_says_none() {
    assert_eq!(
        fallback_summary(stack(vec![]).entries()),
        "GOAL: none\nENTITIES: none\nDECISIONS: none\nPENDING: none\nTURNS: 0"
    );
}

#[test]
fn a_conversation_fills_every_field() {
    let s = stack(vec![
        human("Fix the auth bug in src/auth.rs; see https://example.com/issue/7"),
        agent("I found it in `validate_token`. Should I use JWT or session cookies?"),
        human("Use JWT"),
        agent("I'll switch AuthService to JWT. Running the tests now."),
        Message::ToolCall {
            call_id: "c9".into(),
            tool: "run_command".into(),
            arguments: r#"{"command":"cargo test","cwd":"crates/auth"}"#.into(),
        },
    ]);
    let summary = fallback_summary(s.entries());
    assert_eq!(
        line(&summary, "GOAL: "),
        "Fix the auth bug in src/auth.rs; see https://example.com/issue/7"
    );
    assert_eq!(
        line(&summary, "ENTITIES: "),
        "src/auth.rs, https://example.com/issue/7, validate_token, AuthService, crates/auth"
    );
    assert_eq!(
        line(&summary, "DECISIONS: "),
        "Use JWT, I'll switch AuthService to JWT."
    );
    assert_eq!(line(&summary, "PENDING: "), "result of run_command (c9)");
    assert_eq!(line(&summary, "TURNS: "), "2");
}

#[test]
fn an_unanswered_human_message_and_agent_questions_are_pending() {
    let s = stack(vec![human("Task one"), human("And what about\nthe docs?")]);
    let summary = fallback_summary(s.entries());
    assert_eq!(
        line(&summary, "PENDING: "),
        "answer: And what about the docs?"
    );
    let s = stack(vec![
        human("Task"),
        agent("Done with part one. Which database? Postgres or SQLite?"),
    ]);
    assert_eq!(
        line(&fallback_summary(s.entries()), "PENDING: "),
        "Which database?, Postgres or SQLite?"
    );
}

#[test]
fn tool_results_and_the_system_prompt_give_no_entities() {
    let s = stack(vec![
        human("hello there"),
        Message::ToolResult {
            call_id: "c1".into(),
            tool: "read_file".into(),
            ok: true,
            text: "mod noise_file; use other/path.rs;".into(),
        },
    ]);
    assert_eq!(line(&fallback_summary(s.entries()), "ENTITIES: "), "none");
}

#[test]
fn an_earlier_summary_carries_its_goal_entities_decisions_and_turns() {
    let mut s = stack(vec![human("Refactor src/db.rs"), human("Keep the API")]);
    s.summarize(fallback_summary(s.entries())).unwrap();
    s.push(human("Now add tests for db_pool")).unwrap();
    let summary = fallback_summary(s.entries());
    assert_eq!(line(&summary, "GOAL: "), "Refactor src/db.rs");
    assert_eq!(line(&summary, "ENTITIES: "), "src/db.rs, db_pool");
    assert_eq!(
        line(&summary, "DECISIONS: "),
        "Keep the API, Now add tests for db_pool"
    );
    assert_eq!(line(&summary, "TURNS: "), "3");
}

#[test]
fn a_free_form_summary_counts_as_a_decision() {
    let mut s = stack(vec![human("Goal here"), agent("x")]);
    s.replace_top("edit failed: lib.rs is read-only").unwrap();
    let summary = fallback_summary(s.entries());
    assert_eq!(
        line(&summary, "DECISIONS: "),
        "edit failed: lib.rs is read-only"
    );
    assert_eq!(line(&summary, "ENTITIES: "), "lib.rs");
}

#[test]
fn long_fields_are_cut_with_an_ellipsis() {
    let goal = "word ".repeat(100);
    let mut messages = vec![human(&goal)];
    messages.extend((0..40).map(|i| human(&format!("decision number {i} about things"))));
    messages.extend((0..60).map(|i| agent(&format!("see file_{i}.rs"))));
    let summary = fallback_summary(stack(messages).entries());
    let goal_line = line(&summary, "GOAL: ");
    assert!(goal_line.ends_with('…'), "{goal_line}");
    assert!(goal_line.chars().count() <= 200);
    let entities = line(&summary, "ENTITIES: ");
    assert!(entities.starts_with("file_0.rs, file_1.rs"), "{entities}");
    assert!(entities.ends_with(", …"), "{entities}");
    let decisions = line(&summary, "DECISIONS: ");
    assert!(decisions.starts_with("…, "), "{decisions}");
    assert!(
        decisions.ends_with("decision number 39 about things"),
        "{decisions}"
    );
    assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
}

#[test]
fn clamp_cuts_a_model_summary_to_the_limit() {
    let long = "é".repeat(1500);
    let clamped = clamp_summary(&long);
    assert_eq!(clamped.chars().count(), MAX_SUMMARY_CHARS);
    assert!(clamped.ends_with('…'));
    assert_eq!(clamp_summary("  GOAL: x\n"), "GOAL: x");
}

/// Text of any characters (newlines, controls, wide and combining ones), sometimes long.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(any::<char>(), 0..40).prop_map(String::from_iter),
        1 => prop::collection::vec(any::<char>(), 0..3000).prop_map(String::from_iter),
        // Words the summary looks for, so its every branch runs.
        3 => prop::collection::vec(
            prop::sample::select(vec![
                "src/a.rs", "I'll", "do", "it.", "why?", "`x`", "GOAL:", "TURNS: 18446744073709551615",
                "\n", "ENTITIES: a, b", "none", "…", "https://e.x/y", "a::b", "Let's", "snake_case",
            ]),
            0..60,
        )
        .prop_map(|words| words.join(" ")),
    ]
}

fn any_message() -> impl Strategy<Value = Message> {
    (0..5u8, any_text(), any_text(), any::<bool>()).prop_map(|(kind, a, b, ok)| match kind {
        0 => Message::Human { text: a },
        1 => Message::Agent { text: a },
        2 => Message::ToolCall {
            call_id: b,
            tool: "t".into(),
            arguments: a,
        },
        3 => Message::ToolResult {
            call_id: b,
            tool: "t".into(),
            ok,
            text: a,
        },
        _ => Message::Summary { text: a },
    })
}

proptest! {
    #[test]
    fn any_stack_gives_five_labelled_lines_within_the_limit(
        messages in prop::collection::vec(any_message(), 0..80)
    ) {
        let s = stack(messages);
        let summary = fallback_summary(s.entries());
        prop_assert!(summary.chars().count() <= MAX_SUMMARY_CHARS, "{} chars", summary.chars().count());
        let lines: Vec<&str> = summary.split('\n').collect();
        prop_assert_eq!(lines.len(), 5, "{:?}", summary);
        for (line, label) in lines.iter().zip(LABELS) {
            prop_assert!(line.starts_with(label), "{:?} lacks {:?}", line, label);
            prop_assert!(!line.contains(['\r', '\u{2028}', '\u{85}']), "{:?}", line);
        }
        prop_assert!(lines[4]["TURNS: ".len()..].parse::<u64>().is_ok());
        // Deterministic: the same entries (even restamped) give the same summary.
        let again = stack(s.entries()[1..].iter().map(|e| e.message.clone()).collect());
        prop_assert_eq!(fallback_summary(again.entries()), summary);
    }

    #[test]
    fn summarising_a_summary_stays_within_the_limit(
        messages in prop::collection::vec(any_message(), 1..40),
        more in prop::collection::vec(any_message(), 0..40),
    ) {
        let mut s = stack(messages);
        s.summarize(fallback_summary(s.entries())).unwrap();
        for m in more {
            s.push(m).unwrap();
        }
        let summary = fallback_summary(s.entries());
        prop_assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
        prop_assert_eq!(summary.split('\n').count(), 5);
    }
}

#[test]
fn turns_saturate_instead_of_overflowing() {
    let mut s = stack(vec![human("a")]);
    s.summarize("GOAL: a\nTURNS: 18446744073709551615").unwrap();
    s.push(human("b")).unwrap();
    assert_eq!(
        line(&fallback_summary(s.entries()), "TURNS: "),
        "18446744073709551615"
    );
}
