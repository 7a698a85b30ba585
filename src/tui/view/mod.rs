//! Drawing: [`render`] paints the whole workbench from a [`Model`] and a [`Theme`]. Each
//! component is a function of the model in its own file; colours come from theme roles.

mod diff;
mod inbox;
mod input;
mod overlay;
pub(super) mod pages;
mod status_bar;

pub(super) use status_bar::session_at;
#[cfg(test)]
mod tests;
mod transcript;
pub(super) use transcript::WrapCache;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::model::{Activity, Connection, Model, Overlay, Zone};
use super::theme::{Role, Theme};

/// The smallest terminal the workbench draws in; below it, a "too small" notice.
pub const MIN_WIDTH: u16 = 40;
pub const MIN_HEIGHT: u16 = 8;

/// Where each component goes on the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub banner: Option<Rect>,
    pub transcript: Option<Rect>,
    pub inbox: Option<Rect>,
    pub context: Option<Rect>,
    pub inline_item: Option<Rect>,
    pub input: Rect,
    pub status_bar: Rect,
}

/// Draws the workbench.
pub fn render(frame: &mut Frame, model: &Model, theme: &Theme) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area, theme);
        return;
    }
    let areas = layout(model, area);
    if let Some(rect) = areas.banner {
        banner(frame, rect, model, theme);
    }
    if let Some(rect) = areas.transcript {
        transcript::render(frame, rect, model, theme);
    }
    if let Some(rect) = areas.inbox {
        inbox::render(frame, rect, model, theme);
    }
    if let Some(rect) = areas.context {
        overlay::context_pane(frame, rect, model, theme);
    }
    if let Some(rect) = areas.inline_item {
        input::render_inline_item(frame, rect, model, theme);
    }
    input::render(frame, areas.input, model, theme);
    status_bar::render(frame, areas.status_bar, model, theme);
    match model.overlay {
        Some(Overlay::Help {
            scroll,
            commands_first,
        }) => overlay::help(frame, area, model, theme, scroll, commands_first),
        Some(Overlay::Sessions) => overlay::sessions(frame, area, model, theme),
        Some(Overlay::Page { scroll }) => overlay::page(frame, area, model, theme, scroll),
        Some(Overlay::Diff) => diff::render(frame, area, model, theme),
        None => {}
    }
}

/// Splits the screen: banner, body (transcript and side panes), inline item, input, status.
pub fn layout(model: &Model, area: Rect) -> Areas {
    let mut rest = area;
    let mut take_top = |height: u16| {
        let top = Rect { height, ..rest };
        rest.y += height;
        rest.height -= height;
        top
    };
    let banner = (model.connection != Connection::Connected
        || model.store_down.is_some()
        || model.store_damaged.is_some())
    .then(|| take_top(1));
    let status_bar = Rect {
        y: rest.bottom() - 1,
        height: 1,
        ..rest
    };
    rest.height -= 1;
    let input_height = u16::try_from(model.input.line_count().min(5)).unwrap_or(5) + 2;
    let input = Rect {
        y: rest.bottom() - input_height,
        height: input_height,
        ..rest
    };
    rest.height -= input_height;
    // The panel above the input gets every row it needs, leaving the body at least one.
    let panel_rows = input::panel(model, usize::from(rest.width.saturating_sub(2))).map(|p| {
        u16::try_from(p.rows.len())
            .unwrap_or(u16::MAX)
            .saturating_add(2)
    });
    let inline_item = panel_rows
        .map(|rows| rows.min(rest.height.saturating_sub(1)))
        .filter(|rows| *rows >= 3)
        .map(|rows| {
            rest.height -= rows;
            Rect {
                y: rest.bottom(),
                height: rows,
                ..rest
            }
        });
    let (transcript, inbox, context) = body(model, rest);
    Areas {
        banner,
        transcript,
        inbox,
        context,
        inline_item,
        input,
        status_bar,
    }
}

