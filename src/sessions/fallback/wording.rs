//! What the fallback chain says in the inbox: each switch (from which profile to which,
//! and why), a chain with no profile left, and a switch that failed.

use chrono::{DateTime, Utc};

use super::Passed;
use crate::protocol::MsgType;
use crate::sessions::wording::Notice;

fn notice(msg_type: MsgType, title: String, body: String) -> Notice {
    Notice {
        msg_type,
        title,
        body: Some(body),
        stderr_tail: false,
    }
}

/// A reset time as people read it: the local time of day.
pub(in crate::sessions) fn local_time(at: DateTime<Utc>) -> String {
    at.with_timezone(&chrono::Local)
        .format("%H:%M:%S")
        .to_string()
}

/// A usage limit on `from` moved the task to `to` (session `to_name`, `to_id`).
pub(in crate::sessions) fn fell_back(
    from: &str,
    to: &str,
    to_name: &str,
    to_id: &str,
    resets_at: DateTime<Utc>,
    back: Option<(&str, DateTime<Utc>)>,
) -> Notice {
    let back = back.map_or_else(String::new, |(first, at)| {
        format!(" At {} the task comes back to {first}.", local_time(at))
    });
    notice(
        MsgType::Info,
        format!("Usage limit: the task goes on with {to}"),
        format!(
            "Switched from profile {from} to {to}: the agent of {from} reported a usage limit \
             (it resets at {}), and {to} is next in the fallback chain. The session was handed \
             off to {to_name} ({to_id}), on the same worktree and branch, instead of waiting \
             for the reset.{back}",
            local_time(resets_at)
        ),
    )
}

/// The first profile's limit reset: the task went from `from` back to `to`.
pub(in crate::sessions) fn came_back(from: &str, to: &str, to_name: &str, to_id: &str) -> Notice {
    notice(
        MsgType::Info,
        format!("Usage limit reset: the task comes back to {to}"),
        format!(
            "Switched from profile {from} back to {to}: the usage limit of {to} has reset. \
             The session was handed off to {to_name} ({to_id}) with a brief of what was done \
             meanwhile."
        ),
    )
}

/// No profile of the chain is left: the session waits for its reset.
pub(in crate::sessions) fn chain_spent(
    from: &str,
    resets_at: DateTime<Utc>,
    passed: &[Passed],
) -> Notice {
    let why: Vec<String> = passed
        .iter()
        .map(|p| match p {
            Passed::Tried(name) => format!("{name} (tried already)"),
            Passed::Limited(name, until) => {
                format!("{name} (at a limit until {})", local_time(*until))
            }
        })
        .collect();
    notice(
        MsgType::Info,
        "Usage limit: no profile of the fallback chain is free".into(),
        format!(
            "The agent of profile {from} reported a usage limit, and its fallback chain has \
             no profile left: {}. The session stays parked and resumes at {}.",
            why.join(", "),
            local_time(resets_at)
        ),
    )
}

/// A switch failed: the session waits for its reset, or keeps the task.
pub(in crate::sessions) fn switch_failed(from: &str, to: &str, why: &str) -> Notice {
    notice(
        MsgType::Error,
        format!("Fallback chain: no hand-off from {from} to {to}"),
        format!(
            "The task could not go from profile {from} to {to}: {why}. The session keeps it \
             (a session parked at a usage limit resumes at the reset)."
        ),
    )
}
