//! The measured phases: what the workbench reads on connecting, through the hub and from
//! one kiln; `cru inbox --all-kilns --json` as a process and `inbox.list` through the hub
//! against one kiln directly; an answer through the hub against a direct one; and the
//! idle hub's CPU time and memory.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::{ListParams, Notification};
use testkit::bench::figures::{Stats, ms, proc_stat};
use testkit::bench::process::clock_ticks;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::fleet::{BenchKiln, Env, ask};

/// The workbench's inbox window on connecting.
const INBOX_WINDOW: u32 = 500;
/// Untimed rounds before each timed series (connections the hub opens to a kiln for a
/// new client name are made on its first call).
const WARMUP: usize = 3;
/// How long an event may take to reach the hub's subscriber.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the workbench holds once it has read the state.
pub struct FirstState {
    pub times: Stats,
    pub sessions: usize,
    pub messages: usize,
}

/// Fresh connections to `socket`, each timed from connecting until the workbench's
/// reads on connect are answered: the handshake, `subscribe`, `daemon.status`,
/// `session.list`, `inbox.list` (limit 500) and `session.conflicts`, the last four at
/// once, and decoded, as the workbench makes them.
pub async fn first_state(socket: &Path, rounds: usize) -> Result<FirstState> {
    let mut times = Vec::with_capacity(rounds);
    let (mut sessions, mut messages) = (0, 0);
    for round in 0..WARMUP + rounds {
        let started = Instant::now();
        let client = Client::connect_at(socket, None).await?;
        let _notes = client.subscribe(None).await?;
        let window = ListParams {
            limit: Some(INBOX_WINDOW),
            ..ListParams::default()
        };
        let all = crucible::protocol::SessionListParams::default();
        let (status, listed, inbox, conflicts) = tokio::join!(
            client.call::<m::DaemonStatusOf>(&m::NoParams {}),
            client.call::<m::SessionList>(&all),
            client.call::<m::InboxList>(&window),
            client.call::<m::SessionConflicts>(&m::NoParams {}),
        );
        let (_, listed, inbox, _) = (status?, listed?, inbox?, conflicts?);
        let took = started.elapsed();
        (sessions, messages) = (listed.sessions.len(), inbox.messages.len());
        if round >= WARMUP {
            times.push(took);
        }
    }
    Ok(FirstState {
        times: Stats::new(times),
        sessions,
        messages,
    })
}

/// `cru inbox --all-kilns --json` run `runs` times from a folder that is no kiln: each
/// run's wall time, and how many rows it printed.
pub async fn cli_inbox(env: &Env, exe: &Path, runs: usize) -> Result<(Stats, usize)> {
    let mut times = Vec::with_capacity(runs);
    let mut rows = 0;
    for round in 0..WARMUP + runs {
        let started = Instant::now();
        let out = env
            .command(exe)
            .args(["inbox", "--all-kilns", "--json"])
            .current_dir(&env.outside)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()
            .await
            .context("running cru inbox --all-kilns --json")?;
        let took = started.elapsed();
        ensure!(
            out.status.success(),
            "cru inbox --all-kilns --json failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("its output is not JSON")?;
        rows = printed.as_array().map_or(0, Vec::len);
        let named = printed
            .as_array()
            .into_iter()
            .flatten()
            .all(|row| row["kiln"].is_string());
        ensure!(named, "a row of cru inbox --all-kilns --json has no kiln");
        if round >= WARMUP {
            times.push(took);
        }
    }
    Ok((Stats::new(times), rows))
}

/// One series of `inbox.list` calls (unread, the daemon's default limit) on `client`.
pub async fn list_series(clients: &[&Client], calls: usize) -> Result<(Stats, usize)> {
    let params = ListParams {
        unread_only: true,
        ..ListParams::default()
    };
    let mut times = Vec::with_capacity(calls);
    let mut rows = 0;
    for round in 0..WARMUP + calls {
        let started = Instant::now();
        rows = 0;
        for client in clients {
            rows += client.call::<m::InboxList>(&params).await?.messages.len();
        }
        if round >= WARMUP {
            times.push(started.elapsed());
        }
    }
    Ok((Stats::new(times), rows))
}

/// Answer times through the hub and directly from the kiln's daemon.
pub struct Answers {
    pub hub: Stats,
    pub direct: Stats,
}

/// `answers` questions each way: a question is sent through a session's handle in kiln
/// `i % kilns`; once its event has reached the hub's subscriber (as the person sees it),
/// `inbox.respond` is timed, through the hub or directly, alternately.
pub async fn answers(env: &Env, kilns: &[BenchKiln], answers: usize) -> Result<Answers> {
    let hub = Client::connect_at(&env.hub_socket(), None).await?;
    let mut events = hub.subscribe(None).await?;
    let mut agents = Vec::with_capacity(kilns.len());
    let mut direct = Vec::with_capacity(kilns.len());
    for k in kilns {
        let (id, handle) = k.sessions.last().context("a kiln without sessions")?;
        let agent = Client::connect_at(&k.kiln.socket_path(), Some(handle)).await?;
        agents.push((id.clone(), agent));
        direct.push(Client::connect(&k.kiln).await?);
    }
    let (mut through_hub, mut from_kiln) = (Vec::new(), Vec::new());
    let rounds = 2 * (WARMUP * kilns.len() + answers);
    for round in 0..rounds {
        let which = round / 2 % kilns.len();
        let (session, agent) = &agents[which];
        let id = ask(agent, session, &format!("Answer {round}")).await?;
        seen(&mut events, &id).await?;
        let via_hub = round % 2 == 0;
        let to = if via_hub { &hub } else { &direct[which] };
        let started = Instant::now();
        let answered = to
            .call::<m::InboxRespond>(&crucible::protocol::RespondParams {
                id: id.clone(),
                response: "yes".into(),
                asked: None,
            })
            .await
            .with_context(|| format!("inbox.respond {id}"))?;
        let took = started.elapsed();
        ensure!(
            answered.message.responded && answered.message.response.as_deref() == Some("yes"),
            "message {id} was not answered yes"
        );
        if round >= 2 * WARMUP * kilns.len() {
            if via_hub {
                through_hub.push(took);
            } else {
                from_kiln.push(took);
            }
        }
    }
    Ok(Answers {
        hub: Stats::new(through_hub),
        direct: Stats::new(from_kiln),
    })
}

/// Waits until an event naming `id` reaches the subscriber.
async fn seen(events: &mut UnboundedReceiver<Notification>, id: &str) -> Result<()> {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(note)) if note.params.to_string().contains(id) => return Ok(()),
            Ok(Some(_)) => {}
            Ok(None) => bail!("the hub closed the connection"),
            Err(_) => bail!("no event for message {id} reached the hub's subscriber"),
        }
    }
}

