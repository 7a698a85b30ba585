//! The focused session's transcript: prompts, agent text, folded thoughts, tool calls with
//! their status, plans, permissions and errors, followed by text still streaming. It
//! follows the tail unless scrolled up.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{activity_role, dim, pane, wrap};
use crate::protocol::{EntryKind, TranscriptEntry};
use crate::tui::keymap::KeyAction;
use crate::tui::model::{Model, ScrollExtent, Zone};
use crate::tui::theme::{Role, Theme};
use crate::tui::transcript::{Streamed, Transcript};

/// One logical row before wrapping: a styled marker and text in one style.
struct Row {
    marker: Span<'static>,
    text: String,
    style: Style,
}

impl Row {
    fn new(
        marker: &'static str,
        marker_style: Style,
        text: impl Into<String>,
        style: Style,
    ) -> Self {
        Self {
            marker: Span::styled(marker, marker_style),
            text: text.into(),
            style,
        }
    }
}

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(session) = model.focused_session() else {
        let block = pane(" transcript ", false, theme);
        let hint = Paragraph::new(model.how_to_start())
            .style(dim(theme))
            .wrap(Wrap { trim: true })
            .block(block);
        frame.render_widget(hint, area);
        return;
    };
    let number = model.number_of(&session.id).unwrap_or_default();
    let activity = model.activity(session);
    let mut title = vec![
        Span::raw(format!(" [{number}] {} · ", session.display_name)),
        Span::styled(activity.label(), theme.style(activity_role(activity))),
        Span::raw(" "),
    ];
    if let Some(quiet) = model.stalled_for(&session.id, std::time::Instant::now()) {
        title.push(Span::styled(
            format!("· quiet {} ", super::quiet_text(quiet)),
            theme.style(crate::tui::theme::Role::SessionWaiting),
        ));
    }
    if let Some(usage) = &session.usage {
        title.push(Span::styled(
            format!("· {} ", crate::tui::model::usage_text(usage)),
            dim(theme),
        ));
    }
    let title = Line::from(title);
    let mut block = pane(title, model.zone == Zone::Input, theme);
    let inner = block.inner(area);
    let rows = model
        .transcript(&session.id)
        .map(|t| rows(t, model.show_thoughts, theme))
        .unwrap_or_default();
    let lines = wrap_rows(&rows, inner.width.into());
    let height = usize::from(inner.height);
    let max = lines.len().saturating_sub(height);
    let offset = usize::from(model.scroll).min(max);
    model.scroll_extent.set(ScrollExtent {
        max: u16::try_from(max).unwrap_or(u16::MAX),
        page: inner.height,
    });
    if offset > 0 {
        block = block.title_bottom(
            Line::styled(
                format!(
                    " ↓ {offset} more rows · {} ",
                    model.keymap.hint(KeyAction::ScrollDown)
                ),
                dim(theme),
            )
            .right_aligned(),
        );
    }
    let top = lines.len().saturating_sub(height + offset);
    let shown: Vec<Line> = lines.into_iter().skip(top).take(height).collect();
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(shown), inner);
}

/// The rows of a transcript, in order.
fn rows(transcript: &Transcript, show_thoughts: bool, theme: &Theme) -> Vec<Row> {
    let mut rows = Vec::new();
    for entry in transcript.entries() {
        entry_rows(entry, show_thoughts, theme, &mut rows);
    }
    for streamed in transcript.streamed() {
        streamed_rows(streamed, show_thoughts, theme, &mut rows);
    }
    rows
}

