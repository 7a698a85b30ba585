//! Budgets with the scripted agent: spending reported by the agent (a session cost, a
//! turn's tokens) is counted; near a budget the inbox is told; at 100% the running turn
//! is asked to end, new turns wait, and the inbox asks to raise the budget or stop; the
//! answer applies at once. What an agent does not report is unknown, never zero.
//! Crucible's own agent counts what its model's answers report.

use std::time::Duration;

use crucible::protocol::{MsgType, Purpose, SessionState};
use serde_json::{Value, json};

use crate::common::*;
use crate::sessions::wait_said;
use crate::sessions::{
    agent_kiln, create, said, session, transcript, wait_message_where, wait_session, wait_state,
};
use testkit::model_server::{ScriptedReply, ScriptedServer};

/// `session.prompt`, which must be answered.
pub(crate) async fn prompt(
    client: &crucible::client::Client,
    id: &str,
    text: &str,
) -> crucible::protocol::PromptResult {
    testkit::daemon::call::<crucible::protocol::methods::SessionPrompt>(
        client,
        testkit::params::prompt(id, text),
    )
    .await
}

/// The first prompt a session's agent was sent, once it was.
async fn first_prompt(client: &crucible::client::Client, id: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let first = transcript(client, id)
            .await
            .into_iter()
            .find(|e| e.kind == crucible::protocol::EntryKind::Prompt)
            .and_then(|e| e.text);
        if let Some(first) = first {
            return first;
        }
        assert!(std::time::Instant::now() < deadline, "no first prompt");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_budget_reached_mid_task_ends_the_turn_holds_the_next_and_a_raise_goes_on() {
    let tk = agent_kiln("[budget]\nsession_cost = 1.0\nwarn_percent = 80\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("usage 10 100 0.5 USD\nsay first")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;

    // 85%: told once, as information.
    prompt(&client, &s.id, "usage 10 100 0.85 USD\nsay second").await;
    let near = wait_message_where(&client, &s.id, "the 80% message", |m| {
        m.msg_type == MsgType::Info && m.title.starts_with("Budget:")
    })
    .await;
    assert_eq!(near.title, "Budget: this session's budget is 85% spent");

    // Over it mid-turn: the turn is asked to end; it never gets to its last line.
    prompt(
        &client,
        &s.id,
        "usage 10 100 1.2 USD\nsleep 20000\nsay never",
    )
    .await;
    let question = wait_message_where(&client, &s.id, "the budget's question", |m| {
        m.msg_type == MsgType::DecisionNeeded
    })
    .await;
    assert_eq!(
        question.title,
        "Budget reached: this session's budget: 1.20 of 1.00 USD"
    );
    assert_eq!(
        question.options.as_deref(),
        Some(&["Raise by 1.00 USD".to_string(), "Stop the session".into()][..])
    );
    assert_eq!(question.purpose, Some(Purpose::BudgetRaise));
    let ended = wait_state(&client, &s.id, SessionState::Cancelled).await;
    assert_eq!(ended.state_reason.as_deref(), Some(question.title.as_str()));

    // A prompt now waits: the session is idle, yet the prompt is queued.
    let reply = prompt(&client, &s.id, "say after the raise").await;
    assert!(reply.queued, "{reply:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!said(&client, &s.id).await.contains("after the raise"));
    assert_eq!(
        session(&client, &s.id).await.state,
        Some(SessionState::Cancelled)
    );

    // Raised from the inbox: the waiting prompt runs at once.
    let out = tk.cru(&["inbox", "respond", &question.id, "Raise by 1.00 USD"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client, &s.id, "after the raise").await;
    assert!(!said(&client, &s.id).await.contains("never"));
    let s_now = wait_state(&client, &s.id, SessionState::Complete).await;
    let spent = s_now.spent.expect("spent");
    assert!((spent.cost.unwrap() - 1.2).abs() < 1e-9, "{spent:?}");
    assert_eq!(spent.raised_cost, 1.0);
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    // The agent told its cost, not its tokens: those are unknown, not zero.
    assert!(status.contains("unknown tokens; 1.20 USD"), "{status}");
    assert!(status.contains("budget raised by 1.00 USD"), "{status}");
    // The turn the budget cut is in the transcript, with why.
    let entries = transcript(&client, &s.id).await;
    assert!(
        entries
            .iter()
            .any(|e| e.text.as_deref() == Some(question.title.as_str())),
        "{entries:?}"
    );
    // Audited.
    let audit = stdout(&tk.cru(&["session", "audit", &s.id]));
    assert!(audit.contains("budget raised"), "{audit}");
}

#[tokio::test]
async fn the_kiln_budget_for_today_holds_every_session_and_stop_ends_one() {
    let tk = agent_kiln(
        "[budget]\nday_tokens = 1500\n\n[budget.prices.scripted]\ninput = 1.0\noutput = 10.0\n",
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    // An agent that reports nothing: its spending is unknown, and no budget sees it.
    let silent = create(&client, "loader", Some("say quiet")).await;
    wait_said(&client, &silent.id, "quiet").await;
    let first = create(&client, "scripted", Some("tokens 1000 100\nsay one")).await;
    wait_state(&client, &first.id, SessionState::Complete).await;
    // Priced from its tokens: the agent told no cost.
    let spent = session(&client, &first.id).await.spent.expect("spent");
    assert_eq!(spent.tokens, Some(1100));
    assert!(spent.priced);
    assert!((spent.cost.unwrap() - 0.002).abs() < 1e-9, "{spent:?}");

    prompt(&client, &first.id, "tokens 300 100\nsay two").await;
    wait_said(&client, &first.id, "two").await;
    wait_session(&client, &first.id, "the turn's tokens", |s| {
        s.spent.as_ref().and_then(|s| s.tokens) == Some(1500)
    })
    .await;

    // Another session: its first prompt waits, and its own inbox asks.
    let second = create(&client, "scripted", Some("say three")).await;
    let question = wait_message_where(&client, &second.id, "the kiln budget's question", |m| {
        m.msg_type == MsgType::DecisionNeeded
    })
    .await;
    assert_eq!(
        question.title,
        "Budget reached: the kiln's budget for today: 1500 of 1500 tokens"
    );
    assert!(!said(&client, &second.id).await.contains("three"));
    let out = tk.cru(&["inbox", "respond", &question.id, "Stop the session"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_state(&client, &second.id, SessionState::Stopped).await;
    assert!(!said(&client, &second.id).await.contains("three"));

    // `cru usage`: today's tokens and cost, by agent; the loader profile reported
    // nothing and is unknown, not zero.
    let out = tk.cru(&["usage", "--by", "agent", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let row = |key: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no {key} row: {rows}"))
    };
    assert_eq!(row("scripted")["tokens"], 1500, "{rows}");
    assert_eq!(row("loader")["tokens"], Value::Null, "{rows}");
    assert_eq!(row("loader")["tokens_unknown"], 1, "{rows}");
    let table = stdout(&tk.cru(&["usage", "--by", "agent"]));
    assert!(table.contains("unknown"), "{table}");
    assert!(table.contains("1500"), "{table}");
}

#[tokio::test]
async fn a_usage_limit_parks_the_session_until_it_resets_then_the_prompt_is_sent_again() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("say ready")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    prompt(&client, &s.id, "limit-once 2\nsay went through").await;
    let parked = wait_state(&client, &s.id, SessionState::Parked).await;
    let reason = parked.state_reason.unwrap_or_default();
    assert!(
        reason.starts_with("usage limit reached: resumes at "),
        "{reason}"
    );
    let told = wait_message_where(&client, &s.id, "the limit's message", |m| {
        m.msg_type == MsgType::Info && m.title.starts_with("Usage limit: resumes at ")
    })
    .await;
    assert!(
        told.body.unwrap_or_default().contains("Please retry in 2s"),
        "the agent's words are quoted"
    );
    // Meanwhile a prompt waits behind it; nothing is retried.
    let reply = prompt(&client, &s.id, "say after it").await;
    assert!(reply.queued, "{reply:?}");
    assert!(!said(&client, &s.id).await.contains("went through"));
    // At the reset the prompt that hit the limit is sent again, then the one queued.
    wait_said(&client, &s.id, "went through").await;
    wait_said(&client, &s.id, "after it").await;
    let prompts = transcript(&client, &s.id)
        .await
        .into_iter()
        .filter(|e| e.kind == crucible::protocol::EntryKind::Prompt)
        .filter_map(|e| e.text)
        .filter(|t| t.starts_with("limit-once"))
        .count();
    assert_eq!(prompts, 2, "sent once, and once again at the reset");
    wait_state(&client, &s.id, SessionState::Complete).await;
}

#[tokio::test]
async fn a_usage_limit_on_a_profile_with_a_fallback_hands_the_task_off_instead_of_waiting() {
    let agent = scripted_agent();
    let tk = agent_kiln(&format!(
        "[agents.limited]\ncommand = {agent:?}\nfallback = \"backup\"\n\n\
         [agents.backup]\ncommand = {agent:?}\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "limited", Some("say first part done")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    // A limit that resets only in an hour: the fallback does not wait for it.
    prompt(&client, &s.id, "limit-once 3600\nsay went through").await;
    let told = wait_message_where(&client, &s.id, "the fallback's notice", |m| {
        m.msg_type == MsgType::Info && m.title == "Usage limit: the task goes on with backup"
    })
    .await;
    let from = session(&client, &s.id).await;
    assert_eq!(from.state, Some(SessionState::Stopped));
    let to_id = from.handed_to.clone().expect("handed off");
    assert!(told.body.unwrap_or_default().contains(&to_id));
    let to = session(&client, &to_id).await;
    assert_eq!(to.agent_name, "backup");
    assert_eq!(to.handed_from.as_deref(), Some(s.id.as_str()));
    assert_eq!(to.worktree, s.worktree, "the same worktree");
    // The other agent starts from the brief: the task and where it stands.
    let first = first_prompt(&client, &to_id).await;
    assert!(first.contains("TASK:\nsay first part done"), "{first}");
    // The backup, itself a hand-off, would park on a limit rather than hand on.
    wait_state(&client, &to_id, SessionState::Complete).await;
    prompt(&client, &to_id, "limit-once 3600").await;
    wait_state(&client, &to_id, SessionState::Parked).await;
    assert!(session(&client, &to_id).await.handed_to.is_none());
}

#[tokio::test]
async fn a_hand_off_carries_the_summary_the_diff_and_the_open_question_to_the_other_agent() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(
        &client,
        "scripted",
        Some("write notes.txt first draft\nsay drafted the notes"),
    )
    .await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    // A question left open when it is handed off.
    prompt(&client, &s.id, "permit p1 Deploy to staging").await;
    wait_state(&client, &s.id, SessionState::Waiting).await;

    // An unknown profile is refused, and nothing is stopped.
    let out = tk.cru(&["session", "handoff", &s.id, "--agent", "nobody"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("nobody"), "{}", stderr(&out));
    assert_eq!(
        session(&client, &s.id).await.state,
        Some(SessionState::Waiting)
    );

    let out = tk.cru(&["session", "handoff", &s.id, "--agent", "loader", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let to: crucible::protocol::Session = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(to.handed_from.as_deref(), Some(s.id.as_str()));
    assert_eq!(to.worktree, s.worktree, "the same worktree");
    assert_eq!(to.branch, s.branch, "the same branch");
    assert!(to.worktree_owned, "the worktree is the new session's now");
    let from = wait_state(&client, &s.id, SessionState::Stopped).await;
    assert_eq!(from.handed_to.as_deref(), Some(to.id.as_str()));
    assert!(!from.worktree_owned);

    // The other agent's first prompt is the brief.
    let first = first_prompt(&client, &to.id).await;
    for part in [
        "another agent (scripted)",
        "TASK:\nwrite notes.txt first draft",
        "drafted the notes",
        "- Deploy to staging",
        "notes.txt",
        "+first draft",
    ] {
        assert!(first.contains(part), "{part:?} not in the brief:\n{first}");
    }
    // Both show the lineage.
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(status.contains(&to.id), "{status}");
    let status = stdout(&tk.cru(&["session", "status", &to.id]));
    assert!(status.contains(&s.id), "{status}");
    // Handed off once only.
    let again = tk.cru(&["session", "handoff", &s.id, "--agent", "scripted"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("handed off already"),
        "{}",
        stderr(&again)
    );
}

#[tokio::test]
async fn idle_stop_parks_a_local_agent_and_the_next_prompt_wakes_it() {
    // 0.03 minutes: under two seconds without a turn.
    let agent = scripted_agent();
    let tk = agent_kiln(&format!(
        "[agents.sleepy]\ncommand = {agent:?}\nargs = [\"--load\"]\nidle_stop_minutes = 0.03\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "sleepy", Some("say first")).await;
    wait_said(&client, &s.id, "first").await;
    let parked = wait_state(&client, &s.id, SessionState::Parked).await;
    let pid = s.agent_pid;
    assert!(
        pid.is_none_or(|p| !crucible::sys::pid_alive(p)),
        "the agent process is gone"
    );
    assert!(parked.agent_pid.is_none(), "{parked:?}");
    // The next prompt wakes it, on the same session.
    let out = tk.cru(&["session", "send", &s.id, "say second"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client, &s.id, "second").await;
    let woken = session(&client, &s.id).await;
    assert!(woken.agent_pid.is_some_and(crucible::sys::pid_alive));
    // A profile without it is never stopped on the local driver.
    let awake = create(&client, "loader", Some("say still here")).await;
    wait_said(&client, &awake.id, "still here").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        session(&client, &awake.id).await.state,
        Some(SessionState::Complete)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_internal_agent_counts_and_prices_the_tokens_its_model_reported() {
    // One turn of two answers (a tool call, then the text), each reporting 750 tokens,
    // 200 of its prompt read from the cache.
    let server = ScriptedServer::start([
        ScriptedReply::tool_call("call_1", "list_dir", json!({"path": "."})),
        ScriptedReply::text("Listed."),
    ])
    .await
    .expect("server");
    server.report_usage(json!({
        "prompt_tokens": 600,
        "completion_tokens": 150,
        "total_tokens": 750,
        "prompt_tokens_details": {"cached_tokens": 200},
    }));
    let tk = agent_kiln(&format!(
        "[agents.local]\ntype = \"internal\"\nbase_url = {:?}\nmodel = \"test-model\"\n\
         model_summaries = false\n\n\
         [budget.prices.local]\ninput = 1.0\noutput = 10.0\ncached = 0.1\n",
        server.base_url()
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "local", Some("list the folder")).await;
    let done = wait_session(&client, &s.id, "the turn's end", |s| {
        s.turn_count >= 1 && s.state == Some(SessionState::Complete)
    })
    .await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "two answers in the turn");
    for request in &requests {
        assert_eq!(request.body["stream_options"]["include_usage"], true);
    }

    // Both answers, counted once for the turn; priced with the profile's list, the
    // cached part at its own price: 2 × (400 × 1 + 150 × 10 + 200 × 0.1) / 1M.
    let spent = done.spent.expect("spent");
    assert_eq!(spent.tokens, Some(1500), "{spent:?}");
    assert!(spent.priced, "{spent:?}");
    assert!((spent.cost.unwrap() - 0.00384).abs() < 1e-12, "{spent:?}");
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(status.contains("1500 tokens; 0.00 USD"), "{status}");
    let out = tk.cru(&["usage", "--by", "agent", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let local = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "local")
        .unwrap_or_else(|| panic!("no local row: {rows}"));
    assert_eq!(local["tokens"], 1500, "{rows}");
    assert_eq!(local["tokens_unknown"], 0, "{rows}");
}
