//! Plain-text output for people: aligned tables, ages, one glyph per message type; and
//! writing to stdout so that a closed pipe (`| head -1`, `| grep -q`) ends `cru` quietly.

use chrono::{DateTime, Utc};

use crate::protocol::MsgType;
use crate::tui::palette::{ColorChoice, Colours};
use crate::tui::{clip_columns as clip_cell, display_width as width};

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

/// How wide a table may be: the terminal's width when stdout is one, else `COLUMNS` when
/// it is set; a pipe without it gets whole cells (scripts read them).
fn room() -> Option<usize> {
    use std::io::IsTerminal as _;
    if std::io::stdout().is_terminal()
        && let Ok((columns, _)) = crossterm::terminal::size()
    {
        return Some(usize::from(columns));
    }
    std::env::var("COLUMNS").ok()?.trim().parse().ok()
}

/// The narrowest a column is cut to: its header, or a few characters.
const NARROWEST: usize = 6;

/// Narrows `widths` (two spaces between columns) to fit `room`: the widest column first,
/// never below its header or [`NARROWEST`]. What cannot fit so stays wider.
fn fit(widths: &mut [usize], floors: &[usize], room: usize) {
    let total =
        |widths: &[usize]| widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    while total(widths) > room {
        let Some((widest, _)) = widths
            .iter()
            .enumerate()
            .filter(|(i, w)| **w > floors[*i])
            .max_by_key(|(_, w)| **w)
        else {
            return;
        };
        widths[widest] -= 1;
    }
}

/// Prints rows under headers, columns padded to their widest cell, and on a terminal
/// narrower than that, the widest columns cut (`…`) to fit its width (never the `ID`).
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    for line in table_lines(headers, rows, room()) {
        outln!("{line}");
    }
}

/// The table's lines, fitted to `room` columns when given.
fn table_lines(headers: &[&str], rows: &[Vec<String>], room: Option<usize>) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    if let Some(room) = room {
        // An id is what a person copies to act on a row: never cut.
        let floors: Vec<usize> = headers
            .iter()
            .zip(&widths)
            .map(|(h, w)| {
                if *h == "ID" {
                    *w
                } else {
                    width(h).max(NARROWEST)
                }
            })
            .collect();
        fit(&mut widths, &floors, room);
    }
    let render = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let cell = clip_cell(cell, *w);
            line.push_str(&cell);
            if i != last {
                line.push_str(&" ".repeat(w.saturating_sub(width(&cell)) + 2));
            }
        }
        line.trim_end().to_string()
    };
    let mut lines = vec![render(headers.to_vec())];
    lines.extend(
        rows.iter()
            .map(|row| render(row.iter().map(String::as_str).collect())),
    );
    lines
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
    fn a_table_fits_the_terminal_by_display_width_and_a_pipe_gets_whole_cells() {
        let headers = ["ID", "TASK", "AGENT"];
        let rows = vec![
            vec![
                "01abcdefghijklmnop".to_string(),
                "合併分支 and a very long task indeed".to_string(),
                "codex".to_string(),
            ],
            vec!["01b".to_string(), "short".to_string(), "claude".to_string()],
        ];
        let whole = table_lines(&headers, &rows, None);
        assert!(whole[1].contains("a very long task indeed"));
        assert_eq!(width(&whole[1]), 18 + 2 + width(&rows[0][1]) + 2 + 5);
        let fitted = table_lines(&headers, &rows, Some(40));
        for line in &fitted {
            assert!(width(line) <= 40, "{line:?} is {} wide", width(line));
        }
        assert!(fitted[1].contains('…'), "{fitted:?}");
        assert!(
            fitted[1].starts_with("01abcdefghijklmnop  合併"),
            "{fitted:?}"
        );
        // The columns stay aligned: AGENT starts at the same column on every line.
        let agent_at = |line: &str, agent: &str| width(&line[..line.find(agent).unwrap()]);
        assert_eq!(agent_at(&fitted[0], "AGENT"), agent_at(&fitted[1], "codex"));
        assert_eq!(
            agent_at(&fitted[1], "codex"),
            agent_at(&fitted[2], "claude")
        );
        // Too narrow for even the headers: cut no column below them.
        let squeezed = table_lines(&headers, &rows, Some(5));
        assert_eq!(squeezed[0], "ID                  TASK    AGENT");
    }

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
