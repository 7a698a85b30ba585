//! Plain-text output for people: aligned tables, ages, one glyph per message type; and
//! writing to stdout so that a closed pipe (`| head -1`, `| grep -q`) ends `cru` quietly.

use chrono::{DateTime, Utc};

use crate::protocol::MsgType;
use crate::tui::palette::{ColorChoice, Colours};

/// `println!` for `cru`'s commands: a reader that went away (a closed pipe) ends the
/// command quietly with status 0 instead of a panic; any other write error is reported.
macro_rules! outln {
    () => {
        $crate::cli::output::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` likewise.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_out(format_args!($($arg)*))
    };
}

pub(crate) use {out, outln};

/// `--color` as the command line gave it.
static COLOR: std::sync::OnceLock<ColorChoice> = std::sync::OnceLock::new();

/// Keeps `--color` for [`styled`].
pub(crate) fn set_color(choice: ColorChoice) {
    let _ = COLOR.set(choice);
}

/// `--color` as given (auto when not).
pub(crate) fn color() -> ColorChoice {
    COLOR.get().copied().unwrap_or_default()
}

/// `--color` read from the raw arguments, before clap parses them (so that clap's own
/// help and errors obey it): the last one before a `--`; auto when none or not valid.
pub(crate) fn color_asked(args: impl IntoIterator<Item = std::ffi::OsString>) -> ColorChoice {
    use clap::ValueEnum as _;
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    let mut asked = ColorChoice::Auto;
    for (i, arg) in args.iter().enumerate() {
        let value = match arg.strip_prefix("--color") {
            Some("") => args.get(i + 1).map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        if let Some(choice) = value.and_then(|v| ColorChoice::from_str(v, true).ok()) {
            asked = choice;
        }
    }
    asked
}

/// Whether standard output may carry colour and bold: `--color`, else a terminal with
/// no `NO_COLOR`.
pub(crate) fn styled() -> bool {
    use std::io::IsTerminal;
    Colours::resolve(color(), std::io::stdout().is_terminal()) != Colours::None
}

/// Writes to stdout and flushes; see [`outln`].
pub fn write_out(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("cru: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Prints rows under headers, columns padded to their widest cell.
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        outln!("{}", line.trim_end());
    };
    render(headers.to_vec());
    for row in rows {
        render(row.iter().map(String::as_str).collect());
    }
}

/// `key: value` lines, keys aligned; a value's further lines are indented under it.
pub fn print_pairs(pairs: &[(&str, String)]) {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in pairs {
        let mut lines = value.lines();
        outln!("  {key:<width$}  {}", lines.next().unwrap_or(""));
        for line in lines {
            outln!("  {:<width$}  {line}", "");
        }
    }
}

/// How long ago an RFC 3339 time was, shortly: `42s`, `5m`, `3h`, `2d`.
pub fn age(rfc3339: &str) -> String {
    match DateTime::parse_from_rfc3339(rfc3339) {
        Ok(t) => duration((Utc::now() - t.with_timezone(&Utc)).num_seconds().max(0) as u64),
        Err(_) => "?".into(),
    }
}

pub fn duration(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

pub fn glyph(t: MsgType) -> &'static str {
    match t {
        MsgType::DecisionNeeded => "?",
        MsgType::ApprovalRequired => "!",
        MsgType::TaskComplete => "✓",
        MsgType::Error => "✗",
        MsgType::Info => "i",
    }
}

/// Cuts a string to `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    let first_line = text.lines().next().unwrap_or("");
    if first_line.chars().count() <= max && first_line.len() == text.len() {
        return text.to_string();
    }
    let mut out: String = first_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m");
        assert_eq!(duration(7200), "2h");
        assert_eq!(duration(3 * 86_400), "3d");
    }

    #[test]
    fn clip_marks_cuts_and_extra_lines() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("a long title here", 6), "a lon…");
        assert_eq!(clip("two\nlines", 10), "two…");
    }

    #[test]
    fn the_color_flag_is_read_before_clap_parses() {
        let asked = |args: &[&str]| color_asked(args.iter().map(std::ffi::OsString::from));
        assert_eq!(asked(&["cru", "session", "list"]), ColorChoice::Auto);
        assert_eq!(asked(&["cru", "--color", "never", "x"]), ColorChoice::Never);
        assert_eq!(
            asked(&["cru", "inbox", "--color=always"]),
            ColorChoice::Always
        );
        // The last one counts; after `--` it is an agent's argument, not ours.
        assert_eq!(
            asked(&["cru", "--color=never", "--color", "always"]),
            ColorChoice::Always
        );
        assert_eq!(
            asked(&["cru", "session", "exec", "1", "--", "ls", "--color=never"]),
            ColorChoice::Auto
        );
        // Not a colour flag, or not a valid value: auto (clap reports the bad value).
        assert_eq!(asked(&["cru", "--colorful"]), ColorChoice::Auto);
        assert_eq!(asked(&["cru", "--color", "sometimes"]), ColorChoice::Auto);
    }
}
