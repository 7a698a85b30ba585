//! Text as the components show it: widths, clipping and wrapping to columns, times,
//! quiet spells, costs and context use, and the marks of channel-started sessions.

use ratatui::text::Span;

use crate::protocol::{ChannelKind, Usage};

/// How long a session has been quiet: `2m`, `1h05m`.
pub(super) fn quiet_text(quiet: std::time::Duration) -> String {
    let minutes = quiet.as_secs() / 60;
    if minutes >= 60 {
        format!("{}h{:02}m", minutes / 60, minutes % 60)
    } else {
        format!("{minutes}m")
    }
}

/// Display width of a string.
pub(crate) fn width(text: &str) -> usize {
    Span::raw(text).width()
}

/// Cuts a string to `max` columns, ending in `…` when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = width(c.encode_utf8(&mut [0; 4]));
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    if max > 0 {
        out.push('…');
    }
    out
}

/// Word-wraps text to `max` columns (long words are split).
pub(super) fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut rows = Vec::new();
    for line in text.replace('\t', "    ").split('\n') {
        let mut row = String::new();
        let mut used = 0;
        for word in line.split(' ') {
            let w = width(word);
            let gap = usize::from(!row.is_empty());
            if used + gap + w <= max {
                if gap == 1 {
                    row.push(' ');
                }
                row.push_str(word);
                used += gap + w;
                continue;
            }
            if !row.is_empty() {
                rows.push(std::mem::take(&mut row));
                used = 0;
            }
            for c in word.chars() {
                let cw = width(c.encode_utf8(&mut [0; 4]));
                if used + cw > max {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                row.push(c);
                used += cw;
            }
        }
        rows.push(row);
    }
    rows
}

/// `HH:MM` of an RFC 3339 time, in the offset it was written with.
pub(super) fn clock(timestamp: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(timestamp)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_default()
}

/// The mark of a session a channel started: ◷ a cron job, ↯ a webhook (or another).
pub(super) fn channel_icon(kind: &ChannelKind) -> &'static str {
    match kind {
        ChannelKind::Cron => "◷",
        _ => "↯",
    }
}

/// A cost for people: `$0.42` for US dollars, `1.5 credits` otherwise.
pub(super) fn cost_text(amount: f64, unit: &str) -> String {
    if unit.eq_ignore_ascii_case("USD") {
        format!("${amount:.2}")
    } else {
        format!("{amount:.2} {unit}")
    }
}

/// Context use and cost in one short phrase: `48k/200k tokens · $0.42`.
pub(super) fn usage_text(usage: &Usage) -> String {
    let tokens = |n: u64| {
        if n >= 1000 {
            format!("{}k", n / 1000)
        } else {
            n.to_string()
        }
    };
    let mut text = format!("{}/{} tokens", tokens(usage.used), tokens(usage.size));
    if let (Some(cost), Some(unit)) = (usage.cost, &usage.currency) {
        text.push_str(&format!(" · {}", cost_text(cost, unit)));
    }
    text
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_splits_long_words() {
        assert_eq!(
            wrap("the quick brown fox", 9),
            vec!["the quick", "brown fox"]
        );
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\n\nb", 10), vec!["a", "", "b"]);
    }

    #[test]
    fn clip_marks_what_it_cut() {
        assert_eq!(clip("feat/auth/claude", 8), "feat/au…");
        assert_eq!(clip("short", 8), "short");
        assert_eq!(clock("2026-11-02T10:07:00Z"), "10:07");
    }
}
