//! Search, end to end: a word said once among hundreds of transcript entries is found by
//! `cru search` (ranked, marked, with its session and entry), and `/search` in the
//! workbench lists it and Enter jumps to it in its session's transcript, scrolled far up
//! from the tail; an inbox message and a session's task are found too.

use serde_json::Value;

use crate::common::*;
use crate::sessions::agent_kiln;
use crate::tmux::Tmux;

/// A task for the scripted agent: `lines` entries of routine talk, each a message and a
/// tool call (so each is its own transcript entry), with `needle` said at `at`.
fn long_task(lines: usize, at: usize, needle: &str) -> String {
    let mut task = Vec::new();
    for i in 0..lines {
        if i == at {
            task.push(format!("say {needle}"));
        } else {
            task.push(format!(
                "say routine progress report number {i} about the build"
            ));
        }
        task.push(format!("tool t{i} check step {i}"));
    }
    task.join("\n")
}

fn new_session(tk: &TestKiln, branch: &str, task: &str) {
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--worktree",
        branch,
        "--task",
        task,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_word_among_many_entries_is_found_and_the_workbench_jumps_to_it() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    new_session(
        &tk,
        "feat/harbour",
        &long_task(300, 12, "the zeppelin finally landed in the harbour"),
    );
    new_session(
        &tk,
        "feat/other",
        &long_task(40, 5, "nothing to see in this one"),
    );
    // The task itself is the first prompt, and the session's task: both hold the
    // needle too. Wait for the agent's message.
    let mut found = Value::Null;
    let said = |v: &Value| {
        v.as_array()
            .into_iter()
            .flatten()
            .filter(|h| h["entry_kind"] == "message")
            .cloned()
            .collect::<Vec<Value>>()
    };
    wait_until_sync("both transcripts to be searchable", || {
        let out = tk.cru(&["search", "zeppelin", "--json"]);
        found = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
        let other = tk.cru(&["search", "nothing", "see", "--type", "transcript", "--json"]);
        !said(&found).is_empty()
            && said(&serde_json::from_str(&stdout(&other)).unwrap_or(Value::Null)).len() == 1
    });
    // Both agents at the end of their scripts, so the needle is far from the tail.
    wait_until_sync("both sessions to finish", || {
        let out = tk.cru(&["session", "list", "--json"]);
        let list: Value = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
        list.as_array()
            .is_some_and(|l| l.len() == 2 && l.iter().all(|s| s["state"] == "complete"))
    });
    let kinds: Vec<(&str, &str)> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["kind"].as_str().unwrap(),
                h["entry_kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 3, "{found:#}");
    for kind in [
        ("transcript", "message"),
        ("transcript", "prompt"),
        ("session", ""),
    ] {
        assert!(kinds.contains(&kind), "{kind:?} in {found:#}");
    }
    let said = said(&found);
    assert_eq!(said.len(), 1, "{found:#}");
    let hit = &said[0];
    assert_eq!(hit["session_name"], "feat/harbour @ scripted");
    let seq = hit["seq"].as_u64().unwrap();
    // The needle is the 13th message, after 12 messages and 12 tool calls (and the
    // prompt): far from the tail of 600 entries.
    assert!((20..60).contains(&seq), "{hit}");
    let snippet = hit["snippet"].as_str().unwrap();
    let (start, end) = (
        hit["marks"][0][0].as_u64().unwrap() as usize,
        hit["marks"][0][1].as_u64().unwrap() as usize,
    );
    let marked: String = snippet.chars().skip(start).take(end - start).collect();
    assert_eq!(marked, "zeppelin", "{hit}");

    // Plain text: where, and the word marked; a stem finds it too ("landing").
    let out = tk.cru(&["search", "landing", "zeppelin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("[1] feat/harbour @ scripted #{seq}")),
        "{text}"
    );
    assert!(
        text.contains("the «zeppelin» finally «landed» in"),
        "{text}"
    );
    // Narrowed to the other session or to inbox messages: nothing; exit status 1.
    let out = tk.cru(&[
        "search",
        "zeppelin",
        "--session",
        "2",
        "--type",
        "transcript",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("Nothing found"), "{}", stdout(&out));
    // The inbox's "done" message of the session names its task: found as a message.
    let out = tk.cru(&["search", "zeppelin", "--type", "inbox", "--json"]);
    let inbox: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let inbox = inbox.as_array().unwrap();
    assert!(!inbox.is_empty());
    assert!(
        inbox
            .iter()
            .all(|h| h["kind"] == "inbox" && h["message_id"].is_string()),
        "{inbox:?}"
    );
    // A query with no word is refused with the reason.
    let out = tk.cru(&["search", "--", "--"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("at least one word"),
        "{}",
        stderr(&out)
    );
    // Session names and tasks are searched too.
    let out = tk.cru(&["search", "harbour", "--type", "session", "--json"]);
    let sessions: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(sessions[0]["kind"], "session", "{sessions:#}");
    assert_eq!(sessions[0]["session_name"], "feat/harbour @ scripted");

    // The workbench: the other session focused, the search lists the hit, Enter jumps.
    let root = tk.root().display().to_string();
    let term = Tmux::start(
        "search",
        (140, 40),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    );
    term.wait_text("[2]");
    term.keys(&["M-2"]);
    term.wait_text("[2] feat/other @ scripted ·");
    let before = term.screen();
    assert!(!before.contains("zeppelin"), "{before}");
    term.type_text("/search zeppelin harbour");
    term.keys(&["Enter"]);
    let screen = term.wait_text("found for “zeppelin harbour”");
    assert!(
        screen.contains(&format!("[1] feat/harbour @ scripted #{seq}")),
        "{screen}"
    );
    // The agent's message ranks first (it is short; the prompt is long): select it.
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| {
            ["#", "inbox", "session"]
                .iter()
                .any(|what| l.contains(&format!("[1] feat/harbour @ scripted {what}")))
        })
        .collect();
    // The message, the prompt and the session's task at least (the inbox's "done"
    // message may quote the task too).
    assert!(rows.len() >= 3, "{screen}");
    assert!(
        screen.contains(&format!("{} found for", rows.len())),
        "{screen}"
    );
    let mut at = rows
        .iter()
        .position(|l| l.contains(&format!("#{seq}")))
        .unwrap();
    while at > 0 {
        term.keys(&["Down"]);
        at -= 1;
    }
    term.keys(&["Enter"]);
    let screen = term.wait_text("[1] feat/harbour @ scripted ·");
    assert!(
        screen.contains("the zeppelin finally landed in the harbour"),
        "the entry is on screen after the jump: {screen}"
    );
    // Scrolled up from the tail: the last entries are not on screen.
    assert!(!screen.contains("report number 299"), "{screen}");
    assert!(screen.contains("more rows"), "{screen}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

/// Polls `check` for up to 60 s.
fn wait_until_sync(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
