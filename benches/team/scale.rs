//! The team at scale: many daemons, each on its own kiln with its own idle sessions of the
//! scripted agent, share one SurrealDB server; each reaches it through a counting proxy
//! of its own (see `proxy.rs`). Measured in order:
//!
//! 1. Idle load: with every session's turn over and nothing asked, the requests each
//!    daemon sends the server over a window (WebSocket data frames), split into the SDK's
//!    keep-alive, lease renewals and the rest, against the renewals the lease needs.
//! 2. `inbox.respond` on one daemon → `inbox.wait` returning on another, the pair rotating
//!    over the daemons.
//! 3. A session renamed (`session.rename`) on the daemon that runs it, until every other
//!    daemon has reported the new name in a `session.updated` event to its subscriber.
//! 4. A daemon killed (SIGKILL), until the other daemons report each of its sessions owned
//!    by a live daemon (`session.updated` events; checked after with `session.list`).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::protocol::methods as m;
use crucible::protocol::params::{RenameParams, WaitParams};
use crucible::protocol::{MsgType, Session, SessionState};
use futures::future::{join_all, try_join_all};
use testkit::params;

use crate::figures::{Stats, env_number, load_average, ms};
use crate::members::{Member, is_scripted_agent};
use crate::proxy::Tally;

/// The lease: the default `store.lease_secs` (src/config/settings.rs), written out in
/// each kiln's settings so the figures below can be read against it. A daemon renews it
/// every third of it (src/ledger/team.rs, `keep_lease`).
const LEASE_SECS: u64 = 15;
/// Answers given before the timed ones, to warm the connections.
const WARMUP: usize = 3;
/// Quiet time after the sessions are ready, before the idle window.
const IDLE_SETTLE: Duration = Duration::from_secs(5);
/// How long every session may take to be made and end its first turn.
const READY_TIMEOUT: Duration = Duration::from_secs(900);
/// How long a rename may take to reach every daemon.
const SEEN_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Settings {
    pub daemons: usize,
    pub sessions: usize,
    pub rounds: usize,
    pub idle: Duration,
    /// Every daemon makes its sessions at the same time as the others.
    pub create_at_once: bool,
}

impl Settings {
    pub fn from_env() -> Result<Self> {
        Ok(Self {
            daemons: env_number("CRU_BENCH_TEAM_DAEMONS", 10)? as usize,
            sessions: env_number("CRU_BENCH_TEAM_SESSIONS", 50)? as usize,
            rounds: env_number("CRU_BENCH_TEAM_ROUNDS", 100)? as usize,
            idle: Duration::from_secs(env_number("CRU_BENCH_TEAM_IDLE_SECS", 60)?),
            create_at_once: env_number("CRU_BENCH_TEAM_CREATE_AT_ONCE", 0)? == 1,
        })
    }
}

/// Runs the phase against the server on loopback port `upstream`; whatever happens, every daemon and agent started here
/// is stopped before it returns.
pub async fn run(upstream: u16, settings: &Settings) -> Result<()> {
    if settings.daemons < 2 || settings.sessions == 0 {
        bail!("the scale phase needs at least 2 daemons and 1 session each");
    }
    let agent = crate::built::scripted_agent(Path::new(crate::CRU)).to_string();
    let mut members: Vec<Member> = Vec::new();
    let outcome = phases(upstream, settings, &agent, &mut members).await;
    if let Err(e) = &outcome {
        eprintln!("  the scale phase failed: {e:#}");
        for m in &members {
            eprintln!("  daemon {} stderr:\n  {}", m.index, m.stderr_tail());
        }
    }
    let stopping = Instant::now();
    let said = join_all(members.iter_mut().map(|m| async move {
        let said = m.stop().await;
        (m.index, said)
    }))
    .await;
    let mut by_outcome: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, said) in said {
        by_outcome.entry(said).or_default().push(index);
    }
    let summary: Vec<String> = by_outcome
        .into_iter()
        .map(|(said, daemons)| format!("{said}: daemons {daemons:?}"))
        .collect();
    println!(
        "  stopped in {:.1} s: {}",
        stopping.elapsed().as_secs_f64(),
        summary.join("; ")
    );
    drop(members);
    outcome
}

