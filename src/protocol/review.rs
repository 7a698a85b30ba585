//! Reviewing and landing a session's work: its diff, commit, merge and pull request, and
//! the conflict radar (sessions whose branches change the same files or lines).

use serde::{Deserialize, Serialize};

use super::diff::{Diff, MergeStrategy, Overlap};

/// `session.diff`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiffParams {
    pub session_id: String,
    /// Lines of context around each change (3).
    #[serde(default)]
    pub context: Option<u32>,
}

/// A session's changes against the point its branch left its base branch, committed
/// and uncommitted (untracked files included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffReply {
    pub session_id: String,
    pub branch: String,
    pub base_branch: String,
    pub diff: Diff,
}

/// `session.commit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitParams {
    pub session_id: String,
    /// The commit message; from the session's task when absent.
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitReply {
    pub session_id: String,
    /// The new commit; absent when there was nothing to commit.
    pub commit: Option<String>,
}

/// `session.merge`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeParams {
    pub session_id: String,
    #[serde(default)]
    pub strategy: MergeStrategy,
    /// The merge (or squash) commit's message; from the session when absent.
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeReply {
    pub session_id: String,
    /// The branch the work landed on.
    pub into: String,
    /// Its new HEAD.
    pub head: String,
}

/// `session.pr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrParams {
    pub session_id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrReply {
    pub session_id: String,
    /// What `gh pr create` printed: the pull request's address.
    pub url: String,
}

/// The conflict radar: every pair of sessions whose branches change the same files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictReport {
    pub pairs: Vec<ConflictPair>,
}

/// Two sessions changing the same files; where `lines` of a file is not empty, the same
/// lines too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictPair {
    pub a: String,
    pub b: String,
    pub files: Vec<Overlap>,
}

impl ConflictPair {
    /// Whether the two change the same lines of some file (not only the same files).
    pub fn same_lines(&self) -> bool {
        self.files.iter().any(|f| !f.lines.is_empty())
    }
}

impl ConflictReport {
    /// The sessions `id` overlaps with, and whether on the same lines.
    pub fn with(&self, id: &str) -> Vec<(&str, bool)> {
        self.pairs
            .iter()
            .filter_map(|p| {
                let other = if p.a == id {
                    &p.b
                } else if p.b == id {
                    &p.a
                } else {
                    return None;
                };
                Some((other.as_str(), p.same_lines()))
            })
            .collect()
    }
}
