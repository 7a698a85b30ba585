//! The search results overlay: one hit a line (where it is, when, and the excerpt with
//! the matched words marked), the selected one highlighted; Enter goes to it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::style::{dim, pane};
use super::text::{clip, width};
use crate::protocol::{HitKind, SearchHit};
use crate::tui::model::Model;
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme, selected: usize) {
    let Some(found) = model.found() else {
        return;
    };
    let rect = super::overlay::centered(area, 120, found.hits.len() + 1);
    let title = format!(
        " {} found for “{}”{} · ↑↓ choose · enter goes there · esc closes ",
        found.hits.len(),
        clip(&found.query, 30),
        if found.broad {
            " (too many to rank all: add a word)"
        } else {
            ""
        }
    );
    let block = pane(title, true, theme);
    let inner = block.inner(rect);
    let max = usize::from(inner.width);
    let rows = usize::from(inner.height);
    // Keep the selected hit on screen.
    let first = selected.saturating_sub(rows.saturating_sub(1));
    let lines: Vec<Line> = found
        .hits
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, hit)| hit_line(model, hit, i == selected, max, theme))
        .collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// `▸ [2] fix/tokenizer #201  10:07  …the tokenizer failed on…`, the matched words bold.
fn hit_line(
    model: &Model,
    hit: &SearchHit,
    selected: bool,
    max: usize,
    theme: &Theme,
) -> Line<'static> {
    let number = model
        .number_of(&hit.session_id)
        .map(|n| format!("[{n}] "))
        .unwrap_or_default();
    let place = match hit.kind {
        HitKind::Transcript => format!(
            "{number}{} #{}",
            clip(&hit.session_name, 32),
            hit.seq.unwrap_or_default()
        ),
        HitKind::Inbox => format!("{number}{} inbox", clip(&hit.session_name, 32)),
        HitKind::Session => format!("{number}{} session", clip(&hit.session_name, 32)),
    };
    let head = format!(
        "{}{:<44} {:<5}  ",
        if selected { "▸ " } else { "  " },
        clip(&place, 44),
        super::text::clock(&hit.at)
    );
    let room = max.saturating_sub(width(&head));
    let base = if selected {
        theme
            .style(Role::Text)
            .patch(theme.style(Role::SelectionBg))
    } else {
        theme.style(Role::Text)
    };
    let bold = base.add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
    let mut spans = vec![Span::styled(head, if selected { base } else { dim(theme) })];
    spans.extend(marked_spans(&hit.snippet, &hit.marks, room, base, bold));
    Line::from(spans)
}

/// The excerpt cut to `room` columns, its marked words in `bold`.
fn marked_spans(
    snippet: &str,
    marks: &[(usize, usize)],
    room: usize,
    base: Style,
    bold: Style,
) -> Vec<Span<'static>> {
    let text = clip(snippet, room);
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut in_mark = false;
    for (i, c) in text.chars().enumerate() {
        let marked = marks.iter().any(|&(s, e)| s <= i && i < e);
        if marked != in_mark && !run.is_empty() {
            let style = if in_mark { bold } else { base };
            spans.push(Span::styled(std::mem::take(&mut run), style));
        }
        in_mark = marked;
        run.push(c);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, if in_mark { bold } else { base }));
    }
    spans
}
