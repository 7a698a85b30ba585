//! One client connection: read lines (bounded), answer requests in order, push events.
//!
//! Requests on one connection are answered in the order they arrive, except the few that
//! can take long (`inbox.wait`, `session.stop`, `session.delete`, `session.prune`), which
//! run on their own and answer when done. Inside a batch every answer stays in the
//! batch's one reply array.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{Mutex, broadcast, mpsc};
use tokio::task::JoinHandle;

use super::Shared;
use crate::protocol::jsonrpc::{Id, Incoming, parse_line};
use crate::protocol::*;
use crate::sessions::ContextRequest;
use crate::workbench::WorkbenchError;

/// Lines waiting to be written to one client. A subscriber that stops reading fills this
/// and then misses events (it is told with `events.lagged`); requests are never dropped.
const OUTBOX: usize = 1024;

/// Which socket a connection came in through.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Door {
    /// `daemon.sock`: the owner's TUI and commands; a handle is optional.
    Owner,
    /// `agent.sock`: agents only; the handshake must present a session handle.
    Agent,
}

struct Conn {
    shared: Arc<Shared>,
    door: Door,
    out: mpsc::Sender<String>,
    handshaken: AtomicBool,
    /// Set when a handshake presented a handle that was refused: such a connection is
    /// not served at all (it must not fall back to the owner's access).
    refused: AtomicBool,
    /// Set when the handshake presented a session handle.
    scope: std::sync::Mutex<Option<Scope>>,
    subscription: Mutex<Option<JoinHandle<()>>>,
}

/// A connection that presented a session handle acts for that session only.
#[derive(Clone)]
struct Scope {
    session_id: String,
    handle: Handle,
}

/// Decrements the client count however the connection ends.
struct ClientGuard(Arc<Shared>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.send_modify(|n| *n = n.saturating_sub(1));
    }
}

pub(super) async fn serve(stream: UnixStream, shared: Arc<Shared>, door: Door) {
    let _guard = ClientGuard(Arc::clone(&shared));
    let (read, write) = stream.into_split();
    let (out, out_rx) = mpsc::channel(OUTBOX);
    let writer = tokio::spawn(write_loop(write, out_rx));

    let peer = read.as_ref().peer_cred();
    let own_uid = crate::sys::current_uid();
    if !matches!(&peer, Ok(cred) if cred.uid() == own_uid) {
        tracing::warn!(?peer, "refused a connection from another user");
        let error = ErrorObject::new(
            code::FORBIDDEN,
            "this daemon serves only its owner's user id",
        );
        let _ = out.send(line(&Response::err(Id::null(), error))).await;
        drop(out);
        let _ = writer.await;
        return;
    }

    let conn = Arc::new(Conn {
        shared,
        door,
        out,
        handshaken: AtomicBool::new(false),
        refused: AtomicBool::new(false),
        scope: std::sync::Mutex::new(None),
        subscription: Mutex::new(None),
    });
    let mut reader = BufReader::new(read);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut reader, &mut buf, MAX_LINE_BYTES).await {
            Ok(ReadLine::Line) => {
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let reply = handle_line(&conn, &buf).await;
                conn.shared.activity.notify_one();
                if let Some(reply) = reply
                    && conn.out.send(reply).await.is_err()
                {
                    break;
                }
            }
            Ok(ReadLine::TooLong) => {
                let error = ErrorObject::invalid_request(format!(
                    "request line longer than the {MAX_LINE_BYTES}-byte limit; it was discarded"
                ));
                if conn
                    .out
                    .send(line(&Response::err(Id::null(), error)))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Ok(ReadLine::Eof) => break,
            Err(e) => {
                tracing::debug!("client read failed: {e}");
                break;
            }
        }
    }
    if let Some(task) = conn.subscription.lock().await.take() {
        task.abort();
    }
    drop(conn);
    let _ = writer.await;
}

enum ReadLine {
    Line,
    TooLong,
    Eof,
}

/// Reads up to the next newline into `buf` without ever holding more than `max` bytes:
/// a longer line is skipped to its end and reported as `TooLong`.
async fn read_line(
    reader: &mut BufReader<OwnedReadHalf>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<ReadLine> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => ReadLine::TooLong,
                (false, true) => ReadLine::Eof,
                (false, false) => ReadLine::Line,
            });
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(available.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(if too_long {
                ReadLine::TooLong
            } else {
                ReadLine::Line
            });
        }
    }
}

