//! A client for OpenAI-compatible chat completions, as OpenAI, Ollama, llama.cpp and vLLM
//! speak it: `POST {base_url}/chat/completions` with the model, the messages and the
//! tools (function JSON schemas), optionally with a bearer API key.
//!
//! [`ChatClient::stream`] asks for `stream: true` and reads the Server-Sent Events
//! (`data: {chunk}` events, then `data: [DONE]`), handing each text delta to a callback
//! as it arrives and assembling text and tool-call deltas into one [`Reply`] (see the
//! `stream` module). [`ChatClient::complete`] asks for one JSON answer instead (for summaries).
//!
//! Both read the tokens the server says the request used ([`Usage`]): a plain answer's
//! `usage`, and in a stream the chunk that carries it. Streamed requests ask for it with
//! `stream_options: {include_usage: true}`, OpenAI's option, which compatible servers
//! follow or ignore; a server that ignores it, or reports nothing, leaves the usage
//! unknown (never zero).
//!
//! [`messages_from_stack`] turns a context stack into the messages to send: the stack is
//! the conversation, so every stack operation shows in the next request.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod stream;

use crate::context::{Entry, Message};
use stream::{Assembler, SseDecoder};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The content of a tool message that stands in for a result no longer on the stack
/// (a `pop` took it): every tool call must be answered before the server accepts the
/// conversation.
pub const MISSING_RESULT: &str = "(no result: it was removed from the context)";

/// Starts the user message that carries a summary entry.
pub const SUMMARY_PREFIX: &str =
    "Summary of the conversation so far (it replaces the earlier messages):";

/// One message of the conversation, in the wire format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A function call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON arguments, as text.
    pub arguments: String,
}

impl ToolCall {
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    pub description: String,
    /// A JSON schema of the arguments object.
    pub parameters: Value,
}

impl Tool {
    pub fn function(name: &str, description: &str, parameters: Value) -> Self {
        Tool {
            kind: "function".into(),
            function: FunctionDef {
                name: name.into(),
                description: description.into(),
                parameters,
            },
        }
    }
}

/// What to send; `stream` is set by the call made with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// Left out of the request when empty: some servers refuse an empty list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    request: &'a ChatRequest,
    stream: bool,
    /// Only with `stream: true`: OpenAI refuses it on a plain request.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    /// Asks for a last chunk that carries the request's `usage`.
    include_usage: bool,
}

/// The tokens one request used, as the server reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// `prompt_tokens`: the messages and tools sent, cached ones included.
    pub prompt: u64,
    /// `completion_tokens`: the answer, reasoning included.
    pub completion: u64,
    /// `total_tokens`; the sum of the two when the server leaves it out.
    pub total: u64,
    /// `prompt_tokens_details.cached_tokens`: the part of `prompt` read from the cache.
    pub cached: u64,
}

impl Usage {
    /// The usage a completion or a chunk carries (its `usage`), if it tells a count.
    /// A count that is missing, `null` or not a whole number is left out rather than
    /// failing the reply: the tokens are the server's report, not part of the answer.
    fn read(usage: &Value) -> Option<Usage> {
        let prompt = usage["prompt_tokens"].as_u64();
        let completion = usage["completion_tokens"].as_u64();
        let total = usage["total_tokens"].as_u64();
        if prompt.is_none() && completion.is_none() && total.is_none() {
            return None;
        }
        let (prompt, completion) = (prompt.unwrap_or(0), completion.unwrap_or(0));
        Some(Usage {
            prompt,
            completion,
            total: total.unwrap_or_else(|| prompt.saturating_add(completion)),
            cached: usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
        })
    }
}

/// The model's answer, assembled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, … when the server says.
    pub finish_reason: Option<String>,
    /// The tokens the request used, when the server reported them.
    pub usage: Option<Usage>,
}

