//! Team-mode benchmark: the same daemon against the embedded store and against a real
//! SurrealDB server on loopback (SurrealDB's own server code, the engine's version, data
//! in surrealkv with an fsync on every commit; see testkit/src/team_server.rs), the
//! delay from an answer given on one daemon to the agent waiting on another, and a team of
//! many daemons on one server.
//!
//! ```text
//! cargo bench --bench team
//! ```
//!
//! Environment:
//! - `CRU_BENCH_TEAM_PHASES`: which phases run, of `stores`, `pair` and `scale`, comma
//!   separated (default all three).
//! - `CRU_BENCH_SECS` (seconds of the send phase, default 3),
//!   `CRU_BENCH_TEAM_MESSAGES` (inbox size for the list phase, default 20,000),
//!   `CRU_BENCH_RESPONDS` (answers timed in the pair phase, default 200).
//! - `CRU_BENCH_TEAM_DAEMONS` (daemons of the scale phase, default 10),
//!   `CRU_BENCH_TEAM_SESSIONS` (sessions each, default 50), `CRU_BENCH_TEAM_ROUNDS`
//!   (answers and renames timed, default 100), `CRU_BENCH_TEAM_IDLE_SECS` (the idle
//!   window, default 60), `CRU_BENCH_TEAM_SERVER` (a `cru-surreal-server` built
//!   elsewhere, for the scale phase: started as the equipment starts its own; with
//!   `CRU_BENCH_TEAM_PHASES=scale`, the equipment's server is then neither built nor
//!   started), `CRU_BENCH_TEAM_CREATE_AT_ONCE=1` (the daemons make their sessions at the
//!   same time, not one daemon after another).
//!
//! Phases:
//! - `stores`, for each store: durable `inbox.send` round trips/s with 64 concurrent
//!   clients; then the inbox filled, and `inbox.list {unread_only: true, limit: 50}` timed.
//! - `pair`: two daemons on two kilns sharing the server: a client of daemon A (the agent)
//!   sends a `decision_needed` message and waits for its answer (`inbox.wait`, what
//!   `cru ask` does); a client of daemon B answers it (`inbox.respond`, what
//!   `cru inbox respond` does). The figure is the time from B's call to A's wait returning.
//! - `scale` (team/scale.rs): `CRU_BENCH_TEAM_DAEMONS` daemons, each on its own kiln (a git
//!   repository of its own) with `CRU_BENCH_TEAM_SESSIONS` sessions of `cru-scripted-agent`
//!   (`session.create`; each says one line and ends its turn), all on one server, each
//!   through a counting proxy of its own (team/proxy.rs). With every session idle, the
//!   requests each daemon sends the server over the window, against the lease renewals
//!   (`store.lease_secs` 15, renewed every 5 s); then `inbox.respond` on one daemon →
//!   `inbox.wait` on another, rotating over the pairs; then a session renamed on its daemon
//!   until every other daemon's subscriber has the `session.updated` event with the new
//!   name; last, one daemon killed with SIGKILL, until the others report each of its
//!   sessions owned by a live daemon (events, then checked with `session.list`).
//!
//! The daemon is this bench build's `cru` (release code, no LTO); the server's engine
//! crates are optimised (opt-level 1), its own thin layer is not. Figures are printed,
//! never asserted. Every daemon, agent and server started here is stopped at the end, on
//! success and on failure alike.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::built;
mod members;
mod prebuilt;
mod proxy;
mod scale;
use testkit::team_server;

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::MsgType;
use crucible::protocol::methods::{self as m, NoParams};
use crucible::protocol::params::{ListParams, RegisterParams, WaitParams};
use testkit::params;
use tokio::process::{Child, Command};

use figures::{Stats, env_number, load_average, ms};
use team_server::Server;

const CRU: &str = env!("CARGO_BIN_EXE_cru");
const PASSWORD_ENV: &str = "CRU_BENCH_DB_PASSWORD";
const PASSWORD: &str = "bench-secret";
const CLIENTS: usize = 64;
const LIST_CALLS: usize = 200;
const LIST_LIMIT: u32 = 50;
const BODY: &str = "The agent finished a step of its task and reports it to the inbox.";

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("team benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct StoreFigures {
    sends_per_sec: f64,
    send_errors: usize,
    list: Stats,
    messages: u64,
}

