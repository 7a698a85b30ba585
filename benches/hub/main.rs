//! Hub benchmark: the hub over many kilns, each a real `cru daemon run`, with the hub a
//! real `cru hub run`, every process with `HOME` and the XDG folders in a temp dir (the
//! kiln registry and the hub's socket are the bench's own, never the machine's).
//!
//! The `cru` measured is the shipping binary, or with `CRU_BENCH_SHIP=0` this bench
//! build's own (see `testkit/src/bench/ship.rs`). Run with:
//!
//! ```text
//! cargo bench --bench hub
//! ```
//!
//! Environment (defaults in brackets):
//! - `CRU_BENCH_KILNS` [10], `CRU_BENCH_SESSIONS` [100] a kiln, registered with
//!   `session.register` (a session and its handle, no agent), and `CRU_BENCH_MESSAGES`
//!   [20] a kiln, each sent through a session's handle; every 5th is a question waiting.
//! - `CRU_BENCH_ROUNDS` [30]: timed fresh connections, `cru inbox` runs, answers each
//!   way and phase 6's events from each kiln (the list calls are ten times as many);
//!   `CRU_BENCH_STARTS` [10] workbench starts.
//! - `CRU_BENCH_IDLE_SECS` [10]: the idle window.
//!
//! Phases (after each, the hub's CPU time over a second at rest is printed):
//! 1. The workbench's first populated state through the hub: a fresh connection timed
//!    until the workbench's reads on connect are answered and decoded (handshake,
//!    `subscribe`, then at once `daemon.status`, `session.list`, `inbox.list` limit 500
//!    and `session.conflicts`), against the same from one kiln's daemon; then the real
//!    workbench, `cru --all-kilns` in a pseudo-terminal, from spawn to the screen that
//!    shows the sessions grouped by kiln.
//! 2. `inbox.list` (unread) through the hub, from one kiln directly, and from every kiln
//!    directly one after another.
//! 3. An answer: a question sent through a session's handle, then, once its event has
//!    reached a subscriber of the hub, `inbox.respond` timed through the hub or from the
//!    kiln's daemon directly, alternately.
//! 4. The idle hub with every kiln connected and one client waiting: its CPU time over
//!    the window (`/proc/PID/stat`), and its `VmRSS` and `VmHWM`.
//! 5. `cru inbox --all-kilns --json` as a whole process, from a folder that is no kiln;
//!    then the idle hub again, since that command reads the kiln registry the hub
//!    watches.
//! 6. Once the fleet is stopped, a kiln on another machine: an sshd on loopback stands
//!    for the machine, named in the person's settings (`[[hub.remotes]]`), under a hub of
//!    its own with one local kiln; an agent's question sent at its kiln's daemon, timed
//!    until the hub's subscriber receives its `inbox.created`, from the remote kiln and
//!    from the local one, alternately. Skipped, saying so, where no sshd runs.
//!
//! Every figure is printed beside its target, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run

mod fleet;
mod phases;
mod remote;
mod workbench;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use crucible::client::Client;
use testkit::bench::figures::{Stats, env_number, load_average, ms};
use testkit::bench::ship;

use fleet::{BenchKiln, Env, HubProcess};
use phases::p50_p95;

const TARGET_FIRST_MS: f64 = 100.0;
const TARGET_CLI_P50_MS: f64 = 30.0;
const TARGET_ANSWER_EXTRA_MS: f64 = 2.0;
const TARGET_IDLE_CPU_MS: f64 = 0.0;
const TARGET_RSS_MB: f64 = 30.0;
const TARGET_REMOTE_EVENT_P50_MS: f64 = 50.0;

struct Settings {
    kilns: usize,
    sessions: usize,
    messages: usize,
    rounds: usize,
    starts: usize,
    idle: Duration,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let n = |name, default| -> Result<usize> { Ok(env_number(name, default)? as usize) };
        let settings = Self {
            kilns: n("CRU_BENCH_KILNS", 10)?,
            sessions: n("CRU_BENCH_SESSIONS", 100)?,
            messages: n("CRU_BENCH_MESSAGES", 20)?,
            rounds: n("CRU_BENCH_ROUNDS", 30)?,
            starts: n("CRU_BENCH_STARTS", 10)?,
            idle: Duration::from_secs(env_number("CRU_BENCH_IDLE_SECS", 10)?),
        };
        ensure!(
            settings.kilns >= 1 && settings.sessions >= 1 && settings.rounds >= 1,
            "CRU_BENCH_KILNS, CRU_BENCH_SESSIONS and CRU_BENCH_ROUNDS must be at least 1"
        );
        ensure!(
            settings.messages <= settings.sessions,
            "CRU_BENCH_MESSAGES is at most CRU_BENCH_SESSIONS (one message a session)"
        );
        Ok(settings)
    }
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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

