//! One client of the hub: its lines read as JSON-RPC, each call answered on its own
//! (the answers carry their ids), the hub's own methods answered here, and, once it
//! subscribes, every kiln's events written to it as they come.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast::error::RecvError;

use super::Hub;
use super::route::{Way, way};
use crate::protocol::jsonrpc::{Incoming, parse_line};
use crate::protocol::methods::{self as m, Request};
use crate::protocol::{
    ErrorObject, HandshakeResult, Id, Notification, PROTOCOL_VERSION, Response, Topic, code,
    named_params,
};

/// The longest line the hub reads from a client.
const MAX_LINE: usize = 16 * 1024 * 1024;

type Writer = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

/// What the hub knows of one client.
struct Conn {
    hub: Arc<Hub>,
    writer: Writer,
    /// As the client named itself at its handshake.
    caller: Mutex<String>,
    events: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stop_events();
    }
}

/// Serves one client until it goes.
pub(super) async fn serve(hub: Arc<Hub>, stream: UnixStream) {
    let (read, write) = stream.into_split();
    let conn = Arc::new(Conn {
        hub,
        writer: Arc::new(tokio::sync::Mutex::new(write)),
        caller: Mutex::new("a client".into()),
        events: Mutex::default(),
    });
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE {
            let too_long = ErrorObject::invalid_request("the line is longer than the hub reads");
            write_value(&conn.writer, &json!(Response::err(Id::null(), too_long))).await;
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(&line) {
            Err(e) => {
                write_value(&conn.writer, &json!(Response::err(Id::null(), e))).await;
            }
            Ok(Incoming::Single(one)) => {
                let conn = Arc::clone(&conn);
                tokio::spawn(async move {
                    if let Some(response) = conn.one(one).await {
                        write_value(&conn.writer, &json!(response)).await;
                    }
                    conn.hub.activity.notify_one();
                });
            }
            Ok(Incoming::Batch(items)) => {
                let conn = Arc::clone(&conn);
                tokio::spawn(async move {
                    let answers = futures::future::join_all(items.into_iter().map(|r| conn.one(r)));
                    let answers: Vec<Response> = answers.await.into_iter().flatten().collect();
                    if !answers.is_empty() {
                        write_value(&conn.writer, &json!(answers)).await;
                    }
                });
            }
        }
    }
}

impl Conn {
    /// Stops writing events to this client.
    fn stop_events(&self) {
        let task = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }

    fn caller(&self) -> String {
        self.caller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One request's response; none for a notification.
    async fn one(
        &self,
        request: Result<crate::protocol::Request, (Id, ErrorObject)>,
    ) -> Option<Response> {
        let request = match request {
            Ok(request) => request,
            Err((id, e)) => return Some(Response::err(id, e)),
        };
        let id = request.id.clone();
        let answered = self.answer(&request.method, request.params).await;
        let id = id?;
        Some(match answered {
            Ok(value) => Response::ok(id, value),
            Err(e) => Response::err(id, e),
        })
    }

    async fn answer(&self, name: &str, params: Value) -> Result<Value, ErrorObject> {
        let params = named_params(name, params)?;
        let request = Request::read(name, params.clone())?;
        match way(&request, &params) {
            Way::Own => self.own(request).await,
            way => {
                let caller = self.caller();
                super::answer::answer(&self.hub.members, &caller, way, name, params).await
            }
        }
    }

    /// The methods the hub answers itself.
    async fn own(&self, request: Request) -> Result<Value, ErrorObject> {
        let value = match request {
            Request::Ping(_) => json!(m::Pong { pong: true }),
            Request::Handshake(p) => {
                if p.protocol_version != PROTOCOL_VERSION {
                    return Err(ErrorObject::new(
                        code::VERSION_MISMATCH,
                        format!(
                            "this hub speaks protocol {PROTOCOL_VERSION}, the client {}",
                            p.protocol_version
                        ),
                    )
                    .with_data(json!({"protocol_version": PROTOCOL_VERSION})));
                }
                if p.handle.is_some() {
                    return Err(ErrorObject::new(
                        code::FORBIDDEN,
                        "a session handle is used with its own kiln's daemon, not the hub",
                    ));
                }
                if let Some(client) = p.client {
                    *self.caller.lock().unwrap_or_else(PoisonError::into_inner) = client;
                }
                json!(HandshakeResult {
                    protocol_version: PROTOCOL_VERSION,
                    daemon_version: env!("CARGO_PKG_VERSION").into(),
                    pid: std::process::id(),
                    kiln: super::HUB_KILN.into(),
                    session_id: None,
                })
            }
            Request::Subscribe(p) => {
                self.follow(p.topics);
                json!(m::Subscribed { subscribed: true })
            }
            Request::Unsubscribe(_) => {
                self.stop_events();
                json!(m::Subscribed { subscribed: false })
            }
            Request::DaemonStatusOf(_) => json!(self.hub.status()),
            Request::DaemonShutdown(_) => {
                self.hub.shutdown.notify_one();
                json!(m::Stopping { stopping: true })
            }
            request @ (Request::WebPair(_)
            | Request::WebDevicesOf(_)
            | Request::WebRevoke(_)
            | Request::MatrixVerify(_)) => super::own::answer(&self.hub, request).await?,
            other => {
                return Err(ErrorObject::internal(format!(
                    "{} is not the hub's own",
                    other.method()
                )));
            }
        };
        Ok(value)
    }

    /// Writes every kiln's events of `topics` (all, when none) to this client.
    fn follow(&self, topics: Option<Vec<Topic>>) {
        let mut events = self.hub.members.subscribe();
        let writer = Arc::clone(&self.writer);
        let task = tokio::spawn(async move {
            loop {
                let note = match events.recv().await {
                    Ok(tagged) => {
                        let wanted = match (&topics, tagged.topic) {
                            (Some(topics), Some(topic)) => topics.contains(&topic),
                            _ => true,
                        };
                        if !wanted {
                            continue;
                        }
                        tagged.note
                    }
                    Err(RecvError::Lagged(missed)) => Arc::new(Notification::new(
                        "events.lagged",
                        json!({ "missed": missed }),
                    )),
                    Err(RecvError::Closed) => break,
                };
                if !write_value(&writer, &json!(*note)).await {
                    break;
                }
            }
        });
        let old = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task);
        if let Some(old) = old {
            old.abort();
        }
    }
}

/// Writes one JSON line; false once the client is gone.
async fn write_value(writer: &Writer, value: &Value) -> bool {
    let mut line = value.to_string();
    line.push('\n');
    writer.lock().await.write_all(line.as_bytes()).await.is_ok()
}
