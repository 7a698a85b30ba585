//! Scale benchmark: one daemon grown to 10, 100, 500 and 1,000 sessions. The real `cru
//! daemon run` on a temp kiln runs sessions of `cru-scripted-agent`, each in its own git
//! worktree; at each size the sessions are first all idle, then some stream a
//! timestamped message every 100 ms while this process follows them as the workbench
//! does and draws every frame. One daemon grows from size to size (creating a session
//! with its worktree takes long): what a size left in the daemon, its sessions'
//! transcripts and inbox notices and the memory its streaming used, is there at the next.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench scale
//! ```
//!
//! Environment:
//! - `CRU_BENCH_SCALE_SIZES`: the sizes, ascending, comma-separated (default
//!   `10,100,500,1000`). The daemon grows from one to the next.
//! - `CRU_BENCH_SCALE_SECS`: length of the streaming measurement window (default 20).
//! - `CRU_BENCH_SCALE_SESSIONS`: sessions streaming at once, at most the size (default
//!   100): at 10 all 10 stream, at 500 and 1,000 100 stream and the rest stay idle.
//! - `CRU_BENCH_SCALE_IDLE_SECS`: the idle CPU window at each size (default 10).
//! - `CRU_BENCH_SCALE_LIST_RUNS`: runs of `cru session list --json` per size (default 30).
//! - `CRU_BENCH_SCALE_STARTS`: starts of the real workbench per size (default 10).
//! - `CRU_BENCH_SCALE_CREATE_RATE`: `session.create` calls per second (default 10).
//! - `CRU_BENCH_SHIP=0` / `CRU_BENCH_BIN=PATH`: which `cru` runs (see `testkit/src/bench/ship.rs`).
//!
//! Phases:
//! 1. Idle: the daemon with no session, a few seconds after start: its RSS (`VmRSS`, of
//!    it the private `RssAnon`) and CPU time (utime+stime from `/proc/<pid>/stat`); and
//!    `cru session list --json` with no session, its fixed cost.
//!
//! Then, for each size:
//! 2. Create: the sessions that reach the size are made with `session.create` over the
//!    socket (spread over a few connections), one call every 100 ms whether the ones
//!    before were answered or not; each has the task `session` (the agent says `session
//!    <its id>` and the turn ends). Each is timed from the call to its answer and to
//!    ready: the first `session.updated` (on a subscribed connection) in `working` or a
//!    later state, i.e. the worktree made, the agent started, initialised and on its turn.
//!    Then until every session is idle (`complete`).
//! 3. Idle: once settled (at least 5 s after every session went idle, then until the
//!    daemon used no CPU for 2 s, at most 90 s), the daemon's RSS, per idle session ((RSS
//!    now − RSS of phase 1) / sessions), and its CPU clock ticks over the idle window
//!    (target 0), by thread name, and its children's (git).
//! 4. `cru session list --json`: the real binary spawned and timed to its exit, every
//!    session idle; and `session.list` over this process's connection, with the agents'
//!    resources (as the CLI asks: `/proc` is read) and without (as the workbench asks).
//! 5. First populated frame: the real `cru` in a pseudo-terminal of 120×30 (as
//!    `benches/footprint.rs`), the daemon up, timed from spawn until the status bar shows
//!    the sessions (`▸[1]`, `[2]`: with many, the window of the bar around the focused
//!    one) and the focused session's transcript shows its agent's reply.
//! 6. Streaming: up to `CRU_BENCH_SCALE_SESSIONS` of the sessions are prompted with a
//!    script of `stamp` + `sleep 100` lines (the agent says `stamp <unix ns>` in one
//!    chunk, the moment it sends it). Over the window, the daemon's CPU (per streaming
//!    session, and over idle), RSS and disk writes (`/proc/<pid>/io`), the agents' and
//!    this process's CPU, and the stamps per second passed on. Event to frame, in
//!    process: a connection subscribed to every event feeds the TUI's own `Model`
//!    (`sync`, then `Event::from_notification` + `Model::apply`) and draws with `render`
//!    into a 120×30 ratatui `TestBackend`, as the real loop does (everything queued, up
//!    to 256 more, applied before each frame); latency = the time that frame finished −
//!    the stamp, for every stamp sent in the window. The terminal write is not included.
//!    Then the streaming turns are cancelled and each of those sessions is given the
//!    `session` turn again, so every session is idle with the same last reply.
//!
//! The last output is the table of the figures beside the issue's targets. Before and
//! after, the disk is probed: `fdatasync` after a small append in the temp dir, which
//! every durable write of the daemon waits for at least.
//!
//! Figures are printed, never asserted. Everything started here is stopped at the end,
//! on success and on failure alike (`daemon.shutdown`, then signals as a last resort).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::bench::ship;

