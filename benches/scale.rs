//! Scale benchmark: many streaming sessions on one daemon. The real `cru daemon run` on a
//! temp kiln drives 100 sessions of `cru-scripted-agent`, each in its own git worktree
//! and each streaming a timestamped message every 100 ms (about 1000 events/s in all);
//! this process follows them as the workbench does and draws every frame.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench scale
//! ```
//!
//! Environment:
//! - `CRU_BENCH_SCALE_SECS`: length of the streaming measurement window (default 20).
//! - `CRU_BENCH_SCALE_SESSIONS`: sessions streaming at once (default 100).
//!
//! Phases:
//! 1. Idle: the daemon with no session, a few seconds after start: its RSS (`VmRSS`, of
//!    it the private `RssAnon`) and CPU time (utime+stime from `/proc/<pid>/stat`).
//! 2. Create: the sessions are made one after another with `session.create` over the
//!    socket; each task is a script of `stamp` + `sleep 100` lines (the scripted agent
//!    says `stamp <unix ns>` in one chunk, the moment it sends it).
//! 3. Streaming: over the window, the daemon's CPU (% of one core, and ms per second per
//!    session), RSS ((RSS at the window's end − RSS idle) / sessions, and its growth
//!    during the window) and disk writes (`/proc/<pid>/io`), the agents' and this
//!    process's CPU for reference, and the stamps per second the daemon passed on.
//! 4. Event to frame, in process: a second connection subscribes to every event and
//!    feeds the TUI's own [`Model`] (`sync`, then `Event::from_notification` +
//!    `Model::apply`), drawing with [`render`] into a 120×30 ratatui `TestBackend` with
//!    the default theme, as the real loop does: after a notification, everything already
//!    queued (up to 256 more) is applied, then one frame is drawn. For each `stamp` chunk
//!    applied before a frame, latency = the time that frame finished − the stamp (also:
//!    − when it was applied, and the p99 per quarter of the window), for every stamp sent
//!    in the window: after it, the workbench follows until each session has shown a stamp
//!    sent later (how long that takes is the backlog). The terminal write of a real TUI
//!    is not included.
//!
//! Before and after, the disk is probed: `fdatasync` after a small append in the temp
//! dir, which every durable write of the daemon waits for at least. The streaming
//! figures depend on it (and on other work on the machine) more than on anything else.
//!
//! Figures are printed, never asserted. Everything started here is stopped at the end,
//! on success and on failure alike (`daemon.shutdown`, then signals as a last resort).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

#[path = "support/figures.rs"]
mod figures;
#[path = "support/kiln.rs"]
mod kiln;
#[path = "support/ship.rs"]
mod ship;

#[path = "../tests/equipment/built.rs"]
mod built;
#[path = "../tests/equipment/cargo_env.rs"]
mod cargo_env;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::{
    CreateSessionParams, Event, ListParams, Notification, TranscriptEntry, TranscriptParams,
};
use crucible::tui::{Action, Keymap, Model, Theme, ViewState, render};
use figures::{Stats, env_number, load_average, ms, proc_stat};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

/// The `cru` measured: the shipping binary (see `support/ship.rs`), or with
/// `CRU_BENCH_SHIP=0` this bench build's own.
fn cru() -> &'static Path {
    static CRU: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CRU.get_or_init(|| ship::cru_to_measure(env!("CARGO_BIN_EXE_cru")))
}
/// The scripted ACP agent, in this benchmark's profile.
fn scripted_agent() -> &'static str {
    built::scripted_agent(std::path::Path::new(env!("CARGO_BIN_EXE_cru")))
}

const DEFAULT_SECS: u64 = 20;
const DEFAULT_SESSIONS: usize = 100;
/// The pause after each stamp, in ms: about 10 events/s per session.
const STAMP_EVERY_MS: u64 = 100;
/// How long each session's script streams beyond the window: creating the sessions and
/// settling happen while the first ones already stream.
const STREAM_MARGIN: Duration = Duration::from_secs(150);
/// The in-process workbench's terminal.
const SCREEN: (u16, u16) = (120, 30);
/// Queued notifications applied before a frame is drawn (as `src/tui/run.rs`).
const BATCH: usize = 256;
/// How many messages the workbench reads when it (re)synchronises (as the TUI).
const INBOX_WINDOW: u32 = 500;

/// `fdatasync` calls timed by the disk probe, and the size of each append.
const PROBES: usize = 100;
const PROBE_BYTES: usize = 256;

