//! Progress of a command that takes a while, on standard error when it is a terminal
//! (a line rewritten in place: `making sessions: 3 of 10`, or `checking the database…
//! 12 s`), nothing otherwise, so pipes and scripts read only the result.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// A count of steps done, shown as they are.
pub struct Progress {
    what: String,
    total: usize,
    done: usize,
    shown: bool,
}

impl Progress {
    /// `what` of `total` steps (`making sessions`).
    pub fn new(what: &str, total: usize) -> Self {
        let progress = Self {
            what: what.into(),
            total,
            done: 0,
            shown: std::io::stderr().is_terminal(),
        };
        progress.draw();
        progress
    }

    fn draw(&self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K{}: {} of {}",
                self.what, self.done, self.total
            );
            let _ = err.flush();
        }
    }

    /// One more step done.
    pub fn step(&mut self) {
        self.done += 1;
        self.draw();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

/// Waits for `work`, saying on a terminal's standard error that `what` goes on and for how
/// long, each second after the first.
pub async fn waiting<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() {
        return work.await;
    }
    let started = Instant::now();
    let mut work = std::pin::pin!(work);
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let mut said = false;
    let done = loop {
        tokio::select! {
            done = &mut work => break done,
            _ = tick.tick() => {
                said = true;
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K{what}… {} s", started.elapsed().as_secs());
                let _ = err.flush();
            }
        }
    };
    if said {
        let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
    }
    done
}
