//! A kiln on another machine, reached by the hub over the person's own ssh: an OpenSSH
//! server on 127.0.0.1 (as the ssh driver's tests run it) stands for the other machine,
//! and `[[hub.remotes]]` in the person's settings names the kiln there. Nothing listens
//! there but the kiln's own daemon socket, relayed by `cru daemon bridge` over ssh's
//! standard input and output. The kiln is listed with its host, its question answered
//! through the hub, and a cut connection is shown and made again.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::{
    ComponentState, ComponentStatus, InboxMessage, ListParams, MsgType, SessionIdParams,
    SessionState,
};

use crate::common::*;
use crate::sessions::{agent_kiln, create, wait_message_where, wait_state};

/// The remote kiln's row in the hub's status.
async fn remote_row(hub: &Client) -> Option<ComponentStatus> {
    let status = hub.call::<m::DaemonStatusOf>(&m::NoParams {}).await.ok()?;
    status
        .components
        .into_iter()
        .find(|c| c.name.ends_with("@crucible-remote"))
}

async fn wait_remote(hub: &Client, what: &str, check: impl Fn(&ComponentStatus) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = remote_row(hub).await;
        if row.as_ref().is_some_and(&check) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {row:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_kiln_on_another_machine_is_reached_over_ssh_and_answered_through_the_hub() {
    let Some(sshd) = Sshd::start() else { return };
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let config = home.path().join("config");
    // "Over there": the kiln and its daemon keep their own registry, so this machine's
    // hub knows the kiln only from the settings, as a remote one.
    let there = home.path().join("remote-state");
    let tk = agent_kiln("[kiln]\nname = \"faraway\"\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = Command::new(CRU);
    daemon.env("XDG_STATE_HOME", &there).stderr(Stdio::piped());
    let _daemon = tk.run_daemon(daemon).await;
    let direct = tk.client().await;
    let s = create(
        &direct,
        "scripted",
        Some("permit p1 Deploy faraway\nwrite far.txt yes\nsay done"),
    )
    .await;
    let asked: InboxMessage = wait_message_where(&direct, &s.id, "the approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded
    })
    .await;

    std::fs::create_dir_all(config.join("crucible")).unwrap();
    std::fs::write(
        config.join("crucible/config.toml"),
        format!(
            "[[hub.remotes]]\nssh = \"crucible-remote\"\nssh_args = [\"-F\", \"{ssh}\"]\n\
             kilns = [\"{kiln}\"]\ncru = \"env XDG_STATE_HOME={there} {cru}\"\n",
            ssh = sshd.config().display(),
            kiln = tk.root().display(),
            there = there.display(),
            cru = CRU,
        ),
    )
    .unwrap();
    let mut status = Command::new(CRU);
    status
        .current_dir(home.path())
        .args(["hub", "status"])
        .env("XDG_STATE_HOME", &state)
        .env("XDG_CONFIG_HOME", &config)
        .env_remove("CRU_KILN")
        .env("CRU_DAEMON_EXE", CRU);
    let out = run_bounded(status, "cru hub status");
    assert!(out.status.success(), "{}", stderr(&out));
    let hub = Client::connect_at(&state.join("crucible/hub.sock"), None)
        .await
        .unwrap();
    let _stop = HubGuard(state.clone());
    wait_remote(&hub, "the remote kiln reached", |row| {
        row.state == ComponentState::On && row.detail.contains("on crucible-remote")
    })
    .await;

    // Its question is listed named with its host, and answered through the hub.
    let list = hub
        .call::<m::InboxList>(&ListParams {
            unread_only: false,
            limit: Some(50),
            session_id: None,
        })
        .await
        .unwrap();
    let listed = list
        .messages
        .iter()
        .find(|m| m.id == asked.id)
        .expect("the remote kiln's question through the hub");
    let name = listed.kiln.clone().expect("named with its kiln");
    assert!(name.ends_with("@crucible-remote"), "{name}");

    // The person's commands, from outside every kiln, as this machine's person.
    let cru = |args: &[&str]| {
        let mut command = Command::new(CRU);
        command
            .current_dir(home.path())
            .args(args)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("CRU_KILN");
        let out = run_bounded(command, &args.join(" "));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let row_of = |rows: &serde_json::Value, key: &str, value: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r[key] == value)
            .cloned()
            .unwrap_or_else(|| panic!("no {key} {value} in {rows}"))
    };

    // `cru kilns` lists it with its host, reached, its question waiting.
    let rows: serde_json::Value = serde_json::from_str(&cru(&["kilns", "--json"])).unwrap();
    let row = row_of(&rows, "name", &name);
    assert_eq!(row["host"], "crucible-remote", "{row}");
    assert_eq!(row["state"], "connected", "{row}");
    assert_eq!(row["waiting"], 1, "{row}");

    // `--all-kilns` lists it too, each row named with its kiln and host.
    let rows: serde_json::Value =
        serde_json::from_str(&cru(&["inbox", "--all-kilns", "--json"])).unwrap();
    let row = row_of(&rows, "id", &asked.id);
    assert_eq!(row["kiln"], name.as_str(), "{row}");
    assert_eq!(row["host"], "crucible-remote", "{row}");
    let rows: serde_json::Value =
        serde_json::from_str(&cru(&["session", "list", "--all-kilns", "--json"])).unwrap();
    let row = row_of(&rows, "id", &s.id);
    assert_eq!(row["kiln"], name.as_str(), "{row}");
    let table = cru(&["inbox", "--all-kilns"]);
    assert!(table.contains(&name), "{table}");

    // Answered from outside every kiln, by its id alone: through the hub.
    let answered: serde_json::Value =
        serde_json::from_str(&cru(&["inbox", "respond", &asked.id, "approve", "--json"])).unwrap();
    assert_eq!(answered["kiln"], name.as_str(), "{answered}");
    assert!(
        answered["answered_by"]
            .as_str()
            .is_some_and(|by| by.contains("via the hub")),
        "{answered}"
    );
    wait_state(&direct, &s.id, SessionState::Complete).await;

    // The connection is cut: shown, and made again.
    sshd.cut_connections();
    wait_remote(&hub, "the cut shown", |row| row.state != ComponentState::On).await;
    wait_remote(&hub, "the remote kiln reached again", |row| {
        row.state == ComponentState::On
    })
    .await;
    let again = hub
        .call::<m::SessionGet>(&SessionIdParams {
            session_id: s.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(again.session.kiln.as_deref(), Some(name.as_str()));
    assert_eq!(again.session.state, Some(SessionState::Complete));
}
