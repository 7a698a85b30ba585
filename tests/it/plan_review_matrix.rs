//! Plan review in a Matrix room: the bot posts the plan as numbered steps, and an allowed
//! person's `!answer N: comment` sends the comment back to the agent, the audit naming
//! that person and Matrix.

use crucible::protocol::audit::AuditEvent;
use crucible::protocol::methods as m;
use crucible::protocol::params::SessionIdParams;
use crucible::protocol::{EntryKind, Purpose};
use testkit::daemon::call;

use crate::common::*;
use crate::matrix_channel::{
    BOT_PASSWORD, WAIT, alice_with, bot_kiln, from_bot, matrix_sessions, matrix_settings,
};
use crate::sessions::{transcript, wait_message_where};
use crate::synapse::Homeserver;

#[tokio::test]
async fn a_room_sees_the_numbered_plan_and_comments_on_a_step() {
    let hs = Homeserver::start(std::path::Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let bot = hs.user_id("bot");
    let agent = testkit::process::scripted_agent();
    let settings = matrix_settings(
        &hs,
        &format!("[agents.planner]\ncommand = {agent:?}\nplan_review = true\n"),
    )
    .replace("agent = \"scripted\"", "agent = \"planner\"");
    let (_tk, _daemon, client) = bot_kiln(&settings).await;
    let (alice, room) = alice_with(&hs, &bot).await;
    alice
        .send_text(
            &room,
            "plan Read the schema | Run `make check`\npermit-run p1 make check",
        )
        .await;
    let posted = from_bot(&alice, &bot, &room, "Review the plan (2 steps)").await;
    assert!(
        posted
            .body
            .contains("1. Read the schema\n2. Run `make check`"),
        "{}",
        posted.body
    );
    assert!(
        posted.body.contains("!answer 2: use the view"),
        "{}",
        posted.body
    );
    let sessions = matrix_sessions(&client, room.as_str()).await;
    let id = sessions[0].id.clone();
    wait_message_where(&client, &id, "the plan's review", |m| {
        matches!(m.purpose, Some(Purpose::PlanReview { .. }))
    })
    .await;

    alice.send_text(&room, "!answer 2: use make test").await;
    from_bot(&alice, &bot, &room, "Answered by").await;
    let deadline = std::time::Instant::now() + WAIT;
    let prompt = loop {
        let found = transcript(&client, &id)
            .await
            .into_iter()
            .filter(|e| e.kind == EntryKind::Prompt)
            .filter_map(|e| e.text)
            .find(|p| p.contains("Comments on your plan"));
        if let Some(prompt) = found {
            break prompt;
        }
        assert!(std::time::Instant::now() < deadline, "no comments prompt");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        prompt.contains("Step 2 (Run `make check`): use make test"),
        "{prompt}"
    );
    let log = call::<m::SessionAudit>(
        &client,
        SessionIdParams {
            session_id: id.clone(),
        },
    )
    .await;
    let by: Vec<String> = log
        .records
        .into_iter()
        .filter_map(|r| match r.event {
            AuditEvent::PermissionAnswered { answer, by } if answer.starts_with("plan") => Some(by),
            _ => None,
        })
        .collect();
    let alice_id = hs.user_id("alice");
    assert!(
        by.iter()
            .any(|b| b.contains(alice_id.as_str()) && b.contains("Matrix")),
        "{by:?}"
    );
}
