//! The profile switches of the fallback chain in `cru usage`: each one a line under the
//! table, and, in JSON, in the `switches` of the row it falls in (the session or agent
//! it left, the day it was made).

use serde::Serialize;

use crate::cli::output::outln;
use crate::protocol::{Session, SwitchReason};

/// A session's task went on with another profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Switch {
    /// When (RFC 3339, UTC).
    pub at: String,
    pub from_agent: String,
    pub to_agent: String,
    pub why: SwitchReason,
    pub from_session: String,
    pub to_session: Option<String>,
    /// For a usage limit, when the left profile's limit resets.
    pub resets_at: Option<String>,
}

/// The switch `s` was left by, if its task went on with another profile.
pub fn of(s: &Session) -> Option<Switch> {
    let switched = s.switched.as_ref()?;
    Some(Switch {
        at: switched.at.clone(),
        from_agent: s.agent_name.clone(),
        to_agent: switched.to_agent.clone(),
        why: switched.why,
        from_session: s.id.clone(),
        to_session: s.handed_to.clone(),
        resets_at: switched.resets_at.clone(),
    })
}

/// `YYYY-MM-DD HH:MM:SS` of an RFC 3339 time, as it was given if it is not one.
fn when(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at).map_or_else(
        |_| at.to_string(),
        |t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        },
    )
}

/// One line: `2026-11-28 16:40:01  claude → codex  usage limit (resets 17:40:01)  s1 → s2`.
pub fn line(s: &Switch) -> String {
    let why = match (&s.why, &s.resets_at) {
        (SwitchReason::UsageLimit, Some(at)) => {
            let reset = when(at);
            format!("usage limit (resets {})", reset.get(11..).unwrap_or(&reset))
        }
        (why, _) => why.as_str().to_string(),
    };
    format!(
        "{}  {} → {}  {why}  {} → {}",
        when(&s.at),
        s.from_agent,
        s.to_agent,
        s.from_session,
        s.to_session.as_deref().unwrap_or("?")
    )
}

/// Prints the switches under the table, oldest first, when there are any.
pub fn print<'a>(switches: impl IntoIterator<Item = &'a Switch>) {
    let mut all: Vec<&Switch> = switches.into_iter().collect();
    if all.is_empty() {
        return;
    }
    all.sort_by(|a, b| a.at.cmp(&b.at));
    outln!("\nProfile switches (UTC; fallback chains):");
    for s in all {
        outln!("  {}", line(s));
    }
}