impl Reply {
    /// The reply as stack messages: the text (when there is any) as an agent entry, then
    /// one tool-call entry per call. [`messages_from_stack`] turns them back into this
    /// one assistant message.
    pub fn into_stack_messages(self) -> Vec<Message> {
        let text = (!self.content.is_empty()).then_some(Message::Agent { text: self.content });
        let calls = self.tool_calls.into_iter().map(|c| Message::ToolCall {
            call_id: c.id,
            tool: c.function.name,
            arguments: c.function.arguments,
        });
        text.into_iter().chain(calls).collect()
    }
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
    #[error("cannot connect to {url}: {message}")]
    Connect { url: String, message: String },
    #[error("{url} answered HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url} reported an error mid-stream: {message}")]
    InStream { url: String, message: String },
    #[error("the connection to {url} broke off: {message}")]
    Interrupted { url: String, message: String },
    #[error("the reply from {url} ended before `data: [DONE]`")]
    Truncated { url: String },
    #[error("malformed reply from {url}: {message}")]
    Malformed { url: String, message: String },
}

/// A client for one endpoint.
#[derive(Debug, Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
}

impl ChatClient {
    /// `base_url` is the API root, e.g. `http://localhost:11434/v1`.
    pub fn new(base_url: &str, api_key: Option<String>) -> Result<Self, ChatError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| ChatError::Setup(error_chain(&e)))?;
        Ok(ChatClient {
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Streams the reply, calling `on_text` with each text delta as it arrives.
    pub async fn stream(
        &self,
        request: &ChatRequest,
        mut on_text: impl FnMut(&str),
    ) -> Result<Reply, ChatError> {
        let mut response = self.send(request, true).await?;
        let mut events = SseDecoder::default();
        let mut reply = Assembler::default();
        loop {
            let bytes = response.chunk().await.map_err(|e| self.interrupted(&e))?;
            let (events, done) = match &bytes {
                Some(bytes) => (events.feed(bytes), false),
                None => (events.finish(), true),
            };
            for data in events {
                let data = String::from_utf8(data).map_err(|_| self.malformed("not UTF-8"))?;
                if reply
                    .apply(&data, &mut on_text)
                    .map_err(|e| e.at(&self.url))?
                {
                    return Ok(reply.finish());
                }
            }
            if done {
                return Err(ChatError::Truncated {
                    url: self.url.clone(),
                });
            }
        }
    }

    /// Asks for the whole reply at once (`stream: false`).
    pub async fn complete(&self, request: &ChatRequest) -> Result<Reply, ChatError> {
        let response = self.send(request, false).await?;
        let body = response.bytes().await.map_err(|e| self.interrupted(&e))?;
        let completion: Completion =
            serde_json::from_slice(&body).map_err(|e| self.malformed(&e.to_string()))?;
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| self.malformed("the completion has no choices"))?;
        Ok(Reply {
            content: choice.message.content.unwrap_or_default(),
            tool_calls: choice.message.tool_calls.unwrap_or_default(),
            finish_reason: choice.finish_reason,
            usage: completion.usage.as_ref().and_then(Usage::read),
        })
    }

    /// Sends the request; any status but success becomes [`ChatError::Status`].
    async fn send(
        &self,
        request: &ChatRequest,
        stream: bool,
    ) -> Result<reqwest::Response, ChatError> {
        let body = Body {
            request,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
        };
        let body = serde_json::to_vec(&body).map_err(|e| ChatError::Setup(e.to_string()))?;
        let mut builder = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(|e| {
            if e.is_connect() {
                ChatError::Connect {
                    url: self.url.clone(),
                    message: root_cause(&e),
                }
            } else {
                self.interrupted(&e)
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        Err(ChatError::Status {
            url: self.url.clone(),
            status: status.as_u16(),
            message: error_message(&body, status.canonical_reason()),
        })
    }

    fn interrupted(&self, e: &reqwest::Error) -> ChatError {
        ChatError::Interrupted {
            url: self.url.clone(),
            message: error_chain(e),
        }
    }

    fn malformed(&self, message: &str) -> ChatError {
        ChatError::Malformed {
            url: self.url.clone(),
            message: message.to_string(),
        }
    }
}

/// An error and its causes, `: `-joined, without the request's URL reqwest prints.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
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

#[derive(Deserialize)]
struct Completion {
    choices: Vec<CompletionChoice>,
    /// Read leniently, by [`Usage::read`].
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    message: CompletionMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CompletionMessage {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCall>>,
}

/// The messages to send for a context stack (bottom to top):
/// - system → `system` (left out when empty: an ACP agent's stack has none of its own);
/// - human → `user`; agent → `assistant`;
/// - tool calls → the `tool_calls` of one `assistant` message per run of consecutive
///   calls, whose content is the agent entry just below the run, if there is one;
/// - tool results → `tool` messages; a failed one's content starts with `error: `. A call
///   whose result is not right after its run (a `pop` took it) is answered with
///   [`MISSING_RESULT`], since servers refuse a call without an answer;
/// - summary → a `user` message starting with [`SUMMARY_PREFIX`]. Not `system`: many
///   local models' chat templates refuse a system message after the first.
pub fn messages_from_stack(entries: &[Entry]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    let mut rest = entries;
    while let Some(first) = rest.first() {
        rest = match &first.message {
            Message::Agent { text } => push_assistant(&mut out, Some(text.clone()), &rest[1..]),
            Message::ToolCall { .. } => push_assistant(&mut out, None, rest),
            other => {
                out.extend(single_message(other));
                &rest[1..]
            }
        };
    }
    out
}

/// The message for an entry that stands alone (not an agent entry or a tool call).
fn single_message(message: &Message) -> Option<ChatMessage> {
    match message {
        Message::System { text } if text.is_empty() => None,
        Message::System { text } => Some(ChatMessage::System {
            content: text.clone(),
        }),
        Message::Human { text } => Some(ChatMessage::User {
            content: text.clone(),
        }),
        Message::Summary { text } => Some(ChatMessage::User {
            content: format!("{SUMMARY_PREFIX}\n{text}"),
        }),
        _ => tool_message(message),
    }
}

/// Pushes one assistant message with `content` and the tool calls at the start of
/// `rest`, then their results; returns what follows.
fn push_assistant<'a>(
    out: &mut Vec<ChatMessage>,
    content: Option<String>,
    rest: &'a [Entry],
) -> &'a [Entry] {
    let calls_end = rest
        .iter()
        .position(|e| !matches!(e.message, Message::ToolCall { .. }))
        .unwrap_or(rest.len());
    let (calls, rest) = rest.split_at(calls_end);
    let tool_calls: Vec<ToolCall> = calls
        .iter()
        .filter_map(|e| match &e.message {
            Message::ToolCall {
                call_id,
                tool,
                arguments,
            } => Some(ToolCall::function(call_id, tool, arguments)),
            _ => None,
        })
        .collect();
    let results_end = rest
        .iter()
        .position(|e| !matches!(e.message, Message::ToolResult { .. }))
        .unwrap_or(rest.len());
    let (results, rest) = rest.split_at(results_end);
    let answered: Vec<ChatMessage> = results
        .iter()
        .filter_map(|e| tool_message(&e.message))
        .collect();
    let missing: Vec<ChatMessage> = tool_calls
        .iter()
        .filter(|c| {
            !answered.iter().any(
                |m| matches!(m, ChatMessage::Tool { tool_call_id, .. } if *tool_call_id == c.id),
            )
        })
        .map(|c| ChatMessage::Tool {
            tool_call_id: c.id.clone(),
            content: MISSING_RESULT.to_string(),
        })
        .collect();
    out.push(ChatMessage::Assistant {
        content,
        tool_calls,
    });
    out.extend(answered);
    out.extend(missing);
    rest
}

fn tool_message(message: &Message) -> Option<ChatMessage> {
    let Message::ToolResult {
        call_id, ok, text, ..
    } = message
    else {
        return None;
    };
    Some(ChatMessage::Tool {
        tool_call_id: call_id.clone(),
        content: if *ok {
            text.clone()
        } else {
            format!("error: {text}")
        },
    })
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
