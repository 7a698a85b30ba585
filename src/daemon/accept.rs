//! Accepting connections when descriptors run out.
//!
//! `accept` fails with `EMFILE` while the process is at its descriptor limit, and the
//! waiting client stays queued, so retrying at once spins. Instead the first failure of a
//! burst is logged once, the client at the head of the queue is refused with a clear
//! JSON-RPC error through a descriptor kept in reserve for that purpose, and accepting
//! backs off (doubling, up to a second) until a connection is accepted again.

use std::fs::File;
use std::io;
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::time::Instant;

use crate::protocol::{ErrorObject, Id, Response, code};

const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

pub(super) struct Acceptor {
    listener: UnixListener,
    /// Which socket, for the log.
    name: &'static str,
    /// An open descriptor given up to refuse one client when none is left.
    reserve: Option<File>,
    /// Failures in the current burst, and how long to wait before the next try.
    failures: u64,
    refused: u64,
    backoff: Duration,
    /// No accept before this. Kept here, not in a sleep, so a caller that drops the
    /// `accept` future (a `select!` with other branches) cannot cut the pause short.
    not_before: Option<Instant>,
}

impl Acceptor {
    pub fn new(listener: UnixListener, name: &'static str) -> Self {
        Self {
            listener,
            name,
            reserve: open_reserve(),
            failures: 0,
            refused: 0,
            backoff: FIRST_BACKOFF,
            not_before: None,
        }
    }

    /// The next connection. Failures are handled here (logged once a burst, the client
    /// refused, a pause); only a connection is returned.
    pub async fn accept(&mut self) -> UnixStream {
        loop {
            if let Some(at) = self.not_before {
                tokio::time::sleep_until(at).await;
                self.not_before = None;
            }
            match self.listener.accept().await {
                Ok((stream, _)) => {
                    if self.failures > 0 {
                        tracing::warn!(
                            socket = self.name,
                            failures = self.failures,
                            refused = self.refused,
                            "accepting connections again"
                        );
                        self.failures = 0;
                        self.refused = 0;
                        self.backoff = FIRST_BACKOFF;
                    }
                    return stream;
                }
                Err(e) => self.failed(e).await,
            }
        }
    }

    async fn failed(&mut self, error: io::Error) {
        if self.failures == 0 {
            tracing::error!(
                socket = self.name,
                open_descriptors = crate::sys::open_fds(),
                "cannot accept a connection: {error}; refusing clients until it can (logged once per burst)"
            );
        }
        self.failures += 1;
        let out_of_descriptors = matches!(
            error.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
        );
        if out_of_descriptors && self.refuse_one().await {
            self.refused += 1;
        }
        self.not_before = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Frees the reserve descriptor, accepts the waiting client, tells it why it is
    /// refused and closes it, then takes the reserve back. True if a client was refused.
    async fn refuse_one(&mut self) -> bool {
        if self.reserve.take().is_none() {
            self.reserve = open_reserve();
            return false;
        }
        let accepted =
            tokio::time::timeout(Duration::from_millis(10), self.listener.accept()).await;
        let refused = match accepted {
            Ok(Ok((stream, _))) => {
                let error = ErrorObject::new(
                    code::BUSY,
                    "the daemon has no file descriptors left to serve this connection; try again shortly",
                );
                let mut line =
                    serde_json::to_string(&Response::err(Id::null(), error)).unwrap_or_default();
                line.push('\n');
                // One short line fits the socket's buffer; a client that cannot take it
                // learns from the closed connection instead.
                let _ = stream.try_write(line.as_bytes());
                true
            }
            _ => false,
        };
        self.reserve = open_reserve();
        refused
    }
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}
