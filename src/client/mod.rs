//! Talking to the daemon: connect, handshake, typed calls and event subscription, and the
//! seed-003 auto-start (probe the socket; if nobody answers, start a daemon under a
//! start-up lock and wait until it answers).

pub mod agent;
mod answering;
mod env;
mod hub;
mod open;
mod spawn;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::kiln::Kiln;
use crate::protocol::jsonrpc::request_line;
use crate::protocol::methods::{self, Method};
use crate::protocol::{
    ErrorObject, Handle, HandshakeParams, HandshakeResult, Notification, PROTOCOL_VERSION,
    SubscribeParams, Topic, code,
};

pub use answering::{Answering, PATIENCE};
pub use hub::{HubPlace, connect_hub, connect_or_start_hub};
pub use open::{Opened, open};
pub use spawn::{StartOptions, connect_or_start, stop_daemon};

/// How long a daemon may take to answer the handshake before it counts as hung.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{}", connect_words(path, source))]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("the daemon did not answer within {0:?}")]
    Timeout(Duration),
    /// The daemon's process is stopped by a signal; `sent` when the call was written to
    /// it (the daemon may still carry it out once it is continued).
    #[error(
        "the daemon (pid {pid}) is stopped (suspended); `kill -CONT {pid}` resumes it{}",
        if *sent { " (what was sent may still be carried out then)" } else { "" }
    )]
    Suspended { pid: u32, sent: bool },
    #[error("the daemon speaks protocol {daemon}, this client {client}")]
    VersionMismatch { daemon: u32, client: u32 },
    #[error("the connection to the daemon closed")]
    Closed,
    #[error("{0}")]
    Rpc(ErrorObject),
    #[error("unexpected reply from the daemon: {0}")]
    Decode(String),
    #[error("could not start the daemon: {0}")]
    Start(String),
    #[error("could not stop the daemon: {0}")]
    Stop(String),
    /// Refused before anything was sent.
    #[error("{0}")]
    Local(String),
}

/// Why the daemon's socket could not be reached, in words: a socket of another user's
/// daemon (or a folder the person may not enter) is said as such, not as a bare
/// "Permission denied".
fn connect_words(path: &str, source: &std::io::Error) -> String {
    match source.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "the daemon's socket {path} is not yours to use (another user's daemon, or a folder you may not enter): \
             run cru as the kiln's owner, or work in a kiln of your own"
        ),
        _ => format!("no daemon is listening at {path}: {source}"),
    }
}