async fn write_loop(write: tokio::net::unix::OwnedWriteHalf, mut rx: mpsc::Receiver<String>) {
    let mut writer = BufWriter::new(write);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(text) = next {
            if writer.write_all(text.as_bytes()).await.is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

fn line<T: serde::Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"cannot encode reply: {e}"}}}}"#)
    });
    text.push('\n');
    text
}

/// Answers one line: a request, a notification or a batch. `None` when nothing is owed.
async fn handle_line(conn: &Arc<Conn>, bytes: &[u8]) -> Option<String> {
    match parse_line(bytes) {
        Err(error) => Some(line(&Response::err(Id::null(), error))),
        Ok(Incoming::Single(item)) => handle_item(conn, item).await.map(|r| line(&r)),
        Ok(Incoming::Batch(items)) => {
            // In order, except that the long-running calls run beside the rest; every
            // answer goes into the one reply array, in the batch's order.
            let mut answers = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Ok(request) if runs_apart(&request.method) => {
                        let conn = Arc::clone(conn);
                        answers.push(Answer::Later(tokio::spawn(async move {
                            answer(&conn, request).await
                        })));
                    }
                    Ok(request) => answers.push(Answer::Now(answer(conn, request).await)),
                    Err((id, error)) => answers.push(Answer::Now(Some(Response::err(id, error)))),
                }
            }
            let mut replies = Vec::with_capacity(answers.len());
            for answer in answers {
                let reply = match answer {
                    Answer::Now(reply) => reply,
                    Answer::Later(task) => task.await.unwrap_or_else(|e| {
                        Some(Response::err(
                            Id::null(),
                            ErrorObject::internal(format!("the call failed: {e}")),
                        ))
                    }),
                };
                replies.extend(reply);
            }
            (!replies.is_empty()).then(|| line(&replies))
        }
    }
}

enum Answer {
    Now(Option<Response>),
    Later(JoinHandle<Option<Response>>),
}

async fn handle_item(
    conn: &Arc<Conn>,
    item: Result<Request, (Id, ErrorObject)>,
) -> Option<Response> {
    let request = match item {
        Ok(request) => request,
        Err((id, error)) => return Some(Response::err(id, error)),
    };
    if runs_apart(&request.method) && request.id.is_some() {
        // Answered when the human answers, or when an agent has ended: must not hold up
        // the rest of the connection.
        let conn = Arc::clone(conn);
        tokio::spawn(async move {
            if let Some(reply) = answer(&conn, request).await {
                let _ = conn.out.send(line(&reply)).await;
            }
        });
        return None;
    }
    answer(conn, request).await
}

/// Runs one request; the response when one is owed (not for notifications).
async fn answer(conn: &Arc<Conn>, request: Request) -> Option<Response> {
    let outcome = match named_params(&request.method, request.params) {
        Ok(params) => call(conn, &request.method, params).await,
        Err(error) => Err(error),
    };
    if let Err(error) = &outcome {
        tracing::debug!(method = %request.method, "request failed: {error}");
    }
    request.id.map(|id| reply(id, outcome))
}

/// Methods that may take long and are answered out of order.
fn runs_apart(name: &str) -> bool {
    matches!(
        name,
        method::INBOX_WAIT | method::SESSION_STOP | method::SESSION_DELETE | method::SESSION_PRUNE
    )
}

fn reply(id: Id, outcome: Result<Value, ErrorObject>) -> Response {
    match outcome {
        Ok(result) => Response::ok(id, result),
        Err(error) => Response::err(id, error),
    }
}

fn params<T: DeserializeOwned>(value: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(value)
        .map_err(|e| ErrorObject::invalid_params(format!("bad params: {e}")))
}

fn app_error(e: WorkbenchError) -> ErrorObject {
    let code = match &e {
        WorkbenchError::NotFound(_) => code::NOT_FOUND,
        WorkbenchError::Invalid(_) => code::INVALID_PARAMS,
        WorkbenchError::Conflict(_) => code::CONFLICT,
        WorkbenchError::TimedOut(_) => code::TIMED_OUT,
        WorkbenchError::Store(_) => code::STORE_ERROR,
    };
    ErrorObject::new(code, e.to_string())
}

fn to_value<T: serde::Serialize>(value: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(value).map_err(|e| ErrorObject::internal(e.to_string()))
}

