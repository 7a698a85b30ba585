//! The real workbench's first frames: `cru` in a pseudo-terminal of 120×30 on the kiln,
//! with the daemon up, timed from spawn until the screen shows the transcript pane's
//! border (the first frame) and until it is populated: the status bar shows the sessions
//! (`▸[1]`, the focused first one, and `[2]` when there are two or more; with many, the
//! window of the bar around the focused one) and the focused session's transcript shows
//! its agent's last reply. Ctrl-Q quits each start.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::pty::{Pty, Screen};

const COLS: u16 = 120;
const ROWS: u16 = 30;
/// In the first frame, drawn before the daemon answers.
const FIRST_FRAME_TEXT: &str = "transcript";
/// The focused session in the status bar: the first, focused when the state is read.
const FOCUSED_TEXT: &str = "▸[1]";
/// What every session's last turn ends with (`session` said `session <agent's id>`).
pub const REPLY_TEXT: &str = "session scripted-";
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the workbench runs.
#[derive(Clone)]
pub struct Place {
    pub exe: PathBuf,
    pub kiln: PathBuf,
    pub xdg: PathBuf,
}

/// One start: from spawn to the first frame and to the populated one.
pub struct Start {
    pub first: Duration,
    pub populated: Duration,
}

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

/// Runs the workbench until it is populated with `sessions` sessions, then quits it.
pub fn open(place: &Place, sessions: usize) -> Result<Start> {
    let (pty, slave) = Pty::open(COLS, ROWS)?;
    let mut command = Command::new(&place.exe);
    command
        .env("CRU_KILN", &place.kiln)
        .env("XDG_CONFIG_HOME", &place.xdg)
        .env("TERM", "xterm-256color")
        .current_dir(&place.kiln);
    Pty::give(&mut command, &slave)?;
    let spawned = Instant::now();
    let mut tui = Reaped(command.spawn().context("spawning cru")?);
    // Only the child holds the terminal's side now.
    drop(command);
    drop(slave);
    let mut screen = Screen::new(COLS, ROWS);
    let populated_texts: Vec<&str> = if sessions >= 2 {
        vec![FOCUSED_TEXT, "[2]", REPLY_TEXT]
    } else {
        vec![FOCUSED_TEXT, REPLY_TEXT]
    };
    let (mut first, mut populated) = (None, None);
    while populated.is_none() {
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
        if first.is_none() && screen.shows(FIRST_FRAME_TEXT) {
            first = Some(at);
        }
        if populated_texts.iter().all(|t| screen.shows(t)) {
            populated = Some(at);
        }
    }
    pty.quit(&mut tui.0)?;
    Ok(Start {
        first: first.context("the populated frame came without the first")?,
        populated: populated.context("no populated frame")?,
    })
}
