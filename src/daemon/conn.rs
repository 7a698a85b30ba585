//! One client connection: read lines (bounded), answer requests in order, push events.
//!
//! Requests on one connection are answered in the order they arrive, except the few that
//! can take long (`inbox.wait`, `session.stop`, `session.delete`, `session.prune`), which
//! run on their own and answer when done. Inside a batch every answer stays in the
//! batch's one reply array.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{Mutex, broadcast, mpsc};
use tokio::task::JoinHandle;

mod call;
mod dispatch;
mod handle;

use super::caller::Caller;
use super::services::{Services, Shared};
use crate::protocol::jsonrpc::{Id, Incoming, parse_line};
use crate::protocol::methods as m;
use crate::protocol::*;

/// Lines waiting to be written to one client. A subscriber that stops reading fills this
/// and then misses events (it is told with `events.lagged`); requests are never dropped.
const OUTBOX: usize = 1024;

/// Which socket a connection came in through.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Socket {
    /// `daemon.sock`: the owner's TUI and commands; a handle is optional.
    Owner,
    /// `agent.sock`: agents only; the handshake must present a session handle.
    Agent,
}

struct Conn {
    services: Arc<Services>,
    shared: Arc<Shared>,
    door: Socket,
    out: mpsc::Sender<String>,
    handshaken: AtomicBool,
    /// Set when a handshake presented a handle that was refused: such a connection is
    /// not served at all (it must not fall back to the owner's access).
    refused: AtomicBool,
    /// Set when the handshake presented a session handle.
    scope: std::sync::Mutex<Option<Scope>>,
    /// Who this connection's calls come from when it holds no handle: the owner's client
    /// (named at its handshake), or, for a connection made inside the daemon, the
    /// caller it was made for.
    caller: std::sync::Mutex<Caller>,
    subscription: Mutex<Option<JoinHandle<()>>>,
}

impl Conn {
    /// A connection that has not handshaken (the owner's socket serves it all the same).
    fn new(
        services: Arc<Services>,
        shared: Arc<Shared>,
        door: Socket,
        out: mpsc::Sender<String>,
    ) -> Self {
        Conn {
            services,
            shared,
            door,
            out,
            handshaken: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            scope: std::sync::Mutex::new(None),
            caller: std::sync::Mutex::new(Caller::OWNER),
            subscription: Mutex::new(None),
        }
    }

