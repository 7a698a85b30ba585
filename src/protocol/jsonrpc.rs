//! The JSON-RPC 2.0 envelope: requests, responses, notifications and error objects.
//!
//! Parsing is two-step so every failure gets the code the specification asks for: a line
//! that is not JSON is a parse error (-32700); JSON that is not a request object is an
//! invalid request (-32600), answered with the request's id when one can be read.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// JSON-RPC 2.0 standard error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;

    // Application codes (documented in PROTOCOL.md).
    /// A method other than `handshake` or `ping` was called before the handshake.
    pub const HANDSHAKE_REQUIRED: i64 = -32000;
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
}

/// A request or notification id: a number or a string (null is allowed by the spec but
/// discouraged; we echo whatever the client sent).
pub type Id = Value;

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
        Value::Array(items) => Ok(Incoming::Batch(
            items.into_iter().map(parse_request).collect(),
        )),
        other => Ok(Incoming::Single(parse_request(other))),
    }
}

/// Validates one request object.
pub fn parse_request(value: Value) -> Result<Request, (Id, ErrorObject)> {
    let Value::Object(mut obj) = value else {
        return Err((
            Value::Null,
            ErrorObject::invalid_request("a request must be a JSON object"),
        ));
    };
    let id = obj.remove("id");
    let reply_id = id.clone().unwrap_or(Value::Null);
    let fail = |message: &str| Err((reply_id.clone(), ErrorObject::invalid_request(message)));
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return Err((
            Value::Null,
            ErrorObject::invalid_request("id must be a string, number or null"),
        ));
    }
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
    fn scalar_params_are_rejected() {
        let Incoming::Single(Err((_, err))) =
            parse_line(br#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(err.code, code::INVALID_REQUEST);
    }
}
