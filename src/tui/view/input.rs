//! The text input, with the flash message in its lower border, and above it the focused
//! session's open decision or approval with the keys that answer it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::{clip, dim, pane};
use crate::protocol::MsgType;
use crate::tui::keymap::KeyAction;
use crate::tui::model::{Model, Zone};
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let keys = &model.keymap;
    let target = model
        .focused_session()
        .map(|s| {
            format!(
                " prompt → [{}] {} ",
                model.number_of(&s.id).unwrap_or_default(),
                s.display_name
            )
        })
        .unwrap_or_else(|| " /new creates a session ".into());
    let hints = format!(
        " {} send · {} newline · ? help ",
        keys.hint(KeyAction::Send),
        keys.hint(KeyAction::Newline)
    );
    let mut block = pane(target, model.zone == Zone::Input, theme);
    if usize::from(area.width) > Line::from(hints.as_str()).width() + 40 {
        block = block.title(Line::styled(hints, dim(theme)).right_aligned());
    }
    if let Some(flash) = &model.flash {
        let role = if flash.is_error {
            Role::Error
        } else {
            Role::Text
        };
        let text = clip(
            &format!(" {} ", flash.text),
            usize::from(area.width).saturating_sub(2),
        );
        block = block.title_bottom(Line::styled(text, theme.style(role)));
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut textarea = model.input.area.clone();
    textarea.set_style(theme.style(Role::Text));
    textarea.set_cursor_line_style(Style::new());
    let cursor = if model.zone == Zone::Input && model.overlay.is_none() {
        Style::new().add_modifier(Modifier::REVERSED)
    } else {
        Style::new()
    };
    textarea.set_cursor_style(cursor);
    frame.render_widget(&textarea, inner);
}

/// The focused session's oldest open decision or approval.
pub fn render_inline_item(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(message) = model.inline_item() else {
        return;
    };
    let waiting = theme.style(Role::SessionWaiting);
    let kind = match message.msg_type {
        MsgType::ApprovalRequired => "approval required",
        _ => "decision needed",
    };
    let block = Block::bordered().border_style(waiting).title(Line::styled(
        format!(" {kind} "),
        waiting.add_modifier(Modifier::BOLD),
    ));
    let answer_key = model.keymap.hint(KeyAction::Answer);
    let options = message.accepted_answers().unwrap_or_default();
    let mut choices: Vec<Span> = options
        .iter()
        .enumerate()
        .map(|(i, o)| Span::styled(format!("[{}] {o}  ", i + 1), theme.style(Role::Text)))
        .collect();
    let how = if options.is_empty() {
        "· /answer <text>".to_string()
    } else if message.msg_type == MsgType::ApprovalRequired {
        format!(
            "· {answer_key} then a/d or 1-{} · /answer <n>",
            options.len()
        )
    } else {
        format!("· {answer_key} then 1-{} · /answer <n>", options.len())
    };
    choices.push(Span::styled(how, dim(theme)));
    let lines = vec![
        Line::styled(
            clip(&message.title, usize::from(area.width).saturating_sub(2)),
            theme.style(Role::Text).add_modifier(Modifier::BOLD),
        ),
        Line::from(choices),
    ];
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
