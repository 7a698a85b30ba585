//! A session's record reads back as it was written: every field the registry is loaded
//! with at start, so that a restart forgets nothing a session had.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use crate::protocol::{
    ChannelTag, DaySpent, Resolution, SecurityState, Session, SessionState, Spent, Usage,
};

/// A session with every stored field set to something other than its default.
fn everything_set() -> Session {
    let mut days = BTreeMap::new();
    days.insert(
        "2026-11-27".to_string(),
        DaySpent {
            tokens: Some(250_000),
            cost: Some(2.25),
        },
    );
    Session {
        state: Some(SessionState::Complete),
        state_reason: Some("the turn ended".into()),
        task: Some("fix the flaky test".into()),
        branch: Some("fix/flaky".into()),
        worktree_owned: true,
        acp_session_id: Some("acp-1".into()),
        agent_pid: Some(4242),
        exit_code: Some(3),
        context_summary: Some("GOAL: fix it".into()),
        turn_count: 7,
        driver: Some(crate::protocol::DriverSpec::default()),
        limits: vec!["memory 2G".into()],
        security: SecurityState {
            disabled: vec!["no-push".into()],
            refinements: 2,
            ..SecurityState::default()
        },
        skills: vec!["review — reviews".into()],
        base_branch: Some("main".into()),
        usage: Some(Usage {
            used: 15,
            size: 258_400,
            cost: Some(1.5),
            currency: Some("USD".into()),
        }),
        spent: Some(Spent {
            tokens: Some(250_000),
            cost: Some(2.25),
            priced: true,
            days,
            reported: Some(2.0),
            raised_cost: 1.0,
            raised_tokens: 10_000,
        }),
        handed_from: Some("01FROM".into()),
        handed_to: Some("01TO".into()),
        switched: Some(crate::protocol::ProfileSwitch {
            to_agent: "codex".into(),
            why: crate::protocol::SwitchReason::UsageLimit,
            at: "2026-11-28T16:00:00Z".into(),
            resets_at: Some("2026-11-28T17:00:00Z".into()),
        }),
        channel: Some(ChannelTag {
            kind: "webhook".into(),
            source: "issues".into(),
            reference: "42".into(),
            reason: Resolution::Continue,
            last_message_at: "2026-11-27T10:00:00Z".into(),
            closed: false,
            approval_target: None,
            own_bot: false,
        }),
        owner: Some("daemon-1".into()),
        host: Some("box".into()),
        queued: vec!["then this".into()],
        turn_prompt: Some("fix it".into()),
        ..Session::started(
            "01SESSION".into(),
            Some("/kiln/.crucible/worktrees/fix-flaky".into()),
            "acp".into(),
            "claude".into(),
            "fix/flaky @ claude".into(),
            "2026-11-27T10:00:00Z".into(),
        )
    }
}

#[tokio::test]
async fn every_field_of_a_session_reads_back_as_written() {
    let store = super::memory_store().await;
    let written = everything_set();
    store.sessions().save(&written).await.unwrap();
    let listed = store.sessions().list().await.unwrap();
    assert_eq!(listed.len(), 1);
    let mut read = listed.into_iter().next().unwrap();
    // Times come back in the engine's own spelling; what matters here is that no field
    // is left behind.
    for (at, wrote) in [
        (&mut read.started_at, &written.started_at),
        (&mut read.last_heartbeat, &written.last_heartbeat),
    ] {
        let a = chrono::DateTime::parse_from_rfc3339(at).unwrap();
        let b = chrono::DateTime::parse_from_rfc3339(wrote).unwrap();
        assert_eq!(a, b);
        *at = wrote.clone();
    }
    assert_eq!(read, written);
}

#[tokio::test]
async fn what_a_session_spent_survives_its_next_whole_record_write() {
    let store = super::memory_store().await;
    let written = everything_set();
    store.sessions().save(&written).await.unwrap();
    // A restart loads the registry from the list, and the next change writes the whole
    // record back: what was spent, and the hand-off's lineage, must still be there.
    let mut loaded = store.sessions().list().await.unwrap().remove(0);
    loaded.display_name = "renamed".into();
    store.sessions().save(&loaded).await.unwrap();
    let again = store.sessions().list().await.unwrap().remove(0);
    assert_eq!(again.spent, written.spent);
    assert_eq!(again.handed_from.as_deref(), Some("01FROM"));
    assert_eq!(again.handed_to.as_deref(), Some("01TO"));
    assert_eq!(again.switched, written.switched);
    let owned = store.team().owned_sessions("daemon-1").await.unwrap();
    assert_eq!(owned[0].spent, written.spent);
}

#[tokio::test]
async fn a_session_with_nothing_queued_reads_back_with_nothing_queued() {
    let store = super::memory_store().await;
    let mut written = everything_set();
    written.queued.clear();
    written.turn_prompt = None;
    store.sessions().save(&written).await.unwrap();
    let read = store.sessions().list().await.unwrap().remove(0);
    assert!(
        read.queued.is_empty() && read.turn_prompt.is_none(),
        "{read:?}"
    );
}

#[tokio::test]
async fn a_store_that_stopped_taking_writes_says_why_and_refuses_the_next() {
    let store = super::memory_store().await;
    assert_eq!(store.writes_refused(), None);
    store.sessions().save(&everything_set()).await.unwrap();
    store.stop_writes("No space left on device (os error 28)".into());
    let why = store.writes_refused().expect("writes are refused");
    assert!(why.contains("No space left"), "{why}");
    let refused = store.sessions().save(&everything_set()).await.unwrap_err();
    assert!(
        refused.to_string().contains("stopped taking writes"),
        "{refused}"
    );
    // What was stored before still reads back.
    assert_eq!(store.sessions().list().await.unwrap().len(), 1);
}
