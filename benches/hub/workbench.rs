//! The real workbench on the hub: `cru --all-kilns` in a pseudo-terminal of 120×30, from
//! a folder that is no kiln, with the hub and its kilns up; timed from spawn until the
//! screen is populated (the status bar shows the focused first session, `▸[1]`, and the
//! first kiln's name as its group, `k00:`). Ctrl-Q quits each start.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use testkit::bench::figures::Stats;
use testkit::bench::pty::{Pty, Screen};

use crate::fleet::Env;

const COLS: u16 = 120;
const ROWS: u16 = 30;
/// What the populated screen shows: the focused session and the first kiln's group.
const POPULATED: [&str; 2] = ["▸[1]", "k00:"];
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// A child that is killed and reaped if it is still running when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `starts` starts of the workbench on the hub: spawn to the populated screen.
pub fn populated(env: &Env, exe: &Path, starts: usize) -> Result<Stats> {
    let mut times = Vec::with_capacity(starts);
    // The first start is not timed: it opens the hub's connections for the workbench.
    for round in 0..=starts {
        let took = open(env, exe)?;
        if round > 0 {
            times.push(took);
        }
    }
    Ok(Stats::new(times))
}

fn open(env: &Env, exe: &Path) -> Result<Duration> {
    let (pty, slave) = Pty::open(COLS, ROWS)?;
    let mut command = Command::new(exe);
    for (name, dir) in env.vars() {
        command.env(name, dir);
    }
    command
        .arg("--all-kilns")
        .env_remove("CRU_KILN")
        .env("CRU_DAEMON_EXE", exe)
        .env("TERM", "xterm-256color")
        .current_dir(&env.outside);
    Pty::give(&mut command, &slave)?;
    let spawned = Instant::now();
    let mut tui = Reaped(command.spawn().context("spawning cru --all-kilns")?);
    drop(command);
    drop(slave);
    let mut screen = Screen::new(COLS, ROWS);
    let populated = loop {
        let left = FRAME_TIMEOUT.saturating_sub(spawned.elapsed());
        if left.is_zero() {
            bail!(
                "the workbench was not populated within {FRAME_TIMEOUT:?}; its screen:\n{}",
                screen.text()
            );
        }
        let Some(bytes) = pty.read(left)? else {
            if let Some(status) = tui.0.try_wait()? {
                bail!(
                    "the workbench exited ({status}); its screen:\n{}",
                    screen.text()
                );
            }
            continue;
        };
        let at = spawned.elapsed();
        screen.feed(&bytes);
        if POPULATED.iter().all(|t| screen.shows(t)) {
            break at;
        }
    };
    pty.quit(&mut tui.0)?;
    Ok(populated)
}
