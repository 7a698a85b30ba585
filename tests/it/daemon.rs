//! Every method of a real daemon on a temp kiln (surrealkv), happy path and bad params;
//! malformed input; events; orphan cleanup; durability across kill -9.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::code;
use serde_json::{Value, json};

use crate::common::*;

#[cfg(feature = "matrix")]
mod components;

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test(flavor = "multi_thread")]
async fn the_handshake_is_optional_and_versions_must_match() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let mut raw = Raw::connect(&t.kiln).await;
    assert_eq!(
        raw.call(rpc(1, "ping", json!({}))).await["result"]["pong"],
        json!(true)
    );
    // A client that never handshakes (seed 003 has none) is served as protocol 1.
    assert!(raw.call(rpc(2, "session.list", json!({}))).await["result"]["sessions"].is_array());
    let wrong = raw
        .call(rpc(3, "handshake", json!({"protocol_version": 999})))
        .await;
    assert_eq!(error_code(&wrong), code::VERSION_MISMATCH);
    assert_eq!(
        wrong["error"]["data"]["protocol_version"],
        json!(crucible::protocol::PROTOCOL_VERSION)
    );
    assert_eq!(
        error_code(&raw.call(rpc(4, "handshake", json!({}))).await),
        code::INVALID_PARAMS
    );
    let ok = raw
        .call(rpc(
            5,
            "handshake",
            json!({"protocol_version": crucible::protocol::PROTOCOL_VERSION}),
        ))
        .await;
    assert_eq!(ok["result"]["kiln"], json!(t.root().display().to_string()));
    assert!(raw.call(rpc(6, "session.list", json!({}))).await["result"]["sessions"].is_array());
}

