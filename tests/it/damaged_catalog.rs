//! One flipped bit in the engine's catalog: its version and the definitions of crucible's
//! namespace, database and tables, which are the first keys of a table file and which the
//! engine reads before anything else. Without a rebuild the engine cannot open at all.

use std::collections::BTreeMap;

use crate::durability::{listed_sessions, send_reports, stop_cleanly, table_files};

/// The daemon still starts: it rebuilds the database from crucible's schema and every
/// record that reads, says so in `daemon status` (what was lost, where the damaged copy
/// is), and serves every session and message outside the damaged block; the check names
/// the block first, without waiting on the engine's retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_in_the_catalog_leaves_the_daemon_starting_with_every_record_that_reads() {
    // The catalog names crucible's search analyzer (after the engine's own queue of
    // index changes): a bit there.
    damaged_catalog(|bytes| {
        let needle = b"crucible_words";
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|at| at + 3)
    })
    .await;
}

/// The same with the bit in the first block of the file holding the catalog, where the
/// engine's version is: the first key it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_by_the_engines_version_leaves_the_daemon_starting_too() {
    damaged_catalog(|bytes| {
        let needle = b"crucible_words";
        bytes.windows(needle.len()).position(|w| w == needle)?;
        Some(40)
    })
    .await;
}

/// Fills a kiln, flips one bit at where `at` says in the first table file holding the
/// catalog, and checks what the check, the daemon and its status then do.
async fn damaged_catalog(at: impl Fn(&[u8]) -> Option<usize>) {
    use crate::common::{KillOnDrop, TestKiln, register};
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let mut sessions = Vec::new();
    for i in 0..20 {
        sessions.push(register(&client, &format!("agent {i}")).await);
    }
    // Enough messages that crucible's own keys and the sessions lie in different blocks
    // (a block is 64 KiB; messages sort before sessions).
    let sent = send_reports(&client, &sessions[0], 3000, |i| {
        format!("{} marker{i}x", "detail ".repeat(20))
    })
    .await;
    drop(client);
    stop_cleanly(&tk, &mut daemon).await;

    let (file, mut bytes, at) = table_files(&tk)
        .into_iter()
        .find_map(|(file, bytes)| {
            let at = at(&bytes)?;
            Some((file, bytes, at))
        })
        .expect("a table file holding the catalog");
    bytes[at] ^= 0x02;
    std::fs::write(&file, bytes).unwrap();
    let file_name = file.file_name().unwrap().to_string_lossy().to_string();

    // The check names the block and what it does, at once.
    let out = tk.cru(&["daemon", "check", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        crate::common::stdout(&out),
        crate::common::stderr(&out)
    );
    let check: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    assert!(
        check["files"].as_array().unwrap().iter().any(|f| f["file"]
            .as_str()
            .unwrap()
            .ends_with(&file_name)
            && f["effect"]
                .as_str()
                .unwrap()
                .contains("the database cannot open without it")),
        "{check}"
    );

    // The daemon starts, rebuilt, and serves every session.
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let listed = listed_sessions(&client).await;
    for id in &sessions {
        assert!(listed.contains(id), "{id} did not come back");
    }
    // Every message outside the damaged block, unchanged; the block's are not made up.
    let inbox = testkit::daemon::call::<crucible::protocol::methods::InboxList>(
        &client,
        crucible::protocol::ListParams {
            limit: Some(10000),
            ..Default::default()
        },
    )
    .await;
    let kept: BTreeMap<String, String> = inbox
        .messages
        .into_iter()
        .map(|m| (m.id, m.title))
        .collect();
    for (id, title) in &kept {
        assert_eq!(sent.get(id), Some(title), "a kept message changed");
    }
    // Here the damaged block holds the catalog alone (crucible's definitions end before
    // the first message's record), so every message comes back.
    assert_eq!(kept.len(), 3000, "messages kept");

    // It says what it did and what was lost, and where the damaged engine is.
    let out = tk.cru(&["daemon", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    let rebuilt = status["store"]["rebuilt"].to_string();
    assert!(
        rebuilt.contains("the engine's catalog did not read back")
            && rebuilt.contains(&file_name)
            && rebuilt.contains("kept at"),
        "{status}"
    );
    assert!(status["store"]["damaged"].is_null(), "{status}");
    let human = crate::common::stdout(&tk.cru(&["daemon", "status"]));
    assert!(human.contains("REBUILT"), "{human}");
    let kept_at = tk.kiln.db_path().with_file_name(format!(
        "{}.damaged-",
        tk.kiln.db_path().file_name().unwrap().to_string_lossy()
    ));
    let kept_at = kept_at.to_string_lossy().to_string();
    assert!(
        std::fs::read_dir(tk.kiln.db_path().parent().unwrap())
            .unwrap()
            .any(|e| e.unwrap().path().to_string_lossy().starts_with(&kept_at)),
        "the damaged engine is kept"
    );

    // The rebuilt search index finds a message, and new writes are kept.
    let (last_id, _) = sent.iter().next_back().unwrap();
    assert!(
        kept.contains_key(last_id),
        "the newest message is far from the catalog"
    );
    {
        let found = testkit::daemon::call::<crucible::protocol::methods::Search>(
            &client,
            crucible::protocol::SearchParams {
                query: "marker2999x".into(),
                session_id: None,
                types: None,
                limit: Some(5),
            },
        )
        .await;
        assert!(
            found
                .hits
                .iter()
                .any(|h| h.message_id.as_deref() == Some(last_id.as_str())),
            "{found:?}"
        );
    }
    let fresh = register(&client, "after the rebuild").await;
    drop(client);
    stop_cleanly(&tk, &mut daemon).await;

    // The next start opens it as it is: nothing more to rebuild.
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let listed = listed_sessions(&client).await;
    assert!(listed.contains(&fresh) && sessions.iter().all(|id| listed.contains(id)));
    let out = tk.cru(&["daemon", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    assert!(status["store"]["rebuilt"].is_null(), "{status}");
}
