use super::*;
use crate::protocol::{InboxMessage, MsgType, Session, TranscriptEntry};

use crate::store::memory_store as memory;

fn entry(session: &str, seq: u64, text: &str) -> TranscriptEntry {
    TranscriptEntry {
        session_id: session.into(),
        seq,
        at: "2026-11-25T10:00:01Z".into(),
        kind: EntryKind::Message,
        text: Some(text.into()),
        tool_call_id: None,
        status: None,
    }
}

fn message(id: &str, title: &str, body: &str) -> InboxMessage {
    InboxMessage {
        kiln: None,
        digest: None,
        id: id.into(),
        session_id: "s2".into(),
        session_name: "feat/two".into(),
        timestamp: "2026-11-25T10:00:00Z".into(),
        msg_type: MsgType::DecisionNeeded,
        title: title.into(),
        body: Some(body.into()),
        options: None,
        option_kinds: None,
        rule: None,
        operation: None,
        read: false,
        responded: false,
        response: None,
        withdrawn: false,
        answered_by: None,
        purpose: None,
    }
}

fn session(id: &str, name: &str, task: &str) -> Session {
    serde_json::from_value(serde_json::json!({
        "id": id, "agent_type": "command", "agent_name": "a", "status": "active",
        "started_at": "2026-11-25T08:00:00Z", "last_heartbeat": "2026-11-25T08:00:00Z",
        "display_name": name, "state": "working", "task": task,
    }))
    .unwrap()
}

fn chars_of(text: &str, (start, end): (usize, usize)) -> String {
    text.chars().skip(start).take(end - start).collect()
}

/// A store with 200 routine transcript lines and two about the tokenizer, four inbox
/// messages (one about the tokenizer) and five sessions (one about it).
async fn tokenizer_store() -> Store {
    let store = memory().await;
    let mut entries: Vec<TranscriptEntry> = (1..=200)
        .map(|i| entry("s1", i, &format!("routine line {i} about the build")))
        .collect();
    entries.push(entry(
        "s1",
        201,
        "The tokenizer failed on unicode input; retrying with the ascii fallback",
    ));
    entries.push(entry("s2", 1, "tokenizer tokenizer tokenizer fails again"));
    store.records().append_transcript(&entries).await.unwrap();
    store
        .inbox()
        .insert(&[
            message(
                "m1",
                "Approve the tokenizer rewrite?",
                "it touches src/lex.rs",
            ),
            message("m2", "Done", "nothing to see"),
            message("m3", "Done", "all green"),
            message("m4", "Error", "the agent crashed"),
        ])
        .await
        .unwrap();
    store
        .sessions()
        .insert(&session(
            "s1",
            "fix/tokenizer",
            "Make the tokenizer handle unicode",
        ))
        .await
        .unwrap();
    store
        .sessions()
        .insert(&session("s2", "feat/docs", "Write the docs"))
        .await
        .unwrap();
    for i in 3..6 {
        store
            .sessions()
            .insert(&session(
                &format!("s{i}"),
                &format!("feat/{i}"),
                "Other work",
            ))
            .await
            .unwrap();
    }
    store
}

#[tokio::test]
async fn finds_each_kind_ranked_with_the_words_marked() {
    let store = tokenizer_store().await;
    let hits = store
        .search("tokenizer failing", None, &HitKind::ALL, 10)
        .await
        .unwrap()
        .0;
    // Both transcript entries match (stems: "failing" finds "failed" and "fails"); the
    // message and the session match "tokenizer" only, so not both words: not found.
    let found: Vec<(HitKind, &str, Option<u64>)> = hits
        .iter()
        .map(|h| (h.kind, h.session_id.as_str(), h.seq))
        .collect();
    assert_eq!(found.len(), 2, "{hits:#?}");
    assert!(found.contains(&(HitKind::Transcript, "s1", Some(201))));
    assert!(found.contains(&(HitKind::Transcript, "s2", Some(1))));
    assert!(hits[0].score >= hits[1].score);
    let hit = hits.iter().find(|h| h.seq == Some(201)).unwrap();
    let marked: Vec<String> = hit
        .marks
        .iter()
        .map(|&m| chars_of(&hit.snippet, m))
        .collect();
    assert_eq!(marked, ["tokenizer", "failed"], "{hit:?}");
    assert!(!hit.snippet.contains(OPEN) && !hit.snippet.contains(CLOSE));

    let hits = store
        .search("tokenizer", None, &HitKind::ALL, 10)
        .await
        .unwrap()
        .0;
    let kinds: Vec<HitKind> = hits.iter().map(|h| h.kind).collect();
    assert!(kinds.contains(&HitKind::Inbox), "{hits:#?}");
    assert!(kinds.contains(&HitKind::Session), "{hits:#?}");
    let inbox = hits.iter().find(|h| h.kind == HitKind::Inbox).unwrap();
    assert_eq!(inbox.message_id.as_deref(), Some("m1"));
    let named = hits.iter().find(|h| h.kind == HitKind::Session).unwrap();
    assert_eq!(named.session_id, "s1");
    assert_eq!(named.session_name, "fix/tokenizer");
    // Ranked (BM25): a word in one record of several scores above nothing.
    assert!(named.score > 0.0 && inbox.score > 0.0, "{hits:#?}");

    // Kinds and one session narrow it.
    let hits = store
        .search("tokenizer", Some("s2"), &[HitKind::Transcript], 10)
        .await
        .unwrap()
        .0;
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].session_id.as_str(), hits[0].seq), ("s2", Some(1)));
    // A word no entry has: nothing.
    assert!(
        store
            .search("zeppelin", None, &HitKind::ALL, 10)
            .await
            .unwrap()
            .0
            .is_empty()
    );
}

