//! Agents talking to the inbox with their session handle: `cru notify / ask / approve`,
//! and everything a handle may not do; and `cru agents`, which lists them without
//! running any.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{DeregisterParams, IdParams, ListParams, RegisterParams};
use crucible::protocol::{InboxMessage, MsgType};
use serde_json::{Value, json};
use testkit::daemon::{call as owner_call, try_call};
use testkit::params::{query, respond, send, session_id};

/// `session.deregister` of session `id`, with no reason given.
fn deregister(id: &str) -> DeregisterParams {
    DeregisterParams {
        session_id: id.to_string(),
        reason: None,
        exit_code: None,
    }
}

/// The session's messages (up to 100), newest first.
async fn messages_of(client: &Client, session: &str) -> Vec<InboxMessage> {
    let window = ListParams {
        session_id: Some(session.to_string()),
        limit: Some(100),
        ..Default::default()
    };
    owner_call::<m::InboxList>(client, window).await.messages
}

use crate::common::*;

/// Registers a session; returns its id and handle.
pub(crate) async fn session_with_handle(client: &Client, agent: &str) -> (String, String) {
    let register = RegisterParams {
        worktree: None,
        agent_type: "script".into(),
        agent_name: agent.into(),
    };
    let registered = owner_call::<m::SessionRegister>(client, register).await;
    (registered.session_id, registered.handle)
}

async fn handshake(tk: &TestKiln, handle: &str) -> (Raw, Value) {
    let mut raw = Raw::connect(&tk.kiln).await;
    let reply = raw
        .call(json!({"jsonrpc": "2.0", "id": 0, "method": "handshake",
                     "params": {"protocol_version": crucible::protocol::PROTOCOL_VERSION,
                                "handle": handle}}))
        .await;
    (raw, reply)
}

