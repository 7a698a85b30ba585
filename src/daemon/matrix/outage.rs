//! A failure that repeats is said once: the first failed attempt is a warning, the
//! attempts after it are debug lines, and the first attempt that works again says so,
//! once. A homeserver that is away for an hour leaves two lines in the log, not hundreds.

use std::fmt::Display;
use std::time::Instant;

/// Whether attempts at `what` are failing, and since when.
pub(super) struct Outage {
    what: &'static str,
    since: Option<Instant>,
    attempts: u32,
}

impl Outage {
    pub(super) fn new(what: &'static str) -> Self {
        Self {
            what,
            since: None,
            attempts: 0,
        }
    }

    /// An attempt failed with `error`.
    pub(super) fn failed(&mut self, error: &dyn Display) {
        self.attempts += 1;
        if self.since.is_none() {
            self.since = Some(Instant::now());
            tracing::warn!("matrix: {} failed: {error} (trying again)", self.what);
        } else {
            tracing::debug!(
                attempts = self.attempts,
                "matrix: {} failed: {error}",
                self.what
            );
        }
    }

    /// An attempt worked: after failures, says it works again.
    pub(super) fn worked(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::info!(
                attempts = self.attempts,
                down_secs = since.elapsed().as_secs(),
                "matrix: {} works again",
                self.what
            );
        }
        self.attempts = 0;
    }
}
