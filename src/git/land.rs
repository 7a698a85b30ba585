//! Landing a session's work: committing what is in the session's worktree, seeing whether
//! its branch would merge cleanly, and merging it into the branch checked out in the kiln.

use std::path::Path;

use super::{GitError, Result, failure, git, git_env, git_output};
use crate::protocol::MergeStrategy;

/// The branch checked out in `repo`, without `refs/heads/`; `None` when HEAD is detached.
pub async fn current_branch(repo: &Path) -> Result<Option<String>> {
    let args = ["symbolic-ref", "--quiet", "HEAD"];
    let output = git_output(repo, &args, &[]).await?;
    match output.status.code() {
        Some(0) => {
            let name = String::from_utf8_lossy(&output.stdout).trim().to_string();
            Ok(Some(
                name.strip_prefix("refs/heads/")
                    .map_or(name.clone(), str::to_string),
            ))
        }
        Some(1) => Ok(None),
        _ => Err(failure(&args, &output)),
    }
}

/// The best common ancestor of commits `a` and `b`.
pub async fn merge_base(repo: &Path, a: &str, b: &str) -> Result<String> {
    let args = ["merge-base", "--end-of-options", a, b];
    let output = git_output(repo, &args, &[]).await?;
    match output.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&output.stdout).trim().to_string()),
        Some(1) if output.stderr.is_empty() => Err(GitError::Refused(format!(
            "{a} and {b} have no commit in common"
        ))),
        _ => Err(failure(&args, &output)),
    }
}

/// The commit checked out in `dir`.
pub async fn head(dir: &Path) -> Result<String> {
    git(dir, &["rev-parse", "--verify", "HEAD^{commit}"]).await
}

/// Stages everything in the session's worktree (`git add -A`, so untracked files too,
/// except ignored ones) and commits it with `message`. Returns the new commit, or `None`
/// when there was nothing to commit.
///
/// Works where git has no identity configured: a missing `user.name` or `user.email` is
/// given as `crucible` / `crucible@localhost` for this commit only (see [`identity`]).
pub async fn commit_all(worktree: &Path, message: &str) -> Result<Option<String>> {
    git(worktree, &["add", "-A"]).await?;
    if !staged(worktree).await? {
        return Ok(None);
    }
    committing(worktree, &["commit", "--quiet", "-m", message]).await?;
    head(worktree).await.map(Some)
}

/// The files that would conflict if `branch` were merged into `into`, worked out in the
/// object store alone (`git merge-tree`), so no worktree or checkout is touched.
pub async fn conflicts(repo: &Path, into: &str, branch: &str) -> Result<Vec<String>> {
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        into,
        branch,
    ];
    let output = git_output(repo, &args, &[]).await?;
    match output.status.code() {
        Some(0) => Ok(Vec::new()),
        // The merged tree's id, then the conflicted files.
        Some(1) => Ok(nul_list(&String::from_utf8_lossy(&output.stdout))
            .into_iter()
            .skip(1)
            .collect()),
        _ => Err(failure(&args, &output)),
    }
}