async fn call(raw: &mut Raw, method: &str, params: Value) -> Value {
    raw.call(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .await
}

fn forbidden(reply: &Value, needle: &str) {
    assert_eq!(error_code(reply), -32005, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

#[tokio::test]
async fn a_handle_acts_only_for_its_own_session_and_not_at_all_once_revoked() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let owner = tk.client().await;
    let (mine, handle) = session_with_handle(&owner, "me").await;
    let (other, _) = session_with_handle(&owner, "other").await;
    assert!(handle.starts_with("H-") && handle.len() == 38, "{handle}");
    let theirs = send(&other, MsgType::DecisionNeeded, "theirs", &[]);
    let theirs = owner_call::<m::InboxSend>(&owner, theirs).await;

    let (mut agent, hello) = handshake(&tk, &handle).await;
    assert_eq!(hello["result"]["session_id"], mine.as_str(), "{hello}");

    // Allowed: its own session, its own messages.
    let sent = call(
        &mut agent,
        "inbox.send",
        json!({"msg_type": "decision_needed", "title": "Which?", "options": ["a", "b"]}),
    )
    .await;
    assert_eq!(
        sent["result"]["message"]["session_id"],
        mine.as_str(),
        "{sent}"
    );
    let own_id = sent["result"]["id"].clone();
    let got = call(&mut agent, "session.get", json!({"session_id": mine})).await;
    assert_eq!(got["result"]["session"]["id"], mine.as_str());
    let beat = call(&mut agent, "session.heartbeat", json!({"session_id": mine})).await;
    assert_eq!(beat["result"]["ok"], true);
    let waited = call(
        &mut agent,
        "inbox.wait",
        json!({"id": own_id, "timeout_secs": 1}),
    )
    .await;
    assert_eq!(error_code(&waited), -32007, "{waited}");

    // Refused, each with a clear error.
    forbidden(
        &call(
            &mut agent,
            "inbox.send",
            json!({"session_id": other, "msg_type": "info", "title": "spoof"}),
        )
        .await,
        "its own session",
    );
    forbidden(
        &call(
            &mut agent,
            "inbox.respond",
            json!({"id": own_id, "response": "a"}),
        )
        .await,
        "may not answer",
    );
    forbidden(
        &call(&mut agent, "session.get", json!({"session_id": other})).await,
        "its own session",
    );
    forbidden(
        &call(&mut agent, "session.list", json!({})).await,
        "may not list",
    );
    // Another session's message is "not found", exactly as a missing one: the refusal
    // must not tell a handle that it exists.
    for method in ["inbox.get", "inbox.wait"] {
        let reply = call(&mut agent, method, json!({"id": theirs.id})).await;
        assert_eq!(error_code(&reply), -32002, "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("no inbox message"))
        );
    }
    forbidden(
        &call(
            &mut agent,
            "db.query",
            json!({"sql": "SELECT * FROM sessions"}),
        )
        .await,
        "database",
    );
    for method in [
        "inbox.list",
        "inbox.clear",
        "subscribe",
        "session.create",
        "daemon.shutdown",
    ] {
        forbidden(&call(&mut agent, method, json!({})).await, method);
    }
    // The refusals changed nothing.
    let own_id = own_id.as_str().expect("an id").to_string();
    let own = owner_call::<m::InboxGet>(&owner, IdParams { id: own_id }).await;
    assert!(!own.message.responded);

    // The handle is stored only as a digest, and never logged.
    let sql = "SELECT * FROM handles; SELECT * FROM sessions";
    let rows = owner_call::<m::DbQuery>(&owner, query(sql, Value::Null)).await;
    let dump = serde_json::to_string(&rows.result).unwrap();
    assert!(dump.contains(&mine));
    assert!(
        !dump.contains(&handle[2..]),
        "the database holds a live handle"
    );

    // Revoked: the open connection and a new one get nothing at all.
    owner_call::<m::SessionDeregister>(&owner, deregister(&mine)).await;
    forbidden(
        &call(&mut agent, "session.get", json!({"session_id": mine})).await,
        "revoked",
    );
    forbidden(
        &call(
            &mut agent,
            "inbox.send",
            json!({"msg_type": "info", "title": "late"}),
        )
        .await,
        "revoked",
    );
    let (mut again, hello) = handshake(&tk, &handle).await;
    forbidden(&hello, "revoked");
    // A connection whose handle was refused is not served at all: it does not fall back
    // to the owner's access of a connection that never handshakes.
    let after = call(&mut again, "session.get", json!({"session_id": mine})).await;
    forbidden(&after, "not served");
    let (_, junk) = handshake(&tk, "H-not-a-handle").await;
    forbidden(&junk, "unknown");

    let log =
        std::fs::read_to_string(tk.root().join(".crucible/logs/daemon.log")).unwrap_or_default();
    assert!(!log.contains(&handle[2..]), "the log holds a handle");
}

fn agent_command(tk: &TestKiln, handle: &str, args: &[&str]) -> std::process::Child {
    Command::new(CRU)
        .args(args)
        .env("CRUCIBLE_HANDLE", handle)
        .env("CRUCIBLE_SOCKET", tk.kiln.socket_path())
        .env_remove("CRU_KILN")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cru")
}

/// Waits for the first unanswered message of a session and answers it.
async fn answer_next(client: &Client, session: &str, answer: &str) -> InboxMessage {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let open = messages_of(client, session)
            .await
            .into_iter()
            .find(|m| !m.responded && m.msg_type != MsgType::Info);
        if let Some(message) = open {
            owner_call::<m::InboxRespond>(client, respond(&message.id, answer)).await;
            return message;
        }
        assert!(std::time::Instant::now() < deadline, "no question arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn finish(child: std::process::Child) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    (
        status.code(),
        String::from_utf8_lossy(&stdout).trim().to_string(),
        String::from_utf8_lossy(&stderr).trim().to_string(),
    )
}

#[tokio::test]
async fn cru_notify_ask_and_approve_reach_the_human_and_report_by_exit_status() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let owner = tk.client().await;
    let (id, handle) = session_with_handle(&owner, "script").await;

    let (code, _, err) = finish(agent_command(
        &tk,
        &handle,
        &["notify", "Finished the auth flow"],
    ));
    assert_eq!(code, Some(0), "{err}");

    let asking = agent_command(
        &tk,
        &handle,
        &[
            "ask",
            "Which auth strategy?",
            "--option",
            "JWT",
            "--option",
            "Session",
        ],
    );
    let question = answer_next(&owner, &id, "session").await;
    assert_eq!(question.title, "Which auth strategy?");
    assert_eq!(finish(asking).0, Some(0));

    let asking = agent_command(&tk, &handle, &["ask", "Name it", "--timeout", "30"]);
    answer_next(&owner, &id, "crucible-ci").await;
    let (code, out, _) = finish(asking);
    assert_eq!((code, out.as_str()), (Some(0), "crucible-ci"));

    let approving = agent_command(&tk, &handle, &["approve", "About to delete 47 files"]);
    answer_next(&owner, &id, "deny").await;
    let (code, out, _) = finish(approving);
    assert_eq!((code, out.as_str()), (Some(1), "denied"));

    let approving = agent_command(&tk, &handle, &["approve", "Push to main"]);
    answer_next(&owner, &id, "approve").await;
    let (code, out, _) = finish(approving);
    assert_eq!((code, out.as_str()), (Some(0), "approved"));

    let (code, _, _) = finish(agent_command(
        &tk,
        &handle,
        &["ask", "Anyone?", "--timeout", "1"],
    ));
    assert_eq!(code, Some(3));

    let list = messages_of(&owner, &id).await;
    let titles: Vec<&str> = list.iter().map(|m| m.title.as_str()).collect();
    assert!(titles.contains(&"Finished the auth flow"), "{titles:?}");

    // Outside a session, or with a revoked handle: exit 5 and a clear reason.
    let (code, _, err) = finish(agent_command(&tk, "", &["notify", "hello"]));
    assert_eq!(code, Some(5), "{err}");
    owner_call::<m::SessionDeregister>(&owner, deregister(&id)).await;
    let (code, _, err) = finish(agent_command(&tk, &handle, &["ask", "Still there?"]));
    assert_eq!(code, Some(5));
    assert!(err.contains("revoked"), "{err}");
}

#[tokio::test]
async fn an_ended_session_keeps_its_termination_record_until_the_ttl() {
    let tk =
        TestKiln::with_settings("[daemon]\ngrace_period_secs = 60\nended_session_ttl_secs = 3\n");
    let mut daemon = tk.spawn_daemon().await;
    let owner = tk.client().await;
    let (id, handle) = session_with_handle(&owner, "builder").await;
    let crashed = DeregisterParams {
        session_id: id.clone(),
        reason: Some("the agent crashed".into()),
        exit_code: Some(3),
    };
    owner_call::<m::SessionDeregister>(&owner, crashed).await;

    // Gone from the live list, its handle dead, but the record answers.
    let list = owner_call::<m::SessionList>(&owner, Default::default()).await;
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);
    let (mut raw, reply) = handshake(&tk, &handle).await;
    assert!(reply.get("error").is_some(), "a revoked handle: {reply}");
    let refused = call(&mut raw, "session.get", json!({"session_id": id})).await;
    assert!(refused.get("result").is_none(), "{refused}");
    let record = owner_call::<m::SessionGet>(&owner, session_id(&id))
        .await
        .session;
    assert_eq!(record.status, "ended");
    assert_eq!(record.state_reason.as_deref(), Some("the agent crashed"));
    assert_eq!(record.exit_code, Some(3));
    assert!(record.ended_at.is_some(), "{record:?}");
    assert_eq!(stored(&owner, &id).await, 1);
    let err = try_call::<m::SessionHeartbeat>(&owner, session_id(&id))
        .await
        .unwrap_err();
    assert_eq!(err.rpc_code(), Some(-32002));
    assert!(err.to_string().contains("ended at"), "{err}");

    // `cru session status` shows it, after a daemon restart too.
    drop(owner);
    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());
    let out = tk.cru(&["session", "status", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    for needle in ["ended", "the agent crashed", "exit code 3"] {
        assert!(shown.contains(needle), "{needle:?} missing from:\n{shown}");
    }

    // Once the TTL has passed the record is gone, from the database too.
    let owner = tk.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match try_call::<m::SessionGet>(&owner, session_id(&id)).await {
            Err(e) if e.to_string().contains("no session") => break,
            other => assert!(
                std::time::Instant::now() < deadline,
                "still kept: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        stored(&owner, &id).await,
        0,
        "the record is still in the database"
    );
}

/// How many rows the database holds for a session id.
async fn stored(owner: &Client, id: &str) -> usize {
    let sql = "SELECT id FROM type::record('sessions', $id)";
    let rows = owner_call::<m::DbQuery>(owner, query(sql, json!({"id": id}))).await;
    rows.result
        .first()
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// `cru agents` and `cru agents --json` in a kiln whose settings profiles are scripts that
/// do their work whatever their arguments: none of them runs (no marker, the file they
/// change untouched), and an npm agent's version is read from its package.
#[test]
fn listing_agents_runs_no_settings_profiles_program() {
    let tk = TestKiln::new();
    let root = tk.root();
    let ran = root.join("ran");
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "start\n").unwrap();
    let work =
        format!("#!/bin/sh\necho \"$0 $*\" >> {ran:?}\necho deployed >> {notes:?}\necho 9.9.9\n");
    let deploy = root.join("deploy.sh");
    write_script(&deploy, &work);
    // An npm layout: the command is the package's link in node_modules/.bin.
    let modules = root.join("tools/node_modules");
    std::fs::create_dir_all(modules.join("pkg/bin")).unwrap();
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::fs::write(
        modules.join("pkg/package.json"),
        r#"{"name":"pkg","version":"1.2.3","bin":{"x":"bin/x.js"}}"#,
    )
    .unwrap();
    write_script(&modules.join("pkg/bin/x.js"), &work);
    std::os::unix::fs::symlink("../pkg/bin/x.js", modules.join(".bin/x")).unwrap();
    std::fs::write(
        tk.kiln.settings_path(),
        format!(
            "[agents.deploy]\ntype = \"command\"\ncommand = {deploy:?}\n\n\
             [agents.deploy-acp]\ncommand = {deploy:?}\n\n\
             [agents.npm]\ntype = \"command\"\ncommand = {:?}\n",
            modules.join(".bin/x")
        ),
    )
    .unwrap();

    let out = tk.cru(&["agents"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} is listed:\n{table}"))
            .to_string()
    };
    assert!(row("npm").contains("1.2.3"), "{table}");
    for name in ["deploy", "deploy-acp"] {
        let line = row(name);
        assert!(line.trim_end().ends_with('—'), "{table}");
        assert!(!line.contains("9.9.9"), "{table}");
    }

    let out = tk.cru(&["agents", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let version = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is listed: {listed}"))["version"]
            .clone()
    };
    assert_eq!(version("npm"), json!("1.2.3"));
    assert_eq!(version("deploy"), Value::Null);
    assert_eq!(version("deploy-acp"), Value::Null);

    assert!(
        !ran.exists(),
        "listing ran a profile's program: {}",
        std::fs::read_to_string(&ran).unwrap_or_default()
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "start\n");
}
