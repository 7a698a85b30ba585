//! Moving a session between two daemons of a team (two clones of one repository on one
//! real SurrealDB server): the branch with its uncommitted work, the transcript and an
//! open question go to the other daemon, the question is answered there and its answer
//! reaches the new agent; a target killed with the move under way leaves the session
//! running where it was.

use std::path::PathBuf;

use crucible::protocol::{Moved, MsgType, Resumed, SessionState};

use crate::common::*;
use crate::sessions::wait_said;
use crate::sessions::{session, transcript, wait_message_where, wait_state};
use crate::team::{create, daemon, start_server, status, two_kilns};

#[tokio::test]
async fn a_moved_session_takes_its_work_and_open_question_and_is_answered_on_the_target() {
    let server = start_server().await;
    let (a, b) = two_kilns(&server, "move");
    let _daemon_a = daemon(&a).await;
    let _daemon_b = daemon(&b).await;
    let client_a = a.client().await;
    let client_b = b.client().await;
    let me_b = status(&client_b).await.instance.expect("daemon B");

    // On A: a command agent asks the human, and leaves work uncommitted.
    let s = create(&client_a, "ask the human").await;
    let question = wait_message_where(&client_a, &s.id, "the question", |m| {
        m.msg_type == MsgType::DecisionNeeded && !m.responded
    })
    .await;
    let old_worktree = PathBuf::from(s.worktree.clone().expect("a worktree"));
    std::fs::write(old_worktree.join("notes.txt"), "half done\n").unwrap();

    // Move it to B, by B's instance id.
    let out = a.cru(&["session", "move", &s.id, "--to", &me_b.id, "--json"]);
    assert!(out.status.success(), "cru session move: {}", stderr(&out));
    let moved: Moved = serde_json::from_str(&stdout(&out)).expect("Moved");
    assert_eq!(moved.carried, 1, "{moved:?}");
    assert_eq!(moved.session.owner.as_deref(), Some(me_b.id.as_str()));
    let new_worktree = PathBuf::from(moved.session.worktree.clone().unwrap());
    assert!(
        new_worktree.starts_with(b.root()),
        "{}",
        new_worktree.display()
    );
    // The work went with it, committed; A's worktree is gone.
    assert_eq!(
        std::fs::read_to_string(new_worktree.join("notes.txt")).unwrap(),
        "half done\n"
    );
    assert!(!old_worktree.exists(), "A's worktree was left behind");
    let log = crate::sessions::git(&new_worktree, &["log", "-1", "--format=%s"]);
    assert!(
        log.starts_with("crucible: work in progress, moved to"),
        "{log}"
    );

    // The question is still open, and answered on B it reaches the new agent there.
    let still = crate::team::messages_of(&client_b, &s.id).await;
    let open = still.iter().find(|m| m.id == question.id).unwrap();
    assert!(!open.responded && !open.withdrawn, "{open:?}");
    let out = b.cru(&["inbox", "respond", &question.id, "SQLite"]);
    assert!(out.status.success(), "cru inbox respond: {}", stderr(&out));
    wait_said(&client_b, &s.id, "you asked: \"Which database?\"").await;
    wait_said(&client_b, &s.id, "answered: SQLite").await;

    // The transcript is the session's whole one: what A's agent did is there on B.
    let lines = transcript(&client_b, &s.id).await;
    assert!(
        lines
            .iter()
            .any(|e| e.text.as_deref() == Some("ask the human")),
        "{lines:?}"
    );
    let now = session(&client_a, &s.id).await;
    assert_eq!(now.owner.as_deref(), Some(me_b.id.as_str()));
    eprintln!(
        "move time (call to the target's confirmation): {} ms",
        moved.millis
    );
}

#[tokio::test]
async fn a_target_killed_with_the_move_under_way_leaves_the_session_running_where_it_was() {
    let server = start_server().await;
    let (a, b) = two_kilns(&server, "move-kill");
    let _daemon_a = daemon(&a).await;
    let mut daemon_b = daemon(&b).await;
    let client_a = a.client().await;
    let client_b = b.client().await;
    let me_a = status(&client_a).await.instance.expect("daemon A");
    let me_b = status(&client_b).await.instance.expect("daemon B");
    let s = create(&client_a, "first").await;
    wait_said(&client_a, &s.id, "heard: first").await;
    wait_state(&client_a, &s.id, SessionState::Complete).await;

    // B dies; the move is asked before its lease has run out, so A sends it the call.
    daemon_b.kill9();
    let out = a.cru(&["session", "move", &s.id, "--to", &me_b.id]);
    assert!(!out.status.success(), "reported moved: {}", stdout(&out));
    let why = stderr(&out);
    // Refused for B's lease (lapsed before the call, or while it waited), not at the end
    // of the wait for an answer ("… did not answer … within 60s").
    assert!(
        why.contains("lease") && !why.contains("did not answer"),
        "{why}"
    );

    // The session is where it was, whole, and its agent still answers.
    let here = session(&client_a, &s.id).await;
    assert_eq!(here.owner.as_deref(), Some(me_a.id.as_str()), "{here:?}");
    let worktree = PathBuf::from(here.worktree.clone().unwrap());
    assert!(worktree.starts_with(a.root()) && worktree.exists());
    let out = a.cru(&["session", "send", &s.id, "still here"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client_a, &s.id, "heard: still here").await;
}

#[tokio::test]
async fn an_agent_that_can_reload_its_session_takes_it_up_again_on_the_target() {
    let server = start_server().await;
    let agent = testkit::process::scripted_agent();
    let loader = format!("[agents.loader]\ncommand = {agent:?}\nargs = [\"--load\"]\n");
    let (a, b) = crate::team::two_kilns_with(&server, "move-load", &loader);
    let _daemon_a = daemon(&a).await;
    let _daemon_b = daemon(&b).await;
    let client_a = a.client().await;
    let client_b = b.client().await;
    let me_b = status(&client_b).await.instance.expect("daemon B");
    let s = crate::sessions::create(&client_a, "loader", Some("say before the move")).await;
    wait_said(&client_a, &s.id, "before the move").await;
    let s = wait_state(&client_a, &s.id, SessionState::Complete).await;
    assert!(s.acp_session_id.is_some());

    // Named by its kiln folder (both daemons run on this one host).
    let out = a.cru(&["session", "move", &s.id, "--to", &me_b.kiln, "--json"]);
    assert!(out.status.success(), "cru session move: {}", stderr(&out));
    let moved: Moved = serde_json::from_str(&stdout(&out)).expect("Moved");
    assert_eq!(moved.resumed, Resumed::Load, "{moved:?}");
    assert_eq!(moved.session.acp_session_id, s.acp_session_id);

    // B's agent takes prompts, sent from either kiln.
    let out = a.cru(&["session", "send", &s.id, "say after the move"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client_b, &s.id, "after the move").await;
}
