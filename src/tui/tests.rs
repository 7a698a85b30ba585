//! Behaviour of the model: events, keys and commands.

use crate::context::ContextOp;
use crate::protocol::methods::{NoParams, Request};
use crate::protocol::{
    CommitParams, ContextCall, CreateSessionParams, DeleteSessionParams, DiffParams, ForkParams,
    IdsParams, MergeParams, PrParams, PromptParams, RenameParams, RespondParams, RulesParams,
    SessionRuleParams,
};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::fixture::{self, entry, message, session};
use super::*;
use crate::protocol::{EntryKind, Event, MsgType, SessionState};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn alt(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT)
}

/// Types text into the input and presses Enter.
fn enter(model: &mut Model, text: &str) -> Vec<Action> {
    for c in text.chars() {
        model.handle_key(key(KeyCode::Char(c)));
    }
    model.handle_key(key(KeyCode::Enter))
}

fn focused_number(model: &Model) -> Option<usize> {
    model.focused_session().and_then(|s| model.number_of(&s.id))
}

fn flash(model: &Model) -> String {
    model
        .flash
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default()
}

fn bells(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Bell { .. }))
        .count()
}

fn three_sessions() -> Model {
    let mut model = Model::new(Keymap::default());
    model.sync(fixture::sessions()[..3].to_vec(), Vec::new());
    model
}

fn with_state(n: usize, state: SessionState) -> Event {
    let mut s = fixture::sessions()[n - 1].clone();
    s.state = Some(state);
    Event::SessionUpdated(s)
}

#[test]
fn a_session_that_starts_waiting_unfocused_rings_once_and_is_flagged() {
    let mut model = three_sessions();
    assert_eq!(focused_number(&model), Some(1));
    let first = model.apply(with_state(2, SessionState::Waiting));
    assert_eq!(bells(&first), 1);
    assert!(
        matches!(&first[0], Action::Bell { message } if message.contains("[2] fix/flaky @ codex"))
    );
    assert!(model.is_flagged(&fixture::sessions()[1].id));
    // Still waiting: no second bell.
    assert_eq!(bells(&model.apply(with_state(2, SessionState::Waiting))), 0);
    // Focusing it clears the flag.
    model.handle_key(alt('2'));
    assert!(!model.is_flagged(&fixture::sessions()[1].id));
    // Waiting again later, after working, rings again — but not while focused.
    model.apply(with_state(2, SessionState::Working));
    assert_eq!(bells(&model.apply(with_state(2, SessionState::Waiting))), 0);
}

#[test]
fn a_flag_clears_when_the_session_stops_waiting() {
    let mut model = three_sessions();
    model.apply(with_state(3, SessionState::Waiting));
    model.apply(with_state(3, SessionState::Working));
    assert!(!model.is_flagged(&fixture::sessions()[2].id));
    assert_eq!(bells(&model.apply(with_state(3, SessionState::Waiting))), 1);
}

#[test]
fn a_self_registered_session_waits_on_its_blocking_message() {
    let mut model = three_sessions();
    let outsider = session(9, "main", "aider", None, "");
    model.apply(Event::SessionRegistered(outsider.clone()));
    let ask = message(
        7,
        &outsider,
        MsgType::DecisionNeeded,
        "Which DB?",
        &["pg", "sqlite"],
    );
    assert_eq!(bells(&model.apply(Event::InboxCreated(ask.clone()))), 1);
    assert_eq!(
        model.activity(model.session(&outsider.id).unwrap()),
        Activity::Waiting
    );
    let mut answered = ask;
    answered.responded = true;
    answered.response = Some("pg".into());
    model.apply(Event::InboxUpdated(answered));
    assert!(!model.is_waiting(&outsider.id));
    assert!(!model.is_flagged(&outsider.id));
}

