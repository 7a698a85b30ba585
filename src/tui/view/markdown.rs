//! An agent's prose drawn from Markdown: emphasis in italics, strong text and headings in
//! bold (without their `#`), code in the theme's code colour with blocks indented and
//! never wrapped, lists with `•` or their numbers, quotes behind `│ `, and a link's
//! address dim after its text. Line breaks inside a paragraph are kept, as the agent wrote
//! them. Everything else wraps to the pane's width in display columns.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::style::dim;
use super::text::width;
use crate::tui::theme::{Role, Theme};

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;

/// The lines of Markdown `text` drawn `max` columns wide.
pub(super) fn lines(text: &str, max: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut drawing = Drawing::new(max, theme);
    for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        drawing.event(event);
    }
    drawing.flush();
    if drawing.lines.is_empty() {
        drawing.lines.push(Line::default());
    }
    drawing.lines
}

/// A block the lines being drawn are inside of.
enum Container {
    Quote,
    /// A list item: its marker is drawn on its first line, blanks of its width after.
    Item {
        marker: String,
        shown: bool,
    },
}

struct Drawing<'t> {
    max: usize,
    theme: &'t Theme,
    lines: Vec<Line<'static>>,
    containers: Vec<Container>,
    /// Open lists, innermost last: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// The text of the paragraph, heading or item being read, in styled pieces.
    inline: Vec<(String, Style)>,
    /// The modifiers of the emphasis, strong text, headings and links open.
    marks: Vec<Modifier>,
    /// Open links: the address, and where in `inline` their text starts.
    links: Vec<(String, usize)>,
    /// The text of the code block being read.
    code: Option<String>,
    /// A blank line goes before the next block.
    gap: bool,
}

impl<'t> Drawing<'t> {
    fn new(max: usize, theme: &'t Theme) -> Self {
        Self {
            max,
            theme,
            lines: Vec::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            inline: Vec::new(),
            marks: Vec::new(),
            links: Vec::new(),
            code: None,
            gap: false,
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some(code) => code.push_str(&text),
                None => self.push(&text, self.style()),
            },
            Event::Code(code) => self.push(&code, self.code_style()),
            Event::Html(html) | Event::InlineHtml(html) => self.push(&html, self.style()),
            Event::SoftBreak | Event::HardBreak => self.push("\n", self.style()),
            Event::Rule => {
                self.block();
                let mut line = Line::from(self.prefix());
                let rule = self.max.saturating_sub(line.width()).min(40);
                line.push_span(Span::styled("─".repeat(rule), dim(self.theme)));
                self.lines.push(line);
                self.gap = true;
            }
            Event::TaskListMarker(done) => {
                self.push(if done { "[x] " } else { "[ ] " }, self.style());
            }
            Event::FootnoteReference(text) | Event::InlineMath(text) | Event::DisplayMath(text) => {
                self.push(&text, self.style())
            }
        }
    }

    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.block(),
            Tag::Heading { .. } => {
                self.block();
                self.marks.push(Modifier::BOLD);
            }
            Tag::CodeBlock(_) => {
                self.block();
                self.code = Some(String::new());
            }
            Tag::BlockQuote(_) => {
                self.block();
                self.containers.push(Container::Quote);
            }
            Tag::List(first) => {
                // A list inside an item goes on under the item's text, without a gap.
                if self.lists.is_empty() {
                    self.block();
                } else {
                    self.flush();
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        *number += 1;
                        format!("{}. ", *number - 1)
                    }
                    _ => "• ".to_string(),
                };
                self.containers.push(Container::Item {
                    marker,
                    shown: false,
                });
            }
            Tag::Emphasis => self.marks.push(Modifier::ITALIC),
            Tag::Strong => self.marks.push(Modifier::BOLD),
            Tag::Strikethrough => self.marks.push(Modifier::CROSSED_OUT),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push((dest_url.to_string(), self.inline.len()));
                self.marks.push(Modifier::UNDERLINED);
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => {
                if let Some((last, _)) = self.inline.last_mut() {
                    last.truncate(last.trim_end_matches('\n').len());
                }
                self.flush();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.marks.pop();
                self.flush();
                self.gap = true;
            }
            TagEnd::CodeBlock => self.code_block(),
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.gap = self.lists.is_empty();
            }
            TagEnd::Item => {
                self.flush();
                // An empty item still shows its marker.
                if let Some(Container::Item { shown: false, .. }) = self.containers.last() {
                    let line = Line::from(self.prefix());
                    self.lines.push(line);
                }
                self.containers.pop();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.marks.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.marks.pop();
                if let Some((url, from)) = self.links.pop() {
                    let text: String = self.inline[from..]
                        .iter()
                        .map(|(t, _)| t.as_str())
                        .collect();
                    if text != url && url.strip_prefix("mailto:") != Some(text.as_str()) {
                        self.push(&format!(" ({url})"), dim(self.theme));
                    }
                }
            }
            _ => {}
        }
    }

    /// The code block read: each line indented, in the code style, as long as it is.
    fn code_block(&mut self) {
        let code = self.code.take().unwrap_or_default();
        let style = self.code_style();
        for line in code.trim_end_matches('\n').split('\n') {
            let mut spans = self.prefix();
            spans.push(Span::styled(
                format!("  {}", line.replace('\t', "    ")),
                style,
            ));
            self.lines.push(Line::from(spans));
        }
        self.gap = true;
    }

    /// Before a block: what was read is drawn, and a blank line left if one is due.
    fn block(&mut self) {
        self.flush();
        if std::mem::take(&mut self.gap) && !self.lines.is_empty() {
            let blank = self
                .containers
                .iter()
                .map(|c| match c {
                    Container::Quote => Span::styled("│", dim(self.theme)),
                    Container::Item { marker, .. } => Span::raw(" ".repeat(width(marker))),
                })
                .collect::<Vec<_>>();
            self.lines.push(Line::from(blank));
        }
    }

    fn style(&self) -> Style {
        let base = self.theme.style(Role::Text);
        self.marks.iter().fold(base, |s, m| s.add_modifier(*m))
    }

    fn code_style(&self) -> Style {
        let base = self.theme.style(Role::DiffHunk);
        self.marks.iter().fold(base, |s, m| s.add_modifier(*m))
    }

    fn push(&mut self, text: &str, style: Style) {
        self.inline.push((text.to_string(), style));
    }

    /// The marks of the quotes and list items a line is in; an item's marker only once.
    fn prefix(&mut self) -> Vec<Span<'static>> {
        let faint = dim(self.theme);
        self.containers
            .iter_mut()
            .map(|container| match container {
                Container::Quote => Span::styled("│ ", faint),
                Container::Item { marker, shown } if !*shown => {
                    *shown = true;
                    Span::styled(marker.clone(), faint)
                }
                Container::Item { marker, .. } => Span::raw(" ".repeat(width(marker))),
            })
            .collect()
    }

    /// Draws the text read so far, wrapped under its prefix.
    fn flush(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let pieces = std::mem::take(&mut self.inline);
        let first = self.prefix();
        let rest = self.prefix();
        let used: usize = first.iter().map(Span::width).sum();
        let body = self.max.saturating_sub(used).max(1);
        for (i, row) in wrap_styled(&pieces, body).into_iter().enumerate() {
            let mut spans = if i == 0 { first.clone() } else { rest.clone() };
            spans.extend(row);
            self.lines.push(Line::from(spans));
        }
    }
}

