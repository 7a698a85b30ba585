//! Durability and robustness of the real daemon, tested from the outside with the
//! self-contained equipment in testkit/src/reliability.rs (also run at length by
//! `cargo bench --bench reliability`): kill -9 under concurrent durable writers,
//! malformed or hostile protocol input, and a journal damaged on disk.

use testkit::reliability;

use std::path::Path;
use std::time::Duration;

use crucible::protocol::MsgType;
use crucible::protocol::methods as m;
use crucible::protocol::params::{ListParams, SearchParams};
use reliability::{KillOptions, fuzz, kill_loop};
use testkit::daemon::{call, try_call};
use testkit::params::send;

/// Every message of the inbox, at once.
fn everything() -> ListParams {
    ListParams {
        limit: Some(10_000),
        ..Default::default()
    }
}

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
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let session = register(&client, "claude").await;
    let sent = send_reports(&client, &session, 3000, |i| {
        format!("{} {i}", "detail ".repeat(20))
    })
    .await;
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
    let status = damage_named(&tk, "inbox_messages: unreadable records").await;
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
    let listed = try_call::<m::InboxList>(&client, everything())
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
        let note = send(&session, MsgType::Info, &format!("later {i}"), &[]);
        later.push(call::<m::InboxSend>(&client, note).await.id);
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
    let messages = call::<m::InboxList>(&client, everything()).await.messages;
    let kept: std::collections::BTreeMap<String, String> =
        messages.into_iter().map(|m| (m.id, m.title)).collect();
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

/// Sends `count` messages `report <i>` with `body(i)` as `session`'s; their titles by id.
pub(crate) async fn send_reports(
    client: &crucible::client::Client,
    session: &str,
    count: usize,
    body: impl Fn(usize) -> String,
) -> std::collections::BTreeMap<String, String> {
    let mut sent = std::collections::BTreeMap::new();
    for i in 0..count {
        let title = format!("report {i}");
        let mut report = send(session, MsgType::Info, &title, &[]);
        report.body = Some(body(i));
        sent.insert(call::<m::InboxSend>(client, report).await.id, title);
    }
    sent
}

/// The ids of the sessions the daemon lists.
pub(crate) async fn listed_sessions(
    client: &crucible::client::Client,
) -> std::collections::BTreeSet<String> {
    let listed = call::<m::SessionList>(client, Default::default()).await;
    listed.sessions.into_iter().map(|s| s.id).collect()
}

/// Stops the daemon cleanly: everything it wrote is in a table file of its own.
pub(crate) async fn stop_cleanly(
    tk: &crate::common::TestKiln,
    daemon: &mut crate::common::DaemonProcess,
) {
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    daemon.wait_exit(Duration::from_secs(30)).await;
}