#[test]
fn an_answer_given_elsewhere_closes_the_open_item() {
    let mut model = fixture::model();
    let decision = model
        .inline_item()
        .cloned()
        .expect("the fixture's decision");
    assert_eq!(decision.title, "JWT or session cookies?");
    let mut answered = decision.clone();
    answered.responded = true;
    answered.read = true;
    answered.response = Some("JWT".into());
    model.apply(Event::InboxUpdated(answered));
    assert!(model.inline_item().is_none());
    let auth = &fixture::sessions()[0].id;
    assert_eq!(model.inbox().open_items(auth).count(), 0);
    // And answering it here now says so instead of sending a second answer.
    assert!(
        model
            .handle_command(commands::SlashCommand::Answer("1".into()))
            .is_empty()
    );
    assert!(
        flash(&model).contains("nothing to answer"),
        "{}",
        flash(&model)
    );
}

#[test]
fn goto_beyond_the_sessions_is_refused_with_a_message() {
    let mut model = three_sessions();
    assert!(enter(&mut model, "/goto 9").is_empty());
    assert_eq!(flash(&model), "no session [9]: there are 3 (1–3)");
    assert_eq!(focused_number(&model), Some(1));
    assert!(model.handle_key(alt('9')).is_empty());
    assert_eq!(focused_number(&model), Some(1));
    enter(&mut model, "/goto 3");
    assert_eq!(focused_number(&model), Some(3));
}

#[test]
fn switching_asks_for_each_transcript_once() {
    let mut model = three_sessions();
    let third = fixture::sessions()[2].id.clone();
    assert_eq!(
        model.handle_key(alt('3')),
        vec![Action::transcript(third.clone(), 0)]
    );
    model.handle_key(alt('1'));
    assert!(model.handle_key(alt('3')).is_empty(), "already loaded");
    enter(&mut model, "/next");
    assert_eq!(focused_number(&model), Some(1), "wraps around");
    enter(&mut model, "/p");
    assert_eq!(focused_number(&model), Some(3));
}

#[test]
fn next_waiting_jumps_to_the_next_session_that_waits() {
    let mut model = three_sessions();
    assert!(model.handle_key(alt('w')).is_empty());
    assert_eq!(flash(&model), "no other session is waiting");
    model.apply(with_state(3, SessionState::Waiting));
    model.apply(with_state(2, SessionState::Waiting));
    model.handle_key(alt('w'));
    assert_eq!(focused_number(&model), Some(2));
    model.handle_key(alt('w'));
    assert_eq!(focused_number(&model), Some(3));
    model.handle_key(alt('w'));
    assert_eq!(
        focused_number(&model),
        Some(2),
        "wraps past session 1, which works"
    );
}

#[test]
fn a_rebound_key_drives_the_same_action() {
    let mut model = three_sessions();
    let table: toml::Table = "next_waiting = \"ctrl-n\"".parse().unwrap();
    model.set_keymap(Keymap::with_overrides(&table).unwrap());
    model.apply(with_state(3, SessionState::Waiting));
    model.handle_key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::CONTROL));
    assert_eq!(focused_number(&model), Some(3));
}

#[test]
fn enter_prompts_the_focused_session_and_slashes_run_commands() {
    let mut model = three_sessions();
    let first = fixture::sessions()[0].id.clone();
    assert_eq!(
        enter(&mut model, "fix the bug"),
        vec![Action::prompt(first.clone(), "fix the bug".into())]
    );
    assert!(model.input.is_empty());
    assert_eq!(
        enter(&mut model, "//compact"),
        vec![Action::prompt(first, "/compact".into())]
    );
    assert!(enter(&mut model, "/nxt").is_empty());
    assert_eq!(flash(&model), "unknown command /nxt — did you mean /next?");
    assert!(enter(&mut model, "   ").is_empty());
}

#[test]
fn a_prompt_without_a_session_is_refused() {
    let mut model = Model::new(Keymap::default());
    assert!(enter(&mut model, "hello").is_empty());
    assert!(flash(&model).contains("/new"));
    assert_eq!(model.input.text(), "hello", "the text is kept");
}

