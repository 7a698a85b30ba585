//! Matrix channel benchmark: a real Synapse on loopback, the daemon's bot in an encrypted
//! room, and a person on the same Matrix SDK. Each round the person sends `stamp`; the
//! scripted agent answers with the time its prompt arrived (`stamp <ns>`), and the person's
//! client notes when the decrypted reply arrives. Two figures, median of the rounds:
//!
//! - message → agent prompt: from the person's send call to the agent's prompt (encrypt,
//!   homeserver, the bot's sync, decrypt, resolve to the session, prompt);
//! - agent reply → room: from the agent's reply to the person's client decrypting it (turn
//!   end, Markdown, encrypt, homeserver, the person's sync).
//!
//! ```text
//! bash .ci/run   # once: Synapse in the target folder's virtual environment
//! cargo bench --bench matrix
//! ```
//!
//! The daemon measured is the shipping build (`testkit/src/bench/ship.rs`: release, fat LTO), or the
//! binary `CRU_BENCH_BIN` names. Environment: `CRU_BENCH_ROUNDS` (default 20). Figures
//! are printed, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::bench::ship;
use testkit::built;
use testkit::matrix_human;
use testkit::synapse;

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods::{self as m, NoParams};
use matrix_sdk::ruma::events::room::message::OriginalSyncRoomMessageEvent;
use tokio::process::Command;
use tokio::sync::mpsc;

use figures::{Stats, env_number, load_average, ms};
use matrix_human::Human;
use synapse::Homeserver;

const CRU: &str = env!("CARGO_BIN_EXE_cru");
const BOT_PASSWORD: &str = "bench-bot-pass";
const WAIT: Duration = Duration::from_secs(60);

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
            eprintln!("matrix benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

async fn run() -> Result<()> {
    let rounds = env_number("CRU_BENCH_ROUNDS", 20)? as usize;
    println!("matrix channel: a real Synapse on loopback, an encrypted room");
    println!("  load average before: {}", load_average());
    let cru = Path::new(CRU);
    let hs = Homeserver::start(cru).await;
    let bot = hs.register("bot", BOT_PASSWORD, false).await;
    let alice_id = hs.register("alice", "alice-pass", false).await;
    let agent = built::scripted_agent(cru);
    let settings = format!(
        "[daemon]\ngrace_period_secs = 300\n\n[agents.scripted]\ncommand = {agent:?}\n\n\
         [channels.matrix]\nhomeserver = {:?}\nuser_id = {bot:?}\npassword_env = \"CRU_BENCH_BOT_PASSWORD\"\n\
         allowed_users = [{alice_id:?}]\nagent = \"scripted\"\n",
        hs.url()
    );
    let temp = kiln::temp_kiln("cru-matrix-bench", &settings)?;
    let kiln = Kiln::new(temp.root.clone());
    // The shipping build (release, fat LTO) is what is measured; `CRU_BENCH_BIN` names
    // another, `CRU_BENCH_SHIP=0` measures this build's own.
    let measured = ship::cru_to_measure(CRU);
    println!("  measuring {}", measured.display());
    let _daemon = Command::new(&measured)
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .env("CRU_BENCH_BOT_PASSWORD", BOT_PASSWORD)
        .env("XDG_CONFIG_HOME", &temp.xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the daemon")?;
    let client = kiln::connect(&kiln).await?;
    wait_synced(&client).await?;

    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let (arrived, mut arrivals) = mpsc::unbounded_channel::<(u128, String)>();
    let bot_id = bot.clone();
    alice
        .client()
        .add_event_handler(move |event: OriginalSyncRoomMessageEvent| {
            let arrived = arrived.clone();
            let bot_id = bot_id.clone();
            async move {
                if event.sender.as_str() == bot_id {
                    let _ = arrived.send((now_ns(), event.content.body().to_string()));
                }
            }
        });
    let room = alice.create_encrypted_room(&[bot.as_str()], false).await;
    alice.wait_until_joined(&room, &bot, WAIT).await;
    // The first message starts the session (a worktree, the agent): not a round.
    alice.send_text(&room, "say ready").await;
    reply_with(&mut arrivals, "ready").await?;

    let mut to_prompt = Vec::new();
    let mut to_room = Vec::new();
    for _ in 0..rounds {
        let sent = now_ns();
        alice.send_text(&room, "stamp").await;
        let (arrived_at, body) = reply_with(&mut arrivals, "stamp ").await?;
        let stamped: u128 = body
            .trim()
            .strip_prefix("stamp ")
            .and_then(|ns| ns.trim().parse().ok())
            .context("the agent's stamp")?;
        to_prompt.push(nanos(stamped.saturating_sub(sent)));
        to_room.push(nanos(arrived_at.saturating_sub(stamped)));
    }
    let to_prompt = Stats::new(to_prompt);
    let to_room = Stats::new(to_room);
    println!();
    println!("| figure ({rounds} rounds) | median | p90 | max |");
    println!("|---|---|---|---|");
    for (name, stats) in [
        ("message → agent prompt", &to_prompt),
        ("agent reply → room (decrypted)", &to_room),
    ] {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
            ms(stats.median()),
            ms(stats.percentile(0.9)),
            ms(stats.max())
        );
    }
    println!("  load average after: {}", load_average());
    Ok(())
}

fn nanos(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

async fn wait_synced(client: &Client) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = client.call::<m::DaemonStatusOf>(&NoParams {}).await?;
        if status
            .matrix
            .as_ref()
            .is_some_and(|bot| bot.last_sync.is_some())
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the bot did not log in and sync: {:?}", status.matrix);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The next message of the bot's that holds `text`, with when it arrived.
async fn reply_with(
    arrivals: &mut mpsc::UnboundedReceiver<(u128, String)>,
    text: &str,
) -> Result<(u128, String)> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, arrivals.recv()).await {
            Ok(Some((at, body))) if body.contains(text) => return Ok((at, body)),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => bail!("no reply holding {text:?}"),
        }
    }
}
