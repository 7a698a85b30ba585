//! Reliability equipment for the daemon, shared by `benches/reliability.rs` and
//! `tests/it/durability.rs`: a kill -9 loop under concurrent durable writers
//! ([`kill_loop`]) and a fuzzer of malformed and hostile protocol input ([`fuzz`]).
//!
//! Self-contained on purpose: it speaks the protocol of PROTOCOL.md over the raw Unix
//! socket, as an outside tester would, and uses none of crucible's own code. Every daemon it
//! starts is a [`Daemon`], SIGKILLed and reaped when dropped, so none outlives a run.

#![allow(dead_code)] // the test and the benchmark each use a part of it

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

mod cases;
mod fuzz;
#[allow(unused_imports)] // each user needs only some of them
pub use fuzz::{FuzzReport, fuzz};

/// PROTOCOL.md: protocol version, line limit and error codes.
const PROTOCOL_VERSION: u32 = 1;
const MAX_LINE: usize = 1024 * 1024;
const PARSE: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const NO_METHOD: i64 = -32601;
const BAD_PARAMS: i64 = -32602;
const VERSION_MISMATCH: i64 = -32001;
const NOT_FOUND: i64 = -32002;
const FORBIDDEN: i64 = -32005;

/// A long grace period so the daemon never idles out mid-run, and a long session timeout
/// so the writers' session (which never heartbeats) is not reaped during a long run.
const SETTINGS: &str = "[daemon]\ngrace_period_secs = 600\nsession_timeout_secs = 3600\n";
const START_TIMEOUT: Duration = Duration::from_secs(60);
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many lost writes or violations a report describes one by one.
const EXAMPLES: usize = 8;

/// A small xorshift generator: reproducible runs from a seed, no `rand` crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng((seed ^ 0x9E37_79B9_7F4A_7C15) | 1)
    }
    #[allow(clippy::should_implement_trait)] // a generator's next number, never ending
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---- kiln, daemon, connection ----

/// A fresh temporary kiln with a private config home; removed when dropped.
pub struct TempKiln {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub xdg: PathBuf,
}

impl TempKiln {
    pub fn new() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cru-rel").tempdir()?;
        let base = dir.path().canonicalize()?;
        let (root, xdg) = (base.join("kiln"), base.join("xdg"));
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(&xdg)?;
        std::fs::write(root.join(".crucible.toml"), SETTINGS)?;
        Ok(TempKiln {
            _dir: dir,
            root,
            xdg,
        })
    }
    pub fn socket(&self) -> PathBuf {
        self.root.join(".crucible/daemon.sock")
    }
    pub fn stderr_log(&self) -> PathBuf {
        self.root.join("daemon.stderr.log")
    }
}

/// A `cru --kiln <kiln> daemon run` child. Dropping it SIGKILLs and reaps it.
pub struct Daemon {
    child: Child,
    socket: PathBuf,
    stderr: PathBuf,
}

