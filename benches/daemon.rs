//! Daemon benchmark: throughput, list latency and memory of a real `cru daemon run` over
//! its Unix socket, against the embedded surrealkv store (every acknowledged write fsynced
//! in crucible's journal).
//!
//! The daemon is the shipping binary (`cargo build --release`, built into
//! `<target dir>/ship` first; see `testkit/src/bench/ship.rs`), or with `CRU_BENCH_SHIP=0` this
//! bench build's `cru` (optimised, no LTO). Run with (`cargo bench` runs every benchmark):
//!
//! ```text
//! cargo bench --bench daemon
//! ```
//!
//! Environment:
//! - `CRU_BENCH_MESSAGES`: inbox size for the `inbox.list` phase (default 1,000,000).
//! - `CRU_BENCH_SECS`: seconds per concurrency level of the throughput phases (default 3).
//!
//! Phases:
//! 1. `session.heartbeat` round trips/s with 1, 8 and 64 concurrent clients.
//! 2. `inbox.send` (durable) round trips/s with 1, 8 and 64 concurrent clients.
//! 3. Fill the inbox to `CRU_BENCH_MESSAGES` with 64 concurrent senders, then time
//!    `inbox.list {unread_only: true, limit: 50}` (p50, p95, p99, max) right after the
//!    fill, and again once the daemon rests (a second with at most 10 ms of its CPU: the
//!    engine has finished merging what the fill wrote).
//! 4. The daemon's memory right after that load and after 3 s quiet (`VmRSS`, split into
//!    private `RssAnon` and the mapped executable `RssFile`), and its peak `VmHWM`.
//! 5. The engine alone, once the daemon has stopped: the same database opened in this
//!    process, `inbox.list`'s query timed without socket or JSON-RPC, and sends in
//!    transactions of 64 through the store (engine + journal) and to the engine alone.
//!
//! Each client of a level has its own connection and makes sequential calls; all clients
//! of a level run concurrently for the same fixed duration and completed calls are
//! counted. Figures are printed beside the targets, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::ship;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods::{self as m, NoParams, Request};
use crucible::protocol::params::{ListParams, RegisterParams};
use figures::{Stats, ms, proc_stat};
use serde_json::{Value, json};
use testkit::params;
use tokio::process::{Child, Command};

/// Concurrent clients per level of the throughput phases.
const LEVELS: [usize; 3] = [1, 8, 64];
/// Concurrent senders that fill the inbox before the list phase.
const FILL_CLIENTS: usize = 64;
/// Timed `inbox.list` calls, and untimed warm-up calls before them.
const LIST_CALLS: usize = 200;
const LIST_WARMUP: usize = 5;
const LIST_LIMIT: u32 = 50;

const DEFAULT_MESSAGES: u64 = 1_000_000;
const DEFAULT_SECS: f64 = 3.0;

/// How long the daemon may take to answer its first handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the daemon may take to exit after `daemon.shutdown` before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound on the fill phase, whatever the send rate.
const FILL_TIME_CAP: Duration = Duration::from_secs(30 * 60);
/// How often the fill phase reports progress.
const FILL_PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Targets, met with [`TARGET_CLIENTS`] concurrent clients (the other levels are shown for
/// reference).
const TARGET_CLIENTS: usize = 64;
const TARGET_HEARTBEATS_PER_SEC: f64 = 100_000.0;
const TARGET_SENDS_PER_SEC: f64 = 10_000.0;
/// p99 of `inbox.list` (unread, limit 50) with a million messages stored.
const TARGET_LIST_P99_MS: f64 = 2.0;
/// Resident size after the load and 3 s quiet, and at its peak.
const TARGET_RSS_MB: f64 = 64.0;
const TARGET_PEAK_MB: f64 = 96.0;
/// Messages a transaction in the engine-alone phase, as the daemon's group commit makes
/// them with 64 senders.
const ENGINE_BATCH: usize = 64;

/// A 120-byte message body, so sends carry a realistic payload.
const BODY: &str = "The agent finished a step of its task and reports it to the inbox; \
                    this body is here only to give the row a realistic size.";

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(10 * 1024 * 1024)
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nbenchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct Settings {
    messages: u64,
    level_duration: Duration,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let messages = match std::env::var("CRU_BENCH_MESSAGES") {
            Ok(text) => text
                .trim()
                .parse::<u64>()
                .with_context(|| format!("CRU_BENCH_MESSAGES={text:?} is not a whole number"))?,
            Err(_) => DEFAULT_MESSAGES,
        };
        let secs = match std::env::var("CRU_BENCH_SECS") {
            Ok(text) => text
                .trim()
                .parse::<f64>()
                .with_context(|| format!("CRU_BENCH_SECS={text:?} is not a number"))?,
            Err(_) => DEFAULT_SECS,
        };
        if !(secs > 0.0 && secs <= 600.0) {
            bail!("CRU_BENCH_SECS must be above 0 and at most 600, not {secs}");
        }
        if messages == 0 {
            bail!("CRU_BENCH_MESSAGES must be at least 1");
        }
        Ok(Self {
            messages,
            level_duration: Duration::from_secs_f64(secs),
        })
    }
}

