//! The one-line status bar:
//! `▸[1] feat/auth/claude ●working  ![2] fix/flaky/codex ●waiting | 2 | /sessions`.
//! `▸` marks the focused session, `!` one that started waiting while not focused. When the
//! line is too narrow it drops state labels (those of the focused and waiting sessions
//! last; the colour still shows the state), then the names of the others, then shows a
//! window of sessions around the focused one followed by every waiting session: the
//! focused and the waiting sessions stay named however many there are.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::style::activity_role;
use super::text::{channel_icon, clip, cost_text, quiet_text};
use crate::tui::model::{Activity, Connection, Model};
use crate::tui::theme::{Role, Theme};

/// How much of each session the bar shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    Full,
    /// State labels only on the focused session and those waiting.
    Mixed,
    NoLabel,
    /// The focused session and those waiting named with their state, the others by
    /// number.
    Named,
    /// The focused session and those waiting named, the others by number.
    NamedBare,
    /// As [`Detail::NamedBare`], the names shortened.
    NamedShort,
    /// Every session by number: the last resort of a very narrow line.
    Number,
}

impl Detail {
    /// Whether the session is named, and whether its state is spelled out.
    fn shows(self, focused: bool, waiting: bool) -> (bool, bool) {
        let key = focused || waiting;
        match self {
            Detail::Full => (true, true),
            Detail::Mixed => (true, key),
            Detail::NoLabel => (true, false),
            Detail::Named => (key, key),
            Detail::NamedBare | Detail::NamedShort => (key, false),
            Detail::Number => (false, false),
        }
    }
}

/// The longest name shown in full.
const NAME_MAX: usize = 28;
/// The longest name on a crowded, narrow line.
const SHORT_NAME_MAX: usize = 8;

/// The narrowest a session shows when all are shown: ` [1]● `.
const MIN_SEGMENT: usize = 6;

/// Spans, and the index of the session they show (if any).
type Piece<'a> = (Option<usize>, Vec<Span<'a>>);

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let bar = theme.style(Role::StatusBarBg);
    let tail = tail(model, theme);
    let room = usize::from(area.width).saturating_sub(line_width(&tail));
    let mut spans: Vec<Span> = sessions(model, theme, room)
        .into_iter()
        .flat_map(|(_, spans)| spans)
        .collect();
    spans.extend(tail);
    frame.render_widget(Paragraph::new(Line::from(spans)).style(bar), area);
}

/// The index of the session drawn at `column` of a status bar `width` wide.
pub fn session_at(model: &Model, width: u16, column: u16) -> Option<usize> {
    let plain = Theme::plain();
    let room = usize::from(width).saturating_sub(line_width(&tail(model, &plain)));
    let mut start = 0;
    for (index, spans) in sessions(model, &plain, room) {
        let end = start + line_width(&spans);
        if (start..end).contains(&usize::from(column)) {
            return index;
        }
        start = end;
    }
    None
}

/// `| {unread} | /sessions`.
fn tail<'a>(model: &Model, theme: &Theme) -> Vec<Span<'a>> {
    let unread = model.inbox().unread();
    let unread_role = if unread > 0 {
        Role::InboxUnread
    } else {
        Role::InboxRead
    };
    vec![
        Span::styled(" | ", theme.style(Role::TextDim)),
        Span::styled(unread.to_string(), theme.style(unread_role)),
        Span::styled(" | ", theme.style(Role::TextDim)),
    ]
    .into_iter()
    .chain(
        spent_today(model)
            .map(|text| Span::styled(format!("{text} | "), theme.style(Role::TextDim))),
    )
    .chain([Span::styled("/sessions ", theme.style(Role::TextDim))])
    .collect()
}

/// What the sessions spent today (UTC): `today $0.42 · 12k tok`; nothing when no agent
/// told.
fn spent_today(model: &Model) -> Option<String> {
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let (tokens, cost) = spent_on(model, &today);
    let tokens = tokens.map(|t| format!("{} tok", short_count(t)));
    let cost = cost.map(|c| cost_text(c, "USD"));
    let parts: Vec<String> = cost.into_iter().chain(tokens).collect();
    (!parts.is_empty()).then(|| format!("today {}", parts.join(" · ")))
}

