//! The params of the calls tests make most, by their few values: a field the protocol
//! adds is filled in here once, not at every call.

use crucible::protocol::MsgType;
use crucible::protocol::params::{
    PromptParams, QueryParams, RespondParams, SendParams, SessionIdParams,
};
use serde_json::Value;

/// `{"session_id": id}`.
pub fn session_id(id: &str) -> SessionIdParams {
    SessionIdParams {
        session_id: id.to_string(),
    }
}

/// A prompt for session `id`.
pub fn prompt(id: &str, text: &str) -> PromptParams {
    PromptParams {
        session_id: id.to_string(),
        text: text.to_string(),
    }
}

/// An answer to the inbox message `id`.
pub fn respond(id: &str, response: &str) -> RespondParams {
    RespondParams {
        id: id.to_string(),
        response: response.to_string(),
        asked: None,
    }
}

/// A SurrealQL query; `bindings` a JSON object, or null for none.
pub fn query(sql: &str, bindings: Value) -> QueryParams {
    QueryParams {
        sql: sql.to_string(),
        bindings: match bindings {
            Value::Object(map) => Some(map),
            _ => None,
        },
    }
}

/// A message to the inbox from session `id`, with `options` to choose from (none: a
/// notice).
pub fn send(id: &str, msg_type: MsgType, title: &str, options: &[&str]) -> SendParams {
    SendParams {
        session_id: id.to_string(),
        msg_type,
        title: title.to_string(),
        body: None,
        options: (!options.is_empty()).then(|| options.iter().map(|o| o.to_string()).collect()),
        option_kinds: None,
        flagged: None,
    }
}

/// An `info` message from session `id` with a body: a report, as the benchmarks fill the
/// inbox with.
pub fn note(id: &str, title: &str, body: &str) -> SendParams {
    SendParams {
        body: Some(body.to_string()),
        ..send(id, MsgType::Info, title, &[])
    }
}