#[test]
fn an_excerpt_is_one_line_around_the_first_mark() {
    let marked = format!(
        "{}line one\n\n   then the {OPEN}needle{CLOSE} and {OPEN}more{CLOSE} text",
        "padding ".repeat(40)
    );
    let (text, marks) = excerpt(&marked, 60);
    assert!(text.starts_with('…') && text.ends_with("text"), "{text}");
    assert!(!text.contains('\n') && !text.contains("  "), "{text}");
    assert!(text.chars().count() <= 60);
    let words: Vec<String> = marks.iter().map(|&m| chars_of(&text, m)).collect();
    assert_eq!(words, ["needle", "more"]);

    let long = format!("{OPEN}start{CLOSE} {}", "x ".repeat(200));
    let (text, marks) = excerpt(&long, 40);
    assert_eq!(text.chars().count(), 40);
    assert!(text.starts_with("start") && text.ends_with('…'));
    assert_eq!(marks, [(0, 5)]);
}

#[tokio::test]
async fn a_query_in_more_entries_than_are_ranked_is_answered_and_said_to_be_broad() {
    let store = memory().await;
    let entries: Vec<TranscriptEntry> = (1..=(RANK_CAP as u64 + 20))
        .map(|i| {
            let extra = if i == 7 { " with the rare needle" } else { "" };
            entry("s1", i, &format!("common chatter number {i}{extra}"))
        })
        .collect();
    store.records().append_transcript(&entries).await.unwrap();
    let (hits, broad) = store
        .search("chatter", None, &[HitKind::Transcript], 15)
        .await
        .unwrap();
    assert!(broad, "more than {RANK_CAP} entries hold it");
    assert_eq!(hits.len(), 15);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // A word more narrows it: ranked again.
    let (hits, broad) = store
        .search("chatter needle", None, &[HitKind::Transcript], 15)
        .await
        .unwrap();
    assert!(!broad);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].seq, Some(7));
}

/// Words no dictionary has, `count` of them from `seed`: every entry brings the index
/// new words, the most work its compaction can be given.
fn distinct_words(seed: u64, count: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(count * 8);
    for _ in 0..count {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut w = x;
        for _ in 0..7 {
            out.push((b'a' + (w % 26) as u8) as char);
            w /= 26;
        }
        out.push(' ');
    }
    out
}

/// A transcript whose changes to the search index take compaction rounds larger than the
/// engine's 8 MiB write buffer (a round folds up to 50,000 changes): every round is
/// merged, so no change is left pending, and an entry written last is found.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_transcript_is_merged_into_the_index_and_a_late_entry_found() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(
        &crate::config::StoreConfig::default(),
        &tmp.path().join("db"),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut seq = 0;
    for batch in 0..40 {
        let entries: Vec<TranscriptEntry> = (0..20)
            .map(|i| {
                seq += 1;
                entry("s1", seq, &distinct_words(batch * 1000 + i, 800))
            })
            .collect();
        store.records().append_transcript(&entries).await.unwrap();
    }
    let written = started.elapsed();
    let backlog = store.search_backlog().await.unwrap();
    eprintln!("{seq} entries of 800 new words written in {written:?}; pending: {backlog:?}");
    store
        .records()
        .append_transcript(&[entry("s1", seq + 1, "the zebracorn arrived last")])
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let backlog = store.search_backlog().await.unwrap();
        let pending = backlog
            .iter()
            .find(|(name, _)| name == "search_transcript")
            .map(|(_, n)| *n);
        if pending == Some(0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index's changes were never merged: {backlog:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    eprintln!(
        "all merged {:?} after the last write",
        started.elapsed() - written
    );
    let (hits, broad) = store
        .search("zebracorn", None, &[HitKind::Transcript], 10)
        .await
        .unwrap();
    assert!(!broad);
    assert_eq!(
        hits.iter().map(|h| h.seq).collect::<Vec<_>>(),
        [Some(seq + 1)]
    );
    assert_eq!(store.writes_refused(), None);
    store.close().await;
}

#[tokio::test]
async fn a_query_in_more_messages_than_are_ranked_is_answered_and_said_to_be_broad() {
    let store = memory().await;
    let messages: Vec<InboxMessage> = (1..=(RANK_CAP + 20))
        .map(|i| {
            let extra = if i == 9 { " with the rare needle" } else { "" };
            message(
                &format!("m{i}"),
                &format!("Done number {i}"),
                &format!("the build passed again{extra}"),
            )
        })
        .collect();
    store.inbox().insert(&messages).await.unwrap();
    let (hits, broad) = store
        .search("passed", None, &[HitKind::Inbox], 15)
        .await
        .unwrap();
    assert!(broad, "more than {RANK_CAP} messages hold it");
    assert_eq!(hits.len(), 15);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let (hits, broad) = store
        .search("passed needle", None, &[HitKind::Inbox], 15)
        .await
        .unwrap();
    assert!(!broad);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].message_id.as_deref(), Some("m9"));
}