/// What the sessions spent on `day` (UTC, `YYYY-MM-DD`): tokens and US dollars, as far as
/// their agents told (`None`: nothing known, never zero).
fn spent_on(model: &Model, day: &str) -> (Option<u64>, Option<f64>) {
    let mut tokens = None;
    let mut cost = None;
    for on_day in model
        .sessions()
        .iter()
        .filter_map(|s| s.spent.as_ref()?.days.get(day))
    {
        if let Some(t) = on_day.tokens {
            tokens = Some(tokens.unwrap_or(0) + t);
        }
        if let Some(c) = on_day.cost {
            cost = Some(cost.unwrap_or(0.0) + c);
        }
    }
    (tokens, cost)
}

/// `950`, `12k`, `3.4M`.
fn short_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// The session segments that fit in `room` columns.
fn sessions<'a>(model: &Model, theme: &Theme, room: usize) -> Vec<Piece<'a>> {
    if model.sessions().is_empty() {
        let hint = if model.health.connection == Connection::Connecting {
            " …"
        } else {
            " no sessions — /new creates one"
        };
        let hint = clip(hint, room);
        return vec![(None, vec![Span::styled(hint, theme.style(Role::TextDim))])];
    }
    // Every session named takes at least a few columns each: a crowd goes straight to
    // the window, without laying out every session five times.
    let crowded = model.sessions().len() * MIN_SEGMENT > room;
    let details: &[Detail] = if crowded {
        &[]
    } else {
        &[
            Detail::Full,
            Detail::Mixed,
            Detail::NoLabel,
            Detail::Named,
            Detail::NamedBare,
        ]
    };
    for &detail in details {
        let pieces: Vec<Piece> = (0..model.sessions().len())
            .map(|i| (Some(i), segment(model, theme, i, detail)))
            .collect();
        if pieces.iter().map(|(_, s)| line_width(s)).sum::<usize>() <= room {
            return pieces;
        }
    }
    // Too many to show each: a window around the focused session, and after it every
    // waiting session the window leaves out, named (by number only where even that
    // does not fit).
    let mut pieces = Vec::new();
    for detail in [Detail::NamedBare, Detail::NamedShort, Detail::Number] {
        pieces = windowed(model, theme, room, detail);
        if pieces.iter().map(|(_, s)| line_width(s)).sum::<usize>() <= room {
            break;
        }
    }
    pieces
}

/// A window around the focused session, then the waiting sessions it leaves out.
fn windowed<'a>(model: &Model, theme: &Theme, room: usize, detail: Detail) -> Vec<Piece<'a>> {
    let focused = model.focused_session().map(|s| s.id.as_str());
    let reserve: usize = model
        .sessions()
        .iter()
        .enumerate()
        .filter(|(_, s)| Some(s.id.as_str()) != focused && model.activity(s) == Activity::Waiting)
        .map(|(i, _)| line_width(&segment(model, theme, i, detail)))
        .sum();
    let reserve = if reserve > 0 {
        reserve + WAITING.len()
    } else {
        0
    };
    let mut pieces = window(model, theme, room.saturating_sub(reserve), detail);
    let outside = waiting_outside(model, theme, &pieces, detail);
    if !outside.is_empty() {
        pieces.push((
            None,
            vec![Span::styled(WAITING, theme.style(Role::SessionWaiting))],
        ));
        pieces.extend(outside);
    }
    pieces
}

/// Before the waiting sessions a window leaves out.
const WAITING: &str = " waiting:";

/// Compact segments around the focused session, with `…` where some are left out.
fn window<'a>(model: &Model, theme: &Theme, room: usize, detail: Detail) -> Vec<Piece<'a>> {
    let count = model.sessions().len();
    let focused = model
        .focused_session()
        .and_then(|s| model.number_of(&s.id))
        .map_or(0, |n| n - 1);
    // Only the sessions near the focused one are laid out.
    let width_of = |i: usize| line_width(&segment(model, theme, i, detail));
    let (mut first, mut last) = (focused, focused);
    let mut used = width_of(focused) + 2;
    loop {
        let right = (last + 1 < count).then(|| width_of(last + 1));
        let grew_right = right.is_some_and(|w| used + w <= room);
        if let (true, Some(w)) = (grew_right, right) {
            last += 1;
            used += w;
        }
        let left = (first > 0).then(|| width_of(first - 1));
        let grew_left = left.is_some_and(|w| used + w <= room);
        if let (true, Some(w)) = (grew_left, left) {
            first -= 1;
            used += w;
        }
        if !grew_right && !grew_left {
            break;
        }
    }
    let dim = theme.style(Role::TextDim);
    let mut pieces = vec![(
        None,
        vec![Span::styled(if first > 0 { "…" } else { "" }, dim)],
    )];
    pieces.extend((first..=last).map(|i| (Some(i), segment(model, theme, i, detail))));
    if last + 1 < count {
        pieces.push((None, vec![Span::styled("…", dim)]));
    }
    pieces
}