/// Quiet time after the daemon answers, before the idle figures.
const IDLE_SETTLE: Duration = Duration::from_secs(3);
/// The idle CPU window.
const IDLE_WINDOW: Duration = Duration::from_secs(5);
/// Time between every session streaming and the measurement window.
const STREAM_SETTLE: Duration = Duration::from_secs(3);
/// How long after the window the workbench may take to draw every stamp sent in it.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the daemon may take to answer its first handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long every session may take to stream once created.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the daemon may take to exit after `daemon.shutdown` before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nbenchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct Settings {
    window: Duration,
    sessions: usize,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let secs = env_number("CRU_BENCH_SCALE_SECS", DEFAULT_SECS)?;
        let sessions = env_number("CRU_BENCH_SCALE_SESSIONS", DEFAULT_SESSIONS as u64)? as usize;
        if !(1..=3600).contains(&secs) {
            bail!("CRU_BENCH_SCALE_SECS must be between 1 and 3600, not {secs}");
        }
        if !(1..=1000).contains(&sessions) {
            bail!("CRU_BENCH_SCALE_SESSIONS must be between 1 and 1000, not {sessions}");
        }
        Ok(Self {
            window: Duration::from_secs(secs),
            sessions,
        })
    }

    /// Stamps in each session's script: the window plus the margin.
    fn stamps(&self) -> u64 {
        (self.window + STREAM_MARGIN).as_millis() as u64 / STAMP_EVERY_MS
    }
}

fn run() -> Result<()> {
    let settings = Settings::from_env()?;
    let lab = Lab::new()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    print_header(&settings);
    println!(
        "  disk          fdatasync of a {PROBE_BYTES} B append in the kiln's file system \
         (what each durable write waits for, at least): {}",
        fsync_probe(&lab.base)?.describe()
    );
    let report = runtime.block_on(async {
        let mut daemon = Daemon::start(&lab)?;
        let outcome = bench(&lab, &settings, &mut daemon).await;
        let stopped = daemon.stop(&lab.kiln).await;
        println!("\n{stopped}");
        if outcome.is_err() {
            eprintln!("daemon stderr (last lines): {}", daemon.stderr_tail());
        }
        outcome
    })?;
    println!(
        "disk afterwards: fdatasync of a {PROBE_BYTES} B append: {}",
        fsync_probe(&lab.base)?.describe()
    );
    println!("load average at the end: {}", load_average());
    report.print_rows();
    Ok(())
}

/// Times `fdatasync` after a small append, as the daemon's stores do for every durable
/// write: the disk's floor for the write path (it varies with other I/O on the machine).
fn fsync_probe(dir: &Path) -> Result<Stats> {
    use std::io::Write as _;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut line = vec![b'x'; PROBE_BYTES - 1];
    line.push(b'\n');
    let mut times = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let start = Instant::now();
        file.write_all(&line).context("writing the probe file")?;
        file.sync_data().context("fdatasync of the probe file")?;
        times.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path).context("removing the probe file")?;
    Ok(Stats::new(times))
}

fn print_header(settings: &Settings) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("crucible scale benchmark: sessions streaming on one daemon");
    println!("  cru           {}", cru().display());
    println!(
        "  cpus          {cpus} (the daemon, the agents and this bench's workbench share them)"
    );
    println!(
        "  build         crucible's own code {}",
        if cfg!(debug_assertions) {
            "unoptimised (debug assertions on)"
        } else {
            "optimised"
        }
    );
    println!(
        "  load average  {} (other work on the machine competes)",
        load_average()
    );
    println!(
        "  settings      {} sessions, each `stamp` + `sleep {STAMP_EVERY_MS}` × {} (one chunk \
         about every {STAMP_EVERY_MS} ms); window {} s",
        settings.sessions,
        settings.stamps(),
        settings.window.as_secs()
    );
}

// ---- the benchmark ----

/// What the performance table needs.
struct Report {
    sessions: usize,
    p99_ms: f64,
    cpu_ms_per_sec_per_session: f64,
    rss_kib_per_session: f64,
}

impl Report {
    fn print_rows(&self) {
        println!("\nrows of the performance table (issue: performance and footprint)");
        println!(
            "| sessions per daemon | {} streaming: event-to-frame p99 {:.1} ms; daemon CPU \
             {:.2} ms/s and RSS {:.0} KiB per session | event-to-frame p99 ≤ 20 ms, daemon \
             CPU and RSS reported per session |",
            self.sessions, self.p99_ms, self.cpu_ms_per_sec_per_session, self.rss_kib_per_session
        );
    }
}

