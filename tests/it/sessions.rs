//! Agent sessions end to end: the real daemon drives the scripted ACP agent (test
//! equipment that speaks the real protocol over stdio) in real git worktrees.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crucible::protocol::methods as m;
use crucible::protocol::params::{CreateSessionParams, SessionListParams};
use crucible::protocol::{EntryKind, MsgType, Session, SessionState, TranscriptEntry};
use serde_json::{Value, json};
use testkit::params::{prompt, query, respond, send, session_id};

use crate::common::*;

// The session helpers the other test modules take from here live in the test kit.
pub(crate) use testkit::sessions::{
    Events, LONG, agent_kiln, create, git, messages, said, session, transcript, wait_message,
    wait_message_where, wait_said, wait_session, wait_state,
};

fn worktree_of(s: &Session) -> PathBuf {
    PathBuf::from(s.worktree.as_deref().expect("a worktree"))
}

#[tokio::test]
async fn approved_write_lands_in_the_worktree_and_states_follow_seed_004() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let events = Events::start(&client).await;

    let task = "say starting\npermit p1 Write notes.txt\nwrite notes.txt hello from the agent\nsay finished";
    let out = tk.cru(&[
        "session", "new", "--agent", "scripted", "--task", task, "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let created: Session = serde_json::from_str(&stdout(&out)).expect("session JSON");
    let worktree = worktree_of(&created);
    assert!(worktree.starts_with(tk.root().join(".crucible/worktrees")));
    let branch = created.branch.clone().expect("a branch");
    assert_eq!(git(&worktree, &["branch", "--show-current"]), branch);

    // The agent blocks on the approval, and the session shows it is waiting.
    let approval = wait_message(&client, &created.id, MsgType::ApprovalRequired).await;
    assert_eq!(approval.title, "Write notes.txt");
    assert_eq!(
        approval.options.as_deref(),
        Some(&["Allow".to_string(), "Reject".to_string()][..])
    );
    wait_state(&client, &created.id, SessionState::Waiting).await;
    assert!(
        !worktree.join("notes.txt").exists(),
        "written before approval"
    );

    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let done = wait_message(&client, &created.id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains("finished"),
        "{done:?}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "hello from the agent"
    );
    assert!(!tk.root().join("notes.txt").exists());
    let s = wait_state(&client, &created.id, SessionState::Complete).await;
    assert_eq!(s.status, "idle");
    use SessionState::*;
    assert_eq!(
        events.states(&created.id),
        vec![Creating, Starting, Working, Waiting, Working, Complete]
    );

    // The transcript holds it all, in order, and so does the readable log.
    let entries = transcript(&client, &created.id).await;
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=entries.len() as u64).collect::<Vec<_>>());
    let kinds: HashSet<EntryKind> = entries.iter().map(|e| e.kind).collect();
    for kind in [
        EntryKind::Prompt,
        EntryKind::Message,
        EntryKind::Permission,
        EntryKind::File,
        EntryKind::TurnEnd,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} in {entries:#?}");
    }
    let text = said(&client, &created.id).await;
    assert!(text.contains("starting") && text.contains("granted: Write notes.txt"));
    assert!(text.contains("wrote notes.txt"), "{text}");
    assert!(
        entries
            .iter()
            .any(|e| e.kind == EntryKind::Permission && e.status.as_deref() == Some("Allow"))
    );
    // Streamed chunks of one message make one entry; separate messages stay separate.
    let messages: Vec<&str> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Message)
        .filter_map(|e| e.text.as_deref())
        .collect();
    assert_eq!(
        messages,
        [
            "starting",
            "granted: Write notes.txt",
            "wrote notes.txt",
            "finished"
        ]
    );
    let log = std::fs::read_to_string(
        tk.root()
            .join(".crucible/sessions")
            .join(format!("{}.md", created.id)),
    )
    .expect("markdown log");
    assert!(log.contains("permission Allow"), "{log}");
    assert!(
        log.contains("hello") || log.contains("wrote notes.txt"),
        "{log}"
    );

    // `cru session logs` prints the same story.
    let out = tk.cru(&["session", "logs", &created.id[20..]]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("granted: Write notes.txt"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn denial_reaches_the_agent_and_outside_reads_are_refused() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let secret = tk.root().join("secret.txt");
    let task = format!(
        "read {}\nread README.md\nwrite /tmp/cru-escape-{}.txt x\npermit p9 Delete everything\nsay after",
        secret.display(),
        std::process::id()
    );
    let s = create(&client, "scripted", Some(&task)).await;
    let approval = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    let reply = client
        .call::<m::InboxRespond>(respond(&approval.id, "reject"))
        .await;
    assert_eq!(reply.message.response.as_deref(), Some("Reject"));

    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(text.contains("denied: Delete everything"), "{text}");
    assert!(
        !text.contains("after"),
        "the agent went on after a denial: {text}"
    );
    assert!(
        text.contains(&format!("read failed: {}", secret.display())),
        "{text}"
    );
    assert!(!text.contains("not for agents"), "a secret leaked: {text}");
    assert!(text.contains("read README.md: project"), "{text}");
    assert!(text.contains("write failed"), "{text}");
    assert!(!Path::new(&format!("/tmp/cru-escape-{}.txt", std::process::id())).exists());

    let refusals: Vec<TranscriptEntry> = transcript(&client, &s.id)
        .await
        .into_iter()
        .filter(|e| {
            e.kind == EntryKind::File && e.status.as_deref().is_some_and(|s| s.ends_with("refused"))
        })
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:#?}");
    assert!(
        refusals[0]
            .text
            .as_deref()
            .unwrap()
            .contains("outside the session's worktree")
    );
}

#[tokio::test]
async fn one_crash_among_ten_sessions_leaves_nine_complete() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = Arc::new(tk.client().await);
    let mut creations = Vec::new();
    for i in 0..10 {
        let client = Arc::clone(&client);
        creations.push(tokio::spawn(async move {
            let task = if i == 4 {
                "say about to fail\ncrash 7".to_string()
            } else {
                format!("say hello {i}\ntool t{i} Build\nsay bye {i}")
            };
            create(&client, "scripted", Some(&task)).await
        }));
    }
    let mut sessions = Vec::new();
    for c in creations {
        sessions.push(c.await.unwrap());
    }
    let worktrees: HashSet<PathBuf> = sessions.iter().map(worktree_of).collect();
    assert_eq!(worktrees.len(), 10);

    for (i, s) in sessions.iter().enumerate() {
        if i == 4 {
            // It crashed in the middle of its turn: the turn was cut short, and can be
            // sent again.
            let failed = wait_state(&client, &s.id, SessionState::Interrupted).await;
            let reason = failed.state_reason.unwrap_or_default();
            assert!(reason.contains("exited with code 7"), "{reason}");
            assert_eq!(
                failed.turn_prompt.as_deref(),
                Some("say about to fail\ncrash 7")
            );
            assert_eq!(failed.agent_pid, None);
            assert_eq!(failed.exit_code, Some(7));
            assert!(failed.ended_at.is_some());
            let error = wait_message(&client, &s.id, MsgType::Error).await;
            assert!(error.title.contains("exited with code 7"), "{error:?}");
            assert!(
                messages(&client, &s.id)
                    .await
                    .iter()
                    .all(|m| m.msg_type != MsgType::TaskComplete)
            );
        } else {
            wait_message(&client, &s.id, MsgType::TaskComplete).await;
            wait_state(&client, &s.id, SessionState::Complete).await;
            let text = said(&client, &s.id).await;
            assert!(text.contains(&format!("bye {i}")), "{text}");
        }
    }
}