/// Seed 003's protocol as the seed writes it: no handshake, straight to the methods.
#[tokio::test(flavor = "multi_thread")]
async fn a_seed_003_client_that_never_handshakes_registers_sends_lists_and_deregisters() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let mut raw = Raw::connect(&t.kiln).await;
    let registered = raw
        .call(rpc(
            1,
            "session.register",
            json!({"worktree": null, "agent_type": "acp", "agent_name": "claude-code"}),
        ))
        .await;
    let id = registered["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{registered}"))
        .to_string();
    let listed = raw.call(rpc(2, "session.list", json!({}))).await;
    assert!(
        listed["result"]["sessions"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["id"] == id.as_str()))
    );
    let beat = raw
        .call(rpc(3, "session.heartbeat", json!({"session_id": id})))
        .await;
    assert!(beat.get("result").is_some(), "{beat}");
    let sent = raw
        .call(rpc(
            4,
            "inbox.send",
            json!({"session_id": id, "msg_type": "decision_needed",
                   "title": "Which auth strategy?",
                   "body": "Options:\n1. JWT\n2. Session\n3. OAuth",
                   "options": ["JWT", "Session", "OAuth"]}),
        ))
        .await;
    let message = sent["result"]["id"]
        .as_str()
        .expect("a message id")
        .to_string();
    let inbox = raw
        .call(rpc(
            5,
            "inbox.list",
            json!({"unread_only": true, "limit": 20}),
        ))
        .await;
    assert!(
        inbox["result"]["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["id"] == message.as_str()))
    );
    let read = raw
        .call(rpc(6, "inbox.mark_read", json!({"ids": [message]})))
        .await;
    assert_eq!(read["result"]["updated"], 1);
    let gone = raw
        .call(rpc(7, "session.deregister", json!({"session_id": id})))
        .await;
    assert!(gone.get("result").is_some(), "{gone}");
    let listed = raw.call(rpc(8, "session.list", json!({}))).await;
    assert!(
        listed["result"]["sessions"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["id"] != id.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_registry_methods() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();

    let worktree = t
        .root()
        .join(".crucible/worktrees/feat/auth")
        .display()
        .to_string();
    let reg = c
        .call_value(
            "session.register",
            json!({"worktree": worktree, "agent_type": "acp", "agent_name": "claude"}),
        )
        .await
        .unwrap();
    let id = reg["session_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 26, "a ULID");
    assert_eq!(reg["session"]["display_name"], json!("feat/auth @ claude"));
    let other = register(&c, "codex").await;

    let list = c.call_value("session.list", json!({})).await.unwrap();
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["display_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["feat/auth @ claude", "main @ codex"]);
    assert_eq!(list["sessions"][0]["status"], json!("active"));

    let got = c
        .call_value("session.get", json!({"session_id": id}))
        .await
        .unwrap();
    assert_eq!(got["session"]["agent_name"], json!("claude"));
    let before = got["session"]["last_heartbeat"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        c.call_value("session.heartbeat", json!({"session_id": id}))
            .await
            .unwrap()["ok"],
        json!(true)
    );
    let after = c
        .call_value("session.get", json!({"session_id": id}))
        .await
        .unwrap();
    assert!(
        after["session"]["last_heartbeat"].as_str().unwrap() > before.as_str(),
        "heartbeat moves the clock"
    );

    c.call_value("session.deregister", json!({"session_id": other}))
        .await
        .unwrap();
    let list = c.call_value("session.list", json!({})).await.unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);

    // Bad params and unknown sessions.
    for (method, params, expected) in [
        (
            "session.register",
            json!({"agent_type": "acp"}),
            code::INVALID_PARAMS,
        ),
        (
            "session.register",
            json!({"agent_type": "acp", "agent_name": " "}),
            code::INVALID_PARAMS,
        ),
        (
            "session.register",
            json!({"agent_type": 5, "agent_name": "x"}),
            code::INVALID_PARAMS,
        ),
        ("session.heartbeat", json!({}), code::INVALID_PARAMS),
        (
            "session.heartbeat",
            json!({"session_id": "nope"}),
            code::NOT_FOUND,
        ),
        (
            "session.deregister",
            json!({"session_id": other}),
            code::NOT_FOUND,
        ),
        (
            "session.get",
            json!({"session_id": "nope"}),
            code::NOT_FOUND,
        ),
    ] {
        let err = c.call_value(method, params.clone()).await.unwrap_err();
        assert_eq!(err.rpc_code(), Some(expected), "{method} {params}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn inbox_methods() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let s = register(&c, "claude").await;

    let send = |msg_type: &str, title: &str, options: Value| json!({"session_id": s, "msg_type": msg_type, "title": title, "body": "details", "options": options});
    let info = c
        .call_value("inbox.send", send("info", "FYI", Value::Null))
        .await
        .unwrap();
    let info_id = info["id"].as_str().unwrap().to_string();
    assert_eq!(info["message"]["session_name"], json!("main @ claude"));
    let decision = c
        .call_value(
            "inbox.send",
            send(
                "decision_needed",
                "Which auth strategy?",
                json!(["JWT", "Session", "OAuth"]),
            ),
        )
        .await
        .unwrap();
    let decision_id = decision["id"].as_str().unwrap().to_string();
    let approval = c
        .call_value(
            "inbox.send",
            send("approval_required", "rm -rf build/", Value::Null),
        )
        .await
        .unwrap();
    let approval_id = approval["id"].as_str().unwrap().to_string();

    // Newest first, limit respected, unread filter.
    let list = c
        .call_value("inbox.list", json!({"unread_only": true, "limit": 2}))
        .await
        .unwrap();
    let ids: Vec<&str> = list["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [approval_id.as_str(), decision_id.as_str()]);

    let got = c
        .call_value("inbox.get", json!({"id": decision_id}))
        .await
        .unwrap();
    assert_eq!(
        got["message"]["options"],
        json!(["JWT", "Session", "OAuth"])
    );
    assert_eq!(got["message"]["read"], json!(false));

    assert_eq!(
        c.call_value("inbox.mark_read", json!({"ids": [info_id]}))
            .await
            .unwrap()["updated"],
        json!(1)
    );
    assert_eq!(
        c.call_value("inbox.mark_read", json!({"ids": [info_id]}))
            .await
            .unwrap()["updated"],
        json!(0)
    );
    let unread = c
        .call_value("inbox.list", json!({"unread_only": true}))
        .await
        .unwrap();
    assert_eq!(unread["messages"].as_array().unwrap().len(), 2);

    // A waiter is woken by the answer, given on another connection.
    let waiter = {
        let t_kiln = t.kiln.clone();
        let id = decision_id.clone();
        tokio::spawn(async move {
            let c = Client::connect(&t_kiln).await.unwrap();
            c.call_value("inbox.wait", json!({"id": id})).await
        })
    };
    let early = c
        .call_value("inbox.wait", json!({"id": decision_id, "timeout_secs": 1}))
        .await
        .unwrap_err();
    assert_eq!(early.rpc_code(), Some(code::TIMED_OUT));
    let wrong = c
        .call_value(
            "inbox.respond",
            json!({"id": decision_id, "response": "Cookies"}),
        )
        .await
        .unwrap_err();
    assert_eq!(wrong.rpc_code(), Some(code::INVALID_PARAMS));
    assert!(wrong.to_string().contains("JWT, Session, OAuth"), "{wrong}");
    let answered = c
        .call_value(
            "inbox.respond",
            json!({"id": decision_id, "response": "jwt"}),
        )
        .await
        .unwrap();
    assert_eq!(
        answered["message"]["response"],
        json!("JWT"),
        "normalised to the option's spelling"
    );
    let woken = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(woken["message"]["response"], json!("JWT"));
    let twice = c
        .call_value(
            "inbox.respond",
            json!({"id": decision_id, "response": "OAuth"}),
        )
        .await
        .unwrap_err();
    assert_eq!(twice.rpc_code(), Some(code::CONFLICT));
    // Already answered: wait returns at once.
    let done = c
        .call_value("inbox.wait", json!({"id": decision_id}))
        .await
        .unwrap();
    assert_eq!(done["message"]["responded"], json!(true));

    // Approvals take approve/deny; info takes nothing.
    let bad = c
        .call_value(
            "inbox.respond",
            json!({"id": approval_id, "response": "maybe"}),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.rpc_code(), Some(code::INVALID_PARAMS));
    c.call_value(
        "inbox.respond",
        json!({"id": approval_id, "response": "deny"}),
    )
    .await
    .unwrap();
    let no = c
        .call_value("inbox.respond", json!({"id": info_id, "response": "ok"}))
        .await
        .unwrap_err();
    assert_eq!(no.rpc_code(), Some(code::INVALID_PARAMS));

    // Clear removes read messages that need nothing more.
    let open = c
        .call_value(
            "inbox.send",
            send("decision_needed", "Still open", Value::Null),
        )
        .await
        .unwrap();
    let open_id = open["id"].as_str().unwrap().to_string();
    c.call_value("inbox.mark_read", json!({"ids": [open_id]}))
        .await
        .unwrap();
    let cleared = c.call_value("inbox.clear", json!({})).await.unwrap();
    assert_eq!(
        cleared["deleted"],
        json!(3),
        "info + answered decision + answered approval"
    );
    let all = c.call_value("inbox.list", json!({})).await.unwrap();
    let left: Vec<&str> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        left,
        [open_id.as_str()],
        "an unanswered decision survives clear"
    );

    for (method, params, expected) in [
        (
            "inbox.send",
            json!({"session_id": s, "title": "x"}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.send",
            json!({"session_id": s, "msg_type": "shout", "title": "x"}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.send",
            json!({"session_id": s, "msg_type": "info", "title": ""}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.send",
            json!({"session_id": s, "msg_type": "info", "title": "x", "options": ["a"]}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.send",
            json!({"session_id": s, "msg_type": "decision_needed", "title": "x", "options": ["a", "A"]}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.send",
            json!({"session_id": "ghost", "msg_type": "info", "title": "x"}),
            code::NOT_FOUND,
        ),
        ("inbox.list", json!({"limit": 0}), code::INVALID_PARAMS),
        ("inbox.list", json!({"limit": "ten"}), code::INVALID_PARAMS),
        ("inbox.get", json!({"id": "nope"}), code::NOT_FOUND),
        (
            "inbox.mark_read",
            json!({"ids": "one"}),
            code::INVALID_PARAMS,
        ),
        (
            "inbox.respond",
            json!({"id": "nope", "response": "x"}),
            code::NOT_FOUND,
        ),
        ("inbox.wait", json!({"id": "nope"}), code::NOT_FOUND),
        // No Matrix bot runs here, so no verification waits for a word.
        ("matrix.verify", json!({"confirm": true}), code::NOT_FOUND),
        (
            "matrix.verify",
            json!({"confirm": "yes"}),
            code::INVALID_PARAMS,
        ),
        ("matrix.verify", json!({}), code::INVALID_PARAMS),
    ] {
        let err = c.call_value(method, params.clone()).await.unwrap_err();
        assert_eq!(err.rpc_code(), Some(expected), "{method} {params}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn db_query_with_bindings_and_errors() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let r = c
        .call_value("db.query", json!({"sql": "CREATE notes:1 SET tag = $tag; SELECT VALUE tag FROM notes WHERE tag = $tag;", "bindings": {"tag": "rust"}}))
        .await
        .unwrap();
    assert_eq!(r["result"][1], json!(["rust"]));
    let bad = c
        .call_value("db.query", json!({"sql": "SELEC nonsense"}))
        .await
        .unwrap_err();
    assert_eq!(bad.rpc_code(), Some(code::STORE_ERROR));
    let missing = c.call_value("db.query", json!({})).await.unwrap_err();
    assert_eq!(missing.rpc_code(), Some(code::INVALID_PARAMS));
    // The schema is SCHEMAFULL: a wrong type is refused, and the daemon carries on.
    let typed = c
        .call_value(
            "db.query",
            json!({"sql": "CREATE inbox_messages:x SET title = 5"}),
        )
        .await
        .unwrap_err();
    assert_eq!(typed.rpc_code(), Some(code::STORE_ERROR));
    assert!(c.call_value("ping", json!({})).await.is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_input_gets_the_right_error_and_others_are_served() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let mut bad = Raw::handshaken(&t.kiln).await;
    let mut good = Raw::handshaken(&t.kiln).await;
    let ping = |id| rpc(id, "ping", json!({}));

    bad.send_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\n")
        .await;
    let r = bad.recv().await;
    assert_eq!(error_code(&r), code::PARSE_ERROR);
    assert_eq!(r["id"], Value::Null);
    assert_eq!(good.call(ping(1)).await["result"]["pong"], json!(true));

    assert_eq!(
        error_code(&bad.call(json!([1, 2]).clone()).await[0]),
        code::INVALID_REQUEST
    );
    assert_eq!(
        error_code(&bad.call(json!("just a string")).await),
        code::INVALID_REQUEST
    );
    assert_eq!(
        error_code(&bad.call(json!([])).await),
        code::INVALID_REQUEST
    );
    let no_version = bad.call(json!({"id": 9, "method": "ping"})).await;
    assert_eq!(error_code(&no_version), code::INVALID_REQUEST);
    assert_eq!(no_version["id"], json!(9));

    let unknown = bad.call(rpc(10, "session.teleport", json!({}))).await;
    assert_eq!(error_code(&unknown), code::METHOD_NOT_FOUND);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session.teleport")
    );
    assert_eq!(good.call(ping(2)).await["result"]["pong"], json!(true));

    // A line over the limit is refused without being held in memory, and the connection
    // goes on working.
    let huge = vec![b'x'; crucible::protocol::MAX_LINE_BYTES + 10];
    bad.send_bytes(&huge).await;
    bad.send_bytes(b"\n").await;
    let r = bad.recv().await;
    assert_eq!(error_code(&r), code::INVALID_REQUEST);
    assert!(r["error"]["message"].as_str().unwrap().contains("limit"));
    assert_eq!(bad.call(ping(11)).await["result"]["pong"], json!(true));

    // Batches: answers in one array, none for notifications; a batch of notifications
    // gets no reply at all.
    let batch = bad
        .call(
            json!([ping(20), {"jsonrpc": "2.0", "method": "ping"}, rpc(21, "nope", json!({})), 7]),
        )
        .await;
    let batch = batch.as_array().expect("a batch reply is an array");
    assert_eq!(batch.len(), 3);
    assert_eq!(batch[0]["id"], json!(20));
    assert_eq!(error_code(&batch[1]), code::METHOD_NOT_FOUND);
    assert_eq!(error_code(&batch[2]), code::INVALID_REQUEST);
    bad.send(json!([{"jsonrpc": "2.0", "method": "ping"}]))
        .await;
    bad.send(json!({"jsonrpc": "2.0", "method": "ping"})).await;
    assert_eq!(
        bad.call(ping(30)).await["id"],
        json!(30),
        "notifications got no reply"
    );

    // Positional params are accepted in field order.
    assert_eq!(
        error_code(
            &bad.call(rpc(31, "session.heartbeat", json!(["ghost"])))
                .await
        ),
        code::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribers_see_changes_as_notifications() {
    let t = TestKiln::new();
    let _d = t.spawn_daemon().await;
    let watcher = Client::connect(&t.kiln).await.unwrap();
    let mut events = watcher.subscribe(None).await.unwrap();
    let inbox_only = Client::connect(&t.kiln).await.unwrap();
    let mut inbox_events = inbox_only
        .subscribe(Some(vec![crucible::protocol::Topic::Inbox]))
        .await
        .unwrap();

    let c = Client::connect(&t.kiln).await.unwrap();
    let s = register(&c, "claude").await;
    let sent = c
        .call_value(
            "inbox.send",
            json!({"session_id": s, "msg_type": "approval_required", "title": "deploy?"}),
        )
        .await
        .unwrap();
    let id = sent["id"].as_str().unwrap().to_string();
    c.call_value("inbox.respond", json!({"id": id, "response": "approve"}))
        .await
        .unwrap();
    c.call_value("session.deregister", json!({"session_id": s}))
        .await
        .unwrap();

    let mut seen = Vec::new();
    while seen.len() < 4 {
        let note = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap();
        seen.push(note.method.clone());
        if note.method == "inbox.updated" {
            assert_eq!(note.params["response"], json!("approve"));
        }
    }
    assert_eq!(
        seen,
        [
            "session.registered",
            "inbox.created",
            "inbox.updated",
            "session.deregistered"
        ]
    );
    let first = tokio::time::timeout(Duration::from_secs(10), inbox_events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.method, "inbox.created",
        "the session topic was filtered out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn orphaned_sessions_are_cleaned_up_after_the_timeout() {
    let t = TestKiln::with_settings(
        "[daemon]\ngrace_period_secs = 60\nheartbeat_interval_secs = 1\nsession_timeout_secs = 4\n",
    );
    let _d = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let mut events = c
        .subscribe(Some(vec![crucible::protocol::Topic::Session]))
        .await
        .unwrap();
    let orphan = register(&c, "silent").await;
    let alive = register(&c, "chatty").await;
    let beating = {
        let kiln = t.kiln.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let c = Client::connect(&kiln).await.unwrap();
            loop {
                c.call_value("session.heartbeat", json!({"session_id": alive}))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    let gone = loop {
        let note = tokio::time::timeout(Duration::from_secs(15), events.recv())
            .await
            .unwrap()
            .unwrap();
        if note.method == "session.deregistered" {
            break note;
        }
    };
    assert_eq!(gone.params["session_id"], json!(orphan));
    assert_eq!(gone.params["reason"], json!("timed out"));
    let list = c.call_value("session.list", json!({})).await.unwrap();
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [alive.as_str()], "the heartbeating session stays");
    beating.abort();
}

/// A daemon frozen (SIGSTOP) for twice the session timeout while a session keeps sending
/// heartbeats, which wait in its queue: once it runs again, every one is answered and
/// the session is not timed out.
#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_daemon_counts_the_heartbeats_that_waited_for_it() {
    let t = TestKiln::with_settings(
        "[daemon]\ngrace_period_secs = 60\nheartbeat_interval_secs = 1\nsession_timeout_secs = 3\n",
    );
    let daemon = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let alive = register(&c, "chatty").await;
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &daemon.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    signal("-STOP");
    // Each heartbeat on a connection of its own, as `cru` sends one: it waits in the
    // daemon's queue of connections to accept.
    let mut waiting = Vec::new();
    for i in 0..12 {
        let mut beat = Raw::connect(&t.kiln).await;
        beat.send(json!({"jsonrpc": "2.0", "id": 0, "method": "handshake",
                         "params": {"protocol_version": crucible::protocol::PROTOCOL_VERSION}}))
            .await;
        beat.send(rpc(
            100 + i,
            "session.heartbeat",
            json!({"session_id": alive}),
        ))
        .await;
        waiting.push(beat);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    signal("-CONT");
    for mut beat in waiting {
        let handshake = beat.recv().await;
        assert!(handshake.get("result").is_some(), "{handshake}");
        let reply = beat.recv().await;
        assert_eq!(reply["result"]["ok"], json!(true), "{reply}");
    }
    let got = c
        .call_value("session.get", json!({"session_id": alive}))
        .await
        .unwrap();
    assert_ne!(got["session"]["status"], json!("ended"), "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_send_survives_kill_9() {
    let t = TestKiln::new();
    let mut daemon = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let s = register(&c, "writer").await;
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut senders = Vec::new();
    for n in 0..8 {
        let kiln = t.kiln.clone();
        let s = s.clone();
        let acked = Arc::clone(&acked);
        senders.push(tokio::spawn(async move {
            let c = Client::connect(&kiln).await.unwrap();
            for i in 0.. {
                let params =
                    json!({"session_id": s, "msg_type": "info", "title": format!("{n}-{i}")});
                match c.call_value("inbox.send", params).await {
                    Ok(r) => acked
                        .lock()
                        .unwrap()
                        .push(r["id"].as_str().unwrap().to_string()),
                    Err(_) => return,
                }
            }
        }));
    }
    wait_until("200 acknowledged sends", Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 200
    })
    .await;
    daemon.kill9();
    for sender in senders {
        sender.await.unwrap();
    }
    let acked: HashSet<String> = acked.lock().unwrap().iter().cloned().collect();

    let _again = t.spawn_daemon().await;
    let c = Client::connect(&t.kiln).await.unwrap();
    let all = c
        .call_value("inbox.list", json!({"limit": 10000}))
        .await
        .unwrap();
    let stored: HashSet<String> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    let lost: Vec<&String> = acked.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged messages lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    // The session registered before the crash is still there.
    assert!(
        c.call_value("session.get", json!({"session_id": s}))
            .await
            .is_ok()
    );
}
