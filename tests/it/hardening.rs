//! The daemon under hostile or careless use: one handshake per connection, the agent-only
//! socket, JSON-RPC details (batches, positional params, exact ids), what a handle may
//! learn, owner-only state, a kiln deleted under a running daemon, running out of file
//! descriptors, a 64 MiB line of agent output and a 50,000-entry session.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crucible::protocol::SessionState;
use serde_json::{Value, json};

use crate::common::*;
use crate::sessions::{LONG, agent_kiln, said, wait_session, wait_state};

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// A registered session's id and handle.
async fn registered(tk: &TestKiln, agent: &str) -> (String, String) {
    crate::agents::session_with_handle(&tk.client().await, agent).await
}

/// Starts a session of `agent` in a new worktree on `branch`; its id.
async fn create_in(
    client: &crucible::client::Client,
    agent: &str,
    branch: &str,
    task: &str,
) -> String {
    let reply = client
        .call_value(
            "session.create",
            json!({"agent": agent, "worktree": branch, "task": task}),
        )
        .await
        .expect("create");
    reply["session_id"].as_str().expect("id").to_string()
}

#[tokio::test]
async fn a_second_handshake_is_refused_and_a_handle_keeps_its_scope() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_, handle) = registered(&tk, "alice").await;
    let mut raw = Raw::connect(&tk.kiln).await;
    let hello = json!({"protocol_version": 1, "handle": handle});
    let reply = raw.call(request(1, "handshake", hello)).await;
    assert!(reply["result"]["session_id"].is_string(), "{reply}");
    let again = raw
        .call(request(2, "handshake", json!({"protocol_version": 1})))
        .await;
    assert_eq!(error_code(&again), -32600, "{again}");
    let list = raw.call(request(3, "session.list", json!({}))).await;
    assert_eq!(error_code(&list), -32005, "the scope was shed: {list}");
}

#[tokio::test]
async fn the_agent_socket_serves_session_handles_only() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let (session_id, handle) = registered(&tk, "agent").await;
    let socket = tk.kiln.agent_socket_path();
    assert_eq!(mode(&socket), 0o600);

    let mut raw = Raw::connect_path(&socket).await;
    let pong = raw.call(request(1, "ping", json!({}))).await;
    assert_eq!(pong["result"]["pong"], true);
    let early = raw.call(request(2, "session.list", json!({}))).await;
    assert_eq!(error_code(&early), -32005, "{early}");
    let bare = raw
        .call(request(3, "handshake", json!({"protocol_version": 1})))
        .await;
    assert_eq!(error_code(&bare), -32005, "{bare}");

    let mut raw = Raw::connect_path(&socket).await;
    let hello = json!({"protocol_version": 1, "handle": handle});
    let reply = raw.call(request(1, "handshake", hello)).await;
    assert_eq!(reply["result"]["session_id"], session_id.as_str());
    let sent = raw
        .call(request(
            2,
            "inbox.send",
            json!({"msg_type": "info", "title": "hi"}),
        ))
        .await;
    assert!(sent["result"]["id"].is_string(), "{sent}");
    let list = raw.call(request(3, "session.list", json!({}))).await;
    assert_eq!(error_code(&list), -32005);
}

#[tokio::test]
async fn long_calls_in_a_batch_are_answered_inside_its_one_array() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let (session_id, _) = registered(&tk, "bob").await;
    let client = tk.client().await;
    let sent = client
        .call_value(
            "inbox.send",
            json!({"session_id": session_id, "msg_type": "decision_needed", "title": "Which?",
                   "options": ["a", "b"]}),
        )
        .await
        .expect("send");
    let mut raw = Raw::handshaken(&tk.kiln).await;
    let batch = json!([
        request(
            1,
            "inbox.wait",
            json!({"id": sent["id"], "timeout_secs": 1})
        ),
        request(2, "ping", json!({})),
        request(3, "session.prune", json!({})),
    ]);
    let reply = raw.call(batch).await;
    let answers = reply.as_array().expect("one array");
    let ids: Vec<u64> = answers.iter().filter_map(|a| a["id"].as_u64()).collect();
    assert_eq!(ids, [1, 2, 3], "{reply}");
    assert_eq!(error_code(&answers[0]), -32007);
    assert_eq!(answers[1]["result"]["pong"], true);
    assert!(answers[2]["result"]["deleted"].is_array());
    // Nothing of the batch arrives after it.
    let next = raw.call(request(4, "ping", json!({}))).await;
    assert_eq!(next["id"], 4, "{next}");
}