/// The transcript beside a column of side panes, or one of them alone when narrow.
fn body(model: &Model, area: Rect) -> (Option<Rect>, Option<Rect>, Option<Rect>) {
    let panes = model.panes;
    if !panes.inbox && !panes.context {
        return (Some(area), None, None);
    }
    let side_width = (area.width * 2 / 5).clamp(30, 60);
    let (main, side) = if area.width.saturating_sub(side_width) < MIN_WIDTH {
        // Too narrow for both: the pane with the keyboard wins.
        if model.zone == Zone::Inbox {
            (None, area)
        } else {
            return (Some(area), None, None);
        }
    } else {
        let main = Rect {
            width: area.width - side_width,
            ..area
        };
        let side = Rect {
            x: main.right(),
            width: side_width,
            ..area
        };
        (Some(main), side)
    };
    match (panes.inbox, panes.context) {
        (true, true) => {
            let context_height = (side.height / 3).max(3).min(side.height);
            let inbox = Rect {
                height: side.height - context_height,
                ..side
            };
            let context = Rect {
                y: inbox.bottom(),
                height: context_height,
                ..side
            };
            (main, Some(inbox), Some(context))
        }
        (true, false) => (main, Some(side), None),
        _ => (main, None, Some(side)),
    }
}

fn too_small(frame: &mut Frame, area: Rect, theme: &Theme) {
    let text = vec![
        Line::from("terminal too small"),
        Line::from(format!(
            "need at least {MIN_WIDTH}×{MIN_HEIGHT}, have {}×{}",
            area.width, area.height
        )),
    ];
    let y = area.height.saturating_sub(2) / 2;
    let rect = Rect {
        y: area.y + y,
        height: area.height.min(2),
        ..area
    };
    frame.render_widget(
        Paragraph::new(text)
            .centered()
            .style(theme.style(Role::Error)),
        rect,
    );
}

fn banner(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let (text, style) = match &model.connection {
        Connection::Connected => match &model.store_down {
            None => match &model.store_damaged {
                None => return,
                Some(what) => (
                    format!(
                        " database damaged: {what} — `cru daemon check` names it; stop the daemon and `cru daemon repair`"
                    ),
                    theme
                        .style(Role::Error)
                        .add_modifier(Modifier::REVERSED | Modifier::BOLD),
                ),
            },
            Some(why) => (
                format!(
                    " database server unreachable ({why}) — writes are refused until it is back; reconnecting…"
                ),
                theme
                    .style(Role::Error)
                    .add_modifier(Modifier::REVERSED | Modifier::BOLD),
            ),
        },
        Connection::Connecting => (
            format!(" connecting…{}", held(model)),
            theme.style(Role::TextDim).add_modifier(Modifier::REVERSED),
        ),
        Connection::Lost { reason } => (
            format!(" daemon gone ({reason}) — reconnecting…{}", held(model)),
            theme
                .style(Role::Error)
                .add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ),
    };
    frame.render_widget(
        Paragraph::new(clip(&text, area.width.into())).style(style),
        area,
    );
}

/// ` · 2 lines held until connected`, or nothing.
fn held(model: &Model) -> String {
    match model.held.len() {
        0 => String::new(),
        1 => " · 1 line held until connected".into(),
        n => format!(" · {n} lines held until connected"),
    }
}

/// A bordered block, highlighted when it has the keyboard.
fn pane<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    let border = if focused {
        Role::BorderFocused
    } else {
        Role::Border
    };
    Block::bordered()
        .border_style(theme.style(border))
        .title(title)
        .title_style(theme.style(Role::Text).add_modifier(Modifier::BOLD))
}

/// The colour role of a session's activity.
fn activity_role(activity: Activity) -> Role {
    match activity {
        Activity::Starting | Activity::Working | Activity::Active => Role::SessionWorking,
        Activity::Waiting => Role::SessionWaiting,
        Activity::Done => Role::SessionDone,
        Activity::Cancelled | Activity::Stopped | Activity::Parked | Activity::Idle => {
            Role::SessionIdle
        }
        Activity::Error => Role::SessionError,
    }
}

/// How long a session has been quiet: `2m`, `1h05m`.
fn quiet_text(quiet: std::time::Duration) -> String {
    let minutes = quiet.as_secs() / 60;
    if minutes >= 60 {
        format!("{}h{:02}m", minutes / 60, minutes % 60)
    } else {
        format!("{minutes}m")
    }
}

/// Display width of a string.
fn width(text: &str) -> usize {
    Span::raw(text).width()
}

/// Cuts a string to `max` columns, ending in `…` when cut.
fn clip(text: &str, max: usize) -> String {
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
fn wrap(text: &str, max: usize) -> Vec<String> {
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
fn clock(timestamp: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(timestamp)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_default()
}

/// Style of text that is secondary.
fn dim(theme: &Theme) -> Style {
    theme.style(Role::TextDim)
}

/// The mark of a session a channel started: ◷ a cron job, ↯ a webhook (or another).
fn channel_icon(kind: &str) -> &'static str {
    match kind {
        "cron" => "◷",
        _ => "↯",
    }
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