async fn run() -> Result<()> {
    let settings = Settings::from_env()?;
    // Declared first so it is removed last, after the daemon is gone.
    let tmp = tempfile::tempdir().context("creating the temporary kiln")?;
    let kiln = Kiln::new(tmp.path().join("kiln"));
    std::fs::create_dir_all(kiln.root()).context("creating the kiln directory")?;
    // A long grace period so the daemon does not exit between phases, and a long session
    // timeout so sessions that only send (never heartbeat) are not reaped mid-run.
    std::fs::write(
        kiln.settings_path(),
        "[daemon]\ngrace_period_secs = 600\nsession_timeout_secs = 3600\n",
    )
    .context("writing .crucible.toml")?;
    // Keep the user's own settings out of the measurement.
    let xdg = tmp.path().join("xdg-config");
    std::fs::create_dir_all(&xdg).context("creating the private config home")?;

    let stderr_path = tmp.path().join("daemon.stderr");
    // What ships is what is measured (CRU_BENCH_SHIP=0: this bench build's own `cru`).
    let exe = ship::cru_to_measure(env!("CARGO_BIN_EXE_cru"));
    let mut daemon = spawn_daemon(&kiln, &exe, &xdg, &stderr_path)?;
    let outcome = bench(&kiln, &exe, &settings, &mut daemon).await;
    let stopped = stop_daemon(&kiln, &mut daemon).await;
    println!("\n{stopped}");
    let figures = match outcome {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("daemon stderr (last lines): {}", stderr_tail(&stderr_path));
            return Err(e);
        }
    };
    let engine = engine_alone(&kiln, &settings).await?;
    print_rows(&figures, &engine);
    Ok(())
}

/// What the table of the performance issue asks of the daemon.
struct Figures {
    heartbeats: f64,
    sends: f64,
    list_p99: Duration,
    /// Once the daemon rests after the fill (`None`: it did not within [`REST_LIMIT`]).
    list_rested_p99: Option<Duration>,
    stored: u64,
    /// After the send phases and 3 s quiet, and the peak until then.
    sends_quiet_kb: u64,
    sends_peak_kb: u64,
    /// After the fill to the list phase's size and 3 s quiet, and the peak of the run.
    quiet_kb: u64,
    peak_kb: u64,
}

/// The same work without the daemon: the store opened in this process on the database
/// the daemon just filled (no socket, no JSON-RPC), and the engine without crucible's
/// journal.
struct Engine {
    list: ListResult,
    store_sends: f64,
    engine_sends: f64,
}

