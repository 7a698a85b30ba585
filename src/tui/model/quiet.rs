//! How long working sessions have been quiet: noted as they speak, shown once past
//! `tui.stall_secs`, and when the screen must be drawn again for it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What the quiet watch is told about a session.
#[derive(Debug)]
pub(in crate::tui) enum QuietMsg {
    /// Its state changed: a working session is watched from now unless it already was.
    State { session_id: String, working: bool },
    /// It said something (or stopped working).
    Heard { session_id: String, working: bool },
    /// It is gone.
    Gone(String),
    /// How long a working session may be quiet before it shows it.
    StallAfter(Duration),
}

/// Since when each working session has said nothing.
#[derive(Debug)]
pub struct Quiet {
    /// Since when each working session has said nothing (its last output, or the start
    /// of its turn).
    pub(in crate::tui) since: HashMap<String, Instant>,
    /// How long a working session may be quiet before it shows it (`tui.stall_secs`).
    after: Duration,
}

impl Default for Quiet {
    fn default() -> Self {
        Self {
            since: HashMap::new(),
            after: Duration::from_secs(120),
        }
    }
}

impl Quiet {
    pub(in crate::tui) fn update(&mut self, msg: QuietMsg) {
        match msg {
            QuietMsg::State {
                session_id,
                working,
            } => {
                if working {
                    self.since.entry(session_id).or_insert_with(Instant::now);
                } else {
                    self.since.remove(&session_id);
                }
            }
            QuietMsg::Heard {
                session_id,
                working,
            } => {
                if working {
                    self.since.insert(session_id, Instant::now());
                } else {
                    self.since.remove(&session_id);
                }
            }
            QuietMsg::Gone(session_id) => {
                self.since.remove(&session_id);
            }
            QuietMsg::StallAfter(after) => self.after = after,
        }
    }

    /// How long a working session has been quiet, once that is at least `tui.stall_secs`.
    pub fn stalled_for(&self, session_id: &str, now: Instant) -> Option<Duration> {
        let quiet = now.checked_duration_since(*self.since.get(session_id)?)?;
        (quiet >= self.after).then_some(quiet)
    }

    /// When the next stall shows or its minutes change: the runtime draws again then
    /// (nothing is drawn on a timer otherwise).
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        self.since
            .values()
            .map(|since| {
                let shows = *since + self.after;
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
}
