//! A realistic workbench for tests: four sessions in different states, an inbox with an
//! open decision (of the focused session) and an open approval (of a flagged one), and a
//! transcript with a prompt, a thought, text, tool calls, a plan and streaming text.

use crate::protocol::{
    EntryKind, Event, InboxMessage, MsgType, OutputChunk, Session, SessionState, TranscriptEntry,
};

use super::keymap::Keymap;
use super::model::Model;

pub fn session(
    n: u32,
    worktree: &str,
    agent: &str,
    state: Option<SessionState>,
    task: &str,
) -> Session {
    Session {
        id: format!("01JS{n:022}"),
        worktree: Some(format!("/kiln/.crucible/worktrees/{worktree}")),
        agent_type: "acp".into(),
        agent_name: agent.into(),
        status: if state.is_some_and(|s| s.is_busy()) {
            "active"
        } else {
            "idle"
        }
        .into(),
        started_at: format!("2026-11-02T09:0{n}:00Z"),
        last_heartbeat: "2026-11-02T10:00:00Z".into(),
        display_name: format!("{worktree} @ {agent}"),
        state,
        task: (!task.is_empty()).then(|| task.to_string()),
        branch: Some(worktree.into()),
        worktree_owned: true,
        ..Session::default()
    }
}

pub fn message(
    n: u32,
    session: &Session,
    msg_type: MsgType,
    title: &str,
    options: &[&str],
) -> InboxMessage {
    InboxMessage {
        kiln: None,
        digest: None,
        id: format!("01JM{n:022}"),
        session_id: session.id.clone(),
        session_name: session.display_name.clone(),
        timestamp: format!("2026-11-02T10:{n:02}:00Z"),
        msg_type,
        title: title.into(),
        body: None,
        options: (!options.is_empty()).then(|| options.iter().map(|o| o.to_string()).collect()),
        option_kinds: None,
        rule: None,
        operation: None,
        read: false,
        responded: false,
        response: None,
        withdrawn: false,
        answered_by: None,
        purpose: None,
    }
}

pub fn entry(
    session: &Session,
    seq: u64,
    kind: EntryKind,
    text: &str,
    status: Option<&str>,
) -> TranscriptEntry {
    TranscriptEntry {
        session_id: session.id.clone(),
        seq,
        at: "2026-11-02T10:00:00Z".into(),
        kind,
        text: Some(text.into()),
        tool_call_id: matches!(kind, EntryKind::ToolCall | EntryKind::ToolUpdate)
            .then(|| format!("call-{seq}")),
        status: status.map(String::from),
    }
}

pub fn sessions() -> Vec<Session> {
    vec![
        session(
            1,
            "feat/auth",
            "claude",
            Some(SessionState::Working),
            "Add JWT auth to the API",
        ),
        session(
            2,
            "fix/flaky",
            "codex",
            Some(SessionState::Working),
            "Fix the flaky integration test",
        ),
        session(
            3,
            "docs",
            "gemini",
            Some(SessionState::Complete),
            "Document the protocol",
        ),
        session(4, "spike", "ollama", Some(SessionState::Error), ""),
    ]
}

/// The fixture: session 1 focused, session 2 flagged and waiting on an approval.
pub fn model() -> Model {
    let sessions = sessions();
    let [auth, flaky, docs, spike] = [0, 1, 2, 3].map(|i| sessions[i].clone());
    let mut info = message(1, &docs, MsgType::Info, "Indexed 214 files", &[]);
    info.read = true;
    let mut done = message(2, &docs, MsgType::TaskComplete, "Protocol documented", &[]);
    done.read = true;
    done.body = Some("PROTOCOL.md now lists every method and notification.".into());
    let mut decision = message(
        5,
        &auth,
        MsgType::DecisionNeeded,
        "JWT or session cookies?",
        &["JWT", "Session cookies"],
    );
    decision.body = Some(
        "The API has no sessions yet. JWT keeps it stateless; cookies are simpler for the web app."
            .into(),
    );
    let failed = message(4, &spike, MsgType::Error, "Agent exited with code 1", &[]);
    let mut model = Model::new(Keymap::default());
    model.sync(sessions.clone(), vec![info, done, decision, failed]);
    for event in transcript(&auth) {
        model.apply(event);
    }
    let mut waiting = flaky.clone();
    waiting.state = Some(SessionState::Waiting);
    let approval = message(
        6,
        &flaky,
        MsgType::ApprovalRequired,
        "Run rm -rf build/",
        &["Allow", "Reject"],
    );
    model.apply(Event::InboxCreated(approval));
    model.apply(Event::SessionUpdated(waiting));
    model
}

fn transcript(s: &Session) -> Vec<Event> {
    let mut events: Vec<Event> = [
        entry(s, 1, EntryKind::Prompt, "Add JWT auth to the API", None),
        entry(
            s,
            2,
            EntryKind::Thought,
            "The API uses axum.\nMiddleware fits best.\nCheck the tests first.",
            None,
        ),
        entry(
            s,
            3,
            EntryKind::Message,
            "I'll add a JWT middleware and protect the /api routes. First, the current tests:",
            None,
        ),
        entry(
            s,
            4,
            EntryKind::ToolCall,
            "Run cargo test",
            Some("completed"),
        ),
        entry(
            s,
            5,
            EntryKind::Plan,
            "[completed] Read the router\n[in_progress] Add the middleware\n[pending] Write tests",
            None,
        ),
        entry(
            s,
            6,
            EntryKind::ToolCall,
            "Edit src/auth.rs",
            Some("in_progress"),
        ),
    ]
    .into_iter()
    .map(Event::Transcript)
    .collect();
    events.push(Event::Output(OutputChunk {
        session_id: s.id.clone(),
        kind: EntryKind::Message,
        text: "Before I go on: ".into(),
    }));
    events.push(Event::Output(OutputChunk {
        session_id: s.id.clone(),
        kind: EntryKind::Message,
        text: "should the tokens be JWTs or session cookies?".into(),
    }));
    events
}

/// A diff of `session_id`'s branch: one added file of one line.
pub fn diff(session_id: &str) -> crate::protocol::DiffReply {
    use crate::protocol::{Diff, DiffLine, DiffReply, FileDiff, FileStatus, Hunk, LineKind};
    DiffReply {
        session_id: session_id.to_string(),
        branch: "feat/auth".into(),
        base_branch: "main".into(),
        diff: Diff {
            base: "abc".into(),
            files: vec![FileDiff {
                path: "notes.txt".into(),
                old_path: None,
                status: FileStatus::Added,
                binary: false,
                added: 1,
                removed: 0,
                hunks: vec![Hunk {
                    old_start: 0,
                    old_lines: 0,
                    new_start: 1,
                    new_lines: 1,
                    header: String::new(),
                    lines: vec![DiffLine {
                        kind: LineKind::Added,
                        text: "hello".into(),
                        old_no: None,
                        new_no: Some(1),
                    }],
                }],
            }],
        },
    }
}
