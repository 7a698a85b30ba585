//! Where a session works and how it is removed: placing it in a new or existing
//! worktree (undone if the session cannot start), and deleting or pruning sessions with
//! their worktrees and branches.

use super::*;
use crate::audit::{Audit, AuditEvent};
use crate::store::GitLeftovers;

impl Lifecycle {
    /// Decides where the session runs and makes its worktree.
    pub(in crate::sessions) async fn place(
        &self,
        id: &str,
        params: &CreateSessionParams,
    ) -> Result<Placement> {
        let kiln = self.ledger.kiln();
        if params.in_place {
            return Ok(Placement::default());
        }
        let repo =
            git::toplevel(kiln.root())
                .await
                .ok_or_else(|| LifecycleError::NoRepository {
                    root: kiln.root().to_path_buf(),
                })?;
        let spec = params
            .worktree
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());

        if let Some(path) = spec.filter(|s| Path::new(s).is_absolute()) {
            let path = Path::new(path)
                .canonicalize()
                .map_err(|source| LifecycleError::Io {
                    doing: format!("worktree {path}"),
                    source,
                })?;
            let known = git::worktrees(&repo).await?;
            let found = known
                .into_iter()
                .find(|w| w.path.canonicalize().is_ok_and(|p| p == path))
                .ok_or_else(|| LifecycleError::NotAWorktree {
                    path: path.clone(),
                    repo: repo.clone(),
                })?;
            let base_branch = base_of(&repo, found.branch.as_deref()).await;
            return Ok(Placement {
                path: Some(path),
                branch: found.branch,
                created: None,
                base_branch,
            });
        }

