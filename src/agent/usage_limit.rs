//! Usage and rate limits, as agents report them when a turn fails: the known messages
//! of claude, codex and gemini (and the HTTP APIs behind them), with the time the limit
//! resets when the message says it. A session that hits one is parked until then, not
//! failed, and its prompt is sent again at the reset.

use std::time::Duration;

use chrono::{DateTime, Local, NaiveTime, TimeZone, Utc};

/// How long a session waits when the agent says it hit a limit but not until when.
pub const UNSAID_WAIT: Duration = Duration::from_secs(15 * 60);

/// A limit the agent hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLimit {
    /// When it resets.
    pub resets_at: DateTime<Utc>,
    /// Whether the agent said so (else [`UNSAID_WAIT`] from now).
    pub said: bool,
}

impl UsageLimit {
    /// A limit that resets when the agent said (not before `now`), or, when it said
    /// nothing, [`UNSAID_WAIT`] from `now`.
    pub fn resetting(said: Option<DateTime<Utc>>, now: DateTime<Utc>) -> UsageLimit {
        match said {
            Some(resets_at) => UsageLimit {
                resets_at: resets_at.max(now),
                said: true,
            },
            None => UsageLimit {
                resets_at: now + chrono::Duration::from_std(UNSAID_WAIT).unwrap_or_default(),
                said: false,
            },
        }
    }

    /// When it resets, in words for the session's state: the local time, and that the
    /// agent did not say when if it did not.
    pub fn resumes(&self) -> String {
        let local = self.resets_at.with_timezone(&Local);
        let mut resumes = local.format("%H:%M:%S").to_string();
        if !self.said {
            resumes.push_str(" (the agent did not say when; crucible waits 15 minutes)");
        }
        resumes
    }

    /// How long from `now` until it resets.
    pub fn wait(&self, now: DateTime<Utc>) -> Duration {
        (self.resets_at - now).to_std().unwrap_or(Duration::ZERO)
    }
}

/// Whether `text` (a failed turn's error) reports a usage or rate limit, and when it
/// resets, read against `now`.
pub fn recognise(text: &str, now: DateTime<Utc>) -> Option<UsageLimit> {
    let lower = text.to_lowercase();
    let limited = [
        "usage limit",
        "rate limit",
        "rate_limit",
        "ratelimit",
        "quota exceeded",
        "resource_exhausted",
        "too many requests",
        "hit your limit",
        "limit reached",
    ]
    .iter()
    .any(|m| lower.contains(m));
    if !limited {
        return None;
    }
    let said = epoch_after_bar(text)
        .or_else(|| relative(&lower).map(|d| now + d))
        .or_else(|| clock_after(&lower, "try again at ", now))
        .or_else(|| clock_after(&lower, "resets at ", now))
        .or_else(|| clock_after(&lower, "resets ", now));
    Some(UsageLimit::resetting(said, now))
}

/// Claude Code's `Claude AI usage limit reached|1732633200`: seconds since the epoch.
fn epoch_after_bar(text: &str) -> Option<DateTime<Utc>> {
    let (_, after) = text.rsplit_once('|')?;
    let digits: String = after
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let secs: i64 = digits.parse().ok()?;
    // Milliseconds, if it is that long.
    let secs = if secs > 100_000_000_000 {
        secs / 1000
    } else {
        secs
    };
    Utc.timestamp_opt(secs, 0).single()
}

/// `retry in 32.5s`, `try again in 20 seconds`, `retry after 2 minutes`, `retry-after: 30`.
fn relative(lower: &str) -> Option<chrono::Duration> {
    for marker in [
        "retry in ",
        "try again in ",
        "retry after ",
        "retry-after: ",
        "retry-after:",
        "resets in ",
    ] {
        let Some(at) = lower.find(marker) else {
            continue;
        };
        let rest = &lower[at + marker.len()..];
        let number: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let Ok(amount) = number.parse::<f64>() else {
            continue;
        };
        let unit = rest[number.len()..].trim_start();
        let secs = if unit.starts_with("ms") || unit.starts_with("millisecond") {
            amount / 1000.0
        } else if unit.starts_with('h') {
            amount * 3600.0
        } else if unit.starts_with("m") && !unit.starts_with("ms") {
            amount * 60.0
        } else {
            amount
        };
        if secs.is_finite() && secs >= 0.0 {
            return chrono::Duration::from_std(Duration::from_secs_f64(secs.ceil())).ok();
        }
    }
    None
}