/// Lands `branch` (the session's, checked out in the session's `worktree`) on the branch
/// checked out in the kiln's checkout `repo`, and returns the kiln's new HEAD.
///
/// Nothing is changed when landing is refused: when the kiln's HEAD is detached or it is
/// mid-merge/rebase, when the branch has nothing to land, when it would conflict (the
/// files are named), or when the kiln's checkout has uncommitted changes to files the
/// branch changes (named too). Merge and squash also need nothing staged in the kiln.
///
/// - [`MergeStrategy::Merge`]: a merge commit with `message` (`git merge --no-ff`).
/// - [`MergeStrategy::Squash`]: one commit with `message` holding all of the branch's
///   changes.
/// - [`MergeStrategy::Rebase`]: the branch is rebased onto the kiln's branch in the
///   session's worktree (which must have no uncommitted changes to tracked files; a
///   rebase that stops on a conflict is aborted), then the kiln fast-forwards to it.
///
/// Commits made here get the same identity fallback as [`commit_all`].
pub async fn merge(
    repo: &Path,
    branch: &str,
    worktree: &Path,
    strategy: MergeStrategy,
    message: &str,
) -> Result<String> {
    let into = landing_target(repo, branch, strategy).await?;
    let refused = |s: String| Err(GitError::Refused(s));
    match strategy {
        MergeStrategy::Merge => {
            let args = ["merge", "--no-ff", "--no-edit", "-m", message, branch];
            if let Err(e) = committing(repo, &args).await {
                if in_progress(repo).await?.is_some() {
                    let _ = git(repo, &["merge", "--abort"]).await;
                }
                return Err(e);
            }
        }
        MergeStrategy::Squash => {
            let landed = match git(repo, &["merge", "--squash", branch]).await {
                Ok(_) => committing(repo, &["commit", "--quiet", "-m", message]).await,
                Err(e) => Err(e),
            };
            if let Err(e) = landed {
                // Nothing was staged before, so this only takes back the squash.
                let _ = git(repo, &["reset", "--merge"]).await;
                return Err(e);
            }
        }
        MergeStrategy::Rebase => {
            if current_branch(worktree).await?.as_deref() != Some(branch) {
                return refused(format!(
                    "the session's worktree {} is not on {branch}",
                    worktree.display()
                ));
            }
            let status = git(worktree, &["status", "--porcelain", "--untracked-files=no"]).await?;
            if !status.is_empty() {
                return refused(
                    "the session's worktree has uncommitted changes; commit them before \
                     landing it by rebase"
                        .into(),
                );
            }
            if let Err(e) = committing(worktree, &["rebase", "--quiet", &into]).await {
                let unmerged = git_env(
                    worktree,
                    &["diff", "--name-only", "--diff-filter=U", "-z"],
                    &[],
                )
                .await
                .map(|out| nul_list(&out))
                .unwrap_or_default();
                if in_progress(worktree).await?.is_some() {
                    let _ = git(worktree, &["rebase", "--abort"]).await;
                }
                if unmerged.is_empty() {
                    return Err(e);
                }
                return refused(format!(
                    "rebasing {branch} onto {into} conflicts in {}; resolve that in the \
                     session's worktree first",
                    listing(&unmerged)
                ));
            }
            git(repo, &["merge", "--ff-only", "--quiet", branch]).await?;
        }
    }
    head(repo).await
}

/// The branch checked out in the kiln that `branch` would land on, once every refusal
/// is ruled out: a detached HEAD, the branch itself, no such branch, a merge or rebase
/// in progress, nothing to land, a conflict, uncommitted or staged changes in the way.
async fn landing_target(repo: &Path, branch: &str, strategy: MergeStrategy) -> Result<String> {
    let refused = |s: String| Err(GitError::Refused(s));
    let Some(into) = current_branch(repo).await? else {
        return refused(
            "the kiln's checkout is not on a branch (its HEAD is detached); check out the \
             branch to land on first"
                .into(),
        );
    };
    if into == branch {
        return refused(format!(
            "{branch} is the branch checked out in the kiln itself"
        ));
    }
    if !super::branch_exists(repo, branch).await {
        return refused(format!("there is no branch {branch}"));
    }
    if let Some(what) = in_progress(repo).await? {
        return refused(format!(
            "the kiln's checkout is in the middle of a {what}; finish or abort it first"
        ));
    }
    if super::is_merged(repo, branch).await {
        return refused(format!(
            "{branch} has nothing to land: it is all in {into} already"
        ));
    }
    let conflicted = conflicts(repo, &into, branch).await?;
    if !conflicted.is_empty() {
        return refused(format!(
            "{branch} conflicts with {into} in {}; resolve that in the session's worktree first",
            listing(&conflicted)
        ));
    }
    let range = format!("{into}...{branch}");
    let changed = nul_list(
        &git_env(
            repo,
            &["diff", "--name-only", "--no-renames", "-z", &range, "--"],
            &[],
        )
        .await?,
    );
    let dirty = dirty_paths(repo).await?;
    let in_the_way: Vec<String> = changed
        .into_iter()
        .filter(|p| {
            dirty
                .iter()
                .any(|d| d == p || (d.ends_with('/') && p.starts_with(d.as_str())))
        })
        .collect();
    if !in_the_way.is_empty() {
        return refused(format!(
            "the kiln's checkout has uncommitted changes to {}, which landing {branch} would \
             change; commit or stash them first",
            listing(&in_the_way)
        ));
    }
    if strategy != MergeStrategy::Rebase && staged(repo).await? {
        return refused(format!(
            "the kiln's checkout has staged changes; commit or unstage them before landing \
             {branch}"
        ));
    }
    Ok(into)
}

