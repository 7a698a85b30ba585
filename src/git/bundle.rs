//! A branch carried between clones of one repository as a git bundle (moving a session
//! to another machine's daemon): made from one clone, fetched into another.

use std::path::Path;

use super::{Result, git};

/// Writes `branch` (all of its history) to the bundle file `file`.
pub async fn bundle_branch(repo: &Path, branch: &str, file: &Path) -> Result<()> {
    let file = file.to_string_lossy();
    git(
        repo,
        &["bundle", "create", &file, &format!("refs/heads/{branch}")],
    )
    .await
    .map(|_| ())
}

/// Makes `branch` in `repo` what the bundle `file` has for it (replacing a branch of that
/// name left from an earlier time, as long as no worktree has it checked out).
pub async fn fetch_bundle(repo: &Path, file: &Path, branch: &str) -> Result<()> {
    let file = file.to_string_lossy();
    let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    git(repo, &["fetch", "--quiet", &file, &refspec])
        .await
        .map(|_| ())
}