#[test]
fn newline_keys_make_multi_line_input_and_up_then_moves_the_cursor() {
    let mut model = three_sessions();
    enter(&mut model, "earlier");
    for c in "a".chars() {
        model.handle_key(key(KeyCode::Char(c)));
    }
    model.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    model.handle_key(key(KeyCode::Char('b')));
    model.handle_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL));
    model.handle_key(key(KeyCode::Char('c')));
    assert_eq!(model.input.text(), "a\nb\nc");
    model.handle_key(key(KeyCode::Up));
    assert_eq!(
        model.input.text(),
        "a\nb\nc",
        "multi-line: Up moves, no history"
    );
    let sent = model.handle_key(key(KeyCode::Enter));
    assert!(
        matches!(&sent[..], [Action::Call(Request::SessionPrompt(PromptParams { text, .. }))] if text == "a\nb\nc")
    );
    model.handle_key(key(KeyCode::Up));
    assert_eq!(model.input.text(), "a\nb\nc", "single-line: Up recalls");
    model.handle_key(key(KeyCode::Up));
    assert_eq!(
        model.input.text(),
        "earlier",
        "a recalled entry keeps walking"
    );
}

#[test]
fn tab_completes_commands_and_lists_choices() {
    let mut model = three_sessions();
    for c in "/inb".chars() {
        model.handle_key(key(KeyCode::Char(c)));
    }
    model.handle_key(key(KeyCode::Tab));
    assert_eq!(model.input.text(), "/inbox ");
    model.input.set_text("/n");
    model.handle_key(key(KeyCode::Tab));
    assert_eq!(model.input.text(), "/ne", "extended to the common prefix");
    assert_eq!(flash(&model), "/next  /new");
}

#[test]
fn question_mark_opens_help_only_on_an_empty_input() {
    let mut model = three_sessions();
    model.handle_key(key(KeyCode::Char('?')));
    assert_eq!(
        model.overlay,
        Some(Overlay::Help {
            scroll: 0,
            commands_first: false
        })
    );
    model.handle_key(key(KeyCode::Esc));
    assert_eq!(model.overlay, None);
    model.handle_key(key(KeyCode::Char('x')));
    model.handle_key(key(KeyCode::Char('?')));
    assert_eq!(model.overlay, None);
    assert_eq!(model.input.text(), "x?");
}

#[test]
fn the_sessions_overlay_focuses_by_digit() {
    let mut model = three_sessions();
    enter(&mut model, "/sessions");
    assert_eq!(model.overlay, Some(Overlay::Sessions { selected: 0 }));
    model.handle_key(key(KeyCode::Char('2')));
    assert_eq!(model.overlay, None);
    assert_eq!(focused_number(&model), Some(2));
    assert_eq!(model.input.text(), "", "the digit chose, it was not typed");
}

#[test]
fn the_inbox_pane_opens_and_answers_approvals() {
    let mut model = fixture::model();
    model.handle_key(key(KeyCode::F(2)));
    assert_eq!(model.zone, Zone::Inbox);
    // Newest first: the approval of session 2.
    let approval = model.inbox().selected().cloned().unwrap();
    assert_eq!(approval.msg_type, MsgType::ApprovalRequired);
    assert_eq!(
        model.handle_key(key(KeyCode::Enter)),
        vec![Action::Call(Request::InboxMarkRead(IdsParams {
            ids: vec![approval.id.clone()]
        }))]
    );
    assert_eq!(
        model.handle_key(key(KeyCode::Char('a'))),
        vec![Action::Call(Request::InboxRespond(RespondParams {
            id: approval.id.clone(),
            response: "Allow".into(),
            asked: None
        }))]
    );
    assert!(model.inbox().opened().is_none(), "answering closes it");
    // The decision below it: answered once opened; then `d` is refused, a digit answers.
    model.handle_key(key(KeyCode::Char('j')));
    let decision = model.inbox().selected().cloned().unwrap();
    assert_eq!(decision.msg_type, MsgType::DecisionNeeded);
    model.handle_key(key(KeyCode::Enter));
    assert!(model.handle_key(key(KeyCode::Char('d'))).is_empty());
    assert_eq!(flash(&model), "a decision, not an approval: choose 1–2");
    assert!(model.handle_key(key(KeyCode::Char('3'))).is_empty());
    assert_eq!(flash(&model), "choose 1–2");
    assert_eq!(
        model.handle_key(key(KeyCode::Char('2'))),
        vec![Action::Call(Request::InboxRespond(RespondParams {
            id: decision.id,
            response: "Session cookies".into(),
            asked: None
        }))]
    );
    model.handle_key(key(KeyCode::Esc));
    assert_eq!(model.zone, Zone::Input);
}