async fn engine_alone(kiln: &Kiln, settings: &Settings) -> Result<Engine> {
    use crucible::store::Store;
    println!(
        "\n[5] the engine alone, in this process on the same database (no socket, no JSON-RPC)"
    );
    let config = crucible::config::StoreConfig::default();
    let store = Store::open(&config, &kiln.db_path())
        .await
        .context("opening the daemon's database in process")?;
    let mut latencies = Vec::with_capacity(LIST_CALLS);
    let mut returned = 0;
    let mut cold = Duration::ZERO;
    for i in 0..LIST_CALLS + LIST_WARMUP {
        let started = Instant::now();
        let messages = store
            .inbox()
            .list(true, None, LIST_LIMIT)
            .await
            .context("list_messages")?;
        let elapsed = started.elapsed();
        returned = messages.len();
        if i == 0 {
            cold = elapsed;
        }
        if i >= LIST_WARMUP {
            latencies.push(elapsed);
        }
    }
    let list = ListResult {
        cold,
        returned,
        latencies: Stats::new(latencies),
    };
    print!("  Store::list_messages (unread, limit {LIST_LIMIT}):");
    list.print();

    // Batches as the daemon's group commit makes them with 64 senders, one after another.
    let batch = |n: u64| -> Vec<crucible::protocol::InboxMessage> {
        (0..ENGINE_BATCH)
            .map(|i| crucible::protocol::InboxMessage {
                kiln: None,
                digest: None,
                id: ulid::Ulid::new().to_string(),
                session_id: "engine-alone".into(),
                session_name: "engine-alone".into(),
                timestamp: crucible::ledger::now_rfc3339(),
                msg_type: crucible::protocol::MsgType::Info,
                title: format!("engine #{n}/{i}"),
                body: Some(BODY.into()),
                options: None,
                option_kinds: None,
                rule: None,
                operation: None,
                read: false,
                responded: false,
                response: None,
                withdrawn: false,
                answered_by: None,
                purpose: None,
            })
            .collect()
    };
    let mut sent = 0u64;
    let started = Instant::now();
    while started.elapsed() < settings.level_duration {
        store
            .inbox()
            .insert(&batch(sent))
            .await
            .context("insert_messages")?;
        sent += ENGINE_BATCH as u64;
    }
    let store_sends = rate(sent, started.elapsed());
    println!(
        "  Store::insert_messages, {ENGINE_BATCH} a transaction (engine + crucible's fsynced journal): {} /s",
        thousands(store_sends as u64)
    );
    // The daemon's own statement; the timestamps become datetimes as its typed rows do.
    let create = "INSERT INTO inbox_messages array::map($rows, |$m| object::extend($m, \
        { timestamp: <datetime> $m.timestamp })) RETURN NONE";
    let mut sent = 0u64;
    let started = Instant::now();
    while started.elapsed() < settings.level_duration {
        let mut rows = serde_json::to_value(batch(sent)).context("encoding rows")?;
        // As the daemon's typed rows: absent fields rather than nulls.
        for row in rows.as_array_mut().into_iter().flatten() {
            if let Some(map) = row.as_object_mut() {
                map.retain(|_, v| !v.is_null());
            }
        }
        store
            .query(create, json!({"rows": rows}))
            .await
            .context("the engine alone")?;
        sent += ENGINE_BATCH as u64;
    }
    let engine_sends = rate(sent, started.elapsed());
    println!(
        "  the engine alone, {ENGINE_BATCH} records a transaction (no journal; the engine does not fsync, the journal does): {} /s",
        thousands(engine_sends as u64)
    );
    store.close().await;
    Ok(Engine {
        list,
        store_sends,
        engine_sends,
    })
}

/// The rows of the performance table this benchmark measures, with their targets.
fn print_rows(f: &Figures, engine: &Engine) {
    println!("\nrows of the performance table (issue: performance and footprint)");
    println!("| figure | value | target |");
    println!("| --- | --- | --- |");
    println!(
        "| `session.heartbeat`, {TARGET_CLIENTS} clients | {} /s (release) | >= {} /s |",
        thousands(f.heartbeats as u64),
        thousands(TARGET_HEARTBEATS_PER_SEC as u64)
    );
    println!(
        "| durable `inbox.send`, {TARGET_CLIENTS} clients | {} /s (store alone {} /s; engine alone {} /s) | >= {} /s |",
        thousands(f.sends as u64),
        thousands(engine.store_sends as u64),
        thousands(engine.engine_sends as u64),
        thousands(TARGET_SENDS_PER_SEC as u64)
    );
    println!(
        "| `inbox.list` unread limit {LIST_LIMIT}, {} stored | p99 {:.3} ms right after the fill, {} once the daemon rests (engine alone p99 {:.3} ms) | p99 <= {TARGET_LIST_P99_MS} ms at 1,000,000 stored |",
        thousands(f.stored),
        ms(f.list_p99),
        f.list_rested_p99
            .map_or("(it did not rest)".into(), |p| format!("{:.3} ms", ms(p))),
        ms(engine.list.p99()),
    );
    println!(
        "| daemon RSS after the send load, 3 s quiet | {:.1} MB (peak {:.1} MB); after filling to {}: {:.1} MB (peak {:.1} MB, the engine's level merge) | <= {TARGET_RSS_MB} MB, peak <= {TARGET_PEAK_MB} MB |",
        mb(f.sends_quiet_kb),
        mb(f.sends_peak_kb),
        thousands(f.stored),
        mb(f.quiet_kb),
        mb(f.peak_kb)
    );
}

// ---- the daemon process ----

struct Daemon {
    child: Child,
    stderr_path: PathBuf,
}