/// One character and its style.
type Cell = (char, Style);

/// Word-wraps styled text to `max` columns as [`super::text::wrap`] wraps plain text:
/// breaks at spaces, splits words longer than a row, and starts a row at each `\n`.
fn wrap_styled(pieces: &[(String, Style)], max: usize) -> Vec<Vec<Span<'static>>> {
    let max = max.max(1);
    let mut cells: Vec<Cell> = Vec::new();
    for (text, style) in pieces {
        for c in text.chars() {
            if c == '\t' {
                cells.extend(std::iter::repeat_n((' ', *style), 4));
            } else {
                cells.push((c, *style));
            }
        }
    }
    let cell_width = |c: char| width(c.encode_utf8(&mut [0; 4]));
    let mut rows = Vec::new();
    for line in cells.split(|(c, _)| *c == '\n') {
        let mut row: Vec<Cell> = Vec::new();
        let mut used = 0;
        let mut rest = line;
        // The space before the word: it joins the word to the row in its own style.
        let mut space: Option<Cell> = None;
        loop {
            let end = rest.iter().position(|(c, _)| *c == ' ');
            let word = end.map_or(rest, |at| &rest[..at]);
            let w: usize = word.iter().map(|(c, _)| cell_width(*c)).sum();
            let gap = usize::from(!row.is_empty());
            if used + gap + w <= max {
                if gap == 1 {
                    row.push(space.unwrap_or((' ', Style::default())));
                }
                row.extend_from_slice(word);
                used += gap + w;
            } else {
                if !row.is_empty() {
                    rows.push(spans(&std::mem::take(&mut row)));
                    used = 0;
                }
                for &(c, style) in word {
                    let cw = cell_width(c);
                    if used + cw > max {
                        rows.push(spans(&std::mem::take(&mut row)));
                        used = 0;
                    }
                    row.push((c, style));
                    used += cw;
                }
            }
            match end {
                Some(at) => {
                    space = Some(rest[at]);
                    rest = &rest[at + 1..];
                }
                None => break,
            }
        }
        rows.push(spans(&row));
    }
    rows
}

/// Cells as spans, one per run of one style.
fn spans(cells: &[Cell]) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut current: Option<Style> = None;
    for &(c, style) in cells {
        if current.is_some_and(|s| s != style) {
            let done = std::mem::take(&mut text);
            spans.push(Span::styled(done, current.unwrap_or_default()));
        }
        current = Some(style);
        text.push(c);
    }
    if let Some(style) = current {
        spans.push(Span::styled(text, style));
    }
    spans
}
