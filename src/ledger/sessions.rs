//! The sessions in the ledger: handles for their agents, registration and heartbeats of
//! sessions run by others, and the records of the sessions crucible runs.

use std::collections::HashMap;

use super::Ledger;
use super::error::{LedgerError, Result, no_session};
use super::registry::display_name;
use crate::protocol::{Event, Handle, RegisterParams, Session};
use crate::store::GitLeftovers;
use crate::text::now_rfc3339;

/// The status of a registered session that has ended.
const ENDED: &str = "ended";

impl Ledger {
    fn lock_handles(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new handle for a session's agent, stored (as a digest) before it is given out.
    pub async fn issue_handle(&self, session_id: &str) -> Result<Handle> {
        let handle = Handle::generate();
        let digest = handle.digest();
        self.store
            .sessions()
            .insert_handle(&digest, session_id)
            .await?;
        self.lock_handles().insert(digest, session_id.to_string());
        Ok(handle)
    }

    /// Revokes every handle of a session: connections using one lose all access.
    pub async fn revoke_handles(&self, session_id: &str) -> Result<()> {
        self.lock_handles().retain(|_, s| s != session_id);
        self.store.sessions().revoke_handles(session_id).await?;
        Ok(())
    }

    /// The session a live handle belongs to.
    pub fn session_for_handle(&self, handle: &Handle) -> Option<String> {
        self.lock_handles().get(&handle.digest()).cloned()
    }

    // ---- sessions ----

    /// Registers a session run by someone else, with a handle for its agent.
    /// Registers a session; live registered sessions of the same worktree and agent are
    /// evicted (ended, their handles revoked) and returned.
    pub async fn register(&self, params: RegisterParams) -> Result<(Session, Handle, Vec<String>)> {
        for (field, value) in [
            ("agent_type", &params.agent_type),
            ("agent_name", &params.agent_name),
        ] {
            if value.trim().is_empty() {
                return Err(LedgerError::Invalid(format!("{field} must not be empty")));
            }
        }
        let stale: Vec<String> = self
            .registry
            .list()
            .into_iter()
            .filter(|s| {
                !s.is_managed()
                    && s.status != ENDED
                    && s.worktree == params.worktree
                    && s.agent_name == params.agent_name
                    && s.agent_type == params.agent_type
            })
            .map(|s| s.id)
            .collect();
        let mut evicted = Vec::new();
        for id in stale {
            if self
                .deregister(
                    &id,
                    "evicted: the same worktree and agent registered again",
                    None,
                )
                .await
                .is_ok()
            {
                evicted.push(id);
            }
        }
        let now = now_rfc3339();
        let display = display_name(&self.kiln, params.worktree.as_deref(), &params.agent_name);
        let mut session = Session::started(
            self.next_id(),
            params.worktree,
            params.agent_type,
            params.agent_name,
            display,
            now,
        );
        self.stamp(&mut session);
        self.store.sessions().insert(&session).await?;
        self.registry.insert(session.clone());
        let handle = self.issue_handle(&session.id).await?;
        self.publish(Event::SessionRegistered(session.clone()));
        Ok((session, handle, evicted))
    }

    pub fn session_count(&self) -> usize {
        self.registry.len()
    }

    pub fn list_sessions(&self) -> Vec<Session> {
        self.registry.list()
    }

    pub fn get_session(&self, id: &str) -> Result<Session> {
        self.registry.get(id).ok_or_else(|| self.gone(id))
    }

    /// A live session, or the termination record of one that ended not long ago.
    pub fn session_or_record(&self, id: &str) -> Result<Session> {
        self.registry
            .get(id)
            .or_else(|| self.registry.ended(id))
            .ok_or_else(|| no_session(id))
    }

    /// Keeps a session alive. Touches memory only.
    pub fn heartbeat(&self, id: &str) -> Result<()> {
        if self.registry.beat(id) {
            Ok(())
        } else {
            Err(self.gone(id))
        }
    }

    /// Ends a registered session: its handles are revoked and a termination record
    /// (why, when, exit code) is kept for `daemon.ended_session_ttl_secs`.
    pub async fn deregister(&self, id: &str, reason: &str, exit_code: Option<i32>) -> Result<()> {
        let mut session = match self.registry.get(id) {
            None => return Err(self.gone(id)),
            Some(s) if s.is_managed() => {
                return Err(LedgerError::Invalid(format!(
                    "session {id} runs under crucible; stop or delete it instead"
                )));
            }
            Some(s) => s,
        };
        self.revoke_handles(id).await?;
        session.status = ENDED.into();
        session.state_reason = Some(reason.into());
        session.ended_at = Some(now_rfc3339());
        session.exit_code = exit_code;
        self.store.sessions().save(&session).await?;
        self.registry.end(session);
        self.publish(Event::SessionDeregistered {
            session_id: id.to_string(),
            reason: reason.into(),
        });
        Ok(())
    }

    /// Marks a new session as this daemon's, on this host.
    fn stamp(&self, session: &mut Session) {
        session.owner = Some(self.instance.id.clone());
        session.host = Some(self.instance.host.clone());
    }

    /// "No such session", saying when and why it ended if its record is still kept.
    fn gone(&self, id: &str) -> LedgerError {
        match self.registry.ended(id) {
            Some(record) => LedgerError::NotFound(format!(
                "session {id} ended at {} ({})",
                record.ended_at.as_deref().unwrap_or("an unknown time"),
                record
                    .state_reason
                    .as_deref()
                    .unwrap_or("no reason recorded")
            )),
            None => no_session(id),
        }
    }

    // ---- sessions crucible runs ----

    /// Stores a new session and announces it.
    pub async fn add_managed(&self, mut session: Session) -> Result<Session> {
        self.stamp(&mut session);
        self.store.sessions().insert(&session).await?;
        self.registry.insert(session.clone());
        let view = self.get_session(&session.id)?;
        self.publish(Event::SessionRegistered(view.clone()));
        Ok(view)
    }

    /// Writes a changed session through, then announces it.
    /// Stores a session crucible runs and announces it. When the store fails, the session
    /// is still shown as it is (an `error` the store could not record must not look like
    /// the state before it), and the failure is returned.
    pub async fn save_managed(&self, session: &Session) -> Result<Session> {
        let stored = self.store.sessions().save(session).await;
        if !self.registry.update(session.clone()) {
            self.registry.insert(session.clone());
        }
        let view = self.get_session(&session.id)?;
        self.publish(Event::SessionUpdated(view.clone()));
        stored?;
        Ok(view)
    }

    /// Deletes a session: gone for everyone in one small transaction that leaves a
    /// tombstone; its transcript and context history are then purged behind it in
    /// bounded batches (a purge cut short is finished at the next start), so deleting a
    /// long session answers as fast as a short one.
    /// `git` is what is still to go from git once the records are gone; see
    /// [`Ledger::git_removed`].
    pub async fn remove_managed(&self, id: &str, git: &GitLeftovers) -> Result<()> {
        self.revoke_handles(id).await?;
        self.store.records().delete_session(id, git).await?;
        self.forget_context(id).await;
        self.registry.remove(id);
        let _ = self.purges.send(id.to_string());
        self.publish(Event::SessionDeregistered {
            session_id: id.to_string(),
            reason: "deleted".into(),
        });
        Ok(())
    }

    /// A deleted session's worktree and branch are dealt with: its tombstone can go once
    /// its transcript is purged.
    pub async fn git_removed(&self, id: &str) -> Result<()> {
        self.store.records().git_removed(id).await?;
        let _ = self.purges.send(id.to_string());
        Ok(())
    }

    /// Deletions cut short before their worktree or branch went (a kill -9).
    pub async fn git_leftovers(&self) -> Result<Vec<(String, GitLeftovers)>> {
        Ok(self.store.records().git_leftovers().await?)
    }
}
