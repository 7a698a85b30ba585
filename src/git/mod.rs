//! The git worktrees sessions run in, and reviewing and landing their work (`diff.rs`,
//! `land.rs`), through the `git` command (the one the user has, with their configuration
//! and hooks).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::process::Command;

mod bundle;
mod diff;
/// Real repositories for tests: a kiln, and session worktrees as the product makes them.
#[cfg(test)]
pub(crate) use diff::tests as test_repos;
mod land;
mod version;

pub use bundle::{bundle_branch, fetch_bundle};
pub use diff::{changed_lines, diff, overlaps};
pub use land::{commit_all, current_branch, has_remote, head, merge, merge_base};
pub use version::{MERGE_NEEDS, merges, version_text};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{0}")]
    Refused(String),
    #[error("git {args}: {message}")]
    Failed { args: String, message: String },
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
}

pub type Result<T> = std::result::Result<T, GitError>;

/// A git failure as the domain's error: a refusal (a merge that would conflict) is a
/// conflict, a failed command is a git error naming the command and its stderr, and git
/// that cannot be run is a missing tool.
impl From<GitError> for crate::ledger::LedgerError {
    fn from(e: GitError) -> Self {
        match e {
            GitError::Refused(why) => Self::Conflict(why),
            GitError::Failed { args, message } => Self::Git {
                command: args,
                message,
            },
            GitError::Spawn(source) => Self::ToolNotRun {
                program: "git".into(),
                source,
            },
        }
    }
}

/// Runs git in `dir` and returns its trimmed stdout, or its stderr as the error.
async fn git(dir: &Path, args: &[&str]) -> Result<String> {
    git_env(dir, args, &[])
        .await
        .map(|out| out.trim_end().to_string())
}

/// Runs git in `dir` with extra environment variables and returns its stdout as it is
/// (untrimmed, for output whose trailing whitespace matters), or its stderr as the error.
async fn git_env(dir: &Path, args: &[&str], envs: &[(&str, &OsStr)]) -> Result<String> {
    let output = git_output(dir, args, envs).await?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(failure(args, &output))
    }
}

/// Runs git in `dir` with extra environment variables, whatever its exit status; for the
/// commands whose non-zero exits are answers rather than failures.
async fn git_output(dir: &Path, args: &[&str], envs: &[(&str, &OsStr)]) -> Result<Output> {
    crate::sys::user_umask(&mut Command::new("git"))
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(envs.iter().copied())
        .output()
        .await
        .map_err(GitError::Spawn)
}

/// The error for a git run that failed: its stderr without git's `fatal:`/`error:`
/// prefixes, or its exit status when it said nothing.
fn failure(args: &[&str], output: &Output) -> GitError {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let message = stderr
        .lines()
        .map(|l| {
            l.trim_start_matches("fatal: ")
                .trim_start_matches("error: ")
        })
        .collect::<Vec<_>>()
        .join("; ");
    GitError::Failed {
        args: args.join(" "),
        message: if message.is_empty() {
            format!("exited with {}", output.status)
        } else {
            message
        },
    }
}

/// The top of the repository containing `dir`, if it is in one.
pub async fn toplevel(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .await
        .ok()
        .map(PathBuf::from)
}

/// The repository's common git folder (where every worktree's commits go), if `dir`
/// is in one.
pub async fn common_dir(dir: &Path) -> Option<PathBuf> {
    let path = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await
    .ok()?;
    std::fs::canonicalize(path).ok()
}

/// One entry of `git worktree list`.
#[derive(Debug, Clone, PartialEq)]
pub struct Worktree {
    pub path: PathBuf,
    /// The branch checked out, without `refs/heads/`; none when detached.
    pub branch: Option<String>,
}

pub async fn worktrees(repo: &Path) -> Result<Vec<Worktree>> {
    let text = git(repo, &["worktree", "list", "--porcelain"]).await?;
    Ok(parse_worktree_list(&text))
}

fn parse_worktree_list(text: &str) -> Vec<Worktree> {
    let mut list = Vec::new();
    let mut current: Option<Worktree> = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            list.extend(current.take());
            current = Some(Worktree {
                path: PathBuf::from(path),
                branch: None,
            });
        } else if let Some(branch) = line.strip_prefix("branch ")
            && let Some(w) = current.as_mut()
        {
            w.branch = Some(branch.trim_start_matches("refs/heads/").to_string());
        }
    }
    list.extend(current);
    list
}

pub async fn branch_exists(repo: &Path, branch: &str) -> bool {
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}^{{commit}}"),
        ],
    )
    .await
    .is_ok()
}

/// Checks a new branch name the way git would, so a bad one fails before anything is made.
pub async fn check_branch_name(repo: &Path, branch: &str) -> Result<()> {
    git(repo, &["check-ref-format", "--branch", branch])
        .await
        .map(|_| ())
        .map_err(|_| GitError::Refused(format!("{branch:?} is not a valid branch name")))
}

