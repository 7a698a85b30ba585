//! The connections of the webhook listener and the web view, served so that slow or idle
//! clients cannot starve the daemon. At most [`connection_cap`] connections are open at
//! once, a share of the descriptor limit well below it, so the socket's clients, the
//! agents and the database keep theirs. A client has [`HEADER_TIMEOUT`] to send a
//! request's headers (and as long between requests of a kept-alive connection), and a
//! handler reads a body under [`body::BODY_TIMEOUT`](super::body::BODY_TIMEOUT).
//!
//! When the cap is reached, one connection is shed to make room, the oldest of the first
//! kind there is: one idle (no request in progress), one whose request's body is still
//! arriving, one carrying a paired device's live stream ([`Connection::streaming`]). So
//! neither a flood of idle connections nor one of half-sent bodies keeps a real delivery
//! or a paired phone out, and an open page is the last to lose its events. Only when
//! every open connection is answering a request is a new one answered 503 and closed.
//! Refusals are logged through [`Quiet`], a line at most every few seconds.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Notify;

use super::error;
use super::quiet::Quiet;

/// How long a client has to send a request's headers, or to start the next request.
pub(in crate::daemon) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long accepting pauses after the system refused a connection (out of descriptors).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The most connections the listener holds open: a quarter of the descriptor limit, at
/// least 16 and at most 512 (GitHub delivers one request at a time per hook).
pub(in crate::daemon) fn connection_cap(fd_limit: Option<u64>) -> usize {
    let quarter = fd_limit.unwrap_or(1024) / 4;
    usize::try_from(quarter.clamp(16, 512)).unwrap_or(512)
}

/// Serves `app` on `listener` until the task is dropped.
pub(in crate::daemon) async fn run(
    listener: tokio::net::TcpListener,
    app: Router,
    cap: usize,
    quiet: Arc<Quiet>,
) {
    let open = Open::new(cap);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                quiet.note("connections the system refused", &e.to_string());
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let held = match open.admit() {
            Admitted::Room(held) => held,
            Admitted::Shed(held, IDLE) => {
                quiet.note(
                    "idle connections shed",
                    &format!("{cap} connections were open, none of them sending a request"),
                );
                held
            }
            Admitted::Shed(held, READING) => {
                quiet.note(
                    "connections with a slow body shed",
                    &format!("{cap} connections were open, none idle"),
                );
                held
            }
            Admitted::Shed(held, _) => {
                quiet.note(
                    "live event streams shed",
                    &format!("{cap} connections were open, each answering a request or a stream"),
                );
                held
            }
            Admitted::Full => {
                refuse_at_once(&stream);
                quiet.note(
                    "connections answered 503",
                    &format!("all {cap} open connections are busy with a request"),
                );
                continue;
            }
        };
        let router = TowerToHyperService::new(app.clone());
        let slot = Arc::clone(&held.slot);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            // Who asks, for the handlers that count refusals by address.
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            request
                .extensions_mut()
                .insert(Connection(Arc::clone(&slot)));
            let arriving = !request.body().is_end_stream();
            let busy = Busy::begin(&slot, arriving);
            let slot = Arc::clone(&slot);
            let request = request.map(|body| {
                if arriving {
                    Body::new(Arriving { body, slot })
                } else {
                    Body::new(body)
                }
            });
            let call = busy.as_ref().map(|_| router.call(request));
            async move {
                let _busy = busy;
                match call {
                    Some(call) => call.await,
                    None => Ok::<_, Infallible>(shed_answer()),
                }
            }
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            tokio::select! {
                result = connection => {
                    if let Err(e) = result {
                        tracing::debug!("a connection ended: {e}");
                    }
                }
                () = held.slot.shed.notified() => {}
            }
            drop(held);
        });
    }
}

const FULL: &str = "the listener is full; try again";

fn shed_answer() -> Response {
    error::reply(StatusCode::SERVICE_UNAVAILABLE, FULL)
}

