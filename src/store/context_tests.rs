//! Context stacks in pieces: every change reads back, however large the stack grows, and
//! a change too large to keep is refused alone.

#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::context::{ENTRY_BYTES, PIECE_BYTES};
use super::{Store, StoreError, StoredContext};
use crate::config::StoreConfig;
use crate::context::{Change, ContextOp, ContextStack, Message};

/// A store on disk with the engine's default write buffer (8 MiB), the limit a stack
/// past it used to meet.
async fn disk_store(dir: &std::path::Path) -> Store {
    Store::open(&StoreConfig::default(), &dir.join("db"))
        .await
        .unwrap()
}

/// Applies `op` as the ledger does: the stack changes, and the change is stored.
async fn apply(store: &Store, id: &str, context: &mut StoredContext, op: ContextOp) -> Change {
    let change = context.stack.apply(op).unwrap();
    context.history_len = store
        .contexts()
        .save_change(id, context, &change)
        .await
        .unwrap();
    change
}

fn new_context(system: &str) -> StoredContext {
    StoredContext {
        stack: ContextStack::new(system),
        fresh_start: false,
        history_len: 0,
    }
}

/// What the session's history holds, in order: (operation, change).
async fn history(store: &Store, id: &str) -> Vec<(String, Change)> {
    let rows = store
        .query(
            "SELECT operation, change, seq FROM context_history WHERE session_id = $id ORDER BY seq",
            json!({"id": id}),
        )
        .await
        .unwrap();
    rows[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["operation"].as_str().unwrap().to_string(),
                serde_json::from_str(row["change"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// A text of `bytes` bytes that says which it is.
fn big_text(i: usize, bytes: usize) -> String {
    let mut text = format!("entry {i}: ");
    text.push_str(&"abcdefgh".repeat(bytes / 8));
    text
}

#[tokio::test]
async fn a_stack_reads_back_after_every_kind_of_change() {
    let store = super::memory_store().await;
    let mut context = new_context("the system prompt");
    store.contexts().save("s1", &context).await.unwrap();
    assert_eq!(
        store.contexts().load("s1").await.unwrap(),
        Some(context.clone())
    );
    let ops = [
        ContextOp::Push(Message::Human {
            text: "hello".into(),
        }),
        ContextOp::Push(Message::Agent { text: "hi".into() }),
        ContextOp::Checkpoint("greeted".into()),
        ContextOp::Push(Message::Agent {
            text: "more".into(),
        }),
        ContextOp::Pop(1),
        ContextOp::Push(Message::Agent {
            text: "again".into(),
        }),
        ContextOp::ReplaceTop("short".into()),
        ContextOp::Rollback("greeted".into()),
        ContextOp::Summarize(Some("a summary".into())),
        ContextOp::Push(Message::Human {
            text: "and then".into(),
        }),
        ContextOp::Reset,
        ContextOp::Push(Message::Human {
            text: "fresh".into(),
        }),
    ];
    let count = ops.len() as u64;
    for op in ops {
        apply(&store, "s1", &mut context, op).await;
        assert_eq!(
            store.contexts().load("s1").await.unwrap().as_ref(),
            Some(&context)
        );
    }
    assert_eq!(context.history_len, count);
    assert_eq!(history(&store, "s1").await.len() as u64, count);
    store.contexts().mark_fresh("s1", true).await.unwrap();
    context.fresh_start = true;
    assert_eq!(store.contexts().load("s1").await.unwrap(), Some(context));
    assert_eq!(store.contexts().load("s2").await.unwrap(), None);
}

/// The stack grows past the engine's 8 MiB write buffer one change at a time; every
/// change is acknowledged and reads back (after a restart too), then one reset removes
/// it all, recorded in parts that together hold every entry it removed.
#[tokio::test(flavor = "multi_thread")]
async fn a_stack_past_the_write_buffer_keeps_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let store = disk_store(tmp.path()).await;
    let mut context = new_context("system");
    store.contexts().save("s1", &context).await.unwrap();
    let entries = 44;
    for i in 0..entries {
        let text = big_text(i, 256 * 1024);
        apply(
            &store,
            "s1",
            &mut context,
            ContextOp::Push(Message::Agent { text }),
        )
        .await;
    }
    let stored: usize = context
        .stack
        .entries()
        .iter()
        .map(|e| e.message.text().len())
        .sum();
    assert!(stored > 10 * 1024 * 1024, "{stored} bytes on the stack");
    assert_eq!(store.writes_refused(), None);
    // What each change wrote is what it added (the entry, and the change in the
    // history), not the whole stack again: the journal, which holds every write until
    // the engine has it in its table files, is about twice the stack, where a stack
    // written whole at every change would make it grow with the square of its size.
    let journaled = dir_bytes(&tmp.path().join("db.journal"));
    assert!(
        journaled < 3 * stored as u64,
        "{journaled} bytes journaled for {stored} on the stack"
    );
    store.close().await;
    drop(store);

    let store = disk_store(tmp.path()).await;
    let back = store.contexts().load("s1").await.unwrap().unwrap();
    assert_eq!(back, context);
    assert_eq!(history(&store, "s1").await.len(), entries);

    let reset = apply(&store, "s1", &mut context, ContextOp::Reset).await;
    assert_eq!(reset.removed.len(), entries);
    let back = store.contexts().load("s1").await.unwrap().unwrap();
    assert_eq!(back.stack.entries().len(), 1);
    assert_eq!(back, context);
    let records = history(&store, "s1").await;
    let parts: Vec<&(String, Change)> = records
        .iter()
        .filter(|(op, _)| op.starts_with("reset"))
        .collect();
    assert!(parts.len() > 1, "a reset of 11 MiB is recorded in parts");
    assert_eq!(
        parts[0].0,
        format!("reset (part 1 of {})", parts.len()),
        "{:?}",
        parts.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let removed: Vec<u64> = parts
        .iter()
        .flat_map(|(_, c)| c.removed.iter().map(|e| e.seq))
        .collect();
    let expected: Vec<u64> = reset.removed.iter().map(|e| e.seq).collect();
    assert_eq!(removed, expected, "every removed entry is in the history");
    assert_eq!(context.history_len, records.len() as u64);
    // The entries it removed are no longer stored as the stack's.
    let left = store
        .query("SELECT count() FROM context_entries GROUP ALL", json!({}))
        .await
        .unwrap();
    assert_eq!(left[0][0]["count"], 1, "{left:?}");
    // And the stack goes on.
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Human {
            text: "next".into(),
        }),
    )
    .await;
    assert_eq!(store.contexts().load("s1").await.unwrap().unwrap(), context);
    store.close().await;
}

#[tokio::test]
async fn an_entry_too_large_is_refused_alone_and_the_stack_goes_on() {
    let store = super::memory_store().await;
    let mut context = new_context("system");
    store.contexts().save("s1", &context).await.unwrap();
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Human {
            text: "kept".into(),
        }),
    )
    .await;
    let before = context.clone();
    let mut next = context.clone();
    let change = next
        .stack
        .apply(ContextOp::Push(Message::Agent {
            text: big_text(0, ENTRY_BYTES + 1),
        }))
        .unwrap();
    let refused = store
        .contexts()
        .save_change("s1", &next, &change)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::TooLarge { .. }),
        "{refused:?}"
    );
    let why = refused.to_string();
    assert!(
        why.contains("#3") && why.contains("at most 2048 KiB"),
        "{why}"
    );
    assert_eq!(store.contexts().load("s1").await.unwrap(), Some(before));
    assert_eq!(history(&store, "s1").await.len(), 1);
    // The next change is stored as if the refused one had never been.
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Agent {
            text: "fine".into(),
        }),
    )
    .await;
    assert_eq!(store.contexts().load("s1").await.unwrap(), Some(context));
}

