//! The text input, with the flash message in its lower border, and above it the focused
//! session's open decision or approval with the keys that answer it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph};

use super::style::{dim, pane};
use super::text::{self, clip, wrap};
use crate::protocol::{MsgType, Purpose};
use crate::tui::keymap::KeyAction;
use crate::tui::model::{Model, Zone};
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let keys = &model.keymap;
    let target = model
        .focused_session()
        .map(|s| {
            let kiln = s
                .kiln
                .as_deref()
                .map(|k| format!("{k} · "))
                .unwrap_or_default();
            format!(
                " prompt → [{}] {kiln}{} ",
                model.number_of(&s.id).unwrap_or_default(),
                s.display_name
            )
        })
        .unwrap_or_else(|| " /new creates a session ".into());
    // The border names the kiln the workbench shows (or that it shows every kiln).
    let target = match &model.place {
        Some(place) => format!(" {place} ·{target}"),
        None => target,
    };
    let hints = format!(
        " {} send · {} newline · ? help ",
        keys.hint(KeyAction::Send),
        keys.hint(KeyAction::Newline)
    );
    let mut block = pane(target, model.zone == Zone::Input, theme);
    if usize::from(area.width) > Line::from(hints.as_str()).width() + 40 {
        block = block.title(Line::styled(hints, dim(theme)).right_aligned());
    }
    if model.zone != Zone::Input && model.flash.is_none() {
        block = block.title_bottom(Line::styled(
            clip(
                " the inbox has the keys · Esc or typing comes back here ",
                usize::from(area.width).saturating_sub(2),
            ),
            dim(theme),
        ));
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

/// What the panel above the input shows: a confirmation waiting for `y`, else the
/// focused session's oldest open decision or approval. Every row is wrapped to `width`
/// (the panel's inside), so the operation, the rule and every option are on screen.
pub struct Panel {
    pub title: String,
    pub confirm: bool,
    pub rows: Vec<(String, Kind)>,
}

/// How a panel row is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Strong,
    Text,
    Options,
    Hint,
}

pub fn panel(model: &Model, width: usize) -> Option<Panel> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut push = |text: &str, kind: Kind| {
        rows.extend(wrap(text, width).into_iter().map(|row| (row, kind)));
    };
    if let Some(confirm) = &model.confirm {
        push(&format!("Approve: {}", confirm.operation), Kind::Strong);
        push(&format!("asked by rule {}", confirm.rule), Kind::Text);
        push(
            "y approves this operation · Esc or any other key leaves it waiting",
            Kind::Hint,
        );
        return Some(Panel {
            title: " confirm the approval ".into(),
            confirm: true,
            rows,
        });
    }
    let message = model.inline_item()?;
    let kind = match message.msg_type {
        MsgType::ApprovalRequired => "approval required",
        _ => "decision needed",
    };
    push(&message.title, Kind::Strong);
    let plan = matches!(message.purpose, Some(Purpose::PlanReview { .. }));
    if plan {
        // The steps under review, as the agent wrote them.
        let body = message.body.as_deref().unwrap_or_default();
        for step in body.lines().take_while(|l| !l.trim().is_empty()) {
            push(step, Kind::Text);
        }
    }
    if let Some(operation) = &message.operation {
        push(&format!("operation: {operation}"), Kind::Text);
    }
    if let Some(rule) = &message.rule {
        push(&format!("rule: {rule}"), Kind::Text);
    }
    let options = message.accepted_answers().unwrap_or_default();
    let chunks: Vec<String> = options
        .iter()
        .enumerate()
        .map(|(i, o)| format!("[{}] {o}", i + 1))
        .collect();
    rows.extend(pack(&chunks, width).into_iter().map(|r| (r, Kind::Options)));
    let answer_key = model.keymap.hint(KeyAction::Answer);
    let how = if options.is_empty() {
        "/answer <text>".to_string()
    } else if plan {
        format!("{answer_key} opens it, then a/d · /answer 2: <comment on step 2>")
    } else if message.msg_type == MsgType::ApprovalRequired {
        format!(
            "{answer_key} opens it, then a/d or 1-{} · /approve · /deny",
            options.len()
        )
    } else {
        format!(
            "{answer_key} opens it, then 1-{} · /answer <n>",
            options.len()
        )
    };
    rows.extend(wrap(&how, width).into_iter().map(|r| (r, Kind::Hint)));
    Some(Panel {
        title: format!(" {kind} "),
        confirm: false,
        rows,
    })
}

/// Chunks side by side, two spaces apart, as many to a row as fit; a chunk wider than a
/// row is wrapped on its own.
fn pack(chunks: &[String], width: usize) -> Vec<String> {
    let mut rows: Vec<String> = Vec::new();
    let mut row = String::new();
    for chunk in chunks {
        let gap = if row.is_empty() { 0 } else { 2 };
        if text::width(&row) + gap + text::width(chunk) <= width {
            if gap > 0 {
                row.push_str("  ");
            }
            row.push_str(chunk);
            continue;
        }
        if !row.is_empty() {
            rows.push(std::mem::take(&mut row));
        }
        let mut pieces = wrap(chunk, width);
        let last = pieces.pop().unwrap_or_default();
        rows.extend(pieces);
        row = last;
    }
    if !row.is_empty() {
        rows.push(row);
    }
    rows
}

/// The panel above the input (see [`panel`]).
pub fn render_inline_item(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(panel) = panel(model, usize::from(area.width.saturating_sub(2))) else {
        return;
    };
    let border = if panel.confirm {
        theme.style(Role::Error)
    } else {
        theme.style(Role::SessionWaiting)
    };
    let block = Block::bordered().border_style(border).title(Line::styled(
        panel.title,
        border.add_modifier(Modifier::BOLD),
    ));
    let lines: Vec<Line> = panel
        .rows
        .into_iter()
        .map(|(text, kind)| match kind {
            Kind::Strong => {
                Line::styled(text, theme.style(Role::Text).add_modifier(Modifier::BOLD))
            }
            Kind::Text | Kind::Options => Line::styled(text, theme.style(Role::Text)),
            Kind::Hint => Line::styled(text, dim(theme)),
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
