//! A contained session after its daemon goes away: shared by the sandbox, ssh and podman
//! tests. The daemon is stopped (`cru daemon stop`, which removes its sockets) or killed
//! with SIGKILL (which leaves them behind), then started again; the session comes back
//! with a new agent, is prompted again, asks for approval and, answered, does the work,
//! and (where the agent has `cru`) reaches the daemon through the agent socket from
//! inside its sandbox or container.

use std::path::PathBuf;
use std::process::Command;

use crucible::protocol::methods as m;
use crucible::protocol::{MsgType, SessionState};
use testkit::params;

use crate::common::*;
use crate::sessions::{messages, said, wait_message_where, wait_session, wait_state};

/// How the daemon goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gone {
    /// `cru daemon stop`: its sockets are removed.
    Stopped,
    /// SIGKILL: its socket files stay behind.
    Killed,
}

/// What is checked of the session after the restart.
pub(crate) struct After<'a> {
    /// The session (of the `loader` profile, whose agent can reload its session).
    pub id: &'a str,
    /// The folder the agent writes in (its worktree, or the remote one).
    pub there: PathBuf,
    /// Whether the agent runs `cru notify` itself, through the agent socket.
    pub calls_in: bool,
}

/// Makes `daemon` go away as `gone` says, starts `next` in its place and checks the
/// session answers a prompt again. Returns the new daemon.
pub(crate) async fn answers_after(
    tk: &TestKiln,
    daemon: &mut DaemonProcess,
    gone: Gone,
    next: Command,
    after: After<'_>,
) -> DaemonProcess {
    let id = after.id;
    let client = tk.daemon().await;
    let before = wait_state(&client, id, SessionState::Complete).await;
    let old_pid = before.agent_pid.expect("an agent pid");
    drop(client);
    match gone {
        Gone::Killed => daemon.kill9(),
        Gone::Stopped => {
            let out = tk.cru(&["daemon", "stop"]);
            assert!(out.status.success(), "{}", stderr(&out));
            daemon.wait_exit(std::time::Duration::from_secs(20)).await;
        }
    }
    let restarted = tk.run_daemon(next).await;
    let client = tk.daemon().await;
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
        "{gone:?}: {resumed:?}"
    );
    let mut prompt = String::new();
    if after.calls_in {
        prompt.push_str("spawn cru notify reached-from-inside\n");
    }
    prompt.push_str(
        "permit r1 Write after.txt\nwrite after.txt written after the restart\nsay back again",
    );
    // What this prompt brings is new: messages from before it are left out.
    let before: std::collections::HashSet<String> = messages(&client, id)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    let new = |m: &crucible::protocol::InboxMessage| !before.contains(&m.id);
    client
        .call::<m::SessionPrompt>(params::prompt(id, &prompt))
        .await;
    let approval = wait_message_where(&client, id, "the approval after the restart", |m| {
        new(m) && m.msg_type == MsgType::ApprovalRequired && m.title.contains("after.txt")
    })
    .await;
    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message_where(&client, id, "the turn after the restart", |m| {
        new(m)
            && m.msg_type == MsgType::TaskComplete
            && m.body.as_deref().unwrap_or("").contains("back again")
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(after.there.join("after.txt")).unwrap(),
        "written after the restart"
    );
    if after.calls_in {
        let text = said(&client, id).await;
        assert!(
            text.contains("spawned cru notify reached-from-inside: exit 0"),
            "{gone:?}: the agent could not reach the daemon from inside: {text}"
        );
        wait_message_where(&client, id, "the agent's own notice", |m| {
            new(m) && m.title.contains("reached-from-inside")
        })
        .await;
    }
    restarted
}
