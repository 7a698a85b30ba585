//! Durability and robustness of the real daemon, tested from the outside with the
//! self-contained equipment in tests/equipment/reliability.rs (also run at length by
//! `cargo bench --bench reliability`): kill -9 under concurrent durable writers,
//! malformed or hostile protocol input, and a journal damaged on disk.

#[path = "../equipment/reliability.rs"]
mod reliability;

use std::path::Path;
use std::time::Duration;

use reliability::{KillOptions, fuzz, kill_loop};

const CRU: &str = env!("CARGO_BIN_EXE_cru");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_nine_under_eight_writers_twenty_times_loses_nothing_acknowledged() {
    let report = kill_loop(Path::new(CRU), &KillOptions::cycles(20, 8))
        .await
        .expect("the kill loop ran (this is an equipment or daemon-restart failure, not a loss)");
    println!("{report}");
    assert!(
        report.acknowledged > 0,
        "no send was acknowledged in 20 cycles:\n{report}"
    );
    assert!(
        report.ok(),
        "acknowledged sends were lost or altered:\n{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_for_ten_seconds_gets_well_formed_replies() {
    let report = fuzz(Path::new(CRU), Duration::from_secs(10))
        .await
        .expect("the fuzzer ran (an equipment failure)");
    println!("{report}");
    assert!(report.replies > 0, "no replies at all:\n{report}");
    assert_eq!(report.violations, 0, "protocol violations:\n{report}");
}

/// Sends messages titled `titles` for a session registered now.
async fn send_titled(tk: &crate::common::TestKiln, titles: &[&str]) {
    let client = tk.client().await;
    let session = crate::common::register(&client, "claude").await;
    for title in titles {
        let out = tk.cru(&["inbox", "send", "--session", &session, title]);
        assert!(out.status.success(), "{}", crate::common::stderr(&out));
    }
}

/// The titles of the test's messages, sorted.
fn titles(tk: &crate::common::TestKiln) -> Vec<String> {
    let out = tk.cru(&["inbox", "--all", "--json"]);
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    let mut titles: Vec<String> = listed
        .iter()
        .filter_map(|m| m["title"].as_str().map(String::from))
        .filter(|t| t.starts_with("build ") || t.starts_with("deploy "))
        .collect();
    titles.sort();
    titles
}

/// Changes `from` to `to` in the journal line that holds it; returns the file.
fn damage_journal(tk: &crate::common::TestKiln, from: &str, to: &str) -> std::path::PathBuf {
    let mut dir = tk.kiln.db_path().into_os_string();
    dir.push(".journal");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().path();
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains(from) {
            std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
            return file;
        }
    }
    panic!("no journal line holds {from:?}");
}

/// One digit changed in a journal record after a crash: the daemon does not replay it
/// over the engine's record, names it in its log, and replays the records after it
/// (shown with the engine's folder gone, so only the journal can bring them back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_record_damaged_on_disk_is_reported_and_never_replayed() {
    let tk = crate::common::TestKiln::new();
    let _guard = crate::common::KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.spawn_daemon().await;
    send_titled(
        &tk,
        &["build 41 passed", "build 42 passed", "build 43 passed"],
    )
    .await;
    daemon.kill9();
    let file = damage_journal(&tk, "build 42 passed", "build 47 passed");
    let mut daemon = tk.spawn_daemon().await;
    assert_eq!(
        titles(&tk),
        ["build 41 passed", "build 42 passed", "build 43 passed"],
        "the engine's records stand"
    );
    let log_path = tk.kiln.log_dir().join("daemon.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    // Recovery closes the engine once, cleanly: no error from a second shutdown.
    assert!(!log.contains("Pipeline stall"), "{log}");
    let report = log
        .lines()
        .find(|l| l.contains("a journal record is damaged"))
        .unwrap_or_else(|| panic!("not reported:\n{log}"));
    assert!(
        report.contains(&file.display().to_string())
            && report.contains("line=")
            && report.contains("inbox_messages:"),
        "{report}"
    );

    send_titled(&tk, &["deploy 51 done", "deploy 52 done", "deploy 53 done"]).await;
    daemon.kill9();
    damage_journal(&tk, "deploy 52 done", "deploy 57 done");
    std::fs::remove_dir_all(tk.kiln.db_path()).unwrap();
    let _daemon = tk.spawn_daemon().await;
    assert_eq!(titles(&tk), ["deploy 51 done", "deploy 53 done"]);
}