use testkit::built;

mod follower;
mod grow;
mod lab;
mod phases;
use testkit::bench::process;
mod procfs;
use testkit::bench::pty;
mod stream;
mod table;
mod workbench;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::protocol::methods as m;
use figures::{env_number, load_average, ms, proc_stat};
use lab::{Daemon, Lab, PROBE_BYTES, fsync_probe};
use procfs::{available_mib, clock_ticks, percent, proc_memory};
use table::{Figures, SizeFigures};

/// The `cru` measured: the shipping binary (see `testkit/src/bench/ship.rs`), or with
/// `CRU_BENCH_SHIP=0` this bench build's own.
fn cru() -> &'static Path {
    static CRU: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CRU.get_or_init(|| ship::cru_to_measure(env!("CARGO_BIN_EXE_cru")))
}
/// The scripted ACP agent, in this benchmark's profile.
fn scripted_agent() -> &'static str {
    built::scripted_agent(std::path::Path::new(env!("CARGO_BIN_EXE_cru")))
}

const DEFAULT_SIZES: &str = "10,100,500,1000";
const DEFAULT_SECS: u64 = 20;
const DEFAULT_SESSIONS: u64 = 100;
const DEFAULT_IDLE_SECS: u64 = 10;
const DEFAULT_LIST_RUNS: u64 = 30;
const DEFAULT_STARTS: u64 = 10;
const DEFAULT_CREATE_RATE: u64 = 10;
/// The largest size: each session is a worktree and an agent process.
const MAX_SIZE: usize = 2000;

/// Quiet time after the daemon answers, before the idle figures with no session.
const IDLE_SETTLE: Duration = Duration::from_secs(3);
/// The idle CPU window with no session.
const EMPTY_WINDOW: Duration = Duration::from_secs(5);

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
    sizes: Vec<usize>,
    window: Duration,
    streaming: usize,
    idle_window: Duration,
    list_runs: usize,
    starts: usize,
    create_rate: f64,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let text = std::env::var("CRU_BENCH_SCALE_SIZES").unwrap_or_else(|_| DEFAULT_SIZES.into());
        let sizes = text
            .split(',')
            .map(|s| s.trim().replace('_', "").parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("CRU_BENCH_SCALE_SIZES={text:?} is not a list of sizes"))?;
        if sizes.is_empty()
            || sizes.windows(2).any(|w| w[0] >= w[1])
            || sizes.iter().any(|&s| !(1..=MAX_SIZE).contains(&s))
        {
            bail!(
                "CRU_BENCH_SCALE_SIZES must be ascending sizes between 1 and {MAX_SIZE}, not \
                 {text:?}"
            );
        }
        let secs = env_number("CRU_BENCH_SCALE_SECS", DEFAULT_SECS)?;
        let streaming = env_number("CRU_BENCH_SCALE_SESSIONS", DEFAULT_SESSIONS)? as usize;
        let idle = env_number("CRU_BENCH_SCALE_IDLE_SECS", DEFAULT_IDLE_SECS)?;
        let list_runs = env_number("CRU_BENCH_SCALE_LIST_RUNS", DEFAULT_LIST_RUNS)? as usize;
        let starts = env_number("CRU_BENCH_SCALE_STARTS", DEFAULT_STARTS)? as usize;
        let rate = env_number("CRU_BENCH_SCALE_CREATE_RATE", DEFAULT_CREATE_RATE)?;
        if !(1..=3600).contains(&secs) || !(1..=3600).contains(&idle) {
            bail!("CRU_BENCH_SCALE_SECS and _IDLE_SECS must be between 1 and 3600");
        }
        if !(1..=1000).contains(&streaming) {
            bail!("CRU_BENCH_SCALE_SESSIONS must be between 1 and 1000, not {streaming}");
        }
        if list_runs == 0 || starts == 0 || !(1..=1000).contains(&rate) {
            bail!("CRU_BENCH_SCALE_LIST_RUNS, _STARTS and _CREATE_RATE must be at least 1");
        }
        Ok(Self {
            sizes,
            window: Duration::from_secs(secs),
            streaming,
            idle_window: Duration::from_secs(idle),
            list_runs,
            starts,
            create_rate: rate as f64,
        })
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
    let mut figures = Figures::default();
    let outcome = runtime.block_on(async {
        let mut daemon = Daemon::start(&lab)?;
        let outcome = bench(&lab, &settings, &mut daemon, &mut figures).await;
        let stopped = daemon.stop(&lab.kiln).await;
        println!("\n{stopped}");
        if outcome.is_err() {
            eprintln!("daemon stderr (last lines): {}", daemon.stderr_tail());
        }
        outcome
    });
    println!(
        "disk afterwards: fdatasync of a {PROBE_BYTES} B append: {}",
        fsync_probe(&lab.base)?.describe()
    );
    let load = load_average();
    println!("load average at the end: {load}");
    // The sizes measured, also when a later one failed.
    if !figures.sizes.is_empty() {
        table::print(&figures, &load);
    }
    outcome
}

