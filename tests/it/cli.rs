//! The `cru` command line against a real, auto-started daemon.

use serde_json::Value;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn inbox_cli_lists_shows_answers_and_clears() {
    let t = TestKiln::new();
    let _cleanup = KillOnDrop(t.kiln.clone());
    let c = t.client().await;
    let s = register(&c, "claude").await;

    let out = t.cru(&[
        "inbox",
        "send",
        "--session",
        &s,
        "--type",
        "decision_needed",
        "Which auth strategy?",
        "--option",
        "JWT",
        "--option",
        "Session",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let decision = stdout(&out).trim().to_string();
    let out = t.cru(&[
        "inbox",
        "send",
        "--session",
        &s,
        "--type",
        "task_complete",
        "Tests pass",
        "--body",
        "all 42",
    ]);
    let done = stdout(&out).trim().to_string();
    let bad = t.cru(&["inbox", "send", "--session", &s, "--type", "shout", "x"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("unknown type \"shout\""),
        "{}",
        stderr(&bad)
    );

    let list = stdout(&t.cru(&["inbox"]));
    assert!(
        list.contains("SESSION") && list.contains("TITLE"),
        "a table: {list}"
    );
    assert!(
        list.contains("Which auth strategy? [JWT/Session]"),
        "{list}"
    );
    assert!(list.contains("main @ claude"), "{list}");
    let json: Value = serde_json::from_str(&stdout(&t.cru(&["inbox", "--json"]))).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);

    let shown = stdout(&t.cru(&["inbox", "show", &done]));
    assert!(
        shown.contains("Tests pass") && shown.contains("all 42"),
        "{shown}"
    );
    let unread: Value = serde_json::from_str(&stdout(&t.cru(&["inbox", "--json"]))).unwrap();
    assert_eq!(unread.as_array().unwrap().len(), 1, "show marked it read");

    let shown = stdout(&t.cru(&["inbox", "show", &decision]));
    assert!(
        shown.contains(&format!("cru inbox respond {decision} <JWT|Session>")),
        "{shown}"
    );
    let wrong = t.cru(&["inbox", "respond", &decision, "Cookies"]);
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("not one of the choices"),
        "{}",
        stderr(&wrong)
    );
    let ok = t.cru(&["inbox", "respond", &decision, "Session"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("answered"), "{}", stdout(&ok));

    let all = stdout(&t.cru(&["inbox", "--all"]));
    assert!(all.contains("answered: Session"), "{all}");
    let cleared = stdout(&t.cru(&["inbox", "clear"]));
    assert!(cleared.contains("2 read messages deleted"), "{cleared}");
    assert!(stdout(&t.cru(&["inbox", "--all"])).contains("the inbox is empty"));
}

#[tokio::test(flavor = "multi_thread")]
async fn session_list_and_daemon_status() {
    let t = TestKiln::new();
    let _cleanup = KillOnDrop(t.kiln.clone());
    let none = t.cru(&["daemon", "status"]);
    assert_eq!(none.status.code(), Some(3));
    assert!(stdout(&none).contains("no daemon running"));
    // `session list` starts the daemon by itself.
    assert!(stdout(&t.cru(&["session", "list"])).contains("no sessions"));
    let c = t.client().await;
    let s = register(&c, "claude").await;
    for title in ["one", "two"] {
        testkit::daemon::call::<crucible::protocol::methods::InboxSend>(
            &c,
            testkit::params::send(&s, crucible::protocol::MsgType::Info, title, &[]),
        )
        .await;
    }
    let list = stdout(&t.cru(&["session", "list"]));
    assert!(
        list.contains("[1]") && list.contains("main @ claude") && list.contains("active"),
        "{list}"
    );
    let json: Value =
        serde_json::from_str(&stdout(&t.cru(&["session", "list", "--json"]))).unwrap();
    assert_eq!(json[0]["display_name"], "main @ claude");
    let status = stdout(&t.cru(&["daemon", "status"]));
    assert!(
        status.contains("sessions") && status.contains("surrealkv://"),
        "{status}"
    );
    drop(c);
    assert!(stdout(&t.cru(&["daemon", "stop"])).contains("daemon stopped"));
    assert_eq!(t.cru(&["daemon", "status"]).status.code(), Some(3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_settings_file_names_the_file_and_key_and_starts_nothing() {
    let t = TestKiln::with_settings("[daemon]\ngrace_period = 3\n");
    let out = t.cru(&["inbox"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(".crucible.toml") && err.contains("grace_period"),
        "{err}"
    );
    assert!(daemon_processes(t.root()).is_empty());
    std::fs::write(
        t.root().join(".crucible.toml"),
        "[inbox]\ndefault_limit = 0\n",
    )
    .unwrap();
    let err = stderr(&t.cru(&["inbox"]));
    assert!(err.contains("default_limit"), "{err}");
}

/// A reader that stops early (`| head -c 1`, `| grep -q`) ends `cru` quietly: no panic
/// message, status 0 (or 141 from SIGPIPE), for output larger than the pipe's buffer.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_pipe_ends_the_cli_quietly() {
    let t = TestKiln::new();
    let _cleanup = KillOnDrop(t.kiln.clone());
    let c = t.client().await;
    for n in 0..400 {
        register(
            &c,
            &format!("agent-with-a-long-name-{n:04}-{}", "x".repeat(100)),
        )
        .await;
    }
    let full = t.cru(&["session", "list", "--json"]);
    assert!(
        full.stdout.len() > 128 * 1024,
        "{} bytes",
        full.stdout.len()
    );
    for args in ["session list --json", "session list", "inbox --json"] {
        let script = format!(
            "{CRU:?} --kiln {:?} {args} | head -c 1 >/dev/null; echo \"status ${{PIPESTATUS[0]}}\" >&2",
            t.root()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash");
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{args}: {err}");
        assert!(!err.contains("Broken pipe"), "{args}: {err}");
        assert!(
            err.contains("status 0") || err.contains("status 141"),
            "{args}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn many_sessions_are_made_at_once_each_with_its_branch_and_task() {
    let t = crate::sessions::agent_kiln("");
    let _cleanup = KillOnDrop(t.kiln.clone());
    let tasks = t.root().join("tasks.txt");
    std::fs::write(&tasks, "# today\nsay one\n\nsay two\nsay three\n").unwrap();
    let out = t.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--worktree",
        "batch",
        "--tasks",
        tasks.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let made: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let mut shown: Vec<(String, String)> = made
        .iter()
        .map(|s| {
            (
                s["branch"].as_str().unwrap_or_default().to_string(),
                s["task"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    shown.sort();
    assert_eq!(
        shown,
        [
            ("batch-1".to_string(), "say one".to_string()),
            ("batch-2".to_string(), "say two".to_string()),
            ("batch-3".to_string(), "say three".to_string()),
        ],
        "{made:?}"
    );
    let out = t.cru(&[
        "session", "new", "--agent", "scripted", "--task", "say hi", "--count", "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("created 2 sessions:"),
        "{}",
        stdout(&out)
    );
    let list = t.cru(&["session", "list", "--json"]);
    let all: Vec<Value> = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(all.len(), 5, "{all:?}");
    let refused = t.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--in-place",
        "--count",
        "2",
    ]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("--in-place"),
        "{}",
        stderr(&refused)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_on_a_worktree_of_a_dirty_kiln_is_warned_of_what_it_will_not_see() {
    let t = crate::sessions::agent_kiln("");
    let _cleanup = KillOnDrop(t.kiln.clone());
    let new = |extra: &[&str]| {
        let mut args = vec!["session", "new", "--agent", "scripted", "--task", "say hi"];
        args.extend_from_slice(extra);
        t.cru(&args)
    };
    let clean = new(&[]);
    assert!(clean.status.success(), "{}", stderr(&clean));
    assert!(
        !stderr(&clean).contains("uncommitted"),
        "{}",
        stderr(&clean)
    );
    let tracked = std::process::Command::new("git")
        .arg("-C")
        .arg(t.root())
        .args(["ls-files"])
        .output()
        .unwrap();
    let file = String::from_utf8_lossy(&tracked.stdout)
        .lines()
        .next()
        .expect("a tracked file")
        .to_string();
    std::fs::write(t.root().join(&file), "changed, not committed\n").unwrap();
    let dirty = new(&[]);
    assert!(dirty.status.success(), "{}", stderr(&dirty));
    assert!(
        stderr(&dirty).contains("1 uncommitted change(s)"),
        "{}",
        stderr(&dirty)
    );
    let in_place = new(&["--in-place"]);
    assert!(
        !stderr(&in_place).contains("uncommitted"),
        "{}",
        stderr(&in_place)
    );
}
