//! The JSON-RPC 2.0 envelope: requests, responses, notifications and error objects.
//!
//! Parsing is two-step so every failure gets the code the specification asks for: a line
//! that is not JSON is a parse error (-32700); JSON that is not a request object is an
//! invalid request (-32600), answered with the request's id when one can be read.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// JSON-RPC 2.0 standard error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;

    // Application codes (documented in PROTOCOL.md; -32000, "handshake required", is no
    // longer sent now that the handshake is optional).
    /// The client speaks another protocol version than the daemon.
    pub const VERSION_MISMATCH: i64 = -32001;
    /// The session or inbox message named does not exist.
    pub const NOT_FOUND: i64 = -32002;
    /// The request conflicts with the current state (e.g. answering twice).
    pub const CONFLICT: i64 = -32003;
    /// The database refused or failed the operation; nothing was acknowledged.
    pub const STORE_ERROR: i64 = -32004;
    /// The caller is not allowed to do this.
    pub const FORBIDDEN: i64 = -32005;
    /// The daemon is shutting down and accepts no new work.
    pub const SHUTTING_DOWN: i64 = -32006;
    /// A wait ended without an answer.
    pub const TIMED_OUT: i64 = -32007;
    /// The daemon cannot take this connection now (out of descriptors); try again.
    pub const BUSY: i64 = -32008;
    /// A git command the operation ran failed; the message names it and gives its stderr.
    pub const GIT_FAILED: i64 = -32009;
    /// A program the operation needs (`gh`, a driver's tool) is missing or failed.
    pub const TOOL_FAILED: i64 = -32010;
    /// A file the daemon keeps (an audit log, a worktree path) could not be read or written.
    pub const IO_ERROR: i64 = -32011;
    /// The session's environment (its driver: sandbox, container, remote host) could not
    /// be made or used.
    pub const DRIVER_ERROR: i64 = -32012;
    /// A session's agent could not be started: its program not found or not launched,
    /// its environment not made, or its handle not issued.
    pub const SPAWN_FAILED: i64 = -32013;
    /// Through the hub: the kiln the call belongs to cannot be reached now (its daemon
    /// is lost or does not start); the message names the kiln and why.
    pub const KILN_UNREACHED: i64 = -32014;
}

/// A request or notification id: a number or a string (null is allowed by the spec but
/// discouraged). Kept as the client wrote it, so it is echoed exactly: a number too large
/// for 64 bits, or written `1e2`, comes back as it was sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Id(Box<RawValue>);

impl Id {
    pub fn null() -> Self {
        Self::from_value(&Value::Null)
    }

    fn from_value(value: &Value) -> Self {
        // Serialising a JSON value cannot fail; `null` (the default) is the fallback.
        Self(serde_json::value::to_raw_value(value).unwrap_or_default())
    }

    /// The id as an unsigned integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        serde_json::from_str(self.0.get()).ok()
    }

    /// The id as the client wrote it.
    pub fn text(&self) -> &str {
        self.0.get()
    }
}

impl Default for Id {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl PartialEq<Value> for Id {
    fn eq(&self, other: &Value) -> bool {
        serde_json::from_str::<Value>(self.0.get()).is_ok_and(|v| v == *other)
    }
}

/// A request as received. `id` is `None` for notifications.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Option<Id>,
    pub method: String,
    pub params: Value,
}

/// The error member of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(code::PARSE_ERROR, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(code::METHOD_NOT_FOUND, format!("no such method: {method}"))
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, message)
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

/// A response: exactly one of `result` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

impl Response {
    pub fn ok(id: Id, result: Value) -> Self {
        Self {
            jsonrpc: "2.0".into(),
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn err(id: Id, error: ErrorObject) -> Self {
        Self {
            jsonrpc: "2.0".into(),
            id,
            result: None,
            error: Some(error),
        }
    }

    /// The result, or the error as a Rust error.
    pub fn into_result(self) -> Result<Value, ErrorObject> {
        match (self.error, self.result) {
            (Some(error), _) => Err(error),
            (None, Some(result)) => Ok(result),
            (None, None) => Ok(Value::Null),
        }
    }
}

/// A message the daemon pushes without being asked (no id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub jsonrpc: String,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

impl Notification {
    pub fn new(method: impl Into<String>, params: Value) -> Self {
        Self {
            jsonrpc: "2.0".into(),
            method: method.into(),
            params,
        }
    }
}

/// What one line from a client holds once parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A single request, or a single invalid one with the error to answer it with.
    Single(Result<Request, (Id, ErrorObject)>),
    /// A batch: each element parsed on its own.
    Batch(Vec<Result<Request, (Id, ErrorObject)>>),
}

/// Parses one line. `Err` is a whole-line failure answered with a single error response.
pub fn parse_line(line: &[u8]) -> Result<Incoming, ErrorObject> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| ErrorObject::parse(format!("not valid JSON: {e}")))?;
    match value {
        Value::Array(items) if items.is_empty() => Err(ErrorObject::invalid_request(
            "empty batch: a batch must hold at least one request",
        )),
        Value::Array(items) => {
            // Ids that a JSON value cannot hold exactly are read again from the text.
            let raw = || serde_json::from_slice::<Vec<&RawValue>>(line).ok();
            let needs_raw = items.iter().any(|item| inexact_id(item).is_some());
            let raws = if needs_raw { raw() } else { None };
            Ok(Incoming::Batch(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let exact = raws.as_ref().and_then(|r| r.get(i)).map(|r| r.get());
                        parse_request(item, exact.map(str::as_bytes))
                    })
                    .collect(),
            ))
        }
        other => Ok(Incoming::Single(parse_request(other, Some(line)))),
    }
}