async fn run() -> Result<()> {
    let secs = env_number("CRU_BENCH_SECS", 3)?;
    let messages = env_number("CRU_BENCH_TEAM_MESSAGES", 20_000)?;
    let responds = env_number("CRU_BENCH_RESPONDS", 200)? as usize;
    let scale_settings = scale::Settings::from_env()?;
    let phases =
        std::env::var("CRU_BENCH_TEAM_PHASES").unwrap_or_else(|_| "stores,pair,scale".into());
    let phases: Vec<&str> = phases.split(',').map(str::trim).collect();
    if let Some(unknown) = phases
        .iter()
        .find(|p| !["stores", "pair", "scale"].contains(p))
    {
        bail!("CRU_BENCH_TEAM_PHASES: no phase {unknown:?} (stores, pair, scale)");
    }
    let prebuilt = std::env::var_os("CRU_BENCH_TEAM_SERVER");
    println!("team mode: embedded store against a SurrealDB server on loopback");
    println!("  load average before: {}", load_average());
    // The equipment's server, built on first use, unless only the scale phase runs on a
    // server built elsewhere.
    let equipment = phases != ["scale"] || prebuilt.is_none();
    let server = if equipment {
        Some(Server::start(Path::new(CRU), PASSWORD).await)
    } else {
        None
    };

    if let (Some(server), true) = (&server, phases.contains(&"stores")) {
        let embedded_settings = "[daemon]\ngrace_period_secs = 300\n".to_string();
        let server_settings = team_settings(server, "bench");
        let embedded = store_phases("embedded", &embedded_settings, secs, messages).await?;
        let shared = store_phases("server", &server_settings, secs, messages).await?;
        println!();
        println!("| figure | embedded | server |");
        println!("|---|---|---|");
        println!(
            "| durable `inbox.send`, {CLIENTS} clients | {:.0}/s | {:.0}/s |",
            embedded.sends_per_sec, shared.sends_per_sec
        );
        println!(
            "| `inbox.list` unread limit {LIST_LIMIT}, {} stored | p50 {:.2} ms, p99 {:.2} ms | p50 {:.2} ms, p99 {:.2} ms |",
            shared.messages.max(embedded.messages),
            ms(embedded.list.median()),
            ms(embedded.list.percentile(0.99)),
            ms(shared.list.median()),
            ms(shared.list.percentile(0.99)),
        );
        if embedded.send_errors + shared.send_errors > 0 {
            println!(
                "  send errors: embedded {}, server {}",
                embedded.send_errors, shared.send_errors
            );
        }
    }
    if let (Some(server), true) = (&server, phases.contains(&"pair")) {
        let delay = respond_delay(server, responds).await?;
        println!(
            "| `inbox.respond` on B to the agent on A | – | median {:.2} ms, p99 {:.2} ms |",
            ms(delay.median()),
            ms(delay.percentile(0.99)),
        );
    }
    if phases.contains(&"scale") {
        match (&prebuilt, &server) {
            (Some(binary), _) => {
                let own = prebuilt::Prebuilt::start(Path::new(binary), PASSWORD).await?;
                println!(
                    "  scale phase on the server {}",
                    Path::new(binary).display()
                );
                let outcome = scale::run(own.port, &scale_settings).await;
                for (count, warning) in own.warnings() {
                    println!("  the server logged {count} × {warning}");
                }
                outcome?;
            }
            (None, Some(server)) => scale::run(server.port, &scale_settings).await?,
            (None, None) => unreachable!("the equipment's server runs without a prebuilt one"),
        }
    }
    println!("  load average after: {}", load_average());
    Ok(())
}

fn team_settings(server: &Server, database: &str) -> String {
    format!(
        "[daemon]\ngrace_period_secs = 300\n\n[store]\nurl = {:?}\nnamespace = \"bench\"\n\
         database = {database:?}\nusername = \"root\"\npassword_env = {PASSWORD_ENV:?}\n",
        server.url()
    )
}

/// A kiln in a temp folder (the benchmark only registers sessions: no git needed).
fn temp_kiln(settings: &str) -> Result<(tempfile::TempDir, Kiln)> {
    let dir = tempfile::tempdir().context("a temp dir")?;
    let root = dir.path().canonicalize().context("the temp dir")?;
    std::fs::write(root.join(".crucible.toml"), settings).context("writing the settings")?;
    Ok((dir, Kiln::new(root)))
}

struct Daemon {
    child: Child,
}