async fn phases(
    upstream: u16,
    settings: &Settings,
    agent: &str,
    members: &mut Vec<Member>,
) -> Result<()> {
    let (n, per) = (settings.daemons, settings.sessions);
    println!(
        "\nscale: {n} daemons on one server, {per} sessions of the scripted agent each, lease \
         {LEASE_SECS} s"
    );
    println!("  load average before: {}", load_average());

    // Setup: the daemons, then their sessions, made on every daemon at once.
    let setup = Instant::now();
    // One after another: of ten daemons opening a fresh database at once, one exited on
    // a write conflict ("Transaction write conflict … can be retried") while setting up
    // the schema (src/store/mod.rs, `migrate`).
    for i in 0..n {
        members.push(Member::start(i, upstream, LEASE_SECS, agent).await?);
    }
    let answering = setup.elapsed();
    for m in members.iter_mut() {
        m.register_asker().await?;
    }
    let creating = Instant::now();
    // One daemon after another by default: in one of two runs with all ten at once
    // (`CRU_BENCH_TEAM_CREATE_AT_ONCE=1`), a daemon's connection to the server was reset in
    // the middle of a create, and the run stopped there.
    let mut times = Vec::with_capacity(n * per);
    if settings.create_at_once {
        let all = try_join_all(members.iter_mut().map(|m| m.create_sessions(per))).await?;
        times.extend(all.into_iter().flatten());
    } else {
        for m in members.iter_mut() {
            times.extend(m.create_sessions(per).await?);
        }
    }
    let retried: usize = members.iter().map(|m| m.create_failures).sum();
    if retried > 0 {
        println!("  {retried} session.create calls failed and were made again");
    }
    let creates = Stats::new(times);
    let created = creating.elapsed();
    wait_ready(members, n * per).await?;
    println!(
        "  setup {:.1} s: daemons (one after another) answering after {:.1} s; {} \
         session.create calls ({}) in {:.1} s, {}; every turn over after {:.1} s",
        setup.elapsed().as_secs_f64(),
        answering.as_secs_f64(),
        creates.len(),
        if settings.create_at_once {
            "each daemon one after another, the daemons at once"
        } else {
            "one after another"
        },
        created.as_secs_f64(),
        creates.describe(),
        creating.elapsed().as_secs_f64(),
    );

    let idle = idle_load(members, settings.idle).await;
    let respond = respond_wait(members, settings.rounds).await?;
    let (each, all) = rename_seen(members, settings.rounds).await?;
    let takeover = takeover(members).await?;

    let renewals_per_min = 60.0 / (LEASE_SECS as f64 / 3.0);
    let per_min = |f: fn(&Tally) -> u64| {
        idle.tallies.iter().map(|t| f(t) as f64).sum::<f64>() / n as f64 * 60.0 / idle.secs
    };
    println!();
    println!("| figure ({n} daemons × {per} sessions, one server) | measured | target |");
    println!("|---|---|---|");
    println!(
        "| `inbox.respond` on one daemon → `inbox.wait` returns on another ({} rounds) | \
         p50 {:.2} ms, p99 {:.2} ms | none given |",
        respond.len(),
        ms(respond.median()),
        ms(respond.percentile(0.99)),
    );
    println!(
        "| a rename seen by all {} other daemons (`session.updated` to a subscriber on each) | \
         p99 {:.1} ms (p50 {:.1} ms; per daemon p50 {:.1} ms, p99 {:.1} ms) | p99 reported |",
        n - 1,
        ms(all.percentile(0.99)),
        ms(all.median()),
        ms(each.median()),
        ms(each.percentile(0.99)),
    );
    println!(
        "| server load per idle daemon, {:.0} s window | {:.1} requests/min: {:.1} lease \
         renewals, {:.1} SDK keep-alives, {:.1} other; {:.1} frames/min back | no more than \
         the lease renewals ({renewals_per_min:.0}/min) |",
        idle.secs,
        per_min(|t| t.requests),
        per_min(|t| t.renewals),
        per_min(|t| t.keepalives),
        per_min(Tally::other_requests),
        per_min(|t| t.from_server),
    );
    match takeover {
        Some(t) => println!(
            "| a killed daemon's {per} sessions owned by live daemons | {:.1} s after the \
             kill ({:.2} leases); reported by all {} others after {:.1} s | ≤ 2 leases \
             ({} s) |",
            t.claimed.as_secs_f64(),
            t.claimed.as_secs_f64() / LEASE_SECS as f64,
            n - 1,
            t.all.as_secs_f64(),
            2 * LEASE_SECS,
        ),
        None => println!(
            "| a killed daemon's {per} sessions owned by live daemons | not within {} s | \
             ≤ 2 leases ({} s) |",
            4 * LEASE_SECS,
            2 * LEASE_SECS
        ),
    }
    println!("  load average after: {}", load_average());
    Ok(())
}