#[test]
fn an_approval_without_options_takes_approve_and_deny() {
    let mut model = three_sessions();
    let s = fixture::sessions()[0].clone();
    let bare = message(8, &s, MsgType::ApprovalRequired, "Push to origin?", &[]);
    model.apply(Event::InboxCreated(bare.clone()));
    model.handle_key(alt('a'));
    assert_eq!(model.zone, Zone::Inbox);
    assert_eq!(
        model.handle_key(key(KeyCode::Char('d'))),
        vec![Action::Call(Request::InboxRespond(RespondParams {
            id: bare.id,
            response: "deny".into(),
            asked: None
        }))]
    );
}

#[test]
fn answer_takes_a_number_or_an_option_in_any_case() {
    let mut model = fixture::model();
    let id = model.inline_item().unwrap().id.clone();
    let respond = |response: &str| {
        vec![Action::Call(Request::InboxRespond(RespondParams {
            id: id.clone(),
            response: response.into(),
            asked: None,
        }))]
    };
    assert_eq!(enter(&mut model, "/answer 1"), respond("JWT"));
    assert_eq!(
        enter(&mut model, "/answer session COOKIES"),
        respond("Session cookies")
    );
    assert!(enter(&mut model, "/answer maybe").is_empty());
    assert_eq!(flash(&model), "answer one of: JWT, Session cookies");
}

#[test]
fn new_asks_for_a_session_and_focuses_it_once_registered() {
    let mut model = three_sessions();
    assert_eq!(
        enter(
            &mut model,
            "/new --worktree feat/x --agent codex write docs"
        ),
        vec![Action::Call(Request::SessionCreate(CreateSessionParams {
            kiln: None,
            agent: "codex".into(),
            worktree: Some("feat/x".into()),
            in_place: false,
            task: Some("write docs".into()),
            driver: Default::default(),
            allow_read: Vec::new(),
            channel: None
        }))]
    );
    let created = session(
        7,
        "feat/x",
        "codex",
        Some(SessionState::Starting),
        "write docs",
    );
    assert!(
        model.focus_session_id(&created.id).is_empty(),
        "not registered yet"
    );
    let actions = model.apply(Event::SessionRegistered(created.clone()));
    assert_eq!(actions, vec![Action::transcript(created.id.clone(), 0)]);
    assert_eq!(focused_number(&model), Some(4));
}

#[test]
fn removing_the_focused_session_focuses_a_neighbour() {
    let mut model = three_sessions();
    model.handle_key(alt('3'));
    let third = fixture::sessions()[2].id.clone();
    model.apply(Event::SessionDeregistered {
        session_id: third,
        reason: "deleted".into(),
    });
    assert_eq!(focused_number(&model), Some(2));
    assert_eq!(model.sessions().len(), 2);
}

#[test]
fn sync_keeps_the_focus_and_catches_transcripts_up() {
    let mut model = three_sessions();
    model.handle_key(alt('2'));
    let second = fixture::sessions()[1].clone();
    model.load_transcript(
        &second.id,
        vec![
            entry(&second, 1, EntryKind::Message, "hi", None),
            entry(&second, 2, EntryKind::Message, "there", None),
        ],
    );
    let actions = model.sync(fixture::sessions(), Vec::new());
    assert_eq!(focused_number(&model), Some(2));
    assert_eq!(actions, vec![Action::transcript(second.id, 2)]);
}

#[test]
fn context_commands_go_to_the_runtime_for_the_focused_session() {
    let mut model = three_sessions();
    assert_eq!(
        enter(&mut model, "/context pop 2"),
        vec![Action::context(
            fixture::sessions()[0].id.clone(),
            ContextCall::Apply(ContextOp::Pop(2))
        )]
    );
}

