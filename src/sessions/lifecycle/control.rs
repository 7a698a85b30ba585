//! A session's controls besides prompts: restarting its agent, renaming it, and forking
//! it onto a new branch with its context.

use super::*;
use crate::protocol::ForkParams;

/// The longest session name.
const MAX_NAME: usize = 80;

impl Lifecycle {
    /// Ends the agent if it runs and starts it again, resuming its own session where
    /// the agent can load one (otherwise a fresh one, seeded with the context stack).
    pub async fn restart(self: &Arc<Self>, id: &str) -> Result<Session> {
        let _one_at_a_time = self.runner.one_start_at_a_time().await;
        let session = self.managed(id)?;
        if session.state == Some(SessionState::Creating) {
            return Err(LifecycleError::StillCreating { id: id.into() });
        }
        // Its environment goes with it and is made again.
        self.runner.stop_actor(id, false).await;
        let session = self.managed(id)?;
        if let Err(why) = self
            .runner
            .start_again(&session, wording::RESTARTING, SessionState::Stopped, None)
            .await?
        {
            let mut failed = session;
            failed.state = Some(SessionState::Error);
            failed.state_reason = Some(format!("the restart failed: {why}"));
            failed.updated_at = Some(now_rfc3339());
            self.ledger.save_managed(&failed).await?;
            return Err(RunError::Spawn(why).into());
        }
        Ok(self.ledger.get_session(id)?)
    }

    /// Sends the turn that was cut short (by a restart, or its agent's end) again: to the
    /// agent if it runs, else to a new one started for it. True when it had to queue.
    pub async fn resend(self: &Arc<Self>, id: &str) -> Result<bool> {
        let session = self.managed(id)?;
        if self.runner.actor(id).is_none() && session.turn_prompt.is_some() {
            // Its agent is gone: a new one takes the session, and the cut turn with it.
            self.restart(id).await?;
        }
        let session = self.managed(id)?;
        self.runner
            .tell(id, |ack| Command::Resend { ack })
            .await?
            .ok_or_else(|| LifecycleError::NothingToResend {
                id: session.id.clone(),
                state: session
                    .state
                    .map_or("not run by crucible", SessionState::as_str),
            })
    }

    /// Gives the session a name of the human's choosing (lists and the status bar show
    /// it; `cru session` commands accept it).
    pub async fn rename(&self, id: &str, name: &str) -> Result<Session> {
        let name = name.trim();
        if name.is_empty() {
            return Err(LifecycleError::NoName);
        }
        if name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
            return Err(LifecycleError::BadName { most: MAX_NAME });
        }
        let mut session = self.managed(id)?;
        session.display_name = name.to_string();
        session.updated_at = Some(now_rfc3339());
        Ok(self.ledger.save_managed(&session).await?)
    }

    /// A new session of the same agent, driver and read manifest on a new branch made
    /// from this session's HEAD (its commits; uncommitted changes stay behind), with a
    /// copy of its context stack.
    pub async fn fork(self: &Arc<Self>, params: ForkParams) -> Result<Session> {
        let source = self.managed(&params.session_id)?;
        let (Some(worktree), Some(branch)) = (&source.worktree, &source.branch) else {
            return Err(LifecycleError::NothingToFork { id: source.id });
        };
        let repo = self.ledger.kiln().root().to_path_buf();
        let new_branch = {
            let _git = self.git.lock().await;
            let head = git::head(Path::new(worktree)).await?;
            let name = match params.worktree.as_deref().map(str::trim) {
                Some(name) if !name.is_empty() => {
                    if git::branch_exists(&repo, name).await {
                        return Err(LifecycleError::BranchExists { name: name.into() });
                    }
                    name.to_string()
                }
                _ => free_branch(&repo, &format!("{branch}-fork")).await,
            };
            git::check_branch_name(&repo, &name).await?;
            git::create_branch(&repo, &name, &head).await?;
            name
        };
        let create = CreateSessionParams {
            kiln: None,
            agent: source.agent_name.clone(),
            worktree: Some(new_branch.clone()),
            in_place: false,
            task: params.task.clone(),
            driver: source.driver.clone().unwrap_or_default().options(),
            allow_read: source.security.read_manifest.clone().unwrap_or_default(),
            channel: None,
        };
        let given = self.runner.given(&source.id);
        let forked = self
            .create_from(create, Some(&source.id), given, None)
            .await;
        if forked.is_err() {
            let _git = self.git.lock().await;
            let _ = git::delete_branch(&repo, &new_branch, true).await;
        }
        forked
    }
}

/// `base`, or `base-2`, `base-3`… : the first that is not a branch yet.
async fn free_branch(repo: &Path, base: &str) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while git::branch_exists(repo, &name).await {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// A task as a session may hold it: one over [`limits::TASK_BYTES`] is refused (nothing
/// is made), or, for a hand-off's brief, cut to it with the cut marked.
pub(in crate::sessions) fn bounded_task(task: String, handed: bool) -> Result<String> {
    if task.len() <= limits::TASK_BYTES {
        return Ok(task);
    }
    if handed {
        return Ok(crate::text::cap(task, limits::TASK_BYTES));
    }
    Err(LifecycleError::TaskTooLong {
        kib: task.len().div_ceil(1024),
        most_kib: limits::TASK_BYTES / 1024,
    })
}