/// Waits until each daemon's sessions have ended their first turn (`complete`) and every
/// daemon lists all `total`; notes the agents' pids.
async fn wait_ready(members: &mut [Member], total: usize) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let mut ready = true;
        let mut done = 0;
        for m in members.iter_mut() {
            let list = m.list().await?;
            let own: Vec<&Session> = list.iter().filter(|s| m.sessions.contains(&s.id)).collect();
            for s in &own {
                if matches!(s.state, Some(SessionState::Error | SessionState::Stopped)) {
                    bail!(
                        "session {} on daemon {} is {:?}: {:?}",
                        s.id,
                        m.index,
                        s.state,
                        s.state_reason
                    );
                }
            }
            let complete = own
                .iter()
                .filter(|s| s.state == Some(SessionState::Complete))
                .count();
            done += complete;
            let listed = list.iter().filter(|s| s.state.is_some()).count();
            ready &= complete == m.sessions.len() && listed >= total;
            m.agents = own.iter().filter_map(|s| s.agent_pid).collect();
        }
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("after {READY_TIMEOUT:?}, {done} of {total} sessions have ended their turn");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

struct Idle {
    tallies: Vec<Tally>,
    secs: f64,
}

/// What each daemon sends the server while nothing happens.
async fn idle_load(members: &[Member], window: Duration) -> Idle {
    tokio::time::sleep(IDLE_SETTLE).await;
    println!(
        "  idle window of {} s (load average {})",
        window.as_secs(),
        load_average()
    );
    let before: Vec<Tally> = members.iter().map(|m| m.proxy.snapshot()).collect();
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let secs = started.elapsed().as_secs_f64();
    let tallies: Vec<Tally> = members
        .iter()
        .zip(&before)
        .map(|(m, b)| m.proxy.snapshot().since(b))
        .collect();
    let per_min = |x: u64| x as f64 * 60.0 / secs;
    let mut others: BTreeMap<String, u64> = BTreeMap::new();
    for (m, t) in members.iter().zip(&tallies) {
        println!(
            "    daemon {}: {:.1} requests/min ({:.1} renewals, {:.1} keep-alives, {:.1} other), \
             {:.1} frames/min back, {:.0} B/min up, {:.0} B/min down, {} connection(s) opened",
            m.index,
            per_min(t.requests),
            per_min(t.renewals),
            per_min(t.keepalives),
            per_min(t.other_requests()),
            per_min(t.from_server),
            per_min(t.bytes_to_server),
            per_min(t.bytes_from_server),
            t.connections,
        );
        for (kind, count) in &t.others {
            *others.entry(kind.clone()).or_default() += count;
        }
    }
    for (kind, count) in others {
        println!("    other requests, all daemons: {count} × {kind}");
    }
    Idle { tallies, secs }
}

/// The daemon that answers in round `i`: never the asking one, every pair in turn.
fn partner(i: usize, n: usize) -> (usize, usize) {
    let a = i % n;
    (a, (a + 1 + (i / n) % (n - 1)) % n)
}

