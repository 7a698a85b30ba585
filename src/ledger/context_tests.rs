//! A context stack past the engine's write buffer keeps recording, through the ledger as
//! the sessions use it.

#![allow(clippy::unwrap_used)]

use serde_json::json;

use crate::config::Config;
use crate::context::{Change, ContextOp, Message};
use crate::kiln::Kiln;
use crate::ledger::{Ledger, LedgerError};

fn system() -> String {
    "the system prompt".into()
}

/// How many records the session's history holds, and the entries its changes removed.
async fn history(ledger: &Ledger, id: &str) -> (usize, usize) {
    let rows = ledger
        .store()
        .query(
            "SELECT VALUE change FROM context_history WHERE session_id = $id",
            json!({"id": id}),
        )
        .await
        .unwrap();
    let changes: Vec<Change> = rows[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| serde_json::from_str(c.as_str().unwrap()).unwrap())
        .collect();
    let removed = changes.iter().map(|c| c.removed.len()).sum();
    (changes.len(), removed)
}

/// 44 agent messages of 256 KiB (11 MiB on the stack, past the engine's 8 MiB write
/// buffer), each acknowledged and stored; the stack read back from the store holds them
/// all; a reset of all of it is stored with every entry it removed; an entry larger than
/// a stack keeps is refused alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_context_stack_past_the_write_buffer_records_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(Kiln::new(tmp.path()), Config::default())
        .await
        .unwrap();
    let id = "01STACK";
    let messages = 44;
    for i in 0..messages {
        let text = format!("message {i}: {}", "abcdefgh".repeat(32 * 1024));
        ledger
            .apply_context(id, system, ContextOp::Push(Message::Agent { text }), false)
            .await
            .unwrap_or_else(|e| panic!("push {i}: {e}"));
    }
    assert_eq!(ledger.store().writes_refused(), None);
    // Read back from the store, not the ledger's cache.
    ledger.forget_context(id).await;
    let state = ledger.context(id, system).await.unwrap();
    let entries = state.stack.entries();
    assert_eq!(entries.len(), messages + 1);
    for (i, entry) in entries[1..].iter().enumerate() {
        assert!(
            entry.message.text().starts_with(&format!("message {i}: ")),
            "#{}",
            entry.seq
        );
        assert_eq!(
            entry.message.text().len(),
            format!("message {i}: ").len() + 256 * 1024
        );
    }
    assert_eq!(history(&ledger, id).await, (messages, 0));

    let (state, change) = ledger
        .apply_context(id, system, ContextOp::Reset, true)
        .await
        .unwrap();
    assert_eq!(change.removed.len(), messages);
    assert!(state.fresh_start);
    ledger.forget_context(id).await;
    let state = ledger.context(id, system).await.unwrap();
    assert_eq!(state.stack.entries().len(), 1);
    assert!(state.fresh_start);
    let (records, removed) = history(&ledger, id).await;
    assert!(records > messages, "{records} history records");
    assert_eq!(
        removed, messages,
        "the reset's history holds every removed entry"
    );

    let huge = "x".repeat(3 * 1024 * 1024);
    let refused = ledger
        .apply_context(
            id,
            system,
            ContextOp::Push(Message::Agent { text: huge }),
            false,
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, LedgerError::Invalid(_)), "{refused}");
    assert!(
        refused.to_string().contains("at most 2048 KiB"),
        "{refused}"
    );
    let (state, _) = ledger
        .apply_context(
            id,
            system,
            ContextOp::Push(Message::Human {
                text: "still recording".into(),
            }),
            false,
        )
        .await
        .unwrap();
    assert_eq!(state.stack.entries().len(), 2);
    ledger.forget_context(id).await;
    let state = ledger.context(id, system).await.unwrap();
    assert_eq!(state.stack.top().message.text(), "still recording");
    ledger.store().close().await;
}
