//! A session's changes as the diff overlay shows them: its rows (file headings, hunks,
//! lines) and the cursor that review comments are written at.

use crate::protocol::{DiffReply, FileStatus, LineKind};

/// What a row of the diff overlay shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A file's heading: its path, status and counts.
    File,
    Hunk,
    Context,
    Added,
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    pub kind: RowKind,
    pub text: String,
    /// The file the row belongs to.
    pub path: String,
    /// The line a comment on this row is about: the new side's number, or the old
    /// side's for a removed line; none for headings.
    pub line: Option<u32>,
}

/// The diff overlay of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffView {
    pub session_id: String,
    /// `branch → base (n files, +a -r)`.
    pub title: String,
    pub rows: Vec<DiffRow>,
    pub cursor: usize,
    /// A comment being written on the cursor's row.
    pub editing: Option<String>,
}

impl DiffView {
    pub fn new(reply: &DiffReply) -> Self {
        let files = &reply.diff.files;
        let (added, removed) = files
            .iter()
            .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        let title = format!(
            "{} → {} · {} file(s), +{added} -{removed}",
            reply.branch,
            reply.base_branch,
            files.len()
        );
        let mut rows = Vec::new();
        for file in files {
            let status = match file.status {
                FileStatus::Added => "new",
                FileStatus::Modified => "changed",
                FileStatus::Deleted => "deleted",
                FileStatus::Renamed => "renamed",
            };
            let from = file
                .old_path
                .as_deref()
                .map(|old| format!(" (from {old})"))
                .unwrap_or_default();
            let counts = if file.binary {
                "binary".to_string()
            } else {
                format!("+{} -{}", file.added, file.removed)
            };
            let heading = |kind, text: String, line| DiffRow {
                kind,
                text,
                path: file.path.clone(),
                line,
            };
            rows.push(heading(
                RowKind::File,
                format!("{}{from} · {status} · {counts}", file.path),
                None,
            ));
            for hunk in &file.hunks {
                rows.push(heading(
                    RowKind::Hunk,
                    format!(
                        "@@ -{},{} +{},{} @@ {}",
                        hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines, hunk.header
                    ),
                    None,
                ));
                for line in &hunk.lines {
                    let (kind, mark, number) = match line.kind {
                        LineKind::Added => (RowKind::Added, '+', line.new_no),
                        LineKind::Removed => (RowKind::Removed, '-', line.old_no),
                        LineKind::Context => (RowKind::Context, ' ', line.new_no),
                    };
                    rows.push(heading(kind, format!("{mark}{}", line.text), number));
                }
            }
        }
        Self {
            session_id: reply.session_id.clone(),
            title,
            rows,
            cursor: 0,
            editing: None,
        }
    }

    /// Moves the cursor by `delta` rows, staying on the diff.
    pub fn move_by(&mut self, delta: isize) {
        let last = self.rows.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(delta).min(last);
    }

    /// What a comment at the cursor is about: its file, and its line unless the cursor
    /// is on a heading.
    pub fn anchor(&self) -> Option<(String, Option<u32>)> {
        self.rows
            .get(self.cursor)
            .map(|row| (row.path.clone(), row.line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Diff, DiffLine, FileDiff, Hunk};

    fn reply() -> DiffReply {
        let line = |kind, text: &str, old_no, new_no| DiffLine {
            kind,
            text: text.into(),
            old_no,
            new_no,
        };
        DiffReply {
            session_id: "s1".into(),
            branch: "feat/x".into(),
            base_branch: "main".into(),
            diff: Diff {
                base: "abc".into(),
                files: vec![FileDiff {
                    path: "src/a.rs".into(),
                    old_path: None,
                    status: FileStatus::Modified,
                    binary: false,
                    added: 1,
                    removed: 1,
                    hunks: vec![Hunk {
                        old_start: 1,
                        old_lines: 2,
                        new_start: 1,
                        new_lines: 2,
                        header: String::new(),
                        lines: vec![
                            line(LineKind::Context, "fn a() {", Some(1), Some(1)),
                            line(LineKind::Removed, "    old()", Some(2), None),
                            line(LineKind::Added, "    new()", None, Some(2)),
                        ],
                    }],
                }],
            },
        }
    }

    #[test]
    fn rows_carry_their_file_and_line_and_the_prompt_names_them() {
        let mut view = DiffView::new(&reply());
        assert_eq!(view.title, "feat/x → main · 1 file(s), +1 -1");
        let kinds: Vec<RowKind> = view.rows.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                RowKind::File,
                RowKind::Hunk,
                RowKind::Context,
                RowKind::Removed,
                RowKind::Added
            ]
        );
        assert_eq!(view.anchor(), Some(("src/a.rs".into(), None)));
        view.move_by(4);
        assert_eq!(view.anchor(), Some(("src/a.rs".into(), Some(2))));
        view.move_by(10);
        assert_eq!(view.cursor, 4, "the cursor stays on the diff");
        view.move_by(-1);
        assert_eq!(view.rows[view.cursor].text, "-    old()");
        let prompt = super::super::review_prompt(&[super::super::ReviewComment {
            path: "src/a.rs".into(),
            line: Some(2),
            text: "name it better".into(),
        }]);
        assert!(prompt.contains("- src/a.rs:2: name it better"), "{prompt}");
    }
}
