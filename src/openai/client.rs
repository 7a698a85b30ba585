//! The client of one endpoint: it sends a request, streamed or whole, and reads the
//! answer (a stream through the `stream` module, a plain answer at once).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ChatError, error_chain, error_message, root_cause};
use super::stream::{Assembler, SseDecoder};
use super::wire::{ChatRequest, Reply, ToolCall, Usage};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
            .map_err(ChatError::Setup)?;
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
            let bytes = response.chunk().await.map_err(|e| self.interrupted(e))?;
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
        let body = response.bytes().await.map_err(|e| self.interrupted(e))?;
        let completion: Completion =
            serde_json::from_slice(&body).map_err(|e| ChatError::Malformed {
                url: self.url.clone(),
                message: e.to_string(),
                source: Some(e),
            })?;
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
        let body = serde_json::to_vec(&body).map_err(ChatError::Encode)?;
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
                    source: e,
                }
            } else {
                self.interrupted(e)
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let throttled = (status == reqwest::StatusCode::TOO_MANY_REQUESTS)
            .then(|| retry_after(response.headers(), chrono::Utc::now()));
        let body = response.text().await.unwrap_or_default();
        let mut message = error_message(&body, status.canonical_reason());
        // Said so that the session knows it for a rate limit and when it resets.
        match throttled {
            Some(Some(secs)) => message = format!("rate limit; retry-after: {secs}s: {message}"),
            Some(None) => message = format!("rate limit: {message}"),
            None => {}
        }
        Err(ChatError::Status {
            url: self.url.clone(),
            status: status.as_u16(),
            message,
        })
    }

    fn interrupted(&self, e: reqwest::Error) -> ChatError {
        ChatError::Interrupted {
            url: self.url.clone(),
            message: error_chain(&e),
            source: e,
        }
    }

    fn malformed(&self, message: &str) -> ChatError {
        ChatError::Malformed {
            url: self.url.clone(),
            message: message.to_string(),
            source: None,
        }
    }
}

/// A `Retry-After` header: seconds, or an HTTP date, as seconds from `now`.
pub(super) fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<u64> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs);
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&chrono::Utc) - now).num_seconds().max(0) as u64)
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