#[test]
fn quit_keys_and_command_quit() {
    let mut model = three_sessions();
    assert_eq!(
        model.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        vec![Action::Quit]
    );
    assert_eq!(enter(&mut model, "/quit"), vec![Action::Quit]);
}

#[test]
fn a_flash_lasts_until_the_next_key() {
    let mut model = three_sessions();
    model.report(Flash::error("session.create failed: no such agent"));
    assert!(model.flash.is_some());
    model.handle_key(key(KeyCode::Char('x')));
    assert!(model.flash.is_none());
}

#[test]
fn scrolling_stops_at_what_was_drawn() {
    let mut model = three_sessions();
    model.set_scroll_extent(model::ScrollExtent {
        max: 15,
        page: 10,
        jumped: None,
    });
    model.handle_key(key(KeyCode::PageUp));
    assert_eq!(model.transcripts.scroll, 8);
    model.handle_key(key(KeyCode::PageUp));
    model.handle_key(key(KeyCode::PageUp));
    assert_eq!(model.transcripts.scroll, 15);
    model.handle_key(key(KeyCode::PageDown));
    model.handle_key(key(KeyCode::PageDown));
    assert_eq!(model.transcripts.scroll, 0, "back to following the tail");
}

#[test]
fn context_commands_become_actions_and_the_pane_follows_changes() {
    let mut model = fixture::model();
    let focused = model.focused_session().expect("focused").id.clone();
    let actions = enter(&mut model, "/context pop 2");
    assert_eq!(
        actions,
        vec![Action::context(
            focused.clone(),
            ContextCall::Apply(ContextOp::Pop(2))
        )]
    );
    // The pane is shown now, so a change to the focused session's stack is read again…
    let update = crate::protocol::ContextUpdate {
        session_id: focused.clone(),
        change: crate::context::ContextStack::new("s").reset(),
        entries: 1,
        checkpoints: Vec::new(),
        fresh_start: false,
    };
    let actions = model.apply(Event::Context(update.clone()));
    assert_eq!(actions, vec![Action::context(focused, ContextCall::Get)]);
    // …but not another session's.
    let other = model.sessions()[3].id.clone();
    let actions = model.apply(Event::Context(crate::protocol::ContextUpdate {
        session_id: other,
        ..update
    }));
    assert!(actions.is_empty(), "{actions:?}");
}

#[test]
fn session_commands_act_on_the_focused_session() {
    let mut model = three_sessions();
    let focused = model.focused_session().unwrap().id.clone();
    assert_eq!(
        enter(&mut model, "/disable ask-before-push"),
        vec![Action::Call(Request::SessionRule(SessionRuleParams {
            session_id: focused.clone(),
            rule: "ask-before-push".into(),
            enabled: false
        }))]
    );
    assert_eq!(
        enter(&mut model, "/enable ask-before-push"),
        vec![Action::Call(Request::SessionRule(SessionRuleParams {
            session_id: focused.clone(),
            rule: "ask-before-push".into(),
            enabled: true
        }))]
    );
    assert_eq!(
        enter(&mut model, "/rules"),
        vec![Action::Call(Request::RulesList(RulesParams {
            session_id: Some(focused.clone())
        }))]
    );
    assert_eq!(
        enter(&mut model, "/session"),
        vec![Action::on_session(
            Request::SessionSecurity,
            focused.clone()
        )]
    );
    assert_eq!(
        enter(&mut model, "/cancel"),
        vec![Action::on_session(Request::SessionCancel, focused.clone())]
    );
    assert_eq!(
        enter(&mut model, "/stop"),
        vec![Action::on_session(Request::SessionStop, focused.clone())]
    );
    assert!(enter(&mut model, "/disable").is_empty());
    assert!(
        flash(&model).contains("needs one rule id"),
        "{}",
        flash(&model)
    );
    assert!(enter(&mut model, "/approve").is_empty());
    assert!(
        flash(&model).contains("nothing to answer"),
        "{}",
        flash(&model)
    );
    assert!(enter(&mut model, "/memory").is_empty());
    assert_eq!(model.overlay, Some(Overlay::Page { scroll: 0 }));
    assert!(model.page.as_ref().unwrap().0.starts_with("memory of "));
    let index = model.sessions.iter().position(|s| s.id == focused).unwrap();
    model.sessions[index].skills = vec!["/build — the build command".into()];
    model.handle_key(key(KeyCode::Esc));
    assert_eq!(model.overlay, None);
    assert!(enter(&mut model, "/skills").is_empty());
    let (title, lines) = model.page.clone().unwrap();
    assert!(title.starts_with("skills of "), "{title}");
    assert_eq!(lines, ["/build — the build command"]);
}