#[tokio::test]
async fn restart_resumes_agents_that_can_load_and_reports_the_others_lost() {
    let tk = agent_kiln("");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.daemon().await;
    let lost = create(&client, "scripted", Some("say before the restart")).await;
    let resumable = create(&client, "loader", Some("say working on it\nhang")).await;
    wait_state(&client, &lost.id, SessionState::Complete).await;
    let busy = wait_state(&client, &resumable.id, SessionState::Working).await;
    let acp_id = busy.acp_session_id.clone().expect("an ACP session id");
    let old_pid = busy.agent_pid.expect("an agent pid");
    let entries_before = transcript(&client, &lost.id).await.len();
    drop(client);

    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;

    // An agent that cannot reload its conversation is reported lost, not replaced.
    let s = wait_state(&client, &lost.id, SessionState::Stopped).await;
    assert!(
        s.state_reason.as_deref().unwrap_or("").contains("lost"),
        "{s:?}"
    );
    let error = wait_message(&client, &lost.id, MsgType::Error).await;
    assert!(error.title.contains("lost"), "{error:?}");
    let entries = transcript(&client, &lost.id).await;
    assert!(entries.len() > entries_before, "no state entry was added");
    assert!(said(&client, &lost.id).await.contains("before the restart"));

    // One that can is resumed with session/load; the turn it was in is said to be cut
    // short, and the session waits for a word.
    let s = wait_state(&client, &resumable.id, SessionState::Interrupted).await;
    assert!(
        s.state_reason
            .as_deref()
            .unwrap_or("")
            .contains("cut short: the daemon stopped"),
        "{s:?}"
    );
    assert_eq!(s.acp_session_id.as_deref(), Some(acp_id.as_str()));
    assert!(s.agent_pid.is_some_and(|p| p != old_pid));
    wait_message_where(&client, &resumable.id, "the cut turn's notice", |m| {
        m.msg_type == MsgType::Error && m.title == "A turn was cut short"
    })
    .await;
    client
        .call::<m::SessionPrompt>(prompt(&resumable.id, "say back again"))
        .await;
    wait_message(&client, &resumable.id, MsgType::TaskComplete).await;
    let text = said(&client, &resumable.id).await;
    assert!(text.contains(&format!("resumed {acp_id}")), "{text}");
    assert!(text.contains("back again"), "{text}");
}

