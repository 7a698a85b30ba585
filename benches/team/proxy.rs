//! A counting TCP proxy between one daemon and the SurrealDB server: bytes pass through
//! unchanged, and the WebSocket frames in each direction are counted as they go by.
//!
//! After the HTTP upgrade (the first blank line each way), the stream is WebSocket
//! frames (RFC 6455): a daemon's requests arrive masked, the server's answers and
//! live-query notifications unmasked. A request is classified by what its payload
//! holds (the SDK encodes the method name and the SurrealQL as plain strings): the SDK's
//! keep-alive (its `Command::Health`, sent as method `ping` every 5 s per connection:
//! `PING_INTERVAL` in surrealdb's engine/remote/ws), a lease renewal (the `UPDATE … SET
//! lease_until` of src/store/team.rs), or another query, named by the first words of
//! its SurrealQL.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What went through one proxy, counted from its start.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Data frames (text or binary) from the daemon: its requests.
    pub requests: u64,
    /// Of them, the SDK's keep-alive (method `ping`).
    pub keepalives: u64,
    /// Of them, lease renewals.
    pub renewals: u64,
    /// The other requests, by the start of their SurrealQL.
    pub others: BTreeMap<String, u64>,
    /// Control frames (ping, pong, close) from the daemon.
    pub control: u64,
    /// Data frames from the server: answers and live-query notifications.
    pub from_server: u64,
    pub bytes_to_server: u64,
    pub bytes_from_server: u64,
    /// Connections the daemon opened.
    pub connections: u64,
}

impl Tally {
    /// What was counted after `earlier`, a snapshot of the same proxy.
    pub fn since(&self, earlier: &Tally) -> Tally {
        let mut others = self.others.clone();
        for (kind, n) in &earlier.others {
            if let Some(now) = others.get_mut(kind) {
                *now -= n;
            }
        }
        others.retain(|_, n| *n > 0);
        Tally {
            requests: self.requests - earlier.requests,
            keepalives: self.keepalives - earlier.keepalives,
            renewals: self.renewals - earlier.renewals,
            others,
            control: self.control - earlier.control,
            from_server: self.from_server - earlier.from_server,
            bytes_to_server: self.bytes_to_server - earlier.bytes_to_server,
            bytes_from_server: self.bytes_from_server - earlier.bytes_from_server,
            connections: self.connections - earlier.connections,
        }
    }

    /// Requests that are neither keep-alives nor lease renewals.
    pub fn other_requests(&self) -> u64 {
        self.others.values().sum()
    }
}

/// A proxy on a loopback port of its own, in front of the server at `upstream`.
pub struct Proxy {
    pub port: u16,
    tally: Arc<Mutex<Tally>>,
    task: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: u16) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the proxy")?;
        let port = listener.local_addr()?.port();
        let tally = Arc::new(Mutex::new(Tally::default()));
        let counted = Arc::clone(&tally);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let tally = Arc::clone(&counted);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        tally.lock().unwrap().connections += 1;
                        relay(client, server, tally).await;
                    }
                });
            }
        });
        Ok(Proxy { port, tally, task })
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    pub fn snapshot(&self) -> Tally {
        self.tally.lock().unwrap().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Stops accepting; connections end with their daemon (or the runtime).
        self.task.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, tally: Arc<Mutex<Tally>>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        Direction::ToServer,
        Arc::clone(&tally),
    );
    let down = pump(server_read, client_write, Direction::FromServer, tally);
    // When either side closes, the other is closed too.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    FromServer,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    direction: Direction,
    tally: Arc<Mutex<Tally>>,
) {
    let mut frames = Frames::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&chunk[..n]).await.is_err() {
            break;
        }
        let mut t = tally.lock().unwrap();
        match direction {
            Direction::ToServer => t.bytes_to_server += n as u64,
            Direction::FromServer => t.bytes_from_server += n as u64,
        }
        frames.feed(&chunk[..n], direction, &mut t);
    }
    let _ = to.shutdown().await;
}

/// The bytes of one direction not yet parsed into whole frames.
#[derive(Default)]
struct Frames {
    upgraded: bool,
    pending: Vec<u8>,
}

impl Frames {
    fn feed(&mut self, bytes: &[u8], direction: Direction, tally: &mut Tally) {
        self.pending.extend_from_slice(bytes);
        if !self.upgraded {
            // The HTTP upgrade request (or answer) ends at the first blank line.
            let Some(end) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            self.pending.drain(..end + 4);
            self.upgraded = true;
        }
        while let Some((opcode, payload, used)) = frame(&self.pending) {
            match (direction, opcode) {
                (Direction::ToServer, 1 | 2) => classify(&payload, tally),
                (Direction::ToServer, 8..=10) => tally.control += 1,
                (Direction::FromServer, 1 | 2) => tally.from_server += 1,
                // Continuations and the server's control frames are not counted.
                _ => {}
            }
            self.pending.drain(..used);
        }
    }
}

/// The first whole frame of `bytes`: its opcode, its payload (unmasked) and its length.
fn frame(bytes: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if bytes.len() < 2 {
        return None;
    }
    let opcode = bytes[0] & 0x0f;
    let masked = bytes[1] & 0x80 != 0;
    let (len, mut at) = match bytes[1] & 0x7f {
        126 => (
            u64::from(u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?), 10),
        short => (u64::from(short), 2),
    };
    let mask: Option<[u8; 4]> = if masked {
        let key = bytes.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(key)
    } else {
        None
    };
    let end = at + usize::try_from(len).ok()?;
    let mut payload = bytes.get(at..end)?.to_vec();
    if let Some(key) = mask {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= key[i % 4];
        }
    }
    Some((opcode, payload, end))
}

fn classify(payload: &[u8], tally: &mut Tally) {
    tally.requests += 1;
    let has = |needle: &[u8]| payload.windows(needle.len()).any(|w| w == needle);
    // The keep-alive: method `ping`, no SurrealQL (queries are method `query`).
    if has(b"ping") && !has(b"query") {
        tally.keepalives += 1;
    } else if has(b"SET lease_until") && has(b"UPDATE") {
        tally.renewals += 1;
    } else {
        *tally.others.entry(statement(payload)).or_default() += 1;
    }
}

/// The start of the longest run of readable text in a request: its SurrealQL, or its
/// method when it has none.
fn statement(payload: &[u8]) -> String {
    let readable = |b: &u8| b.is_ascii_graphic() || matches!(b, b' ' | b'\n' | b'\t');
    let longest = payload
        .split(|b| !readable(b))
        .max_by_key(|run| run.len())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(longest);
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut line = words.join(" ");
    if line.len() > 60 {
        let mut cut = 60;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}