#[tokio::test]
async fn positional_params_follow_the_documented_order_and_ids_come_back_as_sent() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let _client = tk.client().await;
    let mut raw = Raw::handshaken(&tk.kiln).await;
    let reply = raw
        .call(request(
            1,
            "session.register",
            json!(["claude", "alice", "feat/x"]),
        ))
        .await;
    let session = &reply["result"]["session"];
    assert_eq!(session["agent_type"], "claude", "{reply}");
    assert_eq!(session["agent_name"], "alice");
    assert_eq!(session["worktree"], "feat/x");
    let delete = raw
        .call(request(
            2,
            "session.delete",
            json!(["01NOSUCHSESSION", false]),
        ))
        .await;
    assert_eq!(error_code(&delete), -32002, "positional delete: {delete}");
    let too_many = raw.call(request(3, "session.get", json!(["a", "b"]))).await;
    assert_eq!(error_code(&too_many), -32602);

    for id in ["18446744073709551616", "1e2", "-7.25"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        raw.send_bytes(format!("{line}\n").as_bytes()).await;
        let text = raw.recv_text().await;
        assert!(text.contains(&format!(r#""id":{id}"#)), "{id}: {text}");
    }
}

#[tokio::test]
async fn a_handle_cannot_tell_another_sessions_message_from_a_missing_one() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_, handle) = registered(&tk, "a").await;
    let (other, _) = registered(&tk, "b").await;
    let client = tk.client().await;
    let theirs = client
        .call_value(
            "inbox.send",
            json!({"session_id": other, "msg_type": "info", "title": "private"}),
        )
        .await
        .expect("send");
    let theirs = theirs["id"].as_str().expect("id");
    let missing = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    let mut raw = Raw::connect(&tk.kiln).await;
    let hello = json!({"protocol_version": 1, "handle": handle});
    raw.call(request(1, "handshake", hello)).await;
    let a = raw
        .call(request(2, "inbox.get", json!({"id": theirs})))
        .await;
    let b = raw
        .call(request(3, "inbox.get", json!({"id": missing})))
        .await;
    assert_eq!(error_code(&a), error_code(&b));
    assert_eq!(error_code(&a), -32002);
    let strip = |v: &Value, id: &str| {
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .replace(id, "ID")
    };
    assert_eq!(strip(&a, theirs), strip(&b, missing));
}