/// `try again at 12:16 PM`, `resets 3pm`, `resets at 15:30`: the next such time of the
/// daemon's local clock (the agents' own), or the UTC one when it says `UTC`.
fn clock_after(lower: &str, marker: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let at = lower.rfind(marker)?;
    let rest = lower[at + marker.len()..].trim_start();
    let time = clock(rest)?;
    let utc = rest.contains("utc");
    let next = if utc {
        let mut day = now.date_naive();
        loop {
            let candidate = day.and_time(time).and_utc();
            if candidate >= now {
                break candidate;
            }
            day = day.succ_opt()?;
        }
    } else {
        let local_now = now.with_timezone(&Local);
        let mut day = local_now.date_naive();
        loop {
            let candidate = Local
                .from_local_datetime(&day.and_time(time))
                .earliest()?
                .with_timezone(&Utc);
            if candidate >= now {
                break candidate;
            }
            day = day.succ_opt()?;
        }
    };
    Some(next)
}

/// `12:16 pm`, `3pm`, `15:30`, at the start of `text` (after an optional date such as
/// `nov 26th, 2026 `).
fn clock(text: &str) -> Option<NaiveTime> {
    // Skip a date before the time: the first word with a colon or an am/pm is the time.
    let words: Vec<&str> = text.split_whitespace().take(6).collect();
    for (i, word) in words.iter().enumerate() {
        let word = word.trim_end_matches(['.', ',', ')', ';']);
        let next = words
            .get(i + 1)
            .map(|w| w.trim_end_matches(['.', ',', ')', ';']));
        let (digits, meridiem) = if let Some(d) = word.strip_suffix("am") {
            (d, Some(false))
        } else if let Some(d) = word.strip_suffix("pm") {
            (d, Some(true))
        } else if matches!(next, Some("am")) {
            (word, Some(false))
        } else if matches!(next, Some("pm")) {
            (word, Some(true))
        } else if word.contains(':') {
            (word, None)
        } else {
            continue;
        };
        let (h, m) = match digits.split_once(':') {
            Some((h, m)) => (h.parse::<u32>().ok()?, m.parse::<u32>().ok()?),
            None => (digits.parse::<u32>().ok()?, 0),
        };
        let h = match meridiem {
            Some(false) if h == 12 => 0,
            Some(true) if h < 12 => h + 12,
            _ => h,
        };
        return NaiveTime::from_hms_opt(h, m, 0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 26, 10, 0, 0).unwrap()
    }

    #[test]
    fn an_error_that_is_no_limit_is_not_one() {
        assert_eq!(recognise("the model refused: bad request", now()), None);
        assert_eq!(recognise("Internal error: connection reset", now()), None);
    }

    #[test]
    fn relative_and_epoch_reset_times_are_read() {
        let gemini = "[API Error: Quota exceeded for quota metric 'Generate Content API requests per minute'. Please retry in 32.5s.]";
        let limit = recognise(gemini, now()).unwrap();
        assert!(limit.said);
        assert_eq!(limit.wait(now()), Duration::from_secs(33));
        let api = "429 Too Many Requests: rate_limit_error; retry-after: 20";
        assert_eq!(
            recognise(api, now()).unwrap().wait(now()),
            Duration::from_secs(20)
        );
        let minutes = "Rate limit reached. Try again in 2 minutes.";
        assert_eq!(
            recognise(minutes, now()).unwrap().wait(now()),
            Duration::from_secs(120)
        );
        let claude = "Claude AI usage limit reached|1795687200";
        let limit = recognise(claude, now()).unwrap();
        assert_eq!(limit.resets_at.timestamp(), 1_795_687_200);
    }

    #[test]
    fn clock_reset_times_are_the_next_such_time() {
        let codex = "You've hit your usage limit. To get more access now, send a request to your admin or try again at 11:30 UTC.";
        let limit = recognise(codex, now()).unwrap();
        assert_eq!(
            limit.resets_at,
            Utc.with_ymd_and_hms(2026, 11, 26, 11, 30, 0).unwrap()
        );
        // Earlier than now: tomorrow.
        let claude = "5-hour limit reached ∙ resets 9am UTC";
        let limit = recognise(claude, now()).unwrap();
        assert_eq!(
            limit.resets_at,
            Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap()
        );
        assert_eq!(clock("12:16 pm."), NaiveTime::from_hms_opt(12, 16, 0));
        assert_eq!(clock("12 am"), NaiveTime::from_hms_opt(0, 0, 0));
        assert_eq!(
            clock("nov 26th, 2026 3:04 pm"),
            NaiveTime::from_hms_opt(15, 4, 0)
        );
        // The local clock: a time of the local day, in the future.
        let local = recognise("You've hit your usage limit. Try again at 3:04 PM.", now()).unwrap();
        assert!(local.said && local.resets_at > now());
        assert!(local.wait(now()) <= Duration::from_secs(24 * 3600));
    }

    #[test]
    fn a_limit_that_says_no_time_waits_the_default() {
        let limit = recognise("You've hit your usage limit.", now()).unwrap();
        assert!(!limit.said);
        assert_eq!(limit.wait(now()), UNSAID_WAIT);
    }
}
