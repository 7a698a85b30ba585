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

#[tokio::test]
async fn finds_each_kind_ranked_with_the_words_marked() {
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
    store.append_transcript(&entries).await.unwrap();
    store
        .insert_messages(&[
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
        .insert_session(&session(
            "s1",
            "fix/tokenizer",
            "Make the tokenizer handle unicode",
        ))
        .await
        .unwrap();
    store
        .insert_session(&session("s2", "feat/docs", "Write the docs"))
        .await
        .unwrap();
    for i in 3..6 {
        store
            .insert_session(&session(
                &format!("s{i}"),
                &format!("feat/{i}"),
                "Other work",
            ))
            .await
            .unwrap();
    }

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
    store.append_transcript(&entries).await.unwrap();
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