/// Answers 503 without reading the request, if the socket takes it at once, and closes.
fn refuse_at_once(stream: &tokio::net::TcpStream) {
    let body = error::body(StatusCode::SERVICE_UNAVAILABLE, FULL).to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// No request in progress.
const IDLE: u8 = 0;
/// A request whose body is still arriving.
const READING: u8 = 1;
/// A request being answered.
const BUSY: u8 = 2;
/// A paired device's live stream.
const STREAMING: u8 = 3;
/// Told to close.
const SHED: u8 = 4;
/// What may be shed to make room, first to last.
const SHED_ORDER: [u8; 3] = [IDLE, READING, STREAMING];

/// One open connection: what it is doing, and how it is told to close.
pub(in crate::daemon) struct Slot {
    state: AtomicU8,
    shed: Notify,
}

impl Slot {
    /// Moves the connection from `from` to `to`; false if it was not in `from`.
    fn turn(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Marks the connection shed if it is in `state`; false otherwise.
    fn shed(&self, state: u8) -> bool {
        let shed = self.turn(state, SHED);
        if shed {
            self.shed.notify_one();
        }
        shed
    }
}

/// A request in progress on a connection; the connection is idle again when it drops.
struct Busy(Arc<Slot>);

impl Busy {
    /// A request begins, its body still `arriving` or not; None when the connection was
    /// shed just as the request came.
    fn begin(slot: &Arc<Slot>, arriving: bool) -> Option<Self> {
        slot.turn(IDLE, if arriving { READING } else { BUSY })
            .then(|| Busy(Arc::clone(slot)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // A stream the request opened keeps its state until it ends.
        if !self.0.turn(READING, IDLE) {
            self.0.turn(BUSY, IDLE);
        }
    }
}

/// A request's body while it arrives: its connection counts as busy, no longer as slow,
/// once the whole body is in.
struct Arriving {
    body: Incoming,
    slot: Arc<Slot>,
}

impl hyper::body::Body for Arriving {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.body.is_end_stream() {
            self.slot.turn(READING, BUSY);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request's connection, as its handler sees it (in the request's extensions).
#[derive(Clone)]
pub(in crate::daemon) struct Connection(Arc<Slot>);

impl Connection {
    /// Holds the connection as a paired device's live stream while the guard lives: it
    /// is then shed only when no connection is idle or sending a body.
    pub fn streaming(&self) -> Streaming {
        self.0.turn(BUSY, STREAMING);
        Streaming(Arc::clone(&self.0))
    }
}

/// A live stream on a connection; the connection is idle again when it drops.
pub(in crate::daemon) struct Streaming(Arc<Slot>);

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0.turn(STREAMING, IDLE);
    }
}

/// The open connections, oldest first.
struct Open {
    cap: usize,
    next: AtomicU64,
    slots: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

enum Admitted {
    Room(Held),
    /// Room was made by shedding a connection in this state.
    Shed(Held, u8),
    /// Every open connection is busy.
    Full,
}

/// A connection's place among the open ones, given back when it drops.
struct Held {
    id: u64,
    slot: Arc<Slot>,
    open: Arc<Open>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open.slots().remove(&self.id);
    }
}

impl Open {
    fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            next: AtomicU64::new(0),
            slots: Mutex::new(BTreeMap::new()),
        })
    }

    fn slots(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection, shedding one when all are taken: the oldest of the
    /// first state of [`SHED_ORDER`] there is.
    fn admit(self: &Arc<Self>) -> Admitted {
        let mut slots = self.slots();
        let mut shed = None;
        if slots.len() >= self.cap {
            let Some((oldest, state)) = SHED_ORDER.iter().find_map(|&state| {
                slots
                    .iter()
                    .find(|(_, slot)| slot.shed(state))
                    .map(|(id, _)| (*id, state))
            }) else {
                return Admitted::Full;
            };
            slots.remove(&oldest);
            shed = Some(state);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            state: AtomicU8::new(IDLE),
            shed: Notify::new(),
        });
        slots.insert(id, Arc::clone(&slot));
        let held = Held {
            id,
            slot,
            open: Arc::clone(self),
        };
        match shed {
            Some(state) => Admitted::Shed(held, state),
            None => Admitted::Room(held),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(admitted: Admitted) -> Held {
        match admitted {
            Admitted::Room(held) | Admitted::Shed(held, _) => held,
            Admitted::Full => panic!("refused"),
        }
    }

    fn state(held: &Held) -> u8 {
        held.slot.state.load(Ordering::Acquire)
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_stay() {
        let open = Open::new(3);
        let first = held(open.admit());
        let second = held(open.admit());
        let third = held(open.admit());
        let busy = Busy::begin(&first.slot, false).unwrap();
        // The oldest is busy with a request: the next oldest, idle, is shed.
        let Admitted::Shed(fourth, IDLE) = open.admit() else {
            panic!("an idle connection should have made room");
        };
        assert_eq!(state(&second), SHED);
        assert!(
            Busy::begin(&second.slot, false).is_none(),
            "a shed connection takes no request"
        );
        assert_eq!(open.slots().len(), 3);
        // All busy: the new one is refused.
        let _third_busy = Busy::begin(&third.slot, false).unwrap();
        let _fourth_busy = Busy::begin(&fourth.slot, false).unwrap();
        assert!(matches!(open.admit(), Admitted::Full));
        // A finished request leaves its connection idle, and so sheddable.
        drop(busy);
        assert!(matches!(open.admit(), Admitted::Shed(_, IDLE)));
        assert_eq!(state(&first), SHED);
        // A connection that closes gives its place back.
        drop(second);
        drop(third);
        assert_eq!(open.slots().len(), 1, "only the fourth is still open");
    }

    #[test]
    fn slow_bodies_are_shed_after_idle_connections_and_before_live_streams() {
        let open = Open::new(3);
        let stream = held(open.admit());
        let slow = held(open.admit());
        let answering = held(open.admit());
        // The oldest carries a paired device's events, the next one's body still arrives,
        // the newest is being answered.
        let request = Busy::begin(&stream.slot, false).unwrap();
        let live = Connection(Arc::clone(&stream.slot)).streaming();
        drop(request);
        assert_eq!(state(&stream), STREAMING, "a stream is not idle");
        let _reading = Busy::begin(&slow.slot, true).unwrap();
        let _answering = Busy::begin(&answering.slot, false).unwrap();
        let Admitted::Shed(fourth, READING) = open.admit() else {
            panic!("the slow body should have made room");
        };
        assert_eq!(state(&slow), SHED);
        assert_eq!(state(&stream), STREAMING);
        // Nothing idle or slow left: the stream goes before a new connection is refused.
        let _fourth_busy = Busy::begin(&fourth.slot, false).unwrap();
        assert!(matches!(open.admit(), Admitted::Shed(_, STREAMING)));
        assert_eq!(state(&stream), SHED);
        drop(live);
        assert_eq!(state(&stream), SHED, "a shed stream stays shed");
    }

    #[test]
    fn a_body_that_has_all_arrived_makes_its_connection_busy() {
        let open = Open::new(1);
        let one = held(open.admit());
        let reading = Busy::begin(&one.slot, true).unwrap();
        assert_eq!(state(&one), READING);
        assert!(one.slot.turn(READING, BUSY));
        drop(reading);
        assert_eq!(state(&one), IDLE);
    }

    #[test]
    fn the_cap_is_a_share_of_the_descriptor_limit() {
        assert_eq!(connection_cap(Some(1024)), 256);
        assert_eq!(connection_cap(Some(40)), 16);
        assert_eq!(connection_cap(Some(1 << 20)), 512);
        assert_eq!(connection_cap(None), 256);
    }
}
