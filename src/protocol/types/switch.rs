//! A profile switch: why a session's task went on with another agent profile (a usage
//! limit, and the fallback chain), kept on the session it left.

use serde::{Deserialize, Serialize};

/// The switch that ended a session: its task went on with `to_agent` in the session its
/// `handed_to` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileSwitch {
    /// The profile that took the task over.
    pub to_agent: String,
    pub why: SwitchReason,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// For a usage limit, when the left profile's limit resets (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
}

/// Why the task moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchReason {
    /// The session's agent reported a usage or rate limit; its profile's fallback chain
    /// took over.
    UsageLimit,
    /// The first profile of the chain is past its limit's reset (`fallback_return`): the
    /// task came back to it.
    LimitReset,
}

impl SwitchReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchReason::UsageLimit => "usage limit",
            SwitchReason::LimitReset => "limit reset",
        }
    }
}
