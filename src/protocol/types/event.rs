//! Change events pushed to subscribers, the topics they subscribe to, the store's health
//! and context-stack updates.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;
use crate::context::{Change, Checkpoint};

/// Change events pushed to subscribers as JSON-RPC notifications. The notification's
/// method is [`Event::method`]; its params are the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data")]
pub enum Event {
    #[serde(rename = "session.registered")]
    SessionRegistered(Session),
    #[serde(rename = "session.updated")]
    SessionUpdated(Session),
    #[serde(rename = "session.deregistered")]
    SessionDeregistered { session_id: String, reason: String },
    #[serde(rename = "inbox.created")]
    InboxCreated(InboxMessage),
    #[serde(rename = "inbox.updated")]
    InboxUpdated(InboxMessage),
    #[serde(rename = "inbox.deleted")]
    InboxDeleted { ids: Vec<String> },
    #[serde(rename = "session.transcript")]
    Transcript(TranscriptEntry),
    #[serde(rename = "session.output")]
    Output(OutputChunk),
    /// A session's context stack changed (an entry pushed, or an operation).
    #[serde(rename = "session.context")]
    Context(ContextUpdate),
    /// The conflict radar changed (after a turn ended, or a session went).
    #[serde(rename = "session.conflicts")]
    Conflicts(crate::protocol::review::ConflictReport),
    /// The database went away or came back (team mode: a SurrealDB server). While it is
    /// away, writes are refused and nothing is acknowledged.
    #[serde(rename = "daemon.store")]
    Store(StoreHealth),
    /// An emoji verification of the Matrix bot's device began, showed its emoji or ended.
    #[serde(rename = "matrix.verification")]
    MatrixVerification(MatrixVerification),
    /// Changes may have been missed (the database's live queries were re-established):
    /// read the state again. Sent to clients as `events.lagged`.
    #[serde(rename = "events.lagged")]
    Resync {
        missed: u64,
        #[serde(default)]
        reason: String,
    },
}

/// Whether the daemon can reach its database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreHealth {
    pub connected: bool,
    /// Why it is not, while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the embedded engine cannot read back: one line per damaged stretch (see
    /// `db.check`); empty when nothing is known to be damaged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<String>,
    /// What the daemon rebuilt as it started because its database would not open, and
    /// what the rebuild could not bring back; empty when it rebuilt nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rebuilt: Vec<String>,
}

impl Event {
    pub fn method(&self) -> &'static str {
        match self {
            Event::SessionRegistered(_) => "session.registered",
            Event::SessionUpdated(_) => "session.updated",
            Event::SessionDeregistered { .. } => "session.deregistered",
            Event::InboxCreated(_) => "inbox.created",
            Event::InboxUpdated(_) => "inbox.updated",
            Event::InboxDeleted { .. } => "inbox.deleted",
            Event::Transcript(_) => "session.transcript",
            Event::Output(_) => "session.output",
            Event::Context(_) => "session.context",
            Event::Conflicts(_) => "session.conflicts",
            Event::Store(_) => "daemon.store",
            Event::MatrixVerification(_) => "matrix.verification",
            Event::Resync { .. } => "events.lagged",
        }
    }

    /// The notification params: the payload without the tag.
    pub fn params(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => map.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// Rebuilds an event from a notification.
    pub fn from_notification(method: &str, params: Value) -> Option<Self> {
        serde_json::from_value(serde_json::json!({"event": method, "data": params})).ok()
    }

    pub fn topic(&self) -> Topic {
        match self {
            Event::SessionRegistered(_)
            | Event::SessionUpdated(_)
            | Event::SessionDeregistered { .. }
            | Event::Context(_)
            | Event::Conflicts(_)
            | Event::Store(_)
            | Event::MatrixVerification(_)
            | Event::Resync { .. } => Topic::Session,
            Event::Transcript(_) | Event::Output(_) => Topic::Transcript,
            Event::InboxCreated(_) | Event::InboxUpdated(_) | Event::InboxDeleted { .. } => {
                Topic::Inbox
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    Session,
    Inbox,
    /// Transcript entries and streamed output of the sessions crucible runs.
    Transcript,
}

/// The `session.context` event: what changed, and the stack's shape after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextUpdate {
    pub session_id: String,
    pub change: Change,
    /// Entries on the stack after the change, the system prompt included.
    pub entries: usize,
    pub checkpoints: Vec<Checkpoint>,
    #[serde(default)]
    pub fresh_start: bool,
}
