//! The chain's pure decisions: which profile is next, and what the book remembers.

use std::collections::HashMap;

use chrono::{Duration, Utc};

use super::*;
use crate::config::AgentProfile;

fn profile(fallback: &[&str], back: bool) -> AgentProfile {
    AgentProfile {
        fallback: fallback.iter().map(|s| s.to_string()).collect(),
        fallback_return: back,
        ..AgentProfile::acp("agent", &[])
    }
}

fn session(id: &str, agent: &str) -> Session {
    Session {
        id: id.into(),
        agent_name: agent.into(),
        task: Some("the task".into()),
        ..Session::default()
    }
}

#[test]
fn a_profile_without_a_fallback_begins_no_chain() {
    let now = Utc::now();
    assert_eq!(
        Chain::begin(&session("s1", "a"), &profile(&[], false), now),
        None
    );
    let chain = Chain::begin(&session("s1", "a"), &profile(&["b"], true), now).unwrap();
    assert_eq!(chain.tried, ["a"]);
    assert_eq!(chain.back_at, Some(now));
    assert_eq!(chain.task.as_deref(), Some("the task"));
    let no_return = Chain::begin(&session("s1", "a"), &profile(&["b"], false), now).unwrap();
    assert_eq!(no_return.back_at, None);
}

#[test]
fn the_next_profile_is_the_first_neither_tried_nor_limited() {
    let now = Utc::now();
    let mut chain =
        Chain::begin(&session("s1", "a"), &profile(&["b", "c", "d"], false), now).unwrap();
    let mut limited = HashMap::new();
    assert_eq!(chain.next(&limited, now), Ok("b".to_string()));
    // b at a limit: c; b's limit past: b again.
    limited.insert("b".to_string(), now + Duration::minutes(5));
    assert_eq!(chain.next(&limited, now), Ok("c".to_string()));
    assert_eq!(
        chain.next(&limited, now + Duration::minutes(6)),
        Ok("b".to_string())
    );
    // Tried profiles are passed over even once free: the chain never loops.
    chain.tried.extend(["c".to_string(), "d".to_string()]);
    let passed = chain.next(&limited, now).unwrap_err();
    assert_eq!(
        passed,
        [
            Passed::Limited("b".into(), now + Duration::minutes(5)),
            Passed::Tried("c".into()),
            Passed::Tried("d".into()),
        ]
    );
}

#[test]
fn the_book_finds_a_chain_by_its_holder_or_the_session_the_holder_handed_to() {
    let now = Utc::now();
    let chains = Chains::default();
    let chain = Chain::begin(&session("s1", "a"), &profile(&["b"], false), now).unwrap();
    chains.put(chain.clone());
    let handed = Session {
        handed_from: Some("s1".into()),
        ..session("s2", "b")
    };
    assert!(
        chains.take(&session("s9", "b")).is_none(),
        "another session's"
    );
    assert_eq!(chains.take(&handed), Some(chain.clone()));
    assert!(chains.take(&handed).is_none(), "taken out");
    chains.put(chain);
    assert!(chains.get("s1").is_some());
    assert!(chains.remove("s1").is_some());
    assert!(chains.get("s1").is_none());
}

#[test]
fn a_profile_is_limited_until_its_latest_reset() {
    let now = Utc::now();
    let chains = Chains::default();
    assert_eq!(chains.limited_until("a", now), None);
    chains.mark_limited("a", now + Duration::minutes(10));
    chains.mark_limited("a", now + Duration::minutes(5));
    assert_eq!(
        chains.limited_until("a", now),
        Some(now + Duration::minutes(10))
    );
    assert_eq!(chains.limited_until("a", now + Duration::minutes(11)), None);
    chains.prune(now + Duration::minutes(11));
    assert_eq!(chains.limited_until("a", now), None, "forgotten once reset");
}