/// Time from `inbox.respond` on one daemon to `inbox.wait` returning on another.
async fn respond_wait(members: &[Member], rounds: usize) -> Result<Stats> {
    let n = members.len();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + WARMUP {
        let (a, b) = partner(i, n);
        let (asker, session_id) = members[a]
            .asker
            .as_ref()
            .ok_or_else(|| anyhow!("daemon {a} has no asker"))?;
        let question = params::send(
            session_id,
            MsgType::DecisionNeeded,
            &format!("question {i}"),
            &["yes", "no"],
        );
        let id = asker.call::<m::InboxSend>(&question).await?.id;
        let wait = {
            let waiter = Arc::clone(&members[a].control);
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
        members[b]
            .control
            .call::<m::InboxRespond>(&params::respond(&id, "yes"))
            .await
            .with_context(|| format!("inbox.respond on daemon {b}"))?;
        let (answered, at) = wait.await?;
        answered.with_context(|| format!("inbox.wait on daemon {a}"))?;
        if i >= WARMUP {
            samples.push(at.duration_since(asked));
        }
    }
    let stats = Stats::new(samples);
    println!(
        "  respond on one daemon → wait on another returns: {}",
        stats.describe()
    );
    Ok(stats)
}

/// A rename on the owner, until each other daemon's subscriber has the new name: the
/// delay per daemon, and per round the delay until the last of them.
async fn rename_seen(members: &[Member], rounds: usize) -> Result<(Stats, Stats)> {
    let n = members.len();
    let mut each = Vec::with_capacity(rounds * (n - 1));
    let mut all = Vec::with_capacity(rounds);
    let mut lagged = 0;
    for r in 0..rounds {
        let owner = r % n;
        let sessions = &members[owner].sessions;
        let session = &sessions[(r / n) % sessions.len()];
        let name = format!("renamed {r}");
        let asked = Instant::now();
        members[owner]
            .control
            .call::<m::SessionRename>(&RenameParams {
                session_id: session.clone(),
                name: name.clone(),
            })
            .await
            .with_context(|| format!("session.rename on daemon {owner}"))?;
        let deadline = asked + SEEN_TIMEOUT;
        let delays = loop {
            let delays: Option<Vec<Duration>> = members
                .iter()
                .filter(|m| m.index != owner)
                .map(|m| {
                    let seen = m.seen.lock().unwrap();
                    seen.sessions
                        .get(session)
                        .filter(|v| v.name == name)
                        .map(|v| v.name_at.saturating_duration_since(asked))
                })
                .collect();
            if let Some(delays) = delays {
                break delays;
            }
            if Instant::now() > deadline {
                bail!("rename {r} of {session} not seen by every daemon within {SEEN_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        all.push(delays.iter().copied().max().unwrap_or_default());
        each.extend(delays);
    }
    for m in members {
        lagged += m.seen.lock().unwrap().lagged;
    }
    let (each, all) = (Stats::new(each), Stats::new(all));
    println!("  rename → seen by each other daemon: {}", each.describe());
    println!("  rename → seen by all other daemons: {}", all.describe());
    if lagged > 0 {
        println!("  (subscribers were told {lagged} times that they missed events)");
    }
    Ok((each, all))
}

struct Takeover {
    /// Until the first daemon reported every session of the killed one owned by a live
    /// daemon (the one that claimed them, which announces its claim).
    claimed: Duration,
    /// Until every live daemon reported it.
    all: Duration,
}

/// Kills the last daemon and times the takeover of its sessions.
async fn takeover(members: &mut [Member]) -> Result<Option<Takeover>> {
    let (victim, live) = members
        .split_last_mut()
        .ok_or_else(|| anyhow!("no daemons"))?;
    let live_ids: HashSet<String> = live.iter().map(|m| m.id.clone()).collect();
    let lost: Vec<String> = victim.sessions.clone();
    victim.asker = None;
    println!(
        "  killing daemon {} (pid {}, SIGKILL), which runs {} sessions (load average {})",
        victim.index,
        victim.pid,
        lost.len(),
        load_average()
    );
    let killed = Instant::now();
    victim.kill9()?;
    let deadline = killed + Duration::from_secs(4 * LEASE_SECS);
    let reported = loop {
        // For each live daemon: when it reported the last of the sessions moved.
        let moved: Vec<Option<Duration>> = live
            .iter()
            .map(|m| {
                let seen = m.seen.lock().unwrap();
                lost.iter()
                    .map(|id| {
                        seen.sessions
                            .get(id)
                            .filter(|v| live_ids.contains(&v.owner))
                            .map(|v| v.owner_at.saturating_duration_since(killed))
                    })
                    .collect::<Option<Vec<Duration>>>()
                    .and_then(|at| at.into_iter().max())
            })
            .collect();
        if let Some(moved) = moved.into_iter().collect::<Option<Vec<Duration>>>() {
            break Some(moved);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // What the live daemons' lists say, after the events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut owners: BTreeMap<usize, usize> = BTreeMap::new();
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for s in live[0].list().await? {
        if !lost.contains(&s.id) {
            continue;
        }
        let owner = s.owner.as_deref().unwrap_or_default();
        if let Some(m) = live.iter().find(|m| m.id == owner) {
            *owners.entry(m.index).or_default() += 1;
        }
        *states
            .entry(s.state.map_or("none", SessionState::as_str).to_string())
            .or_default() += 1;
    }
    let running = victim
        .agents
        .iter()
        .filter(|&&p| is_scripted_agent(p))
        .count();
    println!(
        "  after it, daemon 0 lists the {} sessions as owned by daemons {owners:?} (index: \
         count), in states {states:?}; {running} of its {} agents still run",
        lost.len(),
        victim.agents.len()
    );
    let Some(moved) = reported else {
        println!(
            "  the sessions were not all reported owned by live daemons within {} s",
            4 * LEASE_SECS
        );
        return Ok(None);
    };
    let moved = Stats::new(moved);
    println!(
        "  kill → every session owned by a live daemon, per reporting daemon: first {:.2} s, \
         last {:.2} s",
        moved.percentile(0.0).as_secs_f64(),
        moved.max().as_secs_f64()
    );
    Ok(Some(Takeover {
        claimed: moved.percentile(0.0),
        all: moved.max(),
    }))
}