/// The damaged stretches a check reports: (table, after, before).
fn stretches(check: &serde_json::Value, table: &str) -> Vec<(Option<String>, Option<String>)> {
    check["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["table"] == table)
        .flat_map(|t| t["damaged"].as_array().unwrap().clone())
        .map(|d| {
            (
                d["after"].as_str().map(String::from),
                d["before"].as_str().map(String::from),
            )
        })
        .collect()
}

/// One byte changed in the engine's table file: the check at start finds it and
/// `daemon.status` says so, a read that touches it says what to do, `cru daemon check`
/// names the unreadable stretch, and `cru daemon repair` rebuilds the database from every
/// record still readable plus the journal (messages sent after the damage, then a kill
/// -9): no readable message is lost or changed, and every one missing lay in the
/// stretch the check named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_changed_in_a_table_file_is_found_named_and_repaired() {
    use crate::common::{KillOnDrop, TestKiln, register};
    use serde_json::json;
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let session = register(&client, "claude").await;
    let mut sent = std::collections::BTreeMap::new();
    for i in 0..3000 {
        let title = format!("report {i}");
        let reply = client
            .call_value(
                "inbox.send",
                json!({"session_id": session, "msg_type": "info", "title": title,
                       "body": format!("{} {i}", "detail ".repeat(20))}),
            )
            .await
            .unwrap();
        sent.insert(reply["id"].as_str().unwrap().to_string(), title);
    }
    drop(client);
    // A clean stop: everything is in a table file and the journal is empty.
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    daemon.wait_exit(Duration::from_secs(30)).await;
    // The byte changed lies inside a message's record (table files are not compressed),
    // not in the search index's entries that share the file.
    let tables = tk.kiln.db_path().join("sstables");
    let needle = b"report 1500";
    let (file, mut bytes, at) = std::fs::read_dir(&tables)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find_map(|file| {
            let bytes = std::fs::read(&file).unwrap();
            let at = bytes
                .windows(needle.len() + 1)
                .position(|w| w.starts_with(needle) && !w[needle.len()].is_ascii_digit())?;
            Some((file, bytes, at))
        })
        .expect("a table file holding the message");
    bytes[at + 2] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();

    // The daemon starts and serves; its check at start finds the damage.
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let mut status = serde_json::Value::Null;
    crate::common::wait_until("the check at start", Duration::from_secs(60), || {
        let out = tk.cru(&["daemon", "status", "--json"]);
        status = serde_json::from_str(&crate::common::stdout(&out)).unwrap_or_default();
        status["store"]["damaged"]
            .to_string()
            .contains("inbox_messages: unreadable records")
    })
    .await;
    let damaged = status["store"]["damaged"].to_string();
    assert!(
        damaged.contains("inbox_messages: unreadable records"),
        "{damaged}"
    );
    let human = crate::common::stdout(&tk.cru(&["daemon", "status"]));
    assert!(
        human.contains("DAMAGED") && human.contains("cru daemon repair"),
        "{human}"
    );
    let listed = client
        .call_value("inbox.list", json!({"limit": 10000}))
        .await
        .unwrap_err()
        .to_string();
    assert!(listed.contains("cru daemon check"), "{listed}");

    let out = tk.cru(&["daemon", "check", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::common::stderr(&out)
    );
    let check: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    let inbox = stretches(&check, "inbox_messages");
    assert!(!inbox.is_empty(), "{check}");
    let readable = check["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "inbox_messages")
        .unwrap()["readable"]
        .as_u64()
        .unwrap() as usize;
    assert!(readable > 0 && readable < 3000, "{check}");

    // Written after the damage, then a crash: only the journal holds these for sure.
    let mut later = Vec::new();
    for i in 0..5 {
        let reply = client
            .call_value(
                "inbox.send",
                json!({"session_id": session, "msg_type": "info", "title": format!("later {i}")}),
            )
            .await
            .unwrap();
        later.push(reply["id"].as_str().unwrap().to_string());
    }
    drop(client);
    daemon.kill9();

    let out = tk.cru(&["daemon", "repair"]);
    let said = crate::common::stdout(&out);
    assert!(
        out.status.success(),
        "{said}{}",
        crate::common::stderr(&out)
    );
    assert!(said.contains("the damaged database is kept at"), "{said}");

    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let listed = client
        .call_value("inbox.list", json!({"limit": 10000}))
        .await
        .unwrap();
    let messages = listed["messages"].as_array().unwrap();
    let kept: std::collections::BTreeMap<String, String> = messages
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["title"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for id in &later {
        assert!(
            kept.contains_key(id),
            "a message sent after the damage is gone"
        );
    }
    let mut missing = 0;
    for (id, title) in &sent {
        match kept.get(id) {
            Some(kept_title) => assert_eq!(kept_title, title, "a kept message changed"),
            None => {
                missing += 1;
                assert!(
                    inbox.iter().any(|(after, before)| {
                        after.as_deref().is_none_or(|a| id.as_str() > a)
                            && before.as_deref().is_none_or(|b| id.as_str() < b)
                    }),
                    "{id} is gone but lay outside every stretch the check named: {inbox:?}"
                );
            }
        }
    }
    assert_eq!(
        missing,
        3000 - readable,
        "what the check could read is what was kept"
    );
    let out = tk.cru(&["daemon", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    assert!(status["store"]["damaged"].is_null(), "{status}");
}
