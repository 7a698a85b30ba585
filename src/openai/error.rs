//! Why a chat request failed, and the words of the errors it meets: an error's causes,
//! its innermost cause, and the message an OpenAI-style error body carries.

use serde_json::Value;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The HTTP client cannot be made (its TLS backend, say).
    #[error("cannot set up the HTTP client: {}", error_chain(.0))]
    Setup(#[source] reqwest::Error),
    /// The request cannot be written as JSON.
    #[error("cannot encode the request: {0}")]
    Encode(#[source] serde_json::Error),
    /// The server cannot be reached; `message` is the innermost cause.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        url: String,
        message: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url} reported an error mid-stream: {message}")]
    InStream { url: String, message: String },
    /// The answer stopped coming; `message` is the error and its causes.
    #[error("the connection to {url} broke off: {message}")]
    Interrupted {
        url: String,
        message: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the reply from {url} ended before `data: [DONE]`")]
    Truncated { url: String },
    /// The answer is not what the protocol says; the JSON error, when that is why.
    #[error("malformed reply from {url}: {message}")]
    Malformed {
        url: String,
        message: String,
        #[source]
        source: Option<serde_json::Error>,
    },
}

/// An error and its causes, `: `-joined, without the request's URL reqwest prints.
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    if parts.len() > 1 && parts[0].starts_with("error sending request") {
        parts.remove(0);
    }
    parts.join(": ")
}

/// The innermost cause, e.g. `Connection refused (os error 111)`.
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The message of an OpenAI-style error body (`{"error": {"message": …}}`, or
/// `{"error": "…"}` as some servers send), else the body itself, else the status reason.
pub(super) fn error_message(body: &str, reason: Option<&str>) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v["error"]["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .or_else(|| v["message"].as_str())
    });
    let text = from_json.unwrap_or(body).trim();
    if text.is_empty() {
        return reason.unwrap_or("no reason given").to_string();
    }
    text.chars().take(500).collect()
}
