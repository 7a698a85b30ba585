//! Start-up cost of a contained session: `session.create` until the agent is ready
//! (state `complete`, "ready for a prompt"), for the same scripted ACP agent run
//! `local` and in a `sandbox` (bubblewrap), 20 sessions each, on a real daemon over its
//! socket. Each session makes (and its delete removes) its own git worktree, as users'
//! sessions do, so the difference is the driver's.
//!
//! ```text
//! cargo bench --bench drivers
//! ```
//!
//! `CRU_DRIVERS_RUNS` sets the sessions per driver (default 20).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::built;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::params::{CreateSessionParams, DeleteSessionParams, RemoveOptions};
use crucible::protocol::{DriverKind, DriverOptions, Session, SessionState};
use testkit::daemon::call;
use testkit::params;

const CRU: &str = env!("CARGO_BIN_EXE_cru");
/// The scripted ACP agent, in this benchmark's profile.
fn scripted_agent() -> &'static str {
    built::scripted_agent(std::path::Path::new(env!("CARGO_BIN_EXE_cru")))
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "git {args:?}");
}

async fn session(client: &Client, id: &str) -> Session {
    call::<m::SessionGet>(client, params::session_id(id))
        .await
        .session
}

/// Milliseconds from `session.create` to ready, for `runs` sessions.
async fn measure(client: &Client, driver: &str, runs: usize) -> (Vec<f64>, Vec<String>) {
    let mut times = Vec::with_capacity(runs);
    let mut limits = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let create = CreateSessionParams {
            agent: "scripted".into(),
            driver: DriverOptions {
                driver: Some(DriverKind::parse(driver).unwrap()),
                ..Default::default()
            },
            ..Default::default()
        };
        let id = client
            .call::<m::SessionCreate>(&create)
            .await
            .unwrap_or_else(|e| panic!("{driver}: session.create: {e}"))
            .session_id;
        loop {
            let s = session(client, &id).await;
            match s.state {
                Some(SessionState::Complete) => {
                    limits = s.limits.clone();
                    break;
                }
                Some(SessionState::Error | SessionState::Stopped) => {
                    panic!("{driver}: {:?}", s.state_reason)
                }
                _ => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        let delete = DeleteSessionParams {
            session_id: id,
            options: RemoveOptions {
                remove_worktree: true,
                delete_branch: true,
                force: true,
                audit: false,
            },
        };
        call::<m::SessionDelete>(client, delete).await;
    }
    (times, limits)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn main() {
    let runs: usize = std::env::var("CRU_DRIVERS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(
        root.join(".crucible.toml"),
        format!(
            "[daemon]\ngrace_period_secs = 60\n\n[agents.scripted]\ncommand = {:?}\n",
            scripted_agent()
        ),
    )
    .unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "bench\n").unwrap();
    git(&root, &["add", "README.md"]);
    git(&root, &["commit", "-q", "-m", "start"]);
    let kiln = Kiln::new(&root);
    let mut daemon = Command::new(CRU)
        .arg("--kiln")
        .arg(&root)
        .args(["daemon", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            if let Ok(client) = Client::connect(&kiln).await {
                break client;
            }
            assert!(Instant::now() < deadline, "the daemon did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // One of each first, so neither pays for a cold page cache alone.
        measure(&client, "local", 1).await;
        measure(&client, "sandbox", 1).await;
        let (local, _) = measure(&client, "local", runs).await;
        let (sandbox, limits) = measure(&client, "sandbox", runs).await;
        let (l, s) = (median(&local), median(&sandbox));
        println!("session start-up, create → ready, {runs} sessions each (median):");
        println!(
            "  local    {l:8.1} ms   (min {:.1}, max {:.1})",
            min(&local),
            max(&local)
        );
        println!(
            "  sandbox  {s:8.1} ms   (min {:.1}, max {:.1})",
            min(&sandbox),
            max(&sandbox)
        );
        println!("  sandbox costs {:+.1} ms ({:.2}x)", s - l, s / l);
        if !limits.is_empty() {
            println!("  limits in force: {}", limits.join("; "));
        }
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}
