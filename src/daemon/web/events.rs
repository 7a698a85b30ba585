//! A paired page's live events (`GET /api/events`): the daemon's notifications as
//! Server-Sent Events, each named after its method, until the page goes away or its device
//! is revoked. While it is open the page counts as a client of the daemon, and its
//! connection as a live stream, shed to make room only after idle connections and slow
//! bodies ([`listen`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::Event as SseEvent;
use futures::Stream;

use super::state::WebState;
use crate::daemon::door::{Door, Held, Lines};
use crate::daemon::http::listen;
use crate::protocol::{ErrorObject, Notification};

/// An open event stream: the daemon's events for one page, until its device is revoked.
struct Events {
    state: Arc<WebState>,
    device: String,
    lines: Lines,
    revocations: tokio::sync::watch::Receiver<u64>,
    /// Counts the open stream as a client of the daemon while it is open.
    _watching: Option<Held>,
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
                line = self.lines.lines.recv() => {
                    if let Some(event) = sse_event(&line?) {
                        return Some((Ok(event), self));
                    }
                }
                Ok(()) = self.revocations.changed() => {
                    if !self.state.devices.is_paired(&self.device) {
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
    door: &Door,
    state: &Arc<WebState>,
    device: String,
    connection: &listen::Connection,
) -> Result<impl Stream<Item = Result<SseEvent, Infallible>> + use<>, ErrorObject> {
    let lines = door.lines().await?;
    let events = Events {
        state: Arc::clone(state),
        device,
        lines,
        revocations: state.devices.revocations(),
        _watching: door.client(),
        _live: connection.streaming(),
        ready: false,
    };
    Ok(futures::stream::unfold(events, Events::next))
}