/// What a large change cut short leaves (the first parts of its history, an entry past
/// the stack's end) is not read as the stack's, and the next change writes over it.
#[tokio::test]
async fn what_a_change_cut_short_left_is_not_part_of_the_stack() {
    let store = super::memory_store().await;
    let mut context = new_context("system");
    store.contexts().save("s1", &context).await.unwrap();
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Human { text: "one".into() }),
    )
    .await;
    store
        .query(
            "UPSERT context_history:⟨s1-000000000002⟩ CONTENT {session_id: 's1', seq: 2,
                 at: time::now(), operation: 'reset (part 1 of 2)', change: '{}'};
             UPSERT context_history:⟨s1-000000000003⟩ CONTENT {session_id: 's1', seq: 3,
                 at: time::now(), operation: 'reset (part 2 of 2)', change: '{}'};
             UPSERT context_entries:⟨s1-000000000003⟩ CONTENT {session_id: 's1', seq: 3,
                 entry: '{\"seq\":3,\"created_at\":\"x\",\"kind\":\"human\",\"text\":\"stray\"}'};",
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        store.contexts().load("s1").await.unwrap(),
        Some(context.clone())
    );
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Human { text: "two".into() }),
    )
    .await;
    let back = store.contexts().load("s1").await.unwrap().unwrap();
    assert_eq!(back, context);
    assert_eq!(back.stack.top().message.text(), "two");
    let ops: Vec<String> = history(&store, "s1")
        .await
        .into_iter()
        .map(|(op, _)| op)
        .collect();
    assert_eq!(ops, ["push", "push"]);
}

