//! A deleted session's purge removes every record it had, however many, and only those.

#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::{GitLeftovers, Store};
use crate::context::{ContextOp, ContextStack, Message};
use crate::protocol::{EntryKind, TranscriptEntry};

fn entry(session: &str, seq: u64) -> TranscriptEntry {
    TranscriptEntry {
        session_id: session.into(),
        seq,
        at: "2026-11-27T10:00:00Z".into(),
        kind: EntryKind::Message,
        text: Some(format!("line {seq} of the build")),
        tool_call_id: None,
        status: None,
    }
}

async fn count(store: &Store, table: &str, session: &str) -> u64 {
    let rows = store
        .query(
            &format!("SELECT count() FROM {table} WHERE session_id = $id GROUP ALL"),
            json!({"id": session}),
        )
        .await
        .unwrap();
    rows[0][0]["count"].as_u64().unwrap_or(0)
}

/// A session's context: `changes` pushes, each stored with its history record.
async fn context(store: &Store, session: &str, changes: usize) {
    let mut context = super::StoredContext {
        stack: ContextStack::new("system"),
        fresh_start: false,
        history_len: 0,
    };
    store.contexts().save(session, &context).await.unwrap();
    for i in 0..changes {
        let change = context
            .stack
            .apply(ContextOp::Push(Message::Human {
                text: format!("prompt {i}"),
            }))
            .unwrap();
        context.history_len = store
            .contexts()
            .save_change(session, &context, &change)
            .await
            .unwrap();
    }
}

/// 50,000 transcript entries (with a stretch already purged, as by a purge a stop cut
/// short, and one entry keyed as before keys carried the seq), a context history and its
/// entries: all gone after the purge, the tombstone too, and another session untouched.
#[tokio::test(flavor = "multi_thread")]
async fn a_purge_removes_all_of_a_50k_entry_session_and_nothing_else() {
    let store = super::memory_store().await;
    let total = 50_000;
    for first in (1..=total).step_by(1000) {
        let entries: Vec<TranscriptEntry> =
            (first..first + 1000).map(|seq| entry("big", seq)).collect();
        store.records().append_transcript(&entries).await.unwrap();
    }
    store
        .records()
        .append_transcript(&[entry("other", 1), entry("other", 2)])
        .await
        .unwrap();
    store
        .query(
            "CREATE transcript:legacy CONTENT {session_id: 'big', seq: 0,
                 at: time::now(), kind: 'message', text: 'from before'}",
            json!({}),
        )
        .await
        .unwrap();
    context(&store, "big", 30).await;
    context(&store, "other", 3).await;
    // A purge cut short: some of the middle is gone already.
    store
        .query(
            "DELETE transcript:⟨big-000000020000⟩..=⟨big-000000024999⟩",
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(count(&store, "transcript", "big").await, total - 5000 + 1);

    store
        .records()
        .delete_session("big", &GitLeftovers::default())
        .await
        .unwrap();
    assert_eq!(store.records().deleted_sessions().await.unwrap(), ["big"]);
    store.records().purge_deleted("big").await.unwrap();

    for table in ["transcript", "context_history", "context_entries"] {
        assert_eq!(count(&store, table, "big").await, 0, "{table}");
    }
    assert!(store.records().deleted_sessions().await.unwrap().is_empty());
    assert_eq!(count(&store, "transcript", "other").await, 2);
    assert_eq!(count(&store, "context_history", "other").await, 3);
    assert_eq!(count(&store, "context_entries", "other").await, 4);
    assert_eq!(
        store
            .contexts()
            .load("other")
            .await
            .unwrap()
            .unwrap()
            .stack
            .entries()
            .len(),
        4
    );
    // Searching finds nothing of it.
    let (hits, _) = store
        .search("build", None, &[crate::protocol::HitKind::Transcript], 10)
        .await
        .unwrap();
    assert!(hits.iter().all(|h| h.session_id == "other"), "{hits:?}");
}