#[tokio::test]
async fn a_state_directory_made_by_hand_becomes_owner_only() {
    let tk = TestKiln::new();
    let state = tk.kiln.state_dir();
    std::fs::create_dir_all(state.join("logs")).unwrap();
    std::fs::create_dir_all(state.join("sessions")).unwrap();
    std::fs::write(state.join("sessions/old.md"), "# old\n").unwrap();
    for dir in ["", "logs", "sessions"] {
        std::fs::set_permissions(state.join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(
        state.join("sessions/old.md"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let _daemon = tk.spawn_daemon().await;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("logs")), 0o700);
    assert_eq!(mode(&state.join("sessions")), 0o700);
    assert_eq!(mode(&state.join("sessions/old.md")), 0o600);
    let mut stack = vec![state.join("db")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("db") {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // The engine marks its log folder 0750 itself; the 0700 state directory
                // above it is what keeps others out.
                assert_eq!(
                    mode(&path) & 0o007,
                    0,
                    "{} is open to others",
                    path.display()
                );
                stack.push(path);
            } else {
                assert_eq!(
                    mode(&path) & 0o077,
                    0,
                    "{} is open to others",
                    path.display()
                );
            }
        }
    }
}

#[tokio::test]
async fn a_daemon_whose_kiln_is_deleted_stops_its_agent_and_exits() {
    let tk = agent_kiln(
        "[agents.sleeper]\ntype = \"command\"\ncommand = \"sh\"\n\
         args = [\"-c\", \"echo started; exec sleep 600\"]\n",
    );
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let id = create_in(&client, "sleeper", "feat/sleep", "sleep").await;
    let daemon_pid = daemon.pid();
    let working = wait_session(&client, &id, "the program to run", |s| {
        s.state == Some(SessionState::Working) && s.agent_pid.is_some_and(|p| p != daemon_pid)
    })
    .await;
    let agent = working.agent_pid.expect("the program's pid");
    drop(client);

    std::fs::remove_dir_all(tk.root()).expect("delete the kiln");
    let status = daemon.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "the daemon should stop cleanly: {status}");
    wait_until("the agent to be gone", Duration::from_secs(10), || {
        !crucible::sys::pid_alive(agent)
    })
    .await;
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[tokio::test]
async fn out_of_descriptors_the_daemon_refuses_clearly_without_spinning() {
    use std::os::unix::process::CommandExt;
    let tk = TestKiln::new();
    let mut command = std::process::Command::new(CRU);
    command.stderr(std::process::Stdio::null());
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut daemon = tk.run_daemon(command).await;
    let pid = daemon.pid();
    let _first = tk.client().await;
    let idle = open_fds(pid);
    assert!(idle < 64, "an idle daemon holds {idle} descriptors");

    let log = tk.kiln.log_dir().join("daemon.log");
    let log_before = std::fs::metadata(&log).map_or(0, |m| m.len());
    let ticks_before = cpu_ticks(pid);
    let mut flood = Vec::new();
    for _ in 0..600 {
        if let Ok(stream) = std::os::unix::net::UnixStream::connect(tk.kiln.socket_path()) {
            stream.set_nonblocking(true).expect("nonblocking");
            flood.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu_secs = (cpu_ticks(pid) - ticks_before) as f64 / 100.0;
    let logged = std::fs::metadata(&log).map_or(0, |m| m.len()) - log_before;
    assert!(
        cpu_secs < 1.0,
        "the daemon spun: {cpu_secs} CPU-seconds in 3 s"
    );
    assert!(
        logged < 64 * 1024,
        "the daemon logged {logged} bytes in 3 s"
    );
    let mut refused = 0;
    for stream in &mut flood {
        use std::io::Read;
        let mut buf = [0u8; 512];
        if let Ok(n) = stream.read(&mut buf)
            && String::from_utf8_lossy(&buf[..n]).contains("-32008")
        {
            refused += 1;
        }
    }
    assert!(refused > 0, "no client was told why it was refused");
    drop(flood);
    let deadline = Instant::now() + LONG;
    loop {
        let mut raw = Raw::connect(&tk.kiln).await;
        let reply = raw
            .call(request(1, "handshake", json!({"protocol_version": 1})))
            .await;
        if reply.get("result").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon never recovered: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(daemon.child.try_wait().expect("try_wait").is_none());
}

/// The daemon's peak resident memory, in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number");
    kib / 1024
}

#[tokio::test]
async fn a_64_mib_line_is_cut_with_a_marker_and_memory_stays_bounded() {
    let tk = agent_kiln(
        "[agents.flood]\ntype = \"command\"\ncommand = \"sh\"\n\
         args = [\"-c\", \"head -c 67108864 /dev/zero | tr '\\\\0' x; echo; echo after the flood\"]\n",
    );
    let daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let id = create_in(&client, "flood", "feat/flood", "go").await;
    let done = wait_state(&client, &id, SessionState::Complete).await;
    assert!(done.state_reason.is_none(), "{done:?}");
    let text = said(&client, &id).await;
    assert!(
        text.contains("[crucible cut 67043328 more bytes here]"),
        "no cut marker in {} bytes: {}",
        text.len(),
        &text[text.len().saturating_sub(200)..]
    );
    assert!(text.contains("after the flood"));
    assert!(text.len() < 200 * 1024, "{} bytes kept", text.len());
    let peak = peak_rss_mib(daemon.pid());
    assert!(peak < 300, "the daemon peaked at {peak} MiB");
}

#[tokio::test]
async fn a_session_of_fifty_thousand_entries_is_deleted_whole() {
    let tk = agent_kiln(
        "[agents.quick]\ntype = \"command\"\ncommand = \"sh\"\nargs = [\"-c\", \"echo hi\"]\n",
    );
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let id = create_in(&client, "quick", "feat/long", "go").await;
    let session = wait_state(&client, &id, SessionState::Complete).await;
    let worktree = session.worktree.clone().expect("a worktree");
    // In transactions of 1,000 entries: with the full-text index, 5,000 at once are more
    // than the engine's default write buffer holds (the query is refused, whole).
    for chunk in 0..50 {
        let from = 1000 + chunk * 1000;
        let sql = format!(
            "FOR $i IN {from}..{to} {{ CREATE transcript CONTENT {{
                 session_id: $s, seq: $i, at: time::now(), kind: 'message',
                 text: 'a line of a long session' }} }};",
            to = from + 1000
        );
        client
            .call_value("db.query", json!({"sql": sql, "bindings": {"s": id}}))
            .await
            .expect("fill the transcript");
    }
    assert!(entries(&client, &id).await >= 50_000);

    let out = tk.cru(&[
        "session",
        "delete",
        &id,
        "--worktree",
        "--branch",
        "--force",
    ]);
    assert!(out.status.success(), "delete failed: {}", stderr(&out));
    // The session is gone at once; its transcript is purged behind the answer, and a
    // purge cut short by a crash is finished by the next daemon.
    daemon.kill9();
    daemon.wait_exit(Duration::from_secs(30)).await;
    drop(client);
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let get = client
        .call_value("session.get", json!({"session_id": id}))
        .await;
    assert!(get.is_err(), "the session is still there: {get:?}");
    let mut purged = false;
    for _ in 0..3000 {
        let tombstones = client
            .call_value(
                "db.query",
                json!({"sql": "SELECT VALUE id FROM deleted_sessions", "bindings": {}}),
            )
            .await
            .expect("count tombstones");
        if tombstones["result"][0]
            .as_array()
            .is_some_and(Vec::is_empty)
        {
            purged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(purged, "the purge never finished");
    assert_eq!(entries(&client, &id).await, 0);
    assert!(
        !Path::new(&worktree).exists(),
        "the worktree is still there"
    );
    let branches = std::process::Command::new("git")
        .args(["branch", "--list", "feat/long"])
        .current_dir(tk.root())
        .output()
        .expect("git branch");
    assert!(
        stdout(&branches).trim().is_empty(),
        "the branch is still there"
    );
}

/// How many transcript entries the database holds for a session.
async fn entries(client: &crucible::client::Client, id: &str) -> u64 {
    let reply = client
        .call_value(
            "db.query",
            json!({"sql": "SELECT VALUE count() FROM transcript WHERE session_id = $s GROUP ALL",
                   "bindings": {"s": id}}),
        )
        .await
        .expect("count");
    reply["result"][0][0].as_u64().unwrap_or(0)
}
