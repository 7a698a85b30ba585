//! The truth after faults, with the real daemon and the scripted agent: what a session
//! spent survives `cru daemon stop` and kill -9; a turn the daemon's end cut short is
//! `interrupted` and sent again with one command; prompts answered `queued` (behind a
//! running turn, or behind one a usage limit parked) run after a kill -9 and a restart;
//! an agent killed mid-turn is named with its signal; a task too large for one write is
//! refused alone; of two answers at once the loser hears it was answered; clients that
//! start while the last daemon idles out all get one.

use std::time::Duration;

use crucible::protocol::methods as m;
use crucible::protocol::params::{CreateSessionParams, SessionListParams};
use crucible::protocol::{EntryKind, SessionState};
use serde_json::{Value, json};
use testkit::params;

use crate::budget::prompt;
use crate::common::*;
use crate::sessions::wait_said;
use crate::sessions::{agent_kiln, create, said, session, transcript, wait_session, wait_state};

/// `cru usage --by session --json`: (tokens, cost) of the one session listed.
fn usage(tk: &TestKiln) -> (Value, Value) {
    let out = tk.cru(&["usage", "--by", "session", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Value = serde_json::from_str(&stdout(&out)).expect("usage JSON");
    let row = &rows[0];
    (row["tokens"].clone(), row["cost_usd"].clone())
}

/// How many prompts whose text starts with `start` the session's transcript has.
async fn prompts_starting(client: &crucible::client::Client, id: &str, start: &str) -> usize {
    transcript(client, id)
        .await
        .into_iter()
        .filter(|e| e.kind == EntryKind::Prompt)
        .filter_map(|e| e.text)
        .filter(|t| t.starts_with(start))
        .count()
}

#[tokio::test]
async fn what_a_session_spent_is_kept_across_a_daemon_stop_and_a_kill_9() {
    let tk = agent_kiln("[budget.prices.scripted]\ninput = 1.0\noutput = 10.0\n");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let s = create(
        &client,
        "scripted",
        Some("tokens 200000 50000\nsay counted"),
    )
    .await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let spent = |s: &crucible::protocol::Session| s.spent.clone().expect("spent");
    let before = spent(&session(&client, &s.id).await);
    assert_eq!(before.tokens, Some(250_000), "{before:?}");
    // 200,000 in at $1/M and 50,000 out at $10/M.
    let cost = before.cost.expect("priced");
    assert!((cost - 0.7).abs() < 1e-9, "{before:?}");
    assert_eq!(usage(&tk), (json!(250_000), json!(cost)));
    let out = tk.cru(&["session", "stop", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(client);

    // A clean stop of the daemon, then a new one.
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    daemon.wait_exit(Duration::from_secs(20)).await;
    let mut daemon = tk.spawn_daemon().await;
    assert_eq!(usage(&tk), (json!(250_000), json!(cost)), "after a stop");
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(status.contains("250000 tokens; 0.70 USD"), "{status}");

    // kill -9, then a new one: still there, and the next turn adds to it.
    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());
    assert_eq!(usage(&tk), (json!(250_000), json!(cost)), "after kill -9");
    let client = tk.client().await;
    let out = tk.cru(&["session", "restart", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_state(&client, &s.id, SessionState::Complete).await;
    prompt(&client, &s.id, "tokens 1000 0\nsay more").await;
    wait_said(&client, &s.id, "more").await;
    let after = wait_session(&client, &s.id, "the second turn counted", |s| {
        s.spent.as_ref().and_then(|s| s.tokens) == Some(251_000)
    })
    .await;
    assert_eq!(spent(&after).days.len(), 1, "{after:?}");
}

#[tokio::test]
async fn a_turn_cut_short_by_kill_9_is_interrupted_and_sent_again_with_one_command() {
    let tk = agent_kiln("");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let s = create(
        &client,
        "loader",
        Some("say step one\nsleep 4000\nsay step two"),
    )
    .await;
    wait_state(&client, &s.id, SessionState::Working).await;
    // Acknowledged while the turn runs: it waits behind it.
    let queued = prompt(&client, &s.id, "say queued behind").await;
    assert!(queued.queued, "{queued:?}");
    drop(client);
    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());

    // Not `complete`: the turn never ended, and the session says how it was cut short.
    let client = tk.client().await;
    let cut = wait_state(&client, &s.id, SessionState::Interrupted).await;
    let reason = cut.state_reason.clone().unwrap_or_default();
    assert!(reason.contains("the daemon stopped"), "{reason}");
    assert!(reason.contains("1 prompt waits behind it"), "{reason}");
    assert_eq!(
        cut.turn_prompt.as_deref(),
        Some("say step one\nsleep 4000\nsay step two")
    );
    assert_eq!(cut.queued, vec!["say queued behind".to_string()]);
    // Nothing ran on its own meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!said(&client, &s.id).await.contains("queued behind"));

    // One command sends the cut turn again, then what waited behind it.
    let out = tk.cru(&["session", "resend", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("sent again"), "{}", stdout(&out));
    wait_said(&client, &s.id, "step two").await;
    wait_said(&client, &s.id, "queued behind").await;
    let done = wait_state(&client, &s.id, SessionState::Complete).await;
    assert!(
        done.queued.is_empty() && done.turn_prompt.is_none(),
        "{done:?}"
    );
    assert_eq!(prompts_starting(&client, &s.id, "say step one").await, 2);

    // With nothing cut short, a resend is refused and sends nothing.
    let out = tk.cru(&["session", "resend", &s.id]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no turn that was cut short"),
        "{}",
        stderr(&out)
    );
    assert_eq!(prompts_starting(&client, &s.id, "say step one").await, 2);
}

#[tokio::test]
async fn a_prompt_a_usage_limit_parked_and_one_queued_behind_it_run_after_kill_9() {
    let tk = agent_kiln("");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let s = create(&client, "loader", Some("say ready")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    // A limit that outlives the agent's process, lifted while no daemon runs.
    let limit = tk.root().join("limit-holds");
    std::fs::write(&limit, "").unwrap();
    let text = format!("limit-while {} 3600\nsay went through", limit.display());
    prompt(&client, &s.id, &text).await;
    wait_state(&client, &s.id, SessionState::Parked).await;
    let queued = prompt(&client, &s.id, "say after it").await;
    assert!(queued.queued, "{queued:?}");
    drop(client);
    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());
    std::fs::remove_file(&limit).unwrap();

    let client = tk.client().await;
    wait_said(&client, &s.id, "went through").await;
    wait_said(&client, &s.id, "after it").await;
    let done = wait_state(&client, &s.id, SessionState::Complete).await;
    assert!(done.queued.is_empty(), "{done:?}");
}

#[tokio::test]
async fn the_agent_killed_mid_turn_is_named_and_a_resend_starts_a_new_one() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("say started\nsleep 600000")).await;
    wait_state(&client, &s.id, SessionState::Working).await;
    let pid = session(&client, &s.id).await.agent_pid.expect("pid");
    crucible::sys::signal_group(pid, libc::SIGKILL);

    let cut = wait_state(&client, &s.id, SessionState::Interrupted).await;
    let reason = cut.state_reason.clone().unwrap_or_default();
    assert!(reason.contains("killed by signal 9 (SIGKILL)"), "{reason}");
    assert!(!reason.contains("normally"), "{reason}");
    // The new agent gets the turn again.
    let out = tk.cru(&["session", "resend", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_session(&client, &s.id, "the turn sent again", |s| {
        s.state == Some(SessionState::Working) && s.agent_pid.is_some_and(|p| p != pid)
    })
    .await;
    assert_eq!(prompts_starting(&client, &s.id, "say started").await, 2);
}

/// `n` bytes of words that are all different: what the search index takes most room for.
fn distinct_words(n: usize) -> String {
    let mut text = String::new();
    let mut i = 0u64;
    while text.len() < n {
        text.push_str(&format!("w{i:x}q "));
        i += 1;
    }
    text
}

#[tokio::test]
async fn a_task_too_large_for_one_write_is_refused_alone_and_the_next_write_succeeds() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let big = distinct_words(200 * 1024);
    let err = client
        .try_call::<m::SessionCreate>(CreateSessionParams {
            agent: "scripted".into(),
            task: Some(big),
            ..Default::default()
        })
        .await
        .expect_err("a 200 KiB task is refused");
    assert_eq!(err.rpc_code(), Some(-32602), "{err}");
    assert!(
        err.to_string().contains("over the 64 KiB a task may hold"),
        "{err}"
    );
    let list = client
        .call::<m::SessionList>(SessionListParams::default())
        .await;
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);

    // The store took no harm: the next writes of every kind go through.
    let s = create(&client, "scripted", Some("say still writing")).await;
    wait_said(&client, &s.id, "still writing").await;
    let err = client
        .try_call::<m::SessionPrompt>(params::prompt(&s.id, &distinct_words(300 * 1024)))
        .await
        .expect_err("a 300 KiB prompt is refused");
    assert_eq!(err.rpc_code(), Some(-32602), "{err}");
    assert!(
        err.to_string()
            .contains("over the 256 KiB a prompt may hold"),
        "{err}"
    );
    prompt(&client, &s.id, "say and again").await;
    wait_said(&client, &s.id, "and again").await;
    let out = tk.cru(&["daemon", "status"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn of_two_answers_at_once_the_loser_is_told_it_was_answered_never_a_store_error() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let owner = tk.client().await;
    let asker = register(&owner, "asker").await;
    let (first, second) = (tk.client().await, tk.client().await);
    for round in 0..60 {
        let sent = testkit::daemon::call::<m::InboxSend>(
            &owner,
            params::send(
                &asker,
                crucible::protocol::MsgType::DecisionNeeded,
                &format!("round {round}"),
                &["a", "b"],
            ),
        )
        .await;
        let id = sent.id;
        let (a, b) = tokio::join!(
            testkit::daemon::try_call::<m::InboxRespond>(&first, params::respond(&id, "a")),
            testkit::daemon::try_call::<m::InboxRespond>(&second, params::respond(&id, "b")),
        );
        assert_eq!(
            [&a, &b].iter().filter(|r| r.is_ok()).count(),
            1,
            "round {round}: one answer wins: {a:?} {b:?}"
        );
        for lost in [a, b].into_iter().filter_map(Result::err) {
            assert_eq!(lost.rpc_code(), Some(-32003), "round {round}: {lost}");
        }
    }
}

#[tokio::test]
async fn clients_that_start_while_the_last_daemon_idles_out_all_get_one() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    // A daemon that leaves one second after its last client.
    let settings = tk.root().join(".crucible.toml");
    let text = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(
        &settings,
        text.replace("grace_period_secs = 60", "grace_period_secs = 1"),
    )
    .unwrap();
    for round in 0..6 {
        let out = tk.cru(&["session", "list"]);
        assert!(out.status.success(), "{}", stderr(&out));
        // Clients arrive around the moment it goes.
        let pause = 950 + 25 * round;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let runs: Vec<_> = (0..8)
            .map(|_| {
                let mut command = std::process::Command::new(CRU);
                command
                    .env("CRU_DAEMON_EXE", CRU)
                    .arg("--kiln")
                    .arg(tk.root())
                    .args(["session", "list"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                command.spawn().unwrap()
            })
            .collect();
        for run in runs {
            let out = run.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