async fn run() -> Result<()> {
    let settings = Settings::from_env()?;
    // Declared first so it is removed last, after every process is gone.
    let tmp = tempfile::tempdir().context("creating the temp dir")?;
    let env = Env::new(tmp.path())?;
    let exe = ship::cru_to_measure(env!("CARGO_BIN_EXE_cru"));
    println!(
        "hub benchmark: {} kilns x {} sessions, {} messages a kiln; cru {}; load {}",
        settings.kilns,
        settings.sessions,
        settings.messages,
        exe.display(),
        load_average()
    );
    let mut kilns = fleet::start_kilns(&env, &exe, settings.kilns).await?;
    let filled = futures::future::try_join_all(
        kilns
            .iter_mut()
            .map(|k| fleet::fill(k, settings.sessions, settings.messages)),
    )
    .await;
    let hub = match filled {
        Ok(_) => fleet::start_hub(&env, &exe, settings.kilns).await.map(Some),
        Err(e) => Err(e),
    };
    let (hub, outcome) = match hub {
        Ok(hub) => {
            let outcome = measure(&env, &exe, &settings, &kilns, hub.as_ref()).await;
            (hub, outcome)
        }
        Err(e) => (None, Err(e)),
    };
    fleet::stop(&env, hub, std::mem::take(&mut kilns)).await;
    let figures = outcome?;
    println!(
        "\n[6] a kiln on another machine, over ssh on loopback ({} events from it and from a local kiln, alternately)",
        settings.rounds
    );
    let remote = remote::latency(tmp.path(), &exe, settings.rounds).await;
    match &remote {
        Ok(Some(latency)) => {
            println!("  from the kiln over ssh: {}", p50_p95(&latency.remote));
            println!("  from a local kiln: {}", p50_p95(&latency.local));
        }
        Ok(None) => {}
        Err(e) => println!("  not measured: {e:#}"),
    }
    print_rows(&settings, &figures);
    print_remote_row(&remote);
    Ok(())
}

/// Everything measured, for the closing table.
struct Figures {
    first_hub: phases::FirstState,
    first_kiln: phases::FirstState,
    workbench: Result<Stats>,
    cli: Stats,
    cli_rows: usize,
    list_hub: Stats,
    list_kiln: Stats,
    list_every_kiln: Stats,
    answers: phases::Answers,
    idle: phases::Idle,
    /// The same once `cru inbox --all-kilns` has read the kiln registry.
    idle_after_cli: phases::Idle,
}

async fn measure(
    env: &Env,
    exe: &std::path::Path,
    settings: &Settings,
    kilns: &[BenchKiln],
    hub: Option<&HubProcess>,
) -> Result<Figures> {
    let hub_pid = hub.context("no hub")?.pid()?;
    let rounds = settings.rounds;
    // One client stays connected throughout, as an open workbench would: the hub stops
    // once it has had no client for a while.
    let _keeper = Client::connect_at(&env.hub_socket(), None).await?;
    println!("\n[0] the hub started, every kiln reached");
    println!("{}", phases::after_phase(hub_pid).await?);
    let (first_hub, first_kiln, workbench) =
        first_phase(env, exe, settings, kilns, hub_pid).await?;
    println!("{}", phases::after_phase(hub_pid).await?);

    println!("\n[2] inbox.list across kilns");
    let [list_hub, list_kiln, list_every_kiln] = list_phase(env, kilns, 10 * rounds).await?;
    println!("{}", phases::after_phase(hub_pid).await?);

    println!("\n[3] an answer ({rounds} each way, alternately)");
    let answers = phases::answers(env, kilns, rounds).await?;
    println!("  through the hub: {}", p50_p95(&answers.hub));
    println!(
        "  from the kiln's daemon directly: {}",
        p50_p95(&answers.direct)
    );
    println!("{}", phases::after_phase(hub_pid).await?);

    let daemons: Vec<u32> = kilns.iter().filter_map(BenchKiln::pid).collect();
    println!("\n[4] the idle hub ({} s)", settings.idle.as_secs());
    let idle = phases::idle(env, hub_pid, &daemons, settings.idle).await?;
    print_idle(&idle, daemons.len());

    // Last, since `cru` commands that read the kiln registry (this one does) can wake
    // the hub's registry watcher: the idle hub is measured again after it.
    println!("\n[5] cru inbox --all-kilns --json");
    let (cli, cli_rows) = phases::cli_inbox(env, exe, rounds).await?;
    println!("  {rounds} runs: {} ({cli_rows} rows)", p50_p95(&cli));
    println!(
        "  the idle hub again, once that command has read the registry ({} s):",
        settings.idle.as_secs()
    );
    let idle_after_cli = phases::idle(env, hub_pid, &daemons, settings.idle).await?;
    print_idle(&idle_after_cli, daemons.len());
    Ok(Figures {
        first_hub,
        first_kiln,
        workbench,
        cli,
        cli_rows,
        list_hub,
        list_kiln,
        list_every_kiln,
        answers,
        idle,
        idle_after_cli,
    })
}

