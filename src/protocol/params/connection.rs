//! The params and results of the connection's own methods: the handshake, registering
//! a session run by someone else, subscriptions and `db.query`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::types::Topic;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandshakeParams {
    pub protocol_version: u32,
    #[serde(default)]
    pub client: Option<String>,
    /// A session handle: the connection may then act only for that session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandshakeResult {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub pid: u32,
    pub kiln: String,
    /// The session a handle connection is scoped to.
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegisterParams {
    #[serde(default)]
    pub worktree: Option<String>,
    pub agent_type: String,
    pub agent_name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionIdParams {
    pub session_id: String,
}

/// `session.deregister`: the session ends; its termination record keeps the reason and
/// the agent's exit code for a while.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeregisterParams {
    pub session_id: String,
    /// Why it ended; "deregistered" when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryParams {
    pub sql: String,
    #[serde(default)]
    pub bindings: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SubscribeParams {
    /// Topics to receive; all when absent.
    #[serde(default)]
    pub topics: Option<Vec<Topic>>,
}