impl Daemon {
    /// Starts the daemon, its stderr appended to `<kiln>/daemon.stderr.log` under `label`.
    pub fn spawn(cru: &Path, kiln: &TempKiln, label: &str) -> Result<Daemon> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(kiln.stderr_log())?;
        writeln!(log, "==== {label} ====")?;
        let child = Command::new(cru)
            .arg("--kiln")
            .arg(&kiln.root)
            .args(["daemon", "run"])
            .env("XDG_CONFIG_HOME", &kiln.xdg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("running {} daemon run", cru.display()))?;
        Ok(Daemon {
            child,
            socket: kiln.socket(),
            stderr: kiln.stderr_log(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Retries until the socket answers a handshake; the handshaken connection.
    pub async fn connect(&mut self) -> Result<Conn> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let error = match Conn::handshaken(&self.socket).await {
                Ok(conn) => return Ok(conn),
                Err(e) => e,
            };
            if let Some(status) = self.exited() {
                bail!(
                    "the daemon exited ({status}) before answering: {}",
                    self.stderr_tail()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "the daemon did not answer a handshake within {START_TIMEOUT:?} ({error:#}): {}",
                    self.stderr_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kill -9` and reap. An error if the daemon had already exited by itself.
    pub async fn kill9(&mut self) -> Result<()> {
        if let Some(status) = self.exited() {
            bail!(
                "the daemon exited by itself ({status}): {}",
                self.stderr_tail()
            );
        }
        // SAFETY: kill(2) on our own child, not reaped yet, so its pid cannot be reused.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) } != 0 {
            bail!(
                "kill -9 {}: {}",
                self.pid(),
                std::io::Error::last_os_error()
            );
        }
        for _ in 0..1000 {
            if self.exited().is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!("the daemon (pid {}) survived kill -9 for 10 s", self.pid())
    }

    /// `daemon.shutdown`, then kill -9 if it has not exited within 5 s.
    pub async fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if let Ok(mut conn) = Conn::handshaken(&self.socket).await {
            let _ = conn.call("daemon.shutdown", json!({})).await;
        }
        for _ in 0..500 {
            if self.exited().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = self.kill9().await;
    }

    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n  ")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What one read from a connection gave.
pub enum Read {
    Line(Vec<u8>),
    Eof,
    TimedOut,
}

/// A raw line-level connection to the daemon's socket.
pub struct Conn {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
}

impl Conn {
    pub async fn connect(socket: &Path) -> Result<Conn> {
        let stream = UnixStream::connect(socket)
            .await
            .with_context(|| format!("connecting to {}", socket.display()))?;
        let (read, writer) = stream.into_split();
        Ok(Conn {
            reader: BufReader::new(read),
            writer,
            next_id: 0,
        })
    }

    pub async fn handshaken(socket: &Path) -> Result<Conn> {
        let mut conn = Conn::connect(socket).await?;
        conn.result("handshake", json!({"protocol_version": PROTOCOL_VERSION}))
            .await?;
        Ok(conn)
    }

    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes).await
    }

    /// The next line (with its `\n`, unless the connection ended without one).
    pub async fn read(&mut self, limit: Duration) -> std::io::Result<Read> {
        let mut line = Vec::new();
        match tokio::time::timeout(limit, self.reader.read_until(b'\n', &mut line)).await {
            Err(_) => Ok(Read::TimedOut),
            Ok(Err(e)) => Err(e),
            Ok(Ok(0)) => Ok(Read::Eof),
            Ok(Ok(_)) => Ok(Read::Line(line)),
        }
    }

    /// One request; its whole response (an `error` response is `Ok` too).
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        self.write(line.as_bytes())
            .await
            .context("writing a request")?;
        match self.read(REPLY_TIMEOUT).await.context("reading a reply")? {
            Read::Line(bytes) => {
                let reply: Value = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{method}: reply is not JSON: {}", preview(&bytes)))?;
                if reply["id"] != json!(id) {
                    bail!("{method}: reply for another id (sent {id}): {reply}");
                }
                Ok(reply)
            }
            Read::Eof => bail!("{method}: the daemon closed the connection"),
            Read::TimedOut => bail!("{method}: no reply within {REPLY_TIMEOUT:?}"),
        }
    }

    /// One request; its `result`, or an error carrying the `error`.
    pub async fn result(&mut self, method: &str, params: Value) -> Result<Value> {
        let mut reply = self.call(method, params).await?;
        match reply.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(anyhow!("{method} failed: {}", reply["error"])),
        }
    }
}

// ---- the kill -9 loop ----

/// How long the kill loop runs: a number of cycles, or until a time has passed.
pub struct KillOptions {
    pub cycles: Option<usize>,
    pub duration: Option<Duration>,
    pub writers: usize,
    pub seed: u64,
    /// The daemon is killed this long (pseudo-random within the range) after the writers start.
    pub delay_ms: (u64, u64),
}

impl KillOptions {
    pub fn cycles(cycles: usize, writers: usize) -> Self {
        KillOptions {
            cycles: Some(cycles),
            duration: None,
            writers,
            seed: 0x00C0_FFEE,
            delay_ms: (200, 1500),
        }
    }
    pub fn duration(duration: Duration, writers: usize) -> Self {
        KillOptions {
            cycles: None,
            duration: Some(duration),
            ..Self::cycles(0, writers)
        }
    }
}

/// A send the daemon acknowledged (a `result` with an `id`).
pub struct Ack {
    pub id: String,
    pub title: String,
    pub cycle: usize,
}

pub struct KillReport {
    pub cycles: usize,
    pub writers: usize,
    pub acknowledged: usize,
    /// Acknowledged ids missing from the final read-back.
    pub lost: usize,
    /// `(id, title, cycle that acknowledged it, first restart it was missing after)`.
    pub lost_examples: Vec<(String, String, usize, usize)>,
    /// Lost sends by the cycle that acknowledged them.
    pub lost_by_cycle: BTreeMap<usize, usize>,
    /// Acknowledged ids stored with another title than the one sent.
    pub altered: Vec<String>,
    /// Ids missing after some restart but present at the end.
    pub missing_then_found: usize,
    pub duplicate_ids: usize,
    pub error_replies: u64,
    pub first_error_reply: Option<String>,
    /// Writers that ended for another reason than the connection closing at the kill.
    pub writer_anomalies: Vec<String>,
    pub stored_at_end: usize,
    pub duration: Duration,
}

impl KillReport {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.altered.is_empty() && self.duplicate_ids == 0
    }
}

impl fmt::Display for KillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let some = |v: &[String]| v[..v.len().min(EXAMPLES)].join("; ");
        let by: Vec<String> = (self.lost_by_cycle.iter())
            .map(|(c, n)| format!("cycle {c}: {n}"))
            .collect();
        let first_error = self.first_error_reply.as_deref().unwrap_or("");
        let (writers, secs) = (self.writers, self.duration.as_secs_f64());
        write!(
            f,
            "kill -9 loop: {} cycles, {writers} writers, {secs:.1} s",
            self.cycles
        )?;
        for (name, value) in [
            ("acknowledged sends", self.acknowledged.to_string()),
            ("stored at the end", self.stored_at_end.to_string()),
            (
                "error replies",
                format!("{} {first_error}", self.error_replies),
            ),
            (
                "LOST acknowledged sends",
                format!("{} {}", self.lost, by.join(", ")),
            ),
            (
                "altered (wrong title)",
                format!("{} {}", self.altered.len(), some(&self.altered)),
            ),
            ("missing, then back", self.missing_then_found.to_string()),
            ("duplicate acked ids", self.duplicate_ids.to_string()),
            (
                "writer anomalies",
                format!(
                    "{} {}",
                    self.writer_anomalies.len(),
                    some(&self.writer_anomalies)
                ),
            ),
        ] {
            write!(f, "\n  {name:<24}{value}")?;
        }
        for (id, title, cycle, after) in &self.lost_examples {
            write!(
                f,
                "\n    lost {id} {title:?}: acknowledged in cycle {cycle}, missing after restart {after}"
            )?;
        }
        Ok(())
    }
}

/// In a fresh kiln: start the daemon, run `writers` connections sending `inbox.send` one at
/// a time, kill -9 the daemon after a pseudo-random delay, restart; repeat. After every
/// restart, and once more at the end, every acknowledged id is looked up in the database.
/// `Err` is a failure of the equipment or of a restart, never a lost write.
#[allow(clippy::too_many_lines)] // the loop's phases read in order
pub async fn kill_loop(cru: &Path, options: &KillOptions) -> Result<KillReport> {
    let started = Instant::now();
    let kiln = TempKiln::new().context("creating the temp kiln")?;
    let mut rng = Rng::new(options.seed);
    let mut acks: Vec<Ack> = Vec::new();
    let mut first_missing: HashMap<String, usize> = HashMap::new();
    let mut next_title = vec![0u64; options.writers];
    let (mut error_replies, mut first_error_reply) = (0, None);
    let mut writer_anomalies = Vec::new();
    let mut session: Option<String> = None;
    let mut cycle = 0;
    while match (options.cycles, options.duration) {
        (Some(n), _) => cycle < n,
        (None, Some(d)) => started.elapsed() < d,
        (None, None) => false,
    } {
        let mut daemon = Daemon::spawn(cru, &kiln, &format!("cycle {cycle}"))?;
        let mut control = daemon
            .connect()
            .await
            .with_context(|| format!("cycle {cycle}: starting the daemon"))?;
        if session.is_none() {
            let reg = control
                .result(
                    "session.register",
                    json!({"agent_type": "acp", "agent_name": "rel"}),
                )
                .await?;
            let id = reg["session_id"]
                .as_str()
                .ok_or_else(|| anyhow!("session.register: no session_id in {reg}"))?;
            session = Some(id.to_string());
        }
        let session_id = session.clone().unwrap_or_default();
        if cycle > 0 {
            let stored = stored_titles(&mut control)
                .await
                .with_context(|| format!("read-back after restart {cycle}"))?;
            for ack in acks.iter().filter(|a| !stored.contains_key(&a.id)) {
                first_missing.entry(ack.id.clone()).or_insert(cycle);
            }
        }
        drop(control);
        let tasks: Vec<_> = (0..options.writers)
            .map(|w| {
                tokio::spawn(writer(
                    kiln.socket(),
                    session_id.clone(),
                    w,
                    cycle,
                    next_title[w],
                ))
            })
            .collect();
        let (lo, hi) = options.delay_ms;
        tokio::time::sleep(Duration::from_millis(
            lo + rng.below(hi.saturating_sub(lo) + 1),
        ))
        .await;
        daemon
            .kill9()
            .await
            .with_context(|| format!("cycle {cycle}"))?;
        for (w, task) in tasks.into_iter().enumerate() {
            let outcome = task.await.context("a writer task panicked")?;
            next_title[w] = outcome.next_title;
            acks.extend(outcome.acks);
            error_replies += outcome.errors;
            if first_error_reply.is_none() {
                first_error_reply = outcome.first_error;
            }
            writer_anomalies.extend(
                outcome
                    .anomaly
                    .map(|a| format!("cycle {cycle} writer {w}: {a}")),
            );
        }
        cycle += 1;
    }

    let mut daemon = Daemon::spawn(cru, &kiln, "final read-back")?;
    let mut control = daemon
        .connect()
        .await
        .context("restarting the daemon for the final read-back")?;
    let stored = stored_titles(&mut control)
        .await
        .context("final read-back")?;
    drop(control);
    daemon.stop().await;

    let unique: HashSet<&str> = acks.iter().map(|a| a.id.as_str()).collect();
    let mut report = KillReport {
        cycles: cycle,
        writers: options.writers,
        acknowledged: acks.len(),
        lost: 0,
        lost_examples: Vec::new(),
        lost_by_cycle: BTreeMap::new(),
        altered: Vec::new(),
        missing_then_found: 0,
        duplicate_ids: acks.len() - unique.len(),
        error_replies,
        first_error_reply,
        writer_anomalies,
        stored_at_end: stored.len(),
        duration: started.elapsed(),
    };
    for ack in &acks {
        match stored.get(&ack.id) {
            None => {
                report.lost += 1;
                *report.lost_by_cycle.entry(ack.cycle).or_default() += 1;
                if report.lost_examples.len() < EXAMPLES {
                    let after = first_missing.get(&ack.id).copied().unwrap_or(cycle);
                    report.lost_examples.push((
                        ack.id.clone(),
                        ack.title.clone(),
                        ack.cycle,
                        after,
                    ));
                }
            }
            Some(title) if *title != ack.title => report.altered.push(format!(
                "{}: sent {:?}, stored {title:?}",
                ack.id, ack.title
            )),
            Some(_) => {
                report.missing_then_found += usize::from(first_missing.contains_key(&ack.id))
            }
        }
    }
    Ok(report)
}

struct WriterOutcome {
    acks: Vec<Ack>,
    errors: u64,
    first_error: Option<String>,
    next_title: u64,
    anomaly: Option<String>,
}

/// Sends one message at a time until the connection ends (the kill).
async fn writer(
    socket: PathBuf,
    session: String,
    w: usize,
    cycle: usize,
    first: u64,
) -> WriterOutcome {
    let mut out = WriterOutcome {
        acks: Vec::new(),
        errors: 0,
        first_error: None,
        next_title: first,
        anomaly: None,
    };
    let mut conn = match Conn::handshaken(&socket).await {
        Ok(conn) => conn,
        Err(e) => {
            out.anomaly = Some(format!("could not connect: {e:#}"));
            return out;
        }
    };
    for n in 1u64.. {
        let title = format!("w{w}-{}", out.next_title);
        let line = format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": n, "method": "inbox.send",
            "params": {"session_id": session, "msg_type": "info", "title": title}})
        );
        if conn.write(line.as_bytes()).await.is_err() {
            break; // the daemon is gone
        }
        let bytes = match conn.read(REPLY_TIMEOUT).await {
            Ok(Read::Line(bytes)) => bytes,
            Ok(Read::Eof) | Err(_) => break, // the daemon is gone
            Ok(Read::TimedOut) => {
                out.anomaly = Some(format!("no reply within {REPLY_TIMEOUT:?}"));
                break;
            }
        };
        let reply: Value = match serde_json::from_slice(&bytes) {
            Ok(reply) => reply,
            Err(_) if !bytes.ends_with(b"\n") => break, // cut off by the kill
            Err(e) => {
                out.anomaly = Some(format!("reply is not JSON ({e}): {}", preview(&bytes)));
                break;
            }
        };
        if reply["id"] != json!(n) {
            out.anomaly = Some(format!("reply for another id (sent {n}): {reply}"));
            break;
        }
        out.next_title += 1;
        match reply["result"]["id"].as_str() {
            Some(id) => out.acks.push(Ack {
                id: id.to_string(),
                title,
                cycle,
            }),
            None => {
                out.errors += 1;
                out.first_error.get_or_insert_with(|| reply.to_string());
            }
        }
    }
    out
}

/// Every stored inbox message: id → title, read with `db.query`.
async fn stored_titles(conn: &mut Conn) -> Result<HashMap<String, String>> {
    let sql = "SELECT record::id(id) AS id, title FROM inbox_messages";
    let answer = conn.result("db.query", json!({"sql": sql})).await?;
    let rows = answer["result"][0]
        .as_array()
        .ok_or_else(|| anyhow!("db.query gave no rows: {answer}"))?;
    rows.iter()
        .map(|row| match (row["id"].as_str(), row["title"].as_str()) {
            (Some(id), Some(title)) => Ok((id.to_string(), title.to_string())),
            _ => Err(anyhow!("db.query row without a string id and title: {row}")),
        })
        .collect()
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}… ({} bytes)", &text[..i], bytes.len()),
        None => text.to_string(),
    }
}
