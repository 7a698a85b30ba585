//! Fallback chains with the scripted agent: a usage limit on profile `a` moves the task
//! to `b`, a limit on `b` to `c`, and at `a`'s short reset the task comes back to `a`
//! with a brief of what `b` and `c` did; a chain whose profiles are all limited, or
//! tried already, parks instead of looping. Each switch is an inbox `info` and a line of
//! `cru usage`.

use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::{EntryKind, MsgType, Session, SessionState};
use serde_json::Value;

use crate::budget::prompt;
use crate::common::*;
use crate::sessions::{agent_kiln, create, session, transcript, wait_message_where, wait_state};

/// The limit `a` hits resets this many seconds later: long enough for `b` and `c` to
/// take their turns first.
const A_RESETS_IN: u64 = 12;

/// The first prompt a session's agent was sent, and when (RFC 3339).
async fn first_prompt(client: &Client, id: &str) -> (String, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let first = transcript(client, id)
            .await
            .into_iter()
            .find(|e| e.kind == EntryKind::Prompt);
        if let Some(e) = first {
            return (e.text.unwrap_or_default(), e.at);
        }
        assert!(std::time::Instant::now() < deadline, "no first prompt");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// When the session's transcript recorded the usage limit (its error entry).
async fn limit_seen(client: &Client, id: &str) -> String {
    transcript(client, id)
        .await
        .into_iter()
        .rfind(|e| e.kind == EntryKind::Error)
        .map(|e| e.at)
        .expect("the limit is in the transcript")
}

/// Milliseconds from `from` to `to` (RFC 3339).
fn millis(from: &str, to: &str) -> i64 {
    let at = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap();
    (at(to) - at(from)).num_milliseconds()
}

/// Waits for the switch notice titled `title` on session `id`; returns the session the
/// task went to.
async fn switched(client: &Client, id: &str, title: &str) -> (Session, String) {
    let told = wait_message_where(client, id, title, |m| {
        m.msg_type == MsgType::Info && m.title == title
    })
    .await;
    let from = wait_state(client, id, SessionState::Stopped).await;
    let to = from.handed_to.clone().expect("handed off");
    assert!(
        told.body.clone().unwrap_or_default().contains(&to),
        "{told:?}"
    );
    (session(client, &to).await, told.body.unwrap_or_default())
}

#[tokio::test]
async fn a_limit_moves_the_task_along_the_chain_and_it_comes_back_after_the_reset() {
    let agent = scripted_agent();
    let tk = agent_kiln(&format!(
        "[agents.a]\ncommand = {agent:?}\nfallback = [\"b\", \"c\"]\nfallback_return = true\n\n\
         [agents.b]\ncommand = {agent:?}\n\n[agents.c]\ncommand = {agent:?}\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let a = create(&client, "a", Some("say started the task")).await;
    wait_state(&client, &a.id, SessionState::Complete).await;

    // a: a limit that resets soon; the task goes on with b meanwhile.
    let limit = format!("write a.txt from a\nlimit-once {A_RESETS_IN}");
    prompt(&client, &a.id, &limit).await;
    let (b, told) = switched(&client, &a.id, "Usage limit: the task goes on with b").await;
    assert!(told.contains("Switched from profile a to b"), "{told}");
    assert!(told.contains("the task comes back to a"), "{told}");
    assert_eq!(b.agent_name, "b");
    assert_eq!(b.worktree, a.worktree, "the same worktree");
    let (brief, b_first_at) = first_prompt(&client, &b.id).await;
    assert!(
        brief.contains("The agent of profile a reached a usage limit"),
        "{brief}"
    );
    assert!(brief.contains("TASK:\nsay started the task"), "{brief}");
    assert!(brief.contains("a.txt"), "the diff so far: {brief}");
    let a_to_b = millis(&limit_seen(&client, &a.id).await, &b_first_at);
    wait_state(&client, &b.id, SessionState::Complete).await;

    // b: a limit of an hour; c is next.
    prompt(&client, &b.id, "write b.txt from b\nlimit-once 3600").await;
    let (c, told) = switched(&client, &b.id, "Usage limit: the task goes on with c").await;
    assert!(told.contains("Switched from profile b to c"), "{told}");
    assert_eq!(c.agent_name, "c");
    let (brief, c_first_at) = first_prompt(&client, &c.id).await;
    // The chain's task, not b's brief; and who had it before.
    assert!(brief.contains("TASK:\nsay started the task"), "{brief}");
    assert!(
        brief.contains("EARLIER IN THE FALLBACK CHAIN:\n- a ("),
        "{brief}"
    );
    assert!(brief.contains("b.txt"), "{brief}");
    let b_to_c = millis(&limit_seen(&client, &b.id).await, &c_first_at);
    wait_state(&client, &c.id, SessionState::Complete).await;
    prompt(&client, &c.id, "write c.txt from c").await;

    // At a's reset the task comes back to a, with what b and c did.
    let (back, told) = switched(
        &client,
        &c.id,
        "Usage limit reset: the task comes back to a",
    )
    .await;
    assert!(told.contains("Switched from profile c back to a"), "{told}");
    assert_eq!(back.agent_name, "a");
    assert_eq!(back.handed_from.as_deref(), Some(c.id.as_str()));
    let (brief, _) = first_prompt(&client, &back.id).await;
    for part in [
        "The usage limit of profile a has reset",
        "TASK:\nsay started the task",
        "WHAT WAS DONE MEANWHILE (by the fallback chain):",
        &format!("- b ({}): ", b.id),
        &format!("- c ({}): ", c.id),
        "b.txt",
        "c.txt",
    ] {
        assert!(brief.contains(part), "{part:?} not in:\n{brief}");
    }
    wait_state(&client, &back.id, SessionState::Complete).await;

    // Each switch is kept with the session it left, and `cru usage` lists them.
    let out = tk.cru(&["usage", "--by", "session", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut seen: Vec<(String, String, String)> = rows
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["switches"].as_array().unwrap().clone())
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (text("from_agent"), text("to_agent"), text("why"))
        })
        .collect();
    seen.sort();
    let want = [
        ("a", "b", "usage_limit"),
        ("b", "c", "usage_limit"),
        ("c", "a", "limit_reset"),
    ]
    .map(|(f, t, w)| (f.to_string(), t.to_string(), w.to_string()));
    assert_eq!(seen, want, "{rows}");
    let table = stdout(&tk.cru(&["usage"]));
    assert!(table.contains("Profile switches"), "{table}");
    assert!(table.contains("a → b  usage limit (resets "), "{table}");
    assert!(table.contains("b → c  usage limit (resets "), "{table}");
    assert!(
        table.contains(&format!("c → a  limit reset  {} → {}", c.id, back.id)),
        "{table}"
    );
    eprintln!(
        "switch time (limit seen → next profile's first prompt): a→b {a_to_b} ms, b→c {b_to_c} ms"
    );
}

#[tokio::test]
async fn a_chain_with_no_free_profile_parks_and_never_loops() {
    let agent = scripted_agent();
    let tk = agent_kiln(&format!(
        "[agents.a]\ncommand = {agent:?}\nfallback = [\"b\", \"c\"]\n\n\
         [agents.b]\ncommand = {agent:?}\n\n[agents.c]\ncommand = {agent:?}\n\n\
         [agents.x]\ncommand = {agent:?}\nfallback = \"y\"\n\n\
         [agents.y]\ncommand = {agent:?}\nfallback = \"x\"\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    // b and c are at their limits (sessions of theirs parked for an hour).
    for profile in ["b", "c"] {
        let s = create(&client, profile, Some("say ready")).await;
        wait_state(&client, &s.id, SessionState::Complete).await;
        prompt(&client, &s.id, "limit-once 3600").await;
        wait_state(&client, &s.id, SessionState::Parked).await;
    }
    let a = create(&client, "a", Some("say ready")).await;
    wait_state(&client, &a.id, SessionState::Complete).await;
    prompt(&client, &a.id, "limit-once 3600").await;
    let title = "Usage limit: no profile of the fallback chain is free";
    let told = wait_message_where(&client, &a.id, title, |m| {
        m.msg_type == MsgType::Info && m.title == title
    })
    .await;
    let body = told.body.unwrap_or_default();
    assert!(body.contains("b (at a limit until "), "{body}");
    assert!(body.contains("c (at a limit until "), "{body}");
    let a = wait_state(&client, &a.id, SessionState::Parked).await;
    assert!(a.handed_to.is_none(), "parked, not handed on");

    // x → y; y's own fallback names x, but the chain is x's and x began it: y parks
    // instead of handing the task back.
    let x = create(&client, "x", Some("say ready")).await;
    wait_state(&client, &x.id, SessionState::Complete).await;
    prompt(&client, &x.id, "limit-once 3600").await;
    let (y, _) = switched(&client, &x.id, "Usage limit: the task goes on with y").await;
    wait_state(&client, &y.id, SessionState::Complete).await;
    prompt(&client, &y.id, "limit-once 3600").await;
    let told = wait_message_where(&client, &y.id, title, |m| {
        m.msg_type == MsgType::Info && m.title == title
    })
    .await;
    // The chain is x's list: y, tried already (x, where it began, is never gone back to).
    assert!(told.body.unwrap_or_default().contains("y (tried already)"));
    let y = wait_state(&client, &y.id, SessionState::Parked).await;
    assert!(y.handed_to.is_none());
    let listed = client
        .call::<crucible::protocol::methods::SessionList>(
            &crucible::protocol::params::SessionListParams::default(),
        )
        .await
        .unwrap();
    let of_x = listed
        .sessions
        .iter()
        .filter(|s| s.agent_name == "x")
        .count();
    assert_eq!(of_x, 1, "no loop back to x");
}

#[tokio::test]
async fn a_limit_announced_ahead_parks_after_the_turn_and_the_next_prompt_goes_along_the_chain() {
    let agent = scripted_agent();
    let tk = agent_kiln(&format!(
        "[agents.a]\ncommand = {agent:?}\nfallback = \"b\"\n\n[agents.b]\ncommand = {agent:?}\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let a = create(&client, "a", Some("say started the task")).await;
    wait_state(&client, &a.id, SessionState::Complete).await;

    // The agent announces its limit mid-turn: the turn ends as it would, then the
    // session parks until the reset instead of starting a turn that would fail.
    prompt(&client, &a.id, "limit-ahead 3600\nsay still answered").await;
    let parked = wait_state(&client, &a.id, SessionState::Parked).await;
    assert!(
        parked
            .state_reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("usage limit reached: resumes at"),
        "{parked:?}"
    );
    let lines = transcript(&client, &a.id).await;
    let said: Vec<&str> = lines
        .iter()
        .filter(|e| e.kind == EntryKind::Message)
        .filter_map(|e| e.text.as_deref())
        .collect();
    assert!(
        said.iter().any(|t| t.contains("still answered")),
        "{said:?}"
    );
    assert!(
        lines
            .iter()
            .any(|e| e.kind == EntryKind::TurnEnd && e.status.as_deref() == Some("end_turn")),
        "the turn completed: {lines:?}"
    );
    let title = "Usage limit ahead: parked until";
    wait_message_where(&client, &a.id, title, |m| {
        m.msg_type == MsgType::Info && m.title.starts_with(title)
    })
    .await;

    // The next prompt is the next turn: it goes to b with the brief, not to a's limit.
    prompt(&client, &a.id, "say the next step").await;
    let (b, told) = switched(&client, &a.id, "Usage limit: the task goes on with b").await;
    assert!(told.contains("Switched from profile a to b"), "{told}");
    let (brief, _) = first_prompt(&client, &b.id).await;
    assert!(brief.contains("PROMPTS WAITING"), "{brief}");
    assert!(brief.contains("- say the next step"), "{brief}");
}
