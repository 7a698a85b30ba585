//! Full-text search over transcripts, inbox messages and sessions' names and tasks.

use serde::{Deserialize, Serialize};

use super::EntryKind;

/// What a search hit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A transcript entry (`seq` says which).
    Transcript,
    /// An inbox message (`message_id` says which).
    Inbox,
    /// A session's name or task.
    Session,
}

impl HitKind {
    pub const ALL: [HitKind; 3] = [HitKind::Transcript, HitKind::Inbox, HitKind::Session];

    pub fn as_str(self) -> &'static str {
        match self {
            HitKind::Transcript => "transcript",
            HitKind::Inbox => "inbox",
            HitKind::Session => "session",
        }
    }

    /// The kind named `name` (`transcript`, `inbox` or `session`).
    pub fn parse(name: &str) -> Option<HitKind> {
        HitKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// One thing a search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub kind: HitKind,
    pub session_id: String,
    /// The session's name (empty when the session is gone).
    #[serde(default)]
    pub session_name: String,
    /// For a transcript entry: its sequence number in the session's transcript.
    #[serde(default)]
    pub seq: Option<u64>,
    /// For a transcript entry: what it records.
    #[serde(default)]
    pub entry_kind: Option<EntryKind>,
    /// For an inbox message: its id.
    #[serde(default)]
    pub message_id: Option<String>,
    /// RFC 3339: when the entry or message was written (a session: when it started).
    #[serde(default)]
    pub at: String,
    /// Relevance (BM25; higher is better).
    pub score: f64,
    /// A one-line excerpt around the first match.
    pub snippet: String,
    /// Where the matched words are in `snippet`: `[start, end)` in characters.
    #[serde(default)]
    pub marks: Vec<(usize, usize)>,
    /// Through the hub: the kiln the hit comes from (its name); absent from a kiln's own
    /// daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln: Option<String>,
}
