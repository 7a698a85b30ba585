//! Daemon lifecycle: racing auto-start, stale state, grace period, signals, permissions.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::MsgType;
use crucible::protocol::methods::{self as m, NoParams};
use crucible::protocol::params::{IdParams, RegisterParams, SessionListParams};
use serde_json::{Value, json};
use testkit::params::{query, send, session_id};

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn eight_racing_clients_end_with_one_daemon() {
    let t = TestKiln::new();
    let _cleanup = KillOnDrop(t.kiln.clone());
    // Eight real `cru` processes, started together, each finding no daemon.
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let root = t.root().to_path_buf();
            std::thread::spawn(move || {
                std::process::Command::new(CRU)
                    .arg("--kiln")
                    .arg(&root)
                    .args(["session", "list", "--json"])
                    .env("CRU_DAEMON_EXE", CRU)
                    .output()
                    .expect("run cru")
            })
        })
        .collect();
    for racer in racers {
        let out = racer.join().unwrap();
        assert!(out.status.success(), "a racer failed: {}", stderr(&out));
    }
    let pids = daemon_processes(t.root());
    assert_eq!(pids.len(), 1, "daemons running: {pids:?}");
    assert_eq!(t.daemon_pid(), Some(pids[0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_socket_and_dead_pid_are_replaced() {
    let t = TestKiln::new();
    let mut first = t.spawn_daemon().await;
    let old_pid = first.pid();
    first.kill9();
    assert!(
        t.kiln.socket_path().exists(),
        "kill -9 leaves the socket behind"
    );
    assert_eq!(t.daemon_pid(), Some(old_pid), "and the pid file");

    let _cleanup = KillOnDrop(t.kiln.clone());
    let c = t.client().await;
    assert_ne!(c.daemon().pid, old_pid);
    assert_eq!(t.daemon_pid(), Some(c.daemon().pid));
    assert!(
        c.call::<m::SessionList>(&SessionListParams::default())
            .await
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_daemon_refuses_to_start() {
    let t = TestKiln::new();
    let d = t.spawn_daemon().await;
    let out = t.cru(&["daemon", "run"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("already running for this kiln (pid {})", d.pid())),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_exits_after_the_grace_period_unless_a_client_arrives() {
    let t = TestKiln::with_settings("[daemon]\ngrace_period_secs = 2\n");
    let mut d = t.spawn_daemon().await;
    // A client leaving and another arriving within the grace keeps it alive past it.
    for _ in 0..3 {
        let c = Client::connect(&t.kiln).await.expect("still serving");
        assert_eq!(c.daemon().pid, d.pid());
        drop(c);
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    let held = Client::connect(&t.kiln).await.expect("still serving");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "a connected client keeps the daemon up"
    );
    assert!(held.call::<m::Ping>(&NoParams {}).await.is_ok());
    drop(held);
    let status = d.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "clean exit after the grace: {status}");
    assert!(!t.kiln.socket_path().exists(), "socket removed");
    assert!(!t.kiln.pid_path().exists(), "pid file removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_shuts_down_cleanly_and_keeps_data() {
    let t = TestKiln::new();
    let mut d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let s = register(&c, "claude").await;
    let sent = c
        .call::<m::InboxSend>(&send(&s, MsgType::TaskComplete, "done", &[]))
        .await
        .unwrap();
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(d.pid().to_string())
        .status()
        .unwrap();
    let status = d.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
    assert!(!t.kiln.socket_path().exists());

    let _again = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let got = c
        .call::<m::InboxGet>(&IdParams { id: sent.id })
        .await
        .unwrap();
    assert_eq!(got.message.title, "done");
    let listed = c
        .call::<m::SessionList>(&SessionListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.sessions[0].id, s);
}

#[tokio::test(flavor = "multi_thread")]
async fn socket_is_owner_only_and_other_users_are_refused() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let mode = std::fs::metadata(t.kiln.socket_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let state_mode = std::fs::metadata(t.kiln.state_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(state_mode, 0o700);

    // Open the file permissions, so only the daemon's own uid check stands in the way,
    // then connect as another user.
    if crucible::sys::current_uid() != 0
        || std::process::Command::new("setpriv")
            .arg("--help")
            .output()
            .is_err()
        || !std::path::Path::new("/usr/bin/python3").exists()
    {
        eprintln!("skipping the other-user half: needs root, setpriv and /usr/bin/python3");
        return;
    }
    for dir in t.kiln.state_dir().ancestors().take(3) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(t.kiln.socket_path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let script = format!(
        // The daemon refuses at once, so the request may meet a closed socket (EPIPE):
        // what matters is the refusal it reads.
        "import socket\ns = socket.socket(socket.AF_UNIX); s.connect({:?})\n\
         try: s.sendall(b'{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\\n')\n\
         except BrokenPipeError: pass\n\
         print(s.makefile().readline())",
        t.kiln.socket_path().display().to_string()
    );
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let reply = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let reply: serde_json::Value = serde_json::from_str(reply.trim()).expect("one JSON line");
    assert_eq!(error_code(&reply), crucible::protocol::code::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_from_a_newer_release_is_refused_not_guessed_at() {
    let t = TestKiln::new();
    let mut d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let version = c
        .call::<m::DbQuery>(&query(
            "SELECT VALUE version FROM crucible_meta:schema",
            Value::Null,
        ))
        .await
        .unwrap();
    assert_eq!(version.result[0], json!([crucible::store::SCHEMA_VERSION]));
    c.call::<m::DbQuery>(&query(
        "UPSERT crucible_meta:schema SET version = 99",
        Value::Null,
    ))
    .await
    .unwrap();
    drop(c);
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(d.pid().to_string())
        .status()
        .unwrap();
    d.wait_exit(Duration::from_secs(20)).await;
    let out = t.cru(&["daemon", "run"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("schema version 99"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn registering_the_same_worktree_and_agent_again_evicts_the_live_one() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    let register = |worktree: &'static str| {
        let client = &client;
        async move {
            client
                .call::<m::SessionRegister>(RegisterParams {
                    worktree: Some(worktree.into()),
                    agent_type: "acp".into(),
                    agent_name: "claude".into(),
                })
                .await
        }
    };
    let first = register("/src/a").await;
    let other = register("/src/b").await;
    assert!(other.evicted.is_empty(), "another worktree evicts nothing");
    let second = register("/src/a").await;
    assert_eq!(second.evicted, [first.session_id.as_str()]);
    let old = client
        .call::<m::SessionGet>(session_id(&first.session_id))
        .await;
    assert_eq!(old.session.status, "ended");
    assert!(
        old.session
            .state_reason
            .as_deref()
            .unwrap_or("")
            .starts_with("evicted"),
        "{old:?}"
    );
    let listed = client
        .call::<m::SessionList>(SessionListParams::default())
        .await;
    let ids: Vec<&str> = listed.sessions.iter().map(|s| s.id.as_str()).collect();
    assert!(!ids.contains(&first.session_id.as_str()));
    assert!(ids.contains(&second.session_id.as_str()));
    assert!(ids.contains(&other.session_id.as_str()));
}
