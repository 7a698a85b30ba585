//! Plain programs as session agents (`type = "command"`): a shell script started by a
//! real session, in a real worktree, asks the human through `cru ask` and `cru approve`
//! and is answered through `cru inbox respond`.

use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{CreateSessionParams, SessionListParams};
use crucible::protocol::{InboxMessage, MsgType, SessionState};
use testkit::params;

use crate::common::*;
use crate::sessions::{
    LONG, agent_kiln, create, messages, said, wait_message, wait_message_where, wait_session,
    wait_state,
};

/// A kiln with three command profiles: `script` (asks, asks for approval, notifies),
/// `failing` (exits 3 with a complaint on stderr) and `sleeper` (runs until cancelled).
fn command_kiln() -> TestKiln {
    let dir = tempfile::tempdir().unwrap().keep();
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
read -r prompt
echo "prompt: $prompt (also in env: $CRUCIBLE_PROMPT)"
echo "working in $(basename "$PWD")"
choice=$("{CRU}" ask "Which auth strategy?" --option JWT --option Session --option OAuth)
echo "ask exited $? with $choice"
if "{CRU}" approve "About to delete 47 files"; then
  echo "approved"
else
  echo "denied with status $?"
fi
"{CRU}" notify "Finished the auth flow"
"#
        ),
    )
    .unwrap();
    agent_kiln(&format!(
        "[agents.script]\ntype = \"command\"\ncommand = \"/bin/sh\"\nargs = [{script:?}]\n\n\
         [agents.failing]\ntype = \"command\"\ncommand = \"sh\"\n\
         args = [\"-c\", \"echo partial work; echo the build is broken >&2; exit 3\"]\n\n\
         [agents.sleeper]\ntype = \"command\"\ncommand = \"sh\"\n\
         args = [\"-c\", \"echo started; exec sleep 60\"]\n"
    ))
}

/// The session's newest unanswered message of this type.
async fn open_message(client: &Client, id: &str, msg_type: MsgType) -> InboxMessage {
    wait_message_where(client, id, &format!("an open {msg_type}"), |m| {
        m.msg_type == msg_type && m.response.is_none() && !m.withdrawn
    })
    .await
}

fn respond(tk: &TestKiln, message: &InboxMessage, answer: &str) {
    let out = tk.cru(&["inbox", "respond", &message.id, answer]);
    assert!(out.status.success(), "cru inbox respond: {}", stderr(&out));
}

async fn count(client: &Client, id: &str, msg_type: MsgType) -> usize {
    messages(client, id)
        .await
        .iter()
        .filter(|m| m.msg_type == msg_type)
        .count()
}