impl ClientError {
    /// Whether the daemon's socket is another user's (the person may not connect).
    pub fn is_not_ours(&self) -> bool {
        matches!(self, Self::Connect { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// The error in words for a person: the daemon's message without its JSON-RPC code
    /// (the CLI's `--json` output and [`rpc_code`](Self::rpc_code) keep the code).
    pub fn words(&self) -> String {
        match self {
            ClientError::Rpc(e) => e.message.clone(),
            other => other.to_string(),
        }
    }

    /// The JSON-RPC error code, if the daemon answered with an error.
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            ClientError::Rpc(e) => Some(e.code),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// A daemon's answer as read: its result kept as the JSON text it came in, decoded once,
/// by the caller, into what it asked for (no intermediate tree of values).
pub(crate) type Answer = std::result::Result<Box<RawValue>, ErrorObject>;

type Pending = std::sync::Mutex<HashMap<u64, oneshot::Sender<Answer>>>;

/// A handshaken connection to a daemon. Cheap to share behind an `Arc`; calls may be made
/// concurrently.
pub struct Client {
    writer: tokio::sync::Mutex<Box<dyn tokio::io::AsyncWrite + Send + Unpin>>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    notifications: std::sync::Mutex<Option<mpsc::UnboundedReceiver<Notification>>>,
    daemon: HandshakeResult,
    reader: tokio::task::JoinHandle<()>,
    /// The process at the other end of the socket, when the system says.
    peer: Option<u32>,
    answering: Arc<watch::Sender<Answering>>,
    /// The process the connection runs through (`ssh … cru daemon bridge`), ended with it.
    _through: Option<std::sync::Mutex<tokio::process::Child>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// What this process calls itself at the handshake (`workbench`, `cru inbox respond`):
/// the daemon records it as who answered a question.
static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names this process's connections, once, before the first.
pub fn name_this_client(name: String) {
    let _ = NAME.set(name);
}

fn client_name() -> String {
    NAME.get()
        .cloned()
        .unwrap_or_else(|| format!("cru/{}", env!("CARGO_PKG_VERSION")))
}

impl Client {
    /// Connects to the kiln's daemon, if one answers, and performs the handshake.
    pub async fn connect(kiln: &Kiln) -> Result<Self> {
        Self::connect_at(&kiln.socket_path(), None).await
    }

    /// Connects to the daemon at `path`; with a session handle, the connection acts for
    /// that session only.
    pub async fn connect_at(path: &std::path::Path, handle: Option<&Handle>) -> Result<Self> {
        Self::connect_named(path, handle, client_name()).await
    }

    /// Connects like [`connect_at`](Self::connect_at), naming itself `name` at the
    /// handshake: the hub names each connection after the client it acts for.
    pub async fn connect_named(
        path: &std::path::Path,
        handle: Option<&Handle>,
        name: String,
    ) -> Result<Self> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.display().to_string(),
                source,
            })?;
        let peer = stream
            .peer_cred()
            .ok()
            .and_then(|cred| cred.pid())
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|&pid| pid > 0);
        let (read, writer) = stream.into_split();
        Self::handshaken(Box::new(read), Box::new(writer), peer, None, handle, name).await
    }

    /// Connects through `process`, a program that relays a daemon's socket over its
    /// standard input and output (`ssh HOST cru daemon bridge`); the process ends with
    /// the connection.
    pub async fn through_process(mut process: tokio::process::Child, name: String) -> Result<Self> {
        let (Some(read), Some(write)) = (process.stdout.take(), process.stdin.take()) else {
            return Err(ClientError::Local(
                "the relaying process has no standard input and output".into(),
            ));
        };
        let through = Some(std::sync::Mutex::new(process));
        Self::handshaken(Box::new(read), Box::new(write), None, through, None, name).await
    }

    async fn handshaken(
        read: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
        writer: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
        peer: Option<u32>,
        through: Option<std::sync::Mutex<tokio::process::Child>>,
        handle: Option<&Handle>,
        name: String,
    ) -> Result<Self> {
        let pending: Arc<Pending> = Arc::default();
        let (note_tx, note_rx) = mpsc::unbounded_channel();
        let answering = Arc::new(watch::Sender::new(Answering::Yes));
        let reader = tokio::spawn(read_loop(
            BufReader::new(read),
            Arc::clone(&pending),
            note_tx,
            Arc::clone(&answering),
        ));
        let mut client = Client {
            writer: tokio::sync::Mutex::new(writer),
            pending,
            next_id: AtomicU64::new(1),
            notifications: std::sync::Mutex::new(Some(note_rx)),
            daemon: HandshakeResult {
                protocol_version: 0,
                daemon_version: String::new(),
                pid: 0,
                kiln: String::new(),
                session_id: None,
            },
            reader,
            peer,
            answering,
            _through: through,
        };
        let hello = HandshakeParams {
            protocol_version: PROTOCOL_VERSION,
            client: Some(name),
            handle: handle.map(|h| h.expose().to_string()),
        };
        let answer =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, client.call::<methods::Handshake>(&hello))
                .await
                .map_err(|_| ClientError::Timeout(HANDSHAKE_TIMEOUT))?;
        client.daemon = match answer {
            Ok(result) => result,
            Err(ClientError::Rpc(e)) if e.code == code::VERSION_MISMATCH => {
                let daemon = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("protocol_version"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0) as u32;
                return Err(ClientError::VersionMismatch {
                    daemon,
                    client: PROTOCOL_VERSION,
                });
            }
            Err(e) => return Err(e),
        };
        Ok(client)
    }

    /// What the daemon said about itself in the handshake.
    pub fn daemon(&self) -> &HandshakeResult {
        &self.daemon
    }

    /// Calls a method with JSON params. `session.create` also carries this process's
    /// `PATH` and the values of the variables the session asks for (see [`env`]).
    pub async fn call_value(&self, name: &str, params: Value) -> Result<Value> {
        let raw = self
            .exchange(name, params, answering::Wait::Bounded)
            .await?;
        serde_json::from_str(raw.get()).map_err(|e| ClientError::Decode(format!("{name}: {e}")))
    }

    /// Calls a method with JSON params; its result as the JSON text it came in.
    pub async fn call_raw(&self, name: &str, params: Value) -> Result<Box<RawValue>> {
        self.exchange(name, params, answering::Wait::Bounded).await
    }

