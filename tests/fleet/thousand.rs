//! A thousand sessions on one daemon: every one made with the scripted agent, listed,
//! addressed by its number, shown by the workbench, and deleted. A hundred work in
//! worktrees of their own, the others in the kiln itself: each `git worktree add` and
//! `remove` reads every worktree the repository has, so a thousand of them take git
//! about ten minutes here (the scale benchmark measures session creation with a
//! worktree each, at every size).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crucible::protocol::{Session, SessionState};
use serde_json::json;

use testkit::tmux::Tmux;
use testkit::*;

const FLEET: usize = 1000;
/// The sessions made with a worktree of their own.
const IN_WORKTREES: usize = 100;
/// Calls in flight at once, as several terminals and scripts would make them.
const AT_ONCE: usize = 8;

/// A kiln that is a git repository with one commit, and the scripted agent as
/// `scripted`.
fn agent_kiln() -> TestKiln {
    let settings = format!(
        "[daemon]\ngrace_period_secs = 60\n\n[agents.scripted]\ncommand = {:?}\n",
        scripted_agent()
    );
    let tk = TestKiln::with_settings(&settings);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(tk.root())
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(tk.root().join("README.md"), "project\n").unwrap();
    git(&["add", "README.md"]);
    git(&["commit", "-q", "-m", "start"]);
    tk
}

async fn create(client: &crucible::client::Client, task: &str, in_place: bool) -> Session {
    let reply = client
        .call_value(
            "session.create",
            json!({"agent": "scripted", "task": task, "in_place": in_place}),
        )
        .await
        .expect("session.create");
    serde_json::from_value(reply["session"].clone()).expect("a session")
}

async fn listed(client: &crucible::client::Client) -> Vec<Session> {
    let reply = client
        .call_value("session.list", json!({}))
        .await
        .expect("session.list");
    serde_json::from_value(reply["sessions"].clone()).expect("sessions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sessions_are_listed_addressed_by_number_shown_and_deleted() {
    let tk = agent_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = Arc::new(tk.client().await);

    // Made a few at a time, each with a short turn. How long each part takes is
    // printed (never asserted).
    let started = std::time::Instant::now();
    let mut made = Vec::new();
    for wave in 0..FLEET.div_ceil(AT_ONCE) {
        let calls: Vec<_> = (wave * AT_ONCE..((wave + 1) * AT_ONCE).min(FLEET))
            .map(|i| {
                let client = Arc::clone(&client);
                tokio::spawn(async move {
                    let task = format!("say fleet member {i}");
                    create(&client, &task, i >= IN_WORKTREES).await
                })
            })
            .collect();
        for call in calls {
            made.push(call.await.unwrap().id);
        }
    }
    eprintln!("{FLEET} sessions made in {:?}", started.elapsed());
    let made: HashSet<String> = made.into_iter().collect();
    assert_eq!(made.len(), FLEET, "every session has its own id");

    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let sessions = loop {
        let sessions = listed(&client).await;
        let complete = sessions
            .iter()
            .filter(|s| s.state == Some(SessionState::Complete))
            .count();
        if complete == FLEET {
            break sessions;
        }
        if std::time::Instant::now() >= deadline {
            let unfinished: Vec<String> = sessions
                .iter()
                .filter(|s| s.state != Some(SessionState::Complete))
                .map(|s| format!("{} {:?}: {:?}", s.id, s.state, s.state_reason))
                .collect();
            panic!(
                "{complete} of {FLEET} turns ended; the others:\n{}",
                unfinished.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("every turn ended after {:?}", started.elapsed());
    let ids: HashSet<String> = sessions.iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, made, "the list holds exactly the sessions made");
    let worktrees: HashSet<_> = sessions
        .iter()
        .filter(|s| s.worktree_owned)
        .map(|s| s.worktree.clone())
        .collect();
    assert_eq!(worktrees.len(), IN_WORKTREES, "each in its own worktree");

    // The CLI numbers them as the list orders them, every number from 1 to 1,000.
    let out = tk.cru(&["session", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for (i, session) in sessions.iter().enumerate() {
        let row = format!("[{}]", i + 1);
        assert!(
            text.lines()
                .any(|l| l.contains(&row) && l.contains(&session.display_name)),
            "{row} {} is not listed",
            session.display_name
        );
    }
    for n in [1, 2, 10, 99, 100, 500, 999, 1000] {
        let out = tk.cru(&["session", "status", &n.to_string(), "--json"]);
        assert!(out.status.success(), "[{n}]: {}", stderr(&out));
        let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(status["id"], sessions[n - 1].id.as_str(), "[{n}]");
    }
    let out = tk.cru(&["session", "status", "[1001]"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("numbers 1000 session(s)"),
        "{}",
        stderr(&out)
    );

    // The workbench shows them: the status bar a window of them, the sessions overlay
    // counts them and finds the last by its number.
    let root = tk.root().display().to_string();
    let term = Tmux::start(
        "fleet",
        (160, 40),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        cru(),
        &[],
    );
    term.wait_text("▸[1]");
    term.keys(&["M-s"]);
    term.wait_text("sessions · 1000 ·");
    term.type_text("1000");
    let last = &sessions[FLEET - 1];
    let title = format!("[1000] {} ·", last.display_name);
    let task = last.task.clone().unwrap_or_default();
    // Focused, in the status bar too, with its transcript drawn (one frame may be
    // caught half written: wait for the whole of it).
    term.wait_for("[1000] focused and its transcript drawn", |screen| {
        screen.contains(&title)
            && screen
                .lines()
                .last()
                .is_some_and(|bar| bar.contains("▸[1000]"))
            && screen
                .lines()
                .any(|l| l.starts_with("│›") && l.contains(&task))
    });
    term.keys(&["C-q"]);

    eprintln!("listed, addressed and shown after {:?}", started.elapsed());
    // Deleted with their worktrees and branches: two by number with the CLI, the rest
    // over the socket.
    for n in ["1000", "1"] {
        let out = tk.cru(&["session", "delete", n, "--branch"]);
        assert!(out.status.success(), "delete {n}: {}", stderr(&out));
    }
    let rest: Vec<String> = sessions[1..FLEET - 1]
        .iter()
        .map(|s| s.id.clone())
        .collect();
    for wave in rest.chunks(AT_ONCE) {
        let calls: Vec<_> = wave
            .iter()
            .map(|id| {
                let client = Arc::clone(&client);
                let id = id.clone();
                tokio::spawn(async move {
                    client
                        .call_value(
                            "session.delete",
                            json!({"session_id": id, "delete_branch": true}),
                        )
                        .await
                        .map_err(|e| format!("{id}: {e}"))
                })
            })
            .collect();
        for call in calls {
            call.await.unwrap().unwrap();
        }
    }
    eprintln!("deleted after {:?}", started.elapsed());
    assert!(listed(&client).await.is_empty(), "every session is gone");
    let branches = std::process::Command::new("git")
        .arg("-C")
        .arg(tk.root())
        .args(["branch", "--list"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&branches).trim(),
        "* main",
        "every session's branch is gone"
    );
    for session in &sessions {
        if let Some(worktree) = &session.worktree {
            assert!(
                !std::path::Path::new(worktree).exists(),
                "{worktree} is left behind"
            );
        }
    }
}
