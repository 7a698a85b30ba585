//! The streaming phase at one size: some of the sessions are given a script of `stamp` +
//! `sleep 100` lines (the scripted agent says `stamp <unix ns>` in one chunk, the moment
//! it sends it), the rest stay idle; over a window, the daemon's CPU, memory and disk
//! writes, and, in the in-process workbench ([`Follower`]), each stamp's time to the
//! frame that showed it. Afterwards the streaming turns are cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use tokio::sync::oneshot;

use super::figures::{Stats, ms, proc_stat};
use super::follower::{Follower, Record, SCREEN};
use super::grow::{agent_pids, prompt_all};
use super::procfs::{clock_ticks, is_scripted_agent, percent, proc_io, proc_memory, unix_ns};

/// The pause after each stamp, in ms: about 10 events/s per session.
pub const STAMP_EVERY_MS: u64 = 100;
/// How long each streaming script goes on beyond the window: prompting every session,
/// settling and catching up happen while the first ones already stream.
const STREAM_MARGIN: Duration = Duration::from_secs(60);
/// Time between every session streaming and the measurement window.
const STREAM_SETTLE: Duration = Duration::from_secs(3);
/// How long after the window the workbench may take to draw every stamp sent in it.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long every session may take to stream once prompted.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// What the table needs of the streaming phase.
pub struct Streamed {
    pub streaming: usize,
    pub p99_ms: f64,
    /// Daemon CPU in the window per streaming session, in ms per second.
    pub cpu_ms_per_sec_per_session: f64,
}

/// Stamps in each session's script: the window plus the margin.
pub fn stamps(window: Duration) -> u64 {
    (window + STREAM_MARGIN).as_millis() as u64 / STAMP_EVERY_MS
}

/// Streams on `ids` over `window` while `idle` more sessions stay idle; `idle_rate` is
/// the daemon's CPU in ms/s with every session idle, before.
pub async fn stream(
    kiln: &Kiln,
    control: &Client,
    pid: u32,
    ids: &[String],
    idle: usize,
    window: Duration,
    idle_rate: f64,
) -> Result<Streamed> {
    let tick_ms = 1000.0 / clock_ticks();
    // The workbench follows from before the first stamp on, as an open TUI would.
    let record = Arc::new(Mutex::new(Record::default()));
    let (stop_follower, stopped) = oneshot::channel();
    let follower = Follower::connect(kiln, Arc::clone(&record)).await?;
    let follower = tokio::spawn(follower.run(stopped));
    let script: String = (0..stamps(window))
        .map(|_| format!("stamp\nsleep {STAMP_EVERY_MS}\n"))
        .collect();
    let asked = Instant::now();
    prompt_all(control, ids, &script).await?;
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
    println!(
        "  prompted {} sessions (script {} B); every one streaming after {:.1} s",
        ids.len(),
        script.len(),
        asked.elapsed().as_secs_f64()
    );
    let agents = agent_pids(control, ids).await?;
    let not_agents: Vec<u32> = agents
        .iter()
        .copied()
        .filter(|&p| !is_scripted_agent(p))
        .collect();
    if agents.len() != ids.len() || !not_agents.is_empty() {
        bail!(
            "{} of {} streaming sessions have an agent process; not cru-scripted-agent: \
             {not_agents:?}",
            agents.len(),
            ids.len()
        );
    }

    tokio::time::sleep(STREAM_SETTLE).await;
    println!(
        "  window        {} s, {} s after the last one started; {idle} more sessions idle",
        window.as_secs(),
        STREAM_SETTLE.as_secs()
    );
    let mem_before = proc_memory(pid)?;
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
    tokio::time::sleep(window).await;
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
    let daemon_rate = daemon_cpu_ms / secs;
    let rss_per_session = (mem_end.rss_kib as f64 - mem_before.rss_kib as f64) / n;
    let anon_per_session = (mem_end.anon_kib as f64 - mem_before.anon_kib as f64) / n;

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

    println!("  daemon RSS    all idle     {}", mem_before.describe());
    println!("                window start {}", mem_start.describe());
    println!("                window end   {}", mem_end.describe());
    println!(
        "                per session  {rss_per_session:.0} KiB VmRSS, {anon_per_session:.0} KiB \
         RssAnon ((window end − all idle) / {} streaming)",
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
             window {:.0} s after its end: their last stamps are missing from event to frame",
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

    // Event to frame.
    println!(
        "  event to frame, in process: the TUI's Model and render fed by the real \
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

    Ok(Streamed {
        streaming: ids.len(),
        p99_ms: ms(to_frame.percentile(0.99)),
        cpu_ms_per_sec_per_session: daemon_rate / n,
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