#[tokio::test]
async fn cancel_ends_a_hung_turn_and_prompts_queue_behind_a_running_one() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "scripted", Some("say waiting\nhang")).await;
    wait_state(&client, &s.id, SessionState::Working).await;
    let queued = client
        .call::<m::SessionPrompt>(prompt(&s.id, "say never"))
        .await;
    assert!(queued.queued);

    let out = tk.cru(&["session", "cancel", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = wait_state(&client, &s.id, SessionState::Cancelled).await;
    assert_eq!(done.state_reason.as_deref(), Some("stopped: cancelled"));
    let entries = transcript(&client, &s.id).await;
    assert!(
        entries
            .iter()
            .any(|e| e.kind == EntryKind::TurnEnd && e.status.as_deref() == Some("cancelled"))
    );
    // A cancel drops the queue and posts no task_complete.
    assert!(!said(&client, &s.id).await.contains("never"));
    assert!(
        messages(&client, &s.id)
            .await
            .iter()
            .all(|m| m.msg_type != MsgType::TaskComplete)
    );

    // Prompts sent during a turn run after it, in order.
    let first = client
        .call::<m::SessionPrompt>(prompt(&s.id, "sleep 300\nsay one"))
        .await;
    assert!(!first.queued);
    let second = client
        .call::<m::SessionPrompt>(prompt(&s.id, "say two"))
        .await;
    assert!(second.queued);
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let text = said(&client, &s.id).await;
    let (one, two) = (text.find("one").unwrap(), text.find("two").unwrap());
    assert!(one < two, "{text}");
}

#[tokio::test]
async fn stop_keeps_the_worktree_and_delete_guards_uncommitted_work() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "scripted", None).await;
    let ready = wait_state(&client, &s.id, SessionState::Complete).await;
    let pid = ready.agent_pid.expect("agent pid");
    let worktree = worktree_of(&s);

    let out = tk.cru(&["session", "stop", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stopped = session(&client, &s.id).await;
    assert_eq!(stopped.state, Some(SessionState::Stopped));
    assert_eq!(stopped.agent_pid, None);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.split_whitespace().nth(2) == Some("Z")
        }
    );
    assert!(worktree.is_dir());
    let out = tk.cru(&["session", "send", &s.id, "say hello"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no running agent"),
        "{}",
        stderr(&out)
    );

    // Uncommitted work blocks removing the worktree, and nothing is deleted.
    std::fs::write(worktree.join("draft.txt"), "unsaved").unwrap();
    let out = tk.cru(&["session", "delete", &s.id, "--branch"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("uncommitted"), "{}", stderr(&out));
    assert!(worktree.join("draft.txt").exists());
    session(&client, &s.id).await;

    // Committed but unmerged work blocks deleting the branch.
    git(&worktree, &["add", "draft.txt"]);
    git(&worktree, &["commit", "-q", "-m", "draft"]);
    let out = tk.cru(&["session", "delete", &s.id, "--branch"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not merged"), "{}", stderr(&out));

    let out = tk.cru(&["session", "delete", &s.id, "--branch", "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!worktree.exists());
    let branch = s.branch.unwrap();
    assert_eq!(git(tk.root(), &["branch", "--list", &branch]), "");
    let err = client
        .try_call::<m::SessionGet>(session_id(&s.id))
        .await
        .unwrap_err();
    assert_eq!(err.rpc_code(), Some(-32002));
}

/// A deletion cut short after its records went (what a kill -9 in the first second of
/// `session delete --branch` leaves: the tombstone naming the worktree and branch still
/// to remove) is finished at the next start, and its tombstone goes.
#[tokio::test]
async fn a_deletion_cut_short_removes_its_worktree_and_branch_at_the_next_start() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "scripted", None).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let worktree = worktree_of(&s);
    let branch = s.branch.clone().unwrap();
    let out = tk.cru(&["session", "stop", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The deletion's first step, its one transaction, as `session.delete` runs it.
    client
        .call::<m::DbQuery>(query(
            "BEGIN TRANSACTION;
                DELETE type::record('sessions', $id);
                UPSERT type::record('deleted_sessions', $id) SET at = time::now(),
                    worktree = $worktree, branch = $branch, force = false;
                COMMIT TRANSACTION;",
            json!({"id": s.id, "worktree": worktree, "branch": branch}),
        ))
        .await;
    let pid = tk.daemon_pid().expect("the daemon's pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_until("the daemon is gone", Duration::from_secs(10), || {
        daemon_processes(tk.root()).is_empty()
    })
    .await;
    assert!(worktree.is_dir(), "the kill came before the worktree went");

    let client = tk.daemon().await;
    wait_until(
        "the worktree and branch are removed",
        Duration::from_secs(30),
        || !worktree.exists() && git(tk.root(), &["branch", "--list", &branch]).is_empty(),
    )
    .await;
    let mut left = Vec::new();
    for _ in 0..200 {
        left = client
            .call::<m::DbQuery>(query("SELECT * FROM deleted_sessions", Value::Null))
            .await
            .result;
        if left[0] == json!([]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left[0], json!([]), "the tombstone stays: {left:?}");
}

#[tokio::test]
async fn prune_deletes_finished_sessions_and_keeps_busy_ones() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let done = create(&client, "scripted", Some("say done")).await;
    let busy = create(&client, "scripted", Some("hang")).await;
    wait_state(&client, &done.id, SessionState::Complete).await;
    wait_state(&client, &busy.id, SessionState::Working).await;

    let out = tk.cru(&["session", "prune", "--worktree", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["deleted"][0]["session_id"], done.id.as_str());
    assert_eq!(result["deleted"][0]["worktree_removed"], true);
    assert!(!worktree_of(&done).exists());
    assert_eq!(
        session(&client, &busy.id).await.state,
        Some(SessionState::Working)
    );
}

#[tokio::test]
async fn bad_requests_leave_no_half_made_session() {
    let tk = agent_kiln(
        "[agents.ghost]\ncommand = \"/nonexistent/agent\"\n\n\
         [agents.mute]\ncommand = \"sleep\"\nargs = [\"600\"]\nstartup_timeout_secs = 1\n",
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;

    let out = tk.cru(&["session", "new", "--agent", "nope"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("configured: ghost, loader, mute, scripted"),
        "{}",
        stderr(&out)
    );

    // `main` is checked out in the kiln itself.
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--worktree",
        "main",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("already checked out at"),
        "{}",
        stderr(&out)
    );

    let out = tk.cru(&["session", "new", "--agent", "ghost"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot start agent"),
        "{}",
        stderr(&out)
    );
    // Its worktree and branch were rolled back.
    assert_eq!(git(tk.root(), &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(tk.root(), &["branch", "--list", "cru/*"]), "");
    let list = client
        .call::<m::SessionList>(SessionListParams::default())
        .await;
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);

    // An agent that never answers `initialize` is given up on, and said to be.
    let s = create(&client, "mute", Some("say hi")).await;
    let failed = wait_state(&client, &s.id, SessionState::Error).await;
    assert!(
        failed
            .state_reason
            .as_deref()
            .unwrap_or("")
            .contains("within 1s"),
        "{failed:?}"
    );
    let error = wait_message(&client, &s.id, MsgType::Error).await;
    assert_eq!(error.title, "Agent failed to start");
    wait_session(&client, &s.id, "the agent to be gone", |s| {
        s.agent_pid.is_none()
    })
    .await;

    // An existing branch gets its own worktree.
    git(tk.root(), &["branch", "feature"]);
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--worktree",
        "feature",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Session = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(s.branch.as_deref(), Some("feature"));
    assert_eq!(
        git(&worktree_of(&s), &["branch", "--show-current"]),
        "feature"
    );
    assert_eq!(s.display_name, "feature @ scripted");
}

#[tokio::test]
async fn in_place_sessions_work_in_the_kiln_but_not_in_crucible_state() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let pid_file = tk.root().join(".crucible/daemon.pid");
    let task = format!(
        "read README.md\nread {}\nwrite out.txt made in place",
        pid_file.display()
    );
    let s = client
        .call::<m::SessionCreate>(CreateSessionParams {
            agent: "scripted".into(),
            in_place: true,
            task: Some(task),
            ..Default::default()
        })
        .await
        .session;
    assert_eq!(s.worktree, None);
    assert_eq!(s.display_name, "main @ scripted");
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(text.contains("read README.md: project"), "{text}");
    assert!(text.contains("crucible's own state"), "{text}");
    assert_eq!(
        std::fs::read_to_string(tk.root().join("out.txt")).unwrap(),
        "made in place"
    );
}

#[tokio::test]
async fn a_question_from_the_agent_makes_the_session_wait() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "scripted", Some("hang")).await;
    wait_state(&client, &s.id, SessionState::Working).await;
    // What an agent's `cru ask` does: a blocking message for its own session.
    let asked = client
        .call::<m::InboxSend>(send(
            &s.id,
            MsgType::DecisionNeeded,
            "Which database?",
            &["sqlite", "postgres"],
        ))
        .await;
    wait_state(&client, &s.id, SessionState::Waiting).await;
    client
        .call::<m::InboxRespond>(respond(&asked.id, "postgres"))
        .await;
    wait_state(&client, &s.id, SessionState::Working).await;
}

#[tokio::test]
async fn logs_follow_streams_until_the_agent_ends() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "scripted", Some("say first words")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;

    let follower = std::process::Command::new(CRU)
        .arg("--kiln")
        .arg(tk.root())
        .args(["session", "logs", "--follow", &s.id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the follower is subscribed (it shows up as a client), more work streams in.
    wait_until("the follower to connect", LONG, || {
        let status: Value =
            serde_json::from_slice(&tk.cru(&["daemon", "status", "--json"]).stdout).unwrap();
        // This test's client, the follower, and the status command itself.
        status["clients"] == 3
    })
    .await;
    client
        .call::<m::SessionPrompt>(prompt(&s.id, "tool t1 Run the suite\nsay streamed later"))
        .await;
    wait_session(&client, &s.id, "the second turn", |s| {
        s.state == Some(SessionState::Complete)
    })
    .await;
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    // The follower ends when the agent does.
    let out = tk.cru(&["session", "stop", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = follower.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("first words"), "{text}");
    assert!(text.contains("streamed later"), "{text}");
    assert!(text.contains("Run the suite"), "{text}");
    assert!(text.contains("state → stopped"), "{text}");
}

#[tokio::test]
async fn a_clean_shutdown_keeps_sessions_for_the_next_daemon() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "loader", Some("say hello")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(client);

    let client = tk.daemon().await;
    let resumed = wait_session(&client, &s.id, "a resume", |s| {
        s.state_reason.as_deref() == Some("resumed after a daemon restart")
    })
    .await;
    assert_eq!(resumed.state, Some(SessionState::Complete));
    assert!(resumed.agent_pid.is_some());
}