/// The id of a request object when it is a number that `Value` does not keep exactly.
fn inexact_id(value: &Value) -> Option<&serde_json::Number> {
    match value.get("id") {
        Some(Value::Number(n)) if n.as_u64().is_none() && n.as_i64().is_none() => Some(n),
        _ => None,
    }
}

/// The id as written in `text` (the request object's own JSON).
fn exact_id(text: &[u8]) -> Option<Id> {
    #[derive(Deserialize)]
    struct IdOnly {
        id: Option<Box<RawValue>>,
    }
    serde_json::from_slice::<IdOnly>(text)
        .ok()
        .and_then(|found| found.id)
        .map(Id)
}

/// Validates one request object; `text` is its JSON, to echo an unusual numeric id exactly.
pub fn parse_request(value: Value, text: Option<&[u8]>) -> Result<Request, (Id, ErrorObject)> {
    let exact = inexact_id(&value).and(text).and_then(exact_id);
    let Value::Object(mut obj) = value else {
        return Err((
            Id::null(),
            ErrorObject::invalid_request("a request must be a JSON object"),
        ));
    };
    let id = obj.remove("id");
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return Err((
            Id::null(),
            ErrorObject::invalid_request("id must be a string, number or null"),
        ));
    }
    let id = id.map(|id| exact.unwrap_or_else(|| Id::from_value(&id)));
    let reply_id = id.clone().unwrap_or_default();
    let fail = |message: &str| Err((reply_id.clone(), ErrorObject::invalid_request(message)));
    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        _ => return fail("\"jsonrpc\" must be exactly \"2.0\""),
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return fail("\"method\" must be a string"),
        None => return fail("missing \"method\""),
    };
    let params = match obj.remove("params") {
        None => Value::Object(Map::new()),
        Some(p @ (Value::Object(_) | Value::Array(_))) => p,
        Some(_) => return fail("\"params\" must be an object or an array"),
    };
    Ok(Request { id, method, params })
}

/// Serialises a request for sending.
pub fn request_line(id: u64, method: &str, params: &Value) -> String {
    let mut line =
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_error_for_garbage() {
        let err = parse_line(b"{not json").unwrap_err();
        assert_eq!(err.code, code::PARSE_ERROR);
    }

    #[test]
    fn non_object_is_invalid_request_with_null_id() {
        let Incoming::Single(Err((id, err))) = parse_line(b"42").unwrap() else {
            panic!()
        };
        assert_eq!(id, Value::Null);
        assert_eq!(err.code, code::INVALID_REQUEST);
    }

    #[test]
    fn missing_version_keeps_the_id() {
        let Incoming::Single(Err((id, err))) =
            parse_line(br#"{"id": 7, "method": "ping"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(id, json!(7));
        assert_eq!(err.code, code::INVALID_REQUEST);
    }

    #[test]
    fn notification_has_no_id_and_default_params() {
        let Incoming::Single(Ok(req)) =
            parse_line(br#"{"jsonrpc":"2.0","method":"ping"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(req.id, None);
        assert_eq!(req.params, json!({}));
    }

    #[test]
    fn batch_parses_each_element() {
        let Incoming::Batch(items) =
            parse_line(br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5]"#).unwrap()
        else {
            panic!()
        };
        assert!(items[0].is_ok());
        assert!(items[1].is_err());
        assert_eq!(parse_line(b"[]").unwrap_err().code, code::INVALID_REQUEST);
    }

    #[test]
    fn unusual_numeric_ids_are_echoed_as_written() {
        for text in [
            "18446744073709551616",
            "1e2",
            "-0.5",
            "12345678901234567890123",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            let Incoming::Single(Ok(req)) = parse_line(line.as_bytes()).unwrap() else {
                panic!()
            };
            let reply = serde_json::to_string(&Response::ok(req.id.unwrap(), json!(1))).unwrap();
            assert!(reply.contains(&format!(r#""id":{text}"#)), "{reply}");
            let batch = format!(
                r#"[{{"jsonrpc":"2.0","id":1,"method":"a"}},{{"jsonrpc":"2.0","id":{text},"method":"b"}}]"#
            );
            let Incoming::Batch(items) = parse_line(batch.as_bytes()).unwrap() else {
                panic!()
            };
            assert_eq!(items[1].as_ref().unwrap().id.as_ref().unwrap().text(), text);
        }
    }

    #[test]
    fn scalar_params_are_rejected() {
        let Incoming::Single(Err((_, err))) =
            parse_line(br#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(err.code, code::INVALID_REQUEST);
    }
}