/// Adds a worktree at `path` on a new branch from HEAD, its submodules checked out. A
/// repository with no commit yet is refused with what to do (a branch needs a commit to
/// start from).
pub async fn add_new_branch(repo: &Path, path: &Path, branch: &str) -> Result<()> {
    if git(repo, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .await
        .is_err()
    {
        return Err(GitError::Refused(format!(
            "the repository at {} has no commit yet, and a session's branch starts from one: \
             commit something first (`git commit --allow-empty -m start` will do)",
            repo.display()
        )));
    }
    let shown = path.to_string_lossy();
    git(repo, &["worktree", "add", "-b", branch, &shown, "HEAD"]).await?;
    init_submodules(path).await;
    Ok(())
}

/// Checks out the submodules of a new worktree (git leaves them empty folders, where the
/// agent's writes would be in no diff). One that cannot be fetched (a remote that is
/// away) leaves its folder empty and is said in the log; the worktree is kept.
async fn init_submodules(worktree: &Path) {
    if !worktree.join(".gitmodules").is_file() {
        return;
    }
    let args = ["submodule", "update", "--init", "--recursive", "--quiet"];
    if let Err(e) = git(worktree, &args).await {
        tracing::warn!(
            worktree = %worktree.display(),
            "the worktree's submodules could not all be checked out: {e}"
        );
    }
}

/// Adds a worktree at `path` for an existing branch. A branch checked out in another
/// worktree is refused with where it is, before git is asked.
pub async fn add_existing_branch(repo: &Path, path: &Path, branch: &str) -> Result<()> {
    if let Some(other) = worktrees(repo)
        .await?
        .into_iter()
        .find(|w| w.branch.as_deref() == Some(branch))
    {
        return Err(GitError::Refused(format!(
            "branch {branch} is already checked out at {}; pass that path as --worktree to \
             work there, or choose another branch",
            other.path.display()
        )));
    }
    let shown = path.to_string_lossy();
    git(repo, &["worktree", "add", &shown, branch]).await?;
    init_submodules(path).await;
    Ok(())
}

/// Uncommitted changes (tracked or untracked) in a worktree, as `git status --short` lines.
pub async fn uncommitted(worktree: &Path) -> Result<Vec<String>> {
    let text = git(worktree, &["status", "--porcelain"]).await?;
    Ok(text.lines().map(str::to_string).collect())
}

/// Removes a worktree. A git command still running in it (the conflict radar's, one the
/// agent left behind) can recreate a lock file while git empties its folder, and git then
/// gives up with "Directory not empty": that is tried again a few times.
pub async fn remove_worktree(repo: &Path, path: &Path, force: bool) -> Result<()> {
    let path = path.to_string_lossy();
    let mut args = vec!["worktree", "remove"];
    if force {
        args.push("--force");
    }
    args.push(&path);
    let mut attempt = 1;
    loop {
        match git(repo, &args).await {
            Ok(_) => return Ok(()),
            Err(e)
                if attempt < REMOVE_ATTEMPTS && e.to_string().contains("Directory not empty") =>
            {
                tracing::debug!(worktree = %path, attempt, "worktree removal raced a git process: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
                attempt += 1;
                // The folder may be gone already; what is left is git's record of it.
                if !Path::new(path.as_ref()).exists() {
                    git(repo, &["worktree", "prune"]).await?;
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// How often [`remove_worktree`] tries before it reports the failure.
const REMOVE_ATTEMPTS: u64 = 5;

/// Whether every commit of `branch` is already in HEAD.
pub async fn is_merged(repo: &Path, branch: &str) -> bool {
    git(repo, &["merge-base", "--is-ancestor", branch, "HEAD"])
        .await
        .is_ok()
}

/// Deletes a branch; without `force`, git refuses one with commits not merged anywhere.
pub async fn delete_branch(repo: &Path, branch: &str, force: bool) -> Result<()> {
    let flag = if force { "-D" } else { "-d" };
    git(repo, &["branch", flag, branch]).await.map(|_| ())
}

/// Makes `branch` at commit `start` (a fork's branch), without checking it out.
pub async fn create_branch(repo: &Path, branch: &str, start: &str) -> Result<()> {
    git(repo, &["branch", "--no-track", branch, start])
        .await
        .map(|_| ())
}

/// Pushes `branch` to the `origin` remote (or the only remote there is), setting it
/// as the branch's upstream.
pub async fn push_branch(dir: &Path, branch: &str) -> Result<()> {
    let remotes = git(dir, &["remote"]).await?;
    let remote = remotes
        .lines()
        .find(|r| *r == "origin")
        .or_else(|| remotes.lines().next())
        .ok_or_else(|| GitError::Refused("the repository has no remote to push to".into()))?
        .to_string();
    git(dir, &["push", "--set-upstream", &remote, branch])
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_list_parses_branches_and_detached_heads() {
        let text = "worktree /repo\nHEAD abc\nbranch refs/heads/main\n\n\
                    worktree /repo/.crucible/worktrees/cru/x\nHEAD def\nbranch refs/heads/cru/x\n\n\
                    worktree /tmp/detached\nHEAD 123\ndetached\n";
        let list = parse_worktree_list(text);
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].branch.as_deref(), Some("main"));
        assert_eq!(
            list[1].path,
            PathBuf::from("/repo/.crucible/worktrees/cru/x")
        );
        assert_eq!(list[1].branch.as_deref(), Some("cru/x"));
        assert_eq!(list[2].branch, None);
    }
}
