//! Plan review with the scripted agent: a profile with `plan_review = true` holds what the
//! agent asks for while its plan is asked in the inbox as numbered steps. A plan approved
//! in the workbench lets the command it names run without a question while one it does
//! not name is asked, with the plan's current step; comments on two steps reach the agent
//! as one prompt; the audit says who reviewed the plan and through which channel.

use crucible::client::Client;
use crucible::protocol::audit::AuditEvent;
use crucible::protocol::methods as m;
use crucible::protocol::params::SessionIdParams;
use crucible::protocol::{EntryKind, InboxMessage, MsgType, Purpose, SessionState};
use testkit::daemon::call;
use testkit::kiln::TestKiln;

use crate::common::*;
use crate::sessions::{messages, said, transcript, wait_message_where, wait_said, wait_state};
use crate::tmux::Tmux;

/// A kiln whose `planner` profile is the scripted agent with plan review on.
fn planner_kiln() -> TestKiln {
    let agent = testkit::process::scripted_agent();
    TestKiln::builder()
        .git()
        .scripted_agents()
        .agent(
            "planner",
            &format!("command = {agent:?}\nplan_review = true"),
        )
        .build()
}

/// The plan's review, once the agent sent its plan.
async fn review(client: &Client, id: &str) -> InboxMessage {
    wait_message_where(client, id, "the plan's review", |m| {
        matches!(m.purpose, Some(Purpose::PlanReview { .. })) && !m.responded
    })
    .await
}

/// The approvals session `id` was asked, plan reviews aside.
async fn asked(client: &Client, id: &str) -> Vec<InboxMessage> {
    messages(client, id)
        .await
        .into_iter()
        .filter(|m| m.msg_type == MsgType::ApprovalRequired)
        .filter(|m| !matches!(m.purpose, Some(Purpose::PlanReview { .. })))
        .collect()
}