fn spawn_daemon(kiln: &Kiln, exe: &Path, xdg: &Path, stderr_path: &Path) -> Result<Daemon> {
    let stderr = std::fs::File::create(stderr_path)
        .with_context(|| format!("creating {}", stderr_path.display()))?;
    let child = Command::new(exe)
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .env("XDG_CONFIG_HOME", xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Whatever happens to this process, the daemon does not outlive it.
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "running {} --kiln {} daemon run",
                exe.display(),
                kiln.root().display()
            )
        })?;
    Ok(Daemon {
        child,
        stderr_path: stderr_path.to_path_buf(),
    })
}

/// Retries the handshake until the daemon answers, it exits, or the deadline passes.
async fn wait_for_daemon(kiln: &Kiln, daemon: &mut Daemon) -> Result<(Client, Duration)> {
    let started = Instant::now();
    let deadline = started + START_TIMEOUT;
    loop {
        let last_error = match Client::connect(kiln).await {
            Ok(client) => return Ok((client, started.elapsed())),
            Err(e) => e.to_string(),
        };
        if let Some(status) = daemon
            .child
            .try_wait()
            .context("checking the daemon process")?
        {
            bail!(
                "the daemon exited ({status}) before answering: {}",
                stderr_tail(&daemon.stderr_path)
            );
        }
        if Instant::now() >= deadline {
            bail!("the daemon did not answer within {START_TIMEOUT:?} (last error: {last_error})");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asks the daemon to shut down, and kills it if it has not exited in time.
async fn stop_daemon(kiln: &Kiln, daemon: &mut Daemon) -> String {
    if let Ok(Some(status)) = daemon.child.try_wait() {
        return format!("daemon had already exited ({status})");
    }
    let asked = tokio::time::timeout(Duration::from_secs(2), async {
        let client = Client::connect(kiln).await?;
        client.call::<m::DaemonShutdown>(&NoParams {}).await
    })
    .await;
    let asked = match asked {
        Ok(Ok(_)) => "daemon.shutdown sent".to_string(),
        Ok(Err(e)) => format!("daemon.shutdown failed ({e})"),
        Err(_) => "daemon.shutdown got no answer within 2 s".to_string(),
    };
    match tokio::time::timeout(STOP_TIMEOUT, daemon.child.wait()).await {
        Ok(Ok(status)) => format!("{asked}; daemon exited ({status})"),
        Ok(Err(e)) => format!("{asked}; waiting for the daemon failed ({e})"),
        Err(_) => match daemon.child.kill().await {
            Ok(()) => format!("{asked}; daemon did not exit within {STOP_TIMEOUT:?}, killed it"),
            Err(e) => format!(
                "{asked}; daemon did not exit within {STOP_TIMEOUT:?}, and killing it failed ({e})"
            ),
        },
    }
}

fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(10).collect();
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
    }
}

// ---- the benchmark ----

async fn bench(
    kiln: &Kiln,
    exe: &Path,
    settings: &Settings,
    daemon: &mut Daemon,
) -> Result<Figures> {
    let (control, startup) = wait_for_daemon(kiln, daemon).await?;
    let status = control
        .call::<m::DaemonStatusOf>(&NoParams {})
        .await
        .context("daemon.status")?;
    let pid = status.pid;
    if let Some(child_pid) = daemon.child.id()
        && child_pid != pid
    {
        println!("note: daemon.status reports pid {pid}, the child process is {child_pid}");
    }
    let rss_start = read_memory(pid)?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());

    println!("crucible daemon benchmark");
    println!("  daemon        {} (pid {pid})", exe.display());
    println!("  kiln          {}", kiln.root().display());
    println!("  database      {}", status.database);
    println!("  cpus          {cpus} (clients and daemon share them)");
    println!(
        "  per level     {:.1} s    inbox size for list: {}",
        settings.level_duration.as_secs_f64(),
        thousands(settings.messages)
    );
    println!(
        "  started in    {:.0} ms; RSS at start {:.1} MiB",
        ms(startup),
        mib(rss_start.rss_kb)
    );
    drop(control);

    // 1. heartbeats
    println!(
        "\n[1] session.heartbeat round trips (target >= {} /s with {TARGET_CLIENTS} clients)",
        thousands(TARGET_HEARTBEATS_PER_SEC as u64)
    );
    let mut heartbeats = Vec::new();
    for clients in LEVELS {
        let result = load_phase(kiln, Op::Heartbeat, clients, settings.level_duration).await?;
        result.print();
        heartbeats.push(result);
    }

    // 2. durable sends
    println!(
        "\n[2] inbox.send round trips, durable (target >= {} /s with {TARGET_CLIENTS} clients)",
        thousands(TARGET_SENDS_PER_SEC as u64)
    );
    let mut sends = Vec::new();
    for clients in LEVELS {
        let result = load_phase(kiln, Op::Send, clients, settings.level_duration).await?;
        result.print();
        sends.push(result);
    }

    // The send load of the table's row: the send phases, then 3 s quiet. The fill below
    // adds the engine's level merges of a million messages.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after_sends = read_memory(pid)?;
    println!(
        "  daemon after the send phases and 3 s quiet: VmRSS {:.1} MiB ({:.1} MB), peak VmHWM {:.1} MiB ({:.1} MB)",
        mib(after_sends.rss_kb),
        mb(after_sends.rss_kb),
        mib(after_sends.hwm_kb),
        mb(after_sends.hwm_kb),
    );

    // 3. fill, then list
    let control = Client::connect(kiln)
        .await
        .context("connecting the control client")?;
    let sent_so_far: u64 = sends.iter().map(|r| r.calls).sum();
    println!(
        "\n[3] inbox.list latency with {} messages (target p99 <= {TARGET_LIST_P99_MS} ms)",
        thousands(settings.messages)
    );
    let stored_before = stored_messages(&control, "after the send phases").await?;
    println!(
        "  stored by the send phases (db.query count): {} (acknowledged sends: {})",
        thousands(stored_before),
        thousands(sent_so_far)
    );
    let fill = fill_inbox(kiln, settings.messages.saturating_sub(stored_before)).await?;
    let stored = stored_messages(&control, "after the fill").await?;
    if fill.sent > 0 {
        println!(
            "  filled {} messages with {FILL_CLIENTS} senders in {:.1} s ({} /s){}",
            thousands(fill.sent),
            fill.elapsed.as_secs_f64(),
            thousands(rate(fill.sent, fill.elapsed) as u64),
            fill.error
                .as_ref()
                .map_or(String::new(), |e| format!("; stopped early: {e}")),
        );
    }
    println!(
        "  unread messages stored now (db.query count): {}",
        thousands(stored)
    );
    let list = list_latency(&control).await?;
    print!("  right after the fill: ");
    list.print();

    // 4. memory: right after the load, and once it has been quiet for a moment (the
    // daemon returns freed heap after a burst).
    let busy = read_memory(pid)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let memory = read_memory(pid)?;

    // The list again once the daemon rests: right after the fill the engine is still
    // merging the levels the fill wrote, and every read meets that work.
    let rest = wait_for_rest(pid).await?;
    let list_rested = list_latency(&control).await?;
    match rest {
        Some(after) => print!(
            "  once the daemon rests ({:.0} s after the fill): ",
            after.as_secs_f64()
        ),
        None => print!(
            "  the daemon still worked {:.0} s after the fill: ",
            REST_LIMIT.as_secs_f64()
        ),
    }
    list_rested.print();
    drop(control);
    println!(
        "\n[4] daemon memory after the load (target <= {TARGET_RSS_MB} MB after 3 s quiet, peak <= {TARGET_PEAK_MB} MB)"
    );
    for (when, m) in [
        ("right after the load", &busy),
        ("after 3 s quiet     ", &memory),
    ] {
        println!(
            "  {when}: VmRSS {:.1} MiB ({:.1} MB) = private (RssAnon) {:.1} MiB + mapped executable (RssFile) {:.1} MiB",
            mib(m.rss_kb),
            mb(m.rss_kb),
            mib(m.anon_kb),
            mib(m.file_kb),
        );
    }
    println!(
        "  peak VmHWM {:.1} MiB; at start VmRSS {:.1} MiB = {:.1} + {:.1} MiB",
        mib(memory.hwm_kb),
        mib(rss_start.rss_kb),
        mib(rss_start.anon_kb),
        mib(rss_start.file_kb),
    );

    summary(&heartbeats, &sends, &list, stored, &memory);
    let at_target = |results: &[PhaseResult]| {
        results
            .iter()
            .find(|r| r.clients == TARGET_CLIENTS)
            .map_or(0.0, PhaseResult::per_sec)
    };
    Ok(Figures {
        heartbeats: at_target(&heartbeats),
        sends: at_target(&sends),
        list_p99: list.p99(),
        list_rested_p99: rest.map(|_| list_rested.p99()),
        stored,
        sends_quiet_kb: after_sends.rss_kb,
        sends_peak_kb: after_sends.hwm_kb,
        quiet_kb: memory.rss_kb,
        peak_kb: memory.hwm_kb,
    })
}

