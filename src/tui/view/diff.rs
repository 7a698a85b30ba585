//! The diff overlay: a session's changes, file headings and hunks coloured by the theme,
//! the cursor's row highlighted, review comments under the lines they are about, and the
//! comment being written at the bottom.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::style::{dim, pane};
use super::text::clip;
use crate::tui::model::Model;
use crate::tui::review::RowKind;
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(diff) = &model.review.diff else {
        return;
    };
    let rect = Rect {
        x: area.x + 1,
        y: area.y,
        width: area.width.saturating_sub(2),
        height: area.height.saturating_sub(1),
    };
    let title = format!(
        " {} · ↑↓ move · c comment · esc closes ",
        clip(&diff.title, usize::from(rect.width).saturating_sub(40))
    );
    let block = pane(title, true, theme);
    let inner = block.inner(rect);
    let max = usize::from(inner.width);
    let editing = diff.editing.is_some();
    let height = usize::from(inner.height).saturating_sub(usize::from(editing));
    let comments = model.review.comments(&diff.session_id);
    // The cursor stays in the middle once the diff is taller than the box.
    let top = diff.cursor.saturating_sub(height / 2);
    let mut lines = Vec::new();
    let mut shown = vec![false; comments.len()];
    for (i, row) in diff.rows.iter().enumerate().skip(top) {
        if lines.len() >= height {
            break;
        }
        let role = match row.kind {
            RowKind::File => Role::BorderFocused,
            RowKind::Hunk => Role::DiffHunk,
            RowKind::Added => Role::DiffAdded,
            RowKind::Removed => Role::DiffRemoved,
            RowKind::Context => Role::Text,
        };
        let mut style = theme.style(role);
        if row.kind == RowKind::File {
            style = style.add_modifier(Modifier::BOLD);
        }
        if i == diff.cursor {
            style = style.patch(theme.style(Role::SelectionBg));
        }
        let number = row
            .line
            .map(|n| format!("{n:>5} "))
            .unwrap_or_else(|| "      ".into());
        lines.push(Line::from(vec![
            Span::styled(number, dim(theme)),
            Span::styled(clip(&row.text, max.saturating_sub(6)), style),
        ]));
        // Each comment under the first row of its file and line (a hunk heading is
        // about neither).
        for (n, comment) in comments.iter().enumerate() {
            if row.kind == RowKind::Hunk
                || shown[n]
                || comment.path != row.path
                || comment.line != row.line
            {
                continue;
            }
            shown[n] = true;
            lines.push(Line::styled(
                clip(&format!("      ✎ {}", comment.text), max),
                theme.style(Role::SessionWaiting),
            ));
        }
    }
    if let (Some(text), Some((path, line))) = (&diff.editing, diff.anchor()) {
        let at = line.map(|l| format!("{path}:{l}")).unwrap_or(path);
        lines.truncate(height);
        lines.push(Line::styled(
            clip(
                &format!("comment on {at}: {text}▏ (enter keeps, esc drops)"),
                max,
            ),
            theme.style(Role::SessionWaiting),
        ));
    }
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}
