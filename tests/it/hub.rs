//! The hub with the real binary: three kilns with an agent waiting in each, reached
//! through one socket. Its inbox and session list hold all three, each row named with its
//! kiln; an answer through it reaches the right agent and is recorded as given through
//! the hub; a kiln daemon killed with `kill -9` is shown lost while the others are still
//! served, and is reached again once its daemon is back, with nothing answered twice;
//! and the workbench on the hub, in tmux, shows the kilns' sessions grouped and named
//! and answers one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::{
    ComponentState, InboxMessage, ListParams, MsgType, RespondParams, SessionIdParams,
    SessionState, code,
};

use crate::common::*;
use crate::sessions::{agent_kiln, create, session, wait_message_where, wait_state};
use crate::tmux::Tmux;

/// The hub's state in `daemon.status`: each kiln's component.
async fn kiln_state(hub: &Client, name: &str) -> ComponentState {
    let status = hub
        .call::<m::DaemonStatusOf>(&m::NoParams {})
        .await
        .unwrap();
    status
        .components
        .iter()
        .find(|c| c.name == format!("kiln {name}"))
        .unwrap_or_else(|| panic!("no kiln {name} in {:?}", status.components))
        .state
}

async fn wait_kiln_state(hub: &Client, name: &str, want: ComponentState) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = kiln_state(hub, name).await;
        if state == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kiln {name} stayed {state:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every waiting approval the hub lists, as (kiln, id).
async fn waiting_through(hub: &Client) -> Vec<(String, String)> {
    let params = ListParams {
        unread_only: false,
        limit: Some(100),
        session_id: None,
    };
    let list = testkit::daemon::call::<m::InboxList>(hub, params).await;
    let mut seen: Vec<(String, String)> = list
        .messages
        .iter()
        .filter(|m| m.msg_type == MsgType::ApprovalRequired && !m.responded && !m.withdrawn)
        .map(|m| (m.kiln.clone().expect("named with its kiln"), m.id.clone()))
        .collect();
    seen.sort();
    seen
}

#[tokio::test]
async fn the_hub_serves_three_kilns_as_one_and_outlives_a_killed_daemon() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let _hub_guard = HubGuard(state.clone());
    let mut kilns = Vec::new();
    let mut daemons = Vec::new();
    let mut asked = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let tk = agent_kiln(&format!("[kiln]\nname = \"{name}\"\n"));
        let mut daemon = Command::new(CRU);
        daemon.env("XDG_STATE_HOME", &state).stderr(Stdio::piped());
        daemons.push(tk.run_daemon(daemon).await);
        let client = tk.client().await;
        let task = format!("permit p1 Deploy {name}\nwrite {name}.txt yes\nsay done");
        let s = create(&client, "scripted", Some(&task)).await;
        let m: InboxMessage = wait_message_where(&client, &s.id, "the approval", |m| {
            m.msg_type == MsgType::ApprovalRequired && !m.responded
        })
        .await;
        asked.push((s.id, m.id));
        kilns.push(tk);
    }

    // The hub is started by the first client that asks for it.
    let outside = home.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let mut status = Command::new(CRU);
    status
        .current_dir(&outside)
        .args(["hub", "status", "--json"])
        .env("XDG_STATE_HOME", &state)
        .env_remove("CRU_KILN")
        .env("CRU_DAEMON_EXE", CRU);
    let out = run_bounded(status, "cru hub status");
    assert!(out.status.success(), "{}", stderr(&out));
    let socket = state.join("crucible/hub.sock");
    let mode = std::fs::metadata(&socket).unwrap().permissions();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.mode() & 0o777, 0o600, "the hub's socket is owner-only");
    let hub = Client::connect_at(&socket, None).await.unwrap();
    for name in ["alpha", "beta", "gamma"] {
        wait_kiln_state(&hub, name, ComponentState::On).await;
    }

    // One inbox and one session list over all three, each row named with its kiln.
    let expected: Vec<(String, String)> = ["alpha", "beta", "gamma"]
        .iter()
        .zip(&asked)
        .map(|(k, (_, id))| (k.to_string(), id.clone()))
        .collect();
    assert_eq!(waiting_through(&hub).await, expected);
    let sessions = hub
        .call::<m::SessionList>(&Default::default())
        .await
        .unwrap()
        .sessions;
    let mut named: Vec<(Option<String>, String)> = sessions
        .iter()
        .map(|s| (s.kiln.clone(), s.id.clone()))
        .collect();
    named.sort();
    let want: Vec<(Option<String>, String)> = ["alpha", "beta", "gamma"]
        .iter()
        .zip(&asked)
        .map(|(k, (s, _))| (Some(k.to_string()), s.clone()))
        .collect();
    assert_eq!(named, want);

    // An answer through the hub reaches beta's agent, and says it came through the hub.
    let (beta_session, beta_question) = asked[1].clone();
    let answered = hub
        .call::<m::InboxRespond>(&RespondParams {
            id: beta_question.clone(),
            response: "approve".into(),
            asked: None,
        })
        .await
        .unwrap();
    assert_eq!(answered.message.kiln.as_deref(), Some("beta"));
    let by = answered.message.answered_by.clone().unwrap_or_default();
    assert!(by.contains("via the hub"), "answered by {by:?}");
    let beta = kilns[1].client().await;
    wait_state(&beta, &beta_session, SessionState::Complete).await;
    let worktree = session(&beta, &beta_session).await.worktree.unwrap();
    assert!(Path::new(&worktree).join("beta.txt").exists());
    // Answering it again is refused, through the hub as directly.
    let again = hub
        .call::<m::InboxRespond>(&RespondParams {
            id: beta_question.clone(),
            response: "approve".into(),
            asked: None,
        })
        .await
        .unwrap_err();
    assert_eq!(again.rpc_code(), Some(code::CONFLICT), "{again}");

    // gamma's daemon is killed: the hub shows it lost, and still serves the others.
    daemons[2].kill9();
    let gamma_state = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let state = kiln_state(&hub, "gamma").await;
            if state != ComponentState::On || Instant::now() > deadline {
                break state;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    assert_ne!(gamma_state, ComponentState::On);
    let alpha_session = hub
        .call::<m::SessionGet>(&SessionIdParams {
            session_id: asked[0].0.clone(),
        })
        .await
        .unwrap();
    assert_eq!(alpha_session.session.kiln.as_deref(), Some("alpha"));
    let left = waiting_through(&hub).await;
    assert_eq!(left, vec![expected[0].clone()], "gamma is out of reach");

    // Its daemon comes back (recording itself again): the hub reaches it once more.
    let mut daemon = Command::new(CRU);
    daemon.env("XDG_STATE_HOME", &state).stderr(Stdio::piped());
    daemons[2] = kilns[2].run_daemon(daemon).await;
    wait_kiln_state(&hub, "gamma", ComponentState::On).await;
    let gamma = hub
        .call::<m::SessionGet>(&SessionIdParams {
            session_id: asked[2].0.clone(),
        })
        .await
        .unwrap();
    assert_eq!(gamma.session.kiln.as_deref(), Some("gamma"));
    // beta's answer was not given again meanwhile: its agent ran its turn once.
    let beta_now = session(&beta, &beta_session).await;
    assert_eq!(beta_now.state, Some(SessionState::Complete));

    // The hub refuses what belongs to one kiln, saying so.
    let select = testkit::params::query("SELECT 1", serde_json::Value::Null);
    let refused = testkit::daemon::try_call::<m::DbQuery>(&hub, select)
        .await
        .unwrap_err();
    assert_eq!(refused.rpc_code(), Some(code::FORBIDDEN), "{refused}");

    // The workbench on the hub, from a folder that is no kiln: every kiln's sessions,
    // grouped under their kiln's name; alpha's approval answered from it.
    let state_text = state.display().to_string();
    let term = Tmux::start(
        "hub",
        (160, 30),
        &outside,
        &[
            ("XDG_STATE_HOME", &state_text),
            ("CRU_DAEMON_EXE", CRU),
            ("TERM", "xterm-256color"),
        ],
        CRU,
        &["--all-kilns"],
    );
    let screen = term.wait_for("three kilns in the status bar", |s| {
        let bar = s.lines().last().unwrap_or_default();
        bar.contains("alpha:") && bar.contains("beta:") && bar.contains("gamma:")
    });
    assert!(screen.contains("every kiln"), "{screen}");
    assert!(
        screen.contains("alpha: "),
        "the inbox names the kiln:\n{screen}"
    );
    // Session [1] is alpha's (the bar is grouped by kiln): focused, its approval is
    // answered from the input.
    let (alpha_session, alpha_question) = asked[0].clone();
    let alpha = kilns[0].client().await;
    term.type_text("/goto 1");
    term.keys(&["Enter"]);
    term.wait_for("alpha's session focused", |s| {
        s.contains("prompt → [1] alpha · ")
    });
    term.type_text("/approve");
    term.keys(&["Enter"]);
    wait_state(&alpha, &alpha_session, SessionState::Complete).await;
    let answered = alpha
        .call::<m::InboxGet>(&crucible::protocol::IdParams { id: alpha_question })
        .await
        .unwrap();
    let by = answered.message.answered_by.unwrap_or_default();
    assert!(by.contains("workbench via the hub"), "answered by {by:?}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());

    let _ = hub.call::<m::DaemonShutdown>(&m::NoParams {}).await;
}
