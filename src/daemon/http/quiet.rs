//! Log lines about refused requests and connections (of the webhook listener, the web view), at most one per spell: the
//! first refusal after a quiet spell is logged at once with its reason; those that follow
//! within the spell are only counted, and the next line says how many of each there were.
//! A flood of bad requests so costs a few lines a minute, not one line per request.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

pub(in crate::daemon) struct Quiet {
    /// Whose refusals: the lines start with it.
    what: &'static str,
    every: Duration,
    spell: Mutex<Spell>,
}

#[derive(Default)]
struct Spell {
    /// When the last line was written.
    logged: Option<Instant>,
    /// What was refused since, by kind.
    counts: BTreeMap<&'static str, u64>,
}

impl Quiet {
    pub fn new(what: &'static str, every: Duration) -> Self {
        Self {
            what,
            every,
            spell: Mutex::new(Spell::default()),
        }
    }

    /// Counts one refusal of `kind` (e.g. "requests refused"), and logs when a line is due.
    pub fn note(&self, kind: &'static str, why: &str) {
        if let Some(counts) = self.due(kind, Instant::now()) {
            tracing::warn!(
                every_secs = self.every.as_secs(),
                "{}: {counts}; the last: {why}",
                self.what
            );
        }
    }

    /// The counts to log, when a line is due at `now`.
    fn due(&self, kind: &'static str, now: Instant) -> Option<String> {
        let mut spell = self.spell.lock().unwrap_or_else(PoisonError::into_inner);
        *spell.counts.entry(kind).or_default() += 1;
        if spell
            .logged
            .is_some_and(|at| now.saturating_duration_since(at) < self.every)
        {
            return None;
        }
        spell.logged = Some(now);
        let counts = std::mem::take(&mut spell.counts)
            .into_iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_spell_carries_the_counts_since_the_last() {
        let quiet = Quiet::new("webhooks", Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        assert_eq!(
            quiet.due("requests refused", at(0)).as_deref(),
            Some("requests refused: 1")
        );
        // A hundred a second for 25 seconds: a line at 10 s and at 20 s.
        let mut lines = Vec::new();
        for i in 0..2500 {
            lines.extend(quiet.due("idle connections shed", at(1 + i / 100)));
        }
        assert_eq!(
            lines,
            ["idle connections shed: 901", "idle connections shed: 1000"]
        );
        assert_eq!(quiet.due("requests refused", at(26)), None);
        assert_eq!(
            quiet.due("requests refused", at(30)).as_deref(),
            Some("idle connections shed: 599, requests refused: 2")
        );
    }
}
