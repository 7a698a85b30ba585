//! How long working sessions have been quiet: noted as they speak, shown once past
//! `tui.stall_secs`, and when the screen must be drawn again for it.

use std::time::{Duration, Instant};

use super::Model;
use crate::protocol::SessionState;

impl Model {
    pub fn set_stall_after(&mut self, after: Duration) {
        self.stall_after = after;
    }

    /// How long a working session has been quiet, once that is at least `tui.stall_secs`.
    pub fn stalled_for(&self, session_id: &str, now: Instant) -> Option<Duration> {
        let quiet = now.checked_duration_since(*self.quiet_since.get(session_id)?)?;
        (quiet >= self.stall_after).then_some(quiet)
    }

    /// When the next stall shows or its minutes change: the runtime draws again then
    /// (nothing is drawn on a timer otherwise).
    pub fn next_stall_change(&self, now: Instant) -> Option<Instant> {
        self.quiet_since
            .values()
            .map(|since| {
                let shows = *since + self.stall_after;
                if shows > now {
                    shows
                } else {
                    // The next whole minute of quiet.
                    let quiet = now.duration_since(*since).as_secs();
                    *since + Duration::from_secs((quiet / 60 + 1) * 60)
                }
            })
            .min()
    }

    /// Notes that a session said something (or stopped working).
    pub(super) fn heard(&mut self, session_id: &str) {
        let working = self
            .session(session_id)
            .and_then(|s| s.state)
            .is_some_and(|s| matches!(s, SessionState::Working | SessionState::Starting));
        if working {
            self.quiet_since
                .insert(session_id.to_string(), Instant::now());
        } else {
            self.quiet_since.remove(session_id);
        }
    }
}
