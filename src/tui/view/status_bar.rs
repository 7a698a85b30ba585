//! The one-line status bar of seed 003:
//! `▸[1] feat/auth/claude ●working  ![2] fix/flaky/codex ●waiting | 2 | /sessions`.
//! `▸` marks the focused session, `!` one that started waiting while not focused. When the
//! line is too narrow it drops state labels (those of the focused and waiting sessions
//! last; the colour still shows the state), then names, then shows a window of sessions
//! around the focused one.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{activity_role, clip};
use crate::tui::model::{Activity, Connection, Model};
use crate::tui::theme::{Role, Theme};

/// How much of each session the bar shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    Full,
    /// State labels only on the focused session and those waiting.
    Mixed,
    NoLabel,
    /// The focused session in full, the others by number.
    Focus,
    Number,
}

/// The longest name shown in full.
const NAME_MAX: usize = 28;

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
    .chain(model.total_cost().into_iter().map(|(unit, amount)| {
        Span::styled(
            format!("{} | ", crate::tui::model::cost_text(amount, &unit)),
            theme.style(Role::TextDim),
        )
    }))
    .chain([Span::styled("/sessions ", theme.style(Role::TextDim))])
    .collect()
}

/// The session segments that fit in `room` columns.
fn sessions<'a>(model: &Model, theme: &Theme, room: usize) -> Vec<Piece<'a>> {
    if model.sessions().is_empty() {
        let hint = if model.connection == Connection::Connecting {
            " …"
        } else {
            " no sessions — /new creates one"
        };
        let hint = clip(hint, room);
        return vec![(None, vec![Span::styled(hint, theme.style(Role::TextDim))])];
    }
    for detail in [
        Detail::Full,
        Detail::Mixed,
        Detail::NoLabel,
        Detail::Focus,
        Detail::Number,
    ] {
        let pieces: Vec<Piece> = (0..model.sessions().len())
            .map(|i| (Some(i), segment(model, theme, i, detail)))
            .collect();
        if pieces.iter().map(|(_, s)| line_width(s)).sum::<usize>() <= room {
            return pieces;
        }
    }
    window(model, theme, room)
}

/// Compact segments around the focused session, with `…` where some are left out.
fn window<'a>(model: &Model, theme: &Theme, room: usize) -> Vec<Piece<'a>> {
    let count = model.sessions().len();
    let focused = model
        .focused_session()
        .and_then(|s| model.number_of(&s.id))
        .map_or(0, |n| n - 1);
    let widths: Vec<usize> = (0..count)
        .map(|i| line_width(&segment(model, theme, i, Detail::Number)))
        .collect();
    let (mut first, mut last) = (focused, focused);
    let mut used = widths[focused] + 2;
    loop {
        let grew_right = last + 1 < count && used + widths[last + 1] <= room;
        if grew_right {
            last += 1;
            used += widths[last];
        }
        let grew_left = first > 0 && used + widths[first - 1] <= room;
        if grew_left {
            first -= 1;
            used += widths[first];
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
    pieces.extend((first..=last).map(|i| (Some(i), segment(model, theme, i, Detail::Number))));
    if last + 1 < count {
        pieces.push((None, vec![Span::styled("…", dim)]));
    }
    pieces
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
    let name = clip(&session.display_name.replace(" @ ", "/"), NAME_MAX);
    let mut spans = vec![
        Span::styled(marker, label_style),
        Span::styled(number, label_style),
    ];
    // Started from outside: ◷ by a cron job, ↯ by a webhook.
    if let Some(tag) = &session.channel {
        spans.push(Span::styled(
            super::channel_icon(&tag.kind),
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
    let labelled = match detail {
        Detail::Full => true,
        Detail::Mixed => focused || activity == Activity::Waiting,
        Detail::Focus => focused,
        Detail::NoLabel | Detail::Number => false,
    };
    match (detail, labelled) {
        (Detail::Number | Detail::Focus, false) => spans.push(Span::styled("● ", state)),
        (_, true) => {
            spans.push(Span::styled(format!(" {name} "), label_style));
            spans.push(Span::styled(format!("●{} ", activity.label()), state));
            if let Some(quiet) = model.stalled_for(&session.id, std::time::Instant::now()) {
                spans.push(Span::styled(
                    format!("quiet {} ", super::quiet_text(quiet)),
                    theme.style(Role::SessionWaiting),
                ));
            }
        }
        (_, false) => {
            spans.push(Span::styled(format!(" {name}"), label_style));
            spans.push(Span::styled("● ", state));
        }
    }
    spans
}

fn line_width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}
