//! The webhook listener's connections, served so that slow or idle clients cannot starve
//! the daemon. At most [`connection_cap`] connections are open at once, a share of the
//! descriptor limit well below it, so the socket's clients, the agents and the database
//! keep theirs. A client has [`HEADER_TIMEOUT`] to send a request's headers (and as long
//! between requests of a kept-alive connection). When the cap is reached, the oldest
//! connection that is not in the middle of a request is shed to make room, so a flood of
//! idle connections cannot keep a real delivery out; only when every open connection is
//! busy with a request is a new one answered 503 and closed. Refusals are logged through
//! [`Quiet`], a line at most every few seconds.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde_json::json;
use tokio::sync::Notify;

use super::quiet::Quiet;

/// How long a client has to send a request's headers, or to start the next request.
pub(in crate::daemon) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's body once its headers are in.
pub(in crate::daemon) const BODY_TIMEOUT: Duration = Duration::from_secs(10);
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
            Admitted::Shed(held) => {
                quiet.note(
                    "idle connections shed",
                    &format!("{cap} connections were open, none of them sending a request"),
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
            let busy = Busy::begin(&slot);
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
                        tracing::debug!("a webhook connection ended: {e}");
                    }
                }
                () = held.slot.shed.notified() => {}
            }
            drop(held);
        });
    }
}

fn shed_answer() -> Response {
    super::reply(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({"error": "the listener is full; try again"}),
    )
}

/// Answers 503 without reading the request, if the socket takes it at once, and closes.
fn refuse_at_once(stream: &tokio::net::TcpStream) {
    let body = r#"{"error":"the listener is full; try again"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

const IDLE: u8 = 0;
const BUSY: u8 = 1;
const SHED: u8 = 2;

/// One open connection: whether it is in the middle of a request, and how it is told to
/// close.
pub(in crate::daemon) struct Slot {
    state: AtomicU8,
    shed: Notify,
}

impl Slot {
    /// Marks an idle connection shed; false if it is busy (or already shed).
    fn shed(&self) -> bool {
        let shed = self
            .state
            .compare_exchange(IDLE, SHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if shed {
            self.shed.notify_one();
        }
        shed
    }
}

/// A request in progress on a connection; the connection is idle again when it drops.
struct Busy(Arc<Slot>);

impl Busy {
    /// None when the connection was shed just as its request arrived.
    fn begin(slot: &Arc<Slot>) -> Option<Self> {
        slot.state
            .compare_exchange(IDLE, BUSY, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Busy(Arc::clone(slot)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self
            .0
            .state
            .compare_exchange(BUSY, IDLE, Ordering::AcqRel, Ordering::Acquire);
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
    /// Room was made by shedding the oldest idle connection.
    Shed(Held),
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

    /// A place for a new connection, shedding the oldest idle one when all are taken.
    fn admit(self: &Arc<Self>) -> Admitted {
        let mut slots = self.slots();
        let mut shed = false;
        if slots.len() >= self.cap {
            let Some(oldest_idle) = slots
                .iter()
                .find(|(_, slot)| slot.shed())
                .map(|(id, _)| *id)
            else {
                return Admitted::Full;
            };
            slots.remove(&oldest_idle);
            shed = true;
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
        if shed {
            Admitted::Shed(held)
        } else {
            Admitted::Room(held)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(admitted: Admitted) -> Held {
        match admitted {
            Admitted::Room(held) | Admitted::Shed(held) => held,
            Admitted::Full => panic!("refused"),
        }
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_stay() {
        let open = Open::new(3);
        let first = held(open.admit());
        let second = held(open.admit());
        let third = held(open.admit());
        let busy = Busy::begin(&first.slot).unwrap();
        // The oldest is busy with a request: the next oldest, idle, is shed.
        let Admitted::Shed(fourth) = open.admit() else {
            panic!("an idle connection should have made room");
        };
        assert_eq!(second.slot.state.load(Ordering::Acquire), SHED);
        assert!(
            Busy::begin(&second.slot).is_none(),
            "a shed connection takes no request"
        );
        assert_eq!(open.slots().len(), 3);
        // All busy: the new one is refused.
        let _third_busy = Busy::begin(&third.slot).unwrap();
        let _fourth_busy = Busy::begin(&fourth.slot).unwrap();
        assert!(matches!(open.admit(), Admitted::Full));
        // A finished request leaves its connection idle, and so sheddable.
        drop(busy);
        assert!(matches!(open.admit(), Admitted::Shed(_)));
        assert_eq!(first.slot.state.load(Ordering::Acquire), SHED);
        // A connection that closes gives its place back.
        drop(second);
        drop(third);
        assert_eq!(open.slots().len(), 1, "only the fourth is still open");
    }

    #[test]
    fn the_cap_is_a_share_of_the_descriptor_limit() {
        assert_eq!(connection_cap(Some(1024)), 256);
        assert_eq!(connection_cap(Some(40)), 16);
        assert_eq!(connection_cap(Some(1 << 20)), 512);
        assert_eq!(connection_cap(None), 256);
    }
}
