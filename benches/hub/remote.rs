//! A kiln on another machine: an OpenSSH server on 127.0.0.1 (the test kit's, as the
//! hub's remote-kiln test runs it) stands for the other machine, and `[[hub.remotes]]` in
//! the person's settings names the kiln there, whose daemon keeps its own state folder
//! (so this machine's registry does not list it). A hub of its own (its own temp
//! folders), one local kiln and the remote one: an agent's question, sent through a
//! session's handle at its kiln's daemon, timed until the hub's subscriber receives its
//! `inbox.created`, from the remote kiln and from the local one, alternately.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::{ComponentState, Notification};
use testkit::Sshd;
use testkit::bench::figures::Stats;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::fleet::{self, BenchKiln, Env, ask};

/// The ssh host the test kit's client config names.
const HOST: &str = "crucible-remote";
/// Untimed events from each kiln before the timed ones (the first crosses connections
/// just made).
const WARMUP: usize = 3;
/// How long an event may take to reach the hub's subscriber.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Event latencies from the kiln over ssh and from the local kiln.
pub struct Latency {
    pub remote: Stats,
    pub local: Stats,
}

/// The phase: `None` when no sshd can be started here (said on stdout).
pub async fn latency(root: &Path, exe: &Path, rounds: usize) -> Result<Option<Latency>> {
    let Some(sshd) = tokio::task::spawn_blocking(Sshd::start).await? else {
        println!("  not measured: no sshd accepts a login on loopback here");
        return Ok(None);
    };
    let env = Env::new(&root.join("remote-phase"))?;
    let there = env.root.join("remote-state");
    std::fs::create_dir_all(&there).context("creating the remote kiln's state folder")?;
    let mut kilns = Vec::with_capacity(2);
    let hub = async {
        start(&env, exe, &there, &mut kilns).await?;
        write_settings(&env, &sshd, &kilns[1], &there, exe)?;
        let hub = fleet::start_hub(&env, exe, 2).await?;
        over_ssh(&env).await?;
        Ok(hub)
    }
    .await;
    let (hub, measured) = match hub {
        Ok(hub) => {
            let measured = measure(&env, &kilns, rounds).await;
            (Some(hub), measured)
        }
        Err(e) => (None, Err(e)),
    };
    fleet::stop(&env, hub, kilns).await;
    drop(sshd);
    measured.map(Some)
}

/// The local kiln (`near`, in the bench's registry) and the remote one (`faraway`, with
/// its own state folder `there`), each with one registered session, into `kilns`.
async fn start(env: &Env, exe: &Path, there: &Path, kilns: &mut Vec<BenchKiln>) -> Result<()> {
    kilns.push(fleet::spawn_kiln(env, exe, "near", None)?);
    kilns.push(fleet::spawn_kiln(env, exe, "faraway", Some(there))?);
    for k in kilns.iter_mut() {
        k.answers().await?;
        fleet::fill(k, 1, 0).await?;
    }
    Ok(())
}

/// The person's settings naming the remote kiln, reached with the test sshd's client
/// config and a `cru` that uses the remote kiln's state folder.
fn write_settings(
    env: &Env,
    sshd: &Sshd,
    remote: &BenchKiln,
    there: &Path,
    exe: &Path,
) -> Result<()> {
    let folder = env.root.join("config/crucible");
    std::fs::create_dir_all(&folder).context("creating the person's settings folder")?;
    std::fs::write(
        folder.join("config.toml"),
        format!(
            "[[hub.remotes]]\nssh = \"{HOST}\"\nssh_args = [\"-F\", \"{ssh}\"]\n\
             kilns = [\"{kiln}\"]\ncru = \"env XDG_STATE_HOME={there} {cru}\"\n",
            ssh = sshd.config().display(),
            kiln = remote.kiln.root().display(),
            there = there.display(),
            cru = exe.display(),
        ),
    )
    .context("writing the person's settings")
}

/// Checks that the hub reaches the remote kiln through ssh (its status row names the
/// host), not as a kiln of this machine's registry.
async fn over_ssh(env: &Env) -> Result<()> {
    let hub = Client::connect_at(&env.hub_socket(), None).await?;
    let status = hub.call::<m::DaemonStatusOf>(&m::NoParams {}).await?;
    let there = format!(" on {HOST} ");
    ensure!(
        status
            .components
            .iter()
            .any(|c| c.state == ComponentState::On && c.detail.contains(&there)),
        "the hub lists no kiln reached on {HOST}"
    );
    Ok(())
}

/// `rounds` timed questions from each kiln, alternately: from the send until the hub's
/// subscriber has the `inbox.created` event of the message sent.
async fn measure(env: &Env, kilns: &[BenchKiln], rounds: usize) -> Result<Latency> {
    let hub = Client::connect_at(&env.hub_socket(), None).await?;
    let mut events = hub.subscribe(None).await?;
    let mut agents = Vec::with_capacity(kilns.len());
    for k in kilns {
        let (id, handle) = k.sessions.first().context("a kiln without sessions")?;
        let agent = Client::connect_at(&k.kiln.socket_path(), Some(handle)).await?;
        agents.push((id.clone(), agent));
    }
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for round in 0..2 * (WARMUP + rounds) {
        let from_remote = round % 2 == 1;
        let (session, agent) = &agents[usize::from(from_remote)];
        let title = format!("Latency {round}");
        let started = Instant::now();
        let (sent, arrived) =
            tokio::join!(ask(agent, session, &title), created(&mut events, &title));
        let (sent, (arrived, id)) = (sent?, arrived?);
        ensure!(
            sent == id,
            "the hub's event for {title:?} names message {id}, not {sent}"
        );
        if round >= 2 * WARMUP {
            let took = arrived.duration_since(started);
            if from_remote {
                remote.push(took);
            } else {
                local.push(took);
            }
        }
    }
    Ok(Latency {
        remote: Stats::new(remote),
        local: Stats::new(local),
    })
}

/// Waits for the `inbox.created` event of the message titled `title`: when it arrived,
/// and the message's id.
async fn created(
    events: &mut UnboundedReceiver<Notification>,
    title: &str,
) -> Result<(Instant, String)> {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(note)) if note.method == "inbox.created" && note.params["title"] == title => {
                let at = Instant::now();
                let id = note.params["id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| anyhow!("inbox.created without an id: {}", note.params))?;
                return Ok((at, id));
            }
            Ok(Some(_)) => {}
            Ok(None) => bail!("the hub closed the connection"),
            Err(_) => bail!("no inbox.created for {title:?} reached the hub's subscriber"),
        }
    }
}