/// What `daemon.status` reports as unread.
async fn status_unread(client: &Client) -> Result<u64> {
    let status = client
        .call::<m::DaemonStatusOf>(&NoParams {})
        .await
        .context("daemon.status")?;
    Ok(status.unread)
}

/// Unread messages actually stored, counted with `db.query`.
async fn stored_unread(client: &Client) -> Result<u64> {
    let sql = "SELECT count() AS n FROM inbox_messages WHERE read = false GROUP ALL";
    let answer = client
        .call::<m::DbQuery>(&params::query(sql, Value::Null))
        .await
        .context("db.query count")?;
    // An empty table gives no row at all.
    Ok(find_u64(&Value::Array(answer.result), "n").unwrap_or(0))
}

/// The first number stored under `key` anywhere in `value`.
fn find_u64(value: &Value, key: &str) -> Option<u64> {
    match value {
        Value::Object(map) => map
            .get(key)
            .and_then(Value::as_u64)
            .or_else(|| map.values().find_map(|v| find_u64(v, key))),
        Value::Array(items) => items.iter().find_map(|v| find_u64(v, key)),
        _ => None,
    }
}

/// Unread messages stored; says so when `daemon.status` reports another number.
async fn stored_messages(client: &Client, label: &str) -> Result<u64> {
    let stored = stored_unread(client).await?;
    let reported = status_unread(client).await?;
    if reported != stored {
        println!(
            "  note: daemon.status reports {} unread, but db.query counts {} ({label})",
            thousands(reported),
            thousands(stored)
        );
    }
    Ok(stored)
}