#[test]
fn esc_on_an_empty_input_cancels_the_focused_sessions_running_turn() {
    let mut model = three_sessions();
    let id = model.focused.clone().unwrap();
    model.apply(with_state(1, SessionState::Working));
    assert_eq!(
        model.handle_key(key(KeyCode::Esc)),
        vec![Action::on_session(Request::SessionCancel, id.clone())]
    );
    model.input.set_text("a draft");
    assert!(model.handle_key(key(KeyCode::Esc)).is_empty());
    assert_eq!(model.input.text(), "a draft", "the draft is kept");
    model.input.set_text("");
    model.apply(with_state(1, SessionState::Cancelled));
    assert!(model.handle_key(key(KeyCode::Esc)).is_empty());
    assert_eq!(
        model.activity(model.focused_session().unwrap()).label(),
        "cancelled"
    );
}

#[test]
fn session_control_and_landing_commands_act_on_the_focused_session() {
    use crate::protocol::{MergeStrategy, RemoveOptions};
    let mut model = three_sessions();
    let focused = model.focused.clone().unwrap();
    assert_eq!(
        enter(&mut model, "/restart"),
        vec![Action::on_session(Request::SessionRestart, focused.clone())]
    );
    assert_eq!(
        enter(&mut model, "/delete --worktree --force"),
        vec![Action::Call(Request::SessionDelete(DeleteSessionParams {
            session_id: focused.clone(),
            options: RemoveOptions {
                remove_worktree: true,
                force: true,
                ..RemoveOptions::default()
            }
        }))]
    );
    assert!(enter(&mut model, "/delete --everything").is_empty());
    assert!(
        flash(&model).contains("unknown option --everything"),
        "{}",
        flash(&model)
    );
    assert_eq!(
        enter(&mut model, "/prune --branch"),
        vec![Action::Call(Request::SessionPrune(RemoveOptions {
            delete_branch: true,
            ..RemoveOptions::default()
        }))]
    );
    assert_eq!(
        enter(&mut model, "/rename the auth work"),
        vec![Action::Call(Request::SessionRename(RenameParams {
            session_id: focused.clone(),
            name: "the auth work".into()
        }))]
    );
    assert_eq!(
        enter(&mut model, "/fork --worktree feat/b try the other way"),
        vec![Action::Call(Request::SessionFork(ForkParams {
            session_id: focused.clone(),
            worktree: Some("feat/b".into()),
            task: Some("try the other way".into())
        }))]
    );
    assert_eq!(
        enter(&mut model, "/diff"),
        vec![Action::Call(Request::SessionDiff(DiffParams {
            session_id: focused.clone(),
            context: None
        }))]
    );
    assert_eq!(
        enter(&mut model, "/commit fix the parser"),
        vec![Action::Call(Request::SessionCommit(CommitParams {
            session_id: focused.clone(),
            message: Some("fix the parser".into())
        }))]
    );
    assert_eq!(
        enter(&mut model, "/merge --squash"),
        vec![Action::Call(Request::SessionMerge(MergeParams {
            session_id: focused.clone(),
            strategy: MergeStrategy::Squash,
            message: None
        }))]
    );
    assert_eq!(
        enter(&mut model, "/pr"),
        vec![Action::Call(Request::SessionPr(PrParams {
            session_id: focused.clone(),
            title: None,
            body: None
        }))]
    );
    assert_eq!(
        enter(&mut model, "/conflicts"),
        vec![Action::Call(Request::SessionConflicts(NoParams {}))]
    );
    assert!(enter(&mut model, "/review send").is_empty());
    assert!(
        flash(&model).contains("no review comments"),
        "{}",
        flash(&model)
    );
}