/// Phase 1: the workbench's reads on connect through the hub and from one kiln, and the
/// real workbench's populated screen.
async fn first_phase(
    env: &Env,
    exe: &std::path::Path,
    settings: &Settings,
    kilns: &[BenchKiln],
    hub_pid: u32,
) -> Result<(phases::FirstState, phases::FirstState, Result<Stats>)> {
    let rounds = settings.rounds;
    println!("\n[1] the workbench's first populated state ({rounds} fresh connections)");
    let first_hub = phases::first_state(&env.hub_socket(), rounds).await?;
    println!(
        "  through the hub: {} ({} sessions, {} messages)",
        p50_p95(&first_hub.times),
        first_hub.sessions,
        first_hub.messages
    );
    let want_sessions = settings.kilns * settings.sessions;
    ensure!(
        first_hub.sessions == want_sessions,
        "the hub listed {} sessions, not {want_sessions}",
        first_hub.sessions
    );
    let first_kiln = phases::first_state(&kilns[0].kiln.socket_path(), rounds).await?;
    println!(
        "  one kiln's daemon directly: {} ({} sessions, {} messages)",
        p50_p95(&first_kiln.times),
        first_kiln.sessions,
        first_kiln.messages
    );
    println!("{}", phases::after_phase(hub_pid).await?);
    let starts = settings.starts;
    let (env2, exe2) = (env.clone(), exe.to_path_buf());
    let workbench =
        tokio::task::spawn_blocking(move || workbench::populated(&env2, &exe2, starts)).await?;
    match &workbench {
        Ok(stats) => println!(
            "  the real workbench (`cru --all-kilns`), spawn to populated screen, {starts} starts: {}",
            p50_p95(stats)
        ),
        Err(e) => println!("  the real workbench was not measured: {e:#}"),
    }
    Ok((first_hub, first_kiln, workbench))
}

/// `inbox.list` (unread) through the hub, from one kiln, and from every kiln in turn.
async fn list_phase(env: &Env, kilns: &[BenchKiln], calls: usize) -> Result<[Stats; 3]> {
    let hub = Client::connect_at(&env.hub_socket(), None).await?;
    let mut direct = Vec::with_capacity(kilns.len());
    for k in kilns {
        direct.push(Client::connect(&k.kiln).await?);
    }
    let every: Vec<&Client> = direct.iter().collect();
    let (through_hub, hub_rows) = phases::list_series(&[&hub], calls).await?;
    let (one, one_rows) = phases::list_series(&every[..1], calls).await?;
    let (all, all_rows) = phases::list_series(&every, calls).await?;
    println!("  inbox.list (unread), {calls} calls on one connection each:");
    println!(
        "    through the hub: {} ({hub_rows} rows)",
        p50_p95(&through_hub)
    );
    println!("    one kiln directly: {} ({one_rows} rows)", p50_p95(&one));
    println!(
        "    every kiln directly, one after another: {} ({all_rows} rows)",
        p50_p95(&all)
    );
    Ok([through_hub, one, all])
}

