//! The inbox pane: every session's messages newest first, with a type icon, an unread
//! mark and the selection; below the list, the opened message in full.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::style::{dim, pane};
use super::text::{clip, clock, width, wrap};
use crate::protocol::{InboxMessage, MsgType};
use crate::tui::inbox::is_open;
use crate::tui::keymap::KeyAction;
use crate::tui::model::{Model, Zone};
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let inbox = model.inbox();
    let focused = model.zone == Zone::Inbox;
    let title = if focused {
        format!(" ▶ inbox · keys here · {} unread ", inbox.unread())
    } else {
        format!(" inbox · {} unread ", inbox.unread())
    };
    let mut block = pane(title, focused, theme);
    if focused {
        let keys = &model.keymap;
        let hints = if inbox.opened().is_some() {
            format!(
                " {}/{} approve/deny · 1-9 option · {} back to the input ",
                keys.hint(KeyAction::Approve),
                keys.hint(KeyAction::Deny),
                keys.hint(KeyAction::Back)
            )
        } else {
            format!(
                " {} open to answer · {} back to the input ",
                keys.hint(KeyAction::InboxOpen),
                keys.hint(KeyAction::Back)
            )
        };
        block = block.title_bottom(Line::styled(
            clip(&hints, area.width.saturating_sub(2).into()),
            dim(theme),
        ));
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let (list_area, detail_area) = match inbox.opened() {
        Some(_) if inner.height >= 10 => {
            let list_height = inner.height / 3;
            let list = Rect {
                height: list_height,
                ..inner
            };
            let detail = Rect {
                y: list.bottom(),
                height: inner.height - list_height,
                ..inner
            };
            (Some(list), Some(detail))
        }
        Some(_) => (None, Some(inner)),
        None => (Some(inner), None),
    };
    if let Some(rect) = list_area {
        list(frame, rect, model, theme);
    }
    if let (Some(rect), Some(message)) = (detail_area, inbox.opened()) {
        detail(frame, rect, model, message, theme);
    }
}

fn list(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let inbox = model.inbox();
    if inbox.messages().is_empty() {
        frame.render_widget(Paragraph::new("nothing here").style(dim(theme)), area);
        return;
    }
    let height = usize::from(area.height);
    let selected = inbox.selected_index().unwrap_or(0);
    let first = selected.saturating_sub(height.saturating_sub(1));
    let lines: Vec<Line> = inbox
        .messages()
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, m)| row(model, m, i == selected, area.width.into(), theme))
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

fn row<'a>(
    model: &Model,
    message: &InboxMessage,
    selected: bool,
    max: usize,
    theme: &Theme,
) -> Line<'a> {
    let read_role = if message.read {
        Role::InboxRead
    } else {
        Role::InboxUnread
    };
    let (icon, icon_role) = icon(message.msg_type);
    let number = model
        .number_of(&message.session_id)
        .map_or_else(|| "[-]".to_string(), |n| format!("[{n}]"));
    let state = if message.withdrawn {
        " (withdrawn)".to_string()
    } else if message.responded {
        format!(" → {}", message.response.as_deref().unwrap_or_default())
    } else {
        String::new()
    };
    let time = format!(" {}", clock(&message.timestamp));
    let marks = format!(
        "{}{}",
        if selected { "›" } else { " " },
        if message.read { " " } else { "●" }
    );
    // Across kilns, each message says which kiln asks.
    let number = match &message.kiln {
        Some(kiln) if model.across_kilns => format!(" {number} {kiln}: "),
        _ => format!(" {number} "),
    };
    let room = max.saturating_sub(width(&marks) + width(icon) + width(&number) + width(&time));
    let text = clip(&format!("{}{state}", message.title), room);
    let pad = " ".repeat(room.saturating_sub(width(&text)));
    let title_style = match (message.read, is_open(message)) {
        (false, true) => theme.style(Role::Text).add_modifier(Modifier::BOLD),
        (true, false) => dim(theme),
        _ => theme.style(Role::Text),
    };
    let mut line = Line::from(vec![
        Span::styled(marks, theme.style(read_role)),
        Span::styled(icon, theme.style(icon_role)),
        Span::styled(number, dim(theme)),
        Span::styled(format!("{text}{pad}"), title_style),
        Span::styled(time, dim(theme)),
    ]);
    if selected {
        line = line.patch_style(theme.style(Role::SelectionBg));
    }
    line
}

/// The type icon and its colour.
fn icon(msg_type: MsgType) -> (&'static str, Role) {
    match msg_type {
        MsgType::DecisionNeeded => ("?", Role::SessionWaiting),
        MsgType::ApprovalRequired => ("!", Role::SessionWaiting),
        MsgType::TaskComplete => ("✓", Role::SessionDone),
        MsgType::Error => ("✗", Role::SessionError),
        MsgType::Info => ("i", Role::TextDim),
    }
}

fn detail(frame: &mut Frame, area: Rect, model: &Model, message: &InboxMessage, theme: &Theme) {
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.style(Role::Border));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let max = usize::from(inner.width);
    let number = model.number_of(&message.session_id).unwrap_or_default();
    // What is asked, who asks and every option come first, so that a long body can
    // never push an option off the pane.
    let strong = theme.style(Role::Text).add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = wrap(&message.title, max)
        .into_iter()
        .map(|l| Line::styled(l, strong))
        .collect();
    lines.push(Line::styled(
        clip(
            &format!(
                "[{number}] {} · {} · {}",
                message.session_name,
                clock(&message.timestamp),
                message.msg_type
            ),
            max,
        ),
        dim(theme),
    ));
    let text = |l: String| Line::styled(l, theme.style(Role::Text));
    if let Some(operation) = &message.operation {
        lines.extend(
            wrap(&format!("operation: {operation}"), max)
                .into_iter()
                .map(text),
        );
    }
    if let Some(rule) = &message.rule {
        lines.extend(wrap(&format!("rule: {rule}"), max).into_iter().map(text));
    }
    let options = message.accepted_answers().unwrap_or_default();
    let number_style = theme
        .style(Role::SessionWaiting)
        .add_modifier(Modifier::BOLD);
    for (i, option) in options.iter().enumerate() {
        let mark = format!(" {} ", i + 1);
        let rows = wrap(option, max.saturating_sub(width(&mark)).max(1));
        for (k, row) in rows.into_iter().enumerate() {
            let lead = if k == 0 {
                mark.clone()
            } else {
                " ".repeat(width(&mark))
            };
            lines.push(Line::from(vec![
                Span::styled(lead, number_style),
                Span::styled(row, theme.style(Role::Text)),
            ]));
        }
    }
    let outcome = if message.withdrawn {
        Some(format!(
            "withdrawn: {}",
            message.response.as_deref().unwrap_or("closed")
        ))
    } else if message.responded {
        let by = message
            .answered_by
            .as_deref()
            .map(|by| format!(" (by {by})"))
            .unwrap_or_default();
        Some(format!(
            "answered: {}{by}",
            message.response.as_deref().unwrap_or_default()
        ))
    } else if is_open(message) && options.is_empty() {
        Some("answer with /answer <text>".into())
    } else {
        None
    };
    if let Some(outcome) = outcome {
        lines.extend(
            wrap(&outcome, max)
                .into_iter()
                .map(|l| Line::styled(l, dim(theme))),
        );
    }
    if let Some(body) = &message.body {
        lines.push(Line::default());
        lines.extend(wrap(body, max).into_iter().map(text));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
