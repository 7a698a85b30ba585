//! Reviewing and landing a session's work from the workbench, end to end: `/diff`, a
//! review comment sent back to the agent, `/commit`, `/merge` (checked with git) and a
//! merge refused for a conflict; the conflict radar with two sessions on one file; and
//! the session controls (Esc cancels, `/stop`, `/restart`, `/rename`, `/delete`,
//! `/fork`) in a real terminal.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use crate::sessions::{agent_kiln, git};
use crate::tmux::Tmux;

fn open(name: &str, tk: &TestKiln) -> Tmux {
    let root = tk.root().display().to_string();
    Tmux::start(
        name,
        (140, 40),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    )
}

fn command(term: &Tmux, line: &str) {
    term.type_text(line);
    term.keys(&["Enter"]);
}

/// The status bar: the screen's last non-empty line.
fn status_bar(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// Session `n`'s part of the status bar: from its `[n]` to the next session's.
fn segment(screen: &str, n: usize) -> String {
    let bar = status_bar(screen);
    let Some(start) = bar.find(&format!("[{n}]")) else {
        return String::new();
    };
    let rest = &bar[start + 1..];
    let end = rest.find('[').unwrap_or(rest.len());
    bar[start..start + 1 + end].to_string()
}

fn sessions(tk: &TestKiln) -> Vec<Value> {
    let out = tk.cru(&["session", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_change_is_reviewed_commented_on_and_merged_and_a_conflict_is_refused() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let term = open("land", &tk);
    term.wait_text("no sessions — /new creates one");
    command(
        &term,
        "/new --agent scripted write greeting.txt hello from the agent",
    );
    term.wait_for("the session done", |s| status_bar(s).contains("●done"));

    // The diff shows the new file and its line.
    command(&term, "/diff");
    let screen = term.wait_text("greeting.txt · new · +1 -0");
    assert!(screen.contains("+hello from the agent"), "{screen}");
    assert!(screen.contains("→ main"), "{screen}");
    // A comment on the added line (file heading, hunk heading, then the line).
    term.keys(&["Down", "Down", "c"]);
    term.type_text("say it louder");
    term.keys(&["Enter"]);
    term.wait_text("✎ say it louder");
    term.keys(&["Escape"]);
    // A key right behind Escape would be read with it as one Alt chord: wait for the
    // diff to close first.
    term.wait_for("the diff closed", |s| !s.contains("c comment · esc closes"));
    command(&term, "/review send");
    term.wait_text("unknown command: - greeting.txt:1: say it louder");
    term.wait_for("the review turn done", |s| status_bar(s).contains("●done"));

    // Commit and merge: the change is on main in the kiln.
    command(&term, "/commit");
    term.wait_text("committed ");
    command(&term, "/merge");
    term.wait_text("landed on main");
    let landed = git(tk.root(), &["show", "main:greeting.txt"]);
    assert_eq!(landed, "hello from the agent");
    let log = git(tk.root(), &["log", "--oneline", "-3", "main"]);
    assert!(log.contains("Merge "), "{log}");

    // A second session changes README.md while the human changes it on main: the
    // merge is refused, naming the file, and main is as the human left it.
    command(
        &term,
        "/new --agent scripted write README.md the agent's version",
    );
    term.wait_for("session 2 done", |s| {
        let bar = status_bar(s);
        bar.contains("▸[2]") && bar.matches("●done").count() == 2
    });
    command(&term, "/commit");
    term.wait_text("committed ");
    std::fs::write(tk.root().join("README.md"), "the human's version\n").unwrap();
    git(
        tk.root(),
        &["commit", "-q", "-am", "the human edits the readme"],
    );
    let before = git(tk.root(), &["rev-parse", "main"]);
    command(&term, "/merge");
    let screen = term.wait_text("conflicts with main in README.md");
    assert!(!screen.contains("landed on"), "{screen}");
    assert_eq!(git(tk.root(), &["rev-parse", "main"]), before);
    assert_eq!(
        std::fs::read_to_string(tk.root().join("README.md")).unwrap(),
        "the human's version\n"
    );
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

#[tokio::test]
async fn two_sessions_changing_one_file_are_flagged_by_the_radar() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    for (branch, text) in [("feat/one", "one"), ("feat/two", "two"), ("feat/three", "")] {
        let task = if text.is_empty() {
            "write elsewhere.txt apart".to_string()
        } else {
            format!("write shared.txt from {text}")
        };
        let out = tk.cru(&[
            "session",
            "new",
            "--agent",
            "scripted",
            "--worktree",
            branch,
            "--task",
            &task,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut report = String::new();
    wait_until("the radar to pair the two", Duration::from_secs(30), || {
        let out = tk.cru(&["session", "conflicts"]);
        report = stdout(&out);
        report.contains("shared.txt")
    })
    .await;
    assert!(
        report.contains("feat/one") && report.contains("feat/two"),
        "{report}"
    );
    assert!(!report.contains("feat/three"), "{report}");
    assert!(
        report.contains("shared.txt lines 1"),
        "the same lines: {report}"
    );
    let json = tk.cru(&["session", "conflicts", "--json"]);
    let value: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(value["pairs"].as_array().unwrap().len(), 1, "{value}");

    // A person edits the third session's worktree while it rests: no turn ends, and the
    // radar sees it all the same (it watches the worktrees it has read).
    let three = sessions(&tk)
        .into_iter()
        .find(|s| s["branch"] == "feat/three")
        .unwrap();
    let worktree = tk.root().join(three["worktree"].as_str().unwrap());
    std::fs::write(worktree.join("shared.txt"), "by hand\n").unwrap();
    wait_until(
        "the radar to pair the edit by hand",
        Duration::from_secs(30),
        || {
            let json = tk.cru(&["session", "conflicts", "--json"]);
            let value: Value = serde_json::from_str(&stdout(&json)).unwrap();
            value["pairs"].as_array().unwrap().len() == 3
        },
    )
    .await;
    let report = stdout(&tk.cru(&["session", "conflicts"]));
    assert!(report.contains("feat/three"), "{report}");

    // A pull request needs gh and a remote; without them the refusal says which.
    let pr = tk.cru(&["session", "pr", "feat/one"]);
    assert!(!pr.status.success());
    let why = stderr(&pr);
    assert!(
        why.contains("GitHub CLI, gh") || why.contains("no remote"),
        "{why}"
    );
    drop(client);
}

#[test]
fn the_focused_session_is_cancelled_stopped_restarted_renamed_deleted_and_forked() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let term = open("control", &tk);
    term.wait_text("no sessions — /new creates one");
    // A hung turn: Esc on the empty input cancels it, and it shows cancelled.
    command(&term, "/new --agent loader hang");
    term.wait_for("the turn running", |s| status_bar(s).contains("●working"));
    term.keys(&["Escape"]);
    term.wait_for("cancelled", |s| status_bar(s).contains("●cancelled"));
    let status = stdout(&tk.cru(&["session", "status", "1"]));
    assert!(status.contains("cancelled"), "{status}");

    command(&term, "/new --agent scripted say the second one");
    term.wait_for("session 2 done", |s| {
        let bar = status_bar(s);
        bar.contains("▸[2]") && bar.contains("●done") && bar.contains("●cancelled")
    });
    let status = tk.cru(&["session", "status", "2"]);
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("@ scripted"),
        "{}",
        stdout(&status)
    );

    // Session 1: stop, restart (the loader agent resumes its own session), rename.
    term.keys(&["M-1"]);
    term.wait_for("session 1 focused", |s| status_bar(s).contains("▸[1]"));
    command(&term, "/stop");
    term.wait_for("stopped", |s| {
        status_bar(s).contains("▸[1]") && segment(s, 1).contains("●stopped")
    });
    command(&term, "/restart");
    term.wait_text("resumed ");
    term.wait_for("restarted", |s| {
        status_bar(s).contains("▸[1]") && segment(s, 1).contains("●done")
    });
    let first = sessions(&tk)[0].clone();
    assert_eq!(first["state_reason"], "its agent was restarted", "{first}");
    command(&term, "/rename alpha");
    term.wait_for("renamed", |s| status_bar(s).contains("alpha"));

    // Fork session 2 onto a new branch; the fork is focused.
    term.keys(&["M-2"]);
    command(&term, "/fork --worktree feat/forked say the fork speaks");
    term.wait_for("the fork focused", |s| status_bar(s).contains("▸[3]"));
    term.wait_text("the fork speaks");
    let list = sessions(&tk);
    assert_eq!(list.len(), 3);
    assert_eq!(list[2]["branch"], "feat/forked", "{}", list[2]);
    let base = git(
        tk.root(),
        &["rev-parse", list[1]["branch"].as_str().unwrap()],
    );
    assert_eq!(
        git(tk.root(), &["rev-parse", "feat/forked"]),
        base,
        "forked from its HEAD"
    );

    // Delete session 1 with its worktree and branch.
    term.keys(&["M-1"]);
    let worktree = list[0]["worktree"].as_str().unwrap().to_string();
    command(&term, "/delete --worktree --branch --force");
    term.wait_text("its worktree, its branch");
    let list = sessions(&tk);
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(list.iter().all(|s| s["display_name"] != "alpha"));
    assert!(!std::path::Path::new(&worktree).exists(), "{worktree}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}