/// Who the audit says answered the session's questions, with what.
async fn answers(client: &Client, id: &str) -> Vec<(String, String)> {
    let log = call::<m::SessionAudit>(
        client,
        SessionIdParams {
            session_id: id.into(),
        },
    )
    .await;
    log.records
        .into_iter()
        .filter_map(|r| match r.event {
            AuditEvent::PermissionAnswered { answer, by } => Some((answer, by)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_plan_approved_in_the_workbench_runs_its_command_unasked_and_asks_the_rest() {
    let tk = planner_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = crate::sessions::create(&client, "planner", None).await;
    let root = tk.root().display().to_string();
    let screen = Tmux::start(
        "plan",
        (120, 36),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    );
    screen.wait_text("[1]");
    let script = "plan Run `git status --short` | Edit notes.txt\npermit-run p1 git status --short\npermit-run p2 rm -rf build\nsay finished";
    let out = tk.cru(&["session", "send", &s.id, script]);
    assert!(out.status.success(), "{}", stderr(&out));

    // The plan is asked as numbered steps, and the session waits on it; the command
    // the agent asked for meanwhile is not asked on its own.
    let plan = review(&client, &s.id).await;
    let body = plan.body.clone().unwrap_or_default();
    assert!(
        body.starts_with("1. Run `git status --short`\n2. Edit notes.txt"),
        "{body}"
    );
    wait_state(&client, &s.id, SessionState::Waiting).await;
    assert!(asked(&client, &s.id).await.is_empty());

    // The workbench shows the steps above its input; `a` on the opened review approves.
    screen.keys(&["M-1"]);
    screen.wait_text("2. Edit notes.txt");
    screen.keys(&["F2"]);
    screen.wait_text("enter open to answer");
    screen.keys(&["Enter"]);
    screen.wait_text("approve/deny");
    screen.keys(&["a"]);

    // The planned command ran without a question; the unplanned one is asked, with the
    // plan's current step named.
    wait_said(&client, &s.id, "granted: git status --short").await;
    let unplanned = wait_message_where(&client, &s.id, "the unplanned command", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.title.contains("rm -rf build")
    })
    .await;
    let why = unplanned.body.clone().unwrap_or_default();
    assert!(why.contains("Not in the approved plan"), "{why}");
    assert!(
        why.contains("current step 1: Run `git status --short`"),
        "{why}"
    );
    assert_eq!(
        asked(&client, &s.id).await.len(),
        1,
        "only the unplanned one"
    );
    let out = tk.cru(&["inbox", "respond", &unplanned.id, "deny"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client, &s.id, "denied: rm -rf build").await;

    // The transcript and the audit name who approved the plan, through which channel.
    let lines = transcript(&client, &s.id).await;
    assert!(
        lines.iter().any(|e| e.kind == EntryKind::Permission
            && e.text
                .as_deref()
                .unwrap_or("")
                .contains("the approved plan allows")),
        "{lines:?}"
    );
    let answers = answers(&client, &s.id).await;
    assert!(
        answers
            .iter()
            .any(|(answer, by)| answer == "plan approved" && by.contains("workbench")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(
            |(answer, by)| answer.contains("allowed: step 1 of the approved plan") && by == "rules"
        ),
        "{answers:?}"
    );
}

#[tokio::test]
async fn comments_on_two_steps_reach_the_agent_as_one_prompt() {
    let tk = planner_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let script = "plan Read the schema | Run `make check` | Edit src/db.rs\npermit-run p1 make check\nsay after the check";
    let s = crate::sessions::create(&client, "planner", Some(script)).await;
    let plan = review(&client, &s.id).await;

    // A step the plan does not have is refused, with what is accepted.
    let out = tk.cru(&["inbox", "respond", &plan.id, "4: no such step"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("comments on the plan's steps 1–3"),
        "{}",
        stderr(&out)
    );

    let comments = "2: use cargo nextest\n3: not this file; use src/view.rs";
    let out = tk.cru(&["inbox", "respond", &plan.id, comments]);
    assert!(out.status.success(), "{}", stderr(&out));

    // The held command was refused, the turn ended, and one prompt carried both comments.
    wait_said(&client, &s.id, "unknown command: - Step 3").await;
    let prompts: Vec<String> = transcript(&client, &s.id)
        .await
        .into_iter()
        .filter(|e| e.kind == EntryKind::Prompt)
        .map(|e| e.text.unwrap_or_default())
        .collect();
    let revised: Vec<&String> = prompts
        .iter()
        .filter(|p| p.contains("Comments on your plan"))
        .collect();
    assert_eq!(revised.len(), 1, "{prompts:?}");
    assert!(
        revised[0].contains("Step 2 (Run `make check`): use cargo nextest"),
        "{}",
        revised[0]
    );
    assert!(
        revised[0].contains("Step 3 (Edit src/db.rs): not this file; use src/view.rs"),
        "{}",
        revised[0]
    );
    let text = said(&client, &s.id).await;
    assert!(!text.contains("granted: make check"), "{text}");
    assert!(!text.contains("after the check"), "{text}");
    let answers = answers(&client, &s.id).await;
    assert!(
        answers
            .iter()
            .any(|(answer, by)| answer == "plan: comments on steps 2, 3"
                && by.contains("cru inbox respond")),
        "{answers:?}"
    );
}

#[tokio::test]
async fn the_web_view_shows_the_numbered_plan_and_takes_comments_on_its_steps() {
    let tk = planner_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let browser = crate::web::desktop_paired(&tk, &[]).await;
    let script = "plan Read the schema | Run `make check`\npermit-run p1 make check";
    let s = crate::sessions::create(&client, "planner", Some(script)).await;
    let plan = review(&client, &s.id).await;
    let card = format!("#inbox .message[data-message-id='{}']", plan.id);
    let shown = browser
        .wait_for(
            "the plan's card",
            &format!("const c = document.querySelector(\"{card} form.answer-text\"); return c && c.closest('.message').innerText"),
        )
        .await;
    let shown = shown.as_str().unwrap_or_default().to_string();
    assert!(
        shown.contains("1. Read the schema\n2. Run `make check`"),
        "{shown}"
    );
    assert!(
        shown.contains("Approve the plan") && shown.contains("Reject the plan"),
        "{shown}"
    );
    browser
        .run(
            &format!(
                "const f = document.querySelector(\"{card} form.answer-text\"); \
                 f.querySelector('input').value = '1: only the orders table; 2: use make test'; \
                 f.requestSubmit(); return true"
            ),
            vec![],
        )
        .await;
    wait_said(&client, &s.id, "unknown command: - Step 2").await;
    let prompts: Vec<String> = transcript(&client, &s.id)
        .await
        .into_iter()
        .filter(|e| e.kind == EntryKind::Prompt)
        .filter_map(|e| e.text)
        .filter(|p| p.contains("Comments on your plan"))
        .collect();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(prompts[0].contains("Step 1 (Read the schema): only the orders table"));
    assert!(prompts[0].contains("Step 2 (Run `make check`): use make test"));
    let answers = answers(&client, &s.id).await;
    assert!(
        answers
            .iter()
            .any(|(answer, by)| answer == "plan: comments on steps 1, 2" && by.starts_with("web")),
        "{answers:?}"
    );
    browser.close().await;
}
