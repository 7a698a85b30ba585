//! Small text helpers shared by the layers that write messages for people.

/// Cuts `text` to at most `max` characters, the last one `…` when it was cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The largest index at most `max` that is a character boundary of `text`.
pub fn floor_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The marker that stands where crucible cut `bytes` bytes of text.
pub fn cut_marker(bytes: usize) -> String {
    format!("… [crucible cut {bytes} more bytes here]")
}

/// Keeps at most `max` bytes of `text` (at a character boundary) and marks the cut.
pub fn cap(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let keep = floor_boundary(&text, max);
    let cut = text.len() - keep;
    text.truncate(keep);
    text.push_str(&cut_marker(cut));
    text
}

/// The first line with something on it, trimmed; empty if there is none.
pub fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// The current time as SurrealDB prints datetimes (RFC 3339, UTC).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_and_first_lines() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
        assert_eq!(first_line("\n  fix the tests\nthen more"), "fix the tests");
    }

    #[test]
    fn capping_keeps_whole_characters_and_says_how_much_was_cut() {
        assert_eq!(cap("short".into(), 10), "short");
        assert_eq!(
            cap("abcdef".into(), 4),
            "abcd… [crucible cut 2 more bytes here]"
        );
        // "é" is two bytes: a cut inside it keeps the character out.
        assert_eq!(cap("aé".into(), 2), "a… [crucible cut 2 more bytes here]");
        assert_eq!(floor_boundary("aé", 2), 1);
    }
}