/// Whether `repo` has any remote.
pub async fn has_remote(repo: &Path) -> bool {
    git(repo, &["remote"])
        .await
        .is_ok_and(|out| !out.trim().is_empty())
}

/// `-c` options naming a committer where the user has configured none: `user.name`
/// `crucible` and `user.email` `crucible@localhost`, each only when it is unset, so
/// commits work on a machine where git was never set up.
async fn identity(dir: &Path) -> Vec<&'static str> {
    let mut args = Vec::new();
    for (key, fallback) in [
        ("user.name", "user.name=crucible"),
        ("user.email", "user.email=crucible@localhost"),
    ] {
        if git(dir, &["config", key])
            .await
            .map_or(true, |v| v.is_empty())
        {
            args.extend(["-c", fallback]);
        }
    }
    args
}

/// Runs a git command that makes commits, with [`identity`]'s fallback.
async fn committing(dir: &Path, args: &[&str]) -> Result<String> {
    let mut all = identity(dir).await;
    all.extend_from_slice(args);
    git(dir, &all).await
}

/// Whether the index of `dir` differs from its HEAD.
async fn staged(dir: &Path) -> Result<bool> {
    let args = ["diff", "--cached", "--quiet"];
    let output = git_output(dir, &args, &[]).await?;
    match output.status.code() {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(failure(&args, &output)),
    }
}

/// The operation `dir` is in the middle of, if any (merge, rebase, cherry-pick, revert).
async fn in_progress(dir: &Path) -> Result<Option<&'static str>> {
    let git_dir = std::path::PathBuf::from(git(dir, &["rev-parse", "--absolute-git-dir"]).await?);
    Ok([
        ("MERGE_HEAD", "merge"),
        ("rebase-merge", "rebase"),
        ("rebase-apply", "rebase"),
        ("CHERRY_PICK_HEAD", "cherry-pick"),
        ("REVERT_HEAD", "revert"),
    ]
    .into_iter()
    .find(|(file, _)| git_dir.join(file).exists())
    .map(|(_, what)| what))
}

/// The paths `git status` reports changed in `dir` (both names of a rename; an untracked
/// folder as `dir/`).
async fn dirty_paths(dir: &Path) -> Result<Vec<String>> {
    let out = git_env(dir, &["status", "--porcelain", "-z"], &[]).await?;
    let mut paths = Vec::new();
    let mut fields = out.split('\0');
    while let Some(entry) = fields.next() {
        let (Some(xy), Some(path)) = (entry.get(..2), entry.get(3..)) else {
            continue;
        };
        paths.push(path.to_string());
        if xy.contains(['R', 'C'])
            && let Some(from) = fields.next()
        {
            paths.push(from.to_string());
        }
    }
    Ok(paths)
}

fn nul_list(text: &str) -> Vec<String> {
    text.split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Names files in a message, at most ten of them.
fn listing(files: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    text
}

#[cfg(test)]
#[path = "land_tests.rs"]
mod tests;