// ---- throughput phases ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Heartbeat,
    Send,
}

impl Op {
    fn method(self) -> &'static str {
        match self {
            Op::Heartbeat => "session.heartbeat",
            Op::Send => "inbox.send",
        }
    }
}

struct PhaseResult {
    op: Op,
    clients: usize,
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
    latencies: Stats,
}

impl PhaseResult {
    fn per_sec(&self) -> f64 {
        rate(self.calls, self.elapsed)
    }

    fn print(&self) {
        println!(
            "  {:>2} client{} {:>9} calls in {:.2} s = {:>9} /s   latency p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms{}",
            self.clients,
            if self.clients == 1 { " " } else { "s" },
            thousands(self.calls),
            self.elapsed.as_secs_f64(),
            thousands(self.per_sec() as u64),
            ms(self.latencies.median()),
            ms(self.latencies.percentile(0.99)),
            ms(self.latencies.max()),
            match &self.first_error {
                Some(e) => format!("   ERRORS: {} (first: {e})", self.errors),
                None => String::new(),
            },
        );
    }
}

struct TaskOutcome {
    calls: u64,
    latencies: Vec<Duration>,
    error: Option<String>,
}

/// Connects `n` clients, each registering its own session.
async fn connect_sessions(kiln: &Kiln, n: usize, label: &str) -> Result<Vec<(Client, String)>> {
    let connects = (0..n).map(|i| async move {
        let client = Client::connect(kiln)
            .await
            .with_context(|| format!("connecting {label} client {i}"))?;
        let registered = client
            .call::<m::SessionRegister>(&RegisterParams {
                agent_type: "bench".into(),
                agent_name: format!("{label}-{i}"),
                worktree: Some("bench".into()),
            })
            .await
            .with_context(|| format!("session.register for {label} client {i}"))?;
        Ok::<_, anyhow::Error>((client, registered.session_id))
    });
    futures::future::try_join_all(connects).await
}

/// `clients` connections, each making sequential calls until the shared deadline.
async fn load_phase(
    kiln: &Kiln,
    op: Op,
    clients: usize,
    duration: Duration,
) -> Result<PhaseResult> {
    let label = format!("{}-{clients}", op.method());
    let sessions = connect_sessions(kiln, clients, &label).await?;
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(worker, (client, session_id))| {
            tokio::spawn(async move {
                let mut outcome = TaskOutcome {
                    calls: 0,
                    latencies: Vec::with_capacity(16 * 1024),
                    error: None,
                };
                while Instant::now() < deadline {
                    let request = match op {
                        Op::Heartbeat => Request::SessionHeartbeat(params::session_id(&session_id)),
                        Op::Send => Request::InboxSend(params::note(
                            &session_id,
                            &format!("bench {clients}/{worker} #{}", outcome.calls),
                            BODY,
                        )),
                    };
                    let sent = Instant::now();
                    match client.send(&request).await {
                        Ok(_) => {
                            outcome.latencies.push(sent.elapsed());
                            outcome.calls += 1;
                        }
                        Err(e) => {
                            // Stop this client: a failing daemon must not be spun against.
                            outcome.error = Some(e.to_string());
                            break;
                        }
                    }
                }
                drop(client);
                outcome
            })
        })
        .collect();
    let mut result = PhaseResult {
        op,
        clients,
        calls: 0,
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        latencies: Stats::default(),
    };
    let mut latencies = Vec::new();
    for task in tasks {
        let outcome = task
            .await
            .with_context(|| format!("a {label} client task panicked"))?;
        result.calls += outcome.calls;
        latencies.extend(outcome.latencies);
        if let Some(e) = outcome.error {
            result.errors += 1;
            result.first_error.get_or_insert(e);
        }
    }
    result.elapsed = start.elapsed();
    result.latencies = Stats::new(latencies);
    Ok(result)
}