    async fn exchange(
        &self,
        name: &str,
        mut params: Value,
        wait: answering::Wait,
    ) -> Result<Box<RawValue>> {
        if name == methods::SessionCreate::NAME {
            env::attach(&mut params, &self.daemon.kiln);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(id, tx);
        let text = request_line(id, name, &params);
        let written = {
            let mut writer = self.writer.lock().await;
            writer.write_all(text.as_bytes()).await
        };
        if written.is_err() {
            self.lock_pending().remove(&id);
            return Err(ClientError::Closed);
        }
        self.answer(rx, name, wait).await?.map_err(ClientError::Rpc)
    }

    /// Calls a method of the table with its params; its typed result.
    pub async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result> {
        let params =
            serde_json::to_value(params).map_err(|e| ClientError::Decode(e.to_string()))?;
        let raw = self.call_raw(M::NAME, params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Decode(format!("{}: {e}", M::NAME)))
    }

    /// Sends a request of the table, whichever method it is; the answer is read as its
    /// row's result.
    pub async fn send(&self, request: &methods::Request) -> Result<methods::Reply> {
        self.send_waiting(request, answering::Wait::Bounded).await
    }

    /// Sends a request like [`send`](Self::send), waiting through a stopped daemon for
    /// its answer (the [`answering`](Self::answering) watchers are told meanwhile): for
    /// a screen that stays up and says so, where a command would end.
    pub async fn send_through(&self, request: &methods::Request) -> Result<methods::Reply> {
        self.send_waiting(request, answering::Wait::Through).await
    }

    async fn send_waiting(
        &self,
        request: &methods::Request,
        wait: answering::Wait,
    ) -> Result<methods::Reply> {
        let name = request.method();
        let params = request
            .params()
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        let raw = self.exchange(name, params, wait).await?;
        request
            .reply(&raw)
            .map_err(|e| ClientError::Decode(format!("{name}: {e}")))
    }

    /// Subscribes to change events, as raw notifications: `Event::from_notification`
    /// turns them into events; `events.lagged` says some were missed. Once per client.
    pub async fn subscribe(
        &self,
        topics: Option<Vec<Topic>>,
    ) -> Result<mpsc::UnboundedReceiver<Notification>> {
        let rx = self
            .notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| ClientError::Decode("already subscribed".into()))?;
        self.call::<methods::Subscribe>(&SubscribeParams { topics })
            .await?;
        Ok(rx)
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The most a connection's line buffer keeps between frames.
const KEPT_LINE_BYTES: usize = 64 * 1024;

/// One JSON-RPC frame from the daemon: a notification (`method`, `params`) or an answer
/// (`id` with `result` or `error`, the result kept as text).
#[derive(serde::Deserialize)]
struct Frame {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Value,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

async fn read_loop(
    mut reader: BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
    pending: Arc<Pending>,
    notes: mpsc::UnboundedSender<Notification>,
    answering: Arc<watch::Sender<Answering>>,
) {
    let mut line = String::new();
    loop {
        // A long answer (a list) is not kept as the buffer of an idle connection.
        if line.capacity() > KEPT_LINE_BYTES {
            line = String::new();
        }
        line.clear();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        answering::heard(&answering);
        let frames = if line.trim_start().starts_with('[') {
            serde_json::from_str::<Vec<Frame>>(&line)
        } else {
            serde_json::from_str::<Frame>(&line).map(|frame| vec![frame])
        };
        let Ok(frames) = frames else {
            tracing::warn!("unreadable line from the daemon");
            continue;
        };
        for frame in frames {
            let Frame {
                id,
                method,
                params,
                result,
                error,
            } = frame;
            let id = id.filter(|id| !id.is_null());
            if let (Some(method), None) = (method, &id) {
                let _ = notes.send(Notification::new(method, params));
                continue;
            }
            let Some(id) = id.as_ref().and_then(Value::as_u64) else {
                tracing::warn!(error = ?error, "daemon error without a request id");
                continue;
            };
            let answer = match (error, result) {
                (Some(error), _) => Err(error),
                (None, Some(result)) => Ok(result),
                // No result at all reads as JSON null.
                (None, None) => match RawValue::from_string("null".into()) {
                    Ok(null) => Ok(null),
                    Err(_) => continue,
                },
            };
            let waiter = pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            if let Some(waiter) = waiter {
                let _ = waiter.send(answer);
            }
        }
    }
    // Dropping the waiters tells every caller the connection closed.
    pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_users_socket_is_said_as_such() {
        let theirs = ClientError::Connect {
            path: "/home/bob/kiln/.crucible/daemon.sock".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(theirs.is_not_ours());
        let said = theirs.to_string();
        assert!(said.contains("not yours to use"), "{said}");
        assert!(!said.contains("os error"), "{said}");
        let none = ClientError::Connect {
            path: "/k/.crucible/daemon.sock".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(!none.is_not_ours());
        assert!(
            none.to_string()
                .starts_with("no daemon is listening at /k/")
        );
    }
}
