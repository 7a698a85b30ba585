//! Drawing: [`render`] paints the whole workbench from a [`Model`] and a [`Theme`]. Each
//! component is a function of the model in its own file; colours come from theme roles.
//! What drawing remembers between frames is a [`ViewState`] the runtime owns and passes
//! in, so the model stays plain data.

mod diff;
#[cfg(test)]
mod fleet_tests;
mod inbox;
mod input;
mod markdown;
mod overlay;
pub(super) mod pages;
mod permission;
mod search;
mod sessions;
mod status_bar;
mod style;
#[cfg(test)]
mod tests;
pub(super) mod text;
mod transcript;

pub(super) use status_bar::session_at;
use transcript::WrapCache;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::model::{Connection, Model, Overlay, ScrollExtent, Zone};
use super::theme::{Role, Theme};
use text::clip;

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

/// What drawing remembers between frames: the focused transcript's wrapped lines, and how
/// far that transcript could scroll in the last frame. The runtime owns it beside the
/// [`Model`] and hands it to every [`render`].
#[derive(Debug, Default)]
pub struct ViewState {
    wrapped: WrapCache,
    scroll_extent: ScrollExtent,
}

impl ViewState {
    /// How far the focused transcript could scroll as last drawn; the runtime gives it to
    /// [`Model::set_scroll_extent`] after each frame, so that scrolling stops at the top.
    pub fn scroll_extent(&self) -> ScrollExtent {
        self.scroll_extent
    }
}

/// Draws the workbench; `state` carries what the last frame left for this one.
pub fn render(frame: &mut Frame, model: &Model, state: &mut ViewState, theme: &Theme) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area, theme);
        return;
    }
    let areas = layout(model, area);
    if let Some(rect) = areas.banner {
        banner(frame, rect, model, theme);
    }
    if let Some(rect) = areas.transcript
        && let Some(extent) = transcript::render(frame, rect, model, &mut state.wrapped, theme)
    {
        state.scroll_extent = extent;
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
        Some(Overlay::Sessions { selected }) => {
            sessions::render(frame, area, model, theme, selected)
        }
        Some(Overlay::Page { scroll }) => overlay::page(frame, area, model, theme, scroll),
        Some(Overlay::Diff) => diff::render(frame, area, model, theme),
        Some(Overlay::Search { selected }) => search::render(frame, area, model, theme, selected),
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
    let banner = model.health.is_troubled().then(|| take_top(1));
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

/// What the banner says while the daemon answers: its database, its settings, the
/// Matrix bot's verification, the first that has something to say.
fn connected_banner(model: &Model, theme: &Theme) -> Option<(String, ratatui::style::Style)> {
    let error = theme
        .style(Role::Error)
        .add_modifier(Modifier::REVERSED | Modifier::BOLD);
    let health = &model.health;
    if let Some(why) = &health.store_down {
        return Some((
            format!(
                " database server unreachable ({why}) — writes are refused until it is back; reconnecting…"
            ),
            error,
        ));
    }
    if let Some(what) = &health.store_damaged {
        return Some((
            format!(
                " database damaged: {what} — `cru daemon check` names it; stop the daemon and `cru daemon repair`"
            ),
            error,
        ));
    }
    if let Some(what) = &health.store_rebuilt {
        return Some((
            format!(
                " database rebuilt as the daemon started: {what} — `cru daemon status` says what was lost"
            ),
            error,
        ));
    }
    if let Some(why) = &health.settings_error {
        return Some((
            format!(" settings: {why} — the last good ones stay in use"),
            error,
        ));
    }
    health.verification.as_ref().map(|v| {
        (
            format!(
                " Matrix: {} verifies the bot: {} — if your client shows the same, `cru daemon verify --confirm`; else `--cancel`",
                v.user_id,
                v.emoji_line()
            ),
            theme
                .style(Role::SessionWaiting)
                .add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    })
}

fn banner(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let (text, style) = match &model.health.connection {
        Connection::Connected if model.health.daemon_silence.is_some() => (
            format!(
                " {}",
                model.health.daemon_silence.as_deref().unwrap_or_default()
            ),
            theme
                .style(Role::Error)
                .add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ),
        Connection::Connected => match connected_banner(model, theme) {
            Some(banner) => banner,
            None => return,
        },
        Connection::Connecting => (
            format!(" connecting…{}", held(model)),
            theme.style(Role::TextDim).add_modifier(Modifier::REVERSED),
        ),
        // Stopped by a signal: not gone, and not to be restarted.
        Connection::Lost { .. } if model.health.daemon_silence.is_some() => (
            format!(
                " {} — waiting for it…",
                model.health.daemon_silence.as_deref().unwrap_or_default()
            ),
            theme
                .style(Role::Error)
                .add_modifier(Modifier::REVERSED | Modifier::BOLD),
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