fn print_idle(idle: &phases::Idle, daemons: usize) {
    println!(
        "  hub CPU {:.0} ms, the {daemons} daemons' CPU {:.0} ms; hub VmRSS {:.1} MB (heap and stacks {:.1} MB, program pages {:.1} MB), VmHWM {:.1} MB",
        ms(idle.hub_cpu),
        ms(idle.daemons_cpu),
        mb(idle.rss_kb),
        mb(idle.anon_kb),
        mb(idle.file_kb),
        mb(idle.hwm_kb)
    );
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1000.0
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// The issue's speed rows for the hub, each beside its target.
fn print_rows(s: &Settings, f: &Figures) {
    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "optimised build"
    };
    println!(
        "\nthe hub over {} kilns of {} sessions ({profile})",
        s.kilns, s.sessions
    );
    println!("| figure | value | target |");
    println!("| --- | --- | --- |");
    let first = ms(f.first_hub.times.median());
    println!(
        "| workbench's first populated state through the hub (reads on connect) | {} (one kiln directly: {}) | <= {TARGET_FIRST_MS} ms: {} |",
        p50_p95(&f.first_hub.times),
        p50_p95(&f.first_kiln.times),
        met(ms(f.first_hub.times.percentile(0.95)) <= TARGET_FIRST_MS && first <= TARGET_FIRST_MS)
    );
    match &f.workbench {
        Ok(stats) => println!(
            "| real workbench `cru --all-kilns`, spawn to populated screen | {} | <= {TARGET_FIRST_MS} ms: {} |",
            p50_p95(stats),
            met(ms(stats.median()) <= TARGET_FIRST_MS)
        ),
        Err(_) => println!(
            "| real workbench `cru --all-kilns` | not measured | <= {TARGET_FIRST_MS} ms |"
        ),
    }
    println!(
        "| `cru inbox --all-kilns --json` ({} rows) | {} | p50 <= {TARGET_CLI_P50_MS} ms: {} |",
        f.cli_rows,
        p50_p95(&f.cli),
        met(ms(f.cli.median()) <= TARGET_CLI_P50_MS)
    );
    println!(
        "| `inbox.list` unread through the hub | {} (one kiln directly {}; every kiln directly in turn {}) | (compare) |",
        p50_p95(&f.list_hub),
        p50_p95(&f.list_kiln),
        p50_p95(&f.list_every_kiln)
    );
    let extra = ms(f.answers.hub.median()) - ms(f.answers.direct.median());
    println!(
        "| an answer through the hub vs directly | p50 {:.2} ms vs {:.2} ms: {extra:+.2} ms | <= +{TARGET_ANSWER_EXTRA_MS} ms: {} |",
        ms(f.answers.hub.median()),
        ms(f.answers.direct.median()),
        met(extra <= TARGET_ANSWER_EXTRA_MS)
    );
    for (idle, when) in [
        (&f.idle, "before any other process read the kiln registry"),
        (
            &f.idle_after_cli,
            "after `cru inbox --all-kilns` read the registry",
        ),
    ] {
        let cpu = ms(idle.hub_cpu);
        println!(
            "| idle hub CPU over {} s ({} kilns connected, one client; {when}) | {cpu:.0} ms | {TARGET_IDLE_CPU_MS} ms: {} |",
            idle.window.as_secs(),
            s.kilns,
            met(cpu <= TARGET_IDLE_CPU_MS)
        );
    }
    println!(
        "| idle hub resident memory (VmRSS; peak VmHWM) | {:.1} MB: heap and stacks {:.1} MB, program pages {:.1} MB (peak {:.1} MB) | <= {TARGET_RSS_MB} MB: {} |",
        mb(f.idle.rss_kb),
        mb(f.idle.anon_kb),
        mb(f.idle.file_kb),
        mb(f.idle.hwm_kb),
        met(mb(f.idle.rss_kb) <= TARGET_RSS_MB)
    );
}

/// Phase 6's row: an agent's event from a kiln over ssh, beside its target.
fn print_remote_row(remote: &Result<Option<remote::Latency>>) {
    let what = "an agent's event from a kiln over ssh (loopback) to a hub subscriber";
    match remote {
        Ok(Some(latency)) => println!(
            "| {what} | {} (a local kiln: {}) | p50 <= {TARGET_REMOTE_EVENT_P50_MS} ms: {} |",
            p50_p95(&latency.remote),
            p50_p95(&latency.local),
            met(ms(latency.remote.median()) <= TARGET_REMOTE_EVENT_P50_MS)
        ),
        Ok(None) => {
            println!("| {what} | not measured (no sshd) | p50 <= {TARGET_REMOTE_EVENT_P50_MS} ms |")
        }
        Err(_) => {
            println!("| {what} | not measured (failed) | p50 <= {TARGET_REMOTE_EVENT_P50_MS} ms |")
        }
    }
}
