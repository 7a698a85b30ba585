//! The scale benchmark's phases at each size that need no streaming: the daemon idle
//! (phase 3), `cru session list --json` (phase 4) and the real workbench's first
//! populated frame (phase 5).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::protocol::SessionListParams;
use crucible::protocol::methods as m;
use tokio::process::Command;

use super::figures::{Stats, proc_stat};
use super::lab::{Daemon, Lab};
use super::procfs::{
    busiest_threads, children_ticks, clock_ticks, percent, proc_memory, thread_ticks,
};
use super::{Empty, cru, workbench};

/// Quiet time after every session went idle, before the idle figures of a size.
const SIZE_SETTLE: Duration = Duration::from_secs(5);
/// The daemon is settled once it used no CPU for this long…
const QUIET: Duration = Duration::from_secs(2);
/// …or this long after every session went idle, whichever comes first.
const SETTLE_LIMIT: Duration = Duration::from_secs(90);
/// How long `cru session list --json` may take before the run fails.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// What the idle phase measured.
pub struct Idle {
    /// From every session idle to the daemon quiet.
    pub settled: Duration,
    pub rss_kib_per_session: f64,
    pub ticks: u64,
    /// The daemon's CPU in ms per second.
    pub ms_per_sec: f64,
}

/// Phase 3: the daemon's memory and CPU with every session idle.
pub async fn idle_phase(
    empty: &Empty,
    daemon: &Daemon,
    size: usize,
    window: Duration,
) -> Result<Idle> {
    let pid = empty.pid;
    let tick_ms = 1000.0 / clock_ticks();
    println!(
        "\n[3] {size} sessions idle: at least {} s after the last turn ended, once the \
         daemon used no CPU for {} s (at most {} s), CPU over {} s",
        SIZE_SETTLE.as_secs(),
        QUIET.as_secs(),
        SETTLE_LIMIT.as_secs(),
        window.as_secs()
    );
    let settling = Instant::now();
    tokio::time::sleep(SIZE_SETTLE).await;
    let mut quiet_since = (Instant::now(), proc_stat(pid)?);
    while settling.elapsed() < SETTLE_LIMIT {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = proc_stat(pid)?;
        if now != quiet_since.1 {
            quiet_since = (Instant::now(), now);
        } else if quiet_since.0.elapsed() >= QUIET {
            break;
        }
    }
    let settled = settling.elapsed();
    let threads_start = thread_ticks(pid);
    let children_start = children_ticks(pid);
    let agents_start: u64 = daemon
        .agents
        .iter()
        .filter_map(|&p| proc_stat(p).ok())
        .sum();
    let start = proc_stat(pid)?;
    tokio::time::sleep(window).await;
    let end = proc_stat(pid)?;
    let threads_end = thread_ticks(pid);
    let children = children_ticks(pid).saturating_sub(children_start);
    let agents_end: u64 = daemon
        .agents
        .iter()
        .filter_map(|&p| proc_stat(p).ok())
        .sum();
    let mem = proc_memory(pid)?;
    let agents_kib: u64 = daemon
        .agents
        .iter()
        .filter_map(|&p| proc_memory(p).ok())
        .map(|m| m.rss_kib)
        .sum();
    let ticks = end - start;
    let cpu_ms = ticks as f64 * tick_ms;
    let n = size as f64;
    let rss_kib_per_session = (mem.rss_kib as f64 - empty.rss_kib as f64) / n;
    println!("  daemon RSS    {}", mem.describe());
    println!(
        "                per idle session {rss_kib_per_session:.0} KiB VmRSS, {:.0} KiB RssAnon \
         ((now − no session) / {size})",
        (mem.anon_kib as f64 - empty.anon_kib as f64) / n
    );
    println!(
        "  daemon CPU    {ticks} ticks = {cpu_ms:.0} ms over {} s = {:.2}% of one core; {:.3} \
         ms/s per session; settled {:.1} s after the last turn ended",
        window.as_secs(),
        percent(cpu_ms, window),
        cpu_ms / window.as_secs_f64() / n,
        settled.as_secs_f64()
    );
    println!(
        "                by thread: {}; its children (git) {children} ticks",
        busiest_threads(&threads_start, &threads_end)
    );
    println!(
        "  agents        {} processes: {} ticks in all over the window; RSS {} MiB in all \
         ({:.0} KiB each)",
        daemon.agents.len(),
        agents_end.saturating_sub(agents_start),
        agents_kib / 1024,
        agents_kib as f64 / daemon.agents.len().max(1) as f64
    );
    Ok(Idle {
        settled,
        rss_kib_per_session,
        ticks,
        ms_per_sec: cpu_ms / window.as_secs_f64(),
    })
}

