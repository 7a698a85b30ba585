//! A first run with nothing configured: a well-known ACP agent on `PATH` is a built-in
//! profile, `cru agents` lists it, and `/new <task>` in the workbench starts it.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;
use crate::sessions::git;
use crate::tmux::Tmux;

/// A folder to be the whole `PATH`: the scripted agent as `claude-agent-acp`, and the
/// programs crucible itself calls (`git`, `sh`, `cru`). Nothing else is found, so no
/// other agent installed on the machine changes what `/new` picks.
fn path_with_claude(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(scripted_agent(), bin.join("claude-agent-acp")).unwrap();
    symlink(CRU, bin.join("cru")).unwrap();
    for program in ["git", "sh"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        assert!(!path.is_empty(), "{program} is not installed");
        symlink(path, bin.join(program)).unwrap();
    }
    bin.display().to_string()
}

#[test]
fn with_no_settings_a_built_in_agent_on_path_starts_from_new() {
    let tk = TestKiln::new();
    std::fs::remove_file(tk.kiln.settings_path()).unwrap();
    git(tk.root(), &["init", "-q", "-b", "main"]);
    std::fs::write(tk.root().join("README.md"), "project\n").unwrap();
    git(tk.root(), &["add", "README.md"]);
    git(tk.root(), &["commit", "-q", "-m", "start"]);
    let _guard = KillOnDrop(tk.kiln.clone());
    let tools = tempfile::tempdir().unwrap();
    let path = path_with_claude(tools.path());

    let agents = Command::new(CRU)
        .args(["--kiln", &tk.root().display().to_string(), "agents"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(agents.status.success(), "{}", stderr(&agents));
    let text = stdout(&agents);
    let claude = text
        .lines()
        .find(|l| l.starts_with("claude "))
        .unwrap_or_else(|| panic!("claude is listed:\n{text}"));
    assert!(
        claude.contains("built-in") && claude.contains(&format!("{path}/claude-agent-acp")),
        "{text}"
    );
    assert!(text.contains("codex-acp: not found"), "{text}");
    assert!(
        text.contains("/new <task> in the workbench starts claude"),
        "{text}"
    );
    // --check starts it and asks initialize.
    let checked = Command::new(CRU)
        .args([
            "--kiln",
            &tk.root().display().to_string(),
            "agents",
            "--check",
        ])
        .env("PATH", &path)
        .output()
        .unwrap();
    let text = stdout(&checked);
    let claude = text
        .lines()
        .find(|l| l.starts_with("claude "))
        .unwrap_or("");
    assert!(claude.contains("ok: cru-scripted-agent"), "{text}");

    let root = tk.root().display().to_string();
    // The shell tmux starts the program with may set PATH again: `env` sets it last.
    let path_setting = format!("PATH={path}");
    let term = Tmux::start(
        "zero-setup",
        (120, 30),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        "/usr/bin/env",
        &[&path_setting, CRU],
    );
    term.wait_text("/new <task> starts claude");
    term.type_text("/new fix it");
    term.keys(&["Enter"]);
    term.wait_text("unknown command: fix it");

    let out = tk.cru(&["session", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list[0]["agent_name"], "claude", "{list}");
    assert_eq!(list[0]["task"], "fix it", "{list}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

/// Waits until the session's transcript holds `text`.
async fn wait_said(client: &crucible::client::Client, id: &str, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let said = crate::sessions::transcript(client, id)
            .await
            .iter()
            .any(|e| e.text.as_deref().is_some_and(|t| t.contains(text)));
        if said {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never said {text:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn an_approval_named_like_codexs_is_answered_by_intent_or_number() {
    use crate::sessions::{agent_kiln, create, wait_message_where};
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let task = "codex-permit t1 Run the tests\n\
                codex-permit t2 Push the branch\n\
                codex-permit t3 Delete the cache";
    let s = create(&client, "scripted", Some(task)).await;
    for (title, answer, chosen) in [
        ("Run the tests", "approve", "approved"),
        ("Push the branch", "2", "approved-always"),
        ("Delete the cache", "deny", "abort"),
    ] {
        let message =
            wait_message_where(&client, &s.id, title, |m| m.title == title && !m.responded).await;
        assert_eq!(
            message.option_kinds.as_deref(),
            Some(
                &[
                    "allow_once".to_string(),
                    "allow_always".into(),
                    "reject_once".into()
                ][..]
            )
        );
        if title == "Run the tests" {
            let shown = stdout(&tk.cru(&["inbox", "show", &message.id]));
            assert!(shown.contains("1. Yes, proceed  (allow once)"), "{shown}");
            assert!(
                shown.contains("3. No, and tell Codex what to do differently  (reject once)"),
                "{shown}"
            );
        }
        let out = tk.cru(&["inbox", "respond", &message.id, answer]);
        assert!(out.status.success(), "{answer}: {}", stderr(&out));
        wait_said(&client, &s.id, &format!("chose {chosen}: {title}")).await;
    }
}

#[tokio::test]
async fn the_agents_usage_and_cost_are_kept_with_the_session() {
    use crate::sessions::{agent_kiln, create, wait_state};
    use crucible::protocol::SessionState;
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(
        &client,
        "scripted",
        Some("usage 48200 200000 0.42 USD\nsay done"),
    )
    .await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(
        status.contains("48200 of 200000 tokens in context; cost so far 0.42 USD"),
        "{status}"
    );
    // Kept in the store: a new daemon reads it back.
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json = stdout(&tk.cru(&["session", "status", &s.id, "--json"]));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["usage"]["used"], 48200, "{value}");
    assert_eq!(value["usage"]["currency"], "USD", "{value}");
    drop(client);
}
