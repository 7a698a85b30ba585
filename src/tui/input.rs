//! The text input: a multi-line `ratatui-textarea` with a history of what was sent.

use ratatui_textarea::TextArea;

/// The most inputs remembered.
const HISTORY_CAP: usize = 500;

/// The prompt being written: its lines, and the history of what was sent, walked with the
/// history keys.
#[derive(Debug, Clone, Default)]
pub struct PromptEditor {
    pub(super) area: TextArea<'static>,
    history: Vec<String>,
    /// The history entry shown, counted from the newest.
    recalled: Option<usize>,
    /// What was typed before walking the history.
    draft: String,
}

impl PromptEditor {
    pub fn text(&self) -> String {
        self.area.lines().join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.area.is_empty()
    }

    pub fn is_single_line(&self) -> bool {
        self.area.lines().len() <= 1
    }

    /// Whether Up and Down walk the history rather than move the cursor: on a single
    /// line, or while a recalled entry is shown.
    pub fn walks_history(&self) -> bool {
        self.is_single_line() || self.recalled.is_some()
    }

    /// How many lines the text has.
    pub fn line_count(&self) -> usize {
        self.area.lines().len().max(1)
    }

    /// Replaces the text, with the cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.area = TextArea::new(text.split('\n').map(String::from).collect());
        self.area.move_cursor(ratatui_textarea::CursorMove::Bottom);
        self.area.move_cursor(ratatui_textarea::CursorMove::End);
    }

    /// Takes the text out, remembering it in the history.
    pub fn take(&mut self) -> String {
        let text = self.text();
        self.set_text("");
        if self.history.last() != Some(&text) {
            self.history.push(text.clone());
            if self.history.len() > HISTORY_CAP {
                self.history.remove(0);
            }
        }
        self.recalled = None;
        self.draft.clear();
        text
    }

    /// Shows the previous (older) history entry.
    pub fn recall_older(&mut self) {
        let next = self.recalled.map_or(0, |r| r + 1);
        if next >= self.history.len() {
            return;
        }
        if self.recalled.is_none() {
            self.draft = self.text();
        }
        self.recalled = Some(next);
        let text = self.history[self.history.len() - 1 - next].clone();
        self.set_text(&text);
    }

    /// Shows the next (newer) history entry, or what was typed before.
    pub fn recall_newer(&mut self) {
        match self.recalled {
            None => {}
            Some(0) => {
                self.recalled = None;
                let draft = std::mem::take(&mut self.draft);
                self.set_text(&draft);
            }
            Some(r) => {
                self.recalled = Some(r - 1);
                let text = self.history[self.history.len() - r].clone();
                self.set_text(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_walks_back_and_returns_to_the_draft() {
        let mut input = PromptEditor::default();
        for text in ["one", "two"] {
            input.set_text(text);
            input.take();
        }
        input.set_text("dra");
        input.recall_older();
        assert_eq!(input.text(), "two");
        input.recall_older();
        assert_eq!(input.text(), "one");
        input.recall_older();
        assert_eq!(input.text(), "one", "stops at the oldest");
        input.recall_newer();
        assert_eq!(input.text(), "two");
        input.recall_newer();
        assert_eq!(input.text(), "dra");
    }

    #[test]
    fn take_empties_and_skips_repeats() {
        let mut input = PromptEditor::default();
        input.set_text("a\nb");
        assert!(!input.is_single_line());
        assert_eq!(input.take(), "a\nb");
        assert!(input.is_empty());
        input.set_text("a\nb");
        input.take();
        input.recall_older();
        input.recall_older();
        assert_eq!(input.text(), "a\nb", "one entry for two equal sends");
    }
}
