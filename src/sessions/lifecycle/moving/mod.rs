//! Moving a session to another daemon of the team (a laptop closing, a bigger machine):
//! its branch travels as a git bundle through the shared database, the other daemon
//! makes the worktree in its own clone, takes the session's record and starts the agent
//! (reloading its own session where the agent can, else a fresh one seeded with the
//! context stack). The transcript and context stack are in the shared database already;
//! open questions stay open, and an answer given there reaches the new agent as a
//! prompt. The agent here stops only once the other daemon has confirmed; until then
//! this daemon writes nothing of the session, and a move that fails or is not answered
//! leaves the session running here as it was.

mod adopt;

use base64::Engine as _;

use super::*;
use crate::protocol::methods::{self as m, Method as _};
use crate::protocol::{AdoptParams, Adopted, DaemonInfo, MoveParams, Moved, Resumed};

impl Lifecycle {
    pub async fn move_to(self: &Arc<Self>, params: MoveParams) -> Result<Moved> {
        let started = std::time::Instant::now();
        let session = self.managed(&params.session_id)?;
        let target = self.target_daemon(&params.to).await?;
        let (Some(worktree), Some(branch)) = (session.worktree.clone(), session.branch.clone())
        else {
            return Err(LifecycleError::NothingToMove { id: session.id });
        };
        if matches!(
            session.state,
            Some(SessionState::Working | SessionState::Starting | SessionState::Creating)
        ) {
            return Err(LifecycleError::MoveBusy {
                id: session.id,
                state: session.state.map_or("busy", SessionState::as_str),
            });
        }
        let repo = git::toplevel(self.ledger.kiln().root())
            .await
            .ok_or(LifecycleError::NotARepository { kiln: "the kiln" })?;
        // From here nothing of the session is written here: the other daemon may own it.
        let held = self.runner.hold(&session.id, true).await;
        let adopted = match self
            .hand_to(&session, &target, Path::new(&worktree), &branch, &repo)
            .await
        {
            Ok(adopted) => adopted,
            Err(e) => {
                if held {
                    self.runner.hold(&session.id, false).await;
                }
                tracing::warn!(session = %session.id, to = %target.id, "the move failed; the session stays: {e}");
                return Err(e);
            }
        };
        let millis = started.elapsed().as_millis() as u64;
        tracing::info!(session = %session.id, to = %target.host, millis, "moved the session");
        // The other daemon has it: the agent here stops, writing nothing more.
        self.runner.stop_actor(&session.id, true).await;
        if session.worktree_owned {
            let _git = self.git.lock().await;
            if let Err(e) = git::remove_worktree(&repo, Path::new(&worktree), true).await {
                tracing::warn!(session = %session.id, "cannot remove the worktree the session left: {e}");
            }
        }
        Ok(Moved {
            session: adopted.session,
            from_host: self.ledger.instance().host.clone(),
            to_host: target.host,
            resumed: adopted.resumed,
            carried: adopted.carried,
            withdrawn: adopted.withdrawn,
            millis,
        })
    }

    /// The live daemon of the team `to` names: its instance id (or a prefix of it), its
    /// host, or its kiln's folder.
    async fn target_daemon(&self, to: &str) -> Result<DaemonInfo> {
        let to = to.trim();
        let me = self.ledger.instance();
        if !self.ledger.in_team() {
            return Err(LifecycleError::NoTeam);
        }
        let daemons = self.ledger.daemons().await;
        let named: Vec<DaemonInfo> = daemons
            .into_iter()
            .filter(|d| d.taken_by.is_none())
            .filter(|d| {
                d.id == to
                    || (to.len() >= 4 && d.id.starts_with(to))
                    || d.host == to
                    || d.kiln == to
            })
            .collect();
        match named.as_slice() {
            [one] if one.live => Ok(one.clone()),
            [one] => Err(LifecycleError::DaemonNotLive {
                host: one.host.clone(),
                kiln: one.kiln.clone(),
            }),
            [] if to == me.id || to == me.host || to == me.kiln => {
                Err(LifecycleError::MoveHere { to: to.into() })
            }
            [] => Err(LifecycleError::NoSuchDaemon { to: to.into() }),
            many => Err(LifecycleError::ManyDaemons {
                to: to.into(),
                count: many.len(),
                ids: many
                    .iter()
                    .map(|d| d.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Commits what is not committed, bundles the branch and has `target` take the
    /// session over; its answer.
    async fn hand_to(
        &self,
        session: &Session,
        target: &DaemonInfo,
        worktree: &Path,
        branch: &str,
        repo: &Path,
    ) -> Result<Adopted> {
        let file = self
            .ledger
            .kiln()
            .state_dir()
            .join(format!("move-{}.bundle", session.id));
        let bundle = {
            let _git = self.git.lock().await;
            let message = format!("crucible: work in progress, moved to {}", target.host);
            git::commit_all(worktree, &message).await?;
            git::bundle_branch(repo, branch, &file).await?;
            let bytes = std::fs::read(&file);
            let _ = std::fs::remove_file(&file);
            bytes.map_err(|source| LifecycleError::Io {
                doing: format!("read the bundle {}", file.display()),
                source,
            })?
        };
        let params = AdoptParams {
            session_id: session.id.clone(),
            from: self.ledger.instance().id.clone(),
            branch: branch.to_string(),
            bundle: base64::engine::general_purpose::STANDARD.encode(bundle),
        };
        let params = serde_json::to_value(&params).map_err(LifecycleError::Encode)?;
        let what = format!("moving session {} goes to", session.id);
        let answer = self
            .ledger
            .forward_to(&target.id, &what, m::SessionAdopt::NAME, params)
            .await
            .map_err(|(code, message)| LifecycleError::RefusedThere { code, message })?;
        serde_json::from_value(answer).map_err(LifecycleError::UnreadableAnswer)
    }
}
