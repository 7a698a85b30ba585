//! Test equipment, not part of crucible (it ships in no build): a scripted
//! OpenAI-compatible chat server on `127.0.0.1`, for the internal agent's unit tests
//! (`src/openai/openai_tests.rs`) and the integration tests in `tests/it/` (like
//! `tests/equipment/scripted_agent.rs` for ACP).
//!
//! Every `POST …/chat/completions` takes the next [`ScriptedReply`] and gets it in the real
//! wire format: with `"stream": true`, Server-Sent Events in several chunks (a role chunk,
//! the text in three pieces, each tool call's arguments in three fragments, a final chunk
//! with the finish reason, then `data: [DONE]`) over a chunked HTTP/1.1 body; otherwise
//! one JSON completion. Every chat request's JSON body is recorded, so a test can check
//! exactly what the next request carried. When the script runs out, requests get HTTP 500 saying so.
//!
//! Usage is reported only once a test sets it ([`ScriptedServer::report_usage`]), as OpenAI
//! does: in every plain completion's `usage`, and in a stream that asks for it
//! (`stream_options.include_usage`) as a last chunk with no choices, before `[DONE]`,
//! the other chunks then carrying `"usage": null`.
//!
//! The HTTP side is minimal: one request per connection (`Connection: close`), bodies
//! sized by `Content-Length`, as `reqwest` sends them.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Text and arguments are sent in this many pieces.
const PIECES: usize = 3;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedReply {
    /// The text, then `finish_reason: "stop"`.
    Text(String),
    /// Optional text, then the calls, then `finish_reason: "tool_calls"`.
    ToolCalls {
        text: String,
        calls: Vec<ScriptedCall>,
    },
    /// HTTP `status` with an OpenAI-style body: `{"error": {"message": …}}`.
    Error { status: u16, message: String },
    /// HTTP 429 with `Retry-After: <secs>` and a body that names no limit.
    Throttled { retry_after: u64 },
    /// Streams the first pieces of the text, then ends the body without `[DONE]`.
    EndsEarly(String),
    /// Streams the first pieces of the text, then drops the connection mid-body.
    HangsUp(String),
    /// One good text chunk, then an event whose data is not JSON.
    Malformed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    /// JSON arguments, as text.
    pub arguments: String,
}

impl ScriptedReply {
    pub fn text(text: &str) -> Self {
        ScriptedReply::Text(text.into())
    }

    /// One call and no text.
    pub fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        ScriptedReply::ToolCalls {
            text: String::new(),
            calls: vec![ScriptedCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
        }
    }

    pub fn error(status: u16, message: &str) -> Self {
        ScriptedReply::Error {
            status,
            message: message.into(),
        }
    }
}

/// A request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    pub body: Value,
}

impl RecordedRequest {
    /// The body's `messages`, typed (as crucible's `ChatMessage`).
    pub fn messages<T: DeserializeOwned>(&self) -> Result<Vec<T>, serde_json::Error> {
        serde_json::from_value(self.body["messages"].clone())
    }
}

struct Shared {
    replies: Mutex<VecDeque<ScriptedReply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// The `usage` every reply reports, once set.
    usage: Mutex<Option<Value>>,
    /// The number of requests recorded, for waiters.
    count: watch::Sender<usize>,
}

/// The running server; it stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl ScriptedServer {
    /// Listens on a free port of 127.0.0.1 and answers with `replies`, in order.
    pub async fn start(replies: impl IntoIterator<Item = ScriptedReply>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            usage: Mutex::new(None),
            count: watch::channel(0).0,
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(ScriptedServer {
            addr,
            shared,
            accept,
        })
    }

    /// The API root to configure as `base_url`: `http://127.0.0.1:{port}/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Adds a reply to the end of the script.
    pub fn push_reply(&self, reply: ScriptedReply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// From now on every reply reports `usage` (an OpenAI `usage` object, e.g.
    /// `{"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}`), a
    /// stream only when the request asks for it.
    pub fn report_usage(&self, usage: Value) {
        *lock(&self.shared.usage) = Some(usage);
    }

    /// Every chat request so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Waits until `n` requests have arrived and returns them all, or `None` after
    /// `timeout`.
    pub async fn wait_for_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Option<Vec<RecordedRequest>> {
        let mut count = self.shared.count.subscribe();
        tokio::time::timeout(timeout, count.wait_for(|c| *c >= n))
            .await
            .ok()?
            .ok()?;
        Some(self.requests())
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(serve(stream, Arc::clone(&shared)));
    }
}

struct Request {
    path: String,
    authorization: Option<String>,
    body: Vec<u8>,
}

/// Answers one request; I/O errors just end the connection.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = answer(&mut stream, &shared).await;
}

async fn answer(stream: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    let request = match read_request(stream).await? {
        Ok(request) => request,
        Err(problem) => return write_error(stream, 400, &problem).await,
    };
    if !request.path.ends_with("/chat/completions") {
        let message = format!("no route for {}", request.path);
        return write_error(stream, 404, &message).await;
    }
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return write_error(stream, 400, &format!("body is not JSON: {e}")).await,
    };
    let streaming = body["stream"] == json!(true);
    let usage = lock(&shared.usage)
        .clone()
        .filter(|_| !streaming || body["stream_options"]["include_usage"] == json!(true));
    let model = body["model"].as_str().unwrap_or("scripted").to_string();
    let number = {
        let mut requests = lock(&shared.requests);
        requests.push(RecordedRequest {
            path: request.path,
            authorization: request.authorization,
            body,
        });
        requests.len()
    };
    shared.count.send_replace(number);
    let Some(reply) = lock(&shared.replies).pop_front() else {
        let message = format!("the scripted server has no reply left for request {number}");
        return write_error(stream, 500, &message).await;
    };
    if streaming {
        write_stream(stream, &reply, &model, usage.as_ref()).await
    } else {
        write_completion(stream, &reply, &model, usage.as_ref()).await
    }
}

