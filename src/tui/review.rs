//! Reviewing a session's changes: the diff overlay (its rows and cursor are in
//! `review/diff.rs`), the review comments written on its lines, and the prompt
//! `/review send` makes of them.

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::commands::ReviewOp;
use crate::protocol::DiffReply;

mod diff;

pub use diff::{DiffView, RowKind};

/// What the review is told.
#[derive(Debug)]
pub(super) enum ReviewMsg<'a> {
    /// A session's changes, read for `/diff`.
    Show(&'a DiffReply),
    /// A key while the diff overlay is open.
    Key(KeyEvent),
    /// `/review` on the focused session's comments.
    Op { op: ReviewOp, session_id: String },
}

/// What the workbench does after the review took a message.
#[derive(Debug, PartialEq)]
pub(super) enum Reviewed {
    /// Open the diff overlay.
    Open,
    /// Close the overlay; the keys go back to the input.
    Close,
    /// There is no diff to show: the overlay goes away.
    Gone,
    Stay,
    Flash(String),
    Refuse(String),
    /// Show a page: its title and lines.
    Page(String, Vec<String>),
    /// Prompt the session with this text.
    Prompt(String, String),
}

/// The diff shown, and the review comments not yet sent, by session.
#[derive(Debug, Default)]
pub struct Review {
    /// The diff the overlay shows.
    pub(super) diff: Option<DiffView>,
    /// Review comments not yet sent, by session.
    comments: HashMap<String, Vec<ReviewComment>>,
}

impl Review {
    pub(super) fn update(&mut self, msg: ReviewMsg<'_>) -> Reviewed {
        match msg {
            ReviewMsg::Show(reply) if reply.diff.files.is_empty() => Reviewed::Flash(format!(
                "no changes on {} against {}",
                reply.branch, reply.base_branch
            )),
            ReviewMsg::Show(reply) => {
                self.diff = Some(DiffView::new(reply));
                Reviewed::Open
            }
            ReviewMsg::Key(key) => self.key(key),
            ReviewMsg::Op { op, session_id } => self.op(op, session_id),
        }
    }

    /// The review comments on `session_id`'s changes not yet sent.
    pub fn comments(&self, session_id: &str) -> &[ReviewComment] {
        self.comments.get(session_id).map_or(&[], Vec::as_slice)
    }

    /// The diff overlay: move over the rows, `c` writes a review comment on the row's
    /// line (enter keeps it, esc drops it), esc or q closes.
    fn key(&mut self, key: KeyEvent) -> Reviewed {
        let Some(diff) = self.diff.as_mut() else {
            return Reviewed::Gone;
        };
        if let Some(text) = diff.editing.as_mut() {
            match key.code {
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Esc => diff.editing = None,
                KeyCode::Enter => {
                    let text = diff.editing.take().unwrap_or_default();
                    if let (false, Some((path, line))) = (text.trim().is_empty(), diff.anchor()) {
                        let comments = self.comments.entry(diff.session_id.clone()).or_default();
                        comments.push(ReviewComment {
                            path,
                            line,
                            text: text.trim().to_string(),
                        });
                        let n = comments.len();
                        return Reviewed::Flash(format!(
                            "{n} review comment(s) — /review send gives them to the agent"
                        ));
                    }
                }
                _ => {}
            }
            return Reviewed::Stay;
        }
        let page = 10;
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return Reviewed::Close,
            KeyCode::Up | KeyCode::Char('k') => diff.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => diff.move_by(1),
            KeyCode::PageUp => diff.move_by(-page),
            KeyCode::PageDown => diff.move_by(page),
            KeyCode::Home | KeyCode::Char('g') => diff.cursor = 0,
            KeyCode::End | KeyCode::Char('G') => diff.move_by(isize::MAX),
            KeyCode::Char('c') => diff.editing = Some(String::new()),
            _ => {}
        }
        Reviewed::Stay
    }

    /// `/review`: the session's comments listed, sent as one prompt, or dropped.
    fn op(&mut self, op: ReviewOp, session_id: String) -> Reviewed {
        let comments = self.comments(&session_id).to_vec();
        if comments.is_empty() {
            return Reviewed::Refuse("no review comments: open /diff and press c on a line".into());
        }
        match op {
            ReviewOp::List => Reviewed::Page(
                format!("{} review comment(s)", comments.len()),
                comments
                    .iter()
                    .map(|c| format!("{}: {}", c.place(), c.text))
                    .collect(),
            ),
            ReviewOp::Clear => {
                self.comments.remove(&session_id);
                Reviewed::Flash("review comments dropped".into())
            }
            ReviewOp::Send => {
                self.comments.remove(&session_id);
                Reviewed::Prompt(session_id, review_prompt(&comments))
            }
        }
    }
}

/// A review comment on a line (or a whole file) of a session's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub path: String,
    pub line: Option<u32>,
    pub text: String,
}

impl ReviewComment {
    /// `path:line` (or `path` for the whole file).
    pub fn place(&self) -> String {
        match self.line {
            Some(line) => format!("{}:{line}", self.path),
            None => self.path.clone(),
        }
    }
}

/// The one prompt `/review send` gives the agent: each comment with its file and line.
pub fn review_prompt(comments: &[ReviewComment]) -> String {
    let mut text = String::from(
        "Review comments on your changes. Address each one, then say what you changed:\n",
    );
    for comment in comments {
        text.push_str(&format!("- {}: {}\n", comment.place(), comment.text));
    }
    text
}
