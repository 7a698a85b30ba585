//! The focused session's transcript: prompts, agent text, folded thoughts, tool calls with
//! their status, plans, permissions and errors, followed by text still streaming. It
//! follows the tail unless scrolled up.

use super::permission::{Outcome, permission_outcome};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::style::{activity_role, dim, pane};
use super::text::{quiet_text, usage_text, wrap};
use crate::protocol::{EntryKind, Session, TranscriptEntry};
use crate::tui::keymap::KeyAction;
use crate::tui::model::{Connection, Model, ScrollExtent, Zone};
use crate::tui::theme::{Role, Theme};
use crate::tui::transcript::{Streamed, Transcript};

/// One logical row before wrapping: a styled marker and text in one style, or the agent's
/// prose, drawn from Markdown.
struct Row {
    marker: Span<'static>,
    text: String,
    style: Style,
    prose: bool,
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
            prose: false,
        }
    }

    /// The agent's words, in Markdown.
    fn prose(text: impl Into<String>, theme: &Theme) -> Self {
        let plain = theme.style(Role::Text);
        Self {
            prose: true,
            ..Self::new("", plain, text, plain)
        }
    }
}

/// Draws the focused transcript, wrapping only what `cache` does not hold yet, and returns
/// how far it can scroll as drawn (nothing when no session is focused).
pub fn render(
    frame: &mut Frame,
    area: Rect,
    model: &Model,
    cache: &mut WrapCache,
    theme: &Theme,
) -> Option<ScrollExtent> {
    let Some(session) = model.focused_session() else {
        let block = pane(" transcript ", false, theme);
        let hint = Paragraph::new(how_to_start(model))
            .style(dim(theme))
            .wrap(Wrap { trim: true })
            .block(block);
        frame.render_widget(hint, area);
        return None;
    };
    let mut block = pane(
        title(model, session, theme),
        model.zone == Zone::Input,
        theme,
    );
    let inner = block.inner(area);
    let width = usize::from(inner.width);
    let mut streamed = Vec::new();
    match model.transcript(&session.id) {
        Some(transcript) => {
            let show_thoughts = model.transcripts.show_thoughts;
            cache.update(&session.id, transcript, width, show_thoughts, theme);
            let mut rows = Vec::new();
            for block in transcript.streamed() {
                streamed_rows(block, show_thoughts, theme, &mut rows);
            }
            streamed = wrap_rows(&rows, width, theme);
        }
        None => cache.clear(),
    }
    let total = cache.line_count() + streamed.len();
    let height = usize::from(inner.height);
    let max = total.saturating_sub(height);
    // The entry a search jumped to (or the one its folded update belongs to): marked, and
    // brought a quarter of the way down the pane the first time it is held.
    let jump = model.jump().filter(|j| j.session_id == session.id);
    let target = jump.and_then(|j| cache.held_at_or_before(j.seq));
    let jumped = match (jump, target) {
        (Some(j), Some(seq)) if !j.placed => {
            let rows_to_start = streamed.len() + cache.rows_from(seq);
            let offset = (rows_to_start + height / 4).saturating_sub(height).min(max);
            Some(u16::try_from(offset).unwrap_or(u16::MAX))
        }
        _ => None,
    };
    let offset = jumped.map_or(usize::from(model.transcripts.scroll).min(max), usize::from);
    let extent = ScrollExtent {
        max: u16::try_from(max).unwrap_or(u16::MAX),
        page: inner.height,
        jumped,
    };
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
    let shown = shown_lines(cache, &streamed, target, offset, height, theme);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(shown), inner);
    Some(extent)
}

/// What the empty workbench says to start with: the agents found and the `/new` that
/// starts one.
fn how_to_start(model: &Model) -> String {
    if model.health.connection == Connection::Connecting {
        return "reading the sessions…".into();
    }
    match model.agents.as_slice() {
        // The profiles are in the files that do not load (the banner says why).
        [] if model.health.settings_error.is_some() => {
            "no session yet — /new --agent <name> <task> starts one".into()
        }
        [] => "no agent found — install one (`cru agents` lists the known ones) or add \
               [agents.<name>] to .crucible.toml"
            .into(),
        [only] => format!("no session yet — /new <task> starts {only}"),
        many => format!(
            "no session yet — /new --agent <name> <task> · agents: {}",
            many.join(", ")
        ),
    }
}

/// The pane's title: the session's number, name and state, where it runs, how long it
/// has been quiet, and what it used.
fn title(model: &Model, session: &Session, theme: &Theme) -> Line<'static> {
    let number = model.number_of(&session.id).unwrap_or_default();
    let activity = model.activity(session);
    let mut title = vec![
        Span::raw(format!(" [{number}] {} · ", session.display_name)),
        Span::styled(activity.label(), theme.style(activity_role(activity))),
        Span::raw(" "),
    ];
    // Team mode: a session whose agent runs on another machine says which.
    if let Some(host) = session.host.as_deref().filter(|h| *h != model.host) {
        title.push(Span::styled(format!("· on {host} "), dim(theme)));
    }
    if let Some(quiet) = model.stalled_for(&session.id, std::time::Instant::now()) {
        title.push(Span::styled(
            format!("· quiet {} ", quiet_text(quiet)),
            theme.style(crate::tui::theme::Role::SessionWaiting),
        ));
    }
    if let Some(usage) = &session.usage {
        title.push(Span::styled(
            format!("· {} ", usage_text(usage)),
            dim(theme),
        ));
    }
    Line::from(title)
}