fn entry_rows(entry: &TranscriptEntry, show_thoughts: bool, theme: &Theme, rows: &mut Vec<Row>) {
    let text = entry.text.as_deref().unwrap_or_default();
    let status = entry.status.as_deref().unwrap_or_default();
    let plain = theme.style(Role::Text);
    let faint = dim(theme);
    let tool = theme.style(Role::TranscriptTool);
    let error = theme.style(Role::Error);
    match entry.kind {
        EntryKind::Prompt => {
            if !rows.is_empty() {
                rows.push(Row::new("", plain, "", plain));
            }
            let prompt = theme.style(Role::TranscriptPrompt);
            rows.push(Row::new(
                "› ",
                prompt.add_modifier(Modifier::BOLD),
                text,
                prompt,
            ));
        }
        EntryKind::Message => rows.push(Row::new("", plain, text, plain)),
        EntryKind::Thought => thought_rows(text, false, show_thoughts, theme, rows),
        EntryKind::ToolCall => {
            let (icon, role) = tool_status(status);
            let suffix = if status.is_empty() {
                String::new()
            } else {
                format!(" ({status})")
            };
            rows.push(Row::new(
                icon,
                theme.style(role),
                format!("{text}{suffix}"),
                tool,
            ));
        }
        EntryKind::ToolUpdate => {
            rows.push(Row::new("↳ ", tool, format!("{text} ({status})"), tool))
        }
        EntryKind::Plan => {
            rows.push(Row::new(
                "≡ ",
                tool,
                "plan",
                tool.add_modifier(Modifier::BOLD),
            ));
            for step in text.lines() {
                let (icon, role, step) = plan_step(step);
                rows.push(Row::new(icon, theme.style(role), step, plain));
            }
        }
        EntryKind::Permission if status.is_empty() => {
            let waiting = theme.style(Role::SessionWaiting);
            rows.push(Row::new(
                "? ",
                waiting,
                format!("permission asked: {text}"),
                waiting,
            ));
        }
        EntryKind::Permission => {
            let marker = if status == "withdrawn" { "· " } else { "✓ " };
            rows.push(Row::new(
                marker,
                faint,
                format!("permission {status}: {text}"),
                faint,
            ));
        }
        EntryKind::File => rows.push(Row::new("· ", faint, format!("{status} {text}"), faint)),
        EntryKind::TurnEnd => rows.push(Row::new(
            "— ",
            faint,
            format!("turn ended ({status})"),
            faint,
        )),
        EntryKind::State if text.is_empty() => rows.push(Row::new("· ", faint, status, faint)),
        EntryKind::State => rows.push(Row::new("· ", faint, format!("{status}: {text}"), faint)),
        EntryKind::Error => rows.push(Row::new("✗ ", error, text, error)),
    }
}

fn streamed_rows(streamed: &Streamed, show_thoughts: bool, theme: &Theme, rows: &mut Vec<Row>) {
    match streamed.kind {
        EntryKind::Thought => thought_rows(&streamed.text, true, show_thoughts, theme, rows),
        _ => rows.push(Row::new(
            "",
            theme.style(Role::Text),
            streamed.text.clone(),
            theme.style(Role::Text),
        )),
    }
}

/// A thought folded to one line, or unfolded.
fn thought_rows(text: &str, streaming: bool, show: bool, theme: &Theme, rows: &mut Vec<Row>) {
    let faint = dim(theme);
    let count = text.lines().count().max(1);
    let noun = if streaming { "thinking…" } else { "thought" };
    let plural = if count == 1 { "line" } else { "lines" };
    if show {
        rows.push(Row::new("▾ ", faint, noun, faint));
        rows.push(Row::new(
            "  ",
            faint,
            text,
            faint.add_modifier(Modifier::ITALIC),
        ));
    } else {
        rows.push(Row::new(
            "▸ ",
            faint,
            format!("{noun} ({count} {plural})"),
            faint,
        ));
    }
}

fn tool_status(status: &str) -> (&'static str, Role) {
    match status {
        "completed" => ("✓ ", Role::SessionDone),
        "failed" => ("✗ ", Role::Error),
        "in_progress" => ("◐ ", Role::SessionWorking),
        _ => ("○ ", Role::TranscriptTool),
    }
}

/// `[status] step` as an icon and the step.
fn plan_step(line: &str) -> (&'static str, Role, String) {
    let (status, step) = line
        .strip_prefix('[')
        .and_then(|l| l.split_once(']'))
        .map_or(("", line), |(s, rest)| (s, rest.trim_start()));
    let (icon, role) = match status {
        "completed" => ("  ✓ ", Role::SessionDone),
        "in_progress" => ("  ◐ ", Role::SessionWorking),
        _ => ("  ○ ", Role::TextDim),
    };
    (icon, role, step.to_string())
}

/// Wraps rows to the width, continuing under the text rather than the marker.
fn wrap_rows(rows: &[Row], max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for row in rows {
        let indent = row.marker.width();
        let body = max.saturating_sub(indent).max(1);
        for (i, piece) in wrap(&row.text, body).into_iter().enumerate() {
            let lead = if i == 0 {
                row.marker.clone()
            } else {
                Span::raw(" ".repeat(indent))
            };
            lines.push(Line::from(vec![lead, Span::styled(piece, row.style)]));
        }
    }
    lines
}