async fn call(conn: &Arc<Conn>, name: &str, raw: Value) -> Result<Value, ErrorObject> {
    let shared = &conn.shared;
    let wb = &shared.wb;
    if name == method::PING {
        return Ok(json!({"pong": true}));
    }
    if name == method::HANDSHAKE {
        if conn.handshaken.load(Ordering::Acquire) {
            return Err(ErrorObject::invalid_request(
                "this connection has already made its handshake; open a new connection for another",
            ));
        }
        let p: HandshakeParams = params(raw)?;
        if p.protocol_version != PROTOCOL_VERSION {
            return Err(ErrorObject::new(
                code::VERSION_MISMATCH,
                format!(
                    "this daemon speaks protocol {PROTOCOL_VERSION}, the client {}",
                    p.protocol_version
                ),
            )
            .with_data(json!({"protocol_version": PROTOCOL_VERSION, "daemon_version": env!("CARGO_PKG_VERSION")})));
        }
        let scope = match p.handle.as_deref() {
            None if conn.door == Door::Agent => return Err(agent_door()),
            None => None,
            Some(text) => {
                let found = Handle::parse(text)
                    .and_then(|handle| Some((wb.session_for_handle(&handle)?, handle)));
                let Some((session_id, handle)) = found else {
                    conn.refused.store(true, Ordering::Release);
                    return Err(ErrorObject::new(
                        code::FORBIDDEN,
                        "unknown or revoked session handle",
                    ));
                };
                Some(Scope { session_id, handle })
            }
        };
        let session_id = scope.as_ref().map(|s| s.session_id.clone());
        *conn.scope.lock().unwrap_or_else(|e| e.into_inner()) = scope;
        conn.handshaken.store(true, Ordering::Release);
        return to_value(HandshakeResult {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            kiln: wb.kiln().root().display().to_string(),
            session_id,
        });
    }
    if conn.refused.load(Ordering::Acquire) {
        return Err(ErrorObject::new(
            code::FORBIDDEN,
            "this connection presented an unknown or revoked session handle; it is not served",
        ));
    }
    // The handshake is optional on the owner's socket: a client that never makes one
    // (seed 003's protocol has none) is served as protocol 1 with the owner's access.
    if !conn.handshaken.load(Ordering::Acquire) && conn.door == Door::Agent {
        return Err(agent_door());
    }
    let scope = conn.scope.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(scope) = scope {
        return scoped_call(shared, &scope, name, raw).await;
    }
    match name {
        method::SESSION_REGISTER => {
            let (session, handle) = wb.register(params(raw)?).await.map_err(app_error)?;
            Ok(json!({"session_id": session.id, "session": session, "handle": handle.expose()}))
        }
        method::SESSION_LIST => Ok(json!({"sessions": wb.list_sessions()})),
        method::SESSION_GET => {
            let p: SessionIdParams = params(raw)?;
            let session = wb.session_or_record(&p.session_id).map_err(app_error)?;
            Ok(json!({ "session": session }))
        }
        method::SESSION_HEARTBEAT => {
            let p: SessionIdParams = params(raw)?;
            wb.heartbeat(&p.session_id).map_err(app_error)?;
            Ok(json!({"ok": true}))
        }
        method::SESSION_DEREGISTER => {
            let p: DeregisterParams = params(raw)?;
            let reason = p.reason.as_deref().unwrap_or("deregistered");
            wb.deregister(&p.session_id, reason, p.exit_code)
                .await
                .map_err(app_error)?;
            Ok(json!({"ok": true}))
        }
        method::SESSION_CREATE => {
            let session = shared
                .sessions
                .create(params(raw)?)
                .await
                .map_err(app_error)?;
            Ok(json!({"session_id": session.id, "session": session}))
        }
        method::SESSION_PROMPT => {
            let p: PromptParams = params(raw)?;
            let queued = shared
                .sessions
                .prompt(&p.session_id, p.text)
                .await
                .map_err(app_error)?;
            to_value(PromptResult { queued })
        }
        method::SESSION_CANCEL => {
            let p: SessionIdParams = params(raw)?;
            shared
                .sessions
                .cancel(&p.session_id)
                .await
                .map_err(app_error)?;
            Ok(json!({"ok": true}))
        }
        method::SESSION_STOP => {
            let p: SessionIdParams = params(raw)?;
            let session = shared
                .sessions
                .stop(&p.session_id)
                .await
                .map_err(app_error)?;
            Ok(json!({"session": session}))
        }
        method::SESSION_DELETE => {
            let p: DeleteSessionParams = params(raw)?;
            to_value(
                shared
                    .sessions
                    .delete(&p.session_id, &p.options)
                    .await
                    .map_err(app_error)?,
            )
        }
        method::SESSION_PRUNE => {
            let p: RemoveOptions = params(raw)?;
            to_value(shared.sessions.prune(&p).await.map_err(app_error)?)
        }
        method::SESSION_TRANSCRIPT => {
            let p: TranscriptParams = params(raw)?;
            Ok(json!({"entries": wb.transcript(&p).await.map_err(app_error)?}))
        }
        method::INBOX_SEND => {
            let message = wb.send(params(raw)?).await.map_err(app_error)?;
            Ok(json!({"id": message.id, "message": message}))
        }
        method::CONTEXT_GET
        | method::CONTEXT_POP
        | method::CONTEXT_CHECKPOINT
        | method::CONTEXT_ROLLBACK
        | method::CONTEXT_REPLACE_TOP
        | method::CONTEXT_RESET
        | method::CONTEXT_SUMMARIZE => {
            let (session_id, request) = context_request(name, raw)?;
            to_value(
                shared
                    .sessions
                    .context_call(&session_id, request)
                    .await
                    .map_err(app_error)?,
            )
        }
        method::INBOX_LIST => {
            let p: ListParams = params(raw)?;
            Ok(json!({"messages": wb.list_messages(&p).await.map_err(app_error)?}))
        }
        method::INBOX_GET => {
            let p: IdParams = params(raw)?;
            Ok(json!({"message": wb.get_message(&p.id).await.map_err(app_error)?}))
        }
        method::INBOX_MARK_READ => {
            let p: IdsParams = params(raw)?;
            Ok(json!({"updated": wb.mark_read(&p.ids).await.map_err(app_error)?}))
        }
        method::INBOX_RESPOND => {
            let p: RespondParams = params(raw)?;
            Ok(json!({"message": wb.respond(&p.id, &p.response).await.map_err(app_error)?}))
        }
        method::INBOX_WAIT => {
            let p: WaitParams = params(raw)?;
            let timeout = p.timeout_secs.map(Duration::from_secs);
            Ok(json!({"message": wb.wait_for_answer(&p.id, timeout).await.map_err(app_error)?}))
        }
        method::INBOX_CLEAR => Ok(json!({"deleted": wb.clear().await.map_err(app_error)?.len()})),
        method::DB_QUERY => {
            let p: QueryParams = params(raw)?;
            let bindings = Value::Object(p.bindings.unwrap_or_default());
            Ok(json!({"result": wb.query(&p.sql, bindings).await.map_err(app_error)?}))
        }
        method::SUBSCRIBE => {
            let p: SubscribeParams = params(raw)?;
            subscribe(conn, p.topics).await;
            Ok(json!({"subscribed": true}))
        }
        method::UNSUBSCRIBE => {
            if let Some(task) = conn.subscription.lock().await.take() {
                task.abort();
            }
            Ok(json!({"subscribed": false}))
        }
        method::DAEMON_STATUS => {
            let unread = wb.unread_count().await.map_err(app_error)?;
            let clients = *shared.clients.borrow();
            to_value(DaemonStatus {
                pid: std::process::id(),
                daemon_version: env!("CARGO_PKG_VERSION").into(),
                protocol_version: PROTOCOL_VERSION,
                kiln: wb.kiln().root().display().to_string(),
                database: wb.store().url().to_string(),
                uptime_secs: shared.started.elapsed().as_secs(),
                clients,
                sessions: wb.session_count(),
                agents: *shared.sessions.running().borrow(),
                unread,
            })
        }
        method::DAEMON_SHUTDOWN => {
            shared.shutdown.notify_one();
            Ok(json!({"stopping": true}))
        }
        other => Err(ErrorObject::method_not_found(other)),
    }
}