// ---- fill and list ----

struct FillResult {
    sent: u64,
    elapsed: Duration,
    error: Option<String>,
}

/// Sends `count` messages with `FILL_CLIENTS` concurrent senders sharing one counter.
async fn fill_inbox(kiln: &Kiln, count: u64) -> Result<FillResult> {
    if count == 0 {
        return Ok(FillResult {
            sent: 0,
            elapsed: Duration::ZERO,
            error: None,
        });
    }
    let senders = FILL_CLIENTS.min(count as usize);
    let sessions = connect_sessions(kiln, senders, "fill").await?;
    let claimed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let cap = start + FILL_TIME_CAP;
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|(client, session_id)| {
            let claimed = Arc::clone(&claimed);
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                loop {
                    let n = claimed.fetch_add(1, Ordering::Relaxed);
                    if n >= count {
                        return None;
                    }
                    if Instant::now() >= cap {
                        return Some(format!("the fill took longer than {FILL_TIME_CAP:?}"));
                    }
                    let params = params::note(&session_id, &format!("fill #{n}"), BODY);
                    if let Err(e) = client.call::<m::InboxSend>(&params).await {
                        return Some(format!("inbox.send failed: {e}"));
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    tokio::pin!(all);
    let mut ticker = tokio::time::interval(FILL_PROGRESS_EVERY);
    ticker.tick().await;
    let outcomes = loop {
        tokio::select! {
            outcomes = &mut all => break outcomes,
            _ = ticker.tick() => {
                let sent = done.load(Ordering::Relaxed);
                eprintln!(
                    "  ... filling: {} / {} sent ({} /s)",
                    thousands(sent),
                    thousands(count),
                    thousands(rate(sent, start.elapsed()) as u64)
                );
            }
        }
    };
    let mut error = None;
    for outcome in outcomes {
        if let Some(e) = outcome.context("a fill task panicked")? {
            error.get_or_insert(e);
        }
    }
    Ok(FillResult {
        sent: done.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        error,
    })
}

struct ListResult {
    cold: Duration,
    returned: usize,
    latencies: Stats,
}

impl ListResult {
    fn p50(&self) -> Duration {
        self.latencies.median()
    }
    fn p95(&self) -> Duration {
        self.latencies.percentile(0.95)
    }
    fn p99(&self) -> Duration {
        self.latencies.percentile(0.99)
    }
    fn max(&self) -> Duration {
        self.latencies.max()
    }

    fn print(&self) {
        println!(
            "  {LIST_CALLS} calls (after {LIST_WARMUP} warm-up; first call {:.3} ms), {} messages returned each: \
             p50 {:.3} ms  p95 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            ms(self.cold),
            self.returned,
            ms(self.p50()),
            ms(self.p95()),
            ms(self.p99()),
            ms(self.max()),
        );
    }
}

async fn list_latency(client: &Client) -> Result<ListResult> {
    let params = ListParams {
        unread_only: true,
        limit: Some(LIST_LIMIT),
        session_id: None,
    };
    let list = |params: ListParams| async move {
        let sent = Instant::now();
        let answer = client
            .call::<m::InboxList>(&params)
            .await
            .context("inbox.list")?;
        Ok::<_, anyhow::Error>((sent.elapsed(), answer.messages.len()))
    };
    let (cold, returned) = list(params.clone()).await?;
    for _ in 1..LIST_WARMUP {
        list(params.clone()).await?;
    }
    let mut latencies = Vec::with_capacity(LIST_CALLS);
    for _ in 0..LIST_CALLS {
        let (elapsed, _) = list(params.clone()).await?;
        latencies.push(elapsed);
    }
    Ok(ListResult {
        cold,
        returned,
        latencies: Stats::new(latencies),
    })
}

/// How long the daemon may keep working after the fill before the list is timed anyway.
const REST_LIMIT: Duration = Duration::from_secs(180);

/// Waits until the daemon has used at most one clock tick (10 ms) of CPU in a second,
/// that is, until the engine has finished the merges the fill started. Returns how long
/// that took, or `None` if it had not after [`REST_LIMIT`].
async fn wait_for_rest(pid: u32) -> Result<Option<Duration>> {
    let started = Instant::now();
    let mut before = proc_stat(pid)?;
    while started.elapsed() < REST_LIMIT {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = proc_stat(pid)?;
        if now.saturating_sub(before) <= 1 {
            return Ok(Some(started.elapsed()));
        }
        before = now;
    }
    Ok(None)
}

// ---- memory ----

struct Memory {
    rss_kb: u64,
    hwm_kb: u64,
    /// Heap and other private memory; the rest of RSS is the mapped executable.
    anon_kb: u64,
    file_kb: u64,
}

fn read_memory(pid: u32) -> Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| -> Result<u64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| anyhow!("{path} has no {name} line"))?;
        line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .with_context(|| format!("parsing {line:?} in {path}"))
    };
    Ok(Memory {
        rss_kb: field("VmRSS:")?,
        hwm_kb: field("VmHWM:")?,
        anon_kb: field("RssAnon:")?,
        file_kb: field("RssFile:")?,
    })
}