/// Phase 4, for where the time goes: `session.list` on a connection of this process, as
/// the CLI asks (with each agent's resources, read from `/proc`) and as the workbench
/// asks (without).
pub async fn list_in_process(control: &Client, runs: usize) -> Result<()> {
    for resources in [true, false] {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            control
                .call::<m::SessionList>(&SessionListParams {
                    resources,
                    ..SessionListParams::default()
                })
                .await
                .context("session.list")?;
            times.push(started.elapsed());
        }
        println!(
            "  session.list in process, resources {resources:<5}  {}",
            Stats::new(times).describe()
        );
    }
    Ok(())
}

/// Phase 4: `cru session list --json`, spawn to exit, `runs` times.
pub async fn list_phase(lab: &Lab, size: usize, runs: usize) -> Result<Stats> {
    let mut times = Vec::with_capacity(runs);
    let mut bytes = 0;
    for run in 0..runs {
        let started = Instant::now();
        let child = Command::new(cru())
            .args(["session", "list", "--json"])
            .env("CRU_KILN", lab.kiln.root())
            .env("XDG_CONFIG_HOME", &lab.xdg)
            .current_dir(lab.kiln.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("running cru session list --json")?;
        let out = tokio::time::timeout(LIST_TIMEOUT, child.wait_with_output())
            .await
            .context("cru session list --json did not end in time")?
            .context("waiting for cru session list --json")?;
        times.push(started.elapsed());
        if !out.status.success() {
            bail!(
                "cru session list --json failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if run == 0 {
            let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
                .context("cru session list --json printed no JSON array")?;
            if listed.len() != size {
                bail!(
                    "cru session list --json listed {} of {size} sessions",
                    listed.len()
                );
            }
            bytes = out.stdout.len();
        }
    }
    let stats = Stats::new(times);
    println!("  spawn → exit  {} ({bytes} B of JSON)", stats.describe());
    Ok(stats)
}

/// Phase 5: the real workbench's first frame and first populated frame, `starts` times.
pub async fn workbench_phase(lab: &Lab, size: usize, starts: usize) -> Result<Stats> {
    println!(
        "\n[5] the workbench ({}) in a 120×30 pseudo-terminal, daemon up, {starts} starts: \
         spawn → first frame (the transcript border) and → populated (the status bar's \
         sessions and the focused transcript's {:?})",
        cru().display(),
        workbench::REPLY_TEXT
    );
    let place = workbench::Place {
        exe: cru().to_path_buf(),
        kiln: lab.kiln.root().to_path_buf(),
        xdg: lab.xdg.clone(),
    };
    let (mut first, mut populated) = (Vec::new(), Vec::new());
    for _ in 0..starts {
        let place = place.clone();
        let start = tokio::task::spawn_blocking(move || workbench::open(&place, size))
            .await
            .context("the workbench task")??;
        first.push(start.first);
        populated.push(start.populated);
    }
    let populated = Stats::new(populated);
    println!("  first frame   {}", Stats::new(first).describe());
    println!("  populated     {}", populated.describe());
    Ok(populated)
}
