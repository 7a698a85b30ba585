//! The params and results of the inbox's methods: sending, listing, answering and waiting.

use serde::{Deserialize, Serialize};

use crate::protocol::types::{InboxMessage, MsgType};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendParams {
    pub session_id: String,
    pub msg_type: MsgType,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// For an approval: each option's ACP kind (`allow_once`, `allow_always`,
    /// `reject_once`, `reject_always`), in the options' order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_kinds: Option<Vec<String>>,
    /// The rule that asked and the operation it covers, set by the daemon's own gate only:
    /// never taken from the wire, so no client can make an approval look flagged or not.
    #[serde(skip)]
    pub flagged: Option<Flagged>,
}

/// An operation a rule flagged for approval: the rule and the operation, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagged {
    pub rule: String,
    pub operation: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListParams {
    #[serde(default)]
    pub unread_only: bool,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdParams {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdsParams {
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RespondParams {
    pub id: String,
    pub response: String,
    /// The digest of the question as the one answering was shown it (the message's
    /// `digest`): when given and not the question's, the answer is refused (-32003) and
    /// nothing is answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitParams {
    pub id: String,
    /// Give up after this many seconds; wait forever when absent.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    pub id: String,
    pub message: InboxMessage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Messages {
    pub messages: Vec<InboxMessage>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageReply {
    pub message: InboxMessage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Updated {
    pub updated: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deleted {
    pub deleted: usize,
}
