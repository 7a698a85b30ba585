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