/// The rows on screen, counted from the bottom (only those are copied): `offset` rows up
/// from the end, the entry a search found (`target`) marked.
fn shown_lines(
    cache: &WrapCache,
    streamed: &[Line<'static>],
    target: Option<u64>,
    offset: usize,
    height: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let stored = cache.entries.iter().rev().flat_map(|w| {
        let found = Some(w.seq) == target;
        w.lines.iter().rev().map(move |line| (line, found))
    });
    let found_style = theme.style(Role::SelectionBg);
    let mut shown: Vec<Line> = streamed
        .iter()
        .rev()
        .map(|line| (line, false))
        .chain(stored)
        .skip(offset)
        .take(height)
        .map(|(line, found)| {
            if found {
                line.clone().patch_style(found_style)
            } else {
                line.clone()
            }
        })
        .collect();
    shown.reverse();
    shown
}

/// What the transcript pane drew of each stored entry of the focused session, kept between
/// frames: an entry is wrapped again only when it changed (or the session, the width, the
/// theme or the folding of thoughts did), so a frame costs the same however long the
/// history is.
#[derive(Debug, Default)]
pub struct WrapCache {
    session: String,
    width: usize,
    show_thoughts: bool,
    theme: Option<Theme>,
    /// In `seq` order, as the transcript's entries.
    entries: Vec<Wrapped>,
    lines: usize,
}

#[derive(Debug)]
struct Wrapped {
    seq: u64,
    revision: u64,
    /// The first entry has no blank line before a prompt.
    first: bool,
    lines: Vec<Line<'static>>,
}

impl WrapCache {
    /// Brings the cache in line with `transcript` drawn `width` columns wide.
    fn update(
        &mut self,
        session: &str,
        transcript: &Transcript,
        width: usize,
        show_thoughts: bool,
        theme: &Theme,
    ) {
        let same = self.session == session
            && self.width == width
            && self.show_thoughts == show_thoughts
            && self.theme.as_ref() == Some(theme);
        if !same {
            self.clear();
            self.session = session.to_string();
            self.width = width;
            self.show_thoughts = show_thoughts;
            self.theme = Some(theme.clone());
        }
        let mut old = std::mem::take(&mut self.entries).into_iter().peekable();
        let mut rows = Vec::new();
        self.lines = 0;
        let stored = transcript.entries().iter().zip(transcript.revisions());
        for (i, (entry, &revision)) in stored.enumerate() {
            // Both lists are in `seq` order: pass what is gone, keep what is unchanged.
            while old.peek().is_some_and(|w| w.seq < entry.seq) {
                old.next();
            }
            let first = i == 0;
            let kept =
                old.next_if(|w| w.seq == entry.seq && w.revision == revision && w.first == first);
            let lines = match kept {
                Some(wrapped) => wrapped.lines,
                None => {
                    rows.clear();
                    entry_rows(entry, first, show_thoughts, theme, &mut rows);
                    wrap_rows(&rows, width, theme)
                }
            };
            self.lines += lines.len();
            self.entries.push(Wrapped {
                seq: entry.seq,
                revision,
                first,
                lines,
            });
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.lines = 0;
    }

    fn line_count(&self) -> usize {
        self.lines
    }

    /// The `seq` of the last entry held at or before `seq`.
    fn held_at_or_before(&self, seq: u64) -> Option<u64> {
        let at = self.entries.partition_point(|w| w.seq <= seq);
        at.checked_sub(1).map(|i| self.entries[i].seq)
    }

    /// Rows from the bottom up to and including the first row of entry `seq`.
    fn rows_from(&self, seq: u64) -> usize {
        self.entries
            .iter()
            .rev()
            .take_while(|w| w.seq >= seq)
            .map(|w| w.lines.len())
            .sum()
    }
}

fn entry_rows(
    entry: &TranscriptEntry,
    first: bool,
    show_thoughts: bool,
    theme: &Theme,
    rows: &mut Vec<Row>,
) {
    let text = entry.text.as_deref().unwrap_or_default();
    let status = entry.status.as_deref().unwrap_or_default();
    let plain = theme.style(Role::Text);
    let faint = dim(theme);
    let tool = theme.style(Role::TranscriptTool);
    let error = theme.style(Role::Error);
    match entry.kind {
        EntryKind::Prompt => {
            if !first {
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
        EntryKind::Message => rows.push(Row::prose(text, theme)),
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
            let (marker, style) = match permission_outcome(status) {
                Outcome::Withdrawn => ("· ", faint),
                Outcome::Refused => ("✗ ", error),
                Outcome::Allowed => ("✓ ", faint),
            };
            rows.push(Row::new(
                marker,
                style,
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
        _ => rows.push(Row::prose(streamed.text.clone(), theme)),
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
fn wrap_rows(rows: &[Row], max: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for row in rows {
        if row.prose {
            lines.extend(super::markdown::lines(&row.text, max, theme));
            continue;
        }
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
