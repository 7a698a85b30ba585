//! Boxes drawn over the workbench — the help (bindings in use and commands) and the session
//! list — and the context-stack pane.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::style::{activity_role, dim, pane};
use super::text::{channel_icon, clip, width, wrap};
use crate::tui::commands::COMMANDS;
use crate::tui::inbox::is_open;
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

pub fn sessions(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let summaries = model
        .sessions()
        .iter()
        .map(|s| {
            usize::from(s.context_summary.is_some())
                + usize::from(contained(s).is_some())
                + usize::from(!model.conflicts_of(&s.id).is_empty())
                + usize::from(s.channel.is_some())
                + usize::from(lineage(model, s).is_some())
                + usize::from(model.resources_of(&s.id).is_some())
        })
        .sum::<usize>();
    let rect = centered(area, 110, model.sessions().len().max(1) + 1 + summaries);
    let block = pane(" sessions · 1-9 focus · esc closes ", true, theme);
    let inner = block.inner(rect);
    let max = usize::from(inner.width);
    let mut lines = vec![Line::styled(
        clip(
            &format!(
                "   #  {:<26} {:<9} {:<9} {:<9} task",
                "session", "state", "agent", "inbox"
            ),
            max,
        ),
        dim(theme),
    )];
    if model.sessions().is_empty() {
        lines.push(Line::styled("   none yet — /new creates one", dim(theme)));
    }
    for (i, session) in model.sessions().iter().enumerate() {
        let focused = model.focused_session().is_some_and(|f| f.id == session.id);
        let activity = model.activity(session);
        let messages = model
            .inbox()
            .messages()
            .iter()
            .filter(|m| m.session_id == session.id);
        let (unread, open) = messages.fold((0, 0), |(u, o), m| {
            (u + usize::from(!m.read), o + usize::from(is_open(m)))
        });
        let inbox = match (unread, open) {
            (0, 0) => "—".to_string(),
            (u, 0) => format!("{u} new"),
            (_, o) => format!("{o} open"),
        };
        let head = format!(
            "{}{:>3}  {:<26} ",
            if focused { "▸" } else { " " },
            format!("[{}]", i + 1),
            clip(&session.display_name, 26)
        );
        let rest = format!(" {:<9} {:<9} ", clip(&session.agent_name, 9), inbox);
        let room = max.saturating_sub(width(&head) + 9 + width(&rest));
        let task = clip(session.task.as_deref().unwrap_or(""), room);
        lines.push(Line::from(vec![
            Span::styled(head, theme.style(Role::Text)),
            Span::styled(
                format!("{:<9}", activity.label()),
                theme.style(activity_role(activity)),
            ),
            Span::styled(rest, dim(theme)),
            Span::styled(task, theme.style(Role::Text)),
        ]));
        // Started from outside: the channel, the conversation and how the last
        // message found it.
        if let Some(tag) = &session.channel {
            let closed = if tag.closed { ", closed" } else { "" };
            lines.push(Line::styled(
                clip(
                    &format!(
                        "        {} {} ({}{closed})",
                        channel_icon(&tag.kind),
                        tag.label(),
                        tag.reason.as_str()
                    ),
                    max,
                ),
                dim(theme),
            ));
        }
        // The conflict radar: the sessions it changes the same files (or lines) as.
        let conflicts = model.conflicts_of(&session.id);
        if !conflicts.is_empty() {
            let with: Vec<String> = conflicts
                .iter()
                .map(|(n, same_lines)| {
                    format!("[{n}]{}", if *same_lines { " (same lines)" } else { "" })
                })
                .collect();
            lines.push(Line::styled(
                clip(
                    &format!("        ⚠ changes the same files as {}", with.join(", ")),
                    max,
                ),
                theme.style(Role::Conflict),
            ));
        }
        if let Some(text) = lineage(model, session) {
            lines.push(Line::styled(clip(&text, max), dim(theme)));
        }
        if let Some(text) = machine(model, session) {
            lines.push(Line::styled(clip(&text, max), dim(theme)));
        }
        // Where a contained session runs, and the limits on it.
        if let Some(driver) = contained(session) {
            lines.push(Line::styled(
                clip(&format!("        {driver}"), max),
                dim(theme),
            ));
        }
        // The context summary the session keeps of its turns, on one line under its session.
        if let Some(summary) = &session.context_summary {
            let text = format!(
                "        {} turn(s) · {}",
                session.turn_count,
                summary.lines().collect::<Vec<_>>().join(" · ")
            );
            lines.push(Line::styled(clip(&text, max), dim(theme)));
        }
    }
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// `⇄ handed off from [2] · to [5]`: the sessions a hand-off links this one with.
/// What a session's agent costs the machine, as read when the list was opened.
fn machine(model: &Model, session: &crate::protocol::Session) -> Option<String> {
    let r = model.resources_of(&session.id)?;
    Some(format!(
        "        machine: {:.1} s CPU · {} MB resident · {} process(es)",
        r.cpu_secs,
        r.rss_bytes / (1024 * 1024),
        r.processes
    ))
}

fn lineage(model: &Model, session: &crate::protocol::Session) -> Option<String> {
    let name = |id: &str| {
        model
            .number_of(id)
            .map_or_else(|| id.to_string(), |n| format!("[{n}]"))
    };
    let from = session
        .handed_from
        .as_deref()
        .map(|id| format!("from {}", name(id)));
    let to = session
        .handed_to
        .as_deref()
        .map(|id| format!("to {}", name(id)));
    let parts: Vec<String> = from.into_iter().chain(to).collect();
    (!parts.is_empty()).then(|| format!("        ⇄ handed off {}", parts.join(" · ")))
}

/// `sandbox (network none, …) · limits …` for a session not run as the user.
fn contained(session: &crate::protocol::Session) -> Option<String> {
    let driver = session.driver.as_ref()?;
    if driver.kind() == crate::protocol::DriverKind::Local {
        return None;
    }
    let mut text = format!("driver {}", driver.summary());
    if !session.limits.is_empty() {
        text.push_str(&format!(" · limits: {}", session.limits.join("; ")));
    }
    Some(text)
}