async fn bench(lab: &Lab, settings: &Settings, daemon: &mut Daemon) -> Result<Report> {
    let (control, startup) = daemon.wait_ready(&lab.kiln).await?;
    let status = control
        .call::<m::DaemonStatusOf>(&m::NoParams {})
        .await
        .context("daemon.status")?;
    let pid = status.pid;
    if Some(pid) != daemon.child.id() {
        bail!(
            "daemon.status says pid {pid}, but the daemon started here is {:?}",
            daemon.child.id()
        );
    }
    let tick_ms = 1000.0 / clock_ticks();

    // [1] idle
    println!(
        "\n[1] the daemon idle, no session: answered after {:.0} ms; {} s later, CPU over \
         {} s",
        ms(startup),
        IDLE_SETTLE.as_secs(),
        IDLE_WINDOW.as_secs()
    );
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle_start = proc_stat(pid)?;
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle_end = proc_stat(pid)?;
    let idle_mem = proc_memory(pid)?;
    let idle_cpu_ms = (idle_end - idle_start) as f64 * tick_ms;
    println!("  RSS           {}", idle_mem.describe());
    println!(
        "  CPU           {idle_cpu_ms:.0} ms over {} s = {:.2}% of one core (clock ticks of \
         {tick_ms:.0} ms)",
        IDLE_WINDOW.as_secs(),
        percent(idle_cpu_ms, IDLE_WINDOW)
    );

    // The workbench follows from before the first session on, as an open TUI would.
    let record = Arc::new(Mutex::new(Record::default()));
    let (stop_follower, stopped) = oneshot::channel();
    let follower = Follower::connect(&lab.kiln, Arc::clone(&record)).await?;
    let follower = tokio::spawn(follower.run(stopped));

    // [2] create
    println!(
        "\n[2] creating {} sessions: session.create over the socket, one after another \
         (each makes a git worktree and starts an agent)",
        settings.sessions
    );
    let script: String = (0..settings.stamps())
        .map(|_| format!("stamp\nsleep {STAMP_EVERY_MS}\n"))
        .collect();
    let created_at = Instant::now();
    let mut create_times = Vec::with_capacity(settings.sessions);
    let mut ids = Vec::with_capacity(settings.sessions);
    for _ in 0..settings.sessions {
        let start = Instant::now();
        let created = control
            .call::<m::SessionCreate>(&CreateSessionParams {
                agent: "scripted".into(),
                worktree: None,
                in_place: false,
                task: Some(script.clone()),
                driver: Default::default(),
                allow_read: Vec::new(),
                channel: None,
            })
            .await
            .with_context(|| format!("session.create (session {})", ids.len() + 1))?;
        create_times.push(start.elapsed());
        ids.push(created.session_id);
    }
    let all_created = created_at.elapsed();
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let streaming = {
            let record = record.lock().unwrap();
            ids.iter()
                .filter(|id| record.sessions.contains_key(id.as_str()))
                .count()
        };
        if streaming == ids.len() {
            break;
        }
        if follower.is_finished() {
            bail!(
                "the workbench stopped following: {}",
                finished(follower).await
            );
        }
        if Instant::now() > deadline {
            bail!(
                "after {READY_TIMEOUT:?}, {streaming} of {} sessions stream",
                ids.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all_streaming = created_at.elapsed();
    let creates = Stats::new(create_times);
    println!(
        "  session.create round trip: {} (script {} B)",
        creates.describe(),
        script.len()
    );
    println!(
        "  all created after {:.1} s; create → every session streaming (a stamp of each seen \
         by the workbench): {:.1} s",
        all_created.as_secs_f64(),
        all_streaming.as_secs_f64()
    );

    let sessions = control
        .call::<m::SessionList>(&Default::default())
        .await
        .context("session.list")?
        .sessions;
    let agents: Vec<u32> = sessions
        .iter()
        .filter(|s| ids.contains(&s.id))
        .filter_map(|s| s.agent_pid)
        .collect();
    daemon.agents.clone_from(&agents);
    if agents.len() != ids.len() {
        bail!(
            "{} of {} sessions have an agent process",
            agents.len(),
            ids.len()
        );
    }
    let not_agents: Vec<u32> = agents
        .iter()
        .copied()
        .filter(|&p| !is_scripted_agent(p))
        .collect();
    if !not_agents.is_empty() {
        bail!("agent_pid is not cru-scripted-agent for {not_agents:?}");
    }

    // [3] streaming window
    tokio::time::sleep(STREAM_SETTLE).await;
    println!(
        "\n[3] {} sessions streaming: a window of {} s, {} s after the last one started",
        ids.len(),
        settings.window.as_secs(),
        STREAM_SETTLE.as_secs()
    );
    let own = std::process::id();
    let window_start = unix_ns();
    let started = Instant::now();
    let mem_start = proc_memory(pid)?;
    let daemon_start = proc_stat(pid)?;
    let io_start = proc_io(pid)?;
    let agents_start: HashMap<u32, u64> = agents
        .iter()
        .filter_map(|&p| Some((p, proc_stat(p).ok()?)))
        .collect();
    let own_start = proc_stat(own)?;
    let counts_start = record.lock().unwrap().counts;
    tokio::time::sleep(settings.window).await;
    let counts_end = record.lock().unwrap().counts;
    let own_end = proc_stat(own)?;
    let agents_end: HashMap<u32, u64> = agents
        .iter()
        .filter_map(|&p| Some((p, proc_stat(p).ok()?)))
        .collect();
    let daemon_end = proc_stat(pid)?;
    let io_end = proc_io(pid)?;
    let elapsed = started.elapsed();
    let window_end = unix_ns();
    let mem_end = proc_memory(pid)?;
    let agents_mem: u64 = agents
        .iter()
        .filter_map(|&p| proc_memory(p).ok())
        .map(|m| m.rss_kib)
        .sum();
    // A stamp sent in the window may still be on its way: follow until every session
    // has shown one sent after the window (each session's stamps arrive in order).
    let catch_up = Instant::now();
    let behind = loop {
        let behind = {
            let record = record.lock().unwrap();
            ids.iter()
                .filter(|id| {
                    record
                        .sessions
                        .get(id.as_str())
                        .is_none_or(|s| s.last_stamp < window_end)
                })
                .count()
        };
        if follower.is_finished() {
            bail!(
                "the workbench stopped following: {}",
                finished(follower).await
            );
        }
        if behind == 0 || catch_up.elapsed() > CATCH_UP_TIMEOUT {
            break behind;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let caught_up = catch_up.elapsed();
    let _ = stop_follower.send(());
    let record = follower
        .await
        .context("the workbench task")?
        .context("the workbench")?;

    let n = ids.len() as f64;
    let secs = elapsed.as_secs_f64();
    let daemon_cpu_ms = (daemon_end - daemon_start) as f64 * tick_ms;
    let agents_cpu_ms: f64 = agents_end
        .iter()
        .filter_map(|(p, end)| Some(end.saturating_sub(*agents_start.get(p)?)))
        .sum::<u64>() as f64
        * tick_ms;
    let own_cpu_ms = (own_end - own_start) as f64 * tick_ms;
    let idle_rate = idle_cpu_ms / IDLE_WINDOW.as_secs_f64();
    let daemon_rate = daemon_cpu_ms / secs;
    let rss_per_session = (mem_end.rss_kib as f64 - idle_mem.rss_kib as f64) / n;
    let anon_per_session = (mem_end.anon_kib as f64 - idle_mem.anon_kib as f64) / n;

    // Sent by the agents in the window (all of them drawn by now), and applied in it
    // (what the daemon passed on while it was measured).
    let stamps = record.stamps_within(window_start, window_end);
    let delivered = record
        .stamps
        .iter()
        .filter(|s| (window_start..=window_end).contains(&s.applied))
        .count()
        .max(1) as f64;
    let counts = counts_end.since(&counts_start);
    let per_session: Vec<u64> = ids
        .iter()
        .map(|id| {
            record
                .sessions
                .get(id.as_str())
                .map_or(0, |s| s.in_window(window_start, window_end))
        })
        .collect();
    let (fewest, most) = (
        per_session.iter().min().copied().unwrap_or(0),
        per_session.iter().max().copied().unwrap_or(0),
    );

    println!("  daemon RSS    idle         {}", idle_mem.describe());
    println!("                window start {}", mem_start.describe());
    println!("                window end   {}", mem_end.describe());
    println!(
        "                per session  {rss_per_session:.0} KiB VmRSS, {anon_per_session:.0} KiB \
         RssAnon ((window end − idle) / {})",
        ids.len()
    );
    let growth_kib = mem_end.rss_kib as f64 - mem_start.rss_kib as f64;
    println!(
        "                growth over the window {growth_kib:+.0} KiB VmRSS ({:+.1} KiB/s, \
         {:+.0} B per stamp)",
        growth_kib / secs,
        growth_kib * 1024.0 / delivered
    );
    println!(
        "  daemon CPU    {daemon_cpu_ms:.0} ms over {secs:.1} s = {:.1}% of one core; per \
         session {:.2} ms/s ({:.2} ms/s over idle); per stamp {:.0} µs",
        percent(daemon_cpu_ms, elapsed),
        daemon_rate / n,
        (daemon_rate - idle_rate) / n,
        daemon_cpu_ms * 1000.0 / delivered,
    );
    let io = io_end.since(&io_start);
    println!(
        "  daemon I/O    {:.1} MiB written to disk ({:.0} KiB/s, {:.1} KiB per stamp), \
         {:.0} write calls/s ({:.1} per stamp)",
        io.write_bytes as f64 / (1024.0 * 1024.0),
        io.write_bytes as f64 / 1024.0 / secs,
        io.write_bytes as f64 / 1024.0 / delivered,
        io.syscw as f64 / secs,
        io.syscw as f64 / delivered
    );
    println!(
        "  agents        {} processes: CPU {agents_cpu_ms:.0} ms = {:.1}% of one core in all \
         ({:.2} ms/s each); RSS {} KiB in all ({:.0} KiB each)",
        agents.len(),
        percent(agents_cpu_ms, elapsed),
        agents_cpu_ms / secs / n,
        agents_mem,
        agents_mem as f64 / n
    );
    println!(
        "  this bench    CPU {own_cpu_ms:.0} ms = {:.1}% of one core (the in-process \
         workbench: reading the socket, applying events, drawing)",
        percent(own_cpu_ms, elapsed)
    );
    println!(
        "  events        {:.0} stamps/s sent by the agents ({:.1} per session per second; \
         fewest {fewest}, most {most} of one session in the window); {:.0} stamps/s and \
         {:.0} notifications/s in all passed on by the daemon in the window; \
         events.lagged {}",
        stamps.len() as f64 / secs,
        stamps.len() as f64 / secs / n,
        delivered / secs,
        counts.notes as f64 / secs,
        counts.lagged
    );
    if behind == 0 {
        println!(
            "  backlog       every stamp sent in the window was drawn {:.2} s after its end",
            caught_up.as_secs_f64()
        );
    } else {
        println!(
            "  backlog       {behind} of {} sessions had not shown a stamp sent after the \
             window {:.0} s after its end: their last stamps are missing from [4]",
            ids.len(),
            caught_up.as_secs_f64()
        );
    }
    let draws = record.draws_within(window_start, window_end);
    let draw_times = Stats::new(draws.iter().map(|d| d.took).collect());
    let per_frame: Vec<usize> = draws.iter().map(|d| d.notes).collect();
    println!(
        "  frames        {:.0} frames/s; notifications per frame mean {:.1}, max {}; draw \
         time {}",
        draws.len() as f64 / secs,
        per_frame.iter().sum::<usize>() as f64 / per_frame.len().max(1) as f64,
        per_frame.iter().max().copied().unwrap_or(0),
        draw_times.describe()
    );

    // [4] event to frame
    println!(
        "\n[4] event to frame, in process: the TUI's Model and render fed by the real \
         daemon's notifications over the socket, {}x{} TestBackend; latency = the frame \
         finished − the agent's stamp (SystemTime); the terminal write is not included",
        SCREEN.0, SCREEN.1
    );
    let to_frame = Stats::new(stamps.iter().map(|s| s.to_frame()).collect());
    let focused = Stats::new(
        stamps
            .iter()
            .filter(|s| s.focused)
            .map(|s| s.to_frame())
            .collect(),
    );
    let to_applied = Stats::new(stamps.iter().map(|s| s.to_applied()).collect());
    let quarter = (window_end - window_start) / 4;
    let quarters: Vec<String> = (0..4)
        .map(|q| {
            let from = window_start + q * quarter;
            let slice = Stats::new(
                stamps
                    .iter()
                    .filter(|s| (from..from + quarter).contains(&s.stamp))
                    .map(|s| s.to_frame())
                    .collect(),
            );
            format!(
                "{:.1}/{:.1}",
                ms(slice.percentile(0.99)),
                ms(slice.percentile(1.0))
            )
        })
        .collect();
    println!("  stamp → frame, every session    {}", to_frame.describe());
    println!("  stamp → frame, focused session  {}", focused.describe());
    println!(
        "  stamp → applied to the model    {} (the notification read from the socket, before \
         the frame)",
        to_applied.describe()
    );
    println!(
        "  stamp → frame p99/max (ms) by quarter of the window: {}",
        quarters.join(", ")
    );
    if let Some(slowest) = stamps.iter().max_by_key(|s| s.to_frame()) {
        // Wall-clock, to find what the daemon's log says of that moment.
        let at = slowest.stamp;
        println!(
            "  the slowest stamp was sent {:.3} s into the window, at {}.{:09} s since the Unix epoch",
            at.saturating_sub(window_start) as f64 / 1e9,
            at / 1_000_000_000,
            at % 1_000_000_000
        );
    }

    Ok(Report {
        sessions: ids.len(),
        p99_ms: ms(to_frame.percentile(0.99)),
        cpu_ms_per_sec_per_session: daemon_rate / n,
        rss_kib_per_session: rss_per_session,
    })
}

/// Why a finished task finished.
async fn finished(task: tokio::task::JoinHandle<Result<Record>>) -> String {
    match task.await {
        Ok(Ok(_)) => "it ended".into(),
        Ok(Err(e)) => format!("{e:#}"),
        Err(e) => e.to_string(),
    }
}

fn is_scripted_agent(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("cru-scripted-agent"))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn percent(cpu_ms: f64, over: Duration) -> f64 {
    100.0 * cpu_ms / ms(over)
}

// ---- the in-process workbench ----

/// What the workbench saw, shared with the benchmark.
#[derive(Default)]
struct Record {
    stamps: Vec<Stamp>,
    draws: Vec<Draw>,
    /// Per session: the stamps seen.
    sessions: HashMap<String, Seen>,
    counts: Counts,
}

impl Record {
    fn stamps_within(&self, from: u64, to: u64) -> Vec<&Stamp> {
        self.stamps
            .iter()
            .filter(|s| (from..=to).contains(&s.stamp))
            .collect()
    }

    fn draws_within(&self, from: u64, to: u64) -> Vec<&Draw> {
        self.draws
            .iter()
            .filter(|d| (from..=to).contains(&d.at))
            .collect()
    }
}

#[derive(Default)]
struct Seen {
    /// When the agent sent each stamp (ns since the Unix epoch).
    times: Vec<u64>,
    last_stamp: u64,
}

impl Seen {
    fn in_window(&self, from: u64, to: u64) -> u64 {
        self.times
            .iter()
            .filter(|t| (from..=to).contains(t))
            .count() as u64
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    notes: u64,
    lagged: u64,
}

impl Counts {
    fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            notes: self.notes - earlier.notes,
            lagged: self.lagged - earlier.lagged,
        }
    }
}

/// One `stamp` chunk: when the agent sent it, when it was applied, and when the frame
/// after it finished (ns since the Unix epoch).
struct Stamp {
    stamp: u64,
    applied: u64,
    frame: u64,
    /// Of the focused session when it was applied.
    focused: bool,
}

impl Stamp {
    fn to_frame(&self) -> Duration {
        Duration::from_nanos(self.frame.saturating_sub(self.stamp))
    }

    fn to_applied(&self) -> Duration {
        Duration::from_nanos(self.applied.saturating_sub(self.stamp))
    }
}

struct Draw {
    /// When it finished (ns since the Unix epoch).
    at: u64,
    took: Duration,
    /// Notifications applied since the frame before.
    notes: usize,
}

/// A stamp applied and not yet drawn.
struct Pending {
    session_id: String,
    stamp: u64,
    applied: u64,
    focused: bool,
}

/// A session's transcript page, loaded because the model asked for it.
type Loaded = (String, Vec<TranscriptEntry>);

/// The TUI's model and renderer on a subscribed connection, driven as `src/tui/run.rs`
/// drives them (without keys, settings and the terminal write).
struct Follower {
    client: Arc<Client>,
    notes: mpsc::UnboundedReceiver<Notification>,
    model: Model,
    view: ViewState,
    theme: Theme,
    terminal: Terminal<TestBackend>,
    record: Arc<Mutex<Record>>,
    loads: (
        mpsc::UnboundedSender<Loaded>,
        mpsc::UnboundedReceiver<Loaded>,
    ),
    pending: Vec<Pending>,
    applied: usize,
}

impl Follower {
    async fn connect(kiln: &Kiln, record: Arc<Mutex<Record>>) -> Result<Self> {
        let client = Client::connect(kiln)
            .await
            .context("connecting the workbench")?;
        let notes = client.subscribe(None).await.context("subscribe")?;
        let terminal =
            Terminal::new(TestBackend::new(SCREEN.0, SCREEN.1)).context("a test terminal")?;
        let mut follower = Self {
            client: Arc::new(client),
            notes,
            model: Model::new(Keymap::default()),
            view: ViewState::default(),
            theme: Theme::default(),
            terminal,
            record,
            loads: mpsc::unbounded_channel(),
            pending: Vec::new(),
            applied: 0,
        };
        follower.resync().await?;
        follower.draw()?;
        Ok(follower)
    }

    /// Follows until `stop` fires; what it saw.
    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<Record> {
        loop {
            tokio::select! {
                _ = &mut stop => break,
                note = self.notes.recv() => {
                    let Some(note) = note else {
                        bail!("the daemon closed the connection");
                    };
                    self.on_note(note).await?;
                    // Apply whatever else is already queued before drawing.
                    for _ in 0..BATCH {
                        let Ok(note) = self.notes.try_recv() else { break };
                        self.on_note(note).await?;
                    }
                    self.draw()?;
                }
                Some((session_id, entries)) = self.loads.1.recv() => {
                    self.model.load_transcript(&session_id, entries);
                    self.draw()?;
                }
            }
        }
        let record = std::mem::take(&mut *self.record.lock().unwrap());
        Ok(record)
    }

    /// Reads the whole state, as the TUI does on connect and after `events.lagged`.
    async fn resync(&mut self) -> Result<()> {
        let sessions = self
            .client
            .call::<m::SessionList>(&Default::default())
            .await
            .context("session.list")?;
        let window = ListParams {
            limit: Some(INBOX_WINDOW),
            ..ListParams::default()
        };
        let messages = self
            .client
            .call::<m::InboxList>(&window)
            .await
            .context("inbox.list")?;
        let actions = self.model.sync(sessions.sessions, messages.messages);
        self.perform(actions);
        Ok(())
    }

    async fn on_note(&mut self, note: Notification) -> Result<()> {
        self.applied += 1;
        self.record.lock().unwrap().counts.notes += 1;
        if note.method == "events.lagged" {
            self.record.lock().unwrap().counts.lagged += 1;
            return self.resync().await;
        }
        let Some(event) = Event::from_notification(&note.method, note.params) else {
            return Ok(());
        };
        if let Event::Output(chunk) = &event
            && let Some(stamp) = chunk
                .text
                .strip_prefix("stamp ")
                .and_then(|t| t.trim().parse::<u64>().ok())
        {
            let focused = self
                .model
                .focused_session()
                .is_some_and(|s| s.id == chunk.session_id);
            self.pending.push(Pending {
                session_id: chunk.session_id.clone(),
                stamp,
                applied: unix_ns(),
                focused,
            });
        }
        let actions = self.model.apply(event);
        self.perform(actions);
        Ok(())
    }

    /// Loads transcripts the model asks for (in the background, as the TUI does); other
    /// actions are the user's and do not come up here.
    fn perform(&mut self, actions: Vec<Action>) {
        for action in actions {
            if let Action::Call(m::Request::SessionTranscript(TranscriptParams {
                session_id,
                after: Some(after),
                ..
            })) = action
            {
                let client = Arc::clone(&self.client);
                let loaded = self.loads.0.clone();
                tokio::spawn(async move {
                    let params = TranscriptParams {
                        session_id: session_id.clone(),
                        after: Some(after),
                        limit: None,
                    };
                    if let Ok(page) = client.call::<m::SessionTranscript>(&params).await {
                        let _ = loaded.send((session_id, page.entries));
                    }
                });
            }
        }
    }

    fn draw(&mut self) -> Result<()> {
        let start = Instant::now();
        let (model, view, theme) = (&self.model, &mut self.view, &self.theme);
        self.terminal
            .draw(|frame| render(frame, model, view, theme))
            .context("drawing into a TestBackend")?;
        self.model.set_scroll_extent(self.view.scroll_extent());
        let took = start.elapsed();
        let at = unix_ns();
        let mut record = self.record.lock().unwrap();
        record.draws.push(Draw {
            at,
            took,
            notes: std::mem::take(&mut self.applied),
        });
        for p in self.pending.drain(..) {
            let seen = record.sessions.entry(p.session_id).or_default();
            seen.times.push(p.stamp);
            seen.last_stamp = seen.last_stamp.max(p.stamp);
            record.stamps.push(Stamp {
                stamp: p.stamp,
                applied: p.applied,
                frame: at,
                focused: p.focused,
            });
        }
        Ok(())
    }
}

// ---- statistics ----

// ---- /proc ----

/// A process's memory, from `/proc/<pid>/status`, in KiB.
struct Memory {
    rss_kib: u64,
    anon_kib: u64,
    file_kib: u64,
    hwm_kib: u64,
    threads: u64,
}

impl Memory {
    fn describe(&self) -> String {
        format!(
            "VmRSS {} KiB (RssAnon {} KiB, RssFile {} KiB), VmHWM {} KiB, {} threads",
            self.rss_kib, self.anon_kib, self.file_kib, self.hwm_kib, self.threads
        )
    }
}

fn proc_memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/status has no {name}"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        anon_kib: field("RssAnon:")?,
        file_kib: field("RssFile:")?,
        hwm_kib: field("VmHWM:")?,
        threads: field("Threads:")?,
    })
}