fn agent_door() -> ErrorObject {
    ErrorObject::new(
        code::FORBIDDEN,
        "this socket serves agents only: handshake with your session handle first",
    )
}

/// The session and the operation of a `context.*` call.
fn context_request(name: &str, raw: Value) -> Result<(String, ContextRequest), ErrorObject> {
    Ok(match name {
        method::CONTEXT_POP => {
            let p: ContextPopParams = params(raw)?;
            (p.session_id, ContextRequest::Pop(p.n))
        }
        method::CONTEXT_CHECKPOINT => {
            let p: ContextNameParams = params(raw)?;
            (p.session_id, ContextRequest::Checkpoint(p.name))
        }
        method::CONTEXT_ROLLBACK => {
            let p: ContextNameParams = params(raw)?;
            (p.session_id, ContextRequest::Rollback(p.name))
        }
        method::CONTEXT_REPLACE_TOP => {
            let p: ContextReplaceParams = params(raw)?;
            (p.session_id, ContextRequest::ReplaceTop(p.summary))
        }
        other => {
            let p: SessionIdParams = params(raw)?;
            let request = match other {
                method::CONTEXT_RESET => ContextRequest::Reset,
                method::CONTEXT_SUMMARIZE => ContextRequest::Summarize,
                _ => ContextRequest::Get,
            };
            (p.session_id, request)
        }
    })
}