/// A database of schema v18, whose stacks are stored whole, is migrated; such a stack
/// reads back and is stored in pieces from then.
#[tokio::test]
async fn a_stack_stored_whole_reads_back_and_goes_on_in_pieces() {
    let store = super::memory_store().await;
    store
        .query(
            "REMOVE TABLE context_entries; REMOVE FIELD on_stack ON context_stacks;
             UPSERT crucible_meta:schema SET version = 18;",
            json!({}),
        )
        .await
        .unwrap();
    let mut context = new_context("system");
    context
        .stack
        .apply(ContextOp::Push(Message::Human { text: "old".into() }))
        .unwrap();
    context
        .stack
        .apply(ContextOp::Checkpoint("mark".into()))
        .unwrap();
    context.history_len = 2;
    store
        .query(
            "UPSERT context_stacks:s1 CONTENT {stack: $stack, fresh_start: true,
                 history_len: 2, updated_at: time::now()}",
            json!({"stack": serde_json::to_string(&context.stack).unwrap()}),
        )
        .await
        .unwrap();
    context.fresh_start = true;
    let cfg = StoreConfig::default();
    store
        .prepare(&cfg.namespace, &cfg.database, true)
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), super::SCHEMA_VERSION);
    assert_eq!(
        store.contexts().load("s1").await.unwrap(),
        Some(context.clone())
    );
    apply(
        &store,
        "s1",
        &mut context,
        ContextOp::Push(Message::Agent { text: "new".into() }),
    )
    .await;
    assert_eq!(context.history_len, 3);
    assert_eq!(store.contexts().load("s1").await.unwrap(), Some(context));
    let pieces = store
        .query(
            "SELECT VALUE on_stack FROM context_stacks:s1; SELECT count() FROM context_entries GROUP ALL",
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(pieces[0], json!([[[1, 3]]]));
    assert_eq!(pieces[1][0]["count"], 3);
}

/// A stack copied whole (a fork) whose entries need several transactions.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_stack_copied_whole_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let store = disk_store(tmp.path()).await;
    let mut context = new_context("system");
    for i in 0..40 {
        context
            .stack
            .apply(ContextOp::Push(Message::Agent {
                text: big_text(i, 256 * 1024),
            }))
            .unwrap();
    }
    let copy = StoredContext {
        fresh_start: true,
        ..context
    };
    store.contexts().save("fork", &copy).await.unwrap();
    assert_eq!(store.contexts().load("fork").await.unwrap(), Some(copy));
    assert_eq!(store.writes_refused(), None);
    store.close().await;
}

#[test]
fn a_change_larger_than_a_piece_is_recorded_in_parts_each_within_it() {
    let mut stack = ContextStack::new("system");
    for i in 0..30 {
        stack
            .apply(ContextOp::Push(Message::Agent {
                text: big_text(i, 300 * 1024),
            }))
            .unwrap();
    }
    let change = stack
        .apply(ContextOp::Summarize(Some("all of it".into())))
        .unwrap();
    let parts = super::context_history::history_parts(&change).unwrap();
    assert!(parts.len() >= 4, "{} parts", parts.len());
    let mut removed = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        assert!(part.change.len() <= PIECE_BYTES, "part {i}");
        assert_eq!(
            part.operation,
            format!("summarize (part {} of {})", i + 1, parts.len())
        );
        let piece: Change = serde_json::from_str(&part.change).unwrap();
        removed.extend(piece.removed);
        if i + 1 < parts.len() {
            assert!(piece.added.is_empty());
        } else {
            assert_eq!(piece.added, change.added);
        }
    }
    assert_eq!(removed, change.removed);
    // A small change is one record, as it always was.
    let pushed = stack
        .apply(ContextOp::Push(Message::Human { text: "hi".into() }))
        .unwrap();
    let parts = super::context_history::history_parts(&pushed).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].operation, "push");
    assert_eq!(parts[0].change, serde_json::to_string(&pushed).unwrap());
}