/// The hub at rest with its kilns connected and one client waiting (as an open
/// workbench does): CPU time of the hub and of every daemon over `window`, and the
/// hub's memory after it.
pub struct Idle {
    pub window: Duration,
    pub hub_cpu: Duration,
    pub daemons_cpu: Duration,
    pub rss_kb: u64,
    pub hwm_kb: u64,
    /// Of `rss_kb`: the heap and stacks (`RssAnon`), and the program's own pages
    /// mapped from its file (`RssFile`, clean: the kernel drops them under pressure).
    pub anon_kb: u64,
    pub file_kb: u64,
}

pub async fn idle(env: &Env, hub_pid: u32, daemons: &[u32], window: Duration) -> Result<Idle> {
    let client = Client::connect_at(&env.hub_socket(), None).await?;
    let _notes = client.subscribe(None).await?;
    // What the earlier phases left in flight settles first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let daemons_ticks = || -> Result<u64> { daemons.iter().map(|&pid| proc_stat(pid)).sum() };
    let (hub_before, daemons_before) = (proc_stat(hub_pid)?, daemons_ticks()?);
    tokio::time::sleep(window).await;
    let (hub_after, daemons_after) = (proc_stat(hub_pid)?, daemons_ticks()?);
    let ticks = |n: u64| Duration::from_secs_f64(n as f64 / clock_ticks());
    Ok(Idle {
        window,
        hub_cpu: ticks(hub_after - hub_before),
        daemons_cpu: ticks(daemons_after - daemons_before),
        rss_kb: status_kb(hub_pid, "VmRSS")?,
        hwm_kb: status_kb(hub_pid, "VmHWM")?,
        anon_kb: status_kb(hub_pid, "RssAnon")?,
        file_kb: status_kb(hub_pid, "RssFile")?,
    })
}

/// The hub's CPU time over a second once the phase before has ended (what it keeps
/// doing when nothing asks anything of it), as a line to print.
pub async fn after_phase(hub_pid: u32) -> Result<String> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = proc_stat(hub_pid)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = proc_stat(hub_pid)? - before;
    Ok(format!(
        "  the hub at rest after it: {:.0} ms CPU over 1 s",
        used as f64 * 1000.0 / clock_ticks()
    ))
}

/// A `kB` field of `/proc/PID/status`.
fn status_kb(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// `p50 x ms, p95 y ms`.
pub fn p50_p95(stats: &Stats) -> String {
    format!(
        "p50 {:.2} ms, p95 {:.2} ms",
        ms(stats.median()),
        ms(stats.percentile(0.95))
    )
}