    /// Who the next call comes from: the handle's session, or the connection's caller.
    fn caller(&self) -> Caller {
        if let Some(scope) = &*self.scope.lock().unwrap_or_else(|e| e.into_inner()) {
            return Caller::Handle {
                session_id: scope.session_id.clone(),
            };
        }
        self.caller
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A connection that presented a session handle acts for that session only.
#[derive(Clone)]
struct Scope {
    session_id: String,
    handle: Handle,
}

/// Decrements the client count however the connection (or the page) ends.
pub(crate) struct ClientGuard(Arc<Shared>);

impl ClientGuard {
    /// Counts one more client until dropped.
    pub(crate) fn count(shared: Arc<Shared>) -> Self {
        shared.clients.send_modify(|n| *n += 1);
        Self(shared)
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Serves one client of `door` (counted as a client by the accepting loop).
pub(super) async fn serve(
    stream: UnixStream,
    services: Arc<Services>,
    shared: Arc<Shared>,
    door: Socket,
) {
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

    let conn = Arc::new(Conn::new(services, shared, door, out));
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

/// A connection made inside the daemon for the web view: its calls are answered as on
/// the owner's socket (same checks, same answers), and the events it subscribes to are
/// pushed, as notification lines, to the receiver [`Local::new`] gives back. It is not a
/// client of the daemon's count: the web view decides what keeps the daemon up.
pub(crate) struct Local(Arc<Conn>);

impl Local {
    pub(crate) fn new(
        services: Arc<Services>,
        shared: Arc<Shared>,
    ) -> (Self, mpsc::Receiver<String>) {
        let (out, rx) = mpsc::channel(OUTBOX);
        let conn = Conn::new(services, shared, Socket::Owner, out);
        (Local(Arc::new(conn)), rx)
    }

    /// Answers one call.
    pub(crate) async fn call(&self, name: &str, params: Value) -> Result<Value, ErrorObject> {
        let outcome = dispatch::call(&self.0, name, params).await;
        self.0.shared.activity.notify_one();
        outcome
    }
}

/// Answers one call made inside the daemon for `caller` (a channel, the team), on a
/// connection of its own that nobody reads: its answer is the return value.
pub(crate) async fn call_inside(
    services: Arc<Services>,
    shared: Arc<Shared>,
    caller: Caller,
    name: &str,
    params: Value,
) -> Result<Value, ErrorObject> {
    let (out, _unread) = mpsc::channel(1);
    let conn = Arc::new(Conn::new(services, shared, Socket::Owner, out));
    conn.handshaken
        .store(true, std::sync::atomic::Ordering::Release);
    let outcome = dispatch::call_as(&conn, caller, name, params).await;
    conn.shared.activity.notify_one();
    outcome
}

impl Drop for Local {
    fn drop(&mut self) {
        // The subscription's task holds the connection: end it with its reader.
        if let Ok(mut task) = self.0.subscription.try_lock()
            && let Some(task) = task.take()
        {
            task.abort();
        }
    }
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
                    Ok(request) => answers.push(Answer::Now(Box::new(answer(conn, request).await))),
                    Err((id, error)) => {
                        answers.push(Answer::Now(Box::new(Some(Response::err(id, error)))))
                    }
                }
            }
            let mut replies = Vec::with_capacity(answers.len());
            for answer in answers {
                let reply = match answer {
                    Answer::Now(reply) => *reply,
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
    Now(Box<Option<Response>>),
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
        Ok(params) => dispatch::call(conn, &request.method, params).await,
        Err(error) => {
            tracing::debug!(method = %request.method, "request failed: {error}");
            Err(error)
        }
    };
    request.id.map(|id| reply(id, outcome))
}

/// Team mode: runs a call another daemon forwarded for a session this daemon runs, with
/// the owner's access, and records its answer for that daemon. Only the session methods
/// that are forwarded at all are run.
pub(super) async fn run_forwarded(
    services: Arc<Services>,
    shared: Arc<Shared>,
    command: crate::store::CommandRecord,
) {
    let outcome = if !dispatch::from_peers(&command.method) {
        Err(ErrorObject::method_not_found(&command.method))
    } else {
        match serde_json::from_str::<Value>(&command.params) {
            Err(e) => Err(ErrorObject::invalid_params(format!("bad params: {e}"))),
            Ok(params) => {
                // Its answer goes back through the database.
                let caller = Caller::Peer {
                    daemon: command.origin.clone(),
                };
                call_inside(
                    Arc::clone(&services),
                    shared,
                    caller,
                    &command.method,
                    params,
                )
                .await
            }
        }
    };
    tracing::debug!(method = %command.method, from = %command.origin, ok = outcome.is_ok(), "ran a call another daemon forwarded");
    let outcome = outcome.map_err(|e| (e.code, e.message));
    if let Err(e) = services.ledger.finish_command(&command.id, outcome).await {
        tracing::warn!(command = %command.id, "cannot record the answer to a forwarded call: {e}");
    }
}

/// Whether the table says the method is answered on its own, when done.
fn runs_apart(name: &str) -> bool {
    m::row(name).is_some_and(|row| row.order == m::Order::Apart)
}

fn reply(id: Id, outcome: Result<Value, ErrorObject>) -> Response {
    match outcome {
        Ok(result) => Response::ok(id, result),
        Err(error) => Response::err(id, error),
    }
}

/// Starts (or replaces) this connection's event forwarder.
async fn subscribe(conn: &Arc<Conn>, topics: Option<Vec<Topic>>) {
    let mut events = conn.services.ledger.subscribe();
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