// ---- summary ----

fn summary(
    heartbeats: &[PhaseResult],
    sends: &[PhaseResult],
    list: &ListResult,
    stored: u64,
    memory: &Memory,
) {
    let mut rows: Vec<[String; 4]> = Vec::new();
    for result in heartbeats.iter().chain(sends) {
        let (name, target) = match result.op {
            Op::Heartbeat => ("session.heartbeat", TARGET_HEARTBEATS_PER_SEC),
            Op::Send => ("inbox.send (durable)", TARGET_SENDS_PER_SEC),
        };
        let per_sec = result.per_sec();
        let counts = result.clients == TARGET_CLIENTS;
        let errors = if result.errors > 0 {
            format!(" ({} clients failed)", result.errors)
        } else {
            String::new()
        };
        rows.push([
            format!(
                "{name}, {} client{}",
                result.clients,
                if result.clients == 1 { "" } else { "s" }
            ),
            format!("{} /s{errors}", thousands(per_sec as u64)),
            if counts {
                format!(">= {} /s", thousands(target as u64))
            } else {
                "(reference)".into()
            },
            if counts {
                verdict(per_sec >= target && result.errors == 0)
            } else {
                String::new()
            },
        ]);
    }
    for (name, value, target) in [
        ("p50", list.p50(), None),
        ("p99", list.p99(), Some(TARGET_LIST_P99_MS)),
        ("max", list.max(), None),
    ] {
        rows.push([
            format!(
                "inbox.list {name} ({} stored, limit {LIST_LIMIT})",
                thousands(stored)
            ),
            format!("{:.3} ms", ms(value)),
            target.map_or("(reference)".into(), |t| format!("<= {t} ms")),
            target.map_or(String::new(), |t| verdict(ms(value) <= t)),
        ]);
    }
    for (name, kb, target) in [
        (
            "daemon VmRSS after load, 3 s quiet",
            memory.rss_kb,
            Some(TARGET_RSS_MB),
        ),
        ("  of which private (heap, stacks)", memory.anon_kb, None),
        (
            "daemon VmHWM (peak RSS)",
            memory.hwm_kb,
            Some(TARGET_PEAK_MB),
        ),
    ] {
        rows.push([
            name.to_string(),
            format!("{:.1} MiB ({:.1} MB)", mib(kb), mb(kb)),
            target.map_or("(reference)".into(), |t| format!("<= {t} MB")),
            target.map_or(String::new(), |t| verdict(mb(kb) <= t)),
        ]);
    }

    let header = ["metric", "figure", "target", "vs target"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        format!(
            "| {:<w0$} | {:>w1$} | {:<w2$} | {:<w3$} |",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        )
    };
    let rule = format!(
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    );
    println!("\nSUMMARY");
    println!("{}", line(header));
    println!("{rule}");
    for row in &rows {
        println!("{}", line([&row[0], &row[1], &row[2], &row[3]]));
    }
}

fn verdict(met: bool) -> String {
    if met { "met".into() } else { "NOT met".into() }
}

// ---- small helpers ----

fn rate(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn mb(kb: u64) -> f64 {
    kb as f64 * 1024.0 / 1_000_000.0
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
