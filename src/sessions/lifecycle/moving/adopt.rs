//! The daemon a session moves to: it fetches the branch from the bundle into its own
//! clone, makes the worktree, takes the session's record, withdraws the approvals the
//! old agent waited on (a permission request cannot outlive its process: the agent asks
//! again if it still needs to), keeps the other open questions open for the new agent,
//! and starts it.

use base64::Engine as _;

use super::*;
use crate::protocol::MsgType;

/// How long the daemon taking a session waits for its agent to be ready before it
/// answers (the one moving it waits 60 s in all).
const STARTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Lifecycle {
    pub async fn adopt(self: &Arc<Self>, params: AdoptParams) -> Result<Adopted> {
        let session = self.ledger.get_session(&params.session_id)?;
        if session.owner.as_deref() != Some(params.from.as_str()) {
            return Err(LifecycleError::NotTheOwner {
                id: session.id,
                from: params.from,
            });
        }
        let bundle = base64::engine::general_purpose::STANDARD
            .decode(params.bundle.as_bytes())
            .map_err(LifecycleError::BadBundle)?;
        let worktree = self
            .take_branch(&session.id, &params.branch, &bundle)
            .await?;
        let me = self.ledger.instance().clone();
        let from_host = session
            .host
            .clone()
            .unwrap_or_else(|| "another machine".into());
        let mut taken = session.clone();
        taken.owner = Some(me.id.clone());
        taken.host = Some(me.host.clone());
        taken.worktree = Some(worktree.display().to_string());
        taken.worktree_owned = true;
        taken.agent_pid = None;
        taken.updated_at = Some(now_rfc3339());
        let taken = self.ledger.save_managed(&taken).await?;
        let (carried, withdrawn) = self.carry_questions(&taken.id, &from_host).await;
        if matches!(
            taken.state,
            Some(SessionState::Stopped | SessionState::Parked | SessionState::Error)
        ) {
            // Its agent was not running there: it starts here as it would have there (a
            // prompt unparks it, a restart starts it).
            return Ok(Adopted {
                session: taken,
                resumed: Resumed::NotRunning,
                carried: carried.len(),
                withdrawn,
            });
        }
        let reason = format!("moved here from {from_host}");
        let resume = runner::Resume {
            acp_session_id: taken.acp_session_id.clone(),
            previous: SessionState::Stopped,
            carried: carried.clone(),
        };
        let started = self
            .runner
            .start_resuming(&taken, &reason, resume, None)
            .await?;
        if let Err(why) = started {
            return Err(LifecycleError::NotStartedHere(Box::new(why)));
        }
        let session = self.started(&taken.id).await?;
        let resumed = match (&session.state, &taken.acp_session_id) {
            (Some(SessionState::Starting), _) => Resumed::Starting,
            (_, Some(id)) if session.acp_session_id.as_ref() == Some(id) => Resumed::Load,
            _ => Resumed::Fresh,
        };
        Ok(Adopted {
            session,
            resumed,
            carried: carried.len(),
            withdrawn,
        })
    }

    /// The session once its agent is past its start (ready, or failed), or as it is when
    /// that takes longer than [`STARTED_WITHIN`].
    async fn started(&self, id: &str) -> Result<Session> {
        let deadline = tokio::time::Instant::now() + STARTED_WITHIN;
        loop {
            let session = self.ledger.get_session(id)?;
            let starting = session.state == Some(SessionState::Starting);
            if !starting || tokio::time::Instant::now() >= deadline {
                return Ok(session);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The session's branch, fetched from the bundle into this kiln's clone, and a
    /// worktree made for it here.
    async fn take_branch(&self, id: &str, branch: &str, bundle: &[u8]) -> Result<PathBuf> {
        let kiln = self.ledger.kiln();
        let repo = git::toplevel(kiln.root())
            .await
            .ok_or(LifecycleError::NotARepository { kiln: "this kiln" })?;
        let path = kiln.worktrees_dir().join(branch);
        if path.exists() {
            return Err(LifecycleError::TakenHere { path });
        }
        let file = kiln.state_dir().join(format!("moved-{id}.bundle"));
        let io = |doing: &str, source| LifecycleError::Io {
            doing: format!("{doing} {}", file.display()),
            source,
        };
        std::fs::write(&file, bundle).map_err(|e| io("write the bundle", e))?;
        let _git = self.git.lock().await;
        let fetched = git::fetch_bundle(&repo, &file, branch).await;
        let _ = std::fs::remove_file(&file);
        fetched?;
        git::add_existing_branch(&repo, &path, branch).await?;
        Ok(path)
    }

    /// The open questions of the session: approvals are withdrawn (their agent is gone),
    /// the rest stay open for the new agent. What stays (id, title), and how many went.
    async fn carry_questions(&self, id: &str, from_host: &str) -> (Vec<(String, String)>, usize) {
        let mut carried = Vec::new();
        let mut withdrawn = 0;
        for message_id in self.ledger.open_blocking(id).await.unwrap_or_default() {
            let Ok(message) = self.ledger.get_message(&message_id).await else {
                continue;
            };
            if message.msg_type == MsgType::ApprovalRequired {
                let note = wording::withdrawn(&format!(
                    "the session moved from {from_host}; its agent asks again if it still needs to"
                ));
                match self.ledger.withdraw(&message_id, &note).await {
                    Ok(_) => withdrawn += 1,
                    Err(e) => {
                        tracing::warn!(message = %message_id, "cannot withdraw a moved approval: {e}")
                    }
                }
            } else {
                carried.push((message.id, message.title));
            }
        }
        (carried, withdrawn)
    }
}
