//! A session's changes as the review shows them, and how they are landed: the diff of the
//! session's worktree against the commit it started from, the lines two sessions both
//! change, and the ways a session's branch can be merged into the kiln's checkout.

use serde::{Deserialize, Serialize};

/// Every change of a session's worktree against `base`: committed, uncommitted and
/// untracked files alike (ignored files are left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    /// The commit compared against.
    pub base: String,
    /// The changed files, in git's order (by path).
    pub files: Vec<FileDiff>,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    /// The file's path in the worktree, relative to its top; for a deleted file, the path
    /// it had.
    pub path: String,
    /// The path the file had at `base`, when it was renamed.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Whether git found the file binary; a binary file has no hunks.
    pub binary: bool,
    /// How many lines were added and removed.
    pub added: u32,
    pub removed: u32,
    pub hunks: Vec<Hunk>,
}

impl Diff {
    /// The diff as unified text: `--- old` / `+++ new`, then each `@@` hunk's lines.
    pub fn unified(&self) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        for file in &self.files {
            let old = file.old_path.as_deref().unwrap_or(&file.path);
            let _ = writeln!(text, "--- {old}\n+++ {}", file.path);
            for hunk in &file.hunks {
                let _ = writeln!(
                    text,
                    "@@ -{},{} +{},{} @@ {}",
                    hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines, hunk.header
                );
                for line in &hunk.lines {
                    let mark = match line.kind {
                        LineKind::Context => ' ',
                        LineKind::Added => '+',
                        LineKind::Removed => '-',
                    };
                    let _ = writeln!(text, "{mark}{}", line.text);
                }
            }
        }
        text
    }
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// One `@@` hunk of a file's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hunk {
    /// Where the hunk starts at `base` (1-based; 0 for a hunk that only adds to an empty
    /// or new file) and how many lines of it the hunk covers there.
    pub old_start: u32,
    pub old_lines: u32,
    /// The same in the worktree.
    pub new_start: u32,
    pub new_lines: u32,
    /// The text after the second `@@` (usually the enclosing function); may be empty.
    pub header: String,
    pub lines: Vec<DiffLine>,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine {
    pub kind: LineKind,
    /// The line without its leading ` `, `+` or `-` and without its line ending.
    pub text: String,
    /// The line's number at `base` (context and removed lines).
    pub old_no: Option<u32>,
    /// The line's number in the worktree (context and added lines).
    pub new_no: Option<u32>,
}

/// Whether a hunk line is unchanged, added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    Context,
    Added,
    Removed,
}

/// How a session's branch is landed on the branch checked out in the kiln.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeStrategy {
    /// A merge commit, even when a fast-forward would do (`git merge --no-ff`).
    #[default]
    Merge,
    /// All of the branch's changes as one new commit (`git merge --squash`).
    Squash,
    /// The branch's commits replayed onto the kiln's branch, which then fast-forwards.
    Rebase,
}

/// A file two sessions both change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// The file's path at the base the sessions started from.
    pub path: String,
    /// The base-side line ranges both sessions change, 1-based and inclusive; empty when
    /// they change the same file but different lines.
    pub lines: Vec<(u32, u32)>,
}

impl std::fmt::Display for Overlap {
    /// `path lines 3, 7-9`, or `path (different lines)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lines.is_empty() {
            return write!(f, "{} (different lines)", self.path);
        }
        write!(f, "{} lines ", self.path)?;
        for (i, (a, b)) in self.lines.iter().enumerate() {
            let comma = if i == 0 { "" } else { ", " };
            if a == b {
                write!(f, "{comma}{a}")?;
            } else {
                write!(f, "{comma}{a}-{b}")?;
            }
        }
        Ok(())
    }
}