fn print_header(settings: &Settings) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("crucible scale benchmark: one daemon grown through the sizes");
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
        "  load average  {} (other work on the machine competes); memory available {} MiB",
        load_average(),
        available_mib().unwrap_or(0)
    );
    let sizes: Vec<String> = settings.sizes.iter().map(ToString::to_string).collect();
    println!(
        "  settings      sizes {}; session.create {}/s; idle window {} s; {} runs of `cru \
         session list --json`, {} workbench starts; up to {} streaming, each `stamp` + \
         `sleep {}` × {}; window {} s",
        sizes.join(", "),
        settings.create_rate,
        settings.idle_window.as_secs(),
        settings.list_runs,
        settings.starts,
        settings.streaming,
        stream::STAMP_EVERY_MS,
        stream::stamps(settings.window),
        settings.window.as_secs()
    );
}

// ---- the benchmark ----

/// What phase 1 measured: the daemon with no session.
struct Empty {
    pid: u32,
    rss_kib: u64,
    anon_kib: u64,
}

async fn bench(
    lab: &Lab,
    settings: &Settings,
    daemon: &mut Daemon,
    figures: &mut Figures,
) -> Result<()> {
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

    // [1] idle, no session
    println!(
        "\n[1] the daemon idle, no session: answered after {:.0} ms; {} s later, CPU over \
         {} s",
        ms(startup),
        IDLE_SETTLE.as_secs(),
        EMPTY_WINDOW.as_secs()
    );
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle_start = proc_stat(pid)?;
    tokio::time::sleep(EMPTY_WINDOW).await;
    let idle_end = proc_stat(pid)?;
    let empty_mem = proc_memory(pid)?;
    let idle_cpu_ms = (idle_end - idle_start) as f64 * tick_ms;
    println!("  RSS           {}", empty_mem.describe());
    println!(
        "  CPU           {} ticks = {idle_cpu_ms:.0} ms over {} s = {:.2}% of one core \
         (clock ticks of {tick_ms:.0} ms)",
        idle_end - idle_start,
        EMPTY_WINDOW.as_secs(),
        percent(idle_cpu_ms, EMPTY_WINDOW)
    );
    println!(
        "  `cru session list --json`, {} runs, for the fixed cost (the process, its \
         connection and handshake):",
        settings.list_runs
    );
    let empty_list = phases::list_phase(lab, 0, settings.list_runs).await?;
    figures.empty_list = Some(empty_list);
    let empty = Empty {
        pid,
        rss_kib: empty_mem.rss_kib,
        anon_kib: empty_mem.anon_kib,
    };

    let watcher = grow::Watcher::start(&lab.kiln).await?;
    let mut ids: Vec<String> = Vec::new();
    for &size in &settings.sizes {
        let started = Instant::now();
        println!(
            "\n==== {size} sessions (load average {}, memory available {} MiB) ====",
            load_average(),
            available_mib().unwrap_or(0)
        );

        // [2] create
        let count = size - ids.len();
        println!(
            "\n[2] creating {count} sessions at {}/s (session.create over the socket; each \
             makes a git worktree and starts an agent)",
            settings.create_rate
        );
        let grown = grow::grow(&lab.kiln, &watcher, count, settings.create_rate).await?;
        ids.extend(grown.ids.iter().cloned());
        let idle_after = grow::wait_idle(&control, &ids).await?;
        let creating = started.elapsed();
        daemon.agents = grow::agent_pids(&control, &ids).await?;
        println!(
            "  session.create answered  {}",
            grown.round_trips.describe()
        );
        println!("  session.create → ready   {}", grown.to_ready.describe());
        println!(
            "  answered → ready         {} (the agent starting)",
            grown.answer_to_ready.describe()
        );
        println!(
            "  {count} created: the last answered after {:.1} s ({:.1}/s); every one ready \
             after {:.1} s and idle {:.1} s later; {} agent processes; memory available {} \
             MiB",
            grown.answered.as_secs_f64(),
            grown.answered_rate,
            grown.took.as_secs_f64(),
            idle_after.as_secs_f64(),
            daemon.agents.len(),
            available_mib().unwrap_or(0)
        );

        // [3] idle
        let idle = phases::idle_phase(&empty, daemon, size, settings.idle_window).await?;

        // [4] cru session list --json
        println!(
            "\n[4] `cru session list --json`, {} runs, every session idle",
            settings.list_runs
        );
        let list = phases::list_phase(lab, size, settings.list_runs).await?;
        phases::list_in_process(&control, settings.list_runs).await?;

        // [5] first populated frame
        let populated = phases::workbench_phase(lab, size, settings.starts).await?;

        // [6] streaming
        let streaming_ids = &ids[..settings.streaming.min(size)];
        println!("\n[6] {} of {size} sessions streaming", streaming_ids.len());
        let streamed = stream::stream(
            &lab.kiln,
            &control,
            pid,
            streaming_ids,
            size - streaming_ids.len(),
            settings.window,
            idle.ms_per_sec,
        )
        .await?;
        let back = Instant::now();
        grow::cancel_all(&control, streaming_ids).await?;
        grow::wait_idle(&control, streaming_ids).await?;
        grow::prompt_all(&control, streaming_ids, grow::IDLE_TURN).await?;
        grow::wait_idle(&control, streaming_ids).await?;
        let took = started.elapsed();
        println!(
            "  the streaming turns cancelled and every session idle again after {:.1} s; \
             {size} sessions took {:.0} s in all ({:.0} s of it creating)",
            back.elapsed().as_secs_f64(),
            took.as_secs_f64(),
            creating.as_secs_f64()
        );
        figures.sizes.push(SizeFigures {
            size,
            list,
            populated,
            rss_kib_per_idle_session: idle.rss_kib_per_session,
            idle_ticks: idle.ticks,
            idle_window: settings.idle_window,
            settled: idle.settled,
            idle_ms_per_sec_per_session: idle.ms_per_sec / size as f64,
            streaming: streamed.streaming,
            stream_ms_per_sec_per_session: streamed.cpu_ms_per_sec_per_session,
            event_to_frame_p99_ms: streamed.p99_ms,
            to_ready: grown.to_ready,
            created: count,
            create_rate: grown.answered_rate,
            creating,
            took,
        });
    }
    Ok(())
}