/// A process's I/O counters, from `/proc/<pid>/io`.
#[derive(Clone, Copy)]
struct Io {
    /// Bytes it caused to be written to storage.
    write_bytes: u64,
    /// Write system calls.
    syscw: u64,
}

impl Io {
    fn since(&self, earlier: &Io) -> Io {
        Io {
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            syscw: self.syscw.saturating_sub(earlier.syscw),
        }
    }
}

fn proc_io(pid: u32) -> Result<Io> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .with_context(|| format!("reading /proc/{pid}/io"))?;
    let field = |name: &str| -> Result<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/io has no {name}"))
    };
    Ok(Io {
        write_bytes: field("write_bytes:")?,
        syscw: field("syscw:")?,
    })
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

fn alive(pid: u32) -> bool {
    // A zombie has exited; only its entry is left.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .is_some_and(|i| !s[i + 1..].trim_start().starts_with('Z'))
    })
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: sends a signal to a process this benchmark started.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

// ---- the kiln and its daemon ----

/// A temp git repository with one commit as the kiln, with a scripted-agent profile. The
/// worktrees the sessions make go with it.
struct Lab {
    kiln: Kiln,
    xdg: PathBuf,
    base: PathBuf,
    /// Removed last, after everything running in it is gone.
    _dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Result<Self> {
        let made = kiln::temp_kiln(
            "cru-bench-scale",
            &format!(
                "[daemon]\ngrace_period_secs = 600\n\n[agents.scripted]\ncommand = {:?}\n",
                scripted_agent()
            ),
        )?;
        Ok(Self {
            kiln: Kiln::new(made.root),
            xdg: made.xdg,
            base: made.base,
            _dir: made.dir,
        })
    }
}