#[test]
fn comments_written_in_the_diff_are_sent_as_one_prompt() {
    let mut model = three_sessions();
    let focused = model.focused.clone().unwrap();
    let reply = fixture::diff(&focused);
    model.show_diff(&reply);
    assert_eq!(model.overlay, Some(Overlay::Diff));
    model.handle_key(key(KeyCode::Down));
    model.handle_key(key(KeyCode::Down));
    model.handle_key(key(KeyCode::Char('c')));
    for c in "louder, q".chars() {
        model.handle_key(key(KeyCode::Char(c)));
    }
    assert_eq!(
        model.overlay,
        Some(Overlay::Diff),
        "q is text while writing"
    );
    model.handle_key(key(KeyCode::Enter));
    assert!(
        flash(&model).contains("1 review comment"),
        "{}",
        flash(&model)
    );
    model.handle_key(key(KeyCode::Esc));
    assert_eq!(model.overlay, None);
    let actions = enter(&mut model, "/review send");
    let [Action::Call(Request::SessionPrompt(PromptParams { session_id, text }))] =
        actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!(session_id, &focused);
    assert!(text.contains("- notes.txt:1: louder, q"), "{text}");
    assert!(enter(&mut model, "/review send").is_empty(), "sent once");
}

#[test]
fn a_quiet_working_session_shows_its_stall_and_output_resets_it() {
    use std::time::{Duration, Instant};
    let mut model = three_sessions();
    let id = fixture::sessions()[0].id.clone();
    model.apply(with_state(1, SessionState::Working));
    let now = Instant::now();
    assert_eq!(model.stalled_for(&id, now), None, "just started");
    let wake = model.next_stall_change(now).expect("a stall to wake for");
    assert!(
        wake > now + Duration::from_secs(110),
        "at the stall, not before"
    );
    // Three minutes of nothing.
    let earlier = now - Duration::from_secs(185);
    model.quiet.since.insert(id.clone(), earlier);
    assert_eq!(
        model.stalled_for(&id, now).map(|d| d.as_secs() / 60),
        Some(3)
    );
    assert_eq!(
        model.next_stall_change(now),
        Some(earlier + Duration::from_secs(240)),
        "the next whole minute"
    );
    // Output: quiet again from now.
    model.apply(Event::Output(crate::protocol::OutputChunk {
        session_id: id.clone(),
        kind: crate::protocol::EntryKind::Message,
        text: "still here".into(),
    }));
    assert_eq!(model.stalled_for(&id, Instant::now()), None);
    // Done: nothing to wake for.
    model.apply(with_state(1, SessionState::Complete));
    assert_eq!(model.next_stall_change(Instant::now()), None);
}

fn hit(session_id: &str, seq: u64) -> crate::protocol::SearchHit {
    crate::protocol::SearchHit {
        kind: crate::protocol::HitKind::Transcript,
        session_id: session_id.into(),
        session_name: "s".into(),
        seq: Some(seq),
        entry_kind: Some(EntryKind::Message),
        message_id: None,
        at: String::new(),
        score: 1.0,
        snippet: "the needle".into(),
        marks: vec![(4, 10)],
        kiln: None,
    }
}