/// The request, or what is wrong with it (answered with 400).
async fn read_request(stream: &mut TcpStream) -> io::Result<Result<Request, String>> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Ok(Err("request head too large".into()));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    if parts.next() != Some("POST") {
        return Ok(Err(format!("only POST is served, not {request_line:?}")));
    }
    let path = parts.next().unwrap_or_default().to_string();
    let mut length = 0;
    let mut authorization = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => match value.parse::<usize>() {
                Ok(n) if n <= MAX_BODY => length = n,
                _ => return Ok(Err(format!("bad content-length {value:?}"))),
            },
            "authorization" => authorization = Some(value.to_string()),
            _ => {}
        }
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Ok(Request {
        path,
        authorization,
        body,
    }))
}

async fn write_error(stream: &mut TcpStream, status: u16, message: &str) -> io::Result<()> {
    let kind = if status < 500 {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    write_json(stream, status, &body).await
}

async fn write_throttled(stream: &mut TcpStream, retry_after: u64) -> io::Result<()> {
    let body =
        json!({"error": {"message": "Slow down", "type": "requests", "param": null, "code": null}})
            .to_string();
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: \
         {retry_after}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

async fn write_json(stream: &mut TcpStream, status: u16, body: &Value) -> io::Result<()> {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

async fn write_completion(
    stream: &mut TcpStream,
    reply: &ScriptedReply,
    model: &str,
    usage: Option<&Value>,
) -> io::Result<()> {
    let (text, calls, finish) = match reply {
        ScriptedReply::Text(text) => (text.as_str(), &[][..], "stop"),
        ScriptedReply::ToolCalls { text, calls } => (text.as_str(), &calls[..], "tool_calls"),
        ScriptedReply::Error { status, message } => {
            return write_error(stream, *status, message).await;
        }
        ScriptedReply::Throttled { retry_after } => {
            return write_throttled(stream, *retry_after).await;
        }
        // Nothing sensible to say in one JSON body: hang up.
        ScriptedReply::EndsEarly(_) | ScriptedReply::HangsUp(_) | ScriptedReply::Malformed => {
            return Ok(());
        }
    };
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let mut body = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    });
    if let Some(usage) = usage {
        body["usage"] = usage.clone();
    }
    write_json(stream, 200, &body).await
}

async fn write_stream(
    stream: &mut TcpStream,
    reply: &ScriptedReply,
    model: &str,
    usage: Option<&Value>,
) -> io::Result<()> {
    if let ScriptedReply::Throttled { retry_after } = reply {
        return write_throttled(stream, *retry_after).await;
    }
    if let ScriptedReply::Error { status, message } = reply {
        return write_error(stream, *status, message).await;
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    let event = |choices: Value, usage: Option<Value>| {
        let mut event = json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": choices,
        });
        if let Some(usage) = usage {
            event["usage"] = usage;
        }
        format!("data: {event}\n\n")
    };
    let asked = usage.is_some();
    let chunk = |delta: Value, finish: Option<&str>| {
        let choices = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        event(choices, asked.then_some(Value::Null))
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let text_events = |text: &str| -> Vec<String> {
        pieces(text, PIECES)
            .into_iter()
            .map(|p| chunk(json!({"content": p}), None))
            .collect()
    };
    match reply {
        ScriptedReply::Text(text) => {
            events.extend(text_events(text));
            events.push(chunk(json!({}), Some("stop")));
        }
        ScriptedReply::ToolCalls { text, calls } => {
            events.extend(text_events(text));
            for (index, call) in calls.iter().enumerate() {
                events.extend(call_events(index, call).into_iter().map(|d| chunk(d, None)));
            }
            events.push(chunk(json!({}), Some("tool_calls")));
        }
        ScriptedReply::EndsEarly(text) | ScriptedReply::HangsUp(text) => {
            let first = text_events(text).into_iter().take(PIECES - 1);
            events.extend(first);
            for event in &events {
                write_chunk(stream, event).await?;
            }
            if matches!(reply, ScriptedReply::EndsEarly(_)) {
                stream.write_all(b"0\r\n\r\n").await?;
                stream.shutdown().await?;
            }
            return Ok(());
        }
        ScriptedReply::Malformed => {
            events.extend(text_events("fine"));
            events.push("data: {\"choices\": [{\"delta\": \n\n".to_string());
        }
        ScriptedReply::Error { .. } | ScriptedReply::Throttled { .. } => {}
    }
    if let Some(usage) = usage {
        events.push(event(json!([]), Some(usage.clone())));
    }
    events.push("data: [DONE]\n\n".to_string());
    for event in &events {
        write_chunk(stream, event).await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.shutdown().await
}

/// The deltas of one call: id and name with empty arguments, then the argument fragments.
fn call_events(index: usize, call: &ScriptedCall) -> Vec<Value> {
    let mut deltas = vec![json!({"tool_calls": [{
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }]})];
    deltas.extend(pieces(&call.arguments, PIECES).into_iter().map(
        |fragment| json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
    ));
    deltas
}

/// One HTTP chunk, flushed so the client sees it now.
async fn write_chunk(stream: &mut TcpStream, data: &str) -> io::Result<()> {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    stream.write_all(framed.as_bytes()).await?;
    stream.flush().await
}

/// `text` in `n` pieces of about equal length (fewer for a short text, none if empty).
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n).max(1);
    chars.chunks(size).map(String::from_iter).collect()
}