/// `cru daemon run`, started here. Dropping it (on a panic) kills it and the agents it
/// ran; [`Daemon::stop`] stops it properly.
struct Daemon {
    child: Child,
    stderr_path: PathBuf,
    /// The agents' pids, once known.
    agents: Vec<u32>,
}

impl Daemon {
    fn start(lab: &Lab) -> Result<Self> {
        let stderr_path = lab.base.join("daemon.stderr");
        let stderr = std::fs::File::create(&stderr_path)
            .with_context(|| format!("creating {}", stderr_path.display()))?;
        let child = Command::new(cru())
            .arg("--kiln")
            .arg(lab.kiln.root())
            .args(["daemon", "run"])
            .env("CRU_KILN", lab.kiln.root())
            .env("CRU_DAEMON_EXE", cru())
            .env("XDG_CONFIG_HOME", &lab.xdg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Whatever happens to this process, the daemon does not outlive it.
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("running {} daemon run", cru().display()))?;
        Ok(Self {
            child,
            stderr_path,
            agents: Vec::new(),
        })
    }

    /// Retries the handshake until the daemon answers, it exits, or the deadline passes.
    async fn wait_ready(&mut self, kiln: &Kiln) -> Result<(Client, Duration)> {
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;
        loop {
            let last_error = match Client::connect(kiln).await {
                Ok(client) => return Ok((client, started.elapsed())),
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.child.try_wait().context("checking the daemon")? {
                bail!(
                    "the daemon exited ({status}) before answering: {}",
                    self.stderr_tail()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "the daemon did not answer within {START_TIMEOUT:?} (last error: \
                     {last_error})"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `daemon.shutdown` (it stops the agents), a kill if it does not exit in time, then
    /// a kill for any agent left. What happened, in one line.
    async fn stop(&mut self, kiln: &Kiln) -> String {
        let started = Instant::now();
        let mut said = match self.child.try_wait() {
            Ok(Some(status)) => format!("the daemon had already exited ({status})"),
            _ => {
                let asked = tokio::time::timeout(Duration::from_secs(5), async {
                    let client = Client::connect(kiln).await?;
                    client.call::<m::DaemonShutdown>(&m::NoParams {}).await
                })
                .await;
                let asked = match asked {
                    Ok(Ok(_)) => "daemon.shutdown sent".to_string(),
                    Ok(Err(e)) => format!("daemon.shutdown failed ({e})"),
                    Err(_) => "daemon.shutdown got no answer within 5 s".to_string(),
                };
                match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
                    Ok(Ok(status)) => format!(
                        "{asked}; the daemon exited ({status}) after {:.1} s",
                        started.elapsed().as_secs_f64()
                    ),
                    Ok(Err(e)) => format!("{asked}; waiting for the daemon failed ({e})"),
                    Err(_) => {
                        let _ = self.child.kill().await;
                        format!(
                            "{asked}; the daemon did not exit within {STOP_TIMEOUT:?}, killed it"
                        )
                    }
                }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.agents.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = self.kill_agents();
        if left > 0 {
            said.push_str(&format!("; {left} agents were still running, killed them"));
        } else if !self.agents.is_empty() {
            said.push_str(&format!("; all {} agents gone", self.agents.len()));
        }
        said
    }

    /// Kills the agents still running; how many there were.
    fn kill_agents(&self) -> usize {
        let left: Vec<u32> = self
            .agents
            .iter()
            .copied()
            .filter(|&p| alive(p) && is_scripted_agent(p))
            .collect();
        for &pid in &left {
            signal(pid, libc::SIGKILL);
        }
        left.len()
    }

    fn stderr_tail(&self) -> String {
        stderr_tail(&self.stderr_path)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // `kill_on_drop` takes the daemon; the agents go with their stdin, or here.
        if let Some(pid) = self.child.id() {
            signal(pid, libc::SIGKILL);
        }
        self.kill_agents();
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