async fn start_daemon(kiln: &Kiln, xdg: &Path) -> Result<(Daemon, Client)> {
    let child = Command::new(CRU)
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .env(PASSWORD_ENV, PASSWORD)
        .env("XDG_CONFIG_HOME", xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the daemon")?;
    let mut daemon = Daemon { child };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(client) = Client::connect(kiln).await {
            return Ok((daemon, client));
        }
        if let Some(status) = daemon.child.try_wait()? {
            bail!("the daemon exited ({status}) before answering");
        }
        if Instant::now() > deadline {
            bail!("the daemon did not answer within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn stop_daemon(kiln: &Kiln, mut daemon: Daemon) {
    if let Ok(client) = Client::connect(kiln).await {
        let _ = client.call::<m::DaemonShutdown>(&NoParams {}).await;
    }
    if tokio::time::timeout(Duration::from_secs(10), daemon.child.wait())
        .await
        .is_err()
    {
        let _ = daemon.child.kill().await;
    }
}

async fn register(kiln: &Kiln, name: &str) -> Result<(Client, String)> {
    let client = Client::connect(kiln).await?;
    let registered = client
        .call::<m::SessionRegister>(&RegisterParams {
            agent_type: "bench".into(),
            agent_name: name.into(),
            worktree: None,
        })
        .await?;
    Ok((client, registered.session_id))
}

async fn store_phases(
    label: &str,
    settings: &str,
    secs: u64,
    messages: u64,
) -> Result<StoreFigures> {
    let (dir, kiln) = temp_kiln(settings)?;
    let (daemon, client) = start_daemon(&kiln, dir.path()).await?;

    // 1. Sends: every client its own session and connection, sequential calls.
    let mut writers = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        writers.push(register(&kiln, &format!("{label}-{i}")).await?);
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let tasks: Vec<_> = writers
        .into_iter()
        .map(|(client, id)| {
            tokio::spawn(async move {
                let (mut sent, mut errors) = (0u64, 0usize);
                while Instant::now() < deadline {
                    let params = params::note(&id, &format!("bench {sent}"), BODY);
                    match client.call::<m::InboxSend>(&params).await {
                        Ok(_) => sent += 1,
                        Err(_) => {
                            errors += 1;
                            break;
                        }
                    }
                }
                (sent, errors)
            })
        })
        .collect();
    let (mut sent, mut send_errors) = (0u64, 0usize);
    for task in tasks {
        let (s, e) = task.await?;
        sent += s;
        send_errors += e;
    }
    let sends_per_sec = sent as f64 / started.elapsed().as_secs_f64();
    println!(
        "  {label}: {sent} sends in {:.1} s: {sends_per_sec:.0}/s",
        started.elapsed().as_secs_f64()
    );

    // 2. Fill to `messages`, then time the unread list.
    let mut stored = sent;
    if stored < messages {
        let (filler, id) = register(&kiln, &format!("{label}-fill")).await?;
        let batch = 64u64;
        let mut fill = Vec::new();
        for _ in 0..batch {
            fill.push(Client::connect(&kiln).await?);
        }
        while stored < messages {
            let params = params::note(&id, "fill", BODY);
            let round: Vec<_> = fill
                .iter()
                .map(|c| c.call::<m::InboxSend>(&params))
                .collect();
            for outcome in futures::future::join_all(round).await {
                outcome.context("filling the inbox")?;
                stored += 1;
            }
        }
        drop(filler);
    }
    let params = ListParams {
        unread_only: true,
        limit: Some(LIST_LIMIT),
        session_id: None,
    };
    for _ in 0..5 {
        client.call::<m::InboxList>(&params).await?;
    }
    let mut samples = Vec::with_capacity(LIST_CALLS);
    for _ in 0..LIST_CALLS {
        let t = Instant::now();
        client.call::<m::InboxList>(&params).await?;
        samples.push(t.elapsed());
    }
    let list = Stats::new(samples);
    println!(
        "  {label}: inbox.list at {stored} stored: {}",
        list.describe()
    );
    drop(client);
    stop_daemon(&kiln, daemon).await;
    drop(dir);
    Ok(StoreFigures {
        sends_per_sec,
        send_errors,
        list,
        messages: stored,
    })
}

async fn respond_delay(server: &Server, count: usize) -> Result<Stats> {
    let settings = team_settings(server, "respond");
    let (dir_a, a) = temp_kiln(&settings)?;
    let (dir_b, b) = temp_kiln(&settings)?;
    let (daemon_a, _client_a) = start_daemon(&a, dir_a.path()).await?;
    let (daemon_b, client_b) = start_daemon(&b, dir_b.path()).await?;
    let (agent, session_id) = register(&a, "agent").await?;
    let waiter = std::sync::Arc::new(Client::connect(&a).await?);
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let question = params::send(
            &session_id,
            MsgType::DecisionNeeded,
            &format!("question {i}"),
            &["yes", "no"],
        );
        let id = agent.call::<m::InboxSend>(&question).await?.id;
        let wait = {
            let waiter = std::sync::Arc::clone(&waiter);
            let id = id.clone();
            tokio::spawn(async move {
                let answered = waiter
                    .call::<m::InboxWait>(&WaitParams {
                        id,
                        timeout_secs: Some(60),
                    })
                    .await;
                (answered, Instant::now())
            })
        };
        // Let the wait reach daemon A before the answer is given.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let asked = Instant::now();
        client_b
            .call::<m::InboxRespond>(&params::respond(&id, "yes"))
            .await
            .context("inbox.respond on B")?;
        let (answered, at) = wait.await?;
        answered.context("inbox.wait on A")?;
        samples.push(at.duration_since(asked));
    }
    let stats = Stats::new(samples);
    println!("  respond on B → wait on A returns: {}", stats.describe());
    stop_daemon(&a, daemon_a).await;
    stop_daemon(&b, daemon_b).await;
    drop((dir_a, dir_b));
    Ok(stats)
}