#[tokio::test]
async fn a_shell_script_agent_asks_and_gets_approval_through_cru_inbox_respond() {
    let tk = command_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let s = create(&client, "script", Some("add the auth flow")).await;

    // `cru ask` blocks the script, and the session waits for the human.
    let question = open_message(&client, &s.id, MsgType::DecisionNeeded).await;
    assert_eq!(question.title, "Which auth strategy?");
    assert_eq!(
        question.options.as_deref(),
        Some(&["JWT".to_string(), "Session".into(), "OAuth".into()][..])
    );
    wait_state(&client, &s.id, SessionState::Waiting).await;
    respond(&tk, &question, "Session");

    let approval = open_message(&client, &s.id, MsgType::ApprovalRequired).await;
    assert_eq!(approval.title, "About to delete 47 files");
    wait_state(&client, &s.id, SessionState::Waiting).await;
    respond(&tk, &approval, "approve");

    let done = wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let first = said(&client, &s.id).await;
    assert!(
        first.contains("prompt: add the auth flow (also in env: add the auth flow)"),
        "{first}"
    );
    assert!(first.contains("ask exited 0 with Session"), "{first}");
    assert!(first.contains("\napproved"), "{first}");
    assert!(
        done.body.as_deref().unwrap_or("").contains("approved"),
        "{done:?}"
    );
    let worktree = s.worktree.as_deref().expect("a worktree");
    assert!(
        first.contains(&format!(
            "working in {}",
            worktree.rsplit('/').next().unwrap()
        )),
        "the program runs in the session's worktree: {first}"
    );
    let notes = messages(&client, &s.id).await;
    assert!(
        notes
            .iter()
            .any(|m| m.msg_type == MsgType::Info && m.title == "Finished the auth flow"),
        "{notes:?}"
    );
    let ended = wait_state(&client, &s.id, SessionState::Complete).await;
    assert_eq!(ended.agent_pid, Some(tk.daemon_pid().expect("daemon pid")));
    // Between its runs the agent has no process: `session list --json` gives it no
    // `resources` (the daemon hosts it, and the daemon's tree holds every other agent),
    // while a running program's are its own.
    let running = create(&client, "sleeper", Some("wait")).await;
    let daemon = tk.daemon_pid();
    wait_session(&client, &running.id, "the program to run", |s| {
        s.agent_pid.is_some() && s.agent_pid != daemon
    })
    .await;
    let out = tk.cru(&["session", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let row = |id: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap()
    };
    assert!(row(&s.id).get("resources").is_none(), "{}", row(&s.id));
    let own = row(&running.id)["resources"].clone();
    assert!(own["processes"].as_u64().is_some_and(|n| n >= 1), "{own}");
    client
        .call::<m::SessionCancel>(params::session_id(&running.id))
        .await;

    // A second prompt runs the program again; this time the human denies.
    client
        .call::<m::SessionPrompt>(params::prompt(&s.id, "once more"))
        .await;
    respond(
        &tk,
        &open_message(&client, &s.id, MsgType::DecisionNeeded).await,
        "OAuth",
    );
    respond(
        &tk,
        &open_message(&client, &s.id, MsgType::ApprovalRequired).await,
        "deny",
    );
    let deadline = std::time::Instant::now() + LONG;
    while count(&client, &s.id, MsgType::TaskComplete).await < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no second task_complete"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let second = said(&client, &s.id).await;
    assert!(second.contains("prompt: once more"), "{second}");
    assert!(second.contains("ask exited 0 with OAuth"), "{second}");
    assert!(second.contains("denied with status 1"), "{second}");
}

#[tokio::test]
async fn a_failing_program_fails_its_turn_with_its_stderr_and_a_hung_one_is_cancelled() {
    let tk = command_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;

    let failing = create(&client, "failing", Some("build it")).await;
    let error = wait_message(&client, &failing.id, MsgType::Error).await;
    let body = error.body.unwrap_or_default();
    assert!(body.contains("exited with code 3"), "{body}");
    assert!(body.contains("the build is broken"), "stderr tail: {body}");
    let s = wait_state(&client, &failing.id, SessionState::Error).await;
    assert!(
        s.state_reason
            .unwrap_or_default()
            .contains("exited with code 3")
    );
    assert!(said(&client, &failing.id).await.contains("partial work"));

    let sleeper = create(&client, "sleeper", Some("wait")).await;
    let daemon = tk.daemon_pid();
    let running = wait_session(&client, &sleeper.id, "the program to run", |s| {
        s.agent_pid.is_some() && s.agent_pid != daemon
    })
    .await;
    let pid = running.agent_pid.expect("the running program's pid");
    assert!(crucible::sys::process_has_env(
        pid,
        "CRUCIBLE_SESSION_ID",
        &sleeper.id
    ));
    client
        .call::<m::SessionCancel>(params::session_id(&sleeper.id))
        .await;
    let s = wait_state(&client, &sleeper.id, SessionState::Cancelled).await;
    assert_eq!(s.state_reason.as_deref(), Some("stopped: cancelled"));
    assert_eq!(
        s.agent_pid, daemon,
        "between prompts the daemon hosts the agent"
    );
    assert!(said(&client, &sleeper.id).await.contains("started"));
    wait_until("the cancelled program ends", LONG, || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.contains(") Z "))
    })
    .await;
    assert_eq!(count(&client, &sleeper.id, MsgType::TaskComplete).await, 0);
}

#[tokio::test]
async fn a_missing_program_makes_no_session() {
    let tk = agent_kiln(
        "[agents.ghost]\ntype = \"command\"\ncommand = \"no-such-program-for-crucible\"\n",
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let err = client
        .try_call::<m::SessionCreate>(CreateSessionParams {
            agent: "ghost".into(),
            task: Some("x".into()),
            ..Default::default()
        })
        .await
        .expect_err("no program");
    let err = err.to_string();
    assert!(
        err.contains("no-such-program-for-crucible is not on PATH in this shell")
            && err.contains("set `command` in [agents.ghost]"),
        "{err}"
    );
    let list = client
        .call::<m::SessionList>(SessionListParams::default())
        .await;
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);
}

#[tokio::test]
async fn after_a_daemon_kill_the_running_program_is_ended_and_the_session_reopened() {
    let tk = command_kiln();
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.daemon().await;
    let s = create(&client, "sleeper", Some("wait")).await;
    let old_daemon = daemon.pid();
    let running = wait_session(&client, &s.id, "the program to run", |s| {
        s.agent_pid.is_some_and(|p| p != old_daemon)
    })
    .await;
    let program = running.agent_pid.expect("pid");
    drop(client);

    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    // The turn never ended: the session says it was cut short, and keeps its prompt.
    let s = wait_state(&client, &s.id, SessionState::Interrupted).await;
    assert!(
        s.state_reason
            .as_deref()
            .unwrap_or("")
            .contains("cut short: the daemon stopped"),
        "{s:?}"
    );
    assert_eq!(s.turn_prompt.as_deref(), Some("wait"));
    assert!(
        !crucible::sys::process_has_env(program, "CRUCIBLE_SESSION_ID", &s.id),
        "the program left by the killed daemon still runs"
    );
    // The reopened session takes prompts again.
    client
        .call::<m::SessionPrompt>(params::prompt(&s.id, "again"))
        .await;
    wait_session(&client, &s.id, "the program to run again", |s| {
        s.agent_pid
            .is_some_and(|p| p != program && Some(p) != tk.daemon_pid())
    })
    .await;
}
