//! Boxes drawn over the workbench — the help (bindings in use and commands) and the session
//! list — and the context-stack pane.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::style::{dim, pane};
use super::text::{clip, width, wrap};
use crate::tui::commands::COMMANDS;
use crate::tui::keymap::{BINDINGS, KeyAction, Scope};
use crate::tui::model::Model;
use crate::tui::theme::{Role, Theme};

/// The focused session's context stack, top first: each entry's number, kind and first
/// line, checkpoints marked where they are, then what the last operation changed.
pub fn context_pane(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let view = model.focused_session().and_then(|s| model.context(&s.id));
    let Some(view) = view else {
        let body = Paragraph::new("no context read yet · /context shows it")
            .style(dim(theme))
            .block(pane(" context ", false, theme));
        frame.render_widget(body, area);
        return;
    };
    let stack = &view.stack;
    let title = format!(
        " context · {} entries · {} checkpoint(s) ",
        stack.entries().len(),
        stack.checkpoints().len()
    );
    let block = pane(title, false, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let room = usize::from(inner.width);
    let mut footer = Vec::new();
    if let Some(change) = &view.last_change {
        footer.push(Line::styled(
            clip(&format!("last: {change}"), room),
            dim(theme),
        ));
    }
    if view.fresh_start {
        footer.push(Line::styled(
            clip(
                "the next prompt opens a fresh agent session with this context",
                room,
            ),
            theme.style(Role::SessionWaiting),
        ));
    }
    let rows = usize::from(inner.height).saturating_sub(footer.len());
    let mut lines: Vec<Line> = Vec::new();
    for entry in stack.entries().iter().rev().take(rows) {
        let marks: Vec<&str> = stack
            .checkpoints()
            .iter()
            .filter(|c| c.seq == entry.seq)
            .map(|c| c.name.as_str())
            .collect();
        let mark = if marks.is_empty() {
            String::new()
        } else {
            format!(" ⚑ {}", marks.join(", "))
        };
        let first = entry.message.text().lines().next().unwrap_or("");
        let head = format!("#{} {:<11}", entry.seq, entry.message.kind());
        let rest = room.saturating_sub(width(&head) + width(&mark) + 1);
        lines.push(Line::from(vec![
            Span::styled(head, dim(theme)),
            Span::raw(" "),
            Span::styled(clip(first, rest), theme.style(Role::Text)),
            Span::styled(
                mark,
                theme
                    .style(Role::SessionWaiting)
                    .add_modifier(Modifier::BOLD),
            ),
        ]));
    }
    lines.extend(footer);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// A box in the middle of the screen for `rows` rows of content, at most `max_width` wide.
pub(super) fn centered(area: Rect, max_width: u16, rows: usize) -> Rect {
    let width = area.width.saturating_sub(4).min(max_width);
    let wanted = u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(2);
    let height = area.height.saturating_sub(2).min(wanted);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

pub fn help(
    frame: &mut Frame,
    area: Rect,
    model: &Model,
    theme: &Theme,
    scroll: u16,
    commands_first: bool,
) {
    let width = area.width.saturating_sub(4).min(90);
    let max = usize::from(width.saturating_sub(2));
    let (keys, commands) = (key_lines(model, theme, max), command_lines(theme, max));
    let lines: Vec<Line> = if commands_first {
        commands
            .into_iter()
            .chain([Line::raw("")])
            .chain(keys)
            .collect()
    } else {
        keys.into_iter().chain(commands).collect()
    };
    let rect = centered(area, width, lines.len());
    let block = pane(" help · esc closes · ↑↓ scroll ", true, theme);
    let inner = block.inner(rect);
    let top = usize::from(scroll).min(lines.len().saturating_sub(inner.height.into()));
    let shown: Vec<Line> = lines.into_iter().skip(top).collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(shown).block(block), rect);
}

/// A read-only page (`/audit`, `/rules`, `/session`, `/memory`), scrollable.
pub fn page(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme, scroll: u16) {
    let Some((name, lines)) = &model.page else {
        return;
    };
    let width = area.width.saturating_sub(4).min(110);
    let max = usize::from(width.saturating_sub(2));
    // Long lines wrap: a page (an error above all) is shown whole, scrolled if need be.
    let rows: Vec<String> = lines.iter().flat_map(|l| wrap(l, max)).collect();
    let rect = centered(area, width, rows.len());
    let title = format!(" {} · esc closes · ↑↓ scroll ", clip(name, 50));
    let block = pane(title, true, theme);
    let inner = block.inner(rect);
    let top = usize::from(scroll).min(rows.len().saturating_sub(inner.height.into()));
    let shown: Vec<Line> = rows
        .into_iter()
        .skip(top)
        .map(|l| Line::styled(l, theme.style(Role::Text)))
        .collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(shown).block(block), rect);
}

fn heading<'a>(text: &str, theme: &Theme) -> Line<'a> {
    Line::styled(
        text.to_string(),
        theme
            .style(Role::BorderFocused)
            .add_modifier(Modifier::BOLD),
    )
}

/// The bindings in use, by where they apply.
fn key_lines<'a>(model: &Model, theme: &Theme, max: usize) -> Vec<Line<'a>> {
    let heading = |text: &str| heading(text, theme);
    let key_column = 22;
    let entry = |keys: String, help: &str| {
        Line::from(vec![
            Span::styled(
                format!("  {keys:<key_column$}"),
                theme.style(Role::SessionWaiting),
            ),
            Span::styled(
                clip(help, max.saturating_sub(key_column + 2)),
                theme.style(Role::Text),
            ),
        ])
    };
    let mut lines = Vec::new();
    for (scope, title, extra) in [
        (Scope::Global, "keys", None),
        (
            Scope::Input,
            "in the input",
            Some((
                "? · //text",
                "help on an empty input · a prompt starting with /",
            )),
        ),
        (
            Scope::Inbox,
            "in the inbox pane",
            Some(("1-9", "choose option n")),
        ),
    ] {
        lines.push(heading(title));
        for binding in BINDINGS.iter().filter(|b| b.scope == scope) {
            match binding.action {
                KeyAction::Focus(1) => lines.push(entry(focus_keys(model), "focus session n")),
                KeyAction::Focus(_) => {}
                action => lines.push(entry(keys_text(model, action), binding.help)),
            }
        }
        if let Some((keys, help)) = extra {
            lines.push(entry(keys.to_string(), help));
        }
        lines.push(Line::raw(""));
    }
    lines
}

/// Every slash command with its arguments and what it does.
fn command_lines<'a>(theme: &Theme, max: usize) -> Vec<Line<'a>> {
    let mut lines = vec![heading("commands", theme)];
    for spec in COMMANDS {
        let aliases: String = spec.aliases.iter().map(|a| format!(" /{a}")).collect();
        let usage = format!("/{}{aliases} {}", spec.name, spec.args);
        lines.push(Line::styled(
            format!("  {}", clip(&usage, max.saturating_sub(2))),
            theme.style(Role::SessionWaiting),
        ));
        lines.push(Line::styled(
            format!("      {}", spec.help),
            theme.style(Role::Text),
        ));
    }
    lines
}

fn keys_text(model: &Model, action: KeyAction) -> String {
    let keys: Vec<String> = model
        .keymap
        .keys_for(action)
        .iter()
        .map(ToString::to_string)
        .collect();
    if keys.is_empty() {
        "unbound".into()
    } else {
        keys.join(", ")
    }
}

/// The keys of sessions 1 and 9 (`alt-1 … alt-9`); `/help` shows them as a range.
fn focus_keys(model: &Model) -> String {
    let first = model.keymap.hint(KeyAction::Focus(1));
    let last = model.keymap.hint(KeyAction::Focus(9));
    format!("{first} … {last}")
}
