//! Reviewing and landing a session's work: its diff against the point its branch left
//! the base branch, committing the worktree, merging into the base branch in the kiln,
//! and opening a pull request with `gh`.

use std::path::{Path, PathBuf};

use super::{Landing, LandingError, Result};
use crate::git;
use crate::protocol::{
    CommitReply, DiffReply, MergeParams, MergeReply, MergeStrategy, PrParams, PrReply, Session,
};

/// Lines of context in a diff unless asked otherwise.
const DIFF_CONTEXT: u32 = 3;

/// Where a session's work is.
pub(super) struct Work {
    pub(super) session: Session,
    pub(super) worktree: PathBuf,
    pub(super) branch: String,
    pub(super) base_branch: String,
}

impl Landing {
    /// The session's worktree, branch and base branch; refused for a session that works
    /// in place (it has no branch of its own to review or land).
    pub(super) async fn work(&self, id: &str) -> Result<Work> {
        let session = self.managed(id)?;
        let (Some(worktree), Some(branch)) = (&session.worktree, &session.branch) else {
            return Err(LandingError::InPlace {
                id: id.to_string(),
                doing: "review it",
            });
        };
        let base_branch = match &session.base_branch {
            Some(base) => base.clone(),
            // Sessions made before crucible kept their base: the kiln's branch now.
            None => git::current_branch(self.root())
                .await
                .ok()
                .flatten()
                .filter(|b| b != branch)
                .ok_or_else(|| LandingError::NoBase { id: id.to_string() })?,
        };
        // An ssh session's work is over there: bring it here first, so review and
        // landing see what the agent did.
        if let Some(remote) = self.remote(&session) {
            remote.sync_back(&session.id, Path::new(worktree)).await?;
        }
        Ok(Work {
            worktree: PathBuf::from(worktree),
            branch: branch.clone(),
            base_branch,
            session,
        })
    }

    /// Everything the session changed since its branch left the base branch: commits,
    /// uncommitted changes and new files.
    pub async fn diff(&self, id: &str, context: Option<u32>) -> Result<DiffReply> {
        let work = self.work(id).await?;
        let base = git::merge_base(&work.worktree, &work.base_branch, "HEAD").await?;
        let diff = git::diff(&work.worktree, &base, context.unwrap_or(DIFF_CONTEXT)).await?;
        Ok(DiffReply {
            session_id: id.to_string(),
            branch: work.branch,
            base_branch: work.base_branch,
            diff,
        })
    }

    /// Commits everything in the session's worktree (new files included).
    /// Committing needs no base branch: a session made while the kiln's HEAD was
    /// detached commits on its own branch as any other.
    pub async fn commit(&self, id: &str, message: Option<String>) -> Result<CommitReply> {
        let session = self.managed(id)?;
        let Some(worktree) = session.worktree.as_deref().map(PathBuf::from) else {
            return Err(LandingError::InPlace {
                id: id.to_string(),
                doing: "commit",
            });
        };
        refuse_while_busy(&session, "commit")?;
        let message = message
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| default_message(&session));
        let commit = match self.remote(&session) {
            // The agent's worktree is there: commit there, then bring it back.
            Some(remote) => {
                let before = git::head(&worktree).await?;
                remote.commit(&message).await?;
                remote.sync_back(&session.id, &worktree).await?;
                let after = git::head(&worktree).await?;
                (after != before).then_some(after)
            }
            None => git::commit_all(&worktree, &message).await?,
        };
        Ok(CommitReply {
            session_id: id.to_string(),
            commit,
        })
    }

    /// Merges the session's branch into its base branch, checked out in the kiln.
    /// Refused, with the files named, when it would conflict or when the kiln's checkout
    /// has uncommitted changes to files the merge changes; uncommitted work in the
    /// session's worktree must be committed first.
    pub async fn merge(&self, params: MergeParams) -> Result<MergeReply> {
        let work = self.work(&params.session_id).await?;
        refuse_while_busy(&work.session, "merge")?;
        let repo = self.repo();
        let checked_out = git::current_branch(&repo).await?;
        if checked_out.as_deref() != Some(work.base_branch.as_str()) {
            return Err(LandingError::WrongCheckout {
                checked_out,
                base: work.base_branch,
                id: work.session.id,
            });
        }
        let pending = git::uncommitted(&work.worktree).await?;
        if !pending.is_empty() {
            let named = pending.iter().take(3).map(|c| c.trim());
            return Err(LandingError::Uncommitted {
                count: pending.len(),
                named: Some(named.collect::<Vec<_>>().join(", ")),
            });
        }
        let message = params
            .message
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| match params.strategy {
                MergeStrategy::Squash => default_message(&work.session),
                _ => format!("Merge {} ({})", work.branch, work.session.display_name),
            });
        let _git = self.git.lock().await;
        let head = git::merge(
            &repo,
            &work.branch,
            &work.worktree,
            params.strategy,
            &message,
        )
        .await?;
        Ok(MergeReply {
            session_id: work.session.id,
            into: work.base_branch,
            head,
        })
    }

    /// Pushes the session's branch and opens a pull request against its base branch with
    /// `gh`. Refused clearly when `gh` is not installed or the kiln has no remote.
    pub async fn pr(&self, params: PrParams) -> Result<PrReply> {
        let work = self.work(&params.session_id).await?;
        let repo = self.repo();
        let Some(gh) = crate::sys::on_path("gh") else {
            return Err(LandingError::NoGh);
        };
        if !git::has_remote(&repo).await {
            return Err(LandingError::NoRemote);
        }
        let pending = git::uncommitted(&work.worktree).await?;
        if !pending.is_empty() {
            return Err(LandingError::Uncommitted {
                count: pending.len(),
                named: None,
            });
        }
        git::push_branch(&work.worktree, &work.branch).await?;
        let title = params
            .title
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| default_message(&work.session));
        let body = params.body.unwrap_or_else(|| {
            format!(
                "From crucible session {} ({}).",
                work.session.display_name, work.session.id
            )
        });
        let output = tokio::process::Command::new(gh)
            .args(["pr", "create", "--head", &work.branch, "--base"])
            .arg(&work.base_branch)
            .args(["--title", &title, "--body", &body])
            .current_dir(&work.worktree)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| LandingError::NotRun {
                program: "gh".into(),
                source,
            })?;
        if !output.status.success() {
            return Err(LandingError::GhFailed {
                said: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        let url = String::from_utf8_lossy(&output.stdout)
            .lines()
            .rev()
            .find(|l| l.starts_with("http"))
            .unwrap_or_default()
            .to_string();
        Ok(PrReply {
            session_id: work.session.id,
            url,
        })
    }
}

fn refuse_while_busy(session: &Session, doing: &'static str) -> Result<()> {
    match session.state {
        Some(state) if state.is_busy() => Err(LandingError::Busy {
            id: session.id.clone(),
            state,
            doing,
        }),
        _ => Ok(()),
    }
}

/// A commit message from the session: its task's first line, else its name.
fn default_message(session: &Session) -> String {
    let line = session
        .task
        .as_deref()
        .and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or(&session.display_name);
    crate::text::clip(line, 72)
}