#[test]
fn a_search_result_jumps_to_its_entry_reading_that_stretch_when_not_held() {
    let mut model = three_sessions();
    let sessions = fixture::sessions();
    let third = sessions[2].id.clone();
    let first = sessions[0].id.clone();
    assert_eq!(focused_number(&model), Some(1));
    // `/search` asks the daemon; its answer lists the hits.
    let actions = enter(&mut model, "/search the needle");
    assert!(
        matches!(&actions[..], [Action::Call(Request::Search(p))] if p.query == "the needle"),
        "{actions:?}"
    );
    model.show_search(
        "the needle".into(),
        vec![hit(&first, 3), hit(&third, 500)],
        false,
    );
    assert_eq!(model.overlay, Some(Overlay::Search { selected: 0 }));
    model.handle_key(key(KeyCode::Down));
    model.handle_key(key(KeyCode::Down));
    assert_eq!(
        model.overlay,
        Some(Overlay::Search { selected: 1 }),
        "stops at the last hit"
    );
    // Session 3's entry 500 is not held: the stretch from 20 before it is read.
    let actions = model.handle_key(key(KeyCode::Enter));
    assert_eq!(model.overlay, None);
    assert_eq!(focused_number(&model), Some(3));
    assert_eq!(
        actions,
        vec![Action::Call(Request::SessionTranscript(
            crate::protocol::TranscriptParams {
                session_id: third.clone(),
                after: Some(479),
                limit: Some(crate::tui::transcript::TRANSCRIPT_CAP as u32),
            }
        ))]
    );
    let jump = model.jump().unwrap();
    assert_eq!((jump.seq, jump.placed), (500, false));
    // The frame that holds it places it; scrolling goes on from there.
    let held = (480..=700)
        .map(|seq| entry(&sessions[2], seq, EntryKind::Message, "x", None))
        .collect();
    model.load_transcript(&third, held);
    model.set_scroll_extent(model::ScrollExtent {
        max: 400,
        page: 30,
        jumped: Some(170),
    });
    assert_eq!(model.transcripts.scroll, 170);
    assert!(model.jump().unwrap().placed);
    model.set_scroll_extent(model::ScrollExtent {
        max: 400,
        page: 30,
        jumped: Some(3),
    });
    assert_eq!(model.transcripts.scroll, 170, "placed once");
    // A held entry is jumped to without reading; another session's focus drops the mark.
    model.show_search("the needle".into(), vec![hit(&third, 600)], false);
    assert!(model.handle_key(key(KeyCode::Enter)).is_empty());
    assert_eq!(model.jump().unwrap().seq, 600);
    model.handle_key(alt('1'));
    assert!(model.jump().is_none());
    // Nothing found: said, no overlay.
    model.show_search("zeppelin".into(), Vec::new(), false);
    assert_eq!(model.overlay, None);
    assert_eq!(flash(&model), "nothing found for “zeppelin”");
}

#[test]
fn the_whole_list_after_the_first_page_keeps_the_focus_and_carries_out_lines_held() {
    let many: Vec<crate::protocol::Session> = (1..=70)
        .map(|n| {
            let mut s = fixture::session(
                n,
                &format!("w{n}"),
                "claude",
                Some(SessionState::Complete),
                "t",
            );
            // Started a minute apart, in order (the fixture's times are for nine).
            s.started_at = format!("2026-11-02T{:02}:{:02}:00Z", n / 60, n % 60);
            s
        })
        .collect();
    let mut model = Model::new(Keymap::default());
    // The first page: the oldest sessions, the first focused and its transcript asked.
    let actions = model.sync_first_page(many[..64].to_vec(), Vec::new());
    assert_eq!(focused_number(&model), Some(1));
    assert_eq!(actions, vec![Action::transcript(many[0].id.clone(), 0)]);
    model.handle_key(alt('2'));
    assert_eq!(focused_number(&model), Some(2));
    // A line sent before the rest is there waits for it rather than being refused.
    assert!(enter(&mut model, "/goto 70").is_empty());
    assert!(flash(&model).contains("held"), "{}", flash(&model));
    assert_eq!(focused_number(&model), Some(2));
    // The rest arrives: the line held is carried out, against every session.
    model.sync_sessions(many.clone());
    assert_eq!(focused_number(&model), Some(70));
    model.handle_key(alt('2'));
    assert_eq!(focused_number(&model), Some(2));
    // Read again with the focus there: it stays, and nothing is asked again.
    assert!(model.sync_sessions(many.clone()).is_empty());
    assert_eq!(focused_number(&model), Some(2));
    // A list without the focused session (deleted meanwhile) focuses the first.
    let mut without = many.clone();
    without.remove(1);
    model.sync_sessions(without);
    assert_eq!(focused_number(&model), Some(1));
    // Lines are carried out at once when the list was whole.
    enter(&mut model, "/goto 3");
    assert_eq!(focused_number(&model), Some(3));
}
