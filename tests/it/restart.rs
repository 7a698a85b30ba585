//! A contained session after its daemon is killed: shared by the sandbox, ssh and podman
//! tests. The daemon is killed with SIGKILL and started again; the session comes back
//! with a new agent, is prompted again, asks for approval and, answered, does the work.

use std::path::PathBuf;
use std::process::Command;

use crucible::protocol::{MsgType, SessionState};
use serde_json::json;

use crate::common::*;
use crate::sessions::{wait_message_where, wait_session, wait_state};

/// Kills `daemon`, starts `next` in its place and checks session `id` (of the `loader`
/// profile, whose agent can reload its session) answers a prompt again. Returns the new
/// daemon. `there` is the folder the agent writes in (its worktree, or the remote one).
pub(crate) async fn answers_after_kill9(
    tk: &TestKiln,
    daemon: &mut DaemonProcess,
    next: Command,
    id: &str,
    there: PathBuf,
) -> DaemonProcess {
    let client = tk.client().await;
    let before = wait_state(&client, id, SessionState::Complete).await;
    let old_pid = before.agent_pid.expect("an agent pid");
    drop(client);
    daemon.kill9();
    let restarted = tk.run_daemon(next).await;
    let client = tk.client().await;
    let resumed = wait_session(&client, id, "the session resumed", |s| {
        s.state == Some(SessionState::Complete) && s.agent_pid.is_some_and(|p| p != old_pid)
    })
    .await;
    assert!(
        resumed
            .state_reason
            .as_deref()
            .unwrap_or("")
            .contains("resumed"),
        "{resumed:?}"
    );
    client
        .call_value(
            "session.prompt",
            json!({
                "session_id": id,
                "text": "permit r1 Write after.txt\nwrite after.txt written after the restart\nsay back again",
            }),
        )
        .await
        .expect("a prompt after the restart");
    let approval = wait_message_where(&client, id, "the approval after the restart", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded && m.title.contains("after.txt")
    })
    .await;
    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message_where(&client, id, "the turn after the restart", |m| {
        m.msg_type == MsgType::TaskComplete
            && m.body.as_deref().unwrap_or("").contains("back again")
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(there.join("after.txt")).unwrap(),
        "written after the restart"
    );
    restarted
}