        let (branch, new_branch) = match spec {
            Some(branch) => (branch.to_string(), !git::branch_exists(&repo, branch).await),
            None => (
                free_default_branch(&repo, &kiln.worktrees_dir(), id).await,
                true,
            ),
        };
        let path = kiln.worktrees_dir().join(&branch);
        if path.exists() {
            return Err(LifecycleError::WorktreeExists { path });
        }
        if new_branch {
            git::check_branch_name(&repo, &branch).await?;
            git::add_new_branch(&repo, &path, &branch).await?;
        } else {
            git::add_existing_branch(&repo, &path, &branch).await?;
        }
        Ok(Placement {
            base_branch: base_of(&repo, Some(&branch)).await,
            path: Some(path.clone()),
            branch: Some(branch.clone()),
            created: Some(Created {
                path,
                branch: new_branch.then_some(branch),
            }),
        })
    }

    /// Stops the session if needed, then removes it (and, when asked, its worktree and
    /// branch). Uncommitted changes and unmerged commits are kept unless forced.
    #[tracing::instrument(name = "session", skip_all, fields(session = %id))]
    pub async fn delete(&self, id: &str, options: &RemoveOptions) -> Result<DeleteOutcome> {
        let session = self.managed(id)?;
        let repo = self.ledger.kiln().root().to_path_buf();
        let remove_worktree = options.remove_worktree || options.delete_branch;
        let mut outcome = DeleteOutcome {
            session_id: id.to_string(),
            ..DeleteOutcome::default()
        };
        // Check everything before changing anything.
        let worktree = session.worktree.as_ref().map(PathBuf::from);
        if remove_worktree {
            self.check_removal(&session, worktree.as_deref(), &repo, options)
                .await?;
        }
        self.runner.stop_actor(id, false).await;
        // The records first: the worktree and branch go only once the session is gone,
        // so a failure leaves the session whole and a retry can finish.
        self.ledger
            .withdraw_open(id, &wording::withdrawn(wording::DELETED))
            .await?;
        let git = GitLeftovers {
            worktree: worktree
                .as_ref()
                .filter(|_| remove_worktree)
                .map(|p| p.display().to_string()),
            branch: session.branch.clone().filter(|_| options.delete_branch),
            force: options.force,
        };
        self.ledger.remove_managed(id, &git).await?;
        self.runner.keep_given(id, None);
        let dir = self.ledger.kiln().sessions_dir();
        let _ = std::fs::remove_file(MarkdownLog::path_for(&dir, id));
        let _ = std::fs::remove_file(dir.join(format!("{id}.stderr.log")));
        // The sandbox's private home goes with the session; the audit log stays unless
        // asked.
        let _ = std::fs::remove_dir_all(self.ledger.kiln().state_dir().join("sandboxes").join(id));
        let audit = Audit::new(self.ledger.kiln());
        if options.audit {
            audit.remove(id).map_err(|source| LifecycleError::Io {
                doing: format!("cannot remove the audit log of {id}"),
                source,
            })?;
        } else {
            audit.record(
                id,
                AuditEvent::End {
                    reason: "session deleted".into(),
                },
            );
        }
        let removed = self.remove_from_git(&repo, &git).await;
        if let Err(e) = self.ledger.git_removed(id).await {
            tracing::warn!("cannot note that the worktree and branch are dealt with: {e}");
        }
        (outcome.worktree_removed, outcome.branch_deleted) =
            removed.map_err(|(what, source)| LifecycleError::PartlyDeleted {
                id: id.into(),
                what,
                source,
            })?;
        Ok(outcome)
    }

    /// Refuses to remove a worktree another session works in, one crucible did not
    /// make, uncommitted changes or unmerged commits (unless forced).
    async fn check_removal(
        &self,
        session: &Session,
        worktree: Option<&Path>,
        repo: &Path,
        options: &RemoveOptions,
    ) -> Result<()> {
        if let Some(path) = worktree {
            let sharing: Vec<String> = self
                .ledger
                .list_sessions()
                .into_iter()
                .filter(|s| s.id != session.id && s.worktree == session.worktree)
                .map(|s| s.id)
                .collect();
            if !sharing.is_empty() {
                return Err(LifecycleError::WorktreeShared {
                    path: path.to_path_buf(),
                    sessions: sharing.join(", "),
                });
            }
            if !session.worktree_owned {
                return Err(LifecycleError::NotOurWorktree {
                    path: path.to_path_buf(),
                });
            }
            if path.exists() && !options.force {
                let changes = git::uncommitted(path).await?;
                if !changes.is_empty() {
                    return Err(LifecycleError::Uncommitted {
                        path: path.to_path_buf(),
                        count: changes.len(),
                        named: changes
                            .iter()
                            .take(3)
                            .map(|c| c.trim())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
            if options.delete_branch
                && !options.force
                && let Some(branch) = &session.branch
                && !git::is_merged(repo, branch).await
            {
                return Err(LifecycleError::Unmerged {
                    branch: branch.clone(),
                });
            }
        }
        Ok(())
    }

    /// Removes what a deletion still has to remove from git, under the git lock: the
    /// worktree (when it is still there), then the branch. Whether each went, or what
    /// could not be removed and why.
    async fn remove_from_git(
        &self,
        repo: &Path,
        git: &GitLeftovers,
    ) -> std::result::Result<(bool, bool), (String, git::GitError)> {
        let _git = self.git.lock().await;
        let mut removed = (false, false);
        if let Some(path) = git.worktree.as_deref().map(Path::new)
            && path.exists()
        {
            git::remove_worktree(repo, path, git.force)
                .await
                .map_err(|e| (format!("its worktree {}", path.display()), e))?;
            removed.0 = true;
        }
        if let Some(branch) = &git.branch {
            git::delete_branch(repo, branch, git.force)
                .await
                .map_err(|e| (format!("its branch {branch}"), e))?;
            removed.1 = true;
        }
        Ok(removed)
    }

    /// Finishes deletions cut short (a kill -9) after their records went: their worktree
    /// and branch are removed now, as the deletion asked.
    pub(in crate::sessions) async fn finish_deletions(&self) {
        let leftovers = match self.ledger.git_leftovers().await {
            Ok(leftovers) => leftovers,
            Err(e) => {
                tracing::warn!("cannot read the deletions cut short: {e}");
                return;
            }
        };
        let repo = self.ledger.kiln().root().to_path_buf();
        for (id, mut git) in leftovers {
            // Another kiln's deletion (team mode shares the records): that daemon
            // finishes it.
            if git
                .worktree
                .as_deref()
                .is_some_and(|w| !Path::new(w).starts_with(&repo))
            {
                continue;
            }
            // A branch already gone (the kill came after it) is done.
            if let Some(branch) = &git.branch
                && !git::branch_exists(&repo, branch).await
            {
                git.branch = None;
            }
            if let Err((what, e)) = self.remove_from_git(&repo, &git).await {
                tracing::warn!(session = %id, "a deleted session's {what} could not be removed: {e}");
            }
            tracing::info!(session = %id, "finished a deletion cut short");
            if let Err(e) = self.ledger.git_removed(&id).await {
                tracing::warn!(session = %id, "{e}");
            }
        }
    }

    /// Deletes every session that is complete or stopped; ones that refuse (uncommitted
    /// work, say) are skipped with the reason.
    pub async fn prune(&self, options: &RemoveOptions) -> Result<PruneResult> {
        let mut result = PruneResult::default();
        for session in self.ledger.list_sessions() {
            if !matches!(
                session.state,
                Some(SessionState::Complete | SessionState::Cancelled | SessionState::Stopped)
            ) {
                continue;
            }
            match self.delete(&session.id, options).await {
                Ok(outcome) => result.deleted.push(outcome),
                Err(e) => result.skipped.push(Skipped {
                    session_id: session.id,
                    reason: e.to_string(),
                }),
            }
        }
        if options.audit {
            // The logs of sessions deleted earlier.
            let audit = Audit::new(self.ledger.kiln());
            for id in audit.sessions() {
                if self.ledger.get_session(&id).is_err() && audit.remove(&id).is_ok() {
                    result.audit_removed.push(id);
                }
            }
        }
        Ok(result)
    }
}

#[derive(Default)]
pub(in crate::sessions) struct Placement {
    /// None: in place, in the kiln itself.
    pub(in crate::sessions) path: Option<PathBuf>,
    pub(in crate::sessions) branch: Option<String>,
    /// What this creation made, to undo on failure.
    pub(in crate::sessions) created: Option<Created>,
    /// The kiln's branch when the session was placed (what it is diffed against and
    /// merged into); none in place or when the kiln's HEAD is detached.
    pub(in crate::sessions) base_branch: Option<String>,
}

/// The branch checked out in the kiln, unless it is the session's own.
async fn base_of(repo: &Path, branch: Option<&str>) -> Option<String> {
    let base = git::current_branch(repo).await.ok().flatten()?;
    (Some(base.as_str()) != branch).then_some(base)
}

pub(in crate::sessions) struct Created {
    path: PathBuf,
    /// Set when the branch was new.
    branch: Option<String>,
}

impl Placement {
    pub(in crate::sessions) async fn undo(&self, repo: &Path) {
        let Some(created) = &self.created else { return };
        if let Err(e) = git::remove_worktree(repo, &created.path, true).await {
            tracing::warn!(path = %created.path.display(), "cannot remove the worktree: {e}");
        }
        if let Some(branch) = &created.branch
            && let Err(e) = git::delete_branch(repo, branch, true).await
        {
            tracing::warn!(branch, "cannot delete the branch: {e}");
        }
    }
}

/// `cru/<6 letters>`: short, unique enough within a kiln, and visibly crucible's.
pub(in crate::sessions) fn default_branch(id: &str, length: usize) -> String {
    let tail: String = id
        .chars()
        .rev()
        .take(length)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("cru/{}", tail.to_lowercase())
}

/// `cru/` and the end of the session's id: six characters, or more when a branch or
/// worktree of that name is already there (two ids can end alike in a large fleet).
async fn free_default_branch(repo: &Path, worktrees: &Path, id: &str) -> String {
    for length in [6, 10] {
        let branch = default_branch(id, length);
        if !worktrees.join(&branch).exists() && !git::branch_exists(repo, &branch).await {
            return branch;
        }
    }
    default_branch(id, id.len())
}
