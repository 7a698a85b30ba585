//! A paired page's live events (`GET /api/events`): the daemon's notifications as
//! Server-Sent Events, each named after its method, until the page goes away or its device
//! is revoked. While it is open the page counts as a client of the daemon, and its
//! connection as a live stream, shed to make room only after idle connections and slow
//! bodies ([`listen`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::Event as SseEvent;
use futures::Stream;
use serde_json::json;

use crate::daemon::Shared;
use crate::daemon::conn::Local;
use crate::daemon::http::listen;
use crate::protocol::methods::{self as m, Method};
use crate::protocol::{ErrorObject, Notification};

/// Counts an open event stream as a client of the daemon while it is open.
struct Watching(Arc<Shared>);

impl Watching {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.clients.send_modify(|n| *n += 1);
        Self(Arc::clone(shared))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.clients.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// An open event stream: the daemon's events for one page, until its device is revoked.
struct Events {
    shared: Arc<Shared>,
    device: String,
    _local: Local,
    lines: tokio::sync::mpsc::Receiver<String>,
    revocations: tokio::sync::watch::Receiver<u64>,
    _watching: Watching,
    _live: listen::Streaming,
    ready: bool,
}

/// A notification line of the daemon as an SSE event named after it.
fn sse_event(line: &str) -> Option<SseEvent> {
    let note: Notification = serde_json::from_str(line).ok()?;
    Some(
        SseEvent::default()
            .event(note.method)
            .data(note.params.to_string()),
    )
}

impl Events {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        if !self.ready {
            self.ready = true;
            return Some((Ok(SseEvent::default().event("ready").data("{}")), self));
        }
        loop {
            tokio::select! {
                line = self.lines.recv() => {
                    if let Some(event) = sse_event(&line?) {
                        return Some((Ok(event), self));
                    }
                }
                Ok(()) = self.revocations.changed() => {
                    if !self.shared.web.devices.is_paired(&self.device) {
                        return None;
                    }
                }
            }
        }
    }
}

/// The events of the device `device`, subscribed to, on `connection`: a `ready` event,
/// then each notification.
pub(super) async fn open(
    shared: &Arc<Shared>,
    device: String,
    connection: &listen::Connection,
) -> Result<impl Stream<Item = Result<SseEvent, Infallible>> + use<>, ErrorObject> {
    let (local, lines) = Local::new(Arc::clone(shared));
    local.call(m::Subscribe::NAME, json!({})).await?;
    let events = Events {
        shared: Arc::clone(shared),
        device,
        _local: local,
        lines,
        revocations: shared.web.devices.revocations(),
        _watching: Watching::new(shared),
        _live: connection.streaming(),
        ready: false,
    };
    Ok(futures::stream::unfold(events, Events::next))
}