/// Every table file of the engine, with its bytes.
pub(crate) fn table_files(tk: &crate::common::TestKiln) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(tk.kiln.db_path().join("sstables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// One bit flipped inside a session's record, in one of four table files the next start
/// merges (a compaction at open reads every block): the daemon starts, lists every session
/// outside the damaged stretch, takes new sessions, and says what is damaged and where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_in_a_table_file_leaves_the_daemon_starting_and_serving_the_rest() {
    use crate::common::{KillOnDrop, TestKiln, register};
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let padding = "PADDING ".repeat(60);
    let mut registered = Vec::new();
    // Four clean stops: four table files in the engine's first level, which the next
    // start merges.
    for round in 0..4 {
        let mut daemon = tk.spawn_daemon().await;
        let client = tk.client().await;
        for i in 0..120 {
            let id = register(&client, &format!("AGENT{round}X{i:03} {padding}")).await;
            registered.push(id);
        }
        let listed = listed_sessions(&client).await;
        assert!(registered.iter().all(|id| listed.contains(id)));
        drop(client);
        stop_cleanly(&tk, &mut daemon).await;
    }
    // A bit in the middle of one record of the third round (a record holds its name
    // twice, the search index's words are lower-case).
    let needle = format!("AGENT2X060 {}", &padding[..16]);
    let (file, mut bytes) = table_files(&tk)
        .into_iter()
        .find(|(_, b)| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .expect("a table file holding the record");
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap();
    bytes[at + needle.len() - 3] ^= 0x04;
    std::fs::write(&file, bytes).unwrap();

    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let listed = listed_sessions(&client).await;
    let missing: Vec<&String> = registered
        .iter()
        .filter(|id| !listed.contains(*id))
        .collect();
    assert!(
        !missing.is_empty() && missing.len() < 120,
        "{} of {} sessions listed",
        listed.len(),
        registered.len()
    );
    // A new session can be made, and is kept.
    let fresh = register(&client, "after the damage").await;
    assert!(listed_sessions(&client).await.contains(&fresh));

    let status = damage_named(&tk, "sessions: unreadable records").await;
    let damaged = status["store"]["damaged"].to_string();
    let file_name = file.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        damaged.contains("records of sessions cannot be read in")
            && damaged.contains(&file_name)
            && damaged.contains("the engine stopped merging its table files"),
        "{damaged}"
    );
    // Every session missing lies in the stretch the check names.
    let out = tk.cru(&["daemon", "check", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        crate::common::stderr(&out)
    );
    let check: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    let sessions = stretches(&check, "sessions");
    for id in &missing {
        assert!(
            sessions.iter().any(|(after, before)| {
                after.as_deref().is_none_or(|a| id.as_str() > a)
                    && before.as_deref().is_none_or(|b| id.as_str() < b)
            }),
            "{id} is not listed but lies outside every stretch the check named: {sessions:?}"
        );
    }
    drop(client);
    stop_cleanly(&tk, &mut daemon).await;
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    assert!(!log.contains("Pipeline stall"), "{log}");
}

/// One bit flipped in the search index's entries (the records all read back): `cru
/// daemon check` finds it and names the index, and `cru daemon repair` rebuilds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_in_a_search_index_is_found_and_named_by_the_check() {
    use crate::common::{KillOnDrop, TestKiln, register};
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let session = register(&client, "claude").await;
    // Three thousand distinct words: the index's entries fill many blocks of their own.
    let word = |i: u64| {
        let mut n = i.wrapping_mul(2_654_435_761) % 26u64.pow(7);
        let mut w = String::from("QZ");
        for _ in 0..7 {
            w.push((b'A' + (n % 26) as u8) as char);
            n /= 26;
        }
        w
    };
    let words: Vec<String> = (0..3000).map(word).collect();
    let mut many = send(&session, MsgType::Info, "many words", &[]);
    many.body = Some(words.join(" "));
    call::<m::InboxSend>(&client, many).await;
    drop(client);
    stop_cleanly(&tk, &mut daemon).await;

    // The index keeps its words folded to lower case (the record keeps them as sent),
    // each key stored after what it shares with the one before, so a word's last five
    // letters show where its entries are. The first block holds the engine's catalog
    // and the record; a bit three quarters into the index's entries is in blocks of
    // their own.
    let tails: Vec<String> = words
        .iter()
        .map(|w| w[w.len() - 5..].to_lowercase())
        .collect();
    let (file, mut bytes) = table_files(&tk)
        .into_iter()
        .max_by_key(|(_, b)| b.len())
        .expect("a table file");
    let mut found: Vec<usize> = tails
        .iter()
        .flat_map(|tail| {
            bytes
                .windows(tail.len())
                .enumerate()
                .filter(|(_, w)| *w == tail.as_bytes())
                .map(|(at, _)| at)
                .collect::<Vec<_>>()
        })
        .collect();
    found.sort_unstable();
    assert!(found.len() > 1000, "{} words found", found.len());
    bytes[found[found.len() * 3 / 4] + 1] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();

    let out = tk.cru(&["daemon", "check", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        crate::common::stdout(&out),
        crate::common::stderr(&out)
    );
    let check: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    for table in check["tables"].as_array().unwrap() {
        assert!(table["damaged"].as_array().unwrap().is_empty(), "{check}");
    }
    let files = check["files"].as_array().unwrap();
    assert!(
        files.iter().any(|f| f["index"] == "search_inbox_body"
            && f["table"] == "inbox_messages"
            && f["file"]
                .as_str()
                .unwrap()
                .ends_with(&*file.file_name().unwrap().to_string_lossy())),
        "{check}"
    );
    let human = crate::common::stdout(&tk.cru(&["daemon", "check"]));
    assert!(
        human.contains("entries of the index search_inbox_body on inbox_messages")
            && !human.contains("every record"),
        "{human}"
    );

    let out = tk.cru(&["daemon", "repair"]);
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    let out = tk.cru(&["daemon", "check", "--json"]);
    assert!(out.status.success(), "{}", crate::common::stdout(&out));
    // The rebuilt index finds the word again.
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let query = SearchParams {
        query: words[1500].clone(),
        session_id: None,
        types: None,
        limit: Some(5),
    };
    let found = call::<m::Search>(&client, query).await;
    assert!(
        found.hits.iter().any(|h| h.snippet.contains(&words[1500])),
        "{found:?}"
    );
}

/// The byte offset of the first table id the engine's manifest lists.
fn first_table_id_offset(manifest: &[u8]) -> usize {
    // version (2), next table id, log number, last sequence (8 each), level count (1),
    // then per level: a table count (4) and the ids (8 each).
    let levels = manifest[26] as usize;
    let mut at = 27;
    for _ in 0..levels {
        let count = u32::from_be_bytes(manifest[at..at + 4].try_into().unwrap()) as usize;
        if count > 0 {
            return at + 4;
        }
        at += 4;
    }
    panic!("the manifest lists no table");
}

/// One bit flipped in the engine's manifest (the list of its table files), every table
/// file intact: the daemon refuses to start and says to repair, `cru daemon repair`
/// rebuilds the list from the table files, and the daemon starts with every session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_in_the_manifest_is_repaired_from_the_table_files() {
    use crate::common::{KillOnDrop, TestKiln, register};
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut registered = Vec::new();
    for round in 0..2 {
        let mut daemon = tk.spawn_daemon().await;
        let client = tk.client().await;
        for i in 0..20 {
            registered.push(register(&client, &format!("agent {round} {i}")).await);
        }
        drop(client);
        stop_cleanly(&tk, &mut daemon).await;
    }
    let manifest_path = tk
        .kiln
        .db_path()
        .join("manifest")
        .join("00000000000000000000.manifest");
    let mut manifest = std::fs::read(&manifest_path).unwrap();
    let at = first_table_id_offset(&manifest);
    manifest[at] ^= 0x40;
    std::fs::write(&manifest_path, manifest).unwrap();

    let out = tk.cru(&["daemon", "run"]);
    assert!(!out.status.success());
    let said = crate::common::stderr(&out);
    assert!(
        said.contains("manifest") && said.contains("cru daemon repair"),
        "{said}"
    );
    let out = tk.cru(&["daemon", "check"]);
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        crate::common::stdout(&out),
        crate::common::stderr(&out)
    );
    assert!(
        said.contains("manifest") && said.contains("cru daemon repair"),
        "{said}"
    );

    let out = tk.cru(&["daemon", "repair"]);
    let said = crate::common::stdout(&out);
    assert!(
        out.status.success(),
        "{said}{}",
        crate::common::stderr(&out)
    );
    assert!(
        said.contains("rebuilt the engine's manifest from its"),
        "{said}"
    );

    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let listed = listed_sessions(&client).await;
    for id in &registered {
        assert!(listed.contains(id), "{id} did not come back");
    }
    let out = tk.cru(&["daemon", "check"]);
    assert!(out.status.success(), "{}", crate::common::stdout(&out));
}

/// `daemon status --json` once the check at start names `what` among the damage.
async fn damage_named(tk: &crate::common::TestKiln, what: &str) -> serde_json::Value {
    let mut status = serde_json::Value::Null;
    crate::common::wait_until("the check at start", Duration::from_secs(60), || {
        let out = tk.cru(&["daemon", "status", "--json"]);
        status = serde_json::from_str(&crate::common::stdout(&out)).unwrap_or_default();
        status["store"]["damaged"].to_string().contains(what)
    })
    .await;
    status
}