/// The sessions outside the window that wait for the human, named.
fn waiting_outside<'a>(
    model: &Model,
    theme: &Theme,
    window: &[Piece<'a>],
    detail: Detail,
) -> Vec<Piece<'a>> {
    let shown: Vec<usize> = window.iter().filter_map(|(i, _)| *i).collect();
    (0..model.sessions().len())
        .filter(|i| !shown.contains(i))
        .filter(|&i| model.activity(&model.sessions()[i]) == Activity::Waiting)
        .map(|i| (Some(i), segment(model, theme, i, detail)))
        .collect()
}

fn segment<'a>(model: &Model, theme: &Theme, index: usize, detail: Detail) -> Vec<Span<'a>> {
    let session = &model.sessions()[index];
    let focused = model.focused_session().is_some_and(|f| f.id == session.id);
    let flagged = model.is_flagged(&session.id);
    let activity = model.activity(session);
    let state = theme.style(activity_role(activity));
    let marker = match (focused, flagged) {
        (true, _) => "▸",
        (false, true) => "!",
        (false, false) => " ",
    };
    let label_style = if focused {
        theme
            .style(Role::StatusBarFocused)
            .add_modifier(Modifier::BOLD)
    } else if flagged {
        state.add_modifier(Modifier::REVERSED | Modifier::BOLD)
    } else {
        theme.style(Role::Text)
    };
    let number = format!("[{}]", index + 1);
    let longest = if detail == Detail::NamedShort {
        SHORT_NAME_MAX
    } else {
        NAME_MAX
    };
    let name = clip(&session.display_name.replace(" @ ", "/"), longest);
    let mut spans = Vec::new();
    // Across kilns, each kiln's sessions follow its name.
    if model.across_kilns
        && let Some(kiln) = &session.kiln
        && (index == 0 || model.sessions()[index - 1].kiln.as_ref() != Some(kiln))
    {
        spans.push(Span::styled(
            format!(" {kiln}:"),
            theme.style(Role::TextDim).add_modifier(Modifier::BOLD),
        ));
    }
    spans.push(Span::styled(marker, label_style));
    spans.push(Span::styled(number, label_style));
    // Started from outside: ◷ by a cron job, ↯ by a webhook.
    if let Some(tag) = &session.channel {
        spans.push(Span::styled(
            channel_icon(&tag.kind),
            theme.style(Role::TextDim),
        ));
    }
    // The conflict radar: ⚠ when the branch changes the same lines as another
    // session's, ≈ when only the same files.
    let conflicts = model.conflicts_of(&session.id);
    if !conflicts.is_empty() {
        let mark = if conflicts.iter().any(|(_, same_lines)| *same_lines) {
            "⚠"
        } else {
            "≈"
        };
        spans.push(Span::styled(mark, theme.style(Role::Conflict)));
    }
    let (named, labelled) = detail.shows(focused, activity == Activity::Waiting);
    match (named, labelled) {
        (false, _) => spans.push(Span::styled("● ", state)),
        (true, true) => {
            spans.push(Span::styled(format!(" {name} "), label_style));
            spans.push(Span::styled(format!("●{} ", activity.label()), state));
            if let Some(quiet) = model.stalled_for(&session.id, std::time::Instant::now()) {
                spans.push(Span::styled(
                    format!("quiet {} ", quiet_text(quiet)),
                    theme.style(Role::SessionWaiting),
                ));
            }
        }
        (true, false) => {
            spans.push(Span::styled(format!(" {name}"), label_style));
            spans.push(Span::styled("● ", state));
        }
    }
    spans
}

fn line_width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}