fn forbidden(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::FORBIDDEN, message)
}

/// What a connection holding a session handle may do (seed 002): send messages for its
/// own session and wait for their answers, heartbeat, and read its own session. Nothing
/// else, and nothing at all once the handle is revoked.
async fn scoped_call(
    shared: &Shared,
    scope: &Scope,
    name: &str,
    raw: Value,
) -> Result<Value, ErrorObject> {
    let wb = &shared.wb;
    if wb.session_for_handle(&scope.handle).as_deref() != Some(scope.session_id.as_str()) {
        return Err(forbidden("the session handle was revoked"));
    }
    let own = scope.session_id.as_str();
    let own_session = |raw: &Value| -> Result<(), ErrorObject> {
        match raw.get("session_id").and_then(Value::as_str) {
            None => Err(ErrorObject::invalid_params("session_id is required")),
            Some(id) if id == own => Ok(()),
            Some(_) => Err(forbidden(
                "a session handle may act only for its own session",
            )),
        }
    };
    match name {
        method::SESSION_GET => {
            own_session(&raw)?;
            Ok(json!({"session": wb.get_session(own).map_err(app_error)?}))
        }
        method::SESSION_HEARTBEAT => {
            own_session(&raw)?;
            wb.heartbeat(own).map_err(app_error)?;
            Ok(json!({"ok": true}))
        }
        method::INBOX_SEND => {
            let mut raw = raw;
            if let Some(map) = raw.as_object_mut() {
                map.entry("session_id")
                    .or_insert_with(|| Value::String(own.to_string()));
            }
            own_session(&raw)?;
            let message = wb.send(params(raw)?).await.map_err(app_error)?;
            Ok(json!({"id": message.id, "message": message}))
        }
        method::INBOX_GET | method::INBOX_WAIT => {
            let p: WaitParams = params(raw)?;
            let message = wb.get_message(&p.id).await.map_err(app_error)?;
            if message.session_id != own {
                // As if it did not exist: a handle learns nothing of other sessions.
                return Err(app_error(crate::workbench::no_message(&p.id)));
            }
            if name == method::INBOX_GET {
                return Ok(json!({"message": message}));
            }
            let timeout = p.timeout_secs.map(Duration::from_secs);
            Ok(json!({"message": wb.wait_for_answer(&p.id, timeout).await.map_err(app_error)?}))
        }
        method::INBOX_RESPOND => Err(forbidden(
            "an agent may not answer inbox messages: answers come from a human",
        )),
        method::DB_QUERY => Err(forbidden("a session handle may not query the database")),
        method::SESSION_LIST => Err(forbidden(
            "a session handle may not list other sessions; use session.get for its own",
        )),
        other if method::ALL.contains(&other) => {
            Err(forbidden(format!("a session handle may not call {other}")))
        }
        other => Err(ErrorObject::method_not_found(other)),
    }
}

/// Starts (or replaces) this connection's event forwarder.
async fn subscribe(conn: &Arc<Conn>, topics: Option<Vec<Topic>>) {
    let mut events = conn.shared.wb.subscribe();
    let out = conn.out.clone();
    let task = tokio::spawn(async move {
        loop {
            let note = match events.recv().await {
                Ok(event) => {
                    if topics.as_ref().is_some_and(|t| !t.contains(&event.topic())) {
                        continue;
                    }
                    Notification::new(event.method(), event.params())
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    Notification::new("events.lagged", json!({"missed": missed}))
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if out.send(line(&note)).await.is_err() {
                return;
            }
        }
    });
    if let Some(old) = conn.subscription.lock().await.replace(task) {
        old.abort();
    }
}
