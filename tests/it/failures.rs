//! Failures that say why: an agent that cannot start names what its stderr said and, for
//! a known agent, how to sign in; `cru agents --check` leaves no process behind.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::{MsgType, SessionState};

use crate::common::*;
use crate::sessions::{agent_kiln, create, wait_message, wait_state};

/// A kiln whose agent profile `profile` runs `program`.
fn kiln_running(program: &Path, profile: &str) -> TestKiln {
    agent_kiln(&format!(
        "[agents.{profile}]\ncommand = {:?}\n",
        program.display().to_string()
    ))
}

/// Starts a session of `profile` and waits for its start to fail: its id, and why.
async fn failed_start(client: &Client, profile: &str, task: &str) -> (String, String) {
    let s = create(client, profile, Some(task)).await;
    let failed = wait_state(client, &s.id, SessionState::Error).await;
    (s.id, failed.state_reason.unwrap_or_default())
}

#[tokio::test]
async fn an_agent_that_cannot_start_names_its_stderr_and_how_to_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    // Named like Codex's adapter: it complains on stderr and ends before answering.
    let program = dir.path().join("codex-acp");
    write_script(
        &program,
        "#!/bin/sh\necho 'starting up' >&2\necho 'Error: no credentials found in ~/.codex' >&2\nexit 3\n",
    );
    let tk = kiln_running(&program, "unsigned");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let (id, reason) = failed_start(&client, "unsigned", "do the thing").await;
    assert!(
        reason.contains("Its stderr ends: starting up / Error: no credentials found in ~/.codex"),
        "{reason}"
    );
    assert!(reason.contains("codex login"), "{reason}");
    assert!(reason.contains("CODEX_API_KEY"), "{reason}");
    let error = wait_message(&client, &id, MsgType::Error).await;
    let body = error.body.unwrap_or_default();
    assert!(body.contains("no credentials found"), "{body}");
    assert!(!body.contains("code -32"), "{body}");

    // A second start quotes only what that start wrote.
    write_script(&program, "#!/bin/sh\necho 'second try' >&2\nexit 1\n");
    let (_, reason) = failed_start(&client, "unsigned", "again").await;
    assert!(reason.contains("Its stderr ends: second try"), "{reason}");
    assert!(!reason.contains("no credentials"), "{reason}");
}

#[tokio::test]
async fn an_agent_that_exits_while_a_helper_holds_its_output_still_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // Its helper keeps the agent's output open, so the connection never sees it end: the
    // exit alone must fail the start, with what stderr said.
    let program = dir.path().join("my-agent");
    write_script(
        &program,
        "#!/bin/sh\nsleep 8 &\necho 'config file is corrupt' >&2\nexit 2\n",
    );
    let tk = kiln_running(&program, "helper");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let (_, reason) = failed_start(&client, "helper", "go").await;
    assert!(
        reason.starts_with("the agent exited with code 2"),
        "{reason}"
    );
    assert!(
        reason.contains("Its stderr ends: config file is corrupt"),
        "{reason}"
    );
}

#[test]
fn agents_check_leaves_no_process_behind() {
    let tk = TestKiln::new();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let pids = dir.path().join("pids");
    // An npm-style wrapper: it starts a helper of its own, then the real agent.
    let agent = scripted_agent();
    write_script(
        &bin.join("claude-agent-acp"),
        &format!(
            "#!/bin/sh\nsleep 300 &\necho $! >> {pids:?}\necho $$ >> {pids:?}\nexec {agent:?}\n"
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
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
    assert!(
        text.lines()
            .any(|l| l.starts_with("claude ") && l.contains("ok: cru-scripted-agent")),
        "{text}\n{}",
        stderr(&checked)
    );
    let started: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    // Started once, for the check (whose answer gives the version too): a helper and
    // the agent.
    assert_eq!(
        started.len(),
        2,
        "the wrapper started its helper and the agent: {started:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<u32> = started
            .iter()
            .copied()
            .filter(|&pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|stat| !stat.contains(") Z "))
            })
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind by cru agents --check: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
